//! `keel flow`: validate, the two example flows with the scripted provider (run, status,
//! runs, replay), and kill -9 mid-flow then resume without re-running finished nodes.

// Tests start programs of their own (the keel binary, git fixtures, tmux, servers): allowed
// here, outside Keel's one spawn path (docs/SECURITY.md, "One way to start a process").
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

use common::*;
use serde_json::Value;

fn empty_env() -> Env {
    let src = tempfile::tempdir().unwrap();
    Env::with_repo(src.path())
}

fn run(env: &Env, args: &[&str]) -> Output {
    env.keel().args(args).output().unwrap()
}

fn ok(env: &Env, args: &[&str]) -> String {
    let out = run(env, args);
    assert_exit(&out, 0);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn example(name: &str) -> String {
    repo_root()
        .join("examples/flows")
        .join(name)
        .display()
        .to_string()
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .current_dir(dir)
        .args(args)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@t")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@t")
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn latest(env: &Env) -> Value {
    serde_json::from_str(&ok(env, &["flow", "status", "--json"])).unwrap()
}

#[test]
fn validate_accepts_the_examples_and_reports_mistakes_with_positions() {
    let env = empty_env();
    for f in ["implement-review-deliver.yaml", "hypotheses.yaml"] {
        let out = ok(&env, &["flow", "validate", &example(f)]);
        assert!(out.contains("is valid"), "{out}");
    }
    std::fs::write(
        env.work.join("bad.yaml"),
        "name: bad\nnodes:\n  - id: a\n    type: shel\n    command: ls\n",
    )
    .unwrap();
    let out = run(&env, &["flow", "validate", "bad.yaml"]);
    assert_exit(&out, 2);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bad.yaml:4:11: unknown node type `shel`"),
        "{err}"
    );
}

#[test]
fn implement_test_review_deliver_runs_and_replays() {
    let env = empty_env();
    git(&env.work, &["init", "-q", "-b", "main"]);
    std::fs::write(env.work.join("README.md"), "demo\n").unwrap();
    git(&env.work, &["add", "-A"]);
    git(&env.work, &["commit", "-qm", "init"]);
    let out = ok(
        &env,
        &["flow", "run", &example("implement-review-deliver.yaml")],
    );
    assert!(out.contains("✓ deliver"), "{out}");
    let status = latest(&env);
    assert_eq!(status["status"], "completed", "{status}");
    let branch = status["nodes"]["deliver"]["outputs"]["output"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        git(&env.work, &["show", &format!("{branch}:greet.sh")]),
        "echo 'hello, world'"
    );
    assert_eq!(git(&env.work, &["symbolic-ref", "--short", "HEAD"]), "main");
    let runs = ok(&env, &["flow", "runs"]);
    assert!(runs.contains("implement-review-deliver"), "{runs}");
    let id = status["id"].as_str().unwrap().to_string();
    let into = env.home.join("replay");
    let out = ok(
        &env,
        &["flow", "replay", &id, "--into", into.to_str().unwrap()],
    );
    assert!(out.contains("reproduced"), "{out}");
    assert_eq!(
        std::fs::read_to_string(into.join("greet.sh")).unwrap(),
        "echo 'hello, world'\n"
    );
}

#[test]
fn three_hypotheses_in_parallel_keep_the_passing_one_and_replay() {
    let env = empty_env();
    let out = ok(&env, &["flow", "run", &example("hypotheses.yaml")]);
    assert!(out.contains("✓ explore completed: wrong-constant"), "{out}");
    assert_eq!(
        std::fs::read_to_string(env.work.join("answer.txt")).unwrap(),
        "42\n"
    );
    let status = latest(&env);
    assert_eq!(status["nodes"]["h1_test"]["outputs"]["passed"], false);
    assert_eq!(status["nodes"]["h2_test"]["outputs"]["passed"], true);
    let id = status["id"].as_str().unwrap().to_string();
    let into: PathBuf = env.home.join("replay");
    let out = ok(
        &env,
        &["flow", "replay", &id, "--into", into.to_str().unwrap()],
    );
    assert!(out.contains("reproduced"), "{out}");
    assert_eq!(
        std::fs::read_to_string(into.join("answer.txt")).unwrap(),
        "42\n"
    );
}

