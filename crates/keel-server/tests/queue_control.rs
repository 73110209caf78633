//! Queue mode's cancel and approvals, against a queue that records what it is asked (no
//! database; `keel-cli/tests/cluster_control.rs` runs the real one with workers): a queued
//! turn that is cancelled ends with a `turn_finished` `cancelled` and the session takes its
//! next message; a running turn's cancel and approval answers go to the queue with where the
//! session's events stand; an answer for a call the store does not show waiting is refused
//! without reaching the queue.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::{Arc, Mutex};

use common::*;
use futures::future::BoxFuture;
use keel_protocol::{ApprovalScope, EventKind, Op};
use keel_server::{ControlSeqs, Controlled, TurnQueue};
use serde_json::json;

/// Jobs waiting and whether one runs; every control call recorded.
#[derive(Default)]
struct FakeQueue {
    waiting: Mutex<Vec<String>>,
    running: Mutex<bool>,
    controls: Mutex<Vec<(String, Op, ControlSeqs)>>,
}

impl TurnQueue for FakeQueue {
    fn enqueue<'a>(
        &'a self,
        session_id: &'a str,
        _content: &'a str,
        after_seq: u64,
    ) -> BoxFuture<'a, Result<String, String>> {
        Box::pin(async move {
            let id = format!("{session_id}:{after_seq}");
            self.waiting.lock().unwrap().push(id.clone());
            Ok(id)
        })
    }

    fn control<'a>(
        &'a self,
        session_id: &'a str,
        op: &'a Op,
        seqs: ControlSeqs,
    ) -> BoxFuture<'a, Result<Controlled, String>> {
        Box::pin(async move {
            self.controls
                .lock()
                .unwrap()
                .push((session_id.to_string(), op.clone(), seqs));
            let mut waiting = self.waiting.lock().unwrap();
            if *op == Op::Interrupt && !waiting.is_empty() {
                let n = waiting.len();
                waiting.clear();
                return Ok(Controlled::Dequeued(n));
            }
            Ok(if *self.running.lock().unwrap() {
                Controlled::Delivered
            } else {
                Controlled::NothingRunning
            })
        })
    }
}

const QUICK: &str = "turns:\n  - text: \"done\"\n";

async fn start() -> (TestServer, Arc<FakeQueue>, String) {
    let queue = Arc::new(FakeQueue::default());
    let srv = TestServer::start_queued(queue.clone()).await;
    let id = srv
        .create_session(&srv.script("quick.yaml", QUICK), "react")
        .await;
    (srv, queue, id)
}

async fn types(srv: &TestServer, id: &str) -> Vec<String> {
    let (status, events) = srv.get(&format!("/api/v1/sessions/{id}/events")).await;
    assert_eq!(status, 200, "{events}");
    events
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["type"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn a_queued_turn_cancelled_ends_cancelled_and_the_session_takes_the_next_message() {
    let (srv, queue, id) = start().await;
    let (status, body) = srv
        .post(
            &format!("/api/v1/sessions/{id}/messages"),
            json!({"content": "hi"}),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    let (status, body) = srv
        .post(&format!("/api/v1/sessions/{id}/cancel"), json!({}))
        .await;
    assert_eq!(status, 202, "{body}");
    assert_eq!(types(&srv, &id).await, ["turn_finished"]);
    let (_, events) = srv.get(&format!("/api/v1/sessions/{id}/events")).await;
    assert_eq!(events[0]["status"], "cancelled", "{events}");
    assert_eq!(queue.controls.lock().unwrap()[0].1, Op::Interrupt);

    // Nothing is queued or running any more.
    let (status, body) = srv
        .post(&format!("/api/v1/sessions/{id}/cancel"), json!({}))
        .await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error_code"], "no_turn_running");

    // The next message is queued after the cancelled turn's end.
    let (status, body) = srv
        .post(
            &format!("/api/v1/sessions/{id}/messages"),
            json!({"content": "again"}),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    assert_eq!(body["job_id"], format!("{id}:1"));
}

#[tokio::test]
async fn a_running_turns_cancel_and_answers_go_to_the_queue() {
    let (srv, queue, id) = start().await;
    *queue.running.lock().unwrap() = true;
    let (status, body) = srv
        .post(&format!("/api/v1/sessions/{id}/cancel"), json!({}))
        .await;
    assert_eq!(status, 202, "{body}");
    assert!(
        types(&srv, &id).await.is_empty(),
        "the worker ends the turn"
    );

    // No call waits: refused here, the queue is not asked.
    let (status, body) = srv
        .post(
            &format!("/api/v1/sessions/{id}/approve"),
            json!({"call_id": "rm1"}),
        )
        .await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error_code"], "no_pending_approval");
    assert_eq!(queue.controls.lock().unwrap().len(), 1);

    // The store shows the call waiting (as a worker's turn stores it): the answer goes on.
    let store: Arc<dyn keel_store::Store> = srv.store.clone();
    keel_engine::Emitter::new(id.clone(), store, Vec::new())
        .emit(EventKind::ApprovalRequested {
            call_id: "rm1".into(),
            tool: "run_command".into(),
            summary: "rm src/lib.rs".into(),
            class: "destructive".into(),
            reason: "`rm` deletes files".into(),
        })
        .await
        .unwrap();
    let (status, body) = srv
        .post(
            &format!("/api/v1/sessions/{id}/approve"),
            json!({"call_id": "rm1", "scope": "session"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = srv
        .post(
            &format!("/api/v1/sessions/{id}/deny"),
            json!({"call_id": "rm1", "reason": "no"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let controls = queue.controls.lock().unwrap().clone();
    assert_eq!(
        controls[1],
        (
            id.clone(),
            Op::Approve {
                call_id: "rm1".into(),
                scope: ApprovalScope::Session
            },
            ControlSeqs {
                last: 1,
                finished: 0
            }
        )
    );
    assert!(matches!(&controls[2].1, Op::Deny { reason: Some(r), .. } if r == "no"));

    // Once the turn has finished, its calls wait no more.
    let store: Arc<dyn keel_store::Store> = srv.store.clone();
    keel_engine::Emitter::new(id.clone(), store, Vec::new())
        .emit(EventKind::TurnFinished {
            status: keel_protocol::SessionStatus::Completed,
            message: None,
        })
        .await
        .unwrap();
    let (status, body) = srv
        .post(
            &format!("/api/v1/sessions/{id}/approve"),
            json!({"call_id": "rm1"}),
        )
        .await;
    assert_eq!(status, 409, "{body}");
}
