//! `repo` in `POST /api/v1/sessions` on a single-process server (SQLite): validated first (a
//! hostile url or ref is a 400 saying what is wrong), then refused with what to do instead —
//! only queue mode's workers check a repository out (tested in keel-cli's `cluster_git.rs`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use serde_json::json;

#[tokio::test]
async fn a_local_server_validates_repo_then_refuses_it_clearly() {
    let mut srv = TestServer::start().await;
    for (repo, says) in [
        (
            json!({"url": "-oProxyCommand=x", "ref": "main"}),
            "starts with `-`",
        ),
        (json!({"url": "/srv/app.git", "ref": "-b"}), "repo.ref"),
        (json!({"url": "ext::sh", "ref": "main"}), "remote helper"),
        (
            json!({"url": "/srv/app.git", "ref": "main"}),
            "needs queue mode",
        ),
    ] {
        let (status, body) = srv
            .post(
                "/api/v1/sessions",
                json!({"provider": "scripted", "repo": repo}),
            )
            .await;
        assert_eq!(status, 400, "{repo}: {body}");
        assert_eq!(body["error_code"], "bad_request", "{body}");
        assert!(
            body["message"].as_str().unwrap().contains(says),
            "{repo}: {body}"
        );
    }
    let (_, sessions) = srv.get("/api/v1/sessions").await;
    assert_eq!(sessions.as_array().unwrap().len(), 0, "nothing was created");
    // The OpenAPI document describes the field.
    let (_, doc) = srv.get("/api/v1/openapi.json").await;
    let schema = &doc["components"]["schemas"]["RepoRequest"]["properties"];
    assert!(
        schema["url"].is_object() && schema["ref"].is_object(),
        "{doc}"
    );
    srv.shutdown().await;
}
