//! Evaluation runs (`keel eval`): which suite ran with which provider and model, and how each
//! task ended. One row per run; the per-task results are one JSON document, written once when
//! the run finishes (an eval run is a report, not a live record).
//!
//! Self-contained on purpose: one table, no foreign keys into sessions (a deleted session
//! leaves its eval result readable; the session id then simply no longer resolves).
//!
//! [`EvalStore`] is the async trait `keel eval` uses: implemented by
//! [`SqliteStore`](crate::SqliteStore) (the [`SqliteDb`] methods below, on the blocking pool)
//! and, with the `postgres` feature, by `PgStore` (`postgres.rs`, migration 5).

#[cfg(feature = "postgres")]
mod postgres;

use rusqlite::{OptionalExtension, params};
use serde::{Deserialize, Serialize};

use crate::sqlite::sql;
use crate::{SqliteDb, SqliteStore, StoreError, StoreFuture, now_ms};

/// The schema migration that adds eval runs (appended last in the SQLite list).
pub(crate) const MIGRATION: &str = r#"
CREATE TABLE eval_runs (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    suite       TEXT NOT NULL,
    suite_path  TEXT NOT NULL,
    provider    TEXT NOT NULL,
    model       TEXT NOT NULL,
    results     TEXT NOT NULL DEFAULT '[]',
    created_at  INTEGER NOT NULL,
    wall_ms     INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX eval_runs_created ON eval_runs(created_at DESC);
"#;

/// How one task of an eval run ended.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EvalTaskResult {
    /// The task's id in the suite.
    pub id: String,
    /// The check command passed after the run.
    pub success: bool,
    /// The session's final status (`completed`, `failed`, `max_steps` …), or `error` when no
    /// session could run.
    pub status: String,
    /// The session that ran the task (empty when none could start).
    pub session_id: String,
    /// Model requests.
    pub steps: u32,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cost_usd: f64,
    /// Wall time of the whole task (workspace, run, check), in milliseconds.
    pub wall_ms: u64,
    /// The check's exit code (`None`: killed, timed out or never ran).
    pub check_exit: Option<i32>,
    /// The tail of the check's output (or of the error that stopped the task).
    pub check_tail: String,
    /// Why the task could not run or was cut short (workspace, timeout), else empty.
    #[serde(default)]
    pub error: String,
}

/// A stored eval run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvalRunRecord {
    pub id: i64,
    /// The suite's name (its `name`, else the file stem).
    pub suite: String,
    /// The suite file as given.
    pub suite_path: String,
    pub provider: String,
    pub model: String,
    pub results: Vec<EvalTaskResult>,
    /// Unix milliseconds.
    pub created_at: u64,
    /// Wall time of the whole run, in milliseconds.
    pub wall_ms: u64,
}

impl EvalRunRecord {
    /// Tasks whose check passed.
    pub fn passed(&self) -> usize {
        self.results.iter().filter(|r| r.success).count()
    }
}

/// An eval run to store.
#[derive(Debug, Clone, PartialEq)]
pub struct NewEvalRun {
    pub suite: String,
    pub suite_path: String,
    pub provider: String,
    pub model: String,
    pub results: Vec<EvalTaskResult>,
    pub wall_ms: u64,
}

/// Parses `7` or `#7` as an eval run id.
pub fn parse_run_id(text: &str) -> Result<i64, StoreError> {
    text.trim()
        .trim_start_matches('#')
        .parse::<i64>()
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| {
            StoreError::Missing(format!(
                "`{text}` is not an eval run id (a number such as 3); `keel eval runs` lists them"
            ))
        })
}

pub(crate) type Row = (i64, String, String, String, String, String, i64, i64);

pub(crate) fn record(row: Row) -> Result<EvalRunRecord, StoreError> {
    let (id, suite, suite_path, provider, model, results, created_at, wall_ms) = row;
    let results = serde_json::from_str(&results).map_err(|e| StoreError::Corrupt {
        context: format!("results of eval run #{id}"),
        reason: e.to_string(),
    })?;
    Ok(EvalRunRecord {
        id,
        suite,
        suite_path,
        provider,
        model,
        results,
        created_at: u64::try_from(created_at).unwrap_or_default(),
        wall_ms: u64::try_from(wall_ms).unwrap_or_default(),
    })
}

fn read_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Row> {
    TryFrom::try_from(r)
}

const COLUMNS: &str = "id, suite, suite_path, provider, model, results, created_at, wall_ms";

