//! `examples/fuzzy-edit.yaml` end to end through the binary: the symbol read, the fuzzy edit
//! and the patch show up in the JSON event stream with their diffs, and the files change.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::Value;

mod common;
use common::*;

#[test]
fn the_fuzzy_edit_example_runs_and_shows_its_diffs() {
    let env = Env::new();
    let work = env.work.clone();
    let out = env
        .keel()
        .args(["run", "--provider", "scripted", "--json", "--script"])
        .arg(repo_root().join("examples/fuzzy-edit.yaml"))
        .arg("make mul saturate and test it")
        .output()
        .unwrap();
    assert_exit(&out, 0);
    let events: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let results: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "tool_result")
        .collect();
    assert_eq!(results.len(), 3);
    assert!(
        results.iter().all(|r| r["is_error"] == false),
        "{results:#?}"
    );
    assert!(
        results[0]["content"]
            .as_str()
            .unwrap()
            .starts_with("`src/lib.rs`: function `mul` (lines 8-11)"),
        "{}",
        results[0]["content"]
    );
    assert_eq!(results[1]["metadata"]["match_level"], "fuzzy");
    let diff = results[1]["details"]["diff"].as_str().unwrap();
    assert!(
        diff.contains("-    a * b\n+    a.saturating_mul(b)\n"),
        "{diff}"
    );
    assert_eq!(
        results[2]["details"]["files"],
        serde_json::json!(["tests/mul.rs"])
    );
    let lib = std::fs::read_to_string(work.join("src/lib.rs")).unwrap();
    assert!(lib.contains("/// Multiplies two numbers.\npub fn mul(a: i32, b: i32) -> i32 {\n    a.saturating_mul(b)\n}"), "{lib}");
    assert!(work.join("tests/mul.rs").exists());
}