/// The tour's flow as a new user meets it: a Rust project with build output and no
/// `.gitignore`, a fresh HOME, verification and auto-lint on (as by default). Agent nodes
/// do not run the session's gates (`cargo test` would fail in the fresh HOME and send the
/// scripted model back for a turn it does not have), `target/` stays out of the trace, and
/// the run replays.
#[test]
fn the_tour_flow_runs_with_build_output_and_default_verification_and_replays() {
    let env = Env::new();
    std::fs::create_dir_all(env.work.join("target/debug/deps")).unwrap();
    std::fs::write(
        env.work.join("target/debug/deps/libbig.rlib"),
        vec![7u8; 5 * 1024 * 1024],
    )
    .unwrap();
    let user = |args: &[&str]| {
        let mut cmd = env.keel();
        cmd.env_remove("KEEL_VERIFY__ENABLED")
            .env_remove("KEEL_SHELL__LINT__ENABLED")
            .args(args);
        cmd.output().unwrap()
    };
    let started = Instant::now();
    let out = user(&["flow", "run", &example("hypotheses.yaml")]);
    assert_exit(&out, 0);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("✓ explore completed: wrong-constant"),
        "{stdout}"
    );
    assert!(started.elapsed() < Duration::from_secs(60));
    let status = latest(&env);
    let id = status["id"].as_str().unwrap().to_string();
    let into = env.home.join("replay");
    let out = user(&["flow", "replay", &id, "--into", into.to_str().unwrap()]);
    assert_exit(&out, 0);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("reproduced"), "{stdout}");
    assert!(!into.join("target").exists(), "build output is not traced");

    // Without --into the replay works in a temporary directory and removes it.
    let tmp = env.home.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let out = env
        .keel()
        .env("TMPDIR", &tmp)
        .args(["flow", "replay", &id])
        .output()
        .unwrap();
    assert_exit(&out, 0);
    let left: Vec<_> = std::fs::read_dir(&tmp)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("keel-replay-"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    // `flow runs` has a header; global flags work after the subcommand.
    let runs = ok(&env, &["flow", "runs", "-w", env.work.to_str().unwrap()]);
    assert!(runs.starts_with("RUN "), "{runs}");
    assert!(runs.contains(&id), "{runs}");
}

