//! The sandbox helper: how a normal user (no `CAP_SYS_ADMIN`) still gets the mount-namespace
//! protections (read-only `.git`/`.keel`/constitution paths, Keel's data and config hidden).
//!
//! Creating a user namespace needs a single-threaded process, which Keel (a multi-threaded
//! program) is not. So the command is started through a small helper process instead:
//! `<helper> __keel-sandbox-exec -- <program> <args…>`, where `<helper>` is
//! `$KEEL_SANDBOX_HELPER` if set, else the `keel-sandbox-exec` binary next to the running
//! program (small, so it starts faster), else `/proc/self/exe` when the running program
//! handles [`HELPER_ARG`] itself (the `keel` binary, see [`use_current_exe_as_helper`]). The helper enters a new user and
//! mount namespace mapping only the caller's uid and gid, applies the mounts, drops
//! capabilities, applies Landlock and seccomp and `exec`s the command — same pid, same process
//! group. The policy travels in the [`POLICY_ENV`] environment variable, which the helper
//! removes before `exec`: the command never sees it (and it holds paths only, no secrets).

use std::ffi::OsString;
use std::io;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};

/// The first argument that makes a program act as the helper.
pub const HELPER_ARG: &str = "__keel-sandbox-exec";
/// Overrides the helper program (a binary that handles [`HELPER_ARG`]).
pub const HELPER_ENV: &str = "KEEL_SANDBOX_HELPER";
/// The environment variable carrying the policy from Keel to the helper.
pub const POLICY_ENV: &str = "KEEL_SANDBOX_POLICY";
/// The name of the dedicated helper binary (built from keel-tools).
pub const HELPER_BIN: &str = "keel-sandbox-exec";

static SELF_HELPER: AtomicBool = AtomicBool::new(false);

/// Declares that the running program dispatches [`HELPER_ARG`] to [`helper_main`] first thing
/// in `main` (the `keel` binary does), so `/proc/self/exe` serves as the helper.
pub fn use_current_exe_as_helper() {
    SELF_HELPER.store(true, Ordering::SeqCst);
}

/// The helper program to use, or why there is none.
pub(super) fn helper_program() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os(HELPER_ENV).filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(p));
    }
    let exe = std::env::current_exe().map_err(|e| format!("cannot locate the program: {e}"));
    let mut dir = exe
        .as_ref()
        .ok()
        .and_then(|e| e.parent())
        .map(Path::to_path_buf);
    while let Some(d) = dir {
        let candidate = d.join(HELPER_BIN);
        if candidate.is_file() {
            return Ok(candidate);
        }
        // Test and bench binaries live in `target/<profile>/deps`, the helper one level up.
        dir = (d.file_name().is_some_and(|n| n == "deps"))
            .then(|| d.parent().map(Path::to_path_buf))
            .flatten();
    }
    if SELF_HELPER.load(Ordering::SeqCst) {
        return Ok(PathBuf::from("/proc/self/exe"));
    }
    let exe = exe?;
    Err(format!(
        "no sandbox helper: `{HELPER_BIN}` is not next to {} (set {HELPER_ENV})",
        exe.display()
    ))
}

/// Everything the helper applies before `exec`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct HelperPolicy {
    pub protected: Vec<PathBuf>,
    pub hidden: Vec<PathBuf>,
    pub hidden_files: Vec<PathBuf>,
    pub writable: Vec<PathBuf>,
    pub network: bool,
    pub landlock: bool,
    pub seccomp: bool,
    pub metadata: bool,
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
        ] {
            out.push_str(&format!("{key} {}\n", u8::from(on)));
        }
        for (key, paths) in [
            ("protected", &self.protected),
            ("hidden", &self.hidden),
            ("hidden_file", &self.hidden_files),
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
                "protected" => p.protected.push(path()?),
                "hidden" => p.hidden.push(path()?),
                "hidden_file" => p.hidden_files.push(path()?),
                "writable" => p.writable.push(path()?),
                _ => return Err(bad()),
            }
        }
        Ok(p)
    }
}

