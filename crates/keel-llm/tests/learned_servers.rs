//! What Keel learns about a model server from its behaviour, how it meets it, and that the
//! next client (the next run) starts right — against mock servers that reproduce each
//! behaviour: a chat template that drops `role: tool` messages or the tool schemas (its
//! `prompt_tokens` are computed from what such a template renders), a context window the server
//! enforces (llama-cpp-python's error body), a stream that ends before its finish reason, and a
//! stream without usage (llama-cpp-python's `\r\n`-separated events, `stream_options` ignored).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::sync::Arc;

use common::*;
use keel_llm::mock::{MockReply, MockServer, Recorded, bodies};
use keel_llm::{ChatRequest, LlmError, Provider, Role, Router, StreamEvent, build_provider};
use keel_protocol::{ContentBlock, Message, ToolSpec};
use serde_json::{Value, json};

/// A client of `base_url` (llama-cpp-python preset) remembering what it learns in `dir`.
fn learning(base_url: &str, dir: &Path) -> Arc<dyn Provider> {
    let config = llm_config("llamacpp", "smollm2", base_url);
    let target = Router::new(&config, Path::new("/"))
        .with_learned_dir(Some(dir.to_path_buf()))
        .target(Role::Main)
        .unwrap();
    build_provider(&target, &|_| None).unwrap()
}

/// How a chat template renders a request, counted the way a server counts its prompt (here
/// four bytes a token): which parts reach the model.
#[derive(Clone, Copy)]
struct Template {
    tools: bool,
    tool_messages: bool,
}

impl Template {
    fn prompt_tokens(self, body: &Value) -> u64 {
        let mut bytes = 0;
        for m in body["messages"].as_array().into_iter().flatten() {
            if m["role"] == "tool" && !self.tool_messages {
                continue;
            }
            bytes += m["content"].as_str().map_or(0, str::len) + 8;
            bytes += m.get("tool_calls").map_or(0, |c| c.to_string().len());
        }
        if self.tools {
            bytes += body.get("tools").map_or(0, |t| t.to_string().len());
        }
        (bytes as u64).div_ceil(4)
    }

    /// A server answering every request with a short text and this template's prompt size.
    async fn serve(self) -> MockServer {
        MockServer::with_handler(move |req: &Recorded, _| {
            let prompt = self.prompt_tokens(&req.json());
            if req.json()["stream"] == true {
                MockReply::sse(bodies::openai("", "ok", &[], (prompt, 1)))
            } else {
                MockReply::json(
                    json!({"id": "c", "object": "chat.completion", "model": "smollm2",
                           "choices": [{"index": 0, "finish_reason": "stop",
                                        "message": {"role": "assistant", "content": "ok"}}],
                           "usage": {"prompt_tokens": prompt, "completion_tokens": 1,
                                     "total_tokens": prompt + 1}})
                    .to_string(),
                )
            }
        })
        .await
        .unwrap()
    }
}

fn tools() -> Vec<ToolSpec> {
    ["read_file", "list_files", "edit_file", "run_command"]
        .iter()
        .map(|name| ToolSpec {
            name: (*name).into(),
            description: format!("{name}: does what its name says to a file of the workspace, given a path relative to the workspace root; returns the result as text, numbered by line where that helps."),
            input_schema: json!({"type": "object", "properties": {
                "path": {"type": "string", "description": "A path relative to the workspace root."},
                "limit": {"type": "integer", "description": "How many lines at most."}},
                "required": ["path"]}),
        })
        .collect()
}

/// A conversation of `calls` finished `read_file` calls, each with a result of `result_bytes`.
fn conversation(calls: usize, result_bytes: usize) -> ChatRequest {
    let mut messages = vec![Message::user_text(
        "Add a function that returns 42 to src/lib.rs.",
    )];
    for i in 0..calls {
        messages.push(Message {
            role: keel_protocol::Role::Assistant,
            content: vec![ContentBlock::ToolUse {
                id: format!("call_{i}"),
                name: "read_file".into(),
                input: json!({"path": "src/lib.rs"}),
            }],
        });
        messages.push(Message {
            role: keel_protocol::Role::User,
            content: vec![ContentBlock::ToolResult {
                tool_use_id: format!("call_{i}"),
                content: "pub fn one() -> u32 { 1 }\n".repeat(result_bytes / 26 + 1),
                is_error: false,
            }],
        });
    }
    ChatRequest {
        system: "You are a coding agent.".into(),
        tools: tools(),
        messages,
        max_tokens: None,
    }
}

