//! Definition results for a report (`kind: symbol` with a long or many-word query): which
//! function, method or class to open, not only which file.
//!
//! The candidates are the definitions of the best-ranked files (the file ranking with all its
//! evidence decides where to look) plus every definition the report's evidence points at
//! directly (a traceback frame's function, a named definition, a raise site). Each is scored
//! by
//! 1. its file's score, relative to the best file's,
//! 2. definition-level BM25 of the report's words over the definition's own lines (a class
//!    counts its lines outside its members; word statistics from the whole index),
//! 3. the best location evidence on the definition itself (frame function, named, raising,
//!    matching chunk), relative to the best,
//! 4. whether the report names it.
//!
//! A class ranks a little below its methods: a fix edits a method far more often.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use rusqlite::{Connection, params};

use super::*;
use crate::defterms::{KINDS, parse_stems, stem};

/// How many of the best files give all their definitions as candidates.
const DEF_FILES: usize = 12;
/// Weights of the four parts of a definition's score.
const W_DEF_FILE: f64 = 1.0;
const W_DEF_TEXT: f64 = 0.8;
const W_DEF_LOCATION: f64 = 0.2;
const W_DEF_NAMED: f64 = 0.5;
/// What a class keeps of its score.
const CLASS_SHARE: f64 = 0.75;

/// BM25 parameters of the definition-level text score.
const K1: f64 = 1.2;
const B: f64 = 0.75;

/// One candidate definition.
struct Def {
    file_id: i64,
    path: String,
    start: usize,
    end: usize,
    qualified: String,
    name: String,
    kind: String,
    /// How many words its own lines hold, and their stems with counts (counted when the
    /// file was indexed: `defterms.rs`).
    words: usize,
    stems: String,
}

/// The words of a report, each with its inverse document frequency over the index's chunks,
/// keyed by stem.
pub(super) struct Idf {
    words: HashMap<String, (String, f64)>,
}

impl Idf {
    pub(super) fn new(words: &[String], df: &dyn Fn(&str) -> usize, total: usize) -> Idf {
        let n = total.max(1) as f64;
        let mut out = HashMap::new();
        for w in words {
            let d = df(w) as f64;
            let idf = ((n - d + 0.5) / (d + 0.5) + 1.0).ln();
            out.entry(stem(w).to_string())
                .or_insert_with(|| (w.clone(), idf));
        }
        Idf { words: out }
    }

    fn is_empty(&self) -> bool {
        self.words.is_empty()
    }
}