/// Runs the helper's probe: `<helper> __keel-sandbox-exec --probe <dir>` makes `<dir>`
/// read-only in a user namespace and checks that a write fails. `Ok(helper)` when it works.
pub(super) fn probe() -> Result<PathBuf, String> {
    let helper = helper_program()?;
    let dir = tempfile::Builder::new()
        .prefix("keel-userns-probe-")
        .tempdir()
        .map_err(|e| format!("cannot create a probe directory: {e}"))?;
    // The sandbox helper's own probe: Keel's helper binary, no repository content involved.
    #[allow(clippy::disallowed_methods)]
    let mut probe = std::process::Command::new(&helper);
    let out = probe
        .arg(HELPER_ARG)
        .arg("--probe")
        .arg(dir.path())
        .env_clear()
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("cannot run the sandbox helper {}: {e}", helper.display()))?;
    if out.status.success() {
        Ok(helper)
    } else {
        let err = String::from_utf8_lossy(&out.stderr);
        Err(format!(
            "user namespaces unavailable: {}",
            err.trim().trim_start_matches("keel-sandbox-exec: ")
        ))
    }
}

/// The helper's `main`: call it first thing when `argv[1]` is [`HELPER_ARG`] (a dedicated
/// helper binary may call it unconditionally). Returns only on failure; on success the process
/// has become the command.
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
            Some(dir) => match probe_in_child(Path::new(dir)) {
                Ok(()) => ExitCode::SUCCESS,
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
            let err = confine_and_exec(&policy, &args[1], &args[2..]);
            let code = if err.kind() == io::ErrorKind::NotFound {
                127
            } else {
                126
            };
            fail(code, err.to_string())
        }
        _ => fail(
            2,
            "usage: keel-sandbox-exec -- PROGRAM [ARGS…] (started by Keel, with the policy in \
             its environment)"
                .into(),
        ),
    }
}

fn probe_in_child(dir: &Path) -> io::Result<()> {
    super::mounts::protect_in_user_namespace(&[dir.to_path_buf()], &[], &[])?;
    match std::fs::write(dir.join("probe"), "x") {
        Err(e) if e.raw_os_error() == Some(libc_erofs()) => Ok(()),
        Err(e) => Err(io::Error::other(format!(
            "unexpected error writing the read-only probe: {e}"
        ))),
        Ok(()) => Err(io::Error::other(
            "the read-only bind mount did not stop a write",
        )),
    }
}

fn libc_erofs() -> i32 {
    rustix::io::Errno::ROFS.raw_os_error()
}

/// Applies `policy` to this (single-threaded) process and `exec`s the command; returns only
/// the error that stopped it.
fn confine_and_exec(policy: &HelperPolicy, program: &OsString, args: &[OsString]) -> io::Error {
    use std::os::unix::process::CommandExt;
    let confine = || -> io::Result<()> {
        super::mounts::protect_in_user_namespace(
            &policy.protected,
            &policy.hidden,
            &policy.hidden_files,
        )?;
        super::privileges::drop_capabilities()?;
        if policy.landlock {
            super::rules::restrict_current_thread(&policy.writable, policy.network)?;
        }
        if policy.seccomp {
            super::seccomp::apply(super::seccomp::Filter {
                network: policy.network,
                metadata: policy.metadata,
            })?;
        }
        Ok(())
    };
    if let Err(e) = confine() {
        return io::Error::other(format!("cannot confine the command: {e}"));
    }
    // The helper becomes the command the runner asked for, confined just above.
    #[allow(clippy::disallowed_methods)]
    let mut command = std::process::Command::new(program);
    let err = command.args(args).env_remove(POLICY_ENV).exec();
    io::Error::new(
        err.kind(),
        format!("cannot run `{}`: {err}", program.to_string_lossy()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy_round_trips_any_path_bytes() {
        let p = HelperPolicy {
            protected: vec![PathBuf::from("/w/.git"), PathBuf::from("/w/a b\nc")],
            hidden: vec![PathBuf::from(OsString::from_vec(vec![b'/', 0xff, b'x']))],
            hidden_files: vec![PathBuf::from("/c.toml")],
            writable: vec![PathBuf::from("/w")],
            network: false,
            landlock: true,
            seccomp: true,
            metadata: true,
        };
        assert_eq!(HelperPolicy::decode(&p.encode()), Ok(p));
        assert!(HelperPolicy::decode("network 2").is_err());
        assert!(HelperPolicy::decode("hidden zz").is_err());
        assert!(HelperPolicy::decode("bogus 1").is_err());
    }
}
