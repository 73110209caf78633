//! A workspace holding protected stores (the home directory as workspace: `~/.ssh`, Keel's
//! data): no snapshot records them, and no restore writes, recreates or removes anything in
//! them (red-team pass 3, R3-2). A store is made here by registering a directory of the
//! workspace as Keel's own (`register_keel_path`), the same list the home's `~/.ssh` is on.

// Fixtures are made with plain git (what a user or a hostile command would run).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use std::path::Path;
use std::process::Command;

use super::*;

fn git_out(git_dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg(format!("--git-dir={}", git_dir.display()))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Every object of the snapshot repository, as a command would dump it.
fn all_objects(git_dir: &Path) -> String {
    git_out(git_dir, &["cat-file", "--batch-all-objects", "--batch"])
}

fn workspace(with_repo: bool) -> (tempfile::TempDir, std::path::PathBuf) {
    assert!(
        git_available(),
        "these tests need git on PATH (CI installs it: apt-get install git)"
    );
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("home")).unwrap();
    let ws = dir.path().join("home").canonicalize().unwrap();
    std::fs::write(ws.join("README.md"), "notes\n").unwrap();
    std::fs::create_dir_all(ws.join("vault/sub")).unwrap();
    std::fs::write(ws.join("vault/token"), "FAKE-STORE-TOKEN\n").unwrap();
    std::fs::write(ws.join("vault/sub/key"), "FAKE-STORE-KEY\n").unwrap();
    if with_repo {
        // A dotfiles repository at the top that tracks a file of the store.
        for args in [
            &["init", "-q"][..],
            &["add", "README.md", "vault/sub/key"],
            &[
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "commit",
                "-qm",
                "init",
            ],
        ] {
            let out = Command::new("git")
                .args(args)
                .current_dir(&ws)
                .output()
                .unwrap();
            assert!(out.status.success(), "{out:?}");
        }
    }
    (dir, ws)
}

fn stores_are_never_recorded(with_repo: bool) {
    let (_dir, ws) = workspace(with_repo);
    keel_tools::stores::register_keel_path(&ws.join("vault"));
    let snaps = Snapshots::open(&ws).unwrap();
    assert_eq!(snaps.in_user_repository(), with_repo);
    let first = snaps.take("s1", 0, None).unwrap();
    std::fs::write(ws.join("vault/token"), "FAKE-NEW-TOKEN\n").unwrap();
    // Named in another case, as the file tools see it (refused there too).
    std::fs::create_dir_all(ws.join("VAULT")).unwrap();
    std::fs::write(ws.join("VAULT/x"), "FAKE-CASE\n").unwrap();
    std::fs::write(ws.join("README.md"), "changed\n").unwrap();
    let second = snaps.take("s1", 1, Some(&first)).unwrap();
    for s in [&first, &second] {
        let names = git_out(
            snaps.git_dir(),
            &["ls-tree", "-r", "--name-only", &s.commit],
        );
        assert!(names.contains("README.md"), "{names}");
        assert!(
            !names.to_lowercase().contains("vault"),
            "a snapshot recorded the store ({}):\n{names}",
            if with_repo {
                "user repository"
            } else {
                "private"
            }
        );
    }
    if !with_repo {
        // Nothing of the store in any object a command could dump.
        let objects = all_objects(snaps.git_dir());
        assert!(!objects.contains("FAKE-"), "{objects}");
    }
    // Undo to the first snapshot gives README back and leaves the store as it is now.
    snaps.restore(&first.commit).unwrap();
    assert_eq!(
        std::fs::read_to_string(ws.join("README.md")).unwrap(),
        "notes\n"
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("vault/token")).unwrap(),
        "FAKE-NEW-TOKEN\n"
    );
    assert!(ws.join("vault/sub/key").exists() && ws.join("VAULT/x").exists());
}

#[test]
fn stores_beneath_the_workspace_are_never_recorded() {
    stores_are_never_recorded(false);
    stores_are_never_recorded(true);
}

