//! Tables behind `keel flow`: one row per flow run (its definition, inputs, state checkpoint
//! and trace) and the checkpoints taken after every node, behind the [`FlowStore`] trait —
//! implemented by [`SqliteStore`](crate::SqliteStore) (`sqlite.rs`) and, with the `postgres`
//! feature, by `PgStore` (`postgres.rs`), so `keel-flow` runs on either.
//!
//! The store keeps the run's inputs, state and trace as JSON text: their types belong to
//! `keel-flow`, which encodes and decodes them (`keel_flow::store`).

#[cfg(feature = "postgres")]
mod postgres;
mod sqlite;

use serde::{Deserialize, Serialize};

use crate::StoreFuture;

/// Schema migration 7: flow runs and their per-node checkpoints.
pub(crate) const MIGRATION: &str = r#"
CREATE TABLE flow_runs (
    id          TEXT PRIMARY KEY,
    workspace   TEXT NOT NULL,
    flow_name   TEXT NOT NULL,
    flow_file   TEXT NOT NULL,
    flow_source TEXT NOT NULL,
    inputs      TEXT NOT NULL DEFAULT '{}',
    status      TEXT NOT NULL,
    state       TEXT NOT NULL DEFAULT '{}',
    trace       TEXT NOT NULL DEFAULT '{}',
    pid         INTEGER,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
);
CREATE INDEX flow_runs_created ON flow_runs(created_at DESC);
CREATE TABLE flow_checkpoints (
    run_id      TEXT NOT NULL REFERENCES flow_runs(id) ON DELETE CASCADE,
    seq         INTEGER NOT NULL,
    node        TEXT NOT NULL,
    node_state  TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    PRIMARY KEY (run_id, seq)
);
"#;

/// A stored flow run, its typed parts as JSON text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlowRunRow {
    pub id: String,
    pub workspace: String,
    pub flow_name: String,
    pub flow_file: String,
    /// The flow file's text when the run started.
    pub flow_source: String,
    /// JSON: the resolved inputs.
    pub inputs: String,
    /// `running`, `completed`, `failed` or `cancelled`.
    pub status: String,
    /// JSON: the run state (every node's state).
    pub state: String,
    /// JSON: the run's trace.
    pub trace: String,
    pub pid: Option<u32>,
    /// Unix milliseconds (set by the store on create).
    pub created_at: u64,
    /// Unix milliseconds (set by the store on every write).
    pub updated_at: u64,
}

/// A run's status, state and trace (JSON text) as of a checkpoint or an update.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FlowProgress {
    pub status: String,
    pub state: String,
    pub trace: String,
}

/// Flow runs and their per-node checkpoints.
pub trait FlowStore: Send + Sync {
    /// Records a new run (`created_at`/`updated_at` are the store's clock, not the row's).
    fn create_flow_run<'a>(&'a self, run: &'a FlowRunRow) -> StoreFuture<'a, ()>;
    /// Saves the run's progress after `node` finished together with the next checkpoint
    /// (`node_state`: JSON of the node's state), in one transaction.
    fn checkpoint_flow_run<'a>(
        &'a self,
        run_id: &'a str,
        node: &'a str,
        node_state: &'a str,
        progress: &'a FlowProgress,
    ) -> StoreFuture<'a, ()>;
    /// Sets the run's status, state, trace and process (the run ended, or resumed).
    fn update_flow_run<'a>(
        &'a self,
        run_id: &'a str,
        progress: &'a FlowProgress,
        pid: Option<u32>,
    ) -> StoreFuture<'a, ()>;
    /// The run with id (or unique id prefix) `id`: [`StoreError::Missing`](crate::StoreError)
    /// when none matches, [`StoreError::Conflict`](crate::StoreError) when several do.
    fn flow_run<'a>(&'a self, id: &'a str) -> StoreFuture<'a, FlowRunRow>;
    /// The newest runs first (at most `limit`), optionally only those in `workspace`.
    fn list_flow_runs<'a>(
        &'a self,
        workspace: Option<&'a str>,
        limit: usize,
    ) -> StoreFuture<'a, Vec<FlowRunRow>>;
    /// The nodes checkpointed for `run_id`, in order.
    fn flow_checkpoints<'a>(&'a self, run_id: &'a str) -> StoreFuture<'a, Vec<String>>;
    /// Whether a run with exactly this id exists.
    fn flow_run_exists<'a>(&'a self, run_id: &'a str) -> StoreFuture<'a, bool>;
}

/// The error for an id (prefix) that names no run.
pub(crate) fn no_run(id: &str) -> crate::StoreError {
    crate::StoreError::Missing(format!(
        "no flow run matches `{id}`; `keel flow runs` lists them"
    ))
}

/// The error for a prefix that names several runs.
pub(crate) fn many_runs(id: &str) -> crate::StoreError {
    crate::StoreError::Conflict(format!(
        "`{id}` matches several flow runs; give more characters of the id"
    ))
}
