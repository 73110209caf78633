//! What a user of a local or strict OpenAI-compatible server meets, against the mock server
//! reproducing each behaviour: no server at the address, an unknown model, a refused key, a
//! validation error reported as HTTP 500 (llama-cpp-python), a context overflow, a stream
//! that stops before its finish reason, identical empty streams, a silent local server, and
//! the request shape strict servers need (`content: ""`, `tool_choice: "auto"`, tool results
//! as user messages, a default output limit).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::{Duration, Instant};

use common::*;
use keel_llm::mock::{MockReply, MockServer, bodies};
use keel_llm::retry::RetryPolicy;
use keel_llm::{ChatRequest, LlmError, Provider, ReliableProvider, StreamEvent};
use keel_protocol::{ContentBlock, Message, Role, ToolSpec};
use serde_json::json;

fn policy() -> RetryPolicy {
    RetryPolicy {
        max_retries: 4,
        base_delay: Duration::from_millis(10),
        max_delay: Duration::from_millis(40),
        max_retry_after: Duration::from_secs(5),
    }
}

fn reliable(p: std::sync::Arc<dyn Provider>) -> ReliableProvider {
    ReliableProvider::new(p, policy())
}

/// A conversation with one finished tool call (no text beside it) and its result.
fn tool_request() -> ChatRequest {
    ChatRequest {
        system: "You are a test.".into(),
        tools: vec![ToolSpec {
            name: "read_file".into(),
            description: "Read a file.".into(),
            input_schema: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        }],
        messages: vec![
            Message::user_text("read a.txt"),
            Message {
                role: Role::Assistant,
                content: vec![ContentBlock::ToolUse {
                    id: "call_1".into(),
                    name: "read_file".into(),
                    input: json!({"path": "a.txt"}),
                }],
            },
            Message {
                role: Role::User,
                content: vec![ContentBlock::ToolResult {
                    tool_use_id: "call_1".into(),
                    content: "hello".into(),
                    is_error: false,
                }],
            },
        ],
        max_tokens: None,
    }
}

async fn all_events(p: &dyn Provider, r: &ChatRequest) -> (Vec<StreamEvent>, Option<LlmError>) {
    use futures::StreamExt;
    let mut out = Vec::new();
    let mut stream = match p.stream(r).await {
        Ok(s) => s,
        Err(e) => return (out, Some(e)),
    };
    while let Some(ev) = stream.next().await {
        match ev {
            Ok(e) => out.push(e),
            Err(e) => return (out, Some(e)),
        }
    }
    (out, None)
}

