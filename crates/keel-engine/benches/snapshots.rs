//! What automatic snapshots cost per writing turn, next to baselines measured in the same run
//! on the same workspace: `git status` (the floor of any git-based scan of the tree) and a
//! plain recursive copy of the workspace (the naive snapshot). Also the undo of a small change
//! and the phase policy's check per tool call.
//!
//! Run: `cargo bench -p keel-engine --bench snapshots` (needs git).

// Benchmarks start programs of their own (the keel binary, baselines such as `bash -c true`):
// allowed here, outside Keel's one spawn path (docs/SECURITY.md, "One way to start a process").
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use keel_phase::{CallFacts, CommandJudge, Phase, PhasePolicy, PlanExecConfig};
use keel_snapshot::Snapshots;
use keel_tools::ToolEffect;

const DIRS: usize = 50;
const FILES_PER_DIR: usize = 100;
const RUNS: usize = 15;

fn git(dir: &Path, args: &[&str]) {
    let ok = Command::new("git")
        .args([
            "-c",
            "user.name=b",
            "-c",
            "user.email=b@b",
            "-c",
            "commit.gpgSign=false",
        ])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
        .status
        .success();
    assert!(ok, "git {args:?}");
}

/// 5,000 source-like files of about 2 KB in 50 directories.
fn populate(root: &Path) {
    let body: String = (0..60)
        .map(|i| format!("pub fn item_{i}(x: u64) -> u64 {{ x * {i} + 1 }}\n"))
        .collect();
    for d in 0..DIRS {
        let dir = root.join(format!("src/mod_{d:02}"));
        std::fs::create_dir_all(&dir).unwrap();
        for f in 0..FILES_PER_DIR {
            std::fs::write(
                dir.join(format!("file_{f:03}.rs")),
                format!("// {d}/{f}\n{body}"),
            )
            .unwrap();
        }
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn time(f: impl FnOnce()) -> Duration {
    let t = Instant::now();
    f();
    t.elapsed()
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let name = e.file_name();
        if name == ".git" || name == ".keel" {
            continue;
        }
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &to.join(name));
        } else {
            std::fs::copy(e.path(), to.join(name)).unwrap();
        }
    }
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

fn ratio(a: Duration, b: Duration) -> String {
    format!("{:.2}×", a.as_secs_f64() / b.as_secs_f64())
}

struct Judge;

impl CommandJudge for Judge {
    fn read_only(&self, command: &str) -> Result<(), String> {
        keel_tools::shell::CommandSafety::new()
            .classify(command)
            .is_read_only()
            .then_some(())
            .ok_or_else(|| "writes".to_string())
    }
    fn is_test_command(&self, _: &str) -> bool {
        false
    }
    fn test_run(&self, _: &keel_tools::PlannedCommand) -> Result<(), String> {
        Ok(())
    }
}