/// Ranks definitions. `files` is the file ranking (best first), `scored` the scored
/// locations it came from.
#[allow(clippy::too_many_arguments)]
pub(super) fn ranked(
    conn: &Connection,
    files: &[(f64, Cand)],
    scored: &[(f64, Cand)],
    idf: &Idf,
    named: &BTreeSet<String>,
    filter: &dyn Fn(&str) -> bool,
) -> Result<Vec<(f64, Cand)>, IndexError> {
    let best_file = files
        .first()
        .map(|f| f.0)
        .filter(|s| *s > 0.0)
        .unwrap_or(1.0);
    let file_score: HashMap<i64, (f64, usize, String)> = files
        .iter()
        .enumerate()
        .map(|(i, (s, c))| (c.file_id, (s / best_file, i + 1, c.path.clone())))
        .collect();
    // The files whose definitions are candidates: the best ones, and any file with a
    // location on a definition.
    let mut wanted: BTreeMap<i64, String> = files
        .iter()
        .take(DEF_FILES)
        .map(|(_, c)| (c.file_id, c.path.clone()))
        .collect();
    for (_, c) in scored {
        if c.symbol.is_some()
            && c.kind.as_deref().is_some_and(|k| KINDS.contains(&k))
            && file_score.contains_key(&c.file_id)
        {
            wanted.entry(c.file_id).or_insert_with(|| c.path.clone());
        }
    }
    let mut defs: Vec<Def> = Vec::new();
    for (fid, path) in &wanted {
        if filter(path) {
            defs.extend(definitions_of(conn, *fid, path)?);
        }
    }
    // Location evidence per definition: the best location whose symbol is this definition.
    let mut located: HashMap<(i64, &str), (f64, &Cand)> = HashMap::new();
    for (s, c) in scored {
        if let Some(sym) = c.symbol.as_deref() {
            let e = located.entry((c.file_id, sym)).or_insert((*s, c));
            if *s > e.0 {
                *e = (*s, c);
            }
        }
    }
    let best_loc = located
        .values()
        .map(|v| v.0)
        .fold(0.0_f64, f64::max)
        .max(1e-9);
    // Definition-level BM25 over each candidate's own lines (their words counted when the
    // file was indexed).
    let mut texts: Vec<(f64, Vec<String>)> = Vec::with_capacity(defs.len());
    let avg =
        (defs.iter().map(|d| d.words).sum::<usize>() as f64 / defs.len().max(1) as f64).max(1.0);
    for d in &defs {
        // In stem order: the sum must not depend on hashing.
        let mut s = 0.0;
        let mut found = Vec::new();
        for (st, f) in parse_stems(&d.stems) {
            if let Some((word, w)) = idf.words.get(st) {
                let f = f as f64;
                s += w * f * (K1 + 1.0) / (f + K1 * (1.0 - B + B * d.words as f64 / avg));
                found.push(word.clone());
            }
        }
        found.sort();
        texts.push((s, found));
    }
    let best_text = texts.iter().map(|t| t.0).fold(0.0_f64, f64::max).max(1e-9);
    let mut out = Vec::with_capacity(defs.len());
    for (i, d) in defs.into_iter().enumerate() {
        let Some((fs, rank, _)) = file_score.get(&d.file_id) else {
            continue;
        };
        let (text, found) = &texts[i];
        let loc = located.get(&(d.file_id, d.qualified.as_str()));
        let is_named = named.contains(&d.name.to_lowercase());
        let mut s = W_DEF_FILE * fs
            + W_DEF_TEXT * text / best_text
            + loc.map_or(0.0, |(l, _)| W_DEF_LOCATION * l / best_loc)
            + if is_named { W_DEF_NAMED } else { 0.0 };
        if !matches!(d.kind.as_str(), "function" | "method") {
            s *= CLASS_SHARE;
        }
        let mut why = Vec::new();
        if let Some((_, c)) = loc {
            why.extend(c.why.iter().take(3).cloned());
        }
        if is_named {
            why.push(format!("`{}` is named in the query", d.name));
        }
        if !found.is_empty() && !idf.is_empty() {
            let shown: Vec<&str> = found.iter().take(6).map(String::as_str).collect();
            why.push(format!("its lines hold {}", shown.join(", ")));
        }
        why.push(format!("in the file ranked {rank} ({})", d.path));
        out.push((
            s,
            Cand {
                file_id: d.file_id,
                path: d.path,
                start: d.start,
                end: d.end.min(d.start + MAX_SYMBOL_HIT_LINES),
                symbol: Some(d.qualified),
                kind: Some(d.kind),
                text: 0.0,
                sym: 0.0,
                bonus: 0.0,
                why,
            },
        ));
    }
    Ok(out)
}

/// The function, method and type definitions of one file, each with its words.
fn definitions_of(conn: &Connection, file_id: i64, path: &str) -> Result<Vec<Def>, IndexError> {
    let mut stmt = conn.prepare_cached(
        "SELECT start_line, end_line, qualified, name, kind, words, stems FROM symbols
         WHERE file_id = ?1 ORDER BY start_line, depth",
    )?;
    type Row = (i64, i64, String, String, String, i64, Option<String>);
    let rows: Vec<Row> = stmt
        .query_map(params![file_id], |r| TryFrom::try_from(r))?
        .collect::<Result<_, _>>()?;
    let mut out = Vec::new();
    for (start, end, qualified, name, kind, words, stems) in rows {
        if !KINDS.contains(&kind.as_str()) {
            continue;
        }
        out.push(Def {
            file_id,
            path: path.to_string(),
            start: start.max(1) as usize,
            end: end.max(1) as usize,
            qualified,
            name,
            kind,
            words: words.max(0) as usize,
            stems: stems.unwrap_or_default(),
        });
    }
    Ok(out)
}
