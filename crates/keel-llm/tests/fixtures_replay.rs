//! Every recorded provider stream in `tests/fixtures` is served by a local mock server, read by
//! the real client (HTTP, SSE, decoder) and assembled; the result must equal the fixture's
//! `.expected.json`: text, reasoning, tool calls with parsed arguments, stop reason, usage
//! (including cache read/creation tokens).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};

use common::*;
use keel_llm::mock::{MockReply, MockServer};
use keel_llm::sse::SseParser;
use keel_llm::{LlmError, ModelTurn, StopReason, TurnAssembler};
use serde_json::Value;

/// All stream bodies with their expectations, by wire format.
fn bodies(wire: &str) -> Vec<PathBuf> {
    let root = fixtures();
    let mut out = Vec::new();
    let mut visit = |dir: &Path| {
        for entry in std::fs::read_dir(dir).unwrap() {
            let p = entry.unwrap().path();
            let name = p.file_name().unwrap().to_string_lossy().to_string();
            let is_body = name.ends_with(".sse") || name.ends_with(".txt");
            if !is_body || !p.with_file_name(format!("{name}.expected.json")).exists() {
                continue;
            }
            let expected: Value = serde_json::from_slice(&read(&expected_path(&p))).unwrap();
            let provider = expected["provider"].as_str().unwrap_or_default();
            let matches = match wire {
                "anthropic" => provider == "anthropic",
                _ => provider == "openai-compatible",
            };
            if matches {
                out.push(p);
            }
        }
    };
    visit(&root.join("anthropic-sdk-python"));
    visit(&root.join("openai-python"));
    for dir in std::fs::read_dir(root.join("cassettes")).unwrap() {
        visit(&dir.unwrap().path());
    }
    out.sort();
    out
}

fn expected_path(body: &Path) -> PathBuf {
    let name = body.file_name().unwrap().to_string_lossy().to_string();
    body.with_file_name(format!("{name}.expected.json"))
}

/// Serves `body` once (in `chunk`-byte pieces) and assembles what the client makes of it.
async fn replay(
    wire: &str,
    body: Vec<u8>,
    chunk: usize,
) -> (
    Result<ModelTurn, LlmError>,
    TurnSnapshot,
    keel_llm::mock::Recorded,
) {
    let server = MockServer::queue(vec![MockReply::Sse { body, chunk }])
        .await
        .unwrap();
    let (preset, model) = match wire {
        "anthropic" => ("anthropic", "claude-sonnet-4-5"),
        _ => ("openai", "gpt-4o"),
    };
    let base = match wire {
        "anthropic" => server.url(),
        _ => format!("{}/v1", server.url()),
    };
    let p = provider(preset, model, &base);
    let events = events(p.as_ref(), &simple_request("hi")).await;
    let mut a = TurnAssembler::new();
    for e in events.unwrap_or_else(|e| panic!("stream failed: {e}")) {
        a.push(e);
    }
    let snapshot = TurnSnapshot {
        text: a.text().to_string(),
        stop_reason: a.stop_reason().cloned(),
        usage: a.usage(),
    };
    let recorded = server.requests().remove(0);
    (a.finish(), snapshot, recorded)
}

struct TurnSnapshot {
    text: String,
    stop_reason: Option<StopReason>,
    usage: keel_protocol::Usage,
}

fn stop_name(s: &Option<StopReason>) -> Value {
    match s {
        Some(StopReason::Other(o)) if o == "unknown" => Value::Null,
        Some(s) => Value::String(s.as_str().to_string()),
        None => Value::Null,
    }
}

fn u(v: &Value, key: &str) -> u64 {
    v[key].as_u64().unwrap_or(0)
}

/// The number of SSE events in a body equals the fixture's `n_events`, however it is split.
fn check_sse_count(body: &[u8], expected: &Value, name: &str) {
    for size in [body.len().max(1), 7, 1] {
        let mut p = SseParser::new();
        let mut out = Vec::new();
        for part in body.chunks(size) {
            p.push(part, &mut out);
        }
        p.finish(&mut out);
        assert_eq!(
            out.len() as u64,
            expected["n_events"].as_u64().unwrap(),
            "{name}: SSE event count with {size}-byte chunks"
        );
    }
}