impl SqliteDb {
    /// Stores a finished eval run and returns it with its id.
    pub fn add_eval_run(&self, run: &NewEvalRun) -> Result<EvalRunRecord, StoreError> {
        let results = serde_json::to_string(&run.results).map_err(|e| StoreError::Corrupt {
            context: "encoding eval results".into(),
            reason: e.to_string(),
        })?;
        let id = self.with_connection(|c| {
            c.execute(
                "INSERT INTO eval_runs (suite, suite_path, provider, model, results, created_at, wall_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                params![
                    run.suite,
                    run.suite_path,
                    run.provider,
                    run.model,
                    results,
                    now_ms() as i64,
                    i64::try_from(run.wall_ms).unwrap_or(i64::MAX)
                ],
            )
            .map_err(sql("saving an eval run"))?;
            Ok::<_, StoreError>(c.last_insert_rowid())
        })?;
        self.eval_run(id)
    }

    /// The eval run `id`.
    pub fn eval_run(&self, id: i64) -> Result<EvalRunRecord, StoreError> {
        let row = self.with_connection(|c| {
            c.query_row(
                &format!("SELECT {COLUMNS} FROM eval_runs WHERE id = ?1"),
                params![id],
                read_row,
            )
            .optional()
            .map_err(sql("reading an eval run"))
        })?;
        match row {
            Some(row) => record(row),
            None => Err(StoreError::Missing(format!(
                "no eval run #{id}; `keel eval runs` lists them"
            ))),
        }
    }

    /// The newest `limit` eval runs, newest first.
    pub fn list_eval_runs(&self, limit: usize) -> Result<Vec<EvalRunRecord>, StoreError> {
        let rows = self.with_connection(|c| {
            let mut stmt = c
                .prepare(&format!(
                    "SELECT {COLUMNS} FROM eval_runs ORDER BY id DESC LIMIT ?1"
                ))
                .map_err(sql("listing eval runs"))?;
            stmt.query_map(params![i64::try_from(limit).unwrap_or(i64::MAX)], read_row)
                .map_err(sql("listing eval runs"))?
                .collect::<rusqlite::Result<Vec<_>>>()
                .map_err(sql("listing eval runs"))
        })?;
        rows.into_iter().map(record).collect()
    }
}

/// Stored eval runs, on any backend.
pub trait EvalStore: Send + Sync {
    /// Stores a finished eval run and returns it with its id.
    fn add_eval_run<'a>(&'a self, run: &'a NewEvalRun) -> StoreFuture<'a, EvalRunRecord>;
    /// The eval run `id` ([`StoreError::Missing`] when there is none).
    fn eval_run(&self, id: i64) -> StoreFuture<'_, EvalRunRecord>;
    /// The newest `limit` eval runs, newest first.
    fn list_eval_runs(&self, limit: usize) -> StoreFuture<'_, Vec<EvalRunRecord>>;
}

impl EvalStore for SqliteStore {
    fn add_eval_run<'a>(&'a self, run: &'a NewEvalRun) -> StoreFuture<'a, EvalRunRecord> {
        let run = run.clone();
        Box::pin(self.call(move |db| db.add_eval_run(&run)))
    }

    fn eval_run(&self, id: i64) -> StoreFuture<'_, EvalRunRecord> {
        Box::pin(self.call(move |db| db.eval_run(id)))
    }

    fn list_eval_runs(&self, limit: usize) -> StoreFuture<'_, Vec<EvalRunRecord>> {
        Box::pin(self.call(move |db| db.list_eval_runs(limit)))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn runs_round_trip_newest_first() {
        let db = SqliteDb::open_in_memory().unwrap();
        let result = EvalTaskResult {
            id: "a".into(),
            success: true,
            status: "completed".into(),
            steps: 3,
            ..EvalTaskResult::default()
        };
        let new = NewEvalRun {
            suite: "s".into(),
            suite_path: "s.toml".into(),
            provider: "scripted".into(),
            model: "m".into(),
            results: vec![result.clone()],
            wall_ms: 10,
        };
        let first = db.add_eval_run(&new).unwrap();
        let second = db.add_eval_run(&new).unwrap();
        assert_eq!(first.results, vec![result]);
        assert_eq!(first.passed(), 1);
        let listed: Vec<i64> = db
            .list_eval_runs(10)
            .unwrap()
            .iter()
            .map(|r| r.id)
            .collect();
        assert_eq!(listed, vec![second.id, first.id]);
        assert!(db.eval_run(99).is_err());
        assert_eq!(parse_run_id("#2").unwrap(), 2);
        assert!(parse_run_id("x").is_err());
    }
}
