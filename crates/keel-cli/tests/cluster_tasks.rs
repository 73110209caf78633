//! `work batch` as jobs on `keel serve --database` and `keel worker` (real processes, a fresh
//! PostgreSQL database; needs `KEEL_TEST_DATABASE_URL` — skipped visibly without it, a failure
//! in CI): PRD tasks added through the API, `POST /api/v1/work/batch` queues the first ready
//! task and each worker queues the next, so the tasks run one at a time in dependency order;
//! a second batch of the same workspace is refused while one runs; a worker killed with
//! SIGKILL mid-task hands its task to another worker, which resumes the task's own session.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cluster_common;

use std::time::{Duration, Instant};

use cluster_common::*;
use serde_json::{Value, json};

fn add_task(addr: &str, title: &str, depends_on: &[u64]) -> u64 {
    let (status, body) = request(
        addr,
        "POST",
        "/api/v1/tasks",
        Some(&json!({"title": title, "depends_on": depends_on})),
    );
    assert_eq!(status, 201, "{body}");
    body["id"].as_u64().unwrap()
}

fn tasks(addr: &str) -> Vec<Value> {
    let (status, body) = request(addr, "GET", "/api/v1/work/status", None);
    assert_eq!(status, 200, "{body}");
    body["tasks"].as_array().unwrap().clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_batch_runs_its_tasks_in_order_across_workers_and_survives_a_killed_worker() {
    let Some(base) = test_database_url() else {
        return;
    };
    let url = fresh_database(&base, "tasks").await;
    // Each task's session: a slow first reply (time to kill its worker), then done (said
    // twice: a task worded as a change is nudged once when nothing was written).
    let script = "turns:\n  - text: \"working\"\n    delay_ms: 2500\n    tool_calls:\n      - name: read_file\n        arguments: {path: src/lib.rs}\n  - text: \"done\"\n  - text: \"done: nothing needed changing\"\n";
    let mut cluster = Cluster::new(url, script);
    cluster.start_server();
    cluster.start_server();
    cluster.start_worker();
    cluster.start_worker();
    let a = cluster.servers[0].addr.clone();
    let b = cluster.servers[1].addr.clone();
    // Dependency order 2 → 3 → 1 (ids say nothing about the order).
    let t1 = add_task(&a, "wire the command", &[]);
    let t2 = add_task(&a, "write the parser", &[]);
    let t3 = add_task(&b, "use the parser", &[t2]);
    let (status, body) = request(
        &a,
        "PATCH",
        &format!("/api/v1/tasks/{t1}"),
        Some(&json!({"depends_on": [t3]})),
    );
    assert_eq!(status, 200, "{body}");
    let batch = json!({"provider": "scripted", "script": "script.yaml"});
    let (status, body) = request(&b, "POST", "/api/v1/work/batch", Some(&batch));
    assert_eq!(status, 202, "{body}");
    assert_eq!(body["queued"], true, "{body}");
    assert_eq!(body["task"], t2, "the first ready task is queued: {body}");
    // A second batch of the same workspace, through the other server, is refused.
    let (status, body) = request(&a, "POST", "/api/v1/work/batch", Some(&batch));
    assert_eq!(status, 409, "{body}");
    assert!(body.to_string().contains("already queued"), "{body}");

    // Kill the worker running the second task (t3) once its session has started.
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let now = tasks(&a);
        let t = now.iter().find(|t| t["id"] == t3).unwrap();
        if t["status"] == "in_progress" && t["session_id"].is_string() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "task {t3} never started: {now:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    cluster.kill_busy_worker(deadline, &format!("task {t3}"));

    let done = loop {
        let now = tasks(&b);
        if now.iter().all(|t| t["status"] == "done") {
            break now;
        }
        assert!(
            !now.iter().any(|t| t["status"] == "failed"),
            "a task failed: {now:?}"
        );
        assert!(
            Instant::now() < deadline,
            "the batch did not finish: {now:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    // One session per task (the killed one resumed, not restarted), and each task's proof was
    // written after the proof of the task it depends on.
    let mut proof_at = Vec::new();
    for id in [t2, t3, t1] {
        let t = done.iter().find(|t| t["id"] == id).unwrap();
        assert_eq!(
            t["sessions"].as_array().map(Vec::len),
            Some(1),
            "task {id}: {t}"
        );
        let (status, body) = request(&a, "GET", &format!("/api/v1/tasks/{id}"), None);
        assert_eq!(status, 200, "{body}");
        let proofs = body["proofs"].as_array().unwrap();
        assert_eq!(proofs.len(), 1, "task {id}: {body}");
        assert_eq!(
            proofs[0]["body"]["resumed"],
            id == t3,
            "task {id}: only the killed worker's task was resumed: {body}"
        );
        proof_at.push(proofs[0]["created_at"].as_u64().unwrap());
    }
    assert!(
        proof_at.windows(2).all(|w| w[0] <= w[1]),
        "tasks ran in dependency order: {proof_at:?}"
    );
    // The surviving worker ran the rest; nothing runs now.
    let (_, health) = request(&cluster.workers[0].addr, "GET", "/health", None);
    assert_eq!(health["running"], 0, "{health}");
}
