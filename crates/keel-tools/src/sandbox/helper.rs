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
/// `deps/`, for test and bench binaries) when it may be trusted ([`distrusted_helper`]), then
/// `/proc/self/exe` when the running program handles [`HELPER_ARG`] itself.
pub(super) fn helper_programs() -> Result<Vec<PathBuf>, String> {
    if let Some(p) = std::env::var_os(HELPER_ENV).filter(|p| !p.is_empty()) {
        return Ok(vec![PathBuf::from(p)]);
    }
    let exe = std::env::current_exe().map_err(|e| format!("cannot locate the program: {e}"));
    candidates(exe.as_deref().ok(), SELF_HELPER.load(Ordering::SeqCst)).map_err(|why| match &exe {
        Ok(exe) => format!("no sandbox helper for {}: {why}", exe.display()),
        Err(e) => format!("{e}: {why}"),
    })
}

/// [`helper_programs`] for the program at `exe`; `self_helper`: it handles [`HELPER_ARG`].
fn candidates(exe: Option<&Path>, self_helper: bool) -> Result<Vec<PathBuf>, String> {
    let mut out = Vec::new();
    let mut why = format!("`{HELPER_BIN}` is not next to it (set {HELPER_ENV})");
    let mut dir = exe.and_then(|e| e.parent()).map(Path::to_path_buf);
    while let Some(d) = dir {
        let candidate = d.join(HELPER_BIN);
        if candidate.is_file() {
            match distrusted_helper(&candidate) {
                None => out.push(candidate),
                Some(reason) => {
                    why = format!(
                        "the `{HELPER_BIN}` at {} is not used: {reason} (set {HELPER_ENV} to a \
                         helper outside it)",
                        candidate.display()
                    )
                }
            }
            break;
        }
        // Test and bench binaries live in `target/<profile>/deps`, the helper one level up.
        dir = (d.file_name().is_some_and(|n| n == "deps"))
            .then(|| d.parent().map(Path::to_path_buf))
            .flatten();
    }
    if self_helper {
        out.push(PathBuf::from("/proc/self/exe"));
    }
    if out.is_empty() {
        return Err(why);
    }
    Ok(out)
}

