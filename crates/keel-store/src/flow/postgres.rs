//! [`FlowStore`] on PostgreSQL (migration 4). A checkpoint is one statement: it bumps the
//! run's checkpoint counter and inserts the checkpoint with that number, so concurrent nodes
//! of one run (or several processes) never collide on a checkpoint's `seq`.

use sqlx::Row;
use sqlx::postgres::PgRow;

use super::{FlowProgress, FlowRunRow, FlowStore, many_runs, no_run};
use crate::postgres::db_err;
use crate::{PgStore, StoreError, StoreFuture, now_ms};

const COLUMNS: &str = "id, workspace, flow_name, flow_file, flow_source, inputs, status, state, trace, pid, created_at, updated_at";

fn read_row(row: &PgRow) -> Result<FlowRunRow, StoreError> {
    let get = |e: sqlx::Error| StoreError::Database {
        context: "reading a flow run".into(),
        reason: e.to_string(),
    };
    let pid: Option<i64> = row.try_get(9).map_err(get)?;
    let created: i64 = row.try_get(10).map_err(get)?;
    let updated: i64 = row.try_get(11).map_err(get)?;
    Ok(FlowRunRow {
        id: row.try_get(0).map_err(get)?,
        workspace: row.try_get(1).map_err(get)?,
        flow_name: row.try_get(2).map_err(get)?,
        flow_file: row.try_get(3).map_err(get)?,
        flow_source: row.try_get(4).map_err(get)?,
        inputs: row.try_get(5).map_err(get)?,
        status: row.try_get(6).map_err(get)?,
        state: row.try_get(7).map_err(get)?,
        trace: row.try_get(8).map_err(get)?,
        pid: pid.and_then(|p| u32::try_from(p).ok()),
        created_at: u64::try_from(created).unwrap_or(0),
        updated_at: u64::try_from(updated).unwrap_or(0),
    })
}

impl PgStore {
    async fn pg_create_flow_run(&self, r: &FlowRunRow) -> Result<(), StoreError> {
        let now = now_ms() as i64;
        sqlx::query(
            "INSERT INTO flow_runs (id, workspace, flow_name, flow_file, flow_source, inputs, status, state, trace, pid, created_at, updated_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $11)",
        )
        .bind(&r.id)
        .bind(&r.workspace)
        .bind(&r.flow_name)
        .bind(&r.flow_file)
        .bind(&r.flow_source)
        .bind(&r.inputs)
        .bind(&r.status)
        .bind(&r.state)
        .bind(&r.trace)
        .bind(r.pid.map(i64::from))
        .bind(now)
        .execute(&self.pool)
        .await
        .map_err(db_err("recording a flow run"))?;
        Ok(())
    }

