//! The sandbox helper: how every confined command gets its namespaces (a private mount
//! namespace with read-only protected paths, hidden secrets, a minimal `/dev` and a fresh
//! `/proc`; its own PID and IPC namespaces).
//!
//! Creating a user namespace, and running code as the first process of a new PID namespace,
//! need a single-threaded process, which Keel (a multi-threaded program) is not. So the
//! command is started through a small helper process instead:
//! `<helper> __keel-sandbox-exec -- <program> <args…>`, where `<helper>` is
//! `$KEEL_SANDBOX_HELPER` if set, else the `keel-sandbox-exec` binary next to the running
//! program (small, so it starts faster), else `/proc/self/exe` when the running program
//! handles [`HELPER_ARG`] itself (the `keel` binary, see [`use_current_exe_as_helper`]). As a
//! normal user the helper first enters a new user namespace mapping only the caller's uid and
//! gid; as root it needs none. What it does then is in [`super::init`]. The policy travels in
//! the [`POLICY_ENV`] environment variable, which the command never sees (and which holds
//! paths only, no secrets).
//!
//! `--probe DIR` tries all of it once and prints `keel-sandbox-helper <version>: <features>`:
//! Keel uses a helper only when the version is its own (a stale helper from another build
//! would misread the policy).

use std::ffi::OsString;
use std::io;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};

use super::mounts::{Built, View};

/// The first argument that makes a program act as the helper.
pub const HELPER_ARG: &str = "__keel-sandbox-exec";
/// Overrides the helper program (a binary that handles [`HELPER_ARG`]).
pub const HELPER_ENV: &str = "KEEL_SANDBOX_HELPER";
/// The environment variable carrying the policy from Keel to the helper.
pub const POLICY_ENV: &str = "KEEL_SANDBOX_POLICY";
/// The name of the dedicated helper binary (built from keel-tools).
pub const HELPER_BIN: &str = "keel-sandbox-exec";
/// The policy format's version: a helper that prints another one in its probe is not used.
const PROTOCOL: &str = "keel-sandbox-helper 3";

static SELF_HELPER: AtomicBool = AtomicBool::new(false);

/// Declares that the running program dispatches [`HELPER_ARG`] to [`helper_main`] first thing
/// in `main` (the `keel` binary does), so `/proc/self/exe` serves as the helper.
pub fn use_current_exe_as_helper() {
    SELF_HELPER.store(true, Ordering::SeqCst);
}

/// The helper programs to try, best first, or why there is none: `$KEEL_SANDBOX_HELPER` alone
/// when set; else the `keel-sandbox-exec` next to the running program (or one level up from
/// `deps/`, for test and bench binaries), then `/proc/self/exe` when the running program
/// handles [`HELPER_ARG`] itself.
pub(super) fn helper_programs() -> Result<Vec<PathBuf>, String> {
    if let Some(p) = std::env::var_os(HELPER_ENV).filter(|p| !p.is_empty()) {
        return Ok(vec![PathBuf::from(p)]);
    }
    let exe = std::env::current_exe().map_err(|e| format!("cannot locate the program: {e}"));
    let mut out = Vec::new();
    let mut dir = exe
        .as_ref()
        .ok()
        .and_then(|e| e.parent())
        .map(Path::to_path_buf);
    while let Some(d) = dir {
        let candidate = d.join(HELPER_BIN);
        if candidate.is_file() {
            out.push(candidate);
            break;
        }
        // Test and bench binaries live in `target/<profile>/deps`, the helper one level up.
        dir = (d.file_name().is_some_and(|n| n == "deps"))
            .then(|| d.parent().map(Path::to_path_buf))
            .flatten();
    }
    if SELF_HELPER.load(Ordering::SeqCst) {
        out.push(PathBuf::from("/proc/self/exe"));
    }
    if out.is_empty() {
        let exe = exe?;
        return Err(format!(
            "no sandbox helper: `{HELPER_BIN}` is not next to {} (set {HELPER_ENV})",
            exe.display()
        ));
    }
    Ok(out)
}

/// Everything the helper applies before `exec`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct HelperPolicy {
    pub view: View,
    pub writable: Vec<PathBuf>,
    pub network: bool,
    pub landlock: bool,
    pub seccomp: bool,
    pub metadata: bool,
    /// Enter a user namespace first (Keel is not root).
    pub user_namespace: bool,
    /// Keel's pid: the helper kills the command if Keel dies.
    pub parent: Option<u32>,
    /// Processes and memory the command may take.
    pub limits: super::Limits,
}

