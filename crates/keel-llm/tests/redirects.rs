//! A model endpoint that answers with a redirect to another host (red-team pass 7, R7-23):
//! the client followed it and re-sent the Anthropic `x-api-key` and the whole prompt there.
//! No redirect is followed now, for any provider; the error names where it pointed.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use keel_llm::LlmError;
use keel_llm::mock::{MockReply, MockServer};

#[tokio::test]
async fn a_redirect_to_another_host_is_not_followed() {
    for (name, model, path) in [
        ("anthropic", "claude-sonnet-4-5", "/v1/messages"),
        ("openai", "gpt-4o", "/v1/chat/completions"),
    ] {
        let elsewhere = MockServer::queue(vec![]).await.unwrap();
        let target = format!("{}{path}", elsewhere.url());
        let first = MockServer::queue(vec![MockReply::error_with_headers(
            307,
            "",
            &[("location", target.as_str())],
        )])
        .await
        .unwrap();
        let p = provider(name, model, &first.url());
        let err = turn(p.as_ref(), &simple_request("the secret prompt"))
            .await
            .unwrap_err();
        assert!(
            elsewhere.requests().is_empty(),
            "{name}: the other host was sent {} request(s)",
            elsewhere.requests().len()
        );
        assert_eq!(first.requests().len(), 1, "{name}: not resent");
        assert!(
            matches!(&err, LlmError::BadRequest { status: 307, message } if message.contains("redirect") && message.contains(&elsewhere.url())),
            "{name}: {err:?}"
        );
        assert!(!format!("{err}").contains(TEST_KEY), "{err}");
    }
}
