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

const SESSION_CHILD: &str = "KEEL_PATH_LOOKUP_SESSION_CHILD";

/// Red-team pass 4, R4-5: a `git` planted by an earlier session where its commands could
/// write — a monorepo root's `.venv/bin` (today's workspace is a sub-package; no `.keel` was
/// left at the root) or a `shell.writable` tree's `bin` (`~/go/bin`) — must never run in a
/// later session. Each session is a child process (fresh in-process state); Keel's data
/// directory, where the record is kept, is shared, as a user's is.
#[test]
fn a_git_planted_by_an_earlier_session_never_runs() {
    if let Ok(what) = std::env::var(SESSION_CHILD) {
        return session(&what);
    }
    let root = tempfile::tempdir().unwrap();
    let mono = root.path().join("mono");
    let go = root.path().join("home/go");
    let data = root.path().join("home/.local/share/keel");
    std::fs::create_dir_all(mono.join("backend")).unwrap();
    std::fs::create_dir_all(&go).unwrap();
    let child = |what: String, path: Option<String>| {
        let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
        cmd.args([
            "--exact",
            "a_git_planted_by_an_earlier_session_never_runs",
            "--nocapture",
        ])
        .env(SESSION_CHILD, what)
        .env("KEEL_TEST_DATA", &data);
        if let Some(p) = path {
            cmd.env("PATH", p);
        }
        let out = cmd.output().unwrap();
        assert!(
            out.status.success(),
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    };
    // Session 1: its workspace is the monorepo root, and it may write `~/go`. Its commands
    // plant `git` in both (done here directly: the session's commands could).
    child(format!("one\n{}\n{}", mono.display(), go.display()), None);
    for bin in [mono.join(".venv/bin"), go.join("bin")] {
        std::fs::create_dir_all(&bin).unwrap();
        let p = bin.join("git");
        std::fs::write(&p, "#!/bin/sh\necho planted\n").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    // Session 2, in the sub-package, with the root's venv and Go's bin on PATH.
    let real = std::env::var("PATH").unwrap_or_default();
    child(
        format!("two\n{}", mono.join("backend").display()),
        Some(format!(
            "{}:{}:{real}",
            mono.join(".venv/bin").display(),
            go.join("bin").display()
        )),
    );
}

fn session(what: &str) {
    let data = std::path::PathBuf::from(std::env::var_os("KEEL_TEST_DATA").unwrap());
    let mut lines = what.lines();
    let role = lines.next().unwrap();
    let ws = Path::new(lines.next().unwrap());
    keel_tools::shell::lookup::keep_record(&data);
    let _workspace = keel_tools::Workspace::new(ws).unwrap();
    if role == "one" {
        // A command given `shell.writable` starts: the tree is distrusted (and recorded).
        for w in lines {
            keel_tools::shell::lookup::distrust(Path::new(w));
        }
        return;
    }
    if let Some(git) = keel_tools::shell::exec::find_program("git") {
        let out = std::process::Command::new(&git)
            .arg("--version")
            .output()
            .unwrap();
        assert!(
            !String::from_utf8_lossy(&out.stdout).contains("planted"),
            "the planted git was found: {}",
            git.display()
        );
    }
}
