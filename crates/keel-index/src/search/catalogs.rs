//! Gettext message catalogs (`.po`, `.pot`): the project's user-visible messages again, once
//! per language. The full-text passes leave their rows out, so that a description's words do
//! not fill the candidates with catalog chunks before the source that says them.

use std::collections::HashSet;
use std::sync::Arc;

use crate::{Index, IndexError};

/// The rows of the message catalogs (`Index::catalogs`).
#[derive(Debug)]
pub(crate) struct Catalogs {
    pub(super) files: HashSet<i64>,
    pub(super) chunks: HashSet<i64>,
}

impl Index {
    /// The index's message catalogs (cached until the index changes): gettext `.po`/`.pot`
    /// files hold every user-visible message of the project once per language, so a short
    /// description's words match dozens of them before the source that says it.
    pub(super) fn catalogs(&self) -> Result<Arc<Catalogs>, IndexError> {
        if let Some(c) = self.catalogs.lock().ok().and_then(|c| c.clone()) {
            return Ok(c);
        }
        let mut files = HashSet::new();
        let mut stmt = self.conn.prepare_cached(
            "SELECT id, name FROM files WHERE name LIKE '%.po' OR name LIKE '%.pot'",
        )?;
        for row in stmt.query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?)))? {
            let (id, name) = row?;
            if crate::pathrole::is_message_catalog(&name) {
                files.insert(id);
            }
        }
        let mut chunks = HashSet::new();
        if !files.is_empty() {
            let mut stmt = self
                .conn
                .prepare_cached("SELECT id FROM chunks WHERE file_id = ?1")?;
            for f in &files {
                for id in stmt.query_map([f], |r| r.get::<_, i64>(0))? {
                    chunks.insert(id?);
                }
            }
        }
        let c = Arc::new(Catalogs { files, chunks });
        if let Ok(mut cache) = self.catalogs.lock() {
            *cache = Some(c.clone());
        }
        Ok(c)
    }
}
