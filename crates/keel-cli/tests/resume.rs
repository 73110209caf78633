//! Sessions remember how they were started: `keel run --resume ID` and `keel run --continue`
//! need no repeated provider flags (a local mock server stands in for the provider), and the
//! hint printed after a blocker works when pasted as it is.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use keel_llm::mock::{MockReply, MockServer, bodies};
use serde_json::Value;

const KEY: &str = "sk-resume-test-1234";

fn reply(text: &str) -> MockReply {
    MockReply::sse(bodies::openai("", text, &[], (900, 5)))
}

fn model_of(body: &str) -> String {
    serde_json::from_str::<Value>(body).unwrap()["model"]
        .as_str()
        .unwrap()
        .to_string()
}

/// A first run with openai gpt-4o at `server`; its session id.
fn first_run(env: &Env, server: &MockServer) -> String {
    let base = format!("{}/v1", server.url());
    let first = env
        .keel()
        .env("OPENAI_API_KEY", KEY)
        .args(["run", "--json", "--provider", "openai", "--model", "gpt-4o"])
        .args(["--base-url", &base])
        .arg("what is this?")
        .output()
        .unwrap();
    assert_exit(&first, 0);
    json_lines(&first.stdout)[0]["session_id"]
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn resume_and_continue_reuse_the_provider_model_and_base_url() {
    let env = Env::new();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt
        .block_on(MockServer::queue(vec![
            reply("First answer."),
            reply("Second answer."),
            reply("Third answer."),
        ]))
        .unwrap();
    let id = first_run(&env, &server);

    // No provider flags: the stored provider, model and base URL are used again.
    let second = env
        .keel()
        .env("OPENAI_API_KEY", KEY)
        .args(["run", "--json", "--resume", &id, "and then?"])
        .output()
        .unwrap();
    assert_exit(&second, 0);
    let ev = json_lines(&second.stdout);
    assert_eq!(ev[0]["type"], "session_resumed");
    assert_eq!(ev[0]["session_id"], id.as_str());

    // --continue picks the latest session of this workspace.
    let third = env
        .keel()
        .env("OPENAI_API_KEY", KEY)
        .args(["run", "--json", "-c", "anything else?"])
        .output()
        .unwrap();
    assert_exit(&third, 0);
    let ev = json_lines(&third.stdout);
    assert_eq!(ev[0]["session_id"], id.as_str());
    let finished = ev
        .iter()
        .find(|e| e["type"] == "assistant_message")
        .unwrap();
    assert_eq!(finished["text"], "Third answer.");

    let reqs = server.requests();
    assert_eq!(reqs.len(), 3, "every run reached the original base URL");
    for r in &reqs {
        assert_eq!(model_of(&r.body), "gpt-4o");
        assert_eq!(r.path, "/v1/chat/completions");
    }
}

/// A flag given again when resuming wins over what the session was started with; the rest
/// (provider, base URL) stays the session's own.
#[test]
fn a_flag_given_again_on_resume_wins_over_the_stored_one() {
    let env = Env::new();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt
        .block_on(MockServer::queue(vec![
            reply("First answer."),
            reply("Second answer."),
        ]))
        .unwrap();
    let id = first_run(&env, &server);
    let second = env
        .keel()
        .env("OPENAI_API_KEY", KEY)
        .args(["run", "--json", "--resume", &id, "--model", "gpt-4o-mini"])
        .arg("and then?")
        .output()
        .unwrap();
    assert_exit(&second, 0);
    assert_eq!(json_lines(&second.stdout)[0]["session_id"], id.as_str());
    let models: Vec<String> = server
        .requests()
        .iter()
        .map(|r| model_of(&r.body))
        .collect();
    assert_eq!(models, ["gpt-4o", "gpt-4o-mini"]);
}

#[test]
fn the_blocker_hint_works_when_pasted() {
    let env = Env::new();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt
        .block_on(MockServer::queue(vec![
            MockReply::sse(bodies::openai(
                "",
                "",
                &[("c1", "ask_user", r#"{"question": "Which file?"}"#)],
                (900, 5),
            )),
            reply("Done with README.md."),
        ]))
        .unwrap();
    let out = env
        .keel()
        .env("OPENAI_API_KEY", KEY)
        .args(["run", "--provider", "openai", "--model", "gpt-4o"])
        .args(["--base-url", &format!("{}/v1", server.url())])
        .arg("tidy a file")
        .output()
        .unwrap();
    assert_exit(&out, 3);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .find(|l| l.contains("then: "))
        .unwrap_or_else(|| panic!("no hint in {stdout}"));
    let answer = line
        .split("answer: ")
        .nth(1)
        .and_then(|r| r.split("  then: ").next())
        .unwrap()
        .replace("\"…\"", "README.md");
    let resume = line.split("then: ").nth(1).unwrap().trim();
    assert!(resume.starts_with("keel run --resume "), "{resume}");
    // Both commands pasted as printed: no provider flags.
    for command in [answer.as_str(), resume] {
        let words: Vec<&str> = command.split_whitespace().skip(1).collect();
        let ran = env
            .keel()
            .env("OPENAI_API_KEY", KEY)
            .args(&words)
            .output()
            .unwrap();
        assert_exit(&ran, 0);
        if command == resume {
            assert!(String::from_utf8_lossy(&ran.stdout).contains("Done with README.md."));
        }
    }
    assert_eq!(server.requests().len(), 2);

    // With nothing to continue, --continue says so.
    let empty = Env::new();
    let out = empty.keel().args(["run", "--continue"]).output().unwrap();
    assert_exit(&out, 2);
    assert!(String::from_utf8_lossy(&out.stderr).contains("no session has run in"));
}
