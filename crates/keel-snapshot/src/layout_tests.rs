//! A repository's `.git` (or a shipped `.keel/snapshots`) laid out to steer Keel's snapshot
//! writes outside the workspace: symlinked index files, refs and objects, a `.git` file naming
//! another repository, a config including a FIFO. Each test re-runs the red-team's vector and
//! checks that nothing appeared outside (and that Keel neither hung nor lost the snapshot
//! where it can take one safely).

// Fixtures are made with plain git and std::fs (what a hostile repository ships).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::hostile_tests::git;
use super::*;

struct Fixture {
    _dir: tempfile::TempDir,
    ws: PathBuf,
    outside: PathBuf,
}

fn setup(with_repo: bool) -> Fixture {
    assert!(
        git_available(),
        "these tests need git on PATH (CI installs it: apt-get install git)"
    );
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    let outside = dir.path().join("outside");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(ws.join("a.txt"), "one\n").unwrap();
    if with_repo {
        git(&ws, &["init", "-q"]);
        git(&ws, &["add", "."]);
        git(&ws, &["commit", "-qm", "init"]);
    }
    Fixture {
        _dir: dir,
        ws,
        outside,
    }
}

/// Every path below `dir`, sorted.
fn listing(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            out.push(p.strip_prefix(dir).unwrap().display().to_string());
            if std::fs::symlink_metadata(&p).unwrap().is_dir() {
                stack.push(p);
            }
        }
    }
    out.sort();
    out
}

/// A snapshot, a change, a snapshot and an undo: the writes an agent's session makes.
fn session(ws: &Path) -> Result<(), SnapshotError> {
    let snaps = Snapshots::open(ws)?;
    let s0 = snaps.take("s1", 0, None)?;
    std::fs::write(ws.join("notes.txt"), "hello\n").unwrap();
    snaps.take("s1", 1, Some(&s0))?;
    snaps.undo("s1", Some(0))?;
    assert!(!ws.join("notes.txt").exists(), "the undo removed the file");
    Ok(())
}

#[test]
fn a_linked_snapshot_index_never_receives_the_repository_index() {
    // B3: `.git/index` -> a payload, `.git/keel/index` -> a new file outside.
    let f = setup(true);
    let payload = f.ws.join("payload.sh");
    std::fs::write(&payload, "#!/bin/sh\necho PWNED\n").unwrap();
    std::fs::remove_file(f.ws.join(".git/index")).unwrap();
    symlink("../payload.sh", f.ws.join(".git/index")).unwrap();
    let planted = f.outside.join("planted.sh");
    std::fs::create_dir(f.ws.join(".git/keel")).unwrap();
    symlink(&planted, f.ws.join(".git/keel/index")).unwrap();
    let err = session(&f.ws).expect_err("a linked keel/index is refused");
    assert!(err.to_string().contains("symlink"), "{err}");
    assert!(!planted.exists(), "Keel wrote the payload outside");
    assert!(listing(&f.outside).is_empty(), "{:?}", listing(&f.outside));
    // Keel's whole staging directory linked out: refused too, nothing written there.
    let f = setup(true);
    let elsewhere = f.outside.join("stage");
    std::fs::create_dir(&elsewhere).unwrap();
    symlink(&elsewhere, f.ws.join(".git/keel")).unwrap();
    let err = session(&f.ws).expect_err("a linked staging directory is refused");
    assert!(err.to_string().contains("not a directory"), "{err}");
    assert!(listing(&elsewhere).is_empty(), "{:?}", listing(&elsewhere));
}

#[test]
fn the_seed_index_is_never_copied_through_a_link_or_from_a_fifo() {
    // B3, second half: the user's index itself a link (to a payload) or a FIFO, with no
    // Keel's index yet: the snapshot works and copies nothing it should not.
    let f = setup(true);
    std::fs::remove_file(f.ws.join(".git/index")).unwrap();
    let secret = f.outside.join("secret");
    std::fs::write(&secret, "not an index\n").unwrap();
    symlink(&secret, f.ws.join(".git/index")).unwrap();
    session(&f.ws).unwrap();
    let ours = std::fs::read(f.ws.join(".git/keel/index")).unwrap();
    assert!(
        !ours.starts_with(b"not an index"),
        "the linked file was copied"
    );
    let f = setup(true);
    std::fs::remove_file(f.ws.join(".git/index")).unwrap();
    rustix::fs::mknodat(
        rustix::fs::CWD,
        f.ws.join(".git/index"),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o644),
        0,
    )
    .unwrap();
    let started = Instant::now();
    let _ = Snapshots::open(&f.ws).and_then(|s| s.take("s1", 0, None));
    assert!(started.elapsed() < Duration::from_secs(90), "Keel hung");
}