#[tokio::test]
async fn nothing_listening_fails_fast_after_two_quick_attempts() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let p = reliable(provider(
        "llamacpp",
        "qwen",
        &format!("http://127.0.0.1:{port}/v1"),
    ));
    let started = Instant::now();
    let (events, err) = all_events(&p, &simple_request("hi")).await;
    let err = err.expect("an error");
    assert!(matches!(err, LlmError::Unreachable { .. }), "{err:?}");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    let retries: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::Retry {
                attempt,
                attempts,
                message,
                ..
            } => Some((*attempt, *attempts, message.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(retries.len(), 1, "{retries:?}");
    assert_eq!((retries[0].0, retries[0].1), (1, 2));
    assert!(
        retries[0].2.len() < 100,
        "a short retry line: {}",
        retries[0].2
    );
    assert!(
        retries[0].2.contains("nothing is listening"),
        "{}",
        retries[0].2
    );
}

#[tokio::test]
async fn an_unknown_model_and_a_refused_key_are_not_retried_and_say_what_to_check() {
    let server = MockServer::with_handler(|_, n| {
        if n == 0 {
            MockReply::error(
                404,
                r#"{"error":"model \"qwen9\" not found, try pulling it first"}"#,
            )
        } else {
            MockReply::error(
                401,
                r#"{"error":{"message":"Invalid API Key","type":"invalid_request_error"}}"#,
            )
        }
    })
    .await
    .unwrap();
    let base = format!("{}/v1", server.url());
    let p = reliable(provider("ollama", "qwen9", &base));
    let (_, err) = all_events(&p, &simple_request("hi")).await;
    let err = err.unwrap();
    let text = err.to_string();
    assert!(matches!(err, LlmError::ModelNotFound { .. }), "{err:?}");
    assert!(text.contains("`qwen9`") && text.contains(&base), "{text}");
    assert_eq!(server.requests().len(), 1, "not retried");

    let (_, err) = all_events(&p, &simple_request("hi")).await;
    let err = err.unwrap();
    assert!(matches!(err, LlmError::Auth { status: 401, .. }), "{err:?}");
    assert!(err.to_string().contains("OLLAMA_API_KEY"), "{err}");
    assert_eq!(server.requests().len(), 2, "not retried");
}

#[tokio::test]
async fn a_validation_error_reported_as_500_is_sent_once() {
    let server = MockServer::with_handler(|_, _| {
        MockReply::error(
            500,
            r#"{"detail":[{"type":"string_type","loc":["body","messages",2,"content"],"msg":"Input should be a valid string","input":null}]}"#,
        )
    })
    .await
    .unwrap();
    let p = reliable(provider(
        "llamacpp",
        "qwen",
        &format!("{}/v1", server.url()),
    ));
    let (events, err) = all_events(&p, &simple_request("hi")).await;
    let err = err.unwrap();
    assert!(!err.is_retryable(), "{err:?}");
    assert!(
        err.to_string().contains("Input should be a valid string"),
        "{err}"
    );
    assert!(events.is_empty());
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn a_context_overflow_is_typed_with_the_servers_window() {
    let server = MockServer::queue(vec![MockReply::error(
        400,
        r#"{"error":{"code":400,"message":"request (9000 tokens) exceeds the available context size (8192 tokens)","type":"exceed_context_size_error","n_prompt_tokens":9000,"n_ctx":8192}}"#,
    )])
    .await
    .unwrap();
    let p = reliable(provider(
        "llamacpp",
        "qwen",
        &format!("{}/v1", server.url()),
    ));
    let (_, err) = all_events(&p, &simple_request("hi")).await;
    match err.unwrap() {
        LlmError::ContextLength { window, .. } => assert_eq!(window, Some(8192)),
        other => panic!("{other:?}"),
    }
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn strict_servers_get_string_content_and_an_explicit_tool_choice() {
    let server = MockServer::queue(vec![
        MockReply::sse(bodies::openai("", "done", &[], (10, 2))),
        MockReply::sse(bodies::openai("", "pong", &[], (10, 2))),
    ])
    .await
    .unwrap();
    let p = provider("llamacpp", "qwen", &format!("{}/v1", server.url()));
    turn(p.as_ref(), &tool_request()).await.unwrap();
    turn(p.as_ref(), &simple_request("hi")).await.unwrap();
    let with_tools = server.requests()[0].json();
    let assistant = &with_tools["messages"][2];
    assert_eq!(assistant["role"], "assistant");
    assert_eq!(assistant["content"], "", "empty string, never null");
    assert_eq!(with_tools["tool_choice"], "auto");
    assert_eq!(with_tools["messages"][3]["role"], "tool");
    // A local preset sends an output limit by default.
    assert_eq!(with_tools["max_tokens"], 4096);
    let without_tools = server.requests()[1].json();
    assert!(without_tools.get("tool_choice").is_none());
}

#[tokio::test]
async fn tool_results_go_as_user_messages_when_the_switch_is_on() {
    let server = MockServer::queue(vec![MockReply::sse(bodies::openai("", "ok", &[], (10, 2)))])
        .await
        .unwrap();
    let mut config = llm_config("work", "qwen", &format!("{}/v1", server.url()));
    config.providers.insert(
        "work".into(),
        keel_llm::config::ProviderEntry {
            preset: Some("llamacpp".into()),
            tool_results_as_user: Some(true),
            ..Default::default()
        },
    );
    let p = provider_from(&config);
    turn(p.as_ref(), &tool_request()).await.unwrap();
    let body = server.requests()[0].json();
    let messages = body["messages"].as_array().unwrap();
    assert!(messages.iter().all(|m| m["role"] != "tool"), "{messages:?}");
    let last = messages.last().unwrap();
    assert_eq!(last["role"], "user");
    let text = last["content"].as_str().unwrap();
    assert!(
        text.contains("[result of tool call call_1]") && text.contains("hello"),
        "{text}"
    );
    assert!(
        p.adaptations()
            .iter()
            .any(|a| a.contains("tool_results_as_user"))
    );
}

#[tokio::test]
async fn a_stream_cut_before_its_finish_reason_is_retried_once_without_streaming() {
    // llama-cpp-python with a tool call: "automatic streaming tool choice is not supported",
    // after the first bytes of the stream.
    let first_bytes = "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n";
    let whole = json!({
        "id": "chatcmpl-1", "object": "chat.completion", "model": "qwen",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": null,
            "tool_calls": [{"id": "call_9", "type": "function",
                            "function": {"name": "read_file", "arguments": "{\"path\":\"b.txt\"}"}}]}}],
        "usage": {"prompt_tokens": 30, "completion_tokens": 9, "total_tokens": 39}
    });
    let server = MockServer::queue(vec![
        MockReply::sse(first_bytes),
        MockReply::json(whole.to_string()),
    ])
    .await
    .unwrap();
    let inner = provider("llamacpp", "qwen", &format!("{}/v1", server.url()));
    let p = reliable(inner.clone());
    let (events, err) = all_events(&p, &tool_request()).await;
    assert!(err.is_none(), "{err:?}");
    let mut a = keel_llm::TurnAssembler::new();
    for e in events {
        a.push(e);
    }
    let turn = a.finish().unwrap();
    assert_eq!(turn.tool_calls.len(), 1);
    assert_eq!(turn.tool_calls[0].name, "read_file");
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].json()["stream"], true);
    assert_eq!(requests[1].json()["stream"], false);
    assert!(requests[1].json().get("stream_options").is_none());
    assert!(
        inner
            .adaptations()
            .iter()
            .any(|a| a.contains("stream: false")),
        "{:?}",
        inner.adaptations()
    );
}

