//! The runner's post-command checks run even when the call is dropped mid-run (red-team pass
//! 6, R6-7): a turn cancelled by Ctrl-C, or a subagent stopped by `agents.timeout_secs`,
//! drops the call's future with the command — and the planted-repository quarantine went with
//! it, so the user's next `git status` in the planted repository ran its `core.fsmonitor`.
//! As root and as uid 65534.

// Tests start programs of their own (git): allowed here, outside Keel's one spawn path.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

#[path = "shared/nobody.rs"]
mod nobody;

use std::path::Path;
use std::time::Duration;

use keel_tools::shell;

fn scenario(dir: &Path) {
    let git = std::process::Command::new("git").arg("--version").output();
    if !git.is_ok_and(|o| o.status.success()) {
        assert!(std::env::var_os("CI").is_none(), "CI needs git on PATH");
        println!("SKIPPED: git is not installed");
        return;
    }
    let ws = dir.join("ws");
    std::fs::create_dir(&ws).unwrap();
    let canary = dir.join("canary");
    let cmd = format!(
        "git init -q vendor/lib && git -C vendor/lib config core.fsmonitor 'echo PLANTED >> {}; false' && echo planted && sleep 60",
        canary.display()
    );
    let req = shell::exec::ExecRequest::new(vec!["sh".into(), "-c".into(), cmd.into()], &ws);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        // The turn is cancelled while the command runs: the call's future is dropped.
        let call = tokio::time::timeout(Duration::from_secs(4), shell::exec::run(req)).await;
        assert!(call.is_err(), "the command ended by itself: {call:?}");
    });
    assert!(
        ws.join("vendor/lib").is_dir(),
        "the command did not get to plant the repository"
    );
    assert!(
        !ws.join("vendor/lib/.git").exists(),
        "the planted repository was not quarantined"
    );
    let _ = std::process::Command::new("git")
        .arg("status")
        .current_dir(ws.join("vendor/lib"))
        .env("GIT_CEILING_DIRECTORIES", dir)
        .output();
    assert!(!canary.exists(), "the planted fsmonitor ran");
}

#[test]
fn a_repository_planted_by_a_cancelled_command_is_quarantined() {
    let dir = tempfile::tempdir().unwrap();
    scenario(dir.path());
}

#[test]
fn a_repository_planted_by_a_cancelled_command_is_quarantined_as_nobody() {
    let Some(dir) = nobody::child_dir() else {
        nobody::run_child(
            "a_repository_planted_by_a_cancelled_command_is_quarantined_as_nobody",
            false,
        );
        return;
    };
    scenario(&dir);
}
