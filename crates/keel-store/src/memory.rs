//! The memory stack's durable part: user memory (small facts and preferences the user saved)
//! and promoted lessons (guidance with provenance: which session taught it). Both live in
//! the session database, one row per entry, each removable on its own.

use rusqlite::{Connection, OptionalExtension, params};
use serde::{Deserialize, Serialize};

use crate::{SqliteDb, StoreError, now_ms};

/// Migration adding the memory table (appended to the store's migration list).
pub(crate) const MIGRATION: &str = r#"
CREATE TABLE memory (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    kind        TEXT NOT NULL,
    text        TEXT NOT NULL,
    source      TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
);
CREATE INDEX memory_kind ON memory(kind, id);
CREATE TABLE stored_results (
    session_id  TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    handle      TEXT NOT NULL,
    content     TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    PRIMARY KEY (session_id, handle)
);
"#;

/// Longest memory entry accepted, in characters: memory is for short facts.
pub const MAX_MEMORY_CHARS: usize = 500;

/// Which layer an entry belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MemoryKind {
    /// A fact or preference about the user (`keel memory add`).
    Fact,
    /// A promoted lesson (`keel memory promote`): guidance learned in a session.
    Lesson,
}

impl MemoryKind {
    pub fn as_str(self) -> &'static str {
        match self {
            MemoryKind::Fact => "fact",
            MemoryKind::Lesson => "lesson",
        }
    }

    pub(crate) fn parse(s: &str) -> Option<Self> {
        match s {
            "fact" => Some(MemoryKind::Fact),
            "lesson" => Some(MemoryKind::Lesson),
            _ => None,
        }
    }
}

/// One stored memory entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryEntry {
    pub id: i64,
    pub kind: MemoryKind,
    pub text: String,
    /// Provenance: `user` for facts typed by the user, else the session that taught it.
    pub source: String,
    pub created_at: i64,
    pub updated_at: i64,
}

fn sql(context: &'static str) -> impl FnOnce(rusqlite::Error) -> StoreError {
    move |source| StoreError::Sqlite {
        context: context.to_string(),
        source,
    }
}

/// A memory text as stored: trimmed, one line, not empty, not too long.
pub(crate) fn clean(text: &str) -> Result<String, StoreError> {
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if text.is_empty() {
        return Err(StoreError::Conflict(
            "a memory entry cannot be empty".into(),
        ));
    }
    let n = text.chars().count();
    if n > MAX_MEMORY_CHARS {
        return Err(StoreError::Conflict(format!(
            "a memory entry is at most {MAX_MEMORY_CHARS} characters (this one has {n}); memory is for short facts — put longer guidance in AGENTS.md or .keel/rules/"
        )));
    }
    Ok(text)
}

fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<(MemoryEntry, String)> {
    let kind: String = r.get(1)?;
    Ok((
        MemoryEntry {
            id: r.get(0)?,
            kind: MemoryKind::Fact,
            text: r.get(2)?,
            source: r.get(3)?,
            created_at: r.get(4)?,
            updated_at: r.get(5)?,
        },
        kind,
    ))
}

fn finish(rows: Vec<(MemoryEntry, String)>) -> Result<Vec<MemoryEntry>, StoreError> {
    rows.into_iter()
        .map(|(mut e, kind)| {
            e.kind = MemoryKind::parse(&kind).ok_or_else(|| StoreError::Corrupt {
                context: format!("memory entry {}", e.id),
                reason: format!("unknown kind `{kind}`"),
            })?;
            Ok(e)
        })
        .collect()
}

const COLUMNS: &str = "id, kind, text, source, created_at, updated_at";

pub(crate) fn list(
    conn: &Connection,
    kind: Option<MemoryKind>,
) -> Result<Vec<MemoryEntry>, StoreError> {
    let mut stmt = conn
        .prepare(&format!(
            "SELECT {COLUMNS} FROM memory WHERE ?1 IS NULL OR kind = ?1 ORDER BY id"
        ))
        .map_err(sql("listing memory"))?;
    let rows = stmt
        .query_map(params![kind.map(MemoryKind::as_str)], row)
        .map_err(sql("listing memory"))?
        .collect::<rusqlite::Result<Vec<_>>>()
        .map_err(sql("reading memory"))?;
    finish(rows)
}

fn get(conn: &Connection, id: i64) -> Result<MemoryEntry, StoreError> {
    let found = conn
        .query_row(
            &format!("SELECT {COLUMNS} FROM memory WHERE id = ?1"),
            params![id],
            row,
        )
        .optional()
        .map_err(sql("reading a memory entry"))?;
    match found {
        Some(r) => finish(vec![r]).map(|mut v| v.remove(0)),
        None => Err(StoreError::Conflict(format!(
            "no memory entry {id}; `keel memory list` shows the ids"
        ))),
    }
}

