//! What running Keel's work-tree git inside the sandbox costs (issue 29, red-team pass 4
//! R4-7): `git add --all` into a scratch index over a 5,000-file tree, confined
//! (`confined_git::output_blocking`, as every snapshot stages) beside the same command
//! unconfined, alternating, median of 15 each. Ignored by default (a measurement, not a
//! check): `cargo test -p keel-tools --test confined_git_cost -- --ignored --nocapture`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use keel_tools::confined_git::{GitConfinement, output_blocking};

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn add(ws: &Path, index: &Path) -> Command {
    let mut c = Command::new("git");
    c.args(["add", "--all"])
        .current_dir(ws)
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_INDEX_FILE", index)
        .env("GIT_ATTR_SOURCE", keel_tools::safe_git::empty_tree("sha1"));
    c
}

#[test]
#[ignore = "a measurement: run with --ignored --nocapture"]
fn confined_git_add_beside_unconfined() {
    let s = keel_tools::sandbox::support();
    if !(s.mount_namespace.is_ok() && s.isolation.processes) {
        println!("SKIPPED: no namespaces for commands");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    for d in 0..50 {
        std::fs::create_dir_all(ws.join(format!("src/d{d}"))).unwrap();
        for f in 0..100 {
            std::fs::write(
                ws.join(format!("src/d{d}/f{f}.rs")),
                format!("// file {d}/{f}\n{}", "x".repeat(2000)),
            )
            .unwrap();
        }
    }
    assert!(
        Command::new("git")
            .args(["init", "-q"])
            .current_dir(&ws)
            .status()
            .unwrap()
            .success()
    );
    let index = ws.join(".git").join("scratch-index");
    // Warm: objects written once, index stat data present.
    assert!(add(&ws, &index).status().unwrap().success());
    let jail = GitConfinement {
        workspace: ws.clone(),
        writable: vec![ws.join(".git")],
        ..Default::default()
    };
    let mut confined = Vec::new();
    let mut plain = Vec::new();
    for i in 0..15 {
        // One file changed per turn, as a later snapshot sees it.
        std::fs::write(ws.join("src/d0/f0.rs"), format!("// turn {i}\n")).unwrap();
        let t = Instant::now();
        let out = output_blocking(&add(&ws, &index), &jail, None, Duration::from_secs(60)).unwrap();
        confined.push(t.elapsed());
        assert!(out.status.success(), "{out:?}");
        std::fs::write(ws.join("src/d0/f1.rs"), format!("// turn {i}\n")).unwrap();
        let t = Instant::now();
        assert!(add(&ws, &index).status().unwrap().success());
        plain.push(t.elapsed());
    }
    let (c, p) = (median(confined), median(plain));
    println!(
        "figure: git add --all, 5,000 files, 1 changed: confined {:.1} ms, unconfined {:.1} ms, +{:.1} ms ({:.2}x)",
        c.as_secs_f64() * 1e3,
        p.as_secs_f64() * 1e3,
        (c.as_secs_f64() - p.as_secs_f64()) * 1e3,
        c.as_secs_f64() / p.as_secs_f64()
    );
}
