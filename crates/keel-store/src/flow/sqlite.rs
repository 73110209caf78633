//! [`FlowStore`] on SQLite: the rows of migration 7, written on the store's blocking pool.

use rusqlite::{OptionalExtension, params};

use super::{FlowProgress, FlowRunRow, FlowStore, many_runs, no_run};
use crate::sqlite::sql;
use crate::{SqliteStore, StoreFuture, now_ms};

const COLUMNS: &str = "id, workspace, flow_name, flow_file, flow_source, inputs, status, state, trace, pid, created_at, updated_at";

fn read_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<FlowRunRow> {
    let pid: Option<i64> = row.get(9)?;
    let created: i64 = row.get(10)?;
    let updated: i64 = row.get(11)?;
    Ok(FlowRunRow {
        id: row.get(0)?,
        workspace: row.get(1)?,
        flow_name: row.get(2)?,
        flow_file: row.get(3)?,
        flow_source: row.get(4)?,
        inputs: row.get(5)?,
        status: row.get(6)?,
        state: row.get(7)?,
        trace: row.get(8)?,
        pid: pid.and_then(|p| u32::try_from(p).ok()),
        created_at: u64::try_from(created).unwrap_or(0),
        updated_at: u64::try_from(updated).unwrap_or(0),
    })
}

fn s(v: &str) -> String {
    v.to_string()
}

impl FlowStore for SqliteStore {
    fn create_flow_run<'a>(&'a self, run: &'a FlowRunRow) -> StoreFuture<'a, ()> {
        let r = run.clone();
        Box::pin(self.call(move |db| {
            db.with_connection(|c| {
                c.execute(
                    &format!("INSERT INTO flow_runs ({COLUMNS}) VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?11)"),
                    params![
                        r.id,
                        r.workspace,
                        r.flow_name,
                        r.flow_file,
                        r.flow_source,
                        r.inputs,
                        r.status,
                        r.state,
                        r.trace,
                        r.pid.map(i64::from),
                        now_ms() as i64
                    ],
                )
                .map_err(sql("recording a flow run"))?;
                Ok(())
            })
        }))
    }

    fn checkpoint_flow_run<'a>(
        &'a self,
        run_id: &'a str,
        node: &'a str,
        node_state: &'a str,
        progress: &'a FlowProgress,
    ) -> StoreFuture<'a, ()> {
        let (run_id, node, node_state, p) = (s(run_id), s(node), s(node_state), progress.clone());
        Box::pin(self.call(move |db| {
            db.with_connection(|c| {
                let tx = c
                    .unchecked_transaction()
                    .map_err(sql("starting a flow checkpoint"))?;
                let now = now_ms() as i64;
                tx.execute(
                    "UPDATE flow_runs SET status = ?2, state = ?3, trace = ?4, updated_at = ?5 WHERE id = ?1",
                    params![run_id, p.status, p.state, p.trace, now],
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
        }))
    }

    fn update_flow_run<'a>(
        &'a self,
        run_id: &'a str,
        progress: &'a FlowProgress,
        pid: Option<u32>,
    ) -> StoreFuture<'a, ()> {
        let (run_id, p) = (s(run_id), progress.clone());
        Box::pin(self.call(move |db| {
            db.with_connection(|c| {
                c.execute(
                    "UPDATE flow_runs SET status = ?2, state = ?3, trace = ?4, pid = ?5, updated_at = ?6 WHERE id = ?1",
                    params![run_id, p.status, p.state, p.trace, pid.map(i64::from), now_ms() as i64],
                )
                .map_err(sql("updating a flow run"))?;
                Ok(())
            })
        }))
    }

    fn flow_run<'a>(&'a self, id: &'a str) -> StoreFuture<'a, FlowRunRow> {
        let id = s(id);
        Box::pin(self.call(move |db| {
            db.with_connection(|c| {
                let mut stmt = c
                    .prepare(&format!(
                        "SELECT {COLUMNS} FROM flow_runs WHERE id LIKE ?1 || '%' ORDER BY (id = ?1) DESC, created_at DESC, rowid DESC LIMIT 2"
                    ))
                    .map_err(sql("reading a flow run"))?;
                let rows: Vec<FlowRunRow> = stmt
                    .query_map(params![id], read_row)
                    .map_err(sql("reading a flow run"))?
                    .collect::<Result<_, _>>()
                    .map_err(sql("reading a flow run"))?;
                let exact = rows.iter().position(|r| r.id == id);
                let pick = match (exact, rows.len()) {
                    (Some(i), _) => i,
                    (None, 1) => 0,
                    (None, 0) => return Err(no_run(&id)),
                    (None, _) => return Err(many_runs(&id)),
                };
                rows.into_iter().nth(pick).ok_or_else(|| no_run(&id))
            })
        }))
    }

    fn list_flow_runs<'a>(
        &'a self,
        workspace: Option<&'a str>,
        limit: usize,
    ) -> StoreFuture<'a, Vec<FlowRunRow>> {
        let ws = workspace.map(s);
        Box::pin(self.call(move |db| {
            db.with_connection(|c| {
                let mut stmt = c
                    .prepare(&format!(
                        "SELECT {COLUMNS} FROM flow_runs WHERE (?1 IS NULL OR workspace = ?1) ORDER BY created_at DESC, rowid DESC LIMIT ?2"
                    ))
                    .map_err(sql("listing flow runs"))?;
                stmt.query_map(params![ws, i64::try_from(limit).unwrap_or(i64::MAX)], read_row)
                    .map_err(sql("listing flow runs"))?
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(sql("listing flow runs"))
            })
        }))
    }

    fn flow_checkpoints<'a>(&'a self, run_id: &'a str) -> StoreFuture<'a, Vec<String>> {
        let id = s(run_id);
        Box::pin(self.call(move |db| {
            db.with_connection(|c| {
                let mut stmt = c
                    .prepare("SELECT node FROM flow_checkpoints WHERE run_id = ?1 ORDER BY seq")
                    .map_err(sql("reading flow checkpoints"))?;
                stmt.query_map(params![id], |r| r.get::<_, String>(0))
                    .map_err(sql("reading flow checkpoints"))?
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(sql("reading flow checkpoints"))
            })
        }))
    }

    fn flow_run_exists<'a>(&'a self, run_id: &'a str) -> StoreFuture<'a, bool> {
        let id = s(run_id);
        Box::pin(self.call(move |db| {
            db.with_connection(|c| {
                c.query_row("SELECT 1 FROM flow_runs WHERE id = ?1", params![id], |_| {
                    Ok(())
                })
                .optional()
                .map(|r| r.is_some())
                .map_err(sql("reading a flow run"))
            })
        }))
    }
}
