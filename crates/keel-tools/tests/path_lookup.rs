//! Programs Keel starts outside the sandbox are never looked up in the workspace (red-team
//! B25): with a relative or empty `PATH` entry (`./node_modules/.bin`, `:/usr/bin`), a
//! repository's own `git` or `bash` must not run in place of the real one.
//!
//! The lookups run in a child of this test binary, started with the hostile `PATH` and the
//! workspace as its working directory (as Keel runs in one).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

const CHILD: &str = "KEEL_PATH_LOOKUP_CHILD";

#[test]
fn a_repository_git_or_bash_on_a_relative_path_entry_never_runs() {
    if let Some(ws) = std::env::var_os(CHILD) {
        return lookups(Path::new(&ws));
    }
    let ws = tempfile::tempdir().unwrap();
    let marker = ws.path().join("planted-program-ran");
    let bin = ws.path().join("node_modules/.bin");
    std::fs::create_dir_all(&bin).unwrap();
    for dir in [ws.path().to_path_buf(), bin] {
        for name in ["git", "bash"] {
            let p = dir.join(name);
            std::fs::write(
                &p,
                format!("#!/bin/sh\necho \"$0 $*\" >> '{}'\n", marker.display()),
            )
            .unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
    }
    let real = std::env::var("PATH").unwrap_or_default();
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "a_repository_git_or_bash_on_a_relative_path_entry_never_runs",
            "--nocapture",
        ])
        .env(CHILD, ws.path())
        .env("PATH", format!("./node_modules/.bin::{real}"))
        .current_dir(ws.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !marker.exists(),
        "a planted program ran: {}",
        std::fs::read_to_string(&marker).unwrap_or_default()
    );
}

fn lookups(ws: &Path) {
    let shell = keel_tools::shell::exec::shell_program();
    assert!(shell.is_absolute(), "{}", shell.display());
    assert!(!shell.starts_with(ws), "{}", shell.display());
    if keel_tools::shell::exec::find_program("git").is_some() {
        let out = keel_tools::safe_git::bare()
            .current_dir(ws)
            .arg("--version")
            .output()
            .unwrap();
        assert!(out.status.success());
        assert!(String::from_utf8_lossy(&out.stdout).starts_with("git version"));
    }
}

const VENV_CHILD: &str = "KEEL_PATH_LOOKUP_VENV_CHILD";

/// Red-team R23: an *absolute* `PATH` entry inside the workspace — an activated
/// `<ws>/.venv/bin`, also reached through a symlink to the workspace — where the model planted
/// `git` and `bash`. Keel's unconfined git and its shell must never be those, including a
/// lookup made before the workspace was opened (it is redone once it is).
#[test]
fn a_planted_git_or_bash_in_an_activated_venv_never_runs() {
    if let Some(ws) = std::env::var_os(VENV_CHILD) {
        return venv_lookups(Path::new(&ws));
    }
    let root = tempfile::tempdir().unwrap();
    let ws = root.path().join("ws");
    let marker = root.path().join("planted-program-ran");
    let bin = ws.join(".venv/bin");
    std::fs::create_dir_all(&bin).unwrap();
    for name in ["git", "bash", "sh"] {
        let p = bin.join(name);
        std::fs::write(
            &p,
            format!("#!/bin/sh\necho \"$0 $*\" >> '{}'\n", marker.display()),
        )
        .unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let link = root.path().join("link");
    std::os::unix::fs::symlink(&ws, &link).unwrap();
    let real = std::env::var("PATH").unwrap_or_default();
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "a_planted_git_or_bash_in_an_activated_venv_never_runs",
            "--nocapture",
        ])
        .env(VENV_CHILD, &ws)
        .env(
            "PATH",
            format!("{}:{}/.venv/bin:{real}", bin.display(), link.display()),
        )
        .current_dir(&ws)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !marker.exists(),
        "a planted program ran: {}",
        std::fs::read_to_string(&marker).unwrap_or_default()
    );
}

fn venv_lookups(ws: &Path) {
    let real_ws = ws.canonicalize().unwrap();
    // A lookup before the workspace is known (nothing runs it) is cached...
    let _early = keel_tools::shell::exec::shell_program();
    // ...and redone once the workspace is opened. Opening the workspace distrusts it (as `keel run`, the server and the library do).
    let _workspace = keel_tools::Workspace::new(ws).unwrap();
    let shell = keel_tools::shell::exec::shell_program();
    assert!(
        !shell
            .canonicalize()
            .unwrap_or(shell.clone())
            .starts_with(&real_ws),
        "the shell is the workspace's: {}",
        shell.display()
    );
    for name in ["git", "sh"] {
        if let Some(p) = keel_tools::shell::exec::find_program(name) {
            assert!(
                !p.canonicalize().unwrap().starts_with(&real_ws),
                "{name} found in the workspace: {}",
                p.display()
            );
        }
    }
    if keel_tools::shell::exec::find_program("git").is_some() {
        let out = keel_tools::safe_git::bare()
            .current_dir(ws)
            .arg("--version")
            .output()
            .unwrap();
        assert!(out.status.success());
        assert!(String::from_utf8_lossy(&out.stdout).starts_with("git version"));
    } else if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("git is not installed: this test needs it in CI");
    } else {
        println!("SKIPPED the hardened-git run: git is not installed");
    }
}
