//! A home directory as a workspace, for the tests that need one: the test re-runs itself with
//! `HOME` there (the stores and the home's configuration are found through this process's
//! environment), and runs commands through the one runner.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use keel_tools::shell::{self, LintSettings, ShellSettings};
use keel_tools::{ToolContext, ToolRegistry, Workspace};
use serde_json::json;

/// Set in the child: the home it works in (the test re-runs itself with `HOME` there, since
/// the stores are found through this process's environment).
const CHILD: &str = "KEEL_STORE_LINKS_TEST_HOME";

/// In the parent: makes a home with `layout`, re-runs `test` with `HOME` there and checks it
/// passed. In the child: the home.
pub fn home_for(test: &str, layout: fn(&Path)) -> Option<PathBuf> {
    home_with_path(test, layout, &[])
}

/// [`home_for`], with `on_path` (relative to the home) at the front of the child's `PATH`.
pub fn home_with_path(test: &str, layout: fn(&Path), on_path: &[&str]) -> Option<PathBuf> {
    if let Some(home) = std::env::var_os(CHILD) {
        return Some(PathBuf::from(home));
    }
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().canonicalize().unwrap().join("home");
    std::fs::create_dir_all(&home).unwrap();
    layout(&home);
    let mut path: Vec<PathBuf> = on_path.iter().map(|d| home.join(d)).collect();
    path.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test, "--nocapture"])
        .env(CHILD, &home)
        .env("HOME", &home)
        .env("PATH", std::env::join_paths(path).unwrap())
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("XDG_DATA_HOME")
        .env_remove("KEEL_CONFIG")
        .env_remove("KEEL_HOME")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    None
}

pub fn tools() -> ToolRegistry {
    let mut tools = ToolRegistry::new();
    shell::register(
        &mut tools,
        ShellSettings::default(),
        LintSettings {
            enabled: false,
            ..LintSettings::default()
        },
    );
    tools
}

pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Runs `cmd` in the home, as a command nobody approved, and returns its result's text.
pub fn run(home: &Path, cmd: &str) -> String {
    run_as(home, cmd, false)
}

/// Runs `cmd` in the home as a command the user approved (the home's dot entries are then
/// writable: the checks that hold for every command are what is left).
pub fn run_approved(home: &Path, cmd: &str) -> String {
    run_as(home, cmd, true)
}

fn run_as(home: &Path, cmd: &str, approved: bool) -> String {
    let mut ctx = ToolContext::new(Workspace::new(home).unwrap());
    ctx.approved = approved;
    runtime()
        .block_on(tools().execute("run_command", json!({"command": cmd}), &ctx))
        .map(|o| o.content)
        .unwrap_or_else(|e| format!("{e:?}"))
}

/// Runs `git args` in `dir` (test set-up) and checks it worked.
pub fn git(dir: &Path, args: &[&str]) {
    let out = std::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
}