impl Default for HelperPolicy {
    fn default() -> Self {
        Self {
            view: View::default(),
            writable: Vec::new(),
            network: false,
            landlock: false,
            seccomp: false,
            metadata: false,
            user_namespace: false,
            parent: None,
            // Decoded policies carry their limits; an absent line means none.
            limits: super::Limits::NONE,
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| s.get(i..i + 2).and_then(|h| u8::from_str_radix(h, 16).ok()))
        .collect()
}

impl HelperPolicy {
    /// One `key value` per line; paths hex-encoded (any bytes survive).
    pub fn encode(&self) -> String {
        let mut out = String::new();
        for (key, on) in [
            ("network", self.network),
            ("landlock", self.landlock),
            ("seccomp", self.seccomp),
            ("metadata", self.metadata),
            ("user_namespace", self.user_namespace),
            ("proc", self.view.proc_fs),
            ("dev", self.view.dev),
            ("nodev", self.view.nodev),
        ] {
            out.push_str(&format!("{key} {}\n", u8::from(on)));
        }
        if let Some(pid) = self.parent {
            out.push_str(&format!("parent {pid}\n"));
        }
        out.push_str(&format!("max_processes {}\n", self.limits.processes));
        out.push_str(&format!("max_memory_mb {}\n", self.limits.memory_mb));
        for (key, paths) in [
            ("protected", &self.view.protected),
            ("anchor", &self.view.anchors),
            ("hidden", &self.view.hidden),
            ("hidden_file", &self.view.hidden_files),
            ("carve", &self.view.carve),
            ("writable", &self.writable),
        ] {
            for p in paths {
                out.push_str(&format!("{key} {}\n", hex(p.as_os_str().as_bytes())));
            }
        }
        out
    }

    pub fn decode(text: &str) -> Result<Self, String> {
        let mut p = HelperPolicy::default();
        for line in text.lines().filter(|l| !l.is_empty()) {
            let bad = || format!("malformed sandbox policy line `{line}`");
            let (key, value) = line.split_once(' ').ok_or_else(bad)?;
            let flag = || match value {
                "0" => Ok(false),
                "1" => Ok(true),
                _ => Err(bad()),
            };
            let path = || {
                unhex(value)
                    .map(|b| PathBuf::from(OsString::from_vec(b)))
                    .ok_or_else(bad)
            };
            match key {
                "network" => p.network = flag()?,
                "landlock" => p.landlock = flag()?,
                "seccomp" => p.seccomp = flag()?,
                "metadata" => p.metadata = flag()?,
                "user_namespace" => p.user_namespace = flag()?,
                "proc" => p.view.proc_fs = flag()?,
                "dev" => p.view.dev = flag()?,
                "nodev" => p.view.nodev = flag()?,
                "parent" => p.parent = Some(value.parse().map_err(|_| bad())?),
                "max_processes" => p.limits.processes = value.parse().map_err(|_| bad())?,
                "max_memory_mb" => p.limits.memory_mb = value.parse().map_err(|_| bad())?,
                "protected" => p.view.protected.push(path()?),
                "anchor" => p.view.anchors.push(path()?),
                "hidden" => p.view.hidden.push(path()?),
                "hidden_file" => p.view.hidden_files.push(path()?),
                "carve" => p.view.carve.push(path()?),
                "writable" => p.writable.push(path()?),
                _ => return Err(bad()),
            }
        }
        // The view keeps the writable trees writable when it makes the rest read-only.
        p.view.writable = p.writable.clone();
        Ok(p)
    }
}

/// What a working helper offers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct HelperSupport {
    pub program: PathBuf,
    pub built: Built,
}

/// Runs the helper's probe with each of [`helper_programs`] until one works:
/// `<helper> __keel-sandbox-exec --probe <dir>` builds a command's namespaces with `<dir>`
/// read-only, checks that a write fails, and prints its version and what it built.
pub(super) fn probe() -> Result<HelperSupport, String> {
    let mut errors = Vec::new();
    for helper in helper_programs()? {
        match probe_one(&helper) {
            Ok(s) => return Ok(s),
            Err(e) => errors.push(e),
        }
    }
    Err(errors.join("; "))
}

