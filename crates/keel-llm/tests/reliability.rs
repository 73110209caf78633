//! Retries, timeouts, truncation and the fallback list, against the real clients and a local
//! mock server: 429 with `retry-after`, 529 overloaded, a connection dropped mid-stream, a
//! stalled stream, and what remains after the retry budget (a typed error with the provider's
//! own message).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use keel_llm::mock::{MockReply, MockServer, bodies};
use keel_llm::retry::RetryPolicy;
use keel_llm::{LlmError, Provider, ReliableProvider, StreamEvent, TurnAssembler};

fn fast_policy(max_retries: u32) -> RetryPolicy {
    RetryPolicy {
        max_retries,
        base_delay: Duration::from_millis(10),
        max_delay: Duration::from_millis(40),
        max_retry_after: Duration::from_secs(5),
    }
}

fn anthropic_ok(text: &str) -> MockReply {
    MockReply::sse(bodies::anthropic(None, text, &[], (20, 5)))
}

const OVERLOADED: &str =
    r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
const RATE_LIMITED: &str = r#"{"type":"error","error":{"type":"rate_limit_error","message":"This request would exceed your organization's rate limit of 50,000 input tokens per minute"}}"#;

async fn run(p: &dyn Provider) -> (Vec<StreamEvent>, Result<keel_llm::ModelTurn, LlmError>) {
    let mut stream = p.stream(&simple_request("hi")).await.unwrap();
    let mut seen = Vec::new();
    let mut a = TurnAssembler::new();
    use futures::StreamExt;
    while let Some(ev) = stream.next().await {
        match ev {
            Ok(e) => {
                seen.push(e.clone());
                a.push(e);
            }
            Err(e) => return (seen, Err(e)),
        }
    }
    (seen, a.finish())
}

fn retries(events: &[StreamEvent]) -> Vec<(u32, Duration, String)> {
    events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::Retry {
                attempt,
                delay,
                message,
                ..
            } => Some((*attempt, *delay, message.clone())),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_503_with_retry_after_waits_as_asked_then_recovers() {
    let server = MockServer::queue(vec![
        MockReply::error_with_headers(
            503,
            r#"{"error": {"message": "Service Unavailable", "type": "api_error"}}"#,
            &[("retry-after", "1")],
        ),
        anthropic_ok("back"),
    ])
    .await
    .unwrap();
    let p = ReliableProvider::new(
        provider("anthropic", "claude-sonnet-4-5", &server.url()),
        fast_policy(3),
    );
    let started = Instant::now();
    let (events, turn) = run(&p).await;
    assert_eq!(turn.unwrap().text, "back");
    let r = retries(&events);
    assert_eq!(r.len(), 1);
    assert_eq!(
        r[0].1,
        Duration::from_secs(1),
        "retry-after wins over backoff"
    );
    assert!(started.elapsed() >= Duration::from_secs(1));
}

#[tokio::test]
async fn rate_limit_with_retry_after_is_honoured_then_recovers() {
    let server = MockServer::queue(vec![
        MockReply::error_with_headers(429, RATE_LIMITED, &[("retry-after", "1")]),
        anthropic_ok("recovered"),
    ])
    .await
    .unwrap();
    let p = ReliableProvider::new(
        provider("anthropic", "claude-sonnet-4-5", &server.url()),
        fast_policy(3),
    );
    let started = Instant::now();
    let (events, turn) = run(&p).await;
    assert_eq!(turn.unwrap().text, "recovered");
    let r = retries(&events);
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].0, 1);
    assert_eq!(
        r[0].1,
        Duration::from_secs(1),
        "retry-after wins over backoff"
    );
    assert!(
        r[0].2
            .starts_with("rate limited: This request would exceed"),
        "{}",
        r[0].2
    );
    assert!(started.elapsed() >= Duration::from_secs(1));
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn overloaded_529_is_retried() {
    let server = MockServer::queue(vec![
        MockReply::error(529, OVERLOADED),
        MockReply::error(529, OVERLOADED),
        anthropic_ok("fine now"),
    ])
    .await
    .unwrap();
    let p = ReliableProvider::new(
        provider("anthropic", "claude-sonnet-4-5", &server.url()),
        fast_policy(3),
    );
    let (events, turn) = run(&p).await;
    assert_eq!(turn.unwrap().text, "fine now");
    let r = retries(&events);
    assert_eq!(r.iter().map(|r| r.0).collect::<Vec<_>>(), [1, 2]);
    assert!(r[0].2.contains("overloaded"), "{}", r[0].2);
}

