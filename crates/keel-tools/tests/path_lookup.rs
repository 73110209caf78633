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