/// Saves a session's oversized tool result under `handle` (session working memory).
pub(crate) fn save_result(
    conn: &Connection,
    session_id: &str,
    handle: &str,
    content: &str,
) -> Result<(), StoreError> {
    conn.execute(
        "INSERT OR REPLACE INTO stored_results (session_id, handle, content, created_at) VALUES (?1, ?2, ?3, ?4)",
        params![session_id, handle, content, now_ms() as i64],
    )
    .map_err(sql("saving a stored tool result"))?;
    Ok(())
}

/// A session's stored results, `(handle, content)`, oldest first.
pub(crate) fn results(
    conn: &Connection,
    session_id: &str,
) -> Result<Vec<(String, String)>, StoreError> {
    let mut stmt = conn
        .prepare("SELECT handle, content FROM stored_results WHERE session_id = ?1 ORDER BY created_at, handle")
        .map_err(sql("reading stored tool results"))?;
    stmt.query_map(params![session_id], |r| Ok((r.get(0)?, r.get(1)?)))
        .map_err(sql("reading stored tool results"))?
        .collect::<rusqlite::Result<Vec<_>>>()
        .map_err(sql("reading stored tool results"))
}

impl SqliteDb {
    /// Saves a new entry and returns it.
    pub fn add_memory(
        &self,
        kind: MemoryKind,
        text: &str,
        source: &str,
    ) -> Result<MemoryEntry, StoreError> {
        let text = clean(text)?;
        self.with_connection(|c| {
            let now = now_ms() as i64;
            c.execute(
                "INSERT INTO memory (kind, text, source, created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?4)",
                params![kind.as_str(), text, source, now],
            )
            .map_err(sql("saving a memory entry"))?;
            get(c, c.last_insert_rowid())
        })
    }

    /// Entries of one kind (or all), oldest first.
    pub fn list_memory(&self, kind: Option<MemoryKind>) -> Result<Vec<MemoryEntry>, StoreError> {
        self.with_connection(|c| list(c, kind))
    }

    /// Entries whose text or source contains `query` (case-insensitive), oldest first.
    pub fn search_memory(&self, query: &str) -> Result<Vec<MemoryEntry>, StoreError> {
        let q = query.to_lowercase();
        Ok(self
            .list_memory(None)?
            .into_iter()
            .filter(|e| e.text.to_lowercase().contains(&q) || e.source.to_lowercase().contains(&q))
            .collect())
    }

    /// Replaces an entry's text.
    pub fn edit_memory(&self, id: i64, text: &str) -> Result<MemoryEntry, StoreError> {
        let text = clean(text)?;
        self.with_connection(|c| {
            get(c, id)?;
            c.execute(
                "UPDATE memory SET text = ?1, updated_at = ?2 WHERE id = ?3",
                params![text, now_ms() as i64, id],
            )
            .map_err(sql("editing a memory entry"))?;
            get(c, id)
        })
    }

    /// Removes one entry; an unknown id is an error naming it.
    pub fn remove_memory(&self, id: i64) -> Result<MemoryEntry, StoreError> {
        self.with_connection(|c| {
            let entry = get(c, id)?;
            c.execute("DELETE FROM memory WHERE id = ?1", params![id])
                .map_err(sql("removing a memory entry"))?;
            Ok(entry)
        })
    }

    /// Removes every entry of one kind (or all); returns how many.
    pub fn clear_memory(&self, kind: Option<MemoryKind>) -> Result<usize, StoreError> {
        self.with_connection(|c| {
            c.execute(
                "DELETE FROM memory WHERE ?1 IS NULL OR kind = ?1",
                params![kind.map(MemoryKind::as_str)],
            )
            .map_err(sql("clearing memory"))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_crud_round_trips() -> Result<(), StoreError> {
        let s = SqliteDb::open_in_memory()?;
        let a = s.add_memory(MemoryKind::Fact, "  prefers\ntabs ", "user")?;
        assert_eq!(a.text, "prefers tabs");
        let l = s.add_memory(MemoryKind::Lesson, "Run cargo fmt first.", "session 0123")?;
        assert_eq!(s.list_memory(None)?.len(), 2);
        assert_eq!(s.list_memory(Some(MemoryKind::Lesson))?, vec![l.clone()]);
        assert_eq!(s.search_memory("TABS")?, vec![a.clone()]);
        assert_eq!(
            s.edit_memory(a.id, "prefers spaces")?.text,
            "prefers spaces"
        );
        assert!(s.edit_memory(99, "x").is_err());
        assert!(s.add_memory(MemoryKind::Fact, " ", "user").is_err());
        assert!(
            s.add_memory(MemoryKind::Fact, &"x".repeat(600), "user")
                .is_err()
        );
        assert_eq!(s.remove_memory(l.id)?.id, l.id);
        assert!(s.remove_memory(l.id).is_err());
        assert_eq!(s.memory_entries()?.len(), 1);
        assert_eq!(s.clear_memory(None)?, 1);
        assert!(s.list_memory(None)?.is_empty());
        Ok(())
    }
}