fn main() {
    assert!(keel_snapshot::git_available(), "this benchmark needs git");
    let files = DIRS * FILES_PER_DIR;
    println!("snapshots: a git workspace of {files} files (~2 KB each), median of {RUNS} runs\n");

    // A git workspace.
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    git(root, &["init", "-q"]);
    populate(root);
    git(root, &["add", "."]);
    git(root, &["commit", "-qm", "init"]);

    let status = median(
        (0..RUNS)
            .map(|_| {
                time(|| {
                    let out = Command::new("git")
                        .args(["status", "--porcelain"])
                        .current_dir(root)
                        .output()
                        .unwrap();
                    assert!(out.status.success());
                })
            })
            .collect(),
    );
    let copy = median(
        (0..RUNS)
            .map(|i| {
                let to = tempfile::tempdir().unwrap();
                let t = time(|| copy_tree(root, &to.path().join(format!("c{i}"))));
                drop(to);
                t
            })
            .collect(),
    );

    let snaps = Snapshots::open(root).unwrap();
    let first = time(|| {
        snaps.take("bench", 0, None).unwrap();
    });
    let mut parent = snaps.list("bench").unwrap()[0].clone();
    let steady = median(
        (1..=RUNS as u32)
            .map(|turn| {
                std::fs::write(
                    root.join("src/mod_07/file_010.rs"),
                    format!("// turn {turn}\n"),
                )
                .unwrap();
                time(|| {
                    parent = snaps.take("bench", turn, Some(&parent)).unwrap();
                })
            })
            .collect(),
    );
    let undo = median(
        (0..RUNS)
            .map(|i| {
                for f in 0..5 {
                    std::fs::write(
                        root.join(format!("src/mod_{:02}/file_{f:03}.rs", 20 + i % 10)),
                        "changed\n",
                    )
                    .unwrap();
                }
                std::fs::write(root.join(format!("new_{i}.txt")), "new\n").unwrap();
                time(|| {
                    let r = snaps.undo("bench", Some(0)).unwrap();
                    assert!(r.changes.len() >= 6, "{r:?}");
                })
            })
            .collect(),
    );

    // A plain directory: the private repository hashes everything on its first snapshot.
    let plain = tempfile::tempdir().unwrap();
    populate(plain.path());
    let private = Snapshots::open(plain.path()).unwrap();
    let private_first = time(|| {
        private.take("bench", 0, None).unwrap();
    });
    let private_parent = private.list("bench").unwrap()[0].clone();
    std::fs::write(plain.path().join("src/mod_01/file_001.rs"), "x\n").unwrap();
    let private_steady = time(|| {
        private.take("bench", 1, Some(&private_parent)).unwrap();
    });

    println!(
        "{:<58} {:>10} {:>10} {:>8}",
        "figure", "Keel", "baseline", "ratio"
    );
    let row = |name: &str, keel: Duration, base: Duration, base_name: &str| {
        println!(
            "{name:<58} {:>10} {:>10} {:>8}   (baseline: {base_name})",
            ms(keel),
            ms(base),
            ratio(keel, base)
        );
    };
    row(
        "snapshot, git repo, first of a session (seeded index)",
        first,
        status,
        "git status",
    );
    row(
        "snapshot, git repo, a later turn (1 file changed)",
        steady,
        status,
        "git status",
    );
    row(
        "snapshot, git repo, a later turn vs copying the tree",
        steady,
        copy,
        "recursive copy",
    );
    row(
        "undo of 6 changed files (5 edits + 1 new)",
        undo,
        status,
        "git status",
    );
    row(
        "snapshot, plain dir, first (hashes every file)",
        private_first,
        copy,
        "recursive copy",
    );
    row(
        "snapshot, plain dir, a later turn (1 file changed)",
        private_steady,
        copy,
        "recursive copy",
    );

    // The phase check per tool call: a plain call, and a shell command parsed by the analyser.
    let policy = PhasePolicy::from_config(&PlanExecConfig::default()).unwrap();
    let n = 20_000u32;
    let plain_call = CallFacts {
        name: "create_file",
        effect: ToolEffect::WritesFiles,
        command: None,
        planned: None,
    };
    let shell_call = CallFacts {
        name: "run_command",
        effect: ToolEffect::RunsCommands,
        command: Some("git log --oneline | head -20 && grep -rn todo src | wc -l"),
        planned: None,
    };
    let per = |c: &CallFacts<'_>| {
        let t = Instant::now();
        for _ in 0..n {
            std::hint::black_box(policy.check(Phase::Planning, c, &Judge));
        }
        t.elapsed() / n
    };
    let analysis_only = {
        let safety = keel_tools::shell::CommandSafety::new();
        let t = Instant::now();
        for _ in 0..n {
            std::hint::black_box(safety.classify(shell_call.command.unwrap_or("")));
        }
        t.elapsed() / n
    };
    let (p, s) = (per(&plain_call), per(&shell_call));
    println!(
        "\nphase check per call: plain tool {:.2} µs; shell command {:.1} µs vs its safety analysis alone {:.1} µs ({})",
        p.as_secs_f64() * 1e6,
        s.as_secs_f64() * 1e6,
        analysis_only.as_secs_f64() * 1e6,
        ratio(s, analysis_only)
    );
}
