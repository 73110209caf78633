//! What a snapshot and an undo cost, beside `git status --porcelain` on the same tree in the
//! same run (the floor of any git scan): a git repository of 5,000 files (~2 KB, 50
//! directories), a later turn with one file changed and one new 64 KB file (new objects to
//! store), and the undo of six changed files. Median of 15 each, alternating with the
//! baseline. A measurement, not a check (ignored by default):
//! `cargo test -p keel-snapshot --test snapshot_cost -- --ignored --nocapture`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use keel_snapshot::Snapshots;

fn git(dir: &Path, args: &[&str]) {
    let ok = Command::new("git")
        .args(["-c", "user.name=b", "-c", "user.email=b@b"])
        .args(["-c", "commit.gpgSign=false"])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
        .status
        .success();
    assert!(ok, "git {args:?}");
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

#[test]
#[ignore = "a measurement: run with --ignored --nocapture"]
fn snapshot_and_undo_beside_git_status() {
    if !keel_snapshot::git_available() {
        println!("SKIPPED: no git");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    let body: String = (0..60)
        .map(|i| format!("pub fn item_{i}(x: u64) -> u64 {{ x * {i} + 1 }}\n"))
        .collect();
    for d in 0..50 {
        let sub = ws.join(format!("src/mod_{d:02}"));
        std::fs::create_dir_all(&sub).unwrap();
        for f in 0..100 {
            std::fs::write(
                sub.join(format!("f{f:03}.rs")),
                format!("// {d}/{f}\n{body}"),
            )
            .unwrap();
        }
    }
    git(&ws, &["init", "-q"]);
    git(&ws, &["add", "-A"]);
    git(&ws, &["commit", "-qm", "base"]);
    let snaps = Snapshots::open(&ws).unwrap();
    let mut last = snaps.take("bench", 0, None).unwrap();
    let status = || {
        let t = Instant::now();
        let out = Command::new("git")
            .args(["status", "--porcelain"])
            .current_dir(&ws)
            .output()
            .unwrap();
        assert!(out.status.success());
        t.elapsed()
    };
    let (mut snap, mut base) = (Vec::new(), Vec::new());
    for turn in 1..=15u32 {
        std::fs::write(ws.join("src/mod_00/f000.rs"), format!("// turn {turn}\n")).unwrap();
        let big: String = (0..2048)
            .map(|i| format!("{turn:04} line {i:05} ......\n"))
            .collect();
        std::fs::write(ws.join(format!("new_{turn}.txt")), big).unwrap();
        let t = Instant::now();
        last = snaps.take("bench", turn, Some(&last)).unwrap();
        snap.push(t.elapsed());
        base.push(status());
    }
    let (mut undo, mut base2) = (Vec::new(), Vec::new());
    for round in 0..15 {
        let before = snaps.take("undo", round * 2, None).unwrap();
        for f in 0..5 {
            std::fs::write(
                ws.join(format!("src/mod_01/f{f:03}.rs")),
                format!("edit {round}\n"),
            )
            .unwrap();
        }
        std::fs::write(ws.join("added.txt"), format!("new {round}\n")).unwrap();
        let t = Instant::now();
        snaps.restore(&before.commit).unwrap();
        undo.push(t.elapsed());
        base2.push(status());
    }
    let (s, b, u, b2) = (median(snap), median(base), median(undo), median(base2));
    println!(
        "figure: snapshot, later turn (1 changed + 1 new 64 KB file): {:.1} ms, git status {:.1} ms ({:.2}x)",
        ms(s),
        ms(b),
        s.as_secs_f64() / b.as_secs_f64()
    );
    println!(
        "figure: undo of 6 files: {:.1} ms, git status {:.1} ms ({:.2}x)",
        ms(u),
        ms(b2),
        u.as_secs_f64() / b2.as_secs_f64()
    );
}
