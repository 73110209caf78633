//! The words of a query as the index sees them: how many chunks hold each (cached until the
//! index changes), which are selective enough for a full-text lookup, the rarest few, their
//! inverse document frequencies, and the second reading connection a search borrows.

use std::collections::HashMap;

use rusqlite::params;

use super::{FILE_TEXT_FULL_AT, definitions};
use crate::terms::{QueryTerms, fts_or, fts_phrases};
use crate::{Index, IndexError};

/// A word in more chunks than this share of the index is left out of a query that has
/// rarer words: it barely moves BM25 but costs a score for every chunk holding it.
const COMMON_SHARE: usize = 1_000;
/// …but a word is never common below this many chunks.
const COMMON_MIN: usize = 2_000;

impl Index {
    /// Chunks holding `word`, counted up to `cap` (cached until the index changes).
    pub(super) fn frequency(&self, word: &str, cap: usize) -> Result<usize, IndexError> {
        if let Ok(cache) = self.df_cache.lock()
            && let Some(n) = cache.get(word)
        {
            return Ok(*n);
        }
        let Some(q) = fts_or(&[word.to_string()]) else {
            return Ok(0);
        };
        let n: i64 = self.conn.prepare_cached(
            "SELECT count(*) FROM (SELECT 1 FROM chunks_fts WHERE chunks_fts MATCH ?1 LIMIT ?2)",
        )?
        .query_row(params![q, cap as i64], |r| r.get(0))?;
        let n = n.max(0) as usize;
        if let Ok(mut cache) = self.df_cache.lock() {
            cache.insert(word.to_string(), n);
        }
        Ok(n)
    }

    /// The second (read) connection, opened on first use, for one search to use on another
    /// thread ([`Index::put_reader`] gives it back); `None` when it cannot be opened (the
    /// search then reads on one connection).
    pub(super) fn take_reader(&self) -> Option<rusqlite::Connection> {
        let mut slot = self.reader.lock().ok()?;
        match slot.take() {
            Some(c) => Some(c),
            None => crate::store::open_reader(&self.db_path).ok(),
        }
    }
    pub(super) fn put_reader(&self, conn: rusqlite::Connection) {
        if let Ok(mut slot) = self.reader.lock() {
            *slot = Some(conn);
        }
    }
    pub(crate) fn forget_frequencies(&self) {
        if let Ok(mut cache) = self.df_cache.lock() {
            cache.clear();
        }
        if let Ok(mut cache) = self.catalogs.lock() {
            *cache = None;
        }
    }

    /// How far whole-file BM25 is trusted (0–1): its word statistics say little over a
    /// handful of files (every word is "common" in five), and fully from
    /// [`FILE_TEXT_FULL_AT`] files on.
    pub(super) fn file_text_trust(&self) -> Result<f64, IndexError> {
        let n = self.cached_count("\u{0}files", "SELECT COUNT(*) FROM files")?;
        let (lo, hi) = FILE_TEXT_FULL_AT;
        Ok(((n as f64 - lo) / (hi - lo)).clamp(0.0, 1.0))
    }

    /// A `SELECT COUNT(*)` answer, cached until the index changes.
    pub(super) fn cached_count(&self, key: &str, sql: &str) -> Result<usize, IndexError> {
        if let Some(n) = self.df_cache.lock().ok().and_then(|c| c.get(key).copied()) {
            return Ok(n);
        }
        let n: i64 = self.conn.query_row(sql, [], |r| r.get(0))?;
        let n = n.max(0) as usize;
        if let Ok(mut cache) = self.df_cache.lock() {
            cache.insert(key.into(), n);
        }
        Ok(n)
    }

    /// The inverse document frequency (over chunks) of each word, for definition-level BM25.
    pub(super) fn idf(&self, words: &[String]) -> Result<definitions::Idf, IndexError> {
        let total = self
            .cached_count("\u{0}total", "SELECT COUNT(*) FROM chunks")?
            .max(1);
        let common = (total / COMMON_SHARE).max(COMMON_MIN);
        let mut df = HashMap::new();
        for w in words {
            df.insert(w.clone(), self.frequency(w, common + 1)?);
        }
        Ok(definitions::Idf::new(
            words,
            &|w| df.get(w).copied().unwrap_or(0),
            total,
        ))
    }

    /// The `n` rarest of `words` (fewer chunks holding them first; ties in word order).
    pub(super) fn rarest(&self, words: &[String], n: usize) -> Result<Vec<String>, IndexError> {
        if words.len() <= n {
            return Ok(words.to_vec());
        }
        let total = self
            .cached_count("\u{0}total", "SELECT COUNT(*) FROM chunks")?
            .max(1);
        let common = (total / COMMON_SHARE).max(COMMON_MIN);
        let mut counted = Vec::with_capacity(words.len());
        for (i, w) in words.iter().enumerate() {
            counted.push((self.frequency(w, common + 1)?, i));
        }
        counted.sort();
        Ok(counted
            .into_iter()
            .take(n)
            .map(|(_, i)| words[i].clone())
            .collect())
    }

    /// The query words worth a full-text lookup: all but the very common ones, or (when all
    /// are common) the two rarest.
    pub(super) fn selective_words(&self, terms: &QueryTerms) -> Result<Vec<String>, IndexError> {
        let total = self
            .cached_count("\u{0}total", "SELECT COUNT(*) FROM chunks")?
            .max(1);
        let common = (total / COMMON_SHARE).max(COMMON_MIN);
        let mut counted = Vec::with_capacity(terms.words.len());
        for w in &terms.words {
            counted.push((self.frequency(w, common + 1)?, w.clone()));
        }
        let mut rare: Vec<String> = counted
            .iter()
            .filter(|(n, _)| *n <= common)
            .map(|(_, w)| w.clone())
            .collect();
        if rare.is_empty() {
            counted.sort();
            rare = counted.into_iter().take(2).map(|(_, w)| w).collect();
        }
        Ok(rare)
    }
}

/// The phrases of the chunk candidates' full-text lookup (their OR): identifiers as
/// phrases, other selective words one by one.
pub(super) fn text_phrases(terms: &QueryTerms, selective: &[String]) -> Vec<String> {
    let mut parts: Vec<String> = terms
        .phrases
        .iter()
        .map(|p| crate::terms::fts_phrase(&p.join(" ")))
        .collect();
    let in_phrase = |w: &String| terms.phrases.iter().any(|p| p.contains(w));
    let singles: Vec<String> = selective
        .iter()
        .filter(|w| !in_phrase(w))
        .cloned()
        .collect();
    parts.extend(fts_phrases(&singles));
    parts
}

/// The words of a whole-file lookup: the selective words plus the report's snake-case
/// identifiers whole (`update_item`: that table keeps them as one token).
pub(super) fn file_words(words: &[String], terms: &QueryTerms) -> Vec<String> {
    let mut out = words.to_vec();
    for ident in &terms.identifiers {
        let lower = ident.to_lowercase();
        if lower.contains('_') && !out.contains(&lower) {
            out.push(lower);
        }
    }
    out
}