    async fn pg_checkpoint_flow_run(
        &self,
        run_id: &str,
        node: &str,
        node_state: &str,
        p: &FlowProgress,
    ) -> Result<(), StoreError> {
        let now = now_ms() as i64;
        let done = sqlx::query(
            "WITH r AS (
                UPDATE flow_runs
                   SET status = $2, state = $3, trace = $4, updated_at = $5,
                       last_checkpoint = last_checkpoint + 1
                 WHERE id = $1
             RETURNING last_checkpoint)
             INSERT INTO flow_checkpoints (run_id, seq, node, node_state, created_at)
             SELECT $1, last_checkpoint, $6, $7, $5 FROM r",
        )
        .bind(run_id)
        .bind(&p.status)
        .bind(&p.state)
        .bind(&p.trace)
        .bind(now)
        .bind(node)
        .bind(node_state)
        .execute(&self.pool)
        .await
        .map_err(db_err("saving a flow checkpoint"))?;
        if done.rows_affected() == 0 {
            return Err(no_run(run_id));
        }
        Ok(())
    }

    async fn pg_update_flow_run(
        &self,
        run_id: &str,
        p: &FlowProgress,
        pid: Option<u32>,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE flow_runs SET status = $2, state = $3, trace = $4, pid = $5, updated_at = $6 WHERE id = $1",
        )
        .bind(run_id)
        .bind(&p.status)
        .bind(&p.state)
        .bind(&p.trace)
        .bind(pid.map(i64::from))
        .bind(now_ms() as i64)
        .execute(&self.pool)
        .await
        .map_err(db_err("updating a flow run"))?;
        Ok(())
    }

    async fn pg_flow_run(&self, id: &str) -> Result<FlowRunRow, StoreError> {
        // The exact id first, then the newest prefix matches.
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM flow_runs WHERE starts_with(id, $1)
             ORDER BY (id = $1) DESC, created_at DESC, pos DESC LIMIT 2"
        )))
        .bind(id)
        .fetch_all(&self.pool)
        .await
        .map_err(db_err("reading a flow run"))?;
        let rows = rows.iter().map(read_row).collect::<Result<Vec<_>, _>>()?;
        match rows.len() {
            0 => Err(no_run(id)),
            1 => rows.into_iter().next().ok_or_else(|| no_run(id)),
            _ if rows[0].id == id => rows.into_iter().next().ok_or_else(|| no_run(id)),
            _ => Err(many_runs(id)),
        }
    }

    async fn pg_list_flow_runs(
        &self,
        workspace: Option<&str>,
        limit: usize,
    ) -> Result<Vec<FlowRunRow>, StoreError> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM flow_runs WHERE ($1::TEXT IS NULL OR workspace = $1)
             ORDER BY created_at DESC, pos DESC LIMIT $2"
        )))
        .bind(workspace)
        .bind(i64::try_from(limit).unwrap_or(i64::MAX))
        .fetch_all(&self.pool)
        .await
        .map_err(db_err("listing flow runs"))?;
        rows.iter().map(read_row).collect()
    }

    async fn pg_flow_checkpoints(&self, run_id: &str) -> Result<Vec<String>, StoreError> {
        sqlx::query_scalar("SELECT node FROM flow_checkpoints WHERE run_id = $1 ORDER BY seq")
            .bind(run_id)
            .fetch_all(&self.pool)
            .await
            .map_err(db_err("reading flow checkpoints"))
    }

    async fn pg_flow_run_exists(&self, run_id: &str) -> Result<bool, StoreError> {
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM flow_runs WHERE id = $1)")
            .bind(run_id)
            .fetch_one(&self.pool)
            .await
            .map_err(db_err("reading a flow run"))
    }
}

impl FlowStore for PgStore {
    fn create_flow_run<'a>(&'a self, run: &'a FlowRunRow) -> StoreFuture<'a, ()> {
        Box::pin(self.pg_create_flow_run(run))
    }

    fn checkpoint_flow_run<'a>(
        &'a self,
        run_id: &'a str,
        node: &'a str,
        node_state: &'a str,
        progress: &'a FlowProgress,
    ) -> StoreFuture<'a, ()> {
        Box::pin(self.pg_checkpoint_flow_run(run_id, node, node_state, progress))
    }

    fn update_flow_run<'a>(
        &'a self,
        run_id: &'a str,
        progress: &'a FlowProgress,
        pid: Option<u32>,
    ) -> StoreFuture<'a, ()> {
        Box::pin(self.pg_update_flow_run(run_id, progress, pid))
    }

    fn flow_run<'a>(&'a self, id: &'a str) -> StoreFuture<'a, FlowRunRow> {
        Box::pin(self.pg_flow_run(id))
    }

    fn list_flow_runs<'a>(
        &'a self,
        workspace: Option<&'a str>,
        limit: usize,
    ) -> StoreFuture<'a, Vec<FlowRunRow>> {
        Box::pin(self.pg_list_flow_runs(workspace, limit))
    }

    fn flow_checkpoints<'a>(&'a self, run_id: &'a str) -> StoreFuture<'a, Vec<String>> {
        Box::pin(self.pg_flow_checkpoints(run_id))
    }

    fn flow_run_exists<'a>(&'a self, run_id: &'a str) -> StoreFuture<'a, bool> {
        Box::pin(self.pg_flow_run_exists(run_id))
    }
}
