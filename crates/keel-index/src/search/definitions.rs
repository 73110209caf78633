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
//! 3. the report's words that single it out among its own file's definitions (a word every
//!    method of the file holds says nothing about which one to open; one held by this
//!    definition alone says much),
//! 4. the best location evidence on the definition itself (frame function, named, raising,
//!    matching chunk), relative to the best,
//! 5. whether the report names it.
//!
//! A class ranks a little below its methods: a fix edits a method far more often. A
//! definition in a test, docs or example file takes its file's role weight (as file results
//! do), so a test function sharing the report's words does not crowd out the source.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use rusqlite::{Connection, params};

use super::*;
use crate::defterms::{KINDS, stem};

/// How many of the best files give all their definitions as candidates.
const DEF_FILES: usize = 12;
/// Weights of the parts of a definition's score.
const W_DEF_FILE: f64 = 1.0;
const W_DEF_TEXT: f64 = 0.6;
/// Weight of the report's words that are rare among the definitions of the same file.
const W_DEF_LOCAL: f64 = 0.3;
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
    path: std::rc::Rc<str>,
    start: usize,
    end: usize,
    qualified: String,
    name: String,
    /// The query names it.
    named: bool,
    kind: String,
    /// How many words its own lines hold (counted when the file was indexed:
    /// `defterms.rs`), and the query's stems among them with their counts, in stem order.
    words: usize,
    matched: Vec<(u32, u32)>,
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

/// Ranks definitions and returns the best `limit`. `files` is the file ranking (best
/// first), `scored` the scored locations it came from.
#[allow(clippy::too_many_arguments)]
pub(super) fn ranked(
    conn: &Connection,
    files: &[(f64, Cand)],
    scored: &[(f64, Cand)],
    idf: &Idf,
    named: &BTreeSet<String>,
    filter: &dyn Fn(&str) -> bool,
    role_weight: &dyn Fn(&str) -> f64,
    limit: usize,
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
    let query = QueryStems::new(idf);
    for (fid, path) in &wanted {
        if filter(path) {
            definitions_of(conn, *fid, path, &query, &mut defs)?;
        }
    }
    for d in &mut defs {
        d.named = named.contains(&d.name.to_lowercase());
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
    let avg =
        (defs.iter().map(|d| d.words).sum::<usize>() as f64 / defs.len().max(1) as f64).max(1.0);
    let texts: Vec<f64> = defs
        .iter()
        .map(|d| {
            // In stem order: the sum must not depend on hashing.
            let mut s = 0.0;
            for &(i, f) in &d.matched {
                let w = query.words[i as usize].2;
                let f = f as f64;
                s += w * f * (K1 + 1.0) / (f + K1 * (1.0 - B + B * d.words as f64 / avg));
            }
            s
        })
        .collect();
    let best_text = texts.iter().copied().fold(0.0_f64, f64::max).max(1e-9);
    let locals = local_text(&defs, &query);
    let best_local = locals.iter().copied().fold(0.0_f64, f64::max).max(1e-9);
    let mut scores: Vec<(f64, usize)> = Vec::with_capacity(defs.len());
    for (i, d) in defs.iter().enumerate() {
        let Some((fs, _, _)) = file_score.get(&d.file_id) else {
            continue;
        };
        let loc = located.get(&(d.file_id, d.qualified.as_str()));
        let mut s = W_DEF_FILE * fs
            + W_DEF_TEXT * texts[i] / best_text
            + W_DEF_LOCAL * locals[i] / best_local
            + loc.map_or(0.0, |(l, _)| W_DEF_LOCATION * l / best_loc)
            + if d.named { W_DEF_NAMED } else { 0.0 };
        if !matches!(d.kind.as_str(), "function" | "method") {
            s *= CLASS_SHARE;
        }
        s *= role_weight(&d.path);
        scores.push((s, i));
    }
    // Only the best `limit` are explained and returned (in the order the caller ranks by:
    // score, then path, then line; the sort is stable, so equal ones keep their order).
    scores.sort_by(|a, b| {
        let (da, db) = (&defs[a.1], &defs[b.1]);
        b.0.total_cmp(&a.0)
            .then_with(|| da.path.cmp(&db.path))
            .then(da.start.cmp(&db.start))
    });
    scores.truncate(limit);
    let mut out = Vec::with_capacity(scores.len());
    for (s, i) in scores {
        let d = &defs[i];
        let Some((_, rank, _)) = file_score.get(&d.file_id) else {
            continue;
        };
        let loc = located.get(&(d.file_id, d.qualified.as_str()));
        let mut why = Vec::new();
        if let Some((_, c)) = loc {
            why.extend(c.why.iter().take(3).cloned());
        }
        if d.named {
            why.push(format!("`{}` is named in the query", d.name));
        }
        if !d.matched.is_empty() && !idf.is_empty() {
            let mut found: Vec<&str> = d
                .matched
                .iter()
                .map(|&(w, _)| query.words[w as usize].1.as_str())
                .collect();
            found.sort();
            let shown: Vec<&str> = found.into_iter().take(6).collect();
            why.push(format!("its lines hold {}", shown.join(", ")));
        }
        why.push(format!("in the file ranked {rank} ({})", d.path));
        out.push((
            s,
            Cand {
                file_id: d.file_id,
                path: d.path.to_string(),
                start: d.start,
                end: d.end.min(d.start + MAX_SYMBOL_HIT_LINES),
                symbol: Some(d.qualified.clone()),
                kind: Some(d.kind.clone()),
                text: 0.0,
                sym: 0.0,
                bonus: 0.0,
                why,
            },
        ));
    }
    Ok(out)
}

/// Each definition's share of the report's words that few other definitions of its file
/// hold: within a file that matches the report as a whole, the words that single out one
/// definition say which one to open. Per word held: its inverse frequency among the file's
/// definitions × its inverse frequency over the index × a saturated count.
fn local_text(defs: &[Def], query: &QueryStems<'_>) -> Vec<f64> {
    let mut out = vec![0.0; defs.len()];
    let mut start = 0;
    while start < defs.len() {
        // `definitions_of` appends one file's definitions together.
        let fid = defs[start].file_id;
        let end = start
            + defs[start..]
                .iter()
                .take_while(|d| d.file_id == fid)
                .count();
        let n = (end - start) as f64;
        let mut held: HashMap<u32, u32> = HashMap::new();
        for d in &defs[start..end] {
            for &(w, _) in &d.matched {
                *held.entry(w).or_default() += 1;
            }
        }
        for (i, d) in defs[start..end].iter().enumerate() {
            // In stem order: the sum must not depend on hashing.
            let mut s = 0.0;
            for &(w, f) in &d.matched {
                let df = held.get(&w).copied().unwrap_or(1) as f64;
                let local = ((n - df + 0.5) / (df + 0.5) + 1.0).ln();
                let f = f as f64;
                s += local * query.words[w as usize].2 * f * (K1 + 1.0) / (f + K1);
            }
            out[start + i] = s;
        }
        start = end;
    }
    out
}

/// The report's stems for matching a definition's stored stems quickly: most of a
/// definition's stems are not the report's, and a table of (first byte, length) turns
/// them away before any hashing.
struct QueryStems<'a> {
    /// (stem, word, idf), in the order of `index`'s values.
    words: Vec<(&'a str, &'a String, f64)>,
    index: HashMap<&'a str, u32>,
    /// Bit `len` (63 for longer) of `first[b]`: a stem starting with byte `b` of that length.
    first: [u64; 256],
}

