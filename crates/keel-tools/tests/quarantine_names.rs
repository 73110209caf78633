//! The quarantine cannot be pre-empted (red-team pass 7, R7-21): a command that pre-creates
//! `<name>.quarantined-by-keel` and its 100 numbered forms, or leaves the parent directory
//! unwritable (`chmod 555`), kept its planted hooks directory and its planted repository —
//! the quarantine gave up silently. Now a random name is used past the numbered ones, the
//! parent's owner write bit is put back, and a rename that still fails is reported. As root
//! and as uid 65534.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

#[path = "shared/nobody.rs"]
mod nobody;

use std::path::Path;
use std::process::Command;

use keel_tools::shell;

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
}

fn run(ws: &Path, cmd: &str) -> String {
    let req = shell::exec::ExecRequest::new(vec!["sh".into(), "-c".into(), cmd.into()], ws);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let out = runtime.block_on(shell::exec::run(req)).unwrap();
    assert!(out.success(), "{cmd}: {}", out.combined_text());
    out.quarantined.unwrap_or_default()
}

fn scenario(dir: &Path) {
    if !Command::new("git")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        assert!(std::env::var_os("CI").is_none(), "CI needs git");
        println!("SKIPPED: git is not installed");
        return;
    }
    let ws = dir.join("ws");
    std::fs::create_dir(&ws).unwrap();
    git(&ws, &["init", "-q"]);
    git(&ws, &["config", "core.hooksPath", ".githooks"]);
    let canary = dir.join("canary");
    let report = run(
        &ws,
        &format!(
            "touch .githooks.quarantined-by-keel && for i in $(seq 1 120); do touch .githooks.quarantined-by-keel-$i; done && \
             mkdir -p .githooks && printf '#!/bin/sh\\ntouch {c}\\n' > .githooks/pre-commit && chmod +x .githooks/pre-commit && \
             mkdir sub && touch sub/.git-quarantined-by-keel && for i in $(seq 1 120); do touch sub/.git-quarantined-by-keel-$i; done && \
             git init -q sub && git -C sub config core.fsmonitor 'touch {c}; false' && chmod 555 sub",
            c = canary.display()
        ),
    );
    assert!(
        !ws.join(".githooks").exists(),
        "the hooks directory stayed: {report}"
    );
    assert!(
        !ws.join("sub/.git").exists(),
        "the planted repository stayed: {report}"
    );
    assert!(
        report.contains(".githooks") && report.contains("sub"),
        "{report}"
    );
    assert!(!report.contains("COULD NOT"), "{report}");
    // The user's own git: nothing runs.
    std::fs::write(ws.join("a.txt"), "x\n").unwrap();
    let _ = Command::new("git")
        .args(["add", "a.txt"])
        .current_dir(&ws)
        .output();
    let _ = Command::new("git")
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-qm",
            "t",
        ])
        .current_dir(&ws)
        .output();
    let _ = Command::new("git")
        .arg("status")
        .current_dir(ws.join("sub"))
        .env("GIT_CEILING_DIRECTORIES", dir)
        .output();
    assert!(!canary.exists(), "a planted program ran");
}

#[test]
fn the_quarantine_cannot_be_pre_empted() {
    let dir = tempfile::tempdir().unwrap();
    scenario(dir.path());
}

#[test]
fn the_quarantine_cannot_be_pre_empted_as_nobody() {
    let Some(dir) = nobody::child_dir() else {
        nobody::run_child("the_quarantine_cannot_be_pre_empted_as_nobody", false);
        return;
    };
    scenario(&dir);
}