fn probe_one(helper: &Path) -> Result<HelperSupport, String> {
    let dir = tempfile::Builder::new()
        .prefix("keel-userns-probe-")
        .tempdir()
        .map_err(|e| format!("cannot create a probe directory: {e}"))?;
    // The sandbox helper's own probe: Keel's helper binary, no repository content involved.
    #[allow(clippy::disallowed_methods)]
    let mut probe = std::process::Command::new(helper);
    let out = probe
        .arg(HELPER_ARG)
        .arg("--probe")
        .arg(dir.path())
        .env_clear()
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("cannot run the sandbox helper {}: {e}", helper.display()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(format!(
            "user namespaces unavailable: {}",
            err.trim().trim_start_matches("keel-sandbox-exec: ")
        ));
    }
    let Some(features) = text
        .trim()
        .strip_prefix(PROTOCOL)
        .and_then(|r| r.strip_prefix(':'))
    else {
        return Err(format!(
            "the sandbox helper {} is from another Keel build (its probe said `{}`, expected \
             `{PROTOCOL}`); rebuild it or set {HELPER_ENV}",
            helper.display(),
            text.trim()
        ));
    };
    let has = |f: &str| features.split_whitespace().any(|w| w == f);
    Ok(HelperSupport {
        program: helper.to_path_buf(),
        built: Built {
            proc_fs: has("proc"),
            dev: has("dev"),
            nodev: has("nodev"),
        },
    })
}

/// The helper's `main`: call it first thing when `argv[1]` is [`HELPER_ARG`] (a dedicated
/// helper binary may call it unconditionally). Returns the command's exit code (or ends the
/// process by the command's signal).
pub fn helper_main() -> ExitCode {
    let mut args: Vec<OsString> = std::env::args_os().skip(1).collect();
    if args.first().is_some_and(|a| a == HELPER_ARG) {
        args.remove(0);
    }
    let fail = |code: u8, msg: String| {
        eprintln!("keel-sandbox-exec: {msg}");
        ExitCode::from(code)
    };
    match args.first().and_then(|a| a.to_str()) {
        Some("--probe") => match args.get(1) {
            Some(dir) => match super::init::probe(Path::new(dir)) {
                Ok(report) => {
                    println!("{PROTOCOL}: {report}");
                    ExitCode::SUCCESS
                }
                Err(e) => fail(1, e.to_string()),
            },
            None => fail(2, "usage: keel-sandbox-exec --probe DIR".into()),
        },
        Some("--") if args.len() > 1 => {
            let Some(text) = std::env::var_os(POLICY_ENV) else {
                return fail(
                    126,
                    format!("{POLICY_ENV} is not set: this helper is started by Keel only"),
                );
            };
            let policy = match HelperPolicy::decode(&text.to_string_lossy()) {
                Ok(p) => p,
                Err(e) => return fail(126, e),
            };
            super::init::run(&policy, &args[1], &args[2..])
        }
        _ => fail(
            2,
            "usage: keel-sandbox-exec -- PROGRAM [ARGS…] (started by Keel, with the policy in \
             its environment)"
                .into(),
        ),
    }
}

/// `EROFS`: what a write to a read-only mount fails with.
pub(super) fn is_read_only_error(e: &io::Error) -> bool {
    e.raw_os_error() == Some(rustix::io::Errno::ROFS.raw_os_error())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy_round_trips_any_path_bytes() {
        let p = HelperPolicy {
            view: View {
                protected: vec![PathBuf::from("/w/.git"), PathBuf::from("/w/a b\nc")],
                anchors: vec![PathBuf::from("/w/a")],
                hidden: vec![PathBuf::from(OsString::from_vec(vec![b'/', 0xff, b'x']))],
                hidden_files: vec![PathBuf::from("/c.toml")],
                carve: vec![PathBuf::from("/data/checkouts/a")],
                proc_fs: true,
                dev: true,
                nodev: false,
                writable: vec![PathBuf::from("/w")],
            },
            writable: vec![PathBuf::from("/w")],
            network: false,
            landlock: true,
            seccomp: true,
            metadata: true,
            user_namespace: true,
            parent: Some(42),
            limits: super::super::Limits {
                processes: 500,
                memory_mb: 2048,
            },
        };
        assert_eq!(HelperPolicy::decode(&p.encode()), Ok(p));
        assert!(HelperPolicy::decode("network 2").is_err());
        assert!(HelperPolicy::decode("hidden zz").is_err());
        assert!(HelperPolicy::decode("bogus 1").is_err());
        assert!(HelperPolicy::decode("parent x").is_err());
        assert!(HelperPolicy::decode("max_processes -1").is_err());
    }
}