impl<'a> QueryStems<'a> {
    fn new(idf: &'a Idf) -> QueryStems<'a> {
        let mut q = QueryStems {
            words: Vec::with_capacity(idf.words.len()),
            index: HashMap::with_capacity(idf.words.len()),
            first: [0; 256],
        };
        for (stem, (word, w)) in &idf.words {
            if let Some(&b) = stem.as_bytes().first() {
                q.first[b as usize] |= 1 << stem.len().min(63);
            }
            q.index.insert(stem.as_str(), q.words.len() as u32);
            q.words.push((stem.as_str(), word, *w));
        }
        q
    }

    fn get(&self, stem: &str) -> Option<u32> {
        let b = *stem.as_bytes().first()?;
        if self.first[b as usize] & (1 << stem.len().min(63)) == 0 {
            return None;
        }
        self.index.get(stem).copied()
    }

    /// The query's stems among a stored `stem count …` text, with their counts, in the
    /// text's order (the pairs `defterms::parse_stems` reads, less the stems not in the query).
    fn matches(&self, stems: &str) -> Vec<(u32, u32)> {
        let mut out = Vec::new();
        let mut it = stems.split(' ');
        while let (Some(st), Some(c)) = (it.next(), it.next()) {
            if let Some(i) = self.get(st)
                && let Ok(c) = c.parse::<u32>()
            {
                out.push((i, c));
            }
        }
        out
    }
}

/// Appends the function, method and type definitions of one file, each with its length
/// and the query's stems among its words.
fn definitions_of(
    conn: &Connection,
    file_id: i64,
    path: &str,
    query: &QueryStems<'_>,
    out: &mut Vec<Def>,
) -> Result<(), IndexError> {
    let mut stmt = conn.prepare_cached(
        "SELECT start_line, end_line, qualified, name, kind, words, stems FROM symbols
         WHERE file_id = ?1 ORDER BY start_line, depth",
    )?;
    let path: std::rc::Rc<str> = path.into();
    let mut rows = stmt.query(params![file_id])?;
    while let Some(r) = rows.next()? {
        let kind: String = r.get(4)?;
        if !KINDS.contains(&kind.as_str()) {
            continue;
        }
        let start: i64 = r.get(0)?;
        let end: i64 = r.get(1)?;
        let words: i64 = r.get(5)?;
        let name: String = r.get(3)?;
        let matched = match r.get_ref(6)? {
            rusqlite::types::ValueRef::Text(t) => {
                query.matches(std::str::from_utf8(t).unwrap_or(""))
            }
            _ => Vec::new(),
        };
        out.push(Def {
            file_id,
            path: path.clone(),
            start: start.max(1) as usize,
            end: end.max(1) as usize,
            qualified: r.get(2)?,
            named: false,
            name,
            kind,
            words: words.max(0) as usize,
            matched,
        });
    }
    Ok(())
}
