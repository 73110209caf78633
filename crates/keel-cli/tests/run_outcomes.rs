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
