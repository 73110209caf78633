//! Flow runs in the session database (`flow_runs`, `flow_checkpoints`): a typed view over
//! [`keel_store::flow::FlowStore`], so runs live in SQLite or PostgreSQL alike.
//!
//! A running run also holds a run lease (`flow-run:<id>` in the store's lease table, renewed by
//! a heartbeat), so "is this run alive" holds across machines sharing a PostgreSQL store; on
//! this machine a lease whose process is gone is taken over at once.

use std::collections::BTreeMap;
use std::sync::Arc;

use keel_store::flow::{FlowProgress, FlowRunRow};
use keel_store::{LEASE_TTL_MS, RunLease, Store, StoreError, lease_holder};
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

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
    /// Where run leases live (the same store); `None`: no leases, liveness by pid only.
    leases: Option<Arc<dyn Store>>,
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

/// The lease key of flow run `run_id` (beside sessions' ids in the run-lease table).
fn lease_key(run_id: &str) -> String {
    format!("flow-run:{run_id}")
}

/// The pid of a lease `holder` (`host:pid:run`) running on this machine, if it is one.
fn local_pid(holder: &str) -> Option<u32> {
    let mine = lease_holder("");
    let (host, _) = mine.split_once(':')?;
    let mut parts = holder.splitn(3, ':');
    if parts.next()? != host {
        return None;
    }
    parts.next()?.parse().ok()
}

impl FlowStore {
    /// Flow runs (and their leases) in `store` (a `SqliteStore`, or a `PgStore`).
    pub fn new<S: keel_store::flow::FlowStore + Store + 'static>(store: Arc<S>) -> Self {
        Self {
            backend: store.clone(),
            leases: Some(store),
        }
    }

    /// Flow runs in any store behind the trait, with run leases in `leases`.
    pub fn from_dyn(
        backend: Arc<dyn keel_store::flow::FlowStore>,
        leases: Option<Arc<dyn Store>>,
    ) -> Self {
        Self { backend, leases }
    }

    /// Takes run `run_id`'s lease for this process and keeps it renewed until released (or
    /// dropped). A lease of a process of this machine that is gone is taken over at once; a
    /// live lease of another holder is a [`StoreError::Conflict`] naming it.
    pub async fn take_lease(&self, run_id: &str) -> Result<Option<RunLease>, StoreError> {
        let Some(store) = &self.leases else {
            return Ok(None);
        };
        let key = lease_key(run_id);
        if let Some(lease) = store.lease(&key).await?
            && lease.is_live()
            && local_pid(&lease.holder)
                .is_some_and(|pid| pid != std::process::id() && !process_alive(pid))
        {
            store.release_lease(&key, &lease.holder).await?;
        }
        let holder = lease_holder(run_id);
        match RunLease::acquire(
            store.clone(),
            &key,
            holder,
            LEASE_TTL_MS,
            CancellationToken::new(),
        )
        .await?
        {
            Some(lease) => Ok(Some(lease)),
            None => {
                let other = store
                    .lease(&key)
                    .await?
                    .map(|l| l.holder)
                    .unwrap_or_default();
                Err(StoreError::Conflict(format!(
                    "flow run {run_id} is still running ({other}); stop it there, or wait {} s after it died, then resume",
                    LEASE_TTL_MS / 1000
                )))
            }
        }
    }

    /// Whether the process running `rec` is alive: its lease when one is recorded (a holder
    /// on this machine by its pid, elsewhere by the lease's expiry), else the run's pid here.
    pub async fn run_alive(&self, rec: &RunRecord) -> Result<bool, StoreError> {
        if let Some(store) = &self.leases
            && let Some(lease) = store.lease(&lease_key(&rec.id)).await?
        {
            return Ok(match local_pid(&lease.holder) {
                Some(pid) => lease.is_live() && (pid == std::process::id() || process_alive(pid)),
                None => lease.is_live(),
            });
        }
        Ok(rec
            .pid
            .is_some_and(|pid| pid == std::process::id() || process_alive(pid)))
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

/// Whether process `pid` exists (Linux: `/proc`; elsewhere assumed gone, so resume proceeds).
pub fn process_alive(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}
