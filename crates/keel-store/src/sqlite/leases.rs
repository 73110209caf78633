//! Run leases (per session) and workspace leases (per workspace) on SQLite: one statement
//! each, so two processes on the same database file never both hold one. Both tables go
//! through the same four helpers, their statements built from [`LeaseTable`].

use rusqlite::{OptionalExtension, params};

use super::{SqliteDb, sql};
use crate::lease::{LeaseRow, LeaseTable, RUN_LEASES, WORKSPACE_LEASES as WORKSPACE, expiry};
use crate::{Lease, StoreError, WorkspaceLease, now_ms};

/// Migration 10: who works in a workspace, until when.
pub(super) const WORKSPACE_LEASES: &str = r#"
CREATE TABLE workspace_leases (
    workspace   TEXT PRIMARY KEY,
    session_id  TEXT NOT NULL,
    holder      TEXT NOT NULL,
    expires_at  INTEGER NOT NULL
);
"#;

impl SqliteDb {
    /// Takes the lease of `t` on `key` for `holder` (one statement; see [`LeaseTable`]).
    fn take(
        &self,
        t: &LeaseTable,
        key: &str,
        session: Option<&str>,
        holder: &str,
        ttl_ms: u64,
    ) -> Result<bool, StoreError> {
        let now = now_ms() as i64;
        let (sql_text, context) = (t.take_sql('?'), t.doing("taking"));
        let conn = self.lock();
        let n = match session {
            Some(s) => conn.execute(&sql_text, params![key, holder, expiry(now, ttl_ms), now, s]),
            None => conn.execute(&sql_text, params![key, holder, expiry(now, ttl_ms), now]),
        }
        .map_err(sql(&context))?;
        Ok(n == 1)
    }

    fn renew(
        &self,
        t: &LeaseTable,
        key: &str,
        holder: &str,
        ttl_ms: u64,
    ) -> Result<bool, StoreError> {
        let context = t.doing("renewing");
        let n = self
            .lock()
            .execute(
                &t.renew_sql('?'),
                params![key, holder, expiry(now_ms() as i64, ttl_ms)],
            )
            .map_err(sql(&context))?;
        Ok(n == 1)
    }

    fn release(&self, t: &LeaseTable, key: &str, holder: &str) -> Result<(), StoreError> {
        let context = t.doing("releasing");
        self.lock()
            .execute(&t.release_sql('?'), params![key, holder])
            .map_err(sql(&context))?;
        Ok(())
    }

    fn read(&self, t: &LeaseTable, key: &str) -> Result<Option<LeaseRow>, StoreError> {
        let context = t.doing("reading");
        self.lock()
            .query_row(&t.read_sql('?'), [key], |r| {
                Ok(LeaseRow {
                    holder: r.get(0)?,
                    expires_at: r.get::<_, i64>(1)?.max(0) as u64,
                    session_id: if t.with_session { r.get(2)? } else { None },
                })
            })
            .optional()
            .map_err(sql(&context))
    }

    pub fn acquire_lease(
        &self,
        session_id: &str,
        holder: &str,
        ttl_ms: u64,
    ) -> Result<bool, StoreError> {
        self.take(&RUN_LEASES, session_id, None, holder, ttl_ms)
    }

    pub fn renew_lease(
        &self,
        session_id: &str,
        holder: &str,
        ttl_ms: u64,
    ) -> Result<bool, StoreError> {
        self.renew(&RUN_LEASES, session_id, holder, ttl_ms)
    }

    pub fn release_lease(&self, session_id: &str, holder: &str) -> Result<(), StoreError> {
        self.release(&RUN_LEASES, session_id, holder)
    }

    pub fn lease(&self, session_id: &str) -> Result<Option<Lease>, StoreError> {
        Ok(self
            .read(&RUN_LEASES, session_id)?
            .map(LeaseRow::into_lease))
    }

    pub fn acquire_workspace_lease(
        &self,
        workspace: &str,
        session_id: &str,
        holder: &str,
        ttl_ms: u64,
    ) -> Result<bool, StoreError> {
        self.take(&WORKSPACE, workspace, Some(session_id), holder, ttl_ms)
    }

    pub fn renew_workspace_lease(
        &self,
        workspace: &str,
        holder: &str,
        ttl_ms: u64,
    ) -> Result<bool, StoreError> {
        self.renew(&WORKSPACE, workspace, holder, ttl_ms)
    }

    pub fn release_workspace_lease(&self, workspace: &str, holder: &str) -> Result<(), StoreError> {
        self.release(&WORKSPACE, workspace, holder)
    }

    pub fn workspace_lease(&self, workspace: &str) -> Result<Option<WorkspaceLease>, StoreError> {
        Ok(self
            .read(&WORKSPACE, workspace)?
            .map(|row| row.into_workspace_lease(workspace)))
    }
}
