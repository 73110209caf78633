//! User memory and promoted lessons on PostgreSQL: the same operations as the SQLite side
//! (`crate::memory`), as async methods of [`PgStore`].

use sqlx::Row;
use sqlx::postgres::PgRow;

use super::{PgStore, db_err};
use crate::{MemoryEntry, MemoryKind, StoreError, now_ms};

fn entry(r: &PgRow) -> Result<MemoryEntry, StoreError> {
    let read = || -> Result<(MemoryEntry, String), sqlx::Error> {
        Ok((
            MemoryEntry {
                id: r.try_get(0)?,
                kind: MemoryKind::Fact,
                text: r.try_get(2)?,
                source: r.try_get(3)?,
                created_at: r.try_get(4)?,
                updated_at: r.try_get(5)?,
            },
            r.try_get(1)?,
        ))
    };
    let (mut e, kind) = read().map_err(db_err("reading memory"))?;
    e.kind = MemoryKind::parse(&kind).ok_or_else(|| StoreError::Corrupt {
        context: format!("memory entry {}", e.id),
        reason: format!("unknown kind `{kind}`"),
    })?;
    Ok(e)
}

fn no_entry(id: i64) -> StoreError {
    StoreError::Conflict(format!(
        "no memory entry {id}; `keel memory list` shows the ids"
    ))
}

const COLUMNS: &str = "id, kind, text, source, created_at, updated_at";

impl PgStore {
    /// Saves a user fact or promoted lesson and returns it.
    pub async fn add_memory(
        &self,
        kind: MemoryKind,
        text: &str,
        source: &str,
    ) -> Result<MemoryEntry, StoreError> {
        let text = crate::memory::clean(text)?;
        let now = now_ms() as i64;
        let id: i64 = sqlx::query_scalar(
            "INSERT INTO memory (kind, text, source, created_at, updated_at)
             VALUES ($1, $2, $3, $4, $4) RETURNING id",
        )
        .bind(kind.as_str())
        .bind(&text)
        .bind(source)
        .bind(now)
        .fetch_one(&self.pool)
        .await
        .map_err(db_err("saving a memory entry"))?;
        Ok(MemoryEntry {
            id,
            kind,
            text,
            source: source.to_string(),
            created_at: now,
            updated_at: now,
        })
    }

    pub(crate) async fn memory_list(&self) -> Result<Vec<MemoryEntry>, StoreError> {
        self.list_memory(None).await
    }

    /// Entries of one kind (or all), oldest first.
    pub async fn list_memory(
        &self,
        kind: Option<MemoryKind>,
    ) -> Result<Vec<MemoryEntry>, StoreError> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM memory WHERE $1::TEXT IS NULL OR kind = $1 ORDER BY id"
        )))
        .bind(kind.map(MemoryKind::as_str))
        .fetch_all(&self.pool)
        .await
        .map_err(db_err("listing memory"))?;
        rows.iter().map(entry).collect()
    }

    /// Entries whose text or source contains `query` (case-insensitive), oldest first.
    pub async fn search_memory(&self, query: &str) -> Result<Vec<MemoryEntry>, StoreError> {
        let q = query.to_lowercase();
        Ok(self
            .list_memory(None)
            .await?
            .into_iter()
            .filter(|e| e.text.to_lowercase().contains(&q) || e.source.to_lowercase().contains(&q))
            .collect())
    }

    /// Replaces an entry's text.
    pub async fn edit_memory(&self, id: i64, text: &str) -> Result<MemoryEntry, StoreError> {
        let text = crate::memory::clean(text)?;
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "UPDATE memory SET text = $1, updated_at = $2 WHERE id = $3 RETURNING {COLUMNS}"
        )))
        .bind(text)
        .bind(now_ms() as i64)
        .bind(id)
        .fetch_optional(&self.pool)
        .await
        .map_err(db_err("editing a memory entry"))?
        .ok_or_else(|| no_entry(id))?;
        entry(&row)
    }

    /// Removes one entry; an unknown id is an error naming it.
    pub async fn remove_memory(&self, id: i64) -> Result<MemoryEntry, StoreError> {
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "DELETE FROM memory WHERE id = $1 RETURNING {COLUMNS}"
        )))
        .bind(id)
        .fetch_optional(&self.pool)
        .await
        .map_err(db_err("removing a memory entry"))?
        .ok_or_else(|| no_entry(id))?;
        entry(&row)
    }

    /// Removes every entry of one kind (or all); returns how many.
    pub async fn clear_memory(&self, kind: Option<MemoryKind>) -> Result<usize, StoreError> {
        let n = sqlx::query("DELETE FROM memory WHERE $1::TEXT IS NULL OR kind = $1")
            .bind(kind.map(MemoryKind::as_str))
            .execute(&self.pool)
            .await
            .map_err(db_err("clearing memory"))?
            .rows_affected();
        Ok(n as usize)
    }
}
