//! Cancels and approvals for turns `keel worker` runs, asked for through the *other* server
//! (`keel serve --database`, real processes sharing one fresh PostgreSQL database; needs
//! `KEEL_TEST_DATABASE_URL` — skipped visibly without it, a failure in CI):
//! - a running slow turn cancelled through the other server ends `cancelled` within seconds,
//!   and its worker takes the next job;
//! - a turn still queued (the only worker busy) cancelled: it never runs;
//! - a call waiting for approval (`rm`, asked under the default `on-request` policy) approved
//!   through the other server runs and the turn completes; denied, the model reads why;
//!   unanswered, it is denied after `[approval] timeout_secs` as in a single process.

#![allow(clippy::disallowed_macros, clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use serde_json::{Value, json};

mod cluster_common;

use cluster_common::*;

/// A first reply that takes long (cancelled long before it comes).
const SLOW: &str = "turns:\n  - text: \"thinking\"\n    delay_ms: 60000\n  - text: \"done\"\n";

const QUICK: &str = "turns:\n  - text: \"done\"\n";

/// Asks to remove a file; its second turn asks the same again.
const REMOVE: &str = "turns:\n  - tool_calls:\n      - {id: rm1, name: run_command, arguments: {command: \"rm src/lib.rs\"}}\n  - text: \"Done.\"\n  - tool_calls:\n      - {id: rm2, name: run_command, arguments: {command: \"rm src/lib.rs\"}}\n  - text: \"Done again.\"\n";

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f).await.unwrap()
}

/// `send` off the runtime's worker threads.
async fn send_async(addr: &str, id: &str, content: &str) {
    let (addr, id, content) = (addr.to_string(), id.to_string(), content.to_string());
    blocking(move || send(&addr, &id, &content)).await
}

/// `stored` off the runtime's worker threads.
async fn stored_async(addr: &str, id: &str) -> Vec<Value> {
    let (addr, id) = (addr.to_string(), id.to_string());
    blocking(move || stored(&addr, &id)).await
}

/// `post` off the runtime's worker threads.
async fn post_async(addr: &str, path: String, body: Value) -> (u16, Value) {
    let addr = addr.to_string();
    blocking(move || post(&addr, &path, body)).await
}

/// A GET off the runtime's worker threads.
async fn get_async(addr: &str, path: String) -> (u16, Value) {
    let addr = addr.to_string();
    blocking(move || request(&addr, "GET", &path, None)).await
}

/// A session of the script file `script` (in the workspace).
fn session_with(addr: &str, script: &str) -> String {
    let (status, body) = request(
        addr,
        "POST",
        "/api/v1/sessions",
        Some(&json!({"provider": "scripted", "script": script})),
    );
    assert_eq!(status, 201, "{body}");
    body["id"].as_str().unwrap().to_string()
}

fn stored(addr: &str, id: &str) -> Vec<Value> {
    let (status, events) = request(addr, "GET", &format!("/api/v1/sessions/{id}/events"), None);
    assert_eq!(status, 200, "{events}");
    events.as_array().unwrap().clone()
}