/// A snapshot taken before the store was known (an older Keel, or `store.path` registered
/// later) holds it: restoring it never writes into the store, and the next snapshot drops it
/// (from Keel's index too, not only from what is staged anew).
#[test]
fn a_snapshot_that_holds_a_store_never_restores_into_it() {
    let (_dir, ws) = workspace(false);
    let snaps = Snapshots::open(&ws).unwrap();
    let old = snaps.take("s1", 0, None).unwrap();
    let names = git_out(
        snaps.git_dir(),
        &["ls-tree", "-r", "--name-only", &old.commit],
    );
    assert!(names.contains("vault/token"), "{names}");
    keel_tools::stores::register_keel_path(&ws.join("vault"));
    std::fs::write(ws.join("vault/token"), "FAKE-NEW-TOKEN\n").unwrap();
    std::fs::remove_file(ws.join("vault/sub/key")).unwrap();
    std::fs::write(ws.join("vault/planted"), "x\n").unwrap();
    std::fs::write(ws.join("README.md"), "changed\n").unwrap();
    let now = snaps.take("s1", 1, Some(&old)).unwrap();
    let names = git_out(
        snaps.git_dir(),
        &["ls-tree", "-r", "--name-only", &now.commit],
    );
    assert!(!names.contains("vault"), "{names}");
    let report = snaps.restore(&old.commit).unwrap();
    assert_eq!(report.modified, vec!["README.md".to_string()], "{report:?}");
    assert!(
        report.recreated.is_empty() && report.removed.is_empty(),
        "{report:?}"
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("vault/token")).unwrap(),
        "FAKE-NEW-TOKEN\n"
    );
    assert!(!ws.join("vault/sub/key").exists());
    assert!(ws.join("vault/planted").exists());
    // What `keel diff` shows says nothing of the store either.
    let diff = snaps.session_diff("s1").unwrap().unwrap_or_default();
    assert!(!diff.contains("vault"), "{diff}");
}

/// Snapshots taken before stores were left out (an older Keel) hold copies of them: opening
/// the store purges them — the refs whose history holds a store go, and so do the objects only
/// they reached (loose or packed by a `git gc`), while a store file the user committed, the
/// other sessions' snapshots and every workspace file stay.
fn old_store_copies_are_purged_on_open(with_repo: bool, packed: bool) {
    let (_dir, ws) = workspace(with_repo);
    // A session from before the store existed, then one that copied it (as Keel did before
    // the R3-2 fix: the store was not yet on the list when these snapshots were taken).
    std::fs::rename(ws.join("vault"), ws.join("../vault")).unwrap();
    let snaps = Snapshots::open(&ws).unwrap();
    let clean = snaps.take("clean", 0, None).unwrap();
    std::fs::rename(ws.join("../vault"), ws.join("vault")).unwrap();
    let held = snaps.take("held", 0, None).unwrap();
    std::fs::write(ws.join("README.md"), "changed\n").unwrap();
    snaps.take("held", 1, Some(&held)).unwrap();
    assert!(all_objects(snaps.git_dir()).contains("FAKE-STORE-TOKEN"));
    if packed {
        git_out(snaps.git_dir(), &["repack", "-a", "-d", "-q"]);
    }
    let git_dir = snaps.git_dir().to_path_buf();
    drop(snaps);

    keel_tools::stores::register_keel_path(&ws.join("vault"));
    let snaps = Snapshots::open(&ws).unwrap();
    let objects = all_objects(&git_dir);
    assert!(
        !objects.contains("FAKE-STORE-TOKEN"),
        "the store's copy is gone ({})",
        if with_repo {
            "user repository"
        } else {
            "private"
        }
    );
    assert_eq!(
        objects.contains("FAKE-STORE-KEY"),
        with_repo,
        "a store file the user committed is theirs"
    );
    assert!(snaps.list("held").unwrap().is_empty(), "its refs are gone");
    let kept: Vec<String> = snaps
        .list("clean")
        .unwrap()
        .into_iter()
        .map(|s| s.commit)
        .collect();
    assert_eq!(
        kept,
        std::slice::from_ref(&clean.commit),
        "the other session's snapshot stays"
    );
    // Nothing of the workspace was touched, and snapshots go on (without the store).
    assert_eq!(
        std::fs::read_to_string(ws.join("README.md")).unwrap(),
        "changed\n"
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("vault/token")).unwrap(),
        "FAKE-STORE-TOKEN\n"
    );
    let next = snaps.take("next", 0, None).unwrap();
    let names = git_out(&git_dir, &["ls-tree", "-r", "--name-only", &next.commit]);
    assert!(
        names.contains("README.md") && !names.contains("vault"),
        "{names}"
    );
    snaps.restore(&clean.commit).unwrap();
    assert_eq!(
        std::fs::read_to_string(ws.join("README.md")).unwrap(),
        "notes\n"
    );
    assert!(ws.join("vault/token").exists());
}

#[test]
fn old_store_copies_are_purged_on_open_in_a_private_repository() {
    old_store_copies_are_purged_on_open(false, false);
}

#[test]
fn old_store_copies_are_purged_on_open_in_the_users_repository() {
    old_store_copies_are_purged_on_open(true, false);
}

#[test]
fn old_store_copies_are_purged_on_open_even_when_packed() {
    old_store_copies_are_purged_on_open(true, true);
}
