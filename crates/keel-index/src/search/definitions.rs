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

use super::signals::stem;
use super::snippet::read_lines;
use super::*;
use crate::terms::split_identifier;

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
/// Definition kinds that are answers.
const KINDS: &[&str] = &[
    "function",
    "method",
    "class",
    "struct",
    "enum",
    "trait",
    "interface",
];

/// One candidate definition.
struct Def {
    file_id: i64,
    path: String,
    start: usize,
    end: usize,
    qualified: String,
    name: String,
    kind: String,
    /// Lines inside the definition that belong to its member definitions (left out of a
    /// type's own text).
    members: Vec<(usize, usize)>,
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
    root: &std::path::Path,
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
    // Definition-level BM25 over each candidate's own lines.
    let mut bodies: BTreeMap<String, Option<Vec<String>>> = BTreeMap::new();
    let mut texts: Vec<(f64, Vec<String>)> = Vec::with_capacity(defs.len());
    let mut lengths = Vec::with_capacity(defs.len());
    let mut counts: Vec<BTreeMap<String, u32>> = Vec::with_capacity(defs.len());
    for d in &defs {
        let lines = bodies
            .entry(d.path.clone())
            .or_insert_with(|| read_lines(root, &d.path));
        let (tf, len) = term_counts(lines.as_deref().unwrap_or(&[]), d, idf);
        counts.push(tf);
        lengths.push(len);
    }
    let avg = (lengths.iter().sum::<usize>() as f64 / lengths.len().max(1) as f64).max(1.0);
    for (tf, len) in counts.iter().zip(&lengths) {
        let mut s = 0.0;
        let mut found = Vec::new();
        for (st, f) in tf {
            if let Some((word, w)) = idf.words.get(st) {
                let f = *f as f64;
                s += w * f * (K1 + 1.0) / (f + K1 * (1.0 - B + B * *len as f64 / avg));
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

/// The function, method and type definitions of one file, each with its members' spans.
fn definitions_of(conn: &Connection, file_id: i64, path: &str) -> Result<Vec<Def>, IndexError> {
    let mut stmt = conn.prepare_cached(
        "SELECT start_line, end_line, qualified, name, kind, depth FROM symbols
         WHERE file_id = ?1 ORDER BY start_line, depth",
    )?;
    type Row = (i64, i64, String, String, String, i64);
    let rows: Vec<Row> = stmt
        .query_map(params![file_id], |r| TryFrom::try_from(r))?
        .collect::<Result<_, _>>()?;
    let mut out = Vec::new();
    for (i, (start, end, qualified, name, kind, depth)) in rows.iter().enumerate() {
        if !KINDS.contains(&kind.as_str()) {
            continue;
        }
        let (start, end) = (
            start.max(&1).to_owned() as usize,
            end.max(&1).to_owned() as usize,
        );
        let members = rows[i + 1..]
            .iter()
            .take_while(|r| (r.0.max(1) as usize) <= end)
            .filter(|r| r.5 == depth + 1)
            .map(|r| (r.0.max(1) as usize, r.1.max(1) as usize))
            .collect();
        out.push(Def {
            file_id,
            path: path.to_string(),
            start,
            end,
            qualified: qualified.clone(),
            name: name.clone(),
            kind: kind.clone(),
            members,
        });
    }
    Ok(out)
}

/// How often each report word (by stem) occurs in a definition's own lines, and how many
/// words those lines hold. A type's own lines leave out its members'.
/// (In word order: the sum of a definition's terms must not depend on hashing.)
fn term_counts(lines: &[String], d: &Def, idf: &Idf) -> (BTreeMap<String, u32>, usize) {
    let mut tf: BTreeMap<String, u32> = BTreeMap::new();
    let mut len = 0usize;
    let own_members = !matches!(d.kind.as_str(), "function" | "method");
    let to = d.end.min(lines.len());
    for n in d.start..=to {
        if own_members && d.members.iter().any(|(a, b)| *a <= n && n <= *b) {
            continue;
        }
        let Some(line) = lines.get(n - 1) else { break };
        for tok in line.split(|c: char| !(c.is_alphanumeric() || c == '_')) {
            if tok.is_empty() {
                continue;
            }
            len += 1;
            let lower = tok.to_lowercase();
            let mut seen = BTreeSet::new();
            for part in std::iter::once(lower).chain(split_identifier(tok)) {
                let st = stem(&part).to_string();
                if idf.words.contains_key(&st) && seen.insert(st.clone()) {
                    *tf.entry(st).or_default() += 1;
                }
            }
        }
    }
    (tf, len)
}
