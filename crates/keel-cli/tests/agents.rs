//! `keel run` with a scripted session that delegates to an explorer subagent: the child plays
//! the script's `children:` entry, its events are nested (JSON: its own `run_id` and the
//! parent's as `parent_run_id`; human output: indented under the parent), and its usage is
//! broken down in `session_finished`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::Value;

mod common;
use common::*;

const SCRIPT: &str = r#"
turns:
  - text: "Delegating the search."
    tool_calls:
      - name: agent_open
        arguments: {role: explorer, task: "Find where the crate's functions are defined."}
      - name: agent_eval
        arguments: {agent_id: a1}
  - text: "The explorer found them in src/lib.rs."
children:
  - turns:
      - tool_calls:
          - name: list_files
            arguments: {path: src}
      - text: "CHILD-ANSWER: the functions are in src/lib.rs."
"#;

#[test]
fn keel_run_delegates_to_an_explorer_and_nests_its_events() {
    let env = Env::new();
    let script = env.script("delegate.yaml", SCRIPT);
    let out = env
        .keel()
        .args(["run", "--json", "--provider", "scripted", "--script"])
        .arg(&script)
        .arg("where are the functions?")
        .output()
        .unwrap();
    assert_exit(&out, 0);
    let events = json_lines(&out.stdout);
    let parent_run = events[0]["run_id"].as_str().unwrap().to_string();
    let child: Vec<&Value> = events
        .iter()
        .filter(|e| e["parent_run_id"] == parent_run.as_str())
        .collect();
    let types: Vec<&str> = child.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(types.first(), Some(&"agent_started"), "{types:?}");
    assert_eq!(types.last(), Some(&"agent_finished"), "{types:?}");
    assert!(types.contains(&"tool_call"), "{types:?}");
    assert_eq!(child[0]["role"], "explorer");
    // The parent's model got the child's answer as agent_eval's result.
    let eval = events
        .iter()
        .find(|e| e["type"] == "tool_result" && e["name"] == "agent_eval")
        .unwrap();
    assert!(
        eval["content"].as_str().unwrap().contains("CHILD-ANSWER"),
        "{eval}"
    );
    let finished = events
        .iter()
        .find(|e| e["type"] == "session_finished")
        .unwrap();
    assert_eq!(finished["children"][0]["agent_id"], "a1");
    assert_eq!(finished["status"], "completed");

    // Human output: the child's lines are indented under the parent and labelled.
    let out = env
        .keel()
        .args(["run", "--provider", "scripted", "--script"])
        .arg(&script)
        .arg("where are the functions?")
        .output()
        .unwrap();
    assert_exit(&out, 0);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("│ ▸ subagent a1 (explorer"), "{text}");
    assert!(text.contains("[a1 explorer] → list_files"), "{text}");
    assert!(
        text.contains("■ subagent a1 (explorer) completed"),
        "{text}"
    );
}

#[test]
fn a_script_without_a_child_script_says_how_to_add_one() {
    let env = Env::new();
    let script = env.script(
        "nochild.yaml",
        "turns:\n  - tool_calls:\n      - name: agent_open\n        arguments: {role: explorer, task: x}\n  - text: done\n",
    );
    let out = env
        .keel()
        .args(["run", "--json", "--provider", "scripted", "--script"])
        .arg(&script)
        .arg("delegate")
        .output()
        .unwrap();
    assert_exit(&out, 0);
    let events = json_lines(&out.stdout);
    let open = events
        .iter()
        .find(|e| e["type"] == "tool_result" && e["name"] == "agent_open")
        .unwrap();
    assert_eq!(open["is_error"], true);
    assert!(
        open["content"]
            .as_str()
            .unwrap()
            .contains("under `children:`"),
        "{open}"
    );
}
