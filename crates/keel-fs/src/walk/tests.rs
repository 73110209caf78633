use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use super::*;

fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap_or(root)).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(p, text).unwrap_or_else(|e| panic!("{e}"));
}

fn sorted(h: &DirHandle, start: &str, options: WalkOptions) -> Vec<(String, FileKind, u64)> {
    let mut out = Vec::new();
    h.walk_sorted(Path::new(start), options, |e| {
        out.push((e.rel_str().unwrap_or("?").to_string(), e.kind, e.len));
        Visit::Continue
    })
    .unwrap_or_else(|e| panic!("{e}"));
    out
}

#[test]
fn a_sorted_walk_is_depth_first_in_name_order_and_never_follows_links() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let outside = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    write(outside.path(), "secret.txt", "s");
    let root = dir.path();
    write(root, "b.txt", "bb");
    write(root, "a/z.txt", "z");
    write(root, "a/c/d.txt", "dddd");
    std::os::unix::fs::symlink(outside.path(), root.join("out")).unwrap_or_else(|e| panic!("{e}"));
    std::os::unix::fs::symlink("a", root.join("inlink")).unwrap_or_else(|e| panic!("{e}"));
    let h = DirHandle::open(root).unwrap_or_else(|e| panic!("{e}"));
    let all = sorted(&h, "", WalkOptions::default());
    let names: Vec<&str> = all.iter().map(|(r, _, _)| r.as_str()).collect();
    assert_eq!(
        names,
        ["a", "a/c", "a/c/d.txt", "a/z.txt", "b.txt", "inlink", "out"]
    );
    assert_eq!(all[2], ("a/c/d.txt".into(), FileKind::File, 4));
    assert_eq!(all[0].1, FileKind::Dir);
    assert_eq!(
        all[5].1,
        FileKind::Symlink,
        "a link inside is listed, not followed"
    );
    assert_eq!(
        all[6].1,
        FileKind::Symlink,
        "a link out is listed, not followed"
    );

    // A subdirectory's entries are named relative to the handle; depth limits and skips work.
    let sub = sorted(&h, "a", WalkOptions { max_depth: Some(1) });
    let names: Vec<&str> = sub.iter().map(|(r, _, _)| r.as_str()).collect();
    assert_eq!(names, ["a/c", "a/z.txt"]);
    let mut seen = Vec::new();
    h.walk_sorted(Path::new(""), WalkOptions::default(), |e| {
        seen.push(e.rel_str().unwrap_or("?").to_string());
        if e.rel_str() == Some("a") {
            Visit::Skip
        } else if e.rel_str() == Some("inlink") {
            Visit::Stop
        } else {
            Visit::Continue
        }
    })
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(seen, ["a", "b.txt", "inlink"]);

    // A start directory through a link out is refused; one through a link inside is walked
    // under its canonical name.
    assert!(
        h.walk_sorted(Path::new("out"), WalkOptions::default(), |_| {
            Visit::Continue
        })
        .is_err()
    );
    let via = sorted(&h, "inlink", WalkOptions { max_depth: Some(1) });
    assert_eq!(via[0].0, "a/c");

    // The parallel walk finds the same entries.
    let found = Mutex::new(BTreeSet::new());
    h.walk_parallel(Path::new(""), WalkOptions::default(), 3, |e| {
        if let Ok(mut f) = found.lock() {
            f.insert(e.rel_str().unwrap_or("?").to_string());
        }
        Visit::Continue
    })
    .unwrap_or_else(|e| panic!("{e}"));
    let found: Vec<String> = found.into_inner().unwrap_or_default().into_iter().collect();
    assert_eq!(
        found,
        ["a", "a/c", "a/c/d.txt", "a/z.txt", "b.txt", "inlink", "out"]
    );
}

/// A directory swapped for a symlink out while walks run: no walk ever reports a name from
/// outside, sorted or parallel.
#[test]
fn a_directory_swapped_for_a_link_out_mid_walk_is_never_followed() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let outside = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let root = dir.path();
    for i in 0..20 {
        write(outside.path(), &format!("outside-{i}.txt"), "secret");
        write(root, &format!("d/inside-{i}.txt"), "x");
    }
    write(outside.path(), "deeper/outside-deep.txt", "secret");
    let h = DirHandle::open(root).unwrap_or_else(|e| panic!("{e}"));
    let done = AtomicBool::new(false);
    let swaps = AtomicUsize::new(0);
    let leaked = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        s.spawn(|| {
            let d = root.join("d");
            let link = root.join("d-link");
            let _ = std::os::unix::fs::symlink(outside.path(), &link);
            while !done.load(Ordering::SeqCst) {
                // renameat2(RENAME_EXCHANGE): `d` is a directory one moment, a link out the
                // next, never missing.
                if rustix::fs::renameat_with(
                    rustix::fs::CWD,
                    &d,
                    rustix::fs::CWD,
                    &link,
                    rustix::fs::RenameFlags::EXCHANGE,
                )
                .is_ok()
                {
                    swaps.fetch_add(1, Ordering::SeqCst);
                }
            }
        });
        for round in 0..300 {
            let note = |e: &WalkEntry| {
                let name = e.name().to_string_lossy();
                if (name.starts_with("outside") || name == "deeper")
                    && let Ok(mut l) = leaked.lock()
                {
                    l.push(e.rel_str().unwrap_or("?").to_string());
                }
            };
            if round % 2 == 0 {
                let _ = h.walk_sorted(Path::new(""), WalkOptions::default(), |e| {
                    note(e);
                    Visit::Continue
                });
            } else {
                let _ = h.walk_parallel(Path::new(""), WalkOptions::default(), 2, |e| {
                    note(e);
                    Visit::Continue
                });
            }
        }
        done.store(true, Ordering::SeqCst);
    });
    assert!(swaps.load(Ordering::SeqCst) > 100, "the swapper barely ran");
    let leaked = leaked.into_inner().unwrap_or_default();
    assert!(
        leaked.is_empty(),
        "a walk listed names from outside: {leaked:?}"
    );
}
