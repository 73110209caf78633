//! Undo gives private files their mode back (red-team pass 5, R5-9): a 0600 `.env` the model
//! deleted, or a 0600 file it rewrote, came back 0644 — readable by every user of the machine.

// Fixtures are made with plain git (what a user or a hostile command would run).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use super::hostile_tests::git;
use super::*;

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

fn private(path: &Path, content: &str, m: u32) {
    std::fs::write(path, content).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(m)).unwrap();
}

fn undo_keeps_modes(ws: &Path) {
    std::fs::write(ws.join(".gitignore"), ".env\n").unwrap();
    std::fs::write(ws.join("README.md"), "# readme\n").unwrap();
    private(&ws.join("config.ini"), "password = 1\n", 0o600);
    private(&ws.join("deploy.key"), "KEY\n", 0o600);
    if ws.join(".git").exists() {
        git(
            ws,
            &["add", ".gitignore", "README.md", "config.ini", "deploy.key"],
        );
        git(ws, &["commit", "-qm", "init"]);
    }
    private(&ws.join(".env"), "TOKEN=secret\n", 0o600);
    private(&ws.join("notes.txt"), "private notes\n", 0o640);
    let snaps = Snapshots::open(ws).unwrap();
    let s0 = snaps.take("sess-1", 0, None).unwrap();
    // The model deletes the ignored `.env`, rewrites the tracked and the untracked file.
    std::fs::remove_file(ws.join(".env")).unwrap();
    std::fs::write(ws.join("config.ini"), "password = 2\n").unwrap();
    std::fs::write(ws.join("notes.txt"), "changed\n").unwrap();
    let s1 = snaps.take("sess-1", 1, Some(&s0)).unwrap();
    // R7-8: a tracked file nothing changed until a later turn deletes it.
    std::fs::remove_file(ws.join("deploy.key")).unwrap();
    snaps.take("sess-1", 2, Some(&s1)).unwrap();
    let report = snaps.undo("sess-1", Some(1)).unwrap();
    assert!(
        report.changes.recreated.contains(&"deploy.key".to_string()),
        "{report:?}"
    );
    assert_eq!(
        mode(&ws.join("deploy.key")),
        0o600,
        "the recreated tracked file nothing had changed"
    );
    let report = snaps.undo("sess-1", Some(0)).unwrap();
    assert!(
        report.changes.recreated.contains(&".env".to_string()),
        "{report:?}"
    );
    assert_eq!(
        std::fs::read_to_string(ws.join(".env")).unwrap(),
        "TOKEN=secret\n"
    );
    assert_eq!(mode(&ws.join(".env")), 0o600, "the recreated .env");
    assert_eq!(
        mode(&ws.join("config.ini")),
        0o600,
        "the rewritten tracked file"
    );
    assert_eq!(
        mode(&ws.join("notes.txt")),
        0o640,
        "the rewritten untracked file"
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("config.ini")).unwrap(),
        "password = 1\n"
    );
}

#[test]
fn undo_gives_private_files_their_mode_back_in_a_repository() {
    if !git_available() {
        assert!(std::env::var_os("CI").is_none(), "CI needs git");
        println!("SKIPPED: git is not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    git(ws, &["init", "-q"]);
    undo_keeps_modes(ws);
}

#[test]
fn undo_gives_private_files_their_mode_back_in_a_plain_directory() {
    if !git_available() {
        assert!(std::env::var_os("CI").is_none(), "CI needs git");
        println!("SKIPPED: git is not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    undo_keeps_modes(dir.path());
}

/// Red-team pass 7, R7-19: a hook planted while another command ran was captured by a
/// snapshot, quarantined after the command, and `keel undo --to` recreated it (executable) for
/// the user's next `git commit`. A restore leaves the git-program list alone.
#[test]
fn undo_never_brings_back_a_program_the_users_git_runs() {
    if !git_available() {
        assert!(std::env::var_os("CI").is_none(), "CI needs git");
        println!("SKIPPED: git is not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    git(ws, &["init", "-q"]);
    git(ws, &["config", "core.hooksPath", ".githooks"]);
    std::fs::write(ws.join("a.txt"), "one\n").unwrap();
    git(ws, &["add", "a.txt"]);
    git(ws, &["commit", "-qm", "init"]);
    // A snapshot taken while the planted hook was there.
    std::fs::create_dir(ws.join(".githooks")).unwrap();
    private(
        &ws.join(".githooks/pre-commit"),
        "#!/bin/sh\ntouch pwned\n",
        0o755,
    );
    let snaps = Snapshots::open(ws).unwrap();
    let s0 = snaps.take("sess-1", 0, None).unwrap();
    // The quarantine moved it after the command; the session goes on.
    std::fs::rename(
        ws.join(".githooks"),
        ws.join(".githooks.quarantined-by-keel"),
    )
    .unwrap();
    std::fs::write(ws.join("a.txt"), "two\n").unwrap();
    snaps.take("sess-1", 1, Some(&s0)).unwrap();
    let report = snaps.undo("sess-1", Some(0)).unwrap();
    assert_eq!(std::fs::read_to_string(ws.join("a.txt")).unwrap(), "one\n");
    assert!(
        !ws.join(".githooks/pre-commit").exists(),
        "undo recreated the hook: {report:?}"
    );
    assert!(
        report
            .changes
            .left_alone
            .contains(&".githooks/pre-commit".to_string()),
        "{report:?}"
    );
}
