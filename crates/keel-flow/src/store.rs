//! Flow runs in the session database (`flow_runs`, `flow_checkpoints`; schema in keel-store).

use std::collections::BTreeMap;
use std::sync::Arc;

use keel_store::{SqliteStore, StoreError};
use rusqlite::{OptionalExtension, params};
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

/// The flow tables of a Keel store.
#[derive(Clone, Debug)]
pub struct FlowStore {
    store: Arc<SqliteStore>,
}

fn sql(context: &'static str) -> impl FnOnce(rusqlite::Error) -> StoreError {
    move |source| StoreError::Sqlite {
        context: context.to_string(),
        source,
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

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

const COLUMNS: &str = "id, workspace, flow_name, flow_file, flow_source, inputs, status, state, trace, pid, created_at, updated_at";

fn record(row: &rusqlite::Row<'_>) -> rusqlite::Result<[String; 9]> {
    Ok([
        row.get(0)?,
        row.get(1)?,
        row.get(2)?,
        row.get(3)?,
        row.get(4)?,
        row.get(5)?,
        row.get(6)?,
        row.get(7)?,
        row.get(8)?,
    ])
}

fn decode(
    cols: [String; 9],
    pid: Option<i64>,
    created: i64,
    updated: i64,
) -> Result<RunRecord, StoreError> {
    let [
        id,
        workspace,
        flow_name,
        flow_file,
        flow_source,
        inputs,
        status,
        state,
        trace,
    ] = cols;
    Ok(RunRecord {
        inputs: parse(&inputs, "flow run inputs")?,
        state: parse(&state, "flow run state")?,
        trace: parse(&trace, "flow run trace")?,
        id,
        workspace,
        flow_name,
        flow_file,
        flow_source,
        status,
        pid: pid.and_then(|p| u32::try_from(p).ok()),
        created_at: u64::try_from(created).unwrap_or(0),
        updated_at: u64::try_from(updated).unwrap_or(0),
    })
}

impl FlowStore {
    pub fn new(store: Arc<SqliteStore>) -> Self {
        Self { store }
    }

    async fn call<T: Send + 'static>(
        &self,
        f: impl FnOnce(&rusqlite::Connection) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        self.store
            .call(move |db| db.with_connection(|c| f(c)))
            .await
    }

    /// Records a new run.
    pub async fn create(&self, run: &RunRecord) -> Result<(), StoreError> {
        let r = run.clone();
        self.call(move |c| {
            let now = now_ms() as i64;
            c.execute(
                &format!("INSERT INTO flow_runs ({COLUMNS}) VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?11)"),
                params![
                    r.id,
                    r.workspace,
                    r.flow_name,
                    r.flow_file,
                    r.flow_source,
                    json(&r.inputs),
                    r.status,
                    json(&r.state),
                    json(&r.trace),
                    r.pid.map(i64::from),
                    now
                ],
            )
            .map_err(sql("recording a flow run"))?;
            Ok(())
        })
        .await
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
        let (run_id, node, status) = (run_id.to_string(), node.to_string(), status.to_string());
        let node_state = json(&state.nodes.get(&node));
        let (state, trace) = (json(state), json(trace));
        self.call(move |c| {
            let tx = c
                .unchecked_transaction()
                .map_err(sql("starting a flow checkpoint"))?;
            let now = now_ms() as i64;
            tx.execute(
                "UPDATE flow_runs SET status = ?2, state = ?3, trace = ?4, updated_at = ?5 WHERE id = ?1",
                params![run_id, status, state, trace, now],
            )
            .map_err(sql("saving a flow checkpoint"))?;
            tx.execute(
                "INSERT INTO flow_checkpoints (run_id, seq, node, node_state, created_at)
                 VALUES (?1, (SELECT COALESCE(MAX(seq), 0) + 1 FROM flow_checkpoints WHERE run_id = ?1), ?2, ?3, ?4)",
                params![run_id, node, node_state, now],
            )
            .map_err(sql("saving a flow checkpoint"))?;
            tx.commit().map_err(sql("committing a flow checkpoint"))?;
            Ok(())
        })
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
        let (run_id, status) = (run_id.to_string(), status.to_string());
        let (state, trace) = (json(state), json(trace));
        self.call(move |c| {
            c.execute(
                "UPDATE flow_runs SET status = ?2, state = ?3, trace = ?4, pid = ?5, updated_at = ?6 WHERE id = ?1",
                params![run_id, status, state, trace, pid.map(i64::from), now_ms() as i64],
            )
            .map_err(sql("updating a flow run"))?;
            Ok(())
        })
        .await
    }

    /// The run with id (or unique id prefix) `id`.
    pub async fn get(&self, id: &str) -> Result<RunRecord, StoreError> {
        let id = id.to_string();
        self.call(move |c| {
            let mut stmt = c
                .prepare(&format!(
                    "SELECT {COLUMNS} FROM flow_runs WHERE id LIKE ?1 || '%' ORDER BY created_at DESC LIMIT 2"
                ))
                .map_err(sql("reading a flow run"))?;
            let rows: Vec<_> = stmt
                .query_map(params![id], |row| {
                    Ok((record(row)?, row.get::<_, Option<i64>>(9)?, row.get(10)?, row.get(11)?))
                })
                .map_err(sql("reading a flow run"))?
                .collect::<Result<_, _>>()
                .map_err(sql("reading a flow run"))?;
            let exact = rows.iter().position(|r| r.0[0] == id);
            let pick = match (exact, rows.len()) {
                (Some(i), _) => i,
                (None, 1) => 0,
                (None, 0) => {
                    return Err(StoreError::Missing(format!(
                        "no flow run matches `{id}`; `keel flow runs` lists them"
                    )));
                }
                (None, _) => {
                    return Err(StoreError::Conflict(format!(
                        "`{id}` matches several flow runs; give more characters of the id"
                    )));
                }
            };
            let Some((cols, pid, created, updated)) = rows.into_iter().nth(pick) else {
                return Err(StoreError::Missing(format!("no flow run matches `{id}`")));
            };
            decode(cols, pid, created, updated)
        })
        .await
    }

    /// The newest runs first (at most `limit`), optionally only those in `workspace`.
    pub async fn list(
        &self,
        workspace: Option<&str>,
        limit: usize,
    ) -> Result<Vec<RunRecord>, StoreError> {
        let ws = workspace.map(str::to_string);
        self.call(move |c| {
            let mut stmt = c
                .prepare(&format!(
                    "SELECT {COLUMNS} FROM flow_runs WHERE (?1 IS NULL OR workspace = ?1) ORDER BY created_at DESC, rowid DESC LIMIT ?2"
                ))
                .map_err(sql("listing flow runs"))?;
            let rows: Vec<_> = stmt
                .query_map(params![ws, limit as i64], |row| {
                    Ok((record(row)?, row.get::<_, Option<i64>>(9)?, row.get(10)?, row.get(11)?))
                })
                .map_err(sql("listing flow runs"))?
                .collect::<Result<_, _>>()
                .map_err(sql("listing flow runs"))?;
            rows.into_iter()
                .map(|(cols, pid, c, u)| decode(cols, pid, c, u))
                .collect()
        })
        .await
    }

    /// The nodes checkpointed for `run_id`, in order.
    pub async fn checkpoints(&self, run_id: &str) -> Result<Vec<String>, StoreError> {
        let id = run_id.to_string();
        self.call(move |c| {
            let mut stmt = c
                .prepare("SELECT node FROM flow_checkpoints WHERE run_id = ?1 ORDER BY seq")
                .map_err(sql("reading flow checkpoints"))?;
            let rows = stmt
                .query_map(params![id], |r| r.get::<_, String>(0))
                .map_err(sql("reading flow checkpoints"))?
                .collect::<Result<Vec<_>, _>>()
                .map_err(sql("reading flow checkpoints"))?;
            Ok(rows)
        })
        .await
    }

    /// Whether a run row exists (for tests and tools).
    pub async fn exists(&self, run_id: &str) -> Result<bool, StoreError> {
        let id = run_id.to_string();
        self.call(move |c| {
            c.query_row("SELECT 1 FROM flow_runs WHERE id = ?1", params![id], |_| {
                Ok(())
            })
            .optional()
            .map(|r| r.is_some())
            .map_err(sql("reading a flow run"))
        })
        .await
    }
}