#[tokio::test]
async fn a_connection_dropped_mid_stream_is_retried_without_duplicating_text() {
    let full = bodies::openai("", "The answer is 42.", &[], (30, 6));
    let half = full[..full.len() / 2].to_vec();
    let server = MockServer::queue(vec![MockReply::Drop { prefix: half }, MockReply::sse(full)])
        .await
        .unwrap();
    let p = ReliableProvider::new(
        provider("openai", "gpt-4o", &format!("{}/v1", server.url())),
        fast_policy(2),
    );
    let (events, turn) = run(&p).await;
    let turn = turn.unwrap();
    assert_eq!(
        turn.text, "The answer is 42.",
        "text of the failed attempt is dropped"
    );
    let r = retries(&events);
    assert_eq!(r.len(), 1);
    assert!(r[0].2.contains("broke off"), "{}", r[0].2);
    let first_text = events
        .iter()
        .position(|e| matches!(e, StreamEvent::TextDelta(_)))
        .unwrap();
    let retry_at = events
        .iter()
        .position(|e| matches!(e, StreamEvent::Retry { .. }))
        .unwrap();
    assert!(
        first_text < retry_at,
        "the first attempt really streamed text before failing"
    );
}

#[tokio::test]
async fn a_stream_without_its_final_event_is_a_retryable_truncation() {
    let full = bodies::anthropic(None, "complete", &[], (10, 2));
    let text = String::from_utf8(full.clone()).unwrap();
    let cut = text.find("event: message_delta").unwrap();
    let server = MockServer::queue(vec![
        MockReply::sse(text.as_bytes()[..cut].to_vec()),
        MockReply::sse(full),
    ])
    .await
    .unwrap();
    let raw = provider("anthropic", "claude-haiku-4-5", &server.url());
    // Without the wrapper: a typed truncation error, never a silently short reply.
    let err = turn(raw.as_ref(), &simple_request("hi")).await.unwrap_err();
    assert!(matches!(err, LlmError::Truncated(_)), "{err:?}");
    assert!(err.is_retryable());
    // With it: retried and complete.
    let p = ReliableProvider::new(raw, fast_policy(1));
    let (_, turn) = run(&p).await;
    assert_eq!(turn.unwrap().text, "complete");
}

#[tokio::test]
async fn after_the_budget_the_providers_message_comes_back_typed() {
    let server = MockServer::queue(vec![
        MockReply::error_with_headers(429, RATE_LIMITED, &[("retry-after-ms", "5")]),
        MockReply::error_with_headers(429, RATE_LIMITED, &[("retry-after-ms", "5")]),
        MockReply::error_with_headers(429, RATE_LIMITED, &[("retry-after-ms", "5")]),
    ])
    .await
    .unwrap();
    let p = ReliableProvider::new(
        provider("anthropic", "claude-sonnet-4-5", &server.url()),
        fast_policy(2),
    );
    let (events, result) = run(&p).await;
    assert_eq!(retries(&events).len(), 2);
    match result {
        Err(LlmError::RateLimited { message, .. }) => {
            assert!(message.contains("rate limit of 50,000"), "{message}");
        }
        other => panic!("expected a rate-limit error, got {other:?}"),
    }
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test]
async fn a_bad_request_is_not_retried() {
    let server = MockServer::queue(vec![MockReply::error(
        400,
        r#"{"error": {"message": "Invalid schema for function 'x'", "type": "invalid_request_error"}}"#,
    )])
    .await
    .unwrap();
    let p = ReliableProvider::new(
        provider("openai", "gpt-4o", &format!("{}/v1", server.url())),
        fast_policy(3),
    );
    let (events, result) = run(&p).await;
    assert!(retries(&events).is_empty());
    let e = result.unwrap_err();
    assert!(matches!(e, LlmError::BadRequest { status: 400, .. }));
    assert!(e.to_string().contains("Invalid schema for function 'x'"));
}

