//! Run leases (per session) and workspace leases (per workspace) on PostgreSQL: one statement
//! each, so any number of processes on the database never both hold one. Both tables go
//! through the same four helpers, their statements built from [`LeaseTable`]; the
//! [`Store`](crate::Store) methods call them.

use sqlx::{AssertSqlSafe, Row};

use super::{PgStore, db_err};
use crate::lease::{LeaseRow, LeaseTable, expiry};
use crate::{StoreError, now_ms};

impl PgStore {
    /// Takes the lease of `t` on `key` for `holder` (`session`: the session a workspace
    /// lease names).
    pub(super) async fn take_lease(
        &self,
        t: &LeaseTable,
        key: &str,
        session: Option<&str>,
        holder: &str,
        ttl_ms: u64,
    ) -> Result<bool, StoreError> {
        let (text, context) = (t.take_sql('$'), t.doing("taking"));
        self.retrying(|| async {
            let now = now_ms() as i64;
            let mut query = sqlx::query(AssertSqlSafe(text.clone()))
                .bind(key)
                .bind(holder)
                .bind(expiry(now, ttl_ms))
                .bind(now);
            if let Some(session) = session {
                query = query.bind(session);
            }
            let done = query.execute(&self.pool).await;
            Ok(done.map_err(db_err(&context))?.rows_affected() == 1)
        })
        .await
    }

    pub(super) async fn renew_lease_in(
        &self,
        t: &LeaseTable,
        key: &str,
        holder: &str,
        ttl_ms: u64,
    ) -> Result<bool, StoreError> {
        let (text, context) = (t.renew_sql('$'), t.doing("renewing"));
        self.retrying(|| async {
            let done = sqlx::query(AssertSqlSafe(text.clone()))
                .bind(key)
                .bind(holder)
                .bind(expiry(now_ms() as i64, ttl_ms))
                .execute(&self.pool)
                .await;
            Ok(done.map_err(db_err(&context))?.rows_affected() == 1)
        })
        .await
    }

    pub(super) async fn release_lease_in(
        &self,
        t: &LeaseTable,
        key: &str,
        holder: &str,
    ) -> Result<(), StoreError> {
        let (text, context) = (t.release_sql('$'), t.doing("releasing"));
        self.retrying(|| async {
            sqlx::query(AssertSqlSafe(text.clone()))
                .bind(key)
                .bind(holder)
                .execute(&self.pool)
                .await
                .map_err(db_err(&context))
                .map(|_| ())
        })
        .await
    }

    pub(super) async fn read_lease(
        &self,
        t: &LeaseTable,
        key: &str,
    ) -> Result<Option<LeaseRow>, StoreError> {
        let (text, context) = (t.read_sql('$'), t.doing("reading"));
        self.retrying(|| async {
            let row = sqlx::query(AssertSqlSafe(text.clone()))
                .bind(key)
                .fetch_optional(&self.pool)
                .await
                .map_err(db_err(&context))?;
            row.map(|r| {
                Ok(LeaseRow {
                    holder: r.try_get(0)?,
                    expires_at: r.try_get::<i64, _>(1)?.max(0) as u64,
                    session_id: if t.with_session {
                        Some(r.try_get(2)?)
                    } else {
                        None
                    },
                })
            })
            .transpose()
            .map_err(db_err(&context))
        })
        .await
    }
}
