//! What `keel run` does when it cannot do the work, as CI sees it: a second run in a busy
//! workspace is refused (exit 5) with the other session's id, or waits for it (`--wait`);
//! the user's `[approval] policy` applies unless a flag says otherwise, and the policy line
//! is printed only when it denies something.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::process::Stdio;
use std::time::{Duration, Instant};

use common::*;
use serde_json::Value;

fn sessions(env: &Env) -> Vec<Value> {
    let out = env.keel().args(["sessions", "--json"]).output().unwrap();
    assert_exit(&out, 0);
    serde_json::from_slice::<Value>(&out.stdout)
        .unwrap()
        .as_array()
        .cloned()
        .unwrap_or_default()
}

#[test]
fn a_second_run_in_a_busy_workspace_is_refused_with_the_first_ones_id_or_waits() {
    let env = Env::new();
    let slow = env.script(
        "slow.yaml",
        "turns:\n  - text: \"Slow answer.\"\n    delay_ms: 2500\n",
    );
    let quick = env.script("quick.yaml", "turns:\n  - text: \"Quick answer.\"\n");
    let mut first = env
        .keel()
        .args(["run", "--script"])
        .arg(&slow)
        .arg("take your time")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Wait until the first run is recorded as running.
    let deadline = Instant::now() + Duration::from_secs(10);
    let first_id = loop {
        if let Some(s) = sessions(&env)
            .into_iter()
            .find(|s| s["status"] == "running")
        {
            break s["id"].as_str().unwrap().to_string();
        }
        assert!(Instant::now() < deadline, "the first run never started");
        std::thread::sleep(Duration::from_millis(50));
    };
    std::thread::sleep(Duration::from_millis(200));
    let out = env
        .keel()
        .args(["run", "--script"])
        .arg(&quick)
        .arg("me too")
        .output()
        .unwrap();
    assert_exit(&out, 5);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "another session ({first_id}) is running in this workspace"
        )),
        "{err}"
    );
    assert!(err.contains("--wait"), "{err}");
    assert_eq!(sessions(&env).len(), 1, "the refused run recorded nothing");

    // --wait waits for the first run, then runs.
    let out = env
        .keel()
        .args(["run", "--wait", "--script"])
        .arg(&quick)
        .arg("after you")
        .output()
        .unwrap();
    assert_exit(&out, 0);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("waiting for session {first_id}")),
        "{err}"
    );
    assert!(first.wait().unwrap().success());
    assert_eq!(sessions(&env).len(), 2);
}

/// `run_command` of a destructive command under each policy: denied (headless) or run.
fn rm_run(env: &Env, flags: &[&str]) -> (String, String) {
    let script = env.script(
        "rm.yaml",
        "turns:\n  - tool_calls:\n      - name: run_command\n        arguments: {command: \"rm -rf scratch\"}\n  - text: \"Done.\"\n",
    );
    let out = env
        .keel()
        .args(["run", "--json", "--script"])
        .arg(&script)
        .args(flags)
        .arg("clean up")
        .output()
        .unwrap();
    assert_exit(&out, 0);
    let result = json_lines(&out.stdout)
        .into_iter()
        .find(|e| e["type"] == "tool_result")
        .map(|e| e["content"].as_str().unwrap_or_default().to_string())
        .unwrap_or_default();
    (result, String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn the_users_approval_policy_applies_to_keel_run_unless_a_flag_overrides_it() {
    let env = Env::new();
    // No configuration: headless runs ask nothing, and say nothing about it.
    let (result, err) = rm_run(&env, &[]);
    assert!(!result.contains("not run"), "{result}");
    assert!(!err.contains("approval policy"), "{err}");
    // The user's own config says on-request: a destructive command is denied headless.
    env.user_config("[approval]\npolicy = \"on-request\"\n");
    let (result, err) = rm_run(&env, &[]);
    assert!(result.contains("not run"), "{result}");
    assert!(err.contains("approval policy: on-request"), "{err}");
    // An explicit flag wins over the file.
    let (result, _) = rm_run(&env, &["--approval", "never"]);
    assert!(!result.contains("not run"), "{result}");
}

fn git(dir: &std::path::Path, args: &[&str]) {
    // A git fixture, outside Keel's one spawn path (docs/SECURITY.md).
    #[allow(clippy::disallowed_methods)]
    let out = std::process::Command::new("git")
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("git is needed for this test: {e}"));
    assert!(out.status.success(), "git {args:?}: {out:?}");
}

/// A Rust repository without `target/` in a `.gitignore`: the turn builds (target/ appears
/// and fills) and edits a source file. `keel undo` restores the source and leaves the build
/// output alone — it neither lists nor deletes it.
#[test]
fn undo_in_a_git_repository_leaves_untracked_build_output_alone() {
    let env = Env::new();
    assert!(!env.work.join(".gitignore").exists());
    git(&env.work, &["init", "-q", "-b", "main"]);
    git(&env.work, &["add", "-A"]);
    git(&env.work, &["commit", "-qm", "init"]);
    let script = env.script(
        "build.yaml",
        "turns:\n  - tool_calls:\n      - name: run_command\n        arguments: {command: \"mkdir -p target/debug/deps && for i in 1 2 3 4 5 6; do echo obj > target/debug/deps/f$i.o; done\"}\n      - name: create_file\n        arguments: {path: src/extra.rs, content: \"pub fn extra() {}\\n\"}\n  - text: \"Done.\"\n",
    );
    let out = env
        .keel()
        .args(["run", "--script"])
        .arg(&script)
        .arg("build and add a module")
        .output()
        .unwrap();
    assert_exit(&out, 0);
    assert!(env.work.join("target/debug/deps/f6.o").exists());

    let out = env.keel().args(["undo", "--list"]).output().unwrap();
    assert_exit(&out, 0);
    let list = String::from_utf8_lossy(&out.stdout);
    assert!(!list.contains("target/"), "{list}");

    let out = env.keel().arg("undo").output().unwrap();
    assert_exit(&out, 0);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("1 file changed:"), "{text}");
    assert!(text.contains("removed    src/extra.rs"), "{text}");
    assert!(!text.contains("target/"), "{text}");
    assert!(!env.work.join("src/extra.rs").exists());
    for i in 1..=6 {
        assert!(
            env.work.join(format!("target/debug/deps/f{i}.o")).exists(),
            "build output deleted by undo"
        );
    }
}