#[tokio::test]
async fn a_silent_stream_times_out() {
    let full = bodies::openai("", "never finished", &[], (1, 1));
    let server = MockServer::queue(vec![MockReply::Stall {
        prefix: full[..60].to_vec(),
        silence: Duration::from_secs(30),
    }])
    .await
    .unwrap();
    let mut config = llm_config("openai", "gpt-4o", &format!("{}/v1", server.url()));
    config.idle_timeout_secs = 1;
    let p = provider_from(&config);
    let started = Instant::now();
    let err = turn(p.as_ref(), &simple_request("hi")).await.unwrap_err();
    assert!(err.is_timeout(), "{err:?}");
    assert!(err.to_string().contains("silent for 1s"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[tokio::test]
async fn a_refused_connection_says_nothing_is_listening() {
    // Bind and drop a listener to get a port nobody listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let p = provider("ollama", "qwen3:8b", &format!("http://127.0.0.1:{port}/v1"));
    let err = turn(p.as_ref(), &simple_request("hi")).await.unwrap_err();
    assert!(matches!(err, LlmError::Unreachable { .. }), "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains(&format!(
            "nothing is listening at http://127.0.0.1:{port}/v1 — is the server running?"
        )),
        "{text}"
    );
    assert!(text.contains("base URL"), "{text}");
}

#[tokio::test]
async fn the_fallback_model_takes_over_after_the_main_ones_retries_and_stays() {
    let main = MockServer::with_handler(|_, _| {
        MockReply::error(503, r#"{"error": {"message": "upstream unavailable"}}"#)
    })
    .await
    .unwrap();
    let backup = MockServer::queue(vec![
        MockReply::sse(bodies::openai("", "from the backup", &[], (10, 3))),
        MockReply::sse(bodies::openai("", "still the backup", &[], (10, 3))),
    ])
    .await
    .unwrap();
    let p = ReliableProvider::new(
        provider("anthropic", "claude-sonnet-4-5", &main.url()),
        fast_policy(1),
    )
    .with_fallbacks(vec![provider("deepseek", "deepseek-chat", &backup.url())]);
    let (events, turn) = run(&p).await;
    assert_eq!(turn.unwrap().text, "from the backup");
    let fallback = events
        .iter()
        .find_map(|e| match e {
            StreamEvent::Fallback { from, to, message } => {
                Some((from.clone(), to.clone(), message.clone()))
            }
            _ => None,
        })
        .expect("a fallback notice");
    assert_eq!(fallback.0, "anthropic/claude-sonnet-4-5");
    assert_eq!(fallback.1, "deepseek/deepseek-chat");
    assert!(fallback.2.contains("upstream unavailable"));
    assert_eq!(main.requests().len(), 2, "one attempt and one retry");
    assert_eq!(p.info().model, "deepseek-chat");

    // The next request goes straight to the backup during the cool-down.
    let (events, turn) = run(&p).await;
    assert_eq!(turn.unwrap().text, "still the backup");
    assert!(
        events
            .iter()
            .all(|e| !matches!(e, StreamEvent::Fallback { .. }))
    );
    assert_eq!(main.requests().len(), 2);
}

#[tokio::test]
async fn api_keys_never_appear_in_errors_or_debug_output() {
    let echo = format!(
        r#"{{"error": {{"message": "Incorrect API key provided: {TEST_KEY}. You can find your API key at https://platform.openai.com", "type": "invalid_request_error"}}}}"#
    );
    let server = MockServer::queue(vec![MockReply::error(401, echo)])
        .await
        .unwrap();
    let p: Arc<dyn Provider> = provider("openai", "gpt-4o", &format!("{}/v1", server.url()));
    let err = turn(p.as_ref(), &simple_request("hi")).await.unwrap_err();
    let shown = format!("{err} | {err:?} | {:?}", p.info());
    assert!(!shown.contains(TEST_KEY), "{shown}");
    assert!(shown.contains("Incorrect API key provided"), "{shown}");
    assert!(matches!(err, LlmError::Auth { status: 401, .. }));
    // The key was sent, in the header only.
    let req = &server.requests()[0];
    assert_eq!(
        req.header("authorization"),
        Some(format!("Bearer {TEST_KEY}").as_str())
    );
    assert!(!req.body.contains(TEST_KEY));
    let reliable = ReliableProvider::new(p, fast_policy(0));
    assert!(!format!("{reliable:?}").contains(TEST_KEY));
    let target = keel_llm::Router::new(
        &llm_config("openai", "gpt-4o", &server.url()),
        std::path::Path::new("/"),
    )
    .target(keel_llm::Role::Main)
    .unwrap();
    let client =
        keel_llm::OpenAiProvider::new(&target, keel_llm::http::ApiKey::new(TEST_KEY)).unwrap();
    let debug = format!("{client:?}");
    assert!(debug.contains("ApiKey(<redacted>)"), "{debug}");
    assert!(!debug.contains(TEST_KEY), "{debug}");
}

/// Red-team R4-17: a server that never ends its reply — content, tool-call arguments or
/// thinking streamed without end, or one JSON document without end — grew Keel's memory until
/// it was killed. The reply is cut at `MAX_REPLY_BYTES` with an error naming the limit, and
/// not sent again.
#[tokio::test]
async fn a_reply_that_never_ends_is_cut_at_the_limit() {
    let mib = "x".repeat(1024 * 1024);
    let openai_text = format!(
        "data: {{\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":0,\"model\":\"m\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{mib}\"}},\"finish_reason\":null}}]}}\n\n"
    );
    let anthropic_head = concat!(
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"mock\",\"stop_reason\":null,\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}}\n\n",
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"read_file\",\"input\":{}}}\n\n",
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\",\"signature\":\"\"}}\n\n",
    );
    let anthropic_flood = format!(
        "event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{{\"type\":\"input_json_delta\",\"partial_json\":\"{mib}\"}}}}\n\nevent: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":1,\"delta\":{{\"type\":\"thinking_delta\",\"thinking\":\"{mib}\"}}}}\n\n"
    );
    let endless = |content_type: &str, prefix: &str, unit: String| MockReply::Endless {
        content_type: content_type.into(),
        prefix: prefix.as_bytes().to_vec(),
        unit: unit.into_bytes(),
    };
    let cases = [
        (
            "openai",
            "gpt-4o",
            endless("text/event-stream", "", openai_text),
        ),
        (
            "anthropic",
            "claude-sonnet-4-5",
            endless("text/event-stream", anthropic_head, anthropic_flood),
        ),
        (
            "openai",
            "gpt-4o",
            endless(
                "application/json",
                "{\"id\":\"c\",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"",
                mib.clone(),
            ),
        ),
    ];
    for (name, model, reply) in cases {
        let server = MockServer::queue(vec![reply, anthropic_ok("should not be asked")])
            .await
            .unwrap();
        let p = ReliableProvider::new(provider(name, model, &server.url()), fast_policy(2));
        let started = Instant::now();
        let (_, result) = tokio::time::timeout(Duration::from_secs(120), run(&p))
            .await
            .unwrap_or_else(|_| panic!("{name}: the endless reply was read for 120 s"));
        let err = result.unwrap_err();
        assert!(
            matches!(err, LlmError::InvalidResponse(_)) && err.to_string().contains("64 MiB"),
            "{name}: {err}"
        );
        assert_eq!(server.requests().len(), 1, "{name}: not sent again");
        eprintln!("{name}: cut after {:?}", started.elapsed());
    }
}
