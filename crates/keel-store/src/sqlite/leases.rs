//! Run leases (per session) and workspace leases (per workspace) on SQLite: one statement
//! each, so two processes on the same database file never both hold one.

use rusqlite::{OptionalExtension, params};

use super::{SqliteDb, sql};
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
    pub fn acquire_lease(
        &self,
        session_id: &str,
        holder: &str,
        ttl_ms: u64,
    ) -> Result<bool, StoreError> {
        let now = now_ms() as i64;
        // One statement: a new row, or a takeover only when the row is ours or expired.
        let n = self
            .lock()
            .execute(
                "INSERT INTO run_leases (session_id, holder, expires_at) VALUES (?1, ?2, ?3)
                 ON CONFLICT(session_id) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
                 WHERE run_leases.holder = excluded.holder OR run_leases.expires_at <= ?4",
                params![session_id, holder, now + ttl_ms as i64, now],
            )
            .map_err(sql("taking a run lease"))?;
        Ok(n == 1)
    }

    pub fn renew_lease(
        &self,
        session_id: &str,
        holder: &str,
        ttl_ms: u64,
    ) -> Result<bool, StoreError> {
        let n = self
            .lock()
            .execute(
                "UPDATE run_leases SET expires_at = ?3 WHERE session_id = ?1 AND holder = ?2",
                params![session_id, holder, now_ms() as i64 + ttl_ms as i64],
            )
            .map_err(sql("renewing a run lease"))?;
        Ok(n == 1)
    }

    pub fn release_lease(&self, session_id: &str, holder: &str) -> Result<(), StoreError> {
        self.lock()
            .execute(
                "DELETE FROM run_leases WHERE session_id = ?1 AND holder = ?2",
                params![session_id, holder],
            )
            .map_err(sql("releasing a run lease"))?;
        Ok(())
    }

    pub fn lease(&self, session_id: &str) -> Result<Option<Lease>, StoreError> {
        self.lock()
            .query_row(
                "SELECT holder, expires_at FROM run_leases WHERE session_id = ?1",
                [session_id],
                |r| {
                    Ok(Lease {
                        holder: r.get(0)?,
                        expires_at: r.get::<_, i64>(1)? as u64,
                    })
                },
            )
            .optional()
            .map_err(sql("reading a run lease"))
    }
}

impl SqliteDb {
    pub fn acquire_workspace_lease(
        &self,
        workspace: &str,
        session_id: &str,
        holder: &str,
        ttl_ms: u64,
    ) -> Result<bool, StoreError> {
        let now = now_ms() as i64;
        let n = self
            .lock()
            .execute(
                "INSERT INTO workspace_leases (workspace, session_id, holder, expires_at) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT(workspace) DO UPDATE SET session_id = excluded.session_id, holder = excluded.holder, expires_at = excluded.expires_at
                 WHERE workspace_leases.holder = excluded.holder OR workspace_leases.expires_at <= ?5",
                params![workspace, session_id, holder, now + ttl_ms as i64, now],
            )
            .map_err(sql("taking a workspace lease"))?;
        Ok(n == 1)
    }

    pub fn renew_workspace_lease(
        &self,
        workspace: &str,
        holder: &str,
        ttl_ms: u64,
    ) -> Result<bool, StoreError> {
        let n = self
            .lock()
            .execute(
                "UPDATE workspace_leases SET expires_at = ?3 WHERE workspace = ?1 AND holder = ?2",
                params![workspace, holder, now_ms() as i64 + ttl_ms as i64],
            )
            .map_err(sql("renewing a workspace lease"))?;
        Ok(n == 1)
    }

    pub fn release_workspace_lease(&self, workspace: &str, holder: &str) -> Result<(), StoreError> {
        self.lock()
            .execute(
                "DELETE FROM workspace_leases WHERE workspace = ?1 AND holder = ?2",
                params![workspace, holder],
            )
            .map_err(sql("releasing a workspace lease"))?;
        Ok(())
    }

    pub fn workspace_lease(&self, workspace: &str) -> Result<Option<WorkspaceLease>, StoreError> {
        self.lock()
            .query_row(
                "SELECT session_id, holder, expires_at FROM workspace_leases WHERE workspace = ?1",
                [workspace],
                |r| {
                    Ok(WorkspaceLease {
                        workspace: workspace.to_string(),
                        session_id: r.get(0)?,
                        holder: r.get(1)?,
                        expires_at: r.get::<_, i64>(2)?.max(0) as u64,
                    })
                },
            )
            .optional()
            .map_err(sql("reading a workspace lease"))
    }
}