fn notices(events: &[StreamEvent]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::Notice(n) => Some(n.clone()),
            _ => None,
        })
        .collect()
}

fn roles(r: &Recorded) -> Vec<String> {
    r.json()["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap_or("").to_string())
        .collect()
}

#[tokio::test]
async fn a_template_that_drops_tool_results_is_noticed_answered_and_remembered() {
    let server = Template {
        tools: true,
        tool_messages: false,
    }
    .serve()
    .await;
    let home = tempfile::tempdir().unwrap();
    let base = format!("{}/v1", server.url());
    let p = learning(&base, home.path());
    let first = events(p.as_ref(), &conversation(1, 800)).await.unwrap();
    assert!(notices(&first).is_empty(), "{:?}", notices(&first));
    // The next request adds ~200 tokens of results; the prompt grows only by the call.
    let second = events(p.as_ref(), &conversation(2, 800)).await.unwrap();
    let said = notices(&second);
    assert!(
        said.iter()
            .any(|n| n.contains("drops tool results") && n.contains("tool_results_as_user")),
        "{said:?}"
    );
    events(p.as_ref(), &conversation(3, 800)).await.unwrap();
    let requests = server.requests();
    assert!(roles(&requests[1]).contains(&"tool".to_string()));
    assert!(
        !roles(&requests[2]).contains(&"tool".to_string()),
        "results now go as user messages: {:?}",
        roles(&requests[2])
    );
    assert!(
        p.adaptations().iter().any(|a| a.contains("learned")),
        "{:?}",
        p.adaptations()
    );

    // The next run starts right: its very first request sends the results as user messages.
    let next = learning(&base, home.path());
    events(next.as_ref(), &conversation(1, 800)).await.unwrap();
    let first_of_next = server.requests().pop().unwrap();
    assert!(!roles(&first_of_next).contains(&"tool".to_string()));
    // Another model on the same server has learned nothing.
    let other = {
        let config = llm_config("llamacpp", "gemma3", &base);
        let target = Router::new(&config, Path::new("/"))
            .with_learned_dir(Some(home.path().to_path_buf()))
            .target(Role::Main)
            .unwrap();
        build_provider(&target, &|_| None).unwrap()
    };
    events(other.as_ref(), &conversation(1, 800)).await.unwrap();
    assert!(roles(&server.requests().pop().unwrap()).contains(&"tool".to_string()));
}

#[tokio::test]
async fn a_template_that_renders_tool_results_is_left_alone() {
    let server = Template {
        tools: true,
        tool_messages: true,
    }
    .serve()
    .await;
    let home = tempfile::tempdir().unwrap();
    let p = learning(&format!("{}/v1", server.url()), home.path());
    for n in 1..=3 {
        let ev = events(p.as_ref(), &conversation(n, 800)).await.unwrap();
        assert!(notices(&ev).is_empty(), "{:?}", notices(&ev));
    }
    assert!(roles(&server.requests()[2]).contains(&"tool".to_string()));
}

/// A weak model's results are short (`list_files` of three files, one-line errors: ~40
/// estimated tokens each), too few to judge one request at a time: they add up from the last
/// request judged, so a template that drops them is found after a few requests (a plan_exec
/// run of SmolLM2 sent all its results as `role: tool` to a template that dropped them) — and
/// one that renders them is still left alone.
#[tokio::test]
async fn short_tool_results_add_up_until_a_dropping_template_is_found() {
    for (renders, expect_found) in [(false, true), (true, false)] {
        let server = Template {
            tools: true,
            tool_messages: renders,
        }
        .serve()
        .await;
        let home = tempfile::tempdir().unwrap();
        let p = learning(&format!("{}/v1", server.url()), home.path());
        let mut found_at = None;
        for n in 1..=6 {
            let said = notices(&events(p.as_ref(), &conversation(n, 150)).await.unwrap());
            if said.iter().any(|n| n.contains("drops tool results")) && found_at.is_none() {
                found_at = Some(n);
            }
        }
        assert_eq!(
            found_at.is_some(),
            expect_found,
            "renders: {renders}, {found_at:?}"
        );
        if let Some(n) = found_at {
            assert!(n <= 5, "found after {n} requests");
            assert!(!roles(&server.requests().pop().unwrap()).contains(&"tool".to_string()));
        }
    }
}

/// A template that frames each tool call in a third as many tokens again as the call itself
/// (llama-cpp-python's `chatml-function-calling` writes `functions.NAME:` and the arguments
/// inside its own markers): the calls then account for much of the prompt's growth, and
/// dropped short results are still found — while rendered ones are still left alone.
#[tokio::test]
async fn dropped_results_are_found_beside_heavily_framed_calls() {
    for renders in [false, true] {
        let template = Template {
            tools: true,
            tool_messages: renders,
        };
        let server = MockServer::with_handler(move |req: &Recorded, _| {
            let body = req.json();
            let calls: u64 = body["messages"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|m| m.get("tool_calls"))
                .map(|c| (c.to_string().len() as u64 + 8).div_ceil(4))
                .sum();
            let prompt = template.prompt_tokens(&body) + calls / 3;
            MockReply::json(whole_reply("ok", prompt))
        })
        .await
        .unwrap();
        let home = tempfile::tempdir().unwrap();
        let p = learning(&format!("{}/v1", server.url()), home.path());
        let mut found = false;
        for n in 1..=6 {
            let said = notices(&events(p.as_ref(), &conversation(n, 150)).await.unwrap());
            found |= said.iter().any(|n| n.contains("drops tool results"));
        }
        assert_eq!(found, !renders, "renders: {renders}");
    }
}

/// A conversation rewritten between two requests (compaction put a summary in place of its
/// start) is not a prompt that failed to grow: nothing is concluded from it.
#[tokio::test]
async fn a_rewritten_conversation_is_not_taken_for_dropped_results() {
    let server = Template {
        tools: true,
        tool_messages: true,
    }
    .serve()
    .await;
    let home = tempfile::tempdir().unwrap();
    let p = learning(&format!("{}/v1", server.url()), home.path());
    // The first request's task came with a long note; from the next on, a compaction summary
    // stands in its place — the prompt shrinks by more than the new results add.
    let mut first = conversation(1, 150);
    first.messages[0] = Message::user_text("Add a function that returns 42. ".repeat(80));
    events(p.as_ref(), &first).await.unwrap();
    for n in 2..=6 {
        let said = notices(&events(p.as_ref(), &conversation(n, 150)).await.unwrap());
        assert!(said.is_empty(), "request {n}: {said:?}");
    }
    assert!(roles(&server.requests().pop().unwrap()).contains(&"tool".to_string()));
}

#[tokio::test]
async fn a_template_that_drops_the_tools_is_reported_once_and_remembered() {
    let server = Template {
        tools: false,
        tool_messages: true,
    }
    .serve()
    .await;
    let home = tempfile::tempdir().unwrap();
    let base = format!("{}/v1", server.url());
    let p = learning(&base, home.path());
    let said = notices(&events(p.as_ref(), &conversation(0, 0)).await.unwrap());
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(
        said[0].contains("leaves the tool schemas out") && said[0].contains("cannot call"),
        "{said:?}"
    );
    let again = notices(&events(p.as_ref(), &conversation(0, 0)).await.unwrap());
    assert!(again.is_empty(), "said once: {again:?}");
    assert!(p.adaptations().iter().any(|a| a.contains("drops the tool")));
    // The next run says it at once, before any reply.
    let next = learning(&base, home.path());
    let said = notices(&events(next.as_ref(), &conversation(0, 0)).await.unwrap());
    assert!(
        said.iter()
            .any(|n| n.contains("leaves the tool schemas out")),
        "{said:?}"
    );
}

#[tokio::test]
async fn a_template_that_renders_the_tools_raises_nothing() {
    let server = Template {
        tools: true,
        tool_messages: true,
    }
    .serve()
    .await;
    let home = tempfile::tempdir().unwrap();
    let p = learning(&format!("{}/v1", server.url()), home.path());
    let said = notices(&events(p.as_ref(), &conversation(0, 0)).await.unwrap());
    assert!(said.is_empty(), "{said:?}");
    assert!(!p.adaptations().iter().any(|a| a.contains("drops")));
}

#[tokio::test]
async fn a_stream_without_a_finish_reason_is_remembered_so_the_next_run_asks_whole() {
    let first_bytes = "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1764300000,\"model\":\"smollm2\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\"},\"logprobs\":null,\"finish_reason\":null}]}\r\n\r\n";
    let server = MockServer::with_handler(move |req: &Recorded, _| {
        if req.json()["stream"] == true {
            MockReply::sse(first_bytes)
        } else {
            MockReply::json(
                json!({"id": "c", "object": "chat.completion", "model": "smollm2",
                       "choices": [{"index": 0, "finish_reason": "stop",
                                    "message": {"role": "assistant", "content": "ok"}}],
                       "usage": {"prompt_tokens": 9, "completion_tokens": 1, "total_tokens": 10}})
                .to_string(),
            )
        }
    })
    .await
    .unwrap();
    let home = tempfile::tempdir().unwrap();
    let base = format!("{}/v1", server.url());
    let p = learning(&base, home.path());
    let err = events(p.as_ref(), &simple_request("hi")).await.unwrap_err();
    assert!(matches!(err, LlmError::Truncated(_)), "{err:?}");
    let next = learning(&base, home.path());
    let t = turn(next.as_ref(), &simple_request("hi")).await.unwrap();
    assert_eq!(t.text, "ok");
    let requests = server.requests();
    assert_eq!(
        requests.len(),
        2,
        "no streamed request that fails every run"
    );
    assert_eq!(requests[1].json()["stream"], false);
    let file = std::fs::read_to_string(home.path().join(keel_llm::learned::FILE_NAME)).unwrap();
    assert!(file.contains(&base) && file.contains("smollm2"), "{file}");
}

/// llama-cpp-python's answer to a request larger than its window (HTTP 400).
fn overflow(window: u64, prompt: u64, completion: u64) -> String {
    format!(
        r#"{{"error": {{"message": "This model's maximum context length is {window} tokens, however you requested {} tokens ({prompt} in your prompt; {completion} for the completion). Please reduce your prompt; or completion length.", "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}}}}"#,
        prompt + completion
    )
}

#[tokio::test]
async fn max_tokens_fits_the_window_the_server_enforced_in_this_run_and_the_next() {
    let server = MockServer::with_handler(|req: &Recorded, _| {
        let body = req.json();
        let limit = body["max_tokens"].as_u64().unwrap_or(u64::MAX);
        let prompt = Template {
            tools: true,
            tool_messages: true,
        }
        .prompt_tokens(&body);
        if prompt + limit > 2048 {
            MockReply::error(400, overflow(2048, prompt, limit))
        } else {
            MockReply::sse(bodies::openai("", "ok", &[], (prompt, 1)))
        }
    })
    .await
    .unwrap();
    let home = tempfile::tempdir().unwrap();
    let base = format!("{}/v1", server.url());
    let p = learning(&base, home.path());
    let err = events(p.as_ref(), &conversation(0, 0)).await.unwrap_err();
    assert!(
        matches!(
            err,
            LlmError::ContextLength {
                window: Some(2048),
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(p.info().context_window, Some(2048));
    // The same request again fits: prompt + max_tokens ≤ 2048.
    events(p.as_ref(), &conversation(0, 0)).await.unwrap();
    let sent = server.requests()[1].json();
    let limit = sent["max_tokens"].as_u64().unwrap();
    assert!((256..4096).contains(&limit), "{sent}");
    // A larger conversation gets a smaller limit, still inside the window.
    events(p.as_ref(), &conversation(2, 800)).await.unwrap();
    let larger = server.requests()[2].json()["max_tokens"].as_u64().unwrap();
    assert!(larger < limit, "{larger} vs {limit}");

    // The next run knows the window before its first request.
    let next = learning(&base, home.path());
    assert_eq!(next.info().context_window, Some(2048));
    events(next.as_ref(), &conversation(0, 0)).await.unwrap();
    assert_eq!(
        server.requests().len(),
        4,
        "no overflow on the next run's first request"
    );

    // A request that cannot fit is not sent at all.
    let huge = conversation(3, 4000);
    let err = events(next.as_ref(), &huge).await.unwrap_err();
    assert!(
        matches!(
            err,
            LlmError::ContextLength {
                window: Some(2048),
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("did not send"), "{err}");
    assert_eq!(server.requests().len(), 4);
}

/// llama-cpp-python 0.3 with `chatml-function-calling` and SmolLM2's tokenizer, as it counts a
/// prompt: a fixed preamble of the template (~130 tokens, with or without tools) plus the text
/// at about five bytes a token (Keel estimates four).
fn preamble_prompt(body: &Value) -> u64 {
    let mut bytes = 0;
    for m in body["messages"].as_array().into_iter().flatten() {
        bytes += m["content"].as_str().map_or(0, str::len);
        bytes += m.get("tool_calls").map_or(0, |c| c.to_string().len());
    }
    bytes += body.get("tools").map_or(0, |t| t.to_string().len());
    130 + bytes as u64 / 5
}

/// llama-cpp-python's whole (unstreamed) reply, as the server sends it.
fn whole_reply(content: &str, prompt: u64) -> String {
    json!({"id": "chatcmpl-1d5d9387-6d0d-43ea-a526-907a5fd35a8d", "object": "chat.completion",
           "created": 1795882500u64, "model": "smollm2",
           "choices": [{"index": 0, "message": {"content": content, "role": "assistant"},
                        "logprobs": null, "finish_reason": "stop"}],
           "usage": {"prompt_tokens": prompt, "completion_tokens": 2, "total_tokens": prompt + 2}})
    .to_string()
}

#[tokio::test]
async fn a_short_request_does_not_make_every_later_prompt_look_larger() {
    // The window is enforced (llama-cpp-python's 400), and a short request — the compaction
    // summary Keel asks for, no tools — counts far more than Keel estimates because of the
    // template's preamble. Neither may inflate the estimate of an agent's request, in this run
    // or the next: a 1,380-token conversation (about 1,230 as the server counts it) still gets
    // sent, with room for a reply.
    let server = MockServer::with_handler(|req: &Recorded, _| {
        let body = req.json();
        let limit = body["max_tokens"].as_u64().unwrap_or(u64::MAX);
        let prompt = preamble_prompt(&body);
        if prompt + limit > 2048 {
            MockReply::error(400, overflow(2048, prompt, limit))
        } else if body["stream"] == true {
            MockReply::sse(bodies::openai("", "ok", &[], (prompt, 2)))
        } else {
            MockReply::json(whole_reply("ok", prompt))
        }
    })
    .await
    .unwrap();
    let home = tempfile::tempdir().unwrap();
    let base = format!("{}/v1", server.url());
    let p = learning(&base, home.path());
    // The window, learned from the server's refusal of the first request.
    let err = events(p.as_ref(), &conversation(0, 0)).await.unwrap_err();
    assert!(matches!(err, LlmError::ContextLength { .. }), "{err:?}");
    // A compaction summary: a short system prompt and the steps, no tools.
    let summary = ChatRequest {
        system: "You summarise the earlier steps of a coding agent's session so the agent can continue without them.".into(),
        tools: Vec::new(),
        messages: vec![Message::user_text(format!(
            "Steps to summarise, oldest first:\n{}",
            "[tool call] list_files {}\n[list_files result, ok] README.md  (38 B)\ncalc.py  (66 B)\n".repeat(9)
        ))],
        max_tokens: Some(1500),
    };
    events(p.as_ref(), &summary).await.unwrap();
    let short = server.requests().last().unwrap().json();
    let estimated =
        keel_llm::tokens::estimate_request(&summary.system, &summary.tools, &summary.messages);
    assert!(
        preamble_prompt(&short) * 4 > estimated * 5,
        "the short request counts {} of {estimated} estimated: over 1.25x, or this test means nothing",
        preamble_prompt(&short)
    );
    let large = conversation(2, 2000);
    for (run, client) in [
        ("this run", p),
        ("the next run", learning(&base, home.path())),
    ] {
        let before = server.requests().len();
        let sent = events(client.as_ref(), &large).await;
        assert!(sent.is_ok(), "{run}: {sent:?}");
        let request = server.requests()[before].json();
        let limit = request["max_tokens"].as_u64().unwrap();
        assert!(limit >= 256, "{run}: max_tokens {limit}");
        assert!(preamble_prompt(&request) + limit <= 2048, "{run}: {limit}");
    }
}

/// llama-cpp-python 0.3 streaming a reply: `\r\n`-separated events, and no usage chunk even
/// when `stream_options.include_usage` is asked for.
const NO_USAGE_STREAM: &str = concat!(
    "data: {\"id\":\"chatcmpl-7\",\"object\":\"chat.completion.chunk\",\"created\":1764300000,\"model\":\"smollm2\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\"},\"logprobs\":null,\"finish_reason\":null}]}\r\n\r\n",
    "data: {\"id\":\"chatcmpl-7\",\"object\":\"chat.completion.chunk\",\"created\":1764300000,\"model\":\"smollm2\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"The answer is forty-two.\"},\"logprobs\":null,\"finish_reason\":null}]}\r\n\r\n",
    "data: {\"id\":\"chatcmpl-7\",\"object\":\"chat.completion.chunk\",\"created\":1764300000,\"model\":\"smollm2\",\"choices\":[{\"index\":0,\"delta\":{},\"logprobs\":null,\"finish_reason\":\"stop\"}]}\r\n\r\n",
    "data: [DONE]\r\n\r\n",
);

#[tokio::test]
async fn usage_is_estimated_and_marked_when_the_stream_carries_none() {
    let server = MockServer::queue(vec![
        MockReply::sse(NO_USAGE_STREAM),
        MockReply::sse(bodies::openai("", "ok", &[], (40, 3))),
    ])
    .await
    .unwrap();
    let p = provider("llamacpp", "smollm2", &format!("{}/v1", server.url()));
    let request = conversation(1, 400);
    let t = turn(p.as_ref(), &request).await.unwrap();
    assert_eq!(t.text, "The answer is forty-two.");
    assert!(t.usage.estimated, "{:?}", t.usage);
    assert!(t.usage.input_tokens > 100, "{:?}", t.usage);
    assert_eq!(t.usage.output_tokens, 6, "{:?}", t.usage);
    assert_eq!(
        server.requests()[0].json()["stream_options"]["include_usage"],
        true
    );
    // A server that reports usage is believed, not estimated.
    let t = turn(p.as_ref(), &request).await.unwrap();
    assert!(!t.usage.estimated);
    assert_eq!(t.usage.input_tokens, 40);
}

#[tokio::test]
async fn the_doctor_probe_finds_what_a_template_drops_and_the_next_run_starts_right() {
    for (template, tools_dropped, results_dropped) in [
        (
            Template {
                tools: true,
                tool_messages: false,
            },
            false,
            true,
        ),
        (
            Template {
                tools: false,
                tool_messages: true,
            },
            true,
            false,
        ),
        (
            Template {
                tools: true,
                tool_messages: true,
            },
            false,
            false,
        ),
    ] {
        let server = template.serve().await;
        let home = tempfile::tempdir().unwrap();
        let base = format!("{}/v1", server.url());
        let p = learning(&base, home.path());
        let found = p.probe_template().await.unwrap().unwrap();
        assert_eq!(found.tools_dropped, tools_dropped, "{found:?}");
        assert_eq!(found.results_dropped, results_dropped, "{found:?}");
        assert_eq!(found.lines.len(), 2, "{found:?}");
        assert_eq!(
            found.lines[0].contains("DROPPED"),
            tools_dropped,
            "{found:?}"
        );
        assert_eq!(server.requests().len(), 4, "four one-token requests");
        assert!(
            server
                .requests()
                .iter()
                .all(|r| r.json()["max_tokens"] == 1)
        );
        let next = learning(&base, home.path());
        events(next.as_ref(), &conversation(1, 100)).await.unwrap();
        let sent = server.requests().pop().unwrap();
        assert_eq!(
            !roles(&sent).contains(&"tool".to_string()),
            results_dropped,
            "{:?}",
            roles(&sent)
        );
    }
}

#[tokio::test]
async fn without_a_data_directory_nothing_is_written_and_nothing_breaks() {
    let server = Template {
        tools: true,
        tool_messages: false,
    }
    .serve()
    .await;
    let p = provider("llamacpp", "smollm2", &format!("{}/v1", server.url()));
    events(p.as_ref(), &conversation(1, 800)).await.unwrap();
    let said = notices(&events(p.as_ref(), &conversation(2, 800)).await.unwrap());
    assert!(
        said.iter().any(|n| n.contains("drops tool results")),
        "{said:?}"
    );
}

/// A server whose tokenizer is coarser than Keel's four bytes a token (three of its tokens for
/// five estimated ones, as large vocabularies count code) is believed, from a large request:
/// the output limit then uses the room the window really has — in this run and the next —
/// and every request still fits. A short request's count (a large share of it the template's
/// preamble) is no evidence of a coarser tokenizer.
#[tokio::test]
async fn a_coarser_tokenizer_gives_the_reply_the_room_the_window_has() {
    fn coarse(body: &Value) -> u64 {
        // 4 bytes a token, times 3/5: 20 bytes make 3 tokens.
        let bytes = body.to_string().len() as u64;
        bytes * 3 / 20
    }
    let server = MockServer::with_handler(|req: &Recorded, _| {
        let body = req.json();
        let prompt = coarse(&body);
        let limit = body["max_tokens"].as_u64().unwrap_or(0);
        if prompt + limit > 4096 {
            MockReply::error(400, overflow(4096, prompt, limit))
        } else {
            MockReply::json(whole_reply("ok", prompt))
        }
    })
    .await
    .unwrap();
    let home = tempfile::tempdir().unwrap();
    let base = format!("{}/v1", server.url());
    // The window, learned by an earlier run; then a short request and a large one are counted.
    keel_llm::learned::ServerMemory::open(Some(home.path()), &base, "smollm2").learn(|f, now| {
        f.context_window = Some(keel_llm::learned::Fact {
            value: 4096,
            learned_at: now,
        })
    });
    let p = learning(&base, home.path());
    let short = ChatRequest {
        max_tokens: Some(64),
        ..simple_request("hi")
    };
    events(p.as_ref(), &short).await.unwrap();
    let large = ChatRequest {
        max_tokens: Some(4096),
        ..conversation(4, 2000)
    };
    let before = server.requests().len();
    events(p.as_ref(), &large).await.unwrap();
    let first_limit = server.requests()[before].json()["max_tokens"]
        .as_u64()
        .unwrap();
    for (run, client) in [
        ("this run", p),
        ("the next run", learning(&base, home.path())),
    ] {
        let before = server.requests().len();
        events(client.as_ref(), &large).await.unwrap();
        let request = server.requests()[before].json();
        let limit = request["max_tokens"].as_u64().unwrap();
        assert!(
            limit > first_limit + 300,
            "{run}: max_tokens {limit}, before the count {first_limit}"
        );
        assert!(coarse(&request) + limit <= 4096, "{run}: {limit}");
    }
}

/// A request that fits the learned window by Keel's estimate but not with the tenth it keeps
/// for safety is sent with the smallest reply rather than refused unsent: the server decides
/// (its refusal states the real prompt size). SmolLM2 runs ended `context_overflow` on requests
/// refused at ~1,815 estimated tokens whose real prompts were ~1,350.
#[tokio::test]
async fn a_request_within_the_safety_margin_is_sent_with_the_smallest_reply() {
    let server = MockServer::with_handler(|_, _| MockReply::json(whole_reply("ok", 1400)))
        .await
        .unwrap();
    let home = tempfile::tempdir().unwrap();
    let base = format!("{}/v1", server.url());
    keel_llm::learned::ServerMemory::open(Some(home.path()), &base, "smollm2").learn(|f, now| {
        f.context_window = Some(keel_llm::learned::Fact {
            value: 2048,
            learned_at: now,
        })
    });
    let p = learning(&base, home.path());
    // About 1,700 estimated tokens with the template allowance: 348 left, 178 after the tenth.
    let mut text = String::new();
    let request = loop {
        let r = ChatRequest {
            max_tokens: Some(1000),
            ..simple_request(&text)
        };
        if keel_llm::tokens::estimate_request(&r.system, &r.tools, &r.messages) + 128 >= 1700 {
            break r;
        }
        text.push_str("word ");
    };
    events(p.as_ref(), &request).await.unwrap();
    assert_eq!(server.requests()[0].json()["max_tokens"], 256);
    // Past the window even by the bare estimate: still refused unsent.
    let too_large = ChatRequest {
        max_tokens: Some(1000),
        ..simple_request(&"word ".repeat(1700))
    };
    let err = events(p.as_ref(), &too_large).await.unwrap_err();
    assert!(matches!(err, LlmError::ContextLength { .. }), "{err:?}");
    assert_eq!(server.requests().len(), 1);
}

/// The largest scale a server ever showed is remembered, and one request of a weak model's
/// garbage (random characters the tokenizer cuts finely) can set it far above what its
/// requests count: a real SmolLM2 run ended `context_overflow` on a request refused unsent as
/// about 2,065 tokens, with 1.63 server tokens per estimated one remembered, where the run's
/// requests had counted 1.02 (the real prompt was about 1,450). A request that fits by the
/// scale of this run's latest request is sent, with the smallest reply, and the server decides.
#[tokio::test]
async fn a_request_that_fits_by_this_runs_own_counts_is_sent_despite_an_outlier_scale() {
    // Counts as Keel estimates, plus the template's preamble: about 1.0–1.2 per estimated token.
    let server = MockServer::with_handler(|req: &Recorded, _| {
        let body = req.json();
        let prompt = 128 + req.body.len() as u64 / 4;
        let limit = body["max_tokens"].as_u64().unwrap_or(0);
        if prompt + limit > 2048 {
            MockReply::error(400, overflow(2048, prompt, limit))
        } else {
            MockReply::json(whole_reply("ok", prompt))
        }
    })
    .await
    .unwrap();
    let home = tempfile::tempdir().unwrap();
    let base = format!("{}/v1", server.url());
    keel_llm::learned::ServerMemory::open(Some(home.path()), &base, "smollm2").learn(|f, now| {
        f.context_window = Some(keel_llm::learned::Fact {
            value: 2048,
            learned_at: now,
        });
        f.tokens_per_mille = Some(keel_llm::learned::Fact {
            value: 1628,
            learned_at: now,
        });
    });
    // About 1,300 estimated tokens: 2,325 by the remembered scale (no room), about 1,600 by
    // what this server counts.
    let mut text = String::new();
    let large = loop {
        let r = ChatRequest {
            max_tokens: Some(1000),
            ..simple_request(&text)
        };
        if keel_llm::tokens::estimate_request(&r.system, &r.tools, &r.messages) >= 1300 {
            break r;
        }
        text.push_str("word ");
    };
    // Before any request of this run was counted, the remembered scale is all Keel knows.
    let fresh = learning(&base, home.path());
    let err = events(fresh.as_ref(), &large).await.unwrap_err();
    assert!(matches!(err, LlmError::ContextLength { .. }), "{err:?}");
    assert_eq!(server.requests().len(), 0);
    // A run whose first request was counted at about its estimate.
    let p = learning(&base, home.path());
    events(p.as_ref(), &simple_request(&"word ".repeat(300)))
        .await
        .unwrap();
    events(p.as_ref(), &large).await.unwrap();
    let sent = server.requests();
    assert_eq!(sent.len(), 2, "the large request was sent");
    assert_eq!(sent[1].json()["max_tokens"], 256);
}
