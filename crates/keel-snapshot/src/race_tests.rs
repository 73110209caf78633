//! A command racing Keel's own snapshot git (red-team pass 4, R4-7): while snapshots are taken,
//! threads keep swapping regular files with symlinks to a secret the sandbox covers
//! (`renameat2(RENAME_EXCHANGE)` in a tight loop, as a subagent's command would). Git `lstat`s a
//! regular file, the swap lands, and git opens the symlink: unconfined, the secret's first bytes
//! went into `.keel/snapshots/objects`, where any command reads them back.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use super::*;

const SECRET: &str = "KEEL-R47-SECRET-";
const DECOY: &str = "decoy-decoy-deco";
const PAIRS: usize = 200;
const SWAPPERS: usize = 4;
const SNAPSHOTS: u32 = 25;

/// Every object of the repository at `git_dir`, as `git cat-file` prints them.
fn all_objects(git_dir: &Path) -> Vec<u8> {
    std::process::Command::new("git")
        .args(["cat-file", "--batch-all-objects", "--batch"])
        .env("GIT_DIR", git_dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .unwrap()
        .stdout
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

#[test]
fn a_symlink_swapped_in_during_a_snapshot_reaches_no_covered_secret() {
    assert!(
        git_available(),
        "this test needs git on PATH (CI installs it: apt-get install git)"
    );
    if !keel_tools::sandbox::is_available() {
        eprintln!("SKIPPED: no kernel sandbox here (Keel's git runs as confined as commands)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // A secret store of the user's, covered inside the sandbox as `~/.ssh` is.
    let store = dir.path().join("store");
    std::fs::create_dir_all(&store).unwrap();
    let secret = store.join("id_ed25519");
    std::fs::write(&secret, SECRET.repeat(4)).unwrap();
    keel_tools::stores::register_keel_path(&store);
    let ws = dir.path().join("ws");
    let sw = ws.join("sw");
    std::fs::create_dir_all(&sw).unwrap();
    std::fs::write(ws.join("README.md"), "hi\n").unwrap();
    for i in 0..PAIRS {
        std::fs::write(sw.join(format!("f{i}")), DECOY).unwrap();
        std::os::unix::fs::symlink(&secret, sw.join(format!("g{i}"))).unwrap();
    }
    let snaps = Snapshots::open(&ws).unwrap();
    assert!(!snaps.in_user_repository());
    snaps.take("race", 0, None).unwrap();

    let stop = Arc::new(AtomicBool::new(false));
    let swappers: Vec<_> = (0..SWAPPERS)
        .map(|t| {
            let (stop, sw) = (stop.clone(), sw.clone());
            std::thread::spawn(move || {
                let dir = rustix::fs::open(
                    &sw,
                    rustix::fs::OFlags::DIRECTORY | rustix::fs::OFlags::RDONLY,
                    rustix::fs::Mode::empty(),
                )
                .unwrap();
                let names: Vec<(String, String)> = (t..PAIRS)
                    .step_by(SWAPPERS)
                    .map(|i| (format!("f{i}"), format!("g{i}")))
                    .collect();
                while !stop.load(Ordering::Relaxed) {
                    for (f, g) in &names {
                        let _ = rustix::fs::renameat_with(
                            &dir,
                            f.as_str(),
                            &dir,
                            g.as_str(),
                            rustix::fs::RenameFlags::EXCHANGE,
                        );
                    }
                }
            })
        })
        .collect();
    let mut taken = 0;
    for turn in 1..=SNAPSHOTS {
        // Refused (git found a file gone under its cover) or taken: never the secret.
        if snaps.take("race", turn, None).is_ok() {
            taken += 1;
        }
    }
    stop.store(true, Ordering::Relaxed);
    for s in swappers {
        s.join().unwrap();
    }
    let objects = all_objects(snaps.git_dir());
    assert!(
        !contains(&objects, SECRET),
        "a covered secret reached the snapshot store ({taken} of {SNAPSHOTS} snapshots taken)"
    );
    // With the swapping over, snapshots work (and hold the decoys): the check above looked at
    // a store git really wrote into.
    snaps.take("race", SNAPSHOTS + 1, None).unwrap();
    assert!(contains(&all_objects(snaps.git_dir()), DECOY));
}
