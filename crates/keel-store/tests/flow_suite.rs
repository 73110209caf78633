//! The flow-run store suite ([`FlowStore`]: runs, per-node checkpoints, traces), run against
//! every backend: SQLite (always) and PostgreSQL (with the `postgres` feature and
//! `KEEL_TEST_DATABASE_URL`, e.g. `postgres://keelpg@127.0.0.1:55432/keel_test`). Without a
//! database the Postgres half says SKIPPED and what to do; in CI (`CI=true`) it fails instead.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

mod common;
use common::*;

use keel_store::StoreError;
use keel_store::flow::{FlowProgress, FlowRunRow, FlowStore};

fn run(id: &str, ws: &str) -> FlowRunRow {
    FlowRunRow {
        id: id.into(),
        workspace: ws.into(),
        flow_name: "build".into(),
        flow_file: "/w/.keel/flows/build.yaml".into(),
        flow_source: "name: build\nnodes: []\n".into(),
        inputs: r#"{"target":"x"}"#.into(),
        status: "running".into(),
        state: r#"{"nodes":{}}"#.into(),
        trace: r#"{"steps":[]}"#.into(),
        pid: Some(4242),
        created_at: 0,
        updated_at: 0,
    }
}

fn progress(status: &str, n: usize) -> FlowProgress {
    FlowProgress {
        status: status.into(),
        state: format!(r#"{{"nodes":{{"n{n}":{{}}}}}}"#),
        trace: format!(r#"{{"steps":["s{n}"]}}"#),
    }
}

async fn runs_round_trip(s: &dyn FlowStore, name: &str) {
    let ws = unique("/ws-rt");
    let id = unique("run-rt");
    assert!(!s.flow_run_exists(&id).await.unwrap());
    s.create_flow_run(&run(&id, &ws)).await.unwrap();
    assert!(s.flow_run_exists(&id).await.unwrap());
    let got = s.flow_run(&id).await.unwrap();
    let want = run(&id, &ws);
    assert_eq!(
        (&got.inputs, &got.state, &got.trace, got.pid),
        (&want.inputs, &want.state, &want.trace, want.pid),
        "{name}"
    );
    assert_eq!(
        (got.flow_source.as_str(), got.status.as_str()),
        (want.flow_source.as_str(), "running")
    );
    assert!(
        got.created_at > 0 && got.created_at == got.updated_at,
        "{name}: the store's clock"
    );

    // A unique prefix finds it; an unknown id says how to list runs.
    let by_prefix = s.flow_run(&id[..id.len() - 3]).await.unwrap();
    assert_eq!(by_prefix.id, id, "{name}");
    let missing = s.flow_run("no-such-run").await.unwrap_err();
    assert!(
        matches!(&missing, StoreError::Missing(m) if m.contains("keel flow runs")),
        "{name}: {missing}"
    );

    // The run ends: status, state, trace and pid are replaced.
    let end = progress("completed", 9);
    s.update_flow_run(&id, &end, None).await.unwrap();
    let got = s.flow_run(&id).await.unwrap();
    assert_eq!(
        (
            got.status.as_str(),
            got.state.as_str(),
            got.trace.as_str(),
            got.pid
        ),
        ("completed", end.state.as_str(), end.trace.as_str(), None),
        "{name}"
    );
    assert!(got.updated_at >= got.created_at, "{name}");
    // Resumed by another process.
    s.update_flow_run(&id, &progress("running", 10), Some(7))
        .await
        .unwrap();
    assert_eq!(s.flow_run(&id).await.unwrap().pid, Some(7), "{name}");
}

async fn ambiguous_prefix(s: &dyn FlowStore, name: &str) {
    let ws = unique("/ws-amb");
    let base = unique("run-amb");
    s.create_flow_run(&run(&format!("{base}-a"), &ws))
        .await
        .unwrap();
    s.create_flow_run(&run(&format!("{base}-b"), &ws))
        .await
        .unwrap();
    let err = s.flow_run(&base).await.unwrap_err();
    assert!(
        matches!(&err, StoreError::Conflict(m) if m.contains("several flow runs")),
        "{name}: {err}"
    );
    // An exact id wins over a longer id it prefixes.
    s.create_flow_run(&run(&base, &ws)).await.unwrap();
    assert_eq!(s.flow_run(&base).await.unwrap().id, base, "{name}");
}

async fn checkpoints_in_order(s: &dyn FlowStore, name: &str) {
    let ws = unique("/ws-cp");
    let id = unique("run-cp");
    s.create_flow_run(&run(&id, &ws)).await.unwrap();
    for (i, node) in ["build", "test", "deliver"].iter().enumerate() {
        s.checkpoint_flow_run(
            &id,
            node,
            r#"{"status":"completed"}"#,
            &progress("running", i),
        )
        .await
        .unwrap();
    }
    assert_eq!(
        s.flow_checkpoints(&id).await.unwrap(),
        ["build", "test", "deliver"],
        "{name}"
    );
    let got = s.flow_run(&id).await.unwrap();
    assert_eq!(
        got.state,
        progress("running", 2).state,
        "{name}: the last checkpoint's state"
    );
    assert_eq!(got.trace, progress("running", 2).trace, "{name}");
    assert!(s.flow_checkpoints("no-such-run").await.unwrap().is_empty());
}

/// Parallel nodes of one run checkpoint at once: every checkpoint is kept, numbered once.
async fn concurrent_checkpoints(s: Arc<dyn FlowStore>, name: &str) {
    let ws = unique("/ws-par");
    let id = unique("run-par");
    s.create_flow_run(&run(&id, &ws)).await.unwrap();
    let mut tasks = Vec::new();
    for i in 0..12 {
        let (s, id) = (s.clone(), id.clone());
        tasks.push(tokio::spawn(async move {
            s.checkpoint_flow_run(&id, &format!("n{i}"), "{}", &progress("running", i))
                .await
        }));
    }
    for t in tasks {
        t.await.unwrap().unwrap();
    }
    let mut nodes = s.flow_checkpoints(&id).await.unwrap();
    nodes.sort();
    let mut want: Vec<String> = (0..12).map(|i| format!("n{i}")).collect();
    want.sort();
    assert_eq!(nodes, want, "{name}");
}

async fn lists_newest_first_per_workspace(s: &dyn FlowStore, name: &str) {
    let (ws, other) = (unique("/ws-list"), unique("/ws-other"));
    let ids: Vec<String> = (0..3).map(|i| unique(&format!("run-list{i}"))).collect();
    for id in &ids {
        s.create_flow_run(&run(id, &ws)).await.unwrap();
    }
    s.create_flow_run(&run(&unique("run-else"), &other))
        .await
        .unwrap();
    let listed: Vec<String> = s
        .list_flow_runs(Some(&ws), 10)
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.id)
        .collect();
    let newest_first: Vec<String> = ids.iter().rev().cloned().collect();
    assert_eq!(
        listed, newest_first,
        "{name}: same-millisecond runs keep their order"
    );
    let one = s.list_flow_runs(Some(&ws), 1).await.unwrap();
    assert_eq!(one.len(), 1, "{name}");
    assert_eq!(one[0].id, ids[2], "{name}");
    let all = s.list_flow_runs(None, 1000).await.unwrap();
    assert!(all.iter().any(|r| r.workspace == other), "{name}");
    assert!(all.len() >= 4, "{name}");
}

async fn run_suite(name: &str, store: Arc<dyn FlowStore>) {
    runs_round_trip(store.as_ref(), name).await;
    ambiguous_prefix(store.as_ref(), name).await;
    checkpoints_in_order(store.as_ref(), name).await;
    concurrent_checkpoints(store.clone(), name).await;
    lists_newest_first_per_workspace(store.as_ref(), name).await;
    eprintln!("{name}: flow store suite passed");
}

on_both_backends!(run_suite, "flow store suite", "flow_suite", 4);