#[tokio::test]
async fn identical_empty_streams_are_not_retried_again_and_not_called_retryable() {
    let server = MockServer::with_handler(|_, _| MockReply::sse(": keep-alive\n\n"))
        .await
        .unwrap();
    let p = reliable(provider("vllm", "qwen", &format!("{}/v1", server.url())));
    let (_, err) = all_events(&p, &simple_request("hi")).await;
    let err = err.unwrap();
    assert!(!err.is_retryable(), "{err:?}");
    assert!(
        err.to_string().contains("empty reply stream twice"),
        "{err}"
    );
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn a_silent_local_server_is_not_sent_the_request_again() {
    let server = MockServer::with_handler(|_, _| MockReply::Stall {
        prefix: Vec::new(),
        silence: Duration::from_secs(5),
    })
    .await
    .unwrap();
    let mut config = llm_config("ollama", "qwen", &format!("{}/v1", server.url()));
    config.idle_timeout_secs = 1;
    let p = reliable(provider_from(&config));
    let (_, err) = all_events(&p, &simple_request("hi")).await;
    let err = err.unwrap();
    assert!(err.is_timeout() && !err.is_retryable(), "{err:?}");
    assert!(err.to_string().contains("does not resend"), "{err}");
    assert_eq!(server.requests().len(), 1, "no duplicate generation queued");
}

/// llama-cpp-python 0.3.36 (`chatml-function-calling`) ignores `max_tokens` on a tool call:
/// SmolLM2 filled an `edit_file` call's arguments with 1,328 tokens when 923 were asked, until
/// the 2,048-token window was full (its reply, byte for byte, from a real run). The reply ends
/// as cut off at the output limit — so the incomplete call is not run — and the user is told.
#[tokio::test]
async fn a_whole_reply_past_the_asked_limit_is_cut_off_and_said() {
    let body = read(&fixtures().join("llama-cpp-python/smollm2-tool-call-past-max-tokens.json"));
    let server = MockServer::with_handler(move |_, _| {
        MockReply::json(String::from_utf8_lossy(&body).into_owned())
    })
    .await
    .unwrap();
    let p = provider("llamacpp", "smollm2", &format!("{}/v1", server.url()));
    let request = ChatRequest {
        max_tokens: Some(923),
        ..tool_request()
    };
    let events = common::events(p.as_ref(), &request).await.unwrap();
    let notices: Vec<&String> = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::Notice(n) => Some(n),
            _ => None,
        })
        .collect();
    assert!(
        notices
            .iter()
            .any(|n| n.contains("ignored the output limit: 1328 tokens for the 923 asked")),
        "{notices:?}"
    );
    let turn = common::turn(p.as_ref(), &request).await.unwrap();
    assert_eq!(turn.stop_reason, keel_llm::StopReason::MaxTokens);
    assert_eq!(turn.tool_calls.len(), 1, "the call is kept, as cut off");
    assert_eq!(server.requests()[0].json()["max_tokens"], 923);
}

/// A streaming server that ignores the limit and keeps sending one call's arguments: Keel stops
/// reading half past the limit and ends the reply there, cut off — it does not wait for the
/// rest (here the server would go silent; before, the run waited for the idle timeout and
/// failed).
#[tokio::test]
async fn a_stream_past_the_asked_limit_is_not_read_further() {
    let garbage = "keyframe_name =&lt;path%34;:&#34; typeList ".repeat(1_000);
    let args = format!(r#"{{"path": "{garbage}"#);
    let full = bodies::openai("", "", &[("call_1", "edit_file", &args)], (720, 10_000));
    let prefix = full[..full.len() / 2].to_vec();
    let server = MockServer::with_handler(move |_, _| MockReply::Stall {
        prefix: prefix.clone(),
        silence: Duration::from_secs(30),
    })
    .await
    .unwrap();
    let mut config = llm_config("vllm", "smollm2", &format!("{}/v1", server.url()));
    config.idle_timeout_secs = 20;
    let p = provider_from(&config);
    let request = ChatRequest {
        max_tokens: Some(100),
        ..tool_request()
    };
    let started = Instant::now();
    let events = common::events(p.as_ref(), &request).await.unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    let streamed: usize = events
        .iter()
        .map(|e| match e {
            StreamEvent::ToolCallDelta { arguments, .. } => arguments.len(),
            _ => 0,
        })
        .sum();
    assert!(streamed < 2_000, "read {streamed} bytes of arguments");
    assert!(
        events
            .iter()
            .any(|e| matches!(e, StreamEvent::Notice(n) if n.contains("stopped reading"))),
        "{events:?}"
    );
    assert!(matches!(
        events.last(),
        Some(StreamEvent::Finish {
            stop_reason: keel_llm::StopReason::MaxTokens
        })
    ));
}
