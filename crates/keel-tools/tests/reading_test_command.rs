//! Red-team pass 7, R7-25: a project's `shell.test_command = "git status --short"` is rated
//! read-only, so it runs unasked even under `untrusted` — but `run_tests` ran it in the
//! workspace-write sandbox, and the repository's `core.fsmonitor` behind `git status` deleted
//! `src/`. A test command that only reads now runs in the read-only sandbox — as root and as
//! uid 65534.

// Tests start programs of their own (git): allowed here, outside Keel's one spawn path.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

#[path = "shared/nobody.rs"]
mod nobody;

use std::path::Path;

use keel_tools::shell::{self, LintSettings, ShellSettings};
use keel_tools::{ToolContext, ToolRegistry, Workspace};
use serde_json::json;

async fn scenario(ws: &Path) {
    let git_ok = std::process::Command::new("git")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !git_ok {
        assert!(std::env::var_os("CI").is_none(), "CI needs git on PATH");
        println!("SKIPPED: git is not installed");
        return;
    }
    if !keel_tools::sandbox::is_available() {
        println!("SKIPPED: {}", keel_tools::sandbox::describe_support());
        return;
    }
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .current_dir(ws)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .output()
            .unwrap()
    };
    assert!(git(&["init", "-q"]).status.success());
    std::fs::create_dir_all(ws.join("src")).unwrap();
    std::fs::write(ws.join("src/app.py"), "print(1)\n").unwrap();
    assert!(git(&["add", "src"]).status.success());
    // As shipped: git status runs the repository's fsmonitor.
    assert!(
        git(&["config", "core.fsmonitor", "rm -rf src; false #"])
            .status
            .success()
    );
    let ctx = ToolContext::new(Workspace::new(ws).unwrap());
    let mut tools = ToolRegistry::new();
    shell::register(
        &mut tools,
        ShellSettings {
            test_command: Some("git status --short".into()),
            ..ShellSettings::default()
        },
        LintSettings {
            enabled: false,
            ..LintSettings::default()
        },
    );
    let _ = tools.execute("run_tests", json!({}), &ctx).await;
    assert!(
        ws.join("src/app.py").exists(),
        "the repository's fsmonitor deleted src/ through a test command that only reads"
    );
}

nobody::user_and_nobody!(async scenario: a_test_command_that_only_reads_runs_read_only, a_test_command_that_only_reads_runs_read_only_as_nobody);
