//! The constitution's `required_gates` run in final verification, whatever `[verify]
//! commands` says: marked `required` in their events, reported to the model like any failing
//! gate, and a required gate that still fails makes the run's verification fail.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use keel_protocol::{ErrorCode, EventKind, SessionStatus};

/// `(gate, passed, required, attempt)` of every verification event.
fn verifications(h: &Harness) -> Vec<(String, bool, bool, u32)> {
    h.events()
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::Verification {
                gate,
                passed,
                required,
                attempt,
                ..
            } => Some((gate, passed, required, attempt)),
            _ => None,
        })
        .collect()
}

fn with_constitution(script: &str) -> Harness {
    let mut h = Harness::new(script);
    h.write(
        ".keel/constitution.json",
        r#"{"required_gates": ["test -f MUST_EXIST"]}"#,
    );
    h.config.verify.enabled = true;
    h.config.verify.commands = Some(vec!["true".into()]);
    h
}

#[tokio::test]
async fn a_failing_required_gate_fails_verification_and_names_the_gate() {
    let mut h = with_constitution(
        "turns:\n  - tool_calls: [{name: create_file, arguments: {path: a.txt, content: a}}]\n  - text: \"Done.\"\n",
    );
    h.config.agent.self_correction_cap = 0;
    let out = h.run("add a").await;
    assert_eq!(out.status, SessionStatus::Failed);
    let e = out.error.unwrap();
    assert_eq!(e.error_code, ErrorCode::VerificationFailed);
    assert!(
        e.message
            .contains("`test -f MUST_EXIST` (required by the constitution)"),
        "{}",
        e.message
    );
    assert_eq!(
        verifications(&h),
        [
            ("true".to_string(), true, false, 1),
            ("test -f MUST_EXIST".to_string(), false, true, 1),
        ]
    );
}

#[tokio::test]
async fn a_required_gate_goes_back_to_the_model_and_passes_once_fixed() {
    let h = with_constitution(
        r#"
turns:
  - tool_calls: [{name: create_file, arguments: {path: a.txt, content: a}}]
  - text: "Done."
  - tool_calls: [{name: create_file, arguments: {path: MUST_EXIST, content: "x"}}]
  - text: "Done, with the required file."
"#,
    );
    let out = h.run("add a").await;
    assert_eq!(out.status, SessionStatus::Completed, "{:?}", out.error);
    let v = verifications(&h);
    assert_eq!(v.len(), 4, "{v:?}");
    assert_eq!(v[1], ("test -f MUST_EXIST".to_string(), false, true, 1));
    assert_eq!(v[3], ("test -f MUST_EXIST".to_string(), true, true, 2));
    let text = h.request_text(2);
    assert!(
        text.contains("## Gate `test -f MUST_EXIST` (required by .keel/constitution.json)"),
        "{text}"
    );
    // The event JSON says so too; an ordinary gate's event carries no `required` key.
    let json: Vec<String> = h
        .events()
        .into_iter()
        .filter(|e| matches!(e.kind, EventKind::Verification { .. }))
        .map(|e| serde_json::to_string(&e).unwrap())
        .collect();
    assert!(json[1].contains("\"required\":true"), "{}", json[1]);
    assert!(!json[0].contains("required"), "{}", json[0]);
}

#[tokio::test]
async fn a_required_gate_that_is_also_configured_runs_once() {
    let mut h = with_constitution(
        "turns:\n  - tool_calls: [{name: create_file, arguments: {path: MUST_EXIST, content: a}}]\n  - text: \"Done.\"\n",
    );
    h.config.verify.commands = Some(vec!["test -f MUST_EXIST".into()]);
    let out = h.run("add it").await;
    assert_eq!(out.status, SessionStatus::Completed, "{:?}", out.error);
    assert_eq!(
        verifications(&h),
        [("test -f MUST_EXIST".to_string(), true, true, 1)]
    );
}