#[test]
fn kill_9_mid_flow_then_resume_does_not_rerun_finished_nodes() {
    let env = empty_env();
    std::fs::write(
        env.work.join("slow.yaml"),
        "name: slow\nmax_parallel: 1\nnodes:\n  - id: count\n    type: shell\n    command: echo x >> count.txt\n  - id: wait\n    type: shell\n    needs: [count]\n    command: while [ ! -f go ]; do sleep 0.1; done; echo waited\n  - id: after\n    type: shell\n    needs: [wait]\n    command: cat count.txt\n",
    )
    .unwrap();
    let mut child = env
        .keel()
        .args(["flow", "run", "slow.yaml"])
        .spawn()
        .unwrap();
    let start = Instant::now();
    loop {
        let out = run(&env, &["flow", "status", "--json"]);
        if out.status.success() {
            let v: Value = serde_json::from_slice(&out.stdout).unwrap();
            if v["nodes"]["count"]["status"] == "completed" {
                break;
            }
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the first node never finished"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    std::fs::write(env.work.join("go"), "").unwrap();
    let id = latest(&env)["id"].as_str().unwrap().to_string();
    let out = ok(&env, &["flow", "resume", &id]);
    assert!(!out.contains("▶ count"), "{out}");
    let status = latest(&env);
    assert_eq!(status["status"], "completed", "{status}");
    assert_eq!(
        std::fs::read_to_string(env.work.join("count.txt")).unwrap(),
        "x\n"
    );
    assert_eq!(status["nodes"]["after"]["outputs"]["output"], "x");
    // The killed run's shell node sees `go` and ends before the directory is removed.
    std::thread::sleep(Duration::from_millis(500));
}

const SLOW: &str = "name: slow\nmax_parallel: 1\nnodes:\n  - id: count\n    type: shell\n    command: echo x >> count.txt\n  - id: wait\n    type: shell\n    needs: [count]\n    command: while [ ! -f go ]; do sleep 0.1; done; echo waited\n  - id: after\n    type: shell\n    needs: [wait]\n    command: cat count.txt\n";

/// Starts `slow.yaml` and returns once its first node has finished (the caller waits for it).
#[allow(clippy::zombie_processes)]
fn start_slow(env: &Env) -> (std::process::Child, String) {
    std::fs::write(env.work.join("slow.yaml"), SLOW).unwrap();
    // The store exists before two processes use it at once.
    ok(env, &["flow", "runs"]);
    let mut child = env
        .keel()
        .args(["flow", "run", "slow.yaml"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    loop {
        let out = run(env, &["flow", "status", "--json"]);
        if out.status.success() {
            let v: Value = serde_json::from_slice(&out.stdout).unwrap();
            if v["nodes"]["count"]["status"] == "completed" {
                return (child, v["id"].as_str().unwrap().to_string());
            }
        }
        if let Some(status) = child.try_wait().unwrap() {
            panic!("`keel flow run slow.yaml` ended early: {status}");
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the first node never finished"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Waits (at most 60 s) for `child` and returns its output.
fn finish(env: &Env, mut child: std::process::Child) -> Output {
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(60) {
            child.kill().unwrap();
            let out = child.wait_with_output().unwrap();
            let state = run(env, &["flow", "status", "--json"]);
            panic!(
                "`keel flow status --follow` did not return; it printed\n{}\nthe run is\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&state.stdout)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

#[test]
fn status_follow_watches_a_run_live_and_returns_at_once_when_it_has_ended() {
    let env = empty_env();
    let (mut runner, id) = start_slow(&env);
    let follower = env
        .keel()
        .args(["flow", "status", &id, "--follow"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(600));
    std::fs::write(env.work.join("go"), "").unwrap();
    let out = finish(&env, follower);
    assert_exit(&out, 0);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with(&format!("run {id} · flow slow · running")),
        "{text}"
    );
    for line in ["completed  count", "completed  wait", "completed  after"] {
        assert!(text.contains(line), "{line} missing in\n{text}");
    }
    assert!(
        text.trim_end().ends_with(&format!("run {id} completed")),
        "{text}"
    );
    assert!(runner.wait().unwrap().success());

    // An ended run: the final states at once.
    let start = Instant::now();
    let text = ok(&env, &["flow", "status", "--follow"]);
    assert!(start.elapsed() < Duration::from_secs(10));
    assert!(text.contains("completed  after"), "{text}");
    assert!(
        text.trim_end().ends_with(&format!("run {id} completed")),
        "{text}"
    );
}

#[test]
fn status_follow_says_when_the_runs_process_is_gone() {
    let env = empty_env();
    let (mut runner, id) = start_slow(&env);
    runner.kill().unwrap(); // SIGKILL: the run stays `running` in the store
    runner.wait().unwrap();
    let follower = env
        .keel()
        .args(["flow", "status", &id, "--follow"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let out = finish(&env, follower);
    // The killed run's shell node lives on: let it end.
    std::fs::write(env.work.join("go"), "").unwrap();
    std::thread::sleep(Duration::from_millis(500)); // before the directory is removed
    assert_exit(&out, 1);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("completed  count"), "{text}");
    assert!(
        text.contains("is gone; `keel flow resume ") && text.contains(&id),
        "{text}"
    );
}