/// Waits until the stored events of `id` hold one of type `kind`; returns it.
async fn wait_for(addr: &str, id: &str, kind: &str, limit: Duration) -> Value {
    let deadline = Instant::now() + limit;
    loop {
        let events = stored_async(addr, id).await;
        if let Some(e) = events.iter().find(|e| e["type"] == kind) {
            return e.clone();
        }
        assert!(
            Instant::now() < deadline,
            "session {id}: no {kind} within {limit:?}; got {:?}",
            kinds(&events)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn post(addr: &str, path: &str, body: Value) -> (u16, Value) {
    request(addr, "POST", path, Some(&body))
}

/// The worker's `/health` once it runs no turn (a turn's `turn_finished` is stored a moment
/// before its worker counts it done).
fn idle_health(addr: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (status, h) = request(addr, "GET", "/health", None);
        assert_eq!(status, 200);
        if h["running"] == 0 || Instant::now() > deadline {
            return h;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_turn_cancelled_through_the_other_server_ends_cancelled_and_frees_its_worker() {
    let Some(base) = test_database_url() else {
        return;
    };
    let url = fresh_database(&base, "cancel_running").await;
    let mut cluster = Cluster::new(url, SLOW);
    std::fs::write(cluster.workspace.join("quick.yaml"), QUICK).unwrap();
    cluster.start_server();
    cluster.start_server();
    cluster.start_worker();
    let a = cluster.servers[0].addr.clone();
    let b = cluster.servers[1].addr.clone();
    let id = create_session(&a);
    let watcher = tokio::spawn(watch(b.clone(), id.clone(), Duration::from_secs(60)));
    send_async(&a, &id, "think hard").await;
    wait_for(&a, &id, "turn_started", Duration::from_secs(60)).await;
    // Either server says it runs (the web UI enables its cancel button on that).
    let (_, view) = get_async(&b, format!("/api/v1/sessions/{id}")).await;
    assert_eq!(view["turn_running"], true, "{view}");

    let asked = Instant::now();
    let (status, body) = post_async(&b, format!("/api/v1/sessions/{id}/cancel"), json!({})).await;
    assert_eq!(status, 202, "{body}");
    let events = watcher.await.unwrap();
    let took = asked.elapsed();
    let last = events.last().unwrap();
    assert_eq!(last["status"], "cancelled", "{last}");
    assert!(took < Duration::from_secs(10), "cancelled after {took:?}");
    eprintln!("a running turn cancelled through the other server ended in {took:?}");
    let (_, session) = get_async(&a, format!("/api/v1/sessions/{id}")).await;
    assert_eq!(session["status"], "cancelled", "{session}");
    assert_eq!(session["turn_running"], false, "{session}");

    // Nothing is left to cancel.
    let (status, body) = post_async(&b, format!("/api/v1/sessions/{id}/cancel"), json!({})).await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error_code"], "no_turn_running");

    // The one worker takes the next job at once; the cancelled one was not retried.
    let next = session_with(&a, "quick.yaml");
    let watcher = tokio::spawn(watch(b.clone(), next.clone(), Duration::from_secs(30)));
    send_async(&a, &next, "answer").await;
    let events = watcher.await.unwrap();
    assert_eq!(events.last().unwrap()["status"], "completed");
    let w = cluster.workers[0].addr.clone();
    let h = blocking(move || idle_health(&w)).await;
    assert_eq!(
        (h["running"].as_u64(), h["completed"].as_u64()),
        (Some(0), Some(2)),
        "{h}"
    );
    let turns = stored(&a, &id)
        .iter()
        .filter(|e| e["type"] == "turn_started")
        .count();
    assert_eq!(turns, 1, "the cancelled turn ran once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_turn_cancelled_while_every_worker_is_busy_never_runs() {
    let Some(base) = test_database_url() else {
        return;
    };
    let url = fresh_database(&base, "cancel_queued").await;
    let mut cluster = Cluster::new(url, SLOW);
    std::fs::write(cluster.workspace.join("quick.yaml"), QUICK).unwrap();
    cluster.start_server();
    cluster.start_server();
    cluster.start_worker();
    let a = cluster.servers[0].addr.clone();
    let b = cluster.servers[1].addr.clone();
    // The only worker is busy with a slow turn.
    let busy = create_session(&a);
    send_async(&a, &busy, "think hard").await;
    wait_for(&a, &busy, "turn_started", Duration::from_secs(60)).await;

    let queued = session_with(&a, "quick.yaml");
    let watcher = tokio::spawn(watch(b.clone(), queued.clone(), Duration::from_secs(30)));
    send_async(&a, &queued, "answer").await;
    let (status, body) =
        post_async(&b, format!("/api/v1/sessions/{queued}/cancel"), json!({})).await;
    assert_eq!(status, 202, "{body}");
    let events = watcher.await.unwrap();
    assert_eq!(kinds(&events), ["turn_finished"], "it never started");
    assert_eq!(events[0]["status"], "cancelled");

    // Free the worker; the cancelled job still never runs.
    let (status, body) = post_async(&b, format!("/api/v1/sessions/{busy}/cancel"), json!({})).await;
    assert_eq!(status, 202, "{body}");
    wait_for(&a, &busy, "turn_finished", Duration::from_secs(10)).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after = stored_async(&a, &queued).await;
    assert_eq!(kinds(&after), ["turn_finished"], "it never ran");
    let w = cluster.workers[0].addr.clone();
    let h = blocking(move || idle_health(&w)).await;
    assert_eq!(
        (h["running"].as_u64(), h["completed"].as_u64()),
        (Some(0), Some(1)),
        "{h}"
    );
    // The session takes messages again: this one runs.
    let watcher = tokio::spawn(watch(b.clone(), queued.clone(), Duration::from_secs(30)));
    send_async(&a, &queued, "answer now").await;
    let events = watcher.await.unwrap();
    assert_eq!(
        events.last().unwrap()["status"],
        "cancelled",
        "the socket replays from 0"
    );
    let (a2, q2) = (a.clone(), queued.clone());
    let done = wait_for_second_finish(&a2, &q2).await;
    assert_eq!(done["status"], "completed", "{done}");
}

/// The second `turn_finished` of session `id`.
async fn wait_for_second_finish(addr: &str, id: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let events = stored_async(addr, id).await;
        let finished: Vec<&Value> = events
            .iter()
            .filter(|e| e["type"] == "turn_finished")
            .collect();
        if finished.len() >= 2 {
            return finished[1].clone();
        }
        assert!(
            Instant::now() < deadline,
            "session {id}: one turn_finished only: {:?}",
            kinds(&events)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_answered_through_the_other_server_reaches_the_worker() {
    let Some(base) = test_database_url() else {
        return;
    };
    let url = fresh_database(&base, "approve").await;
    let mut cluster = Cluster::new(url, REMOVE);
    cluster.start_server();
    cluster.start_server();
    cluster.start_worker();
    let a = cluster.servers[0].addr.clone();
    let b = cluster.servers[1].addr.clone();
    let lib = cluster.workspace.join("src/lib.rs");

    // Approved through server B: the command runs, the turn completes.
    let id = create_session(&a);
    let watcher = tokio::spawn(watch(a.clone(), id.clone(), Duration::from_secs(60)));
    send_async(&a, &id, "tidy up").await;
    let asked = wait_for(&b, &id, "approval_requested", Duration::from_secs(60)).await;
    assert_eq!(asked["call_id"], "rm1");
    assert_eq!(asked["class"], "destructive");
    assert!(lib.exists(), "it waits");
    let (b2, id2) = (b.clone(), id.clone());
    let (status, err) = blocking(move || {
        post(
            &b2,
            &format!("/api/v1/sessions/{id2}/approve"),
            json!({"call_id": "other"}),
        )
    })
    .await;
    assert_eq!(status, 409, "{err}");
    assert_eq!(err["error_code"], "no_pending_approval");
    let (b2, id2) = (b.clone(), id.clone());
    let (status, body) = blocking(move || {
        post(
            &b2,
            &format!("/api/v1/sessions/{id2}/approve"),
            json!({"call_id": "rm1", "scope": "session"}),
        )
    })
    .await;
    assert_eq!(status, 200, "{body}");
    let events = watcher.await.unwrap();
    assert_eq!(events.last().unwrap()["status"], "completed");
    let resolved = events
        .iter()
        .find(|e| e["type"] == "approval_resolved")
        .unwrap();
    assert_eq!(resolved["approved"], true, "{resolved}");
    assert!(!lib.exists(), "approved: it ran");
    // Approved for the session: the next turn (a new handle, maybe another worker) runs the
    // same call without asking.
    std::fs::write(&lib, "pub fn one() -> u8 { 1 }\n").unwrap();
    send_async(&a, &id, "tidy up again").await;
    let second = wait_for_second_finish(&a, &id).await;
    assert_eq!(second["status"], "completed", "{second}");
    let all = stored_async(&a, &id).await;
    let asked = all
        .iter()
        .filter(|e| e["type"] == "approval_requested")
        .count();
    assert_eq!(asked, 1, "{:?}", kinds(&all));
    assert!(!lib.exists(), "it ran again");

    // Denied through server B: the file stays and the model reads why.
    std::fs::write(&lib, "pub fn one() -> u8 { 1 }\n").unwrap();
    let id = create_session(&a);
    let watcher = tokio::spawn(watch(a.clone(), id.clone(), Duration::from_secs(60)));
    send_async(&a, &id, "tidy up").await;
    wait_for(&b, &id, "approval_requested", Duration::from_secs(60)).await;
    let (b2, id2) = (b.clone(), id.clone());
    let (status, body) = blocking(move || {
        post(
            &b2,
            &format!("/api/v1/sessions/{id2}/deny"),
            json!({"call_id": "rm1", "reason": "keep the library"}),
        )
    })
    .await;
    assert_eq!(status, 200, "{body}");
    let events = watcher.await.unwrap();
    assert_eq!(events.last().unwrap()["status"], "completed");
    assert!(lib.exists(), "denied: untouched");
    let result = events
        .iter()
        .find(|e| e["type"] == "tool_result" && e["id"] == "rm1")
        .unwrap();
    assert_eq!(result["is_error"], true);
    assert!(
        result["content"]
            .as_str()
            .unwrap()
            .contains("keep the library"),
        "{result}"
    );
    // Answered: nothing waits any more.
    let (b2, id2) = (b.clone(), id.clone());
    let (status, err) = blocking(move || {
        post(
            &b2,
            &format!("/api/v1/sessions/{id2}/approve"),
            json!({"call_id": "rm1"}),
        )
    })
    .await;
    assert_eq!(status, 409, "{err}");
    assert_eq!(err["error_code"], "no_pending_approval");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unanswered_approval_is_denied_after_the_configured_timeout() {
    let Some(base) = test_database_url() else {
        return;
    };
    let url = fresh_database(&base, "approval_timeout").await;
    let mut cluster = Cluster::new(url, REMOVE);
    let config = cluster.home.join(".config/keel");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(config.join("config.toml"), "[approval]\ntimeout_secs = 2\n").unwrap();
    cluster.start_server();
    cluster.start_worker();
    let a = cluster.servers[0].addr.clone();
    let id = create_session(&a);
    let watcher = tokio::spawn(watch(a.clone(), id.clone(), Duration::from_secs(60)));
    send_async(&a, &id, "tidy up").await;
    let events = watcher.await.unwrap();
    assert_eq!(events.last().unwrap()["status"], "completed");
    let resolved = events
        .iter()
        .find(|e| e["type"] == "approval_resolved")
        .unwrap();
    assert_eq!(resolved["approved"], false, "{resolved}");
    assert!(
        resolved["reason"]
            .as_str()
            .unwrap()
            .contains("nobody answered within 2 s"),
        "{resolved}"
    );
    assert!(cluster.workspace.join("src/lib.rs").exists(), "not run");
}
