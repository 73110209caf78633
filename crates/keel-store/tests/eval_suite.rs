//! The eval-run store suite ([`EvalStore`]), run against every backend: SQLite (always) and
//! PostgreSQL (with the `postgres` feature and `KEEL_TEST_DATABASE_URL`; skipped visibly
//! without it, a failure in CI).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

mod common;
use common::*;

use keel_store::StoreError;
use keel_store::eval::{EvalStore, EvalTaskResult, NewEvalRun};

fn new_run(suite: &str, passed: bool) -> NewEvalRun {
    NewEvalRun {
        suite: suite.into(),
        suite_path: format!("evals/{suite}.toml"),
        provider: "scripted".into(),
        model: "scripted".into(),
        results: vec![
            EvalTaskResult {
                id: "a".into(),
                success: passed,
                status: "completed".into(),
                session_id: "s-1".into(),
                steps: 3,
                input_tokens: 10,
                output_tokens: 5,
                cost_usd: 0.25,
                wall_ms: 40,
                check_exit: Some(if passed { 0 } else { 1 }),
                check_tail: "ok\n".into(),
                error: String::new(),
            },
            EvalTaskResult {
                id: "b".into(),
                status: "error".into(),
                error: "no workspace".into(),
                ..EvalTaskResult::default()
            },
        ],
        wall_ms: 1234,
    }
}

async fn run_suite(name: &str, s: Arc<dyn EvalStore>) {
    assert!(s.list_eval_runs(10).await.unwrap().is_empty(), "{name}");
    let first = s.add_eval_run(&new_run("smoke", true)).await.unwrap();
    assert_eq!(first.results, new_run("smoke", true).results, "{name}");
    assert_eq!((first.passed(), first.wall_ms), (1, 1234), "{name}");
    assert!(first.created_at > 0, "{name}");
    let second = s.add_eval_run(&new_run("smoke", false)).await.unwrap();
    assert!(second.id > first.id, "{name}: ids grow");
    assert_eq!(s.eval_run(first.id).await.unwrap(), first, "{name}");
    let listed: Vec<i64> = s
        .list_eval_runs(10)
        .await
        .unwrap()
        .iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(listed, [second.id, first.id], "{name}: newest first");
    assert_eq!(s.list_eval_runs(1).await.unwrap().len(), 1, "{name}");
    let err = s.eval_run(second.id + 100).await.unwrap_err();
    assert!(
        matches!(&err, StoreError::Missing(m) if m.contains("keel eval runs")),
        "{name}: {err}"
    );
    eprintln!("{name}: eval store suite passed");
}

on_both_backends!(run_suite, "eval store suite", "eval_suite", 2);
