//! FTS5's BM25 of an OR of phrases, computed phrase by phrase.
//!
//! Ranking `"a" OR "b" OR …` inside FTS5 merges, for every matching row, the positions of
//! all the phrases into one list (`fts5CacheInstArray`: each step looks at every phrase), so
//! it costs the query's occurrences in that row times its phrases — the larger part of a
//! long report's search, where a whole-file lookup has a hundred words and more. FTS5's
//! `bm25` is a sum over the phrases, in phrase order, of a term that depends on that
//! phrase's own occurrences in the row (weighted by column), the row's size, the table's
//! average size and the phrase's document count; a phrase absent from a row adds nothing.
//! So the rank of the OR query is the sum, in phrase order, of each phrase's rank queried
//! alone — the same number to the bit — at a cost linear in the occurrences.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

use rusqlite::{Connection, params};

use crate::IndexError;

/// The rows of `table` matching any of `phrases` (FTS5 phrase expressions, `"word"`, each
/// optionally behind a column filter), each with the rank FTS5 gives it for the OR of them
/// (`rank`: negative BM25, best lowest; `weights`, a `bm25(…)` call, sets the columns'
/// weights), best first, down to the `want`-th row's rank with the rows tied with it
/// (equal ranks in row-id order). Rows in `skip` are left out before the cut.
pub(super) fn ranked_or(
    conn: &Connection,
    table: &str,
    phrases: &[String],
    weights: Option<&str>,
    want: usize,
    skip: &HashSet<i64>,
) -> Result<Vec<(f64, i64)>, IndexError> {
    let sql = match weights {
        Some(_) => {
            format!("SELECT rowid, rank FROM {table} WHERE {table} MATCH ?1 AND rank MATCH ?2")
        }
        None => format!("SELECT rowid, rank FROM {table} WHERE {table} MATCH ?1"),
    };
    let mut stmt = conn.prepare_cached(&sql)?;
    // Each row's BM25, summed phrase by phrase in the OR's phrase order (as FTS5 sums it).
    // Rows in `skip` are summed too and dropped once, after: a row's sum is its own.
    let mut score: HashMap<i64, f64, BuildHasherDefault<RowIdHasher>> = HashMap::default();
    for phrase in phrases {
        let mut rows = match weights {
            Some(w) => stmt.query(params![phrase, w])?,
            None => stmt.query(params![phrase])?,
        };
        while let Some(r) = rows.next()? {
            let rowid: i64 = r.get(0)?;
            let rank: f64 = r.get(1)?;
            *score.entry(rowid).or_insert(0.0) += -rank;
        }
    }
    let mut ranked: Vec<(f64, i64)> = score
        .into_iter()
        .filter(|(id, _)| !skip.contains(id))
        .map(|(id, s)| (-s, id))
        .collect();
    ranked.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let want = want.max(1);
    if ranked.len() > want {
        let cut = ranked[want - 1].0;
        ranked.retain(|r| r.0 <= cut);
    }
    Ok(ranked)
}

/// Hashes a row id with one multiplication (row ids are the index's own integers, and the
/// map's order is never used: the rows are sorted after).
#[derive(Default)]
struct RowIdHasher(u64);

impl Hasher for RowIdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 =
                (self.0.rotate_left(5) ^ u64::from(*b)).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
        }
    }
    fn write_i64(&mut self, n: i64) {
        self.0 = (n as u64)
            .wrapping_mul(0x9e37_79b9_7f4a_7c15)
            .rotate_left(26);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The phrase-by-phrase ranks equal FTS5's own ranks of the OR query, bit for bit, with
    /// column weights, repeated words, phrases of two words and absent words.
    #[test]
    fn ranks_equal_fts5s_rank_of_the_or_query() {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch("CREATE VIRTUAL TABLE t USING fts5(a, b, tokenize='porter unicode61');")
            .unwrap();
        let docs = [
            ("parse the config file", "config parser parse parse"),
            ("open a socket and read", "socket reader"),
            ("config config config", "nothing here"),
            ("the parser reads the file twice, the file", "file"),
            ("unrelated words only", "more unrelated words"),
            ("parse config", ""),
        ];
        for (i, (a, b)) in docs.iter().enumerate() {
            conn.execute(
                "INSERT INTO t(rowid, a, b) VALUES (?1, ?2, ?3)",
                params![i as i64 + 1, a, b],
            )
            .unwrap();
        }
        let phrases: Vec<String> = [
            "parse",
            "config",
            "\"the file\"",
            "socket",
            "absent",
            "file",
        ]
        .iter()
        .map(|p| {
            if p.starts_with('"') {
                p.to_string()
            } else {
                format!("\"{p}\"")
            }
        })
        .collect();
        for weights in [None, Some("bm25(2.0, 0.5)")] {
            let or = phrases.join(" OR ");
            let sql = match weights {
                Some(_) => {
                    "SELECT rank, rowid FROM t WHERE t MATCH ?1 AND rank MATCH ?2 ORDER BY rank, rowid"
                }
                None => "SELECT rank, rowid FROM t WHERE t MATCH ?1 ORDER BY rank, rowid",
            };
            let mut stmt = conn.prepare(sql).unwrap();
            let read = |r: &rusqlite::Row<'_>| Ok((r.get::<_, f64>(0)?, r.get::<_, i64>(1)?));
            let expected: Vec<(f64, i64)> = match weights {
                Some(w) => stmt.query_map(params![or, w], read),
                None => stmt.query_map(params![or], read),
            }
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
            assert_eq!(expected.len(), 5, "{expected:?}");
            let got = ranked_or(&conn, "t", &phrases, weights, 100, &HashSet::new()).unwrap();
            let bits = |v: &[(f64, i64)]| {
                v.iter()
                    .map(|(s, id)| (s.to_bits(), *id))
                    .collect::<Vec<_>>()
            };
            assert_eq!(bits(&got), bits(&expected));
            // The best two, and every row tied with the second.
            let top = ranked_or(&conn, "t", &phrases, weights, 2, &HashSet::new()).unwrap();
            assert_eq!(bits(&top), bits(&expected[..2]));
        }
    }
}
