//! Provider errors as a new user meets them, through the real binary: a server that is not
//! running, an unknown model, a refused key. Each fails fast, is not retried where retrying
//! cannot help, exits with the README's code and says what to check.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use keel_llm::mock::{MockReply, MockServer};
use serde_json::Value;

mod common;
use common::*;

fn of_type<'a>(events: &'a [Value], t: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == t).collect()
}

#[test]
fn nothing_listening_fails_in_two_quick_attempts_with_a_short_retry_line() {
    let env = Env::new();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}/v1");
    let started = Instant::now();
    let out = env
        .keel()
        .args([
            "run",
            "--provider",
            "llamacpp",
            "--model",
            "qwen",
            "--base-url",
            &url,
            "hello",
        ])
        .output()
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    assert_exit(&out, 1);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains(&format!(
            "nothing is listening at {url} — is the server running?"
        )),
        "{text}"
    );
    let retry_lines: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("attempt 2 of 2"))
        .collect();
    assert_eq!(retry_lines.len(), 1, "{text}");
    assert!(retry_lines[0].chars().count() < 120, "{}", retry_lines[0]);
    assert!(!text.contains("retry later"), "{text}");
    assert!(!text.contains("Recovery attempt"), "{text}");
}

#[test]
fn an_unknown_model_and_a_refused_key_exit_2_after_one_request_each() {
    let env = Env::new();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt
        .block_on(MockServer::queue(vec![
            MockReply::error(404, r#"{"error":{"message":"The model `gpt-9` does not exist","type":"invalid_request_error","code":"model_not_found"}}"#),
            MockReply::error(401, r#"{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","code":"invalid_api_key"}}"#),
        ]))
        .unwrap();
    let base = format!("{}/v1", server.url());
    let run = || {
        env.keel()
            .env("OPENAI_API_KEY", "sk-test-0000")
            .args([
                "run",
                "--json",
                "--provider",
                "openai",
                "--model",
                "gpt-9",
                "--base-url",
                &base,
                "hello",
            ])
            .output()
            .unwrap()
    };
    let out = run();
    assert_exit(&out, 2);
    let ev = json_lines(&out.stdout);
    assert!(of_type(&ev, "model_retry").is_empty(), "not retried");
    let error = of_type(&ev, "error")[0];
    assert_eq!(error["error_code"], "config_error");
    assert_eq!(error["retryable"], false);
    let message = error["message"].as_str().unwrap();
    assert!(
        message.contains("`gpt-9`") && message.contains(&base),
        "{message}"
    );
    assert_eq!(server.requests().len(), 1);

    let out = run();
    assert_exit(&out, 2);
    let ev = json_lines(&out.stdout);
    let error = of_type(&ev, "error")[0];
    assert_eq!(error["error_code"], "config_error");
    let message = error["message"].as_str().unwrap();
    assert!(
        message.contains("OPENAI_API_KEY") && message.contains(&base),
        "{message}"
    );
    assert!(!message.contains("sk-test-0000"));
    assert_eq!(server.requests().len(), 2, "a refused key is not retried");
    // Nothing ran in either: no failed sessions are left in the list.
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("was not kept"), "{stderr}");
    let listed = env.keel().args(["sessions", "--json"]).output().unwrap();
    assert_exit(&listed, 0);
    let listed: Value = serde_json::from_slice(&listed.stdout).unwrap();
    assert_eq!(listed.as_array().map(Vec::len), Some(0), "{listed}");
}

#[test]
fn doctor_ping_says_which_switches_a_local_server_needed() {
    let env = Env::new();
    let rt = tokio::runtime::Runtime::new().unwrap();
    // A server whose stream stops after its first bytes, and which answers whole replies.
    let whole = r#"{"id":"c1","object":"chat.completion","model":"qwen","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"pong"}}],"usage":{"prompt_tokens":12,"completion_tokens":1}}"#;
    let server = rt
        .block_on(MockServer::queue(vec![
            MockReply::sse("data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n"),
            MockReply::json(whole),
        ]))
        .unwrap();
    let base = format!("{}/v1", server.url());
    let out = env
        .keel()
        .args([
            "doctor",
            "--ping",
            "--provider",
            "llamacpp",
            "--model",
            "qwen",
            "--base-url",
            &base,
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let ping = text
        .lines()
        .find(|l| l.contains("ping llamacpp/qwen"))
        .unwrap_or("");
    assert!(ping.contains("\"pong\""), "{text}");
    assert!(ping.contains("needed: whole replies"), "{text}");
    let requests = server.requests();
    // The ping and its whole-reply retry; a local preset's template probe follows (it finds
    // the mock's queue empty and says the template was not measured).
    assert!(requests.len() >= 2, "{} requests", requests.len());
    assert!(text.contains("template "), "{text}");
    assert_eq!(
        requests[0].json()["max_tokens"],
        64,
        "a ping asks for a short reply"
    );
    assert_eq!(requests[1].json()["stream"], false);
}
