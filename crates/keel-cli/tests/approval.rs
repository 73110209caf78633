//! Headless approvals: `keel run --approval` picks the policy (default `never`); nobody can
//! answer, so a call that would ask is denied and the model is told why; the choice is
//! printed once.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use serde_json::Value;

const REMOVE: &str = r#"
turns:
  - tool_calls:
      - {id: rm1, name: run_command, arguments: {command: "rm README.md"}}
  - text: "Done."
"#;

fn result(events: &[Value], id: &str) -> Value {
    events
        .iter()
        .find(|e| e["type"] == "tool_result" && e["id"] == id)
        .cloned()
        .unwrap()
}

#[test]
fn headless_on_request_denies_a_destructive_command_with_an_explanation() {
    let env = Env::new();
    let script = env.script("rm.yaml", REMOVE);
    let out = env
        .keel()
        .args(["run", "--json", "--approval", "on-request", "--script"])
        .arg(&script)
        .arg("tidy up")
        .output()
        .unwrap();
    assert_exit(&out, 0);
    assert!(env.work.join("README.md").exists(), "the file is untouched");
    let events = json_lines(&out.stdout);
    let r = result(&events, "rm1");
    assert_eq!(r["is_error"], true);
    let content = r["content"].as_str().unwrap();
    assert!(content.contains("nobody to approve"), "{content}");
    let resolved: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "approval_resolved")
        .collect();
    assert_eq!(resolved.len(), 1);
    assert_eq!(resolved[0]["approved"], false);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        stderr.matches("approval policy: on-request").count(),
        1,
        "{stderr}"
    );
}

#[test]
fn headless_default_is_never_but_deny_rules_hold() {
    let env = Env::new();
    let script = env.script("rm.yaml", REMOVE);
    let out = env
        .keel()
        .args(["run", "--json", "--script"])
        .arg(&script)
        .arg("tidy up")
        .output()
        .unwrap();
    assert_exit(&out, 0);
    // Nothing is denied, so nothing is said about the policy (no line before every run).
    assert!(!String::from_utf8_lossy(&out.stderr).contains("approval policy"));
    assert!(!env.work.join("README.md").exists(), "never asks nothing");

    let env = Env::new();
    env.config("[approval]\ndeny = [\"run_command:rm\"]\n");
    let out = env
        .keel()
        .args(["run", "--json", "--script"])
        .arg(&script)
        .arg("tidy up")
        .output()
        .unwrap();
    assert_exit(&out, 0);
    assert!(env.work.join("README.md").exists());
    let r = result(&json_lines(&out.stdout), "rm1");
    assert!(
        r["content"].as_str().unwrap().contains("run_command:rm"),
        "{r}"
    );
}

/// A verification gate the project's `.keel/config.toml` sets is judged like any command: under
/// `--approval untrusted` nobody can approve it headless, so it is denied, README.md survives
/// and the run fails unverified, saying so. The same gate in the user's own config runs.
#[test]
fn a_project_gate_is_judged_like_any_command_and_denied_headless() {
    let env = Env::new();
    let script = env.script("done.yaml", "turns:\n  - text: \"Done.\"\n");
    env.config("[verify]\nalways = true\ncommands = [\"rm README.md\"]\n");
    let run = |env: &Env| {
        env.keel()
            .env("KEEL_VERIFY__ENABLED", "true")
            .args(["run", "--json", "--approval", "untrusted", "--script"])
            .arg(&script)
            .arg("finish up")
            .output()
            .unwrap()
    };
    let out = run(&env);
    assert!(env.work.join("README.md").exists(), "the gate did not run");
    assert_exit(&out, 1);
    let events = json_lines(&out.stdout);
    let gate = events
        .iter()
        .find(|e| e["type"] == "verification")
        .cloned()
        .unwrap();
    assert_eq!(gate["passed"], false);
    let output = gate["output"].as_str().unwrap();
    assert!(
        output.contains("nobody to approve") && output.contains(".keel/config.toml"),
        "{output}"
    );
    assert!(
        events
            .iter()
            .any(|e| e["type"] == "approval_resolved" && e["approved"] == false),
        "the approval policy decided"
    );

    // The user's own gate is the user's choice: it runs as configured.
    let env = Env::new();
    env.user_config("[verify]\nalways = true\ncommands = [\"rm README.md\"]\n");
    let out = run(&env);
    assert_exit(&out, 0);
    assert!(!env.work.join("README.md").exists(), "the user's gate ran");
}
