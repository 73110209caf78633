//! The full-text tables kept in one segment each.
//!
//! FTS5 writes every committed batch as a new segment and merges them only now and then,
//! so a freshly built index holds ten segments and more per table. Every lookup of a word
//! seeks it in each segment and merges their row lists (with each segment's deletion
//! marks); a search makes a few hundred such lookups (word frequencies, the chunk and
//! whole-file passes, names). FTS5's `optimize` rewrites a table as one segment: the same
//! rows, positions, sizes and totals, so every rank is the same number — only found with
//! one seek. It runs after a build, and after a refresh once enough files were rewritten
//! since the last one to have left segments behind again.

use rusqlite::Connection;

use crate::IndexError;
use crate::store;

/// The full-text tables.
const TABLES: [&str; 4] = ["chunks_fts", "files_fts", "paths_fts", "symbols_fts"];
/// Meta key: files written (or dropped) since the tables were last merged. An index
/// without it predates merging and is merged at its next refresh.
const KEY: &str = "fts_unmerged";
/// Files rewritten since the last merge that call for another: at least this many…
const MERGE_MIN_FILES: usize = 256;
/// …and at least this share of the indexed files (1/n).
const MERGE_SHARE: usize = 8;

/// Whether `written` more rewritten files (to `unmerged` since the last merge, `None` for an
/// index never merged) call for a merge of an index of `files` files.
fn due(unmerged: Option<usize>, written: usize, files: usize) -> bool {
    match unmerged {
        None => true,
        Some(n) => n.saturating_add(written) >= MERGE_MIN_FILES.max(files / MERGE_SHARE),
    }
}

/// Files rewritten since the last merge, `None` when the index was never merged.
fn unmerged(conn: &Connection) -> Result<Option<usize>, IndexError> {
    Ok(store::meta(conn, KEY)?.and_then(|v| v.parse().ok()))
}

/// Rewrites each full-text table as one segment.
fn merge(conn: &Connection) -> Result<(), IndexError> {
    let tx = conn.unchecked_transaction()?;
    for t in TABLES {
        tx.execute(&format!("INSERT INTO {t}({t}) VALUES ('optimize')"), [])?;
    }
    store::set_meta(&tx, KEY, "0")?;
    tx.commit()?;
    // The rewrite went through the write-ahead log (as large as the tables): copy it into
    // the database and empty it now, unless a reader holds an older snapshot (then the log
    // is emptied by a later checkpoint, as usual).
    conn.busy_timeout(std::time::Duration::ZERO)?;
    let checkpoint = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()));
    conn.busy_timeout(store::BUSY_TIMEOUT)?;
    match checkpoint {
        Ok(()) | Err(rusqlite::Error::SqliteFailure(_, _)) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// After a full refresh that rewrote or dropped `written` files of `files` (`built`: the
/// refresh built the index, or finished an interrupted build): merges the full-text tables
/// when that is due, else counts the files. A refresh that changed nothing passes 0 and
/// merges an index built before merging existed. A merge that fails (a full disk) is rolled
/// back and tried again at a later refresh: the index stays whole, only slower to search.
pub(crate) fn after_refresh(
    conn: &Connection,
    written: usize,
    files: usize,
    built: bool,
) -> Result<(), IndexError> {
    let before = unmerged(conn)?;
    if built || due(before, written, files) {
        if merge(conn).is_err() && written > 0 {
            let n = before.unwrap_or(0).saturating_add(written);
            // Best effort too: the count only decides when to try again.
            let _ = store::set_meta(conn, KEY, &n.to_string());
        }
        return Ok(());
    }
    if written > 0 {
        let n = before.unwrap_or(0).saturating_add(written);
        store::set_meta(conn, KEY, &n.to_string())?;
    }
    Ok(())
}

/// After an incremental refresh (inside its transaction `tx`, committed by the caller) that
/// rewrote or dropped `written` files: counts them. The merge, when due, waits for the next
/// full refresh, so that file events stay quick.
pub(crate) fn count_writes(conn: &Connection, written: usize) -> Result<(), IndexError> {
    if written == 0 {
        return Ok(());
    }
    if let Some(n) = unmerged(conn)? {
        store::set_meta(conn, KEY, &n.saturating_add(written).to_string())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn segments(conn: &Connection) -> i64 {
        conn.query_row(
            "SELECT count(DISTINCT segid) FROM chunks_fts_idx",
            [],
            |r| r.get(0),
        )
        .unwrap()
    }

    fn ranks(conn: &Connection) -> Vec<(i64, u64)> {
        let mut stmt = conn
            .prepare(
                "SELECT rowid, rank FROM chunks_fts WHERE chunks_fts MATCH '\"parse\" OR config'
                 AND rank MATCH 'bm25(2.0, 1.0, 0.5)' ORDER BY rowid",
            )
            .unwrap();
        stmt.query_map([], |r| Ok((r.get(0)?, r.get::<_, f64>(1)?.to_bits())))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    }

    /// Batches written in separate transactions leave a segment each; the merge leaves one,
    /// with every row's rank the same number, and a deleted row stays deleted.
    #[test]
    fn a_merge_leaves_one_segment_and_the_same_ranks() {
        let dir = tempfile::tempdir().unwrap();
        let conn = store::open(&dir.path().join("index.db")).unwrap();
        for batch in 0..6i64 {
            let tx = conn.unchecked_transaction().unwrap();
            for i in 0..20i64 {
                let id = batch * 100 + i;
                let body = format!(
                    "parse the config {} of batch {batch}",
                    "word ".repeat(i as usize)
                );
                tx.execute(
                    "INSERT INTO chunks_fts(rowid, symbol, body, terms) VALUES (?1, 'parse', ?2, 'config')",
                    rusqlite::params![id, body],
                )
                .unwrap();
            }
            tx.commit().unwrap();
        }
        conn.execute("DELETE FROM chunks_fts WHERE rowid = 3", [])
            .unwrap();
        assert!(segments(&conn) > 1, "{}", segments(&conn));
        let before = ranks(&conn);
        assert_eq!(before.len(), 119);
        assert_eq!(unmerged(&conn).unwrap(), None);
        after_refresh(&conn, 0, 120, false).unwrap();
        assert_eq!(segments(&conn), 1);
        assert_eq!(ranks(&conn), before);
        assert_eq!(unmerged(&conn).unwrap(), Some(0));
        // Counted, not merged, until a share of the files was rewritten.
        after_refresh(&conn, 10, 120, false).unwrap();
        count_writes(&conn, 5).unwrap();
        assert_eq!(unmerged(&conn).unwrap(), Some(15));
    }

    #[test]
    fn merging_is_due_after_a_share_of_the_files() {
        assert!(due(None, 0, 10));
        assert!(!due(Some(0), 0, 10));
        assert!(!due(Some(200), 55, 100));
        assert!(due(Some(200), 56, 100));
        assert!(!due(Some(0), 1_000, 10_000));
        assert!(due(Some(250), 1_000, 10_000));
    }
}