#[test]
fn linked_refs_and_objects_are_refused_and_nothing_lands_outside() {
    // B5: `.git/refs/keel` and `.git/objects` linked out.
    let f = setup(true);
    let refs = f.outside.join("refsdir");
    std::fs::create_dir_all(&refs).unwrap();
    symlink(&refs, f.ws.join(".git/refs/keel")).unwrap();
    let err = session(&f.ws).expect_err("linked refs/keel is refused");
    assert!(err.to_string().contains("refs/keel"), "{err}");
    assert!(listing(&refs).is_empty(), "{:?}", listing(&refs));

    let f = setup(true);
    let objects = f.outside.join("objects");
    std::fs::rename(f.ws.join(".git/objects"), &objects).unwrap();
    symlink(&objects, f.ws.join(".git/objects")).unwrap();
    let before = listing(&objects);
    let err = session(&f.ws).expect_err("linked objects are refused");
    assert!(err.to_string().contains("objects"), "{err}");
    assert_eq!(listing(&objects), before, "objects were written outside");

    // One fan-out directory linked out, deeper down.
    let f = setup(true);
    let fan = f.outside.join("fan");
    std::fs::create_dir_all(&fan).unwrap();
    symlink(&fan, f.ws.join(".git/objects/ab")).unwrap();
    assert!(session(&f.ws).is_err());
    assert!(listing(&fan).is_empty());
}

#[test]
fn a_shipped_private_repository_with_links_inside_is_refused() {
    // #47: a non-git workspace shipping `.keel/snapshots` as a bare repository whose refs
    // lead outside, or a half-made one whose description/info lead outside.
    let f = setup(false);
    let private = private_repository(&f.ws);
    git(&f.ws, &["init", "-q", "--bare", private.to_str().unwrap()]);
    let privrefs = f.outside.join("privrefs");
    std::fs::create_dir_all(&privrefs).unwrap();
    std::fs::remove_dir_all(private.join("refs")).unwrap();
    symlink(&privrefs, private.join("refs")).unwrap();
    assert!(session(&f.ws).is_err(), "linked refs are refused");
    assert!(listing(&privrefs).is_empty(), "{:?}", listing(&privrefs));

    let f = setup(false);
    let private = private_repository(&f.ws);
    std::fs::create_dir_all(&private).unwrap();
    symlink(f.outside.join("new"), private.join("description")).unwrap();
    symlink(f.outside.join("dir"), private.join("info")).unwrap();
    let err = session(&f.ws).expect_err("a shipped directory with links is refused");
    assert!(err.to_string().contains("symlink"), "{err}");
    assert!(listing(&f.outside).is_empty(), "{:?}", listing(&f.outside));
}

#[test]
fn a_gitdir_file_naming_another_repository_gets_the_private_repository() {
    // B6: `.git` is a file naming a repository elsewhere.
    let f = setup(true);
    let other = f.outside.join("repo.git");
    std::fs::rename(f.ws.join(".git"), &other).unwrap();
    std::fs::write(f.ws.join(".git"), format!("gitdir: {}\n", other.display())).unwrap();
    let snaps = Snapshots::open(&f.ws).unwrap();
    assert!(!snaps.in_user_repository());
    session(&f.ws).unwrap();
    assert_eq!(git(&other, &["for-each-ref", "refs/keel"]), "");
    assert!(!other.join("keel").exists());
    assert!(!other.join("keel-build-dirs").exists());
}

#[test]
fn a_linked_worktree_of_the_users_repository_still_uses_it() {
    // The legitimate `.git` file: `git worktree add`, whose gitdir links back.
    let f = setup(true);
    let wt = f.outside.join("wt");
    git(&f.ws, &["worktree", "add", "-q", wt.to_str().unwrap()]);
    let snaps = Snapshots::open(&wt).unwrap();
    assert!(snaps.in_user_repository());
    session(&wt).unwrap();
    assert!(git(&f.ws, &["for-each-ref", "refs/keel"]).contains("refs/keel/snapshots/s1/0"));
}

