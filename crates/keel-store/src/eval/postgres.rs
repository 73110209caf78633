//! [`EvalStore`] on PostgreSQL (migration 5): the same rows and messages as the SQLite side.

use sqlx::Row as _;
use sqlx::postgres::PgRow;

use super::{EvalRunRecord, EvalStore, NewEvalRun, Row, record};
use crate::postgres::db_err;
use crate::{PgStore, StoreError, StoreFuture, now_ms};

const COLUMNS: &str = "id, suite, suite_path, provider, model, results, created_at, wall_ms";

fn read_row(r: &PgRow) -> Result<Row, StoreError> {
    let get = |e: sqlx::Error| StoreError::Database {
        context: "reading an eval run".into(),
        reason: e.to_string(),
    };
    Ok((
        r.try_get(0).map_err(get)?,
        r.try_get(1).map_err(get)?,
        r.try_get(2).map_err(get)?,
        r.try_get(3).map_err(get)?,
        r.try_get(4).map_err(get)?,
        r.try_get(5).map_err(get)?,
        r.try_get(6).map_err(get)?,
        r.try_get(7).map_err(get)?,
    ))
}

impl PgStore {
    async fn pg_add_eval_run(&self, run: &NewEvalRun) -> Result<EvalRunRecord, StoreError> {
        let results = serde_json::to_string(&run.results).map_err(|e| StoreError::Corrupt {
            context: "encoding eval results".into(),
            reason: e.to_string(),
        })?;
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO eval_runs (suite, suite_path, provider, model, results, created_at, wall_ms)
             VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING {COLUMNS}"
        )))
        .bind(&run.suite)
        .bind(&run.suite_path)
        .bind(&run.provider)
        .bind(&run.model)
        .bind(results)
        .bind(now_ms() as i64)
        .bind(i64::try_from(run.wall_ms).unwrap_or(i64::MAX))
        .fetch_one(&self.pool)
        .await
        .map_err(db_err("saving an eval run"))?;
        record(read_row(&row)?)
    }

    async fn pg_eval_run(&self, id: i64) -> Result<EvalRunRecord, StoreError> {
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM eval_runs WHERE id = $1"
        )))
        .bind(id)
        .fetch_optional(&self.pool)
        .await
        .map_err(db_err("reading an eval run"))?;
        match row {
            Some(row) => record(read_row(&row)?),
            None => Err(StoreError::Missing(format!(
                "no eval run #{id}; `keel eval runs` lists them"
            ))),
        }
    }

    async fn pg_list_eval_runs(&self, limit: usize) -> Result<Vec<EvalRunRecord>, StoreError> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM eval_runs ORDER BY id DESC LIMIT $1"
        )))
        .bind(i64::try_from(limit).unwrap_or(i64::MAX))
        .fetch_all(&self.pool)
        .await
        .map_err(db_err("listing eval runs"))?;
        rows.iter().map(|r| record(read_row(r)?)).collect()
    }
}

impl EvalStore for PgStore {
    fn add_eval_run<'a>(&'a self, run: &'a NewEvalRun) -> StoreFuture<'a, EvalRunRecord> {
        Box::pin(self.pg_add_eval_run(run))
    }

    fn eval_run(&self, id: i64) -> StoreFuture<'_, EvalRunRecord> {
        Box::pin(self.pg_eval_run(id))
    }

    fn list_eval_runs(&self, limit: usize) -> StoreFuture<'_, Vec<EvalRunRecord>> {
        Box::pin(self.pg_list_eval_runs(limit))
    }
}