#[tokio::test]
async fn anthropic_streams_assemble_exactly() {
    let paths = bodies("anthropic");
    assert_eq!(paths.len(), 14, "12 SDK fixtures + 2 cassette turns");
    for path in paths {
        let name = path.display().to_string();
        let body = read(&path);
        let expected: Value = serde_json::from_slice(&read(&expected_path(&path))).unwrap();
        check_sse_count(&body, &expected, &name);
        let (result, snap, request) = replay("anthropic", body, 64).await;
        assert_eq!(request.path, "/v1/messages", "{name}");
        assert_eq!(request.header("x-api-key"), Some(TEST_KEY));
        assert_eq!(request.header("anthropic-version"), Some("2023-06-01"));

        let blocks = expected["content"].as_array().unwrap();
        let text: String = blocks
            .iter()
            .filter(|b| b["type"] == "text")
            .map(|b| b["text"].as_str().unwrap())
            .collect();
        assert_eq!(snap.text, text, "{name}: text");
        assert_eq!(
            stop_name(&snap.stop_reason),
            expected["stop_reason"],
            "{name}: stop"
        );
        let eu = &expected["usage_final"];
        let read_tokens = u(eu, "cache_read_input_tokens");
        let written = u(eu, "cache_creation_input_tokens");
        assert_eq!(
            snap.usage.input_tokens,
            u(eu, "input_tokens") + read_tokens + written,
            "{name}"
        );
        assert_eq!(snap.usage.output_tokens, u(eu, "output_tokens"), "{name}");
        assert_eq!(snap.usage.cache_read_tokens, read_tokens, "{name}");
        assert_eq!(snap.usage.cache_creation_tokens, written, "{name}");
        assert!(
            snap.usage.cost_usd > 0.0,
            "{name}: priced from the built-in table"
        );

        // Client tool calls only: server tools run at Anthropic and are not Keel's to execute.
        let calls: Vec<&Value> = blocks.iter().filter(|b| b["type"] == "tool_use").collect();
        let partial = calls.iter().find_map(|c| c["_partial_json"].as_str());
        match (result, partial) {
            (Ok(turn), Some(p)) => {
                // Cut at max_tokens: the raw text reaches the loop (to be refused with a clear
                // message there), the turn and its usage are kept.
                assert_eq!(turn.stop_reason, StopReason::MaxTokens, "{name}");
                assert_eq!(
                    turn.tool_calls[0].arguments,
                    Value::String(p.to_string()),
                    "{name}"
                );
                assert_eq!(turn.tool_calls[0].name, calls[0]["name"].as_str().unwrap());
            }
            (Ok(turn), None) => {
                assert_eq!(turn.tool_calls.len(), calls.len(), "{name}: tool calls");
                for (got, want) in turn.tool_calls.iter().zip(&calls) {
                    assert_eq!(got.id, want["id"].as_str().unwrap(), "{name}");
                    assert_eq!(got.name, want["name"].as_str().unwrap(), "{name}");
                    assert_eq!(got.arguments, want["input"], "{name}");
                }
                assert_eq!(turn.text, text);
                assert_eq!(turn.usage.requests, 1);
            }
            (other, partial) => panic!("{name}: unexpected {other:?} (partial: {partial:?})"),
        }
    }
}