#[test]
fn a_config_including_a_fifo_fails_the_snapshot_instead_of_hanging() {
    // B7: `[include] path = <FIFO>` in `.git/config`.
    let f = setup(true);
    let fifo = f.outside.join("fifo");
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &fifo,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o644),
        0,
    )
    .unwrap();
    let mut config = std::fs::read_to_string(f.ws.join(".git/config")).unwrap();
    config.push_str(&format!("[include]\n\tpath = {}\n", fifo.display()));
    std::fs::write(f.ws.join(".git/config"), config).unwrap();
    let started = Instant::now();
    let result = Snapshots::open(&f.ws).and_then(|s| s.take("s1", 0, None));
    let took = started.elapsed();
    assert!(took < Duration::from_secs(120), "Keel hung for {took:?}");
    if let Err(e) = result {
        assert!(e.to_string().contains("did not finish"), "{e}");
    }
}

#[test]
fn a_commondir_naming_another_repository_gets_no_snapshot_writes() {
    // Red-team pass 2, R1: a real `.git` directory holding only `HEAD` and `commondir` naming
    // a bare repository outside; and a shipped `.keel/snapshots` doing the same.
    let f = setup(false);
    let victim = f.outside.join("victim.git");
    git(
        &f.outside,
        &["init", "-q", "--bare", victim.to_str().unwrap()],
    );
    let before = listing(&victim);
    std::fs::create_dir_all(f.ws.join(".git")).unwrap();
    std::fs::write(f.ws.join(".git/HEAD"), "ref: refs/heads/master\n").unwrap();
    std::fs::write(
        f.ws.join(".git/commondir"),
        format!("{}\n", victim.display()),
    )
    .unwrap();
    let snaps = Snapshots::open(&f.ws).unwrap();
    assert!(!snaps.in_user_repository(), "not the work tree's own");
    let _ = session(&f.ws);
    assert_eq!(listing(&victim), before, "nothing written into the victim");
    assert!(checked_repository(&f.ws).is_err());

    let f = setup(false);
    let victim = f.outside.join("victim.git");
    git(
        &f.outside,
        &["init", "-q", "--bare", victim.to_str().unwrap()],
    );
    let before = listing(&victim);
    let private = private_repository(&f.ws);
    for d in ["objects", "refs"] {
        std::fs::create_dir_all(private.join(d)).unwrap();
    }
    std::fs::write(private.join("HEAD"), "ref: refs/heads/master\n").unwrap();
    std::fs::write(private.join("commondir"), format!("{}\n", victim.display())).unwrap();
    let err = session(&f.ws).expect_err("a shipped commondir is refused");
    assert!(err.to_string().contains("commondir"), "{err}");
    assert_eq!(listing(&victim), before, "nothing written into the victim");
}

#[test]
fn a_repository_checked_for_a_branch_write_refuses_links_and_other_repositories() {
    // Red-team pass 2, R4 (flow `deliver` writes a branch): the workspace's own repository
    // passes; `refs/heads` linked out, `objects` linked out and a `.git` file naming another
    // repository do not.
    let f = setup(true);
    assert!(checked_repository(&f.ws).is_ok());
    let refsdir = f.outside.join("refsdir");
    std::fs::create_dir_all(&refsdir).unwrap();
    symlink(&refsdir, f.ws.join(".git/refs/heads/keel")).unwrap();
    let err = checked_repository(&f.ws).expect_err("a linked refs/heads entry");
    assert!(err.contains("symlink"), "{err}");

    let f = setup(true);
    let objs = f.outside.join("objs");
    std::fs::rename(f.ws.join(".git/objects"), &objs).unwrap();
    symlink(&objs, f.ws.join(".git/objects")).unwrap();
    assert!(checked_repository(&f.ws).is_err(), "linked objects");

    let f = setup(true);
    let other = f.outside.join("other.git");
    std::fs::rename(f.ws.join(".git"), &other).unwrap();
    std::fs::write(f.ws.join(".git"), format!("gitdir: {}\n", other.display())).unwrap();
    assert!(checked_repository(&f.ws).is_err(), "another repository");

    // A linked worktree of the user's repository is still its own.
    let f = setup(true);
    let wt = f.outside.join("wt");
    git(&f.ws, &["worktree", "add", "-q", wt.to_str().unwrap()]);
    assert!(checked_repository(&wt).is_ok());
}
