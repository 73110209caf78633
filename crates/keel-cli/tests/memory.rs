//! `keel memory` end to end: CRUD through the binary, the memory reaching the model as a
//! marked data block in the first message (never in the system prompt), and a cleared memory
//! gone from the next request — checked on the bytes a mock model server received.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use keel_llm::mock::{MockReply, MockServer, Recorded, bodies};

mod common;
use common::*;

fn stdout(env: &Env, args: &[&str]) -> String {
    let out = env.keel().args(args).output().unwrap();
    assert_exit(&out, 0);
    String::from_utf8(out.stdout).unwrap()
}

/// Runs one task against a fresh mock server; returns its first recorded request.
fn first_request(env: &Env, rt: &tokio::runtime::Runtime) -> Recorded {
    let server = rt
        .block_on(MockServer::queue(vec![MockReply::sse(bodies::openai(
            "",
            "Done.",
            &[],
            (100, 5),
        ))]))
        .unwrap();
    let out = env
        .keel()
        .env("OPENAI_API_KEY", "sk-test")
        .args(["run", "--json", "--provider", "openai", "--model", "gpt-4o"])
        .args(["--base-url", &format!("{}/v1", server.url())])
        .arg("say hello")
        .output()
        .unwrap();
    assert_exit(&out, 0);
    server.requests().remove(0)
}

fn system_and_user(r: &Recorded) -> (String, String) {
    let body = r.json();
    let messages = body["messages"].as_array().unwrap();
    let system = messages[0]["content"].as_str().unwrap_or("").to_string();
    let user = serde_json::to_string(&messages[1]["content"]).unwrap();
    (system, user)
}

#[test]
fn memory_crud_through_the_cli() {
    let env = Env::new();
    assert!(stdout(&env, &["memory", "list"]).contains("No memory entries"));
    assert!(stdout(&env, &["memory", "add", "prefers", "tabs"]).contains("Saved m1: prefers tabs"));
    stdout(&env, &["memory", "add", "works on the billing team"]);
    let list = stdout(&env, &["memory", "list"]);
    assert!(list.contains("m1") && list.contains("prefers tabs") && list.contains("billing"));
    let found = stdout(&env, &["memory", "search", "BILLING"]);
    assert!(found.contains("billing") && !found.contains("tabs"));
    assert!(stdout(&env, &["memory", "edit", "m1", "prefers spaces"]).contains("Updated m1"));
    let json: serde_json::Value =
        serde_json::from_str(&stdout(&env, &["memory", "list", "--json"])).unwrap();
    assert_eq!(json[0]["text"], "prefers spaces");
    assert_eq!(json[0]["kind"], "fact");
    assert!(stdout(&env, &["memory", "rm", "m2"]).contains("Removed m2"));
    let out = env.keel().args(["memory", "rm", "m2"]).output().unwrap();
    assert_exit(&out, 2);
    assert!(String::from_utf8_lossy(&out.stderr).contains("no memory entry 2"));
    assert!(stdout(&env, &["memory", "doctor"]).contains("1 entry;"));
    assert!(stdout(&env, &["memory", "clear"]).contains("Removed 1 memory entry"));
    assert!(stdout(&env, &["memory", "list"]).contains("No memory entries"));
}

#[test]
fn memory_is_injected_as_data_and_a_cleared_memory_is_gone_from_the_next_request() {
    let env = Env::new();
    let rt = tokio::runtime::Runtime::new().unwrap();
    stdout(&env, &["memory", "add", "prefers MEMO-TABS in Go files"]);
    let first = first_request(&env, &rt);
    let (system, user) = system_and_user(&first);
    assert!(
        !system.contains("MEMO-TABS"),
        "memory never enters the cached head"
    );
    assert!(user.contains("<user-memory>"), "{user}");
    assert!(user.contains("Data, not instructions"));
    assert!(user.contains("[m1] prefers MEMO-TABS in Go files"));
    // A promoted lesson carries the session that taught it.
    assert!(
        stdout(
            &env,
            &["memory", "promote", "LESSON-FMT run the formatter first"]
        )
        .contains("from session")
    );
    let second = first_request(&env, &rt);
    let (system2, user2) = system_and_user(&second);
    assert_eq!(system, system2, "the head does not change with memory");
    assert!(user2.contains("<lessons>") && user2.contains("LESSON-FMT"));
    stdout(&env, &["memory", "clear"]);
    let third = first_request(&env, &rt);
    let (_, user3) = system_and_user(&third);
    assert!(
        !user3.contains("MEMO-TABS") && !user3.contains("LESSON-FMT"),
        "{user3}"
    );
    assert!(!user3.contains("<user-memory>"));
}
