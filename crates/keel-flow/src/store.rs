//! Flow runs in the session database (`flow_runs`, `flow_checkpoints`): a typed view over
//! [`keel_store::flow::FlowStore`], so runs live in SQLite or PostgreSQL alike.

use std::collections::BTreeMap;
use std::sync::Arc;

use keel_store::StoreError;
use keel_store::flow::{FlowProgress, FlowRunRow};
use serde::{Deserialize, Serialize};

use crate::ir::Value;
use crate::state::{RunState, Trace};

/// A stored run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    pub id: String,
    pub workspace: String,
    pub flow_name: String,
    pub flow_file: String,
    /// The flow file's text when the run started (resume and replay compile this, not the file).
    pub flow_source: String,
    pub inputs: BTreeMap<String, Value>,
    /// `running`, `completed`, `failed` or `cancelled`.
    pub status: String,
    pub state: RunState,
    pub trace: Trace,
    pub pid: Option<u32>,
    pub created_at: u64,
    pub updated_at: u64,
}

/// The flow tables of a Keel store (SQLite or PostgreSQL).
#[derive(Clone)]
pub struct FlowStore {
    backend: Arc<dyn keel_store::flow::FlowStore>,
}

impl std::fmt::Debug for FlowStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FlowStore").finish_non_exhaustive()
    }
}

fn json<T: Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "{}".into())
}

fn parse<T: for<'de> Deserialize<'de>>(text: &str, what: &str) -> Result<T, StoreError> {
    serde_json::from_str(text).map_err(|e| StoreError::Corrupt {
        context: what.to_string(),
        reason: e.to_string(),
    })
}

fn decode(row: FlowRunRow) -> Result<RunRecord, StoreError> {
    Ok(RunRecord {
        inputs: parse(&row.inputs, "flow run inputs")?,
        state: parse(&row.state, "flow run state")?,
        trace: parse(&row.trace, "flow run trace")?,
        id: row.id,
        workspace: row.workspace,
        flow_name: row.flow_name,
        flow_file: row.flow_file,
        flow_source: row.flow_source,
        status: row.status,
        pid: row.pid,
        created_at: row.created_at,
        updated_at: row.updated_at,
    })
}

fn progress(status: &str, state: &RunState, trace: &Trace) -> FlowProgress {
    FlowProgress {
        status: status.to_string(),
        state: json(state),
        trace: json(trace),
    }
}

impl FlowStore {
    /// Flow runs in `store` (a `SqliteStore`, or a `PgStore`).
    pub fn new<S: keel_store::flow::FlowStore + 'static>(store: Arc<S>) -> Self {
        Self { backend: store }
    }

    /// Flow runs in any store behind the trait.
    pub fn from_dyn(backend: Arc<dyn keel_store::flow::FlowStore>) -> Self {
        Self { backend }
    }

    /// Records a new run.
    pub async fn create(&self, run: &RunRecord) -> Result<(), StoreError> {
        let row = FlowRunRow {
            id: run.id.clone(),
            workspace: run.workspace.clone(),
            flow_name: run.flow_name.clone(),
            flow_file: run.flow_file.clone(),
            flow_source: run.flow_source.clone(),
            inputs: json(&run.inputs),
            status: run.status.clone(),
            state: json(&run.state),
            trace: json(&run.trace),
            pid: run.pid,
            created_at: run.created_at,
            updated_at: run.updated_at,
        };
        self.backend.create_flow_run(&row).await
    }

    /// Saves the run's state and trace after `node` finished, as one checkpoint.
    pub async fn checkpoint(
        &self,
        run_id: &str,
        node: &str,
        status: &str,
        state: &RunState,
        trace: &Trace,
    ) -> Result<(), StoreError> {
        let node_state = json(&state.nodes.get(node));
        self.backend
            .checkpoint_flow_run(run_id, node, &node_state, &progress(status, state, trace))
            .await
    }

    /// Sets the run's status, state and trace (the run ended, or resumed).
    pub async fn update(
        &self,
        run_id: &str,
        status: &str,
        state: &RunState,
        trace: &Trace,
        pid: Option<u32>,
    ) -> Result<(), StoreError> {
        self.backend
            .update_flow_run(run_id, &progress(status, state, trace), pid)
            .await
    }

    /// The run with id (or unique id prefix) `id`.
    pub async fn get(&self, id: &str) -> Result<RunRecord, StoreError> {
        decode(self.backend.flow_run(id).await?)
    }

    /// The newest runs first (at most `limit`), optionally only those in `workspace`.
    pub async fn list(
        &self,
        workspace: Option<&str>,
        limit: usize,
    ) -> Result<Vec<RunRecord>, StoreError> {
        self.backend
            .list_flow_runs(workspace, limit)
            .await?
            .into_iter()
            .map(decode)
            .collect()
    }

    /// The nodes checkpointed for `run_id`, in order.
    pub async fn checkpoints(&self, run_id: &str) -> Result<Vec<String>, StoreError> {
        self.backend.flow_checkpoints(run_id).await
    }

    /// Whether a run row exists (for tests and tools).
    pub async fn exists(&self, run_id: &str) -> Result<bool, StoreError> {
        self.backend.flow_run_exists(run_id).await
    }
}