#[tokio::test]
async fn openai_compatible_streams_assemble_exactly() {
    let paths = bodies("openai");
    assert_eq!(paths.len(), 15, "12 SDK fixtures + 3 cassette turns");
    for path in paths {
        let name = path.display().to_string();
        let body = read(&path);
        let expected: Value = serde_json::from_slice(&read(&expected_path(&path))).unwrap();
        check_sse_count(&body, &expected, &name);
        let (result, snap, request) = replay("openai", body, 64).await;
        assert_eq!(request.path, "/v1/chat/completions", "{name}");
        assert_eq!(
            request.header("authorization"),
            Some(format!("Bearer {TEST_KEY}").as_str())
        );
        let turn = result.unwrap_or_else(|e| panic!("{name}: {e}"));

        // Only choice 0 counts (Keel never asks for n > 1).
        let choice = &expected["choices"][0];
        let content = choice["content"].as_str().unwrap();
        let refusal = choice["refusal"].as_str().unwrap();
        assert_eq!(turn.text, format!("{content}{refusal}"), "{name}: text");
        let reasoning = choice["reasoning_content"].as_str().unwrap();
        assert_eq!(
            turn.reasoning.as_deref().unwrap_or(""),
            reasoning,
            "{name}: reasoning"
        );
        let want_stop = match (
            choice["finish_reason"].as_str().unwrap(),
            refusal.is_empty(),
        ) {
            (_, false) => StopReason::Refusal,
            ("stop", true) => StopReason::EndTurn,
            ("tool_calls", true) => StopReason::ToolUse,
            ("length", true) => StopReason::MaxTokens,
            (other, true) => panic!("{name}: unmapped finish_reason {other}"),
        };
        assert_eq!(turn.stop_reason, want_stop, "{name}: stop");

        let calls = choice["tool_calls"].as_array().unwrap();
        assert_eq!(turn.tool_calls.len(), calls.len(), "{name}: tool calls");
        for (got, want) in turn.tool_calls.iter().zip(calls) {
            assert_eq!(got.id, want["id"].as_str().unwrap(), "{name}");
            assert_eq!(got.name, want["name"].as_str().unwrap(), "{name}");
            assert_eq!(got.arguments, want["arguments_parsed"], "{name}");
        }

        let eu = &expected["usage"];
        assert_eq!(turn.usage.input_tokens, u(eu, "prompt_tokens"), "{name}");
        assert_eq!(
            turn.usage.output_tokens,
            u(eu, "completion_tokens"),
            "{name}"
        );
        let cached = eu
            .get("prompt_cache_hit_tokens")
            .or_else(|| {
                eu.get("prompt_tokens_details")
                    .and_then(|d| d.get("cached_tokens"))
            })
            .and_then(Value::as_u64)
            .unwrap_or(0);
        assert_eq!(turn.usage.cache_read_tokens, cached, "{name}");
        assert_eq!(snap.usage, turn.usage.with_requests(0), "{name}");
    }
}

/// Splitting the body into single bytes changes nothing (tokens, UTF-8 and `\n\n` split).
#[tokio::test]
async fn byte_by_byte_delivery_assembles_the_same() {
    for (wire, rel) in [
        ("anthropic", "anthropic-sdk-python/tool_use_response.txt"),
        (
            "openai",
            "openai-python/test_parse_multiple_pydantic_tools__f82268f2fefd.sse",
        ),
        (
            "openai",
            "cassettes/pydantic__pydantic-ai__test_deepseek_model_thinking_stream/00_response.sse",
        ),
    ] {
        let body = read(&fixtures().join(rel));
        let (a, _, _) = replay(wire, body.clone(), 0).await;
        let (b, _, _) = replay(wire, body, 1).await;
        assert_eq!(a.unwrap(), b.unwrap(), "{rel}");
    }
}

/// A server that ignores `stream: true` and answers one JSON document is still understood.
#[tokio::test]
async fn non_streamed_deepseek_reply_with_reasoning_is_read() {
    let dir = fixtures().join("cassettes/pydantic__pydantic-ai__test_deepseek_model_thinking_part");
    let body = String::from_utf8(read(&dir.join("00_response.json"))).unwrap();
    let expected: Value = serde_json::from_str(&body).unwrap();
    let server = MockServer::queue(vec![MockReply::json(body)])
        .await
        .unwrap();
    let p = provider("deepseek", "deepseek-reasoner", &server.url());
    let turn = turn(p.as_ref(), &simple_request("How do I cross the street?"))
        .await
        .unwrap();
    let message = &expected["choices"][0]["message"];
    assert_eq!(turn.text, message["content"].as_str().unwrap());
    assert_eq!(
        turn.reasoning.as_deref(),
        message["reasoning_content"].as_str()
    );
    assert_eq!(turn.stop_reason, StopReason::EndTurn);
    assert_eq!(
        turn.usage.input_tokens,
        expected["usage"]["prompt_tokens"].as_u64().unwrap()
    );
    assert_eq!(server.requests()[0].path, "/chat/completions");
}

trait WithRequests {
    fn with_requests(self, n: u64) -> Self;
}

impl WithRequests for keel_protocol::Usage {
    fn with_requests(mut self, n: u64) -> Self {
        self.requests = n;
        self
    }
}
