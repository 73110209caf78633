//! `git_diff` racing a command of the workspace (red-team pass 4, R4-7): threads keep swapping
//! committed regular files with symlinks to a secret the sandbox covers
//! (`renameat2(RENAME_EXCHANGE)` in a tight loop). Git `lstat`s a regular file, the swap lands,
//! and git opens the symlink: unconfined, the secret was printed into the tool result. (A diff
//! shows a file only when two such reads hit, so on the unconfined code this caught the leak in
//! about half of its runs; `keel-snapshot`'s race test catches the snapshot's in every run.)

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::json;

use super::git::GitDiff;
use crate::builtin::testutil::Fixture;
use crate::fixtures::{have_git, plain_git as git};

const SECRET: &str = "KEEL-R47-SECRET-";
const DECOY: &str = "decoy-decoy-deco";
const PAIRS: usize = 64;
const SWAPPERS: usize = 4;
const DIFFS: usize = 80;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_symlink_swapped_in_during_git_diff_shows_no_covered_secret() {
    if !have_git() {
        return;
    }
    if !crate::sandbox::is_available() {
        eprintln!("SKIPPED: no kernel sandbox here (git_diff runs as confined as commands)");
        return;
    }
    let f = Fixture::new();
    let root = f.dir.path().to_path_buf();
    let store = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let secret = store.path().join("id_ed25519");
    std::fs::write(&secret, SECRET.repeat(4)).unwrap_or_else(|e| panic!("{e}"));
    // Covered inside the sandbox, as `~/.ssh` is.
    crate::stores::register_keel_path(store.path());
    git(&root, &["init", "-q", "-b", "main"]);
    let sw = root.join("sw");
    std::fs::create_dir_all(&sw).unwrap_or_else(|e| panic!("{e}"));
    for i in 0..PAIRS {
        std::fs::write(sw.join(format!("f{i}")), DECOY).unwrap_or_else(|e| panic!("{e}"));
    }
    git(&root, &["add", "."]);
    git(
        &root,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-qm",
            "init",
        ],
    );
    for i in 0..PAIRS {
        std::os::unix::fs::symlink(&secret, sw.join(format!("g{i}")))
            .unwrap_or_else(|e| panic!("{e}"));
    }
    let stop = Arc::new(AtomicBool::new(false));
    let swappers: Vec<_> = (0..SWAPPERS)
        .map(|t| {
            let (stop, sw) = (stop.clone(), sw.clone());
            std::thread::spawn(move || {
                let Ok(dir) = rustix::fs::open(
                    &sw,
                    rustix::fs::OFlags::DIRECTORY | rustix::fs::OFlags::RDONLY,
                    rustix::fs::Mode::empty(),
                ) else {
                    return;
                };
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
    let mut leaked = None;
    for _ in 0..DIFFS {
        // A diff, or an error (a file gone under its cover): never the secret.
        // Every field of the result (the text is cut in the middle; the diff is whole).
        let shown = match crate::Tool::execute(&GitDiff, json!({}), &f.ctx).await {
            Ok(out) => format!("{out:?}"),
            Err(e) => e.to_string(),
        };
        if shown.contains(SECRET) {
            leaked = Some(shown);
            break;
        }
    }
    stop.store(true, Ordering::Relaxed);
    for s in swappers {
        let _ = s.join();
    }
    assert!(leaked.is_none(), "git_diff showed a covered secret");
    // With the swapping over, the tool works (the loop above looked at real diffs).
    let calm = f.ok(&GitDiff, json!({})).await;
    assert!(calm.contains("sw/"), "{calm}");
}