/// Why a helper found next to the program must not be run, if so. It runs unconfined (it
/// builds the sandbox, even its probe), so it must lie where no session's command could have
/// planted it: not in a workspace or beneath any `.keel` (an earlier session's workspace — a
/// Keel checkout worked on with Keel keeps `target/debug` there), not in a tree commands may
/// write, and neither it nor its directory writable by another user (red-team pass 4, R4-15).
/// The running program itself (`/proc/self/exe`) needs no such check.
fn distrusted_helper(path: &Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    if crate::shell::lookup::is_untrusted(path, &[]) {
        return Some(
            "it lies where Keel's commands may write (a workspace, beneath a `.keel`, or a \
             writable tree)"
                .into(),
        );
    }
    let real = match std::fs::canonicalize(path) {
        Ok(r) => r,
        Err(e) => return Some(format!("cannot resolve it: {e}")),
    };
    if real != path && crate::shell::lookup::is_untrusted(&real, &[]) {
        return Some(format!(
            "it links to {}, where Keel's commands may write",
            real.display()
        ));
    }
    let me = rustix::process::geteuid().as_raw();
    for p in [Some(real.as_path()), real.parent()].into_iter().flatten() {
        let meta = match std::fs::metadata(p) {
            Ok(m) => m,
            Err(e) => return Some(format!("cannot inspect {}: {e}", p.display())),
        };
        if meta.uid() != 0 && meta.uid() != me {
            return Some(format!(
                "{} belongs to another user (uid {})",
                p.display(),
                meta.uid()
            ));
        }
        // A sticky directory (`/tmp`) lets no one else replace a file they do not own.
        if meta.mode() & 0o022 != 0 && !(meta.is_dir() && meta.mode() & 0o1000 != 0) {
            return Some(format!("{} is writable by other users", p.display()));
        }
    }
    None
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
    /// The command's whole environment, set at its `exec`. The helper itself starts with none
    /// of it: it runs unconfined until the sandbox is built, and a variable the repository
    /// chose (an MCP server's `LD_PRELOAD`) would run code in it (red-team pass 4, R4-16).
    /// `None`: the command keeps the helper's environment (the probe).
    pub env: Option<Vec<(OsString, OsString)>>,
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
            env: None,
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
        if let Some(env) = &self.env {
            out.push_str("own_env 1\n");
            for (k, v) in env {
                let mut kv = k.as_bytes().to_vec();
                kv.push(b'=');
                kv.extend_from_slice(v.as_bytes());
                out.push_str(&format!("env {}\n", hex(&kv)));
            }
        }
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
        for (file, shown) in &self.view.replaced_files {
            out.push_str(&format!(
                "replaced_file {}:{}\n",
                hex(file.as_os_str().as_bytes()),
                hex(shown.as_os_str().as_bytes())
            ));
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
                "replaced_file" => {
                    let (a, b) = value.split_once(':').ok_or_else(bad)?;
                    let one = |h: &str| {
                        unhex(h)
                            .map(|b| PathBuf::from(OsString::from_vec(b)))
                            .ok_or_else(bad)
                    };
                    p.view.replaced_files.push((one(a)?, one(b)?));
                }
                "carve" => p.view.carve.push(path()?),
                "writable" => p.writable.push(path()?),
                "own_env" => {
                    if flag()? {
                        p.env.get_or_insert_with(Vec::new);
                    }
                }
                "env" => {
                    let kv = unhex(value).ok_or_else(bad)?;
                    let eq = kv.iter().position(|b| *b == b'=').ok_or_else(bad)?;
                    let (k, v) = kv.split_at(eq);
                    p.env.get_or_insert_with(Vec::new).push((
                        OsString::from_vec(k.to_vec()),
                        OsString::from_vec(v[1..].to_vec()),
                    ));
                }
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

/// The argument (after [`HELPER_ARG`]) that makes the helper Keel's pending-checks watchdog
/// ([`crate::shell::pending`]).
pub(crate) const WATCH_ARG: &str = "--watch-pending";

/// Starts Keel's pending-checks watchdog: `<helper> __keel-sandbox-exec --watch-pending
/// <args…>` with `stdin` as its standard input (the read end of a pipe only Keel writes to),
/// in a process group of its own, with an empty environment. Not waited for: it outlives Keel
/// by design.
pub(crate) fn spawn_watchdog(args: &[OsString], stdin: std::io::PipeReader) -> io::Result<()> {
    let programs = helper_programs().map_err(io::Error::other)?;
    let program = programs
        .first()
        .ok_or_else(|| io::Error::other("no sandbox helper"))?;
    use std::os::unix::process::CommandExt;
    // Keel's own helper binary, which runs no repository content: it waits for Keel to end
    // and then runs Keel's own checks.
    #[allow(clippy::disallowed_methods)]
    let mut cmd = std::process::Command::new(program);
    cmd.arg(HELPER_ARG)
        .arg(WATCH_ARG)
        .args(args)
        .env_clear()
        .current_dir("/")
        .stdin(std::process::Stdio::from(stdin))
        .stdout(std::process::Stdio::null())
        .process_group(0);
    cmd.spawn().map(drop)
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
        Some(WATCH_ARG) => crate::shell::pending::watchdog_main(&args[1..]),
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
    use std::os::unix::fs::PermissionsExt;

    /// A fake `keel` and a `keel-sandbox-exec` next to it in `dir`.
    fn fake_install(dir: &Path) -> PathBuf {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let helper = dir.join(HELPER_BIN);
        std::fs::write(&helper, "#!/bin/sh\necho planted\n").unwrap();
        std::fs::set_permissions(&helper, std::fs::Permissions::from_mode(0o755)).unwrap();
        dir.join("keel")
    }

    #[test]
    fn a_helper_next_to_the_program_is_used_only_where_no_session_could_plant_it() {
        let base = tempfile::tempdir().unwrap();
        std::fs::set_permissions(base.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        // An installation outside every project: its helper comes first.
        let exe = fake_install(&base.path().join("opt/bin"));
        let found = candidates(Some(&exe), true).unwrap();
        assert_eq!(
            found,
            vec![
                base.path().join("opt/bin").join(HELPER_BIN),
                "/proc/self/exe".into()
            ]
        );
        // A Keel checkout worked on with Keel (R4-15): `.keel` at its root, the binary in
        // `target/debug`, where an earlier session's command planted `keel-sandbox-exec`.
        let proj = base.path().join("proj");
        std::fs::create_dir_all(proj.join(".keel")).unwrap();
        let exe = fake_install(&proj.join("target/debug"));
        assert_eq!(
            candidates(Some(&exe), true).unwrap(),
            vec![PathBuf::from("/proc/self/exe")]
        );
        let err = candidates(Some(&exe), false).unwrap_err();
        assert!(err.contains("not used") && err.contains(".keel"), "{err}");
        // A helper another user could have replaced.
        let shared = base.path().join("shared/bin");
        let exe = fake_install(&shared);
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert_eq!(
            candidates(Some(&exe), true).unwrap(),
            vec![PathBuf::from("/proc/self/exe")]
        );
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::set_permissions(
            shared.join(HELPER_BIN),
            std::fs::Permissions::from_mode(0o757),
        )
        .unwrap();
        let err = candidates(Some(&exe), false).unwrap_err();
        assert!(err.contains("writable by other users"), "{err}");
    }

    #[test]
    fn the_policy_round_trips_any_path_bytes() {
        let p = HelperPolicy {
            view: View {
                protected: vec![PathBuf::from("/w/.git"), PathBuf::from("/w/a b\nc")],
                anchors: vec![PathBuf::from("/w/a")],
                hidden: vec![PathBuf::from(OsString::from_vec(vec![b'/', 0xff, b'x']))],
                hidden_files: vec![PathBuf::from("/c.toml")],
                replaced_files: vec![(PathBuf::from("/g"), PathBuf::from("/t/g"))],
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
            env: Some(vec![
                (OsString::from("PATH"), OsString::from("/usr/bin:/bin")),
                (OsString::from("EMPTY"), OsString::new()),
                (OsString::from("X"), OsString::from("a=b\nc")),
            ]),
        };
        assert_eq!(HelperPolicy::decode(&p.encode()), Ok(p.clone()));
        let no_env = HelperPolicy {
            env: Some(Vec::new()),
            ..p.clone()
        };
        assert_eq!(HelperPolicy::decode(&no_env.encode()), Ok(no_env));
        let kept = HelperPolicy { env: None, ..p };
        assert_eq!(HelperPolicy::decode(&kept.encode()), Ok(kept));
        assert!(
            HelperPolicy::decode("env 414243").is_err(),
            "an entry without `=`"
        );
        assert!(HelperPolicy::decode("network 2").is_err());
        assert!(HelperPolicy::decode("hidden zz").is_err());
        assert!(HelperPolicy::decode("bogus 1").is_err());
        assert!(HelperPolicy::decode("parent x").is_err());
        assert!(HelperPolicy::decode("max_processes -1").is_err());
    }
}
