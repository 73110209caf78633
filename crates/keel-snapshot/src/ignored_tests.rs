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

/// Red-team pass 8, R8-19: `keel sessions rm` removed a session's refs but every copy of its
/// ignored files stayed in the side store (a rotated `.env` too). Forgetting a session drops
/// the copies no remaining snapshot names; another session's stay, and its undo still works.
#[test]
fn forgetting_a_session_drops_the_ignored_copies_only_it_kept() {
    if !git_available() {
        assert!(std::env::var_os("CI").is_none(), "CI needs git");
        println!("SKIPPED: git is not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    git(&ws, &["init", "-q"]);
    std::fs::write(ws.join(".gitignore"), ".env\n").unwrap();
    git(&ws, &["add", ".gitignore"]);
    git(&ws, &["commit", "-qm", "init"]);
    let snaps = Snapshots::open(&ws).unwrap();
    std::fs::write(ws.join(".env"), "OLD_SECRET=rotated-away-1\n").unwrap();
    snaps.take("gone", 0, None).unwrap();
    std::fs::write(ws.join(".env"), "NEW_SECRET=kept-2\n").unwrap();
    snaps.take("kept", 0, None).unwrap();
    let store = ws
        .join(".git/keel")
        .read_dir()
        .unwrap()
        .flatten()
        .fold(Vec::new(), |mut v, e| {
            v.push(e.path());
            v
        });
    // The side store is somewhere under `.git/keel`; every copy there is made old (past the
    // grace a snapshot being taken has).
    let mut copies = Vec::new();
    let mut stack = store;
    while let Some(p) = stack.pop() {
        if p.is_dir() {
            stack.extend(p.read_dir().unwrap().flatten().map(|e| e.path()));
        } else if p
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("f-") || n.starts_with("m-"))
        {
            let old = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
            std::fs::File::options()
                .write(true)
                .open(&p)
                .unwrap()
                .set_modified(old)
                .unwrap();
            copies.push(p);
        }
    }
    let holds = |text: &str| {
        copies
            .iter()
            .any(|p| std::fs::read(p).is_ok_and(|b| String::from_utf8_lossy(&b).contains(text)))
    };
    assert!(holds("rotated-away-1") && holds("kept-2"), "{copies:?}");
    snaps.forget("gone").unwrap();
    assert!(
        !holds("rotated-away-1"),
        "the forgotten session's copy stayed"
    );
    assert!(holds("kept-2"), "the other session's copy went");
    std::fs::remove_file(ws.join(".env")).unwrap();
    snaps.undo("kept", Some(0)).unwrap();
    assert_eq!(
        std::fs::read_to_string(ws.join(".env")).unwrap(),
        "NEW_SECRET=kept-2\n"
    );
}
