//! Ignored files stay out of what `git push --mirror` sends (red-team pass 6, R6-17): the
//! snapshot refs live in the user's repository and a mirror push sends them with every object
//! they reach — a snapshot's copy of the ignored `.env` went to the remote. Undo still brings
//! `.env` back (R4-9), with its content and mode.

// Fixtures are made with plain git (what a user would run).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use std::os::unix::fs::PermissionsExt;

use super::hostile_tests::git;
use super::*;

const SECRET: &str = "DB_PASSWORD=never-leaves-this-machine-7f3a";

#[test]
fn a_mirror_push_sends_no_ignored_file_and_undo_still_restores_it() {
    if !git_available() {
        assert!(std::env::var_os("CI").is_none(), "CI needs git");
        println!("SKIPPED: git is not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    let remote = dir.path().join("remote.git");
    std::fs::create_dir(&ws).unwrap();
    git(&ws, &["init", "-q"]);
    std::fs::write(ws.join(".gitignore"), ".env\n").unwrap();
    std::fs::write(ws.join("a.txt"), "one\n").unwrap();
    git(&ws, &["add", ".gitignore", "a.txt"]);
    git(&ws, &["commit", "-qm", "init"]);
    std::fs::write(ws.join(".env"), format!("{SECRET}\n")).unwrap();
    std::fs::set_permissions(ws.join(".env"), std::fs::Permissions::from_mode(0o600)).unwrap();

    let snaps = Snapshots::open(&ws).unwrap();
    assert!(snaps.in_user_repository());
    let s0 = snaps.take("sess-1", 0, None).unwrap();
    // The model overwrites and then deletes the user's only copy.
    std::fs::write(ws.join(".env"), "clobbered\n").unwrap();
    let s1 = snaps.take("sess-1", 1, Some(&s0)).unwrap();
    assert_ne!(s0.tree, s1.tree, "a change to an ignored file is a change");
    std::fs::remove_file(ws.join(".env")).unwrap();
    snaps.take("sess-1", 2, Some(&s1)).unwrap();

    // The user mirrors the repository.
    git(dir.path(), &["init", "-q", "--bare", "remote.git"]);
    git(&ws, &["push", "-q", "--mirror", remote.to_str().unwrap()]);
    let refs = git(&remote, &["for-each-ref", "--format=%(refname)"]);
    assert!(refs.contains("refs/keel/snapshots/sess-1/0"), "{refs}");
    let objects = git(&remote, &["cat-file", "--batch-all-objects", "--batch"]);
    assert!(
        !objects.contains("never-leaves-this-machine"),
        "the ignored .env reached the remote"
    );
    assert!(!objects.contains("clobbered"));

    let report = snaps.undo("sess-1", Some(0)).unwrap();
    assert!(
        report.changes.recreated.contains(&".env".to_string()),
        "{report:?}"
    );
    assert_eq!(
        std::fs::read_to_string(ws.join(".env")).unwrap(),
        format!("{SECRET}\n")
    );
    let mode = std::fs::metadata(ws.join(".env"))
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600);
    assert!(
        !ws.join(".keel/ignored-files").exists(),
        "the manifest stays out of the work tree"
    );
    // And the undo is undone: `.env` is gone again.
    let replaced = report.replaced.unwrap();
    snaps.restore(&replaced).unwrap();
    assert!(!ws.join(".env").exists());
}
