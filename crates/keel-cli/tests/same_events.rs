//! One session runtime for every front end: the same scripted session driven through
//! `keel run --json` and through `keel serve`'s REST API produces the same event sequence
//! (types and numbering), `turn_finished` included.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use serde_json::{Value, json};

const SCRIPT: &str = r#"
turns:
  - text: "Writing the notes."
    tool_calls:
      - {name: create_file, arguments: {path: notes.txt, content: "one\n"}}
  - tool_calls:
      - {name: read_file, arguments: {path: notes.txt}}
  - text: "Notes written and checked."
"#;

const TASK: &str = "write notes.txt and check it";

/// Each event's type and seq.
fn shape(events: &[Value]) -> Vec<(String, u64)> {
    events
        .iter()
        .map(|e| {
            (
                e["type"].as_str().unwrap().to_string(),
                e["seq"].as_u64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn keel_run_and_the_server_emit_the_same_event_sequence() {
    // The CLI.
    let cli = Env::new();
    let script = cli.work.join("session.yaml");
    std::fs::write(&script, SCRIPT).unwrap();
    let out = cli
        .keel()
        .args(["run", "--json", "--script"])
        .arg(&script)
        .arg(TASK)
        .output()
        .unwrap();
    assert_exit(&out, 0);
    let cli_events: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v.get("seq").is_some() && v.get("type").is_some())
        .collect();

    // The server, same script, same task.
    let srv = Env::new();
    let script = srv.work.join("session.yaml");
    std::fs::write(&script, SCRIPT).unwrap();
    let (mut child, _, rest) = serve(&srv);
    let (status, created) = http(
        &rest,
        "POST",
        "/api/v1/sessions",
        Some(&json!({"provider": "scripted", "script": script.display().to_string()})),
    );
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_str().unwrap();
    let (status, turn) = http(
        &rest,
        "POST",
        &format!("/api/v1/sessions/{id}/messages"),
        Some(&json!({"content": TASK})),
    );
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(status, 200, "{turn}");
    let srv_events = turn["events"].as_array().unwrap().clone();

    let (cli_shape, srv_shape) = (shape(&cli_events), shape(&srv_events));
    assert_eq!(cli_shape, srv_shape);
    assert_eq!(
        cli_shape.last().map(|(t, _)| t.as_str()),
        Some("turn_finished")
    );
    assert!(cli_shape.iter().any(|(t, _)| t == "tool_result"));
    // Numbered 1, 2, 3, … in both.
    let seqs: Vec<u64> = cli_shape.iter().map(|(_, s)| *s).collect();
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>());
    // The same tool results and final answer.
    let results = |events: &[Value]| -> Vec<Value> {
        events
            .iter()
            .filter(|e| e["type"] == "tool_result")
            .map(|e| json!([e["name"], e["is_error"], e["content"]]))
            .collect()
    };
    assert_eq!(results(&cli_events), results(&srv_events));
    assert_eq!(turn["final_text"], "Notes written and checked.");
}
