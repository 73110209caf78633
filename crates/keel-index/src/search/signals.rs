//! The four signals' candidate lists: BM25 over chunks, symbol names, paths, and the import
//! graph's boost around the strongest hits.

use crate::defterms::stem;
use std::collections::{HashMap, HashSet};

use rusqlite::{Connection, OptionalExtension, params};

use super::bm25::ranked_or;
use super::*;
use crate::terms::{fts_or, split_identifier};

/// BM25 chunk candidates for the OR of `phrases` (FTS5 phrase expressions), scores
/// normalised to the best (1.0). Chunks in `skip` are not candidates.
pub(super) fn text_candidates(
    conn: &Connection,
    phrases: &[String],
    weights: &str,
    fetch: usize,
    filter: &dyn Fn(&str) -> bool,
    skip: &HashSet<i64>,
    out: &mut Vec<Cand>,
) -> Result<(), IndexError> {
    let ranked = ranked_or(conn, "chunks_fts", phrases, Some(weights), fetch, skip)?;
    let mut chunk = conn.prepare_cached(
        "SELECT c.file_id, f.path, c.start_line, c.end_line, c.symbol, c.kind
         FROM chunks c JOIN files f ON f.id = c.file_id WHERE c.id = ?1",
    )?;
    type Row = (i64, String, i64, i64, Option<String>, Option<String>);
    let mut rows: Vec<(f64, Row)> = Vec::with_capacity(ranked.len());
    for (rank, id) in ranked {
        if let Some(row) = chunk
            .query_row(params![id], |r| TryFrom::try_from(r))
            .optional()?
        {
            rows.push((rank, row));
        }
    }
    let best = rows.iter().map(|r| -r.0).fold(0.0_f64, f64::max);
    let mut found: Vec<(f64, Cand)> = Vec::with_capacity(rows.len());
    for (rank, (file_id, path, start, end, symbol, kind)) in rows {
        if !filter(&path) {
            continue;
        }
        found.push((
            rank,
            Cand {
                file_id,
                path,
                start: start.max(1) as usize,
                end: end.max(1) as usize,
                symbol,
                kind,
                text: if best > 0.0 { -rank / best } else { 0.0 },
                sym: 0.0,
                bonus: 0.0,
                why: Vec::new(),
            },
        ));
    }
    // Equal ranks in path order, not in row-id order (which depends on the build's history).
    found.sort_by(|a, b| {
        a.0.total_cmp(&b.0)
            .then_with(|| a.1.path.cmp(&b.1.path))
            .then(a.1.start.cmp(&b.1.start))
    });
    out.extend(found.into_iter().take(fetch).map(|(_, c)| c));
    Ok(())
}

/// Whole-file BM25 (`files_fts`) of the OR of `phrases`: the best `fetch` files (ties at
/// the cut taken in), each with its score relative to the best file's (1.0 for the best)
/// and its path.
pub(super) fn file_text_scores(
    conn: &Connection,
    phrases: &[String],
    fetch: usize,
    filter: &dyn Fn(&str) -> bool,
    skip: &HashSet<i64>,
) -> Result<Vec<(i64, String, f64)>, IndexError> {
    let ranked = ranked_or(conn, "files_fts", phrases, None, fetch, skip)?;
    let mut file = conn.prepare_cached("SELECT path FROM files WHERE id = ?1")?;
    let mut rows: Vec<(f64, i64, String)> = Vec::with_capacity(ranked.len());
    for (rank, id) in ranked {
        if let Some(path) = file
            .query_row(params![id], |r| r.get::<_, String>(0))
            .optional()?
        {
            rows.push((rank, id, path));
        }
    }
    rows.retain(|r| filter(&r.2));
    // Equal ranks in path order (row ids depend on the build's history).
    rows.sort_by(|a, b| a.0.total_cmp(&b.0).then_with(|| a.2.cmp(&b.2)));
    let best = rows.iter().map(|r| -r.0).fold(0.0_f64, f64::max);
    Ok(rows
        .into_iter()
        .map(|(rank, id, path)| {
            let s = if best > 0.0 { -rank / best } else { 0.0 };
            (id, path, s)
        })
        .collect())
}

/// A capitalised word opening a sentence (`Emit a warning …`) matching a definition of
/// another spelling (`emit`): mostly English, so a fraction of a name match.
const SENTENCE_CAPITAL: f64 = 0.4;

/// The most rows a ranked lookup reads to take in every row tied at its cut.
const TIE_CAP: usize = 5_000;

/// The rows of a ranked lookup (`run(limit)`: at most `limit` rows, best rank first) down to
/// the `want`-th row's rank, ties at the cut included (up to [`TIE_CAP`] rows). Row ids
/// depend on the order files were indexed in, so a lookup that stops inside a run of equal
/// ranks would keep different rows after an incremental refresh than after a fresh build;
/// the caller orders the tied rows by content (path, line) and keeps `want`.
pub(super) fn with_ties<T>(
    want: usize,
    rank: impl Fn(&T) -> f64,
    mut run: impl FnMut(usize) -> Result<Vec<T>, IndexError>,
) -> Result<Vec<T>, IndexError> {
    let want = want.max(1);
    let mut limit = want + 16;
    loop {
        let mut rows = run(limit)?;
        if rows.len() <= want {
            return Ok(rows);
        }
        let cut = rank(&rows[want - 1]);
        let complete = rows.len() < limit || rank(&rows[rows.len() - 1]) != cut;
        if complete || limit >= TIE_CAP {
            rows.retain(|r| rank(r) <= cut);
            return Ok(rows);
        }
        limit = (limit * 4).min(TIE_CAP);
    }
}

/// Whether two lowercase words are the same word for matching names to queries: equal,
/// equal after dropping a common suffix (parse/parser/parsing), or the shorter (5+ letters)
/// begins the longer (config/configuration).
pub(super) fn word_match(a: &str, b: &str) -> bool {
    if a == b || stem(a) == stem(b) {
        return true;
    }
    let (short, long) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    short.len() >= 5 && long.starts_with(short)
}

/// Symbol-name candidates: exact, prefix and word-coverage matches.
pub(super) fn symbol_candidates(
    conn: &Connection,
    terms: &QueryTerms,
    selective: &[String],
    filter: &dyn Fn(&str) -> bool,
    out: &mut Vec<Cand>,
) -> Result<(), IndexError> {
    const SELECT: &str =
        "SELECT s.file_id, f.path, s.start_line, s.end_line, s.qualified, s.kind, s.name, s.depth
         FROM symbols s JOIN files f ON f.id = s.file_id";
    type Row = (i64, String, i64, i64, String, String, String, i64);
    let read = |r: &rusqlite::Row<'_>| -> rusqlite::Result<Row> { TryFrom::try_from(r) };
    let mut push = |row: Row, score: f64, why: String| {
        let (file_id, path, start, end, qualified, kind, _, depth) = row;
        if !filter(&path) {
            return;
        }
        // Top-level definitions a little over nested ones, definitions over impl blocks.
        let mut s = score * if depth == 0 { 1.0 } else { 0.93 };
        if kind == "impl" {
            s *= 0.8;
        }

        // A large definition is shown by its head, not its whole span.
        let (start, end) = (start.max(1) as usize, end.max(1) as usize);
        let end = end.min(start + MAX_SYMBOL_HIT_LINES);
        out.push(Cand {
            file_id,
            path,
            start,
            end,
            symbol: Some(qualified),
            kind: Some(kind),
            text: 0.0,
            sym: s,
            bonus: 0.0,
            why: vec![why],
        });
    };
    let mut exact = conn.prepare_cached(&format!(
        "{SELECT} WHERE s.name_lower = ?1 ORDER BY f.path, s.start_line LIMIT 40"
    ))?;
    // The 20 first names of a prefix in name order, then path order: the 20th name bounds the
    // range (an index walk), so only names up to it are sorted.
    let mut nth_name = conn.prepare_cached(
        "SELECT name_lower FROM symbols WHERE name_lower >= ?1 AND name_lower < ?2
         ORDER BY name_lower LIMIT 1 OFFSET 19",
    )?;
    let mut prefix = conn.prepare_cached(&format!(
        "{SELECT} WHERE s.name_lower >= ?1 AND s.name_lower <= ?2
         ORDER BY s.name_lower, f.path, s.start_line LIMIT 20"
    ))?;
    for ident in &terms.identifiers {
        let lower = ident.to_lowercase();
        let capital = terms.sentence_capitals.contains(ident);
        for row in exact.query_map([&lower], read)? {
            let row = row?;
            let case_exact = row.6 == *ident;
            // `Emit a warning …` names no `emit`: a capitalised word opening a sentence
            // counts only in full for a definition spelled exactly so.
            let score = match (case_exact, capital) {
                (true, _) => 1.0,
                (false, false) => 0.9,
                (false, true) => SENTENCE_CAPITAL,
            };
            push(row, score, format!("name is `{ident}`"));
        }
        if lower.chars().count() >= 4 && !capital {
            let hi = format!("{lower}\u{10FFFF}");
            let last: String = nth_name
                .query_row(params![lower, hi], |r| r.get(0))
                .optional()?
                .unwrap_or(hi);
            for row in prefix.query_map(params![lower, last], read)? {
                let row = row?;
                if row.6.to_lowercase() == lower {
                    continue;
                }
                let ratio = lower.len() as f64 / row.6.len().max(1) as f64;
                push(
                    row,
                    0.45 + 0.3 * ratio,
                    format!("name starts with `{ident}`"),
                );
            }
        }
    }
    if let Some(fts) = fts_or(selective) {
        let mut ranked = conn.prepare_cached(
            "SELECT m.rank, s.file_id, f.path, s.start_line, s.end_line, s.qualified, s.kind,
                    s.name, s.depth
             FROM (SELECT rowid, rank FROM symbols_fts WHERE symbols_fts MATCH ?1
                   ORDER BY rank LIMIT ?2) m
             JOIN symbols s ON s.id = m.rowid JOIN files f ON f.id = s.file_id ORDER BY m.rank",
        )?;
        let mut rows: Vec<(f64, Row)> = with_ties(
            200,
            |r: &(f64, Row)| r.0,
            |limit| {
                ranked
                    .query_map(params![fts, limit as i64], |r| {
                        Ok((
                            r.get(0)?,
                            (
                                r.get(1)?,
                                r.get(2)?,
                                r.get(3)?,
                                r.get(4)?,
                                r.get(5)?,
                                r.get(6)?,
                                r.get(7)?,
                                r.get(8)?,
                            ),
                        ))
                    })?
                    .collect::<Result<_, _>>()
                    .map_err(IndexError::from)
            },
        )?;
        rows.sort_by(|a, b| {
            a.0.total_cmp(&b.0)
                .then_with(|| a.1.1.cmp(&b.1.1))
                .then(a.1.2.cmp(&b.1.2))
        });
        rows.truncate(200);
        let qwords: Vec<&str> = terms.words.iter().map(String::as_str).collect();
        for (_, row) in rows {
            let parts = split_identifier(&row.6);
            if parts.is_empty() {
                continue;
            }
            let matched: Vec<&String> = parts
                .iter()
                .filter(|p| qwords.iter().any(|q| word_match(p, q)))
                .collect();
            if matched.is_empty() {
                continue;
            }
            let q_hit = qwords
                .iter()
                .filter(|q| parts.iter().any(|p| word_match(p, q)))
                .count();
            let coverage = matched.len() as f64 / parts.len() as f64;
            let q_cov = q_hit as f64 / qwords.len().max(1) as f64;
            let score = 0.8 * coverage * q_cov;
            if score < 0.2 {
                continue;
            }
            let words: Vec<&str> = matched.iter().map(|s| s.as_str()).collect();
            push(row, score, format!("name words: {}", words.join(", ")));
        }
    }
    Ok(())
}

/// How many files the path BM25 contributes.
const PATH_CANDIDATES: usize = 60;

/// Path scores per file (0–1): BM25 over path words, normalised, and path-like tokens
/// matched by suffix (1.0).
pub(super) fn path_candidates(
    conn: &Connection,
    terms: &QueryTerms,
    filter: &dyn Fn(&str) -> bool,
    out: &mut HashMap<i64, (f64, String)>,
) -> Result<(), IndexError> {
    if let Some(fts) = fts_or(&terms.words) {
        let mut stmt = conn.prepare_cached(
            "SELECT p.rowid, p.rank, f.path FROM
             (SELECT rowid, rank FROM paths_fts WHERE paths_fts MATCH ?1 ORDER BY rank LIMIT ?2) p
             JOIN files f ON f.id = p.rowid ORDER BY p.rank",
        )?;
        let mut rows: Vec<(i64, f64, String)> = with_ties(
            PATH_CANDIDATES,
            |r: &(i64, f64, String)| r.1,
            |limit| {
                stmt.query_map(params![fts, limit as i64], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?))
                })?
                .collect::<Result<_, _>>()
                .map_err(IndexError::from)
            },
        )?;
        rows.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.2.cmp(&b.2)));
        rows.truncate(PATH_CANDIDATES);
        let best = rows.iter().map(|r| -r.1).fold(0.0_f64, f64::max);
        for (id, rank, path) in rows {
            if best > 0.0 && filter(&path) {
                out.insert(id, (0.8 * -rank / best, path));
            }
        }
    }
    let mut by_name = conn.prepare_cached("SELECT id, path FROM files WHERE name = ?1")?;
    for p in &terms.paths {
        let p = p.trim_start_matches("./");
        let name = p.rsplit('/').next().unwrap_or(p);
        let rows: Vec<(i64, String)> = by_name
            .query_map([name], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<Result<_, _>>()?;
        for (id, path) in rows {
            if (path == p || path.ends_with(&format!("/{p}"))) && filter(&path) {
                out.insert(id, (1.0, path));
            }
        }
    }
    Ok(())
}

/// Merges overlapping candidates of one file into one location (the stronger one's span),
/// keeping every signal's best score and every reason.
pub(super) fn merge(mut cands: Vec<Cand>) -> Vec<Cand> {
    cands.sort_by(|a, b| {
        (b.text + b.sym)
            .total_cmp(&(a.text + a.sym))
            .then_with(|| a.path.cmp(&b.path))
            .then(a.start.cmp(&b.start))
    });
    let mut out: Vec<Cand> = Vec::new();
    let mut by_file: HashMap<i64, Vec<usize>> = HashMap::new();
    for c in cands {
        let slot = by_file.entry(c.file_id).or_default();
        let overlapping = slot.iter().copied().find(|&i| {
            let o = &out[i];
            // Same definition, or one span inside the other.
            (o.start <= c.start && c.end <= o.end) || (c.start <= o.start && o.end <= c.end)
        });
        match overlapping {
            Some(i) => {
                let o = &mut out[i];
                o.text = o.text.max(c.text);
                o.sym = o.sym.max(c.sym);
                o.bonus = o.bonus.max(c.bonus);
                if o.symbol.is_none() {
                    o.symbol = c.symbol;
                    o.kind = c.kind;
                }
                o.why.extend(c.why);
            }
            None => {
                slot.push(out.len());
                out.push(c);
            }
        }
    }
    out
}

/// Boosts locations in files linked by imports to the strongest files; for file searches,
/// adds linked files that did not match on their own. A linked file gains `weight` times its
/// strongest link's score relative to the best file's.
pub(super) fn graph_boost(
    conn: &Connection,
    scored: &mut Vec<(f64, Cand)>,
    add_files: bool,
    filter: &dyn Fn(&str) -> bool,
    weight: f64,
) -> Result<(), IndexError> {
    let mut best: HashMap<i64, (f64, String)> = HashMap::new();
    for (s, c) in scored.iter() {
        let e = best.entry(c.file_id).or_insert((0.0, c.path.clone()));
        e.0 = e.0.max(*s);
    }
    let mut seeds: Vec<(i64, f64, String)> = best
        .iter()
        .map(|(id, (s, p))| (*id, *s, p.clone()))
        .collect();
    seeds.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.2.cmp(&b.2)));
    seeds.truncate(GRAPH_SEEDS);
    let Some(top) = seeds.first().map(|s| s.1).filter(|t| *t > 0.0) else {
        return Ok(());
    };
    let mut out_edges = conn.prepare_cached(
        "SELECT DISTINCT f.id, f.path FROM imports i JOIN files f ON f.path = i.target
         WHERE i.file_id = ?1 ORDER BY f.path LIMIT 40",
    )?;
    let mut in_edges = conn.prepare_cached(
        "SELECT DISTINCT f.id, f.path FROM imports i JOIN files f ON f.id = i.file_id
         WHERE i.target = ?1 ORDER BY f.path LIMIT 40",
    )?;
    let mut boost: HashMap<i64, (f64, String, String)> = HashMap::new();
    for (id, score, path) in &seeds {
        let weight = score / top;
        let outs: Vec<(i64, String)> = out_edges
            .query_map([id], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<Result<_, _>>()?;
        let ins: Vec<(i64, String)> = in_edges
            .query_map([path], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<Result<_, _>>()?;
        for (nid, npath, why) in outs
            .into_iter()
            .map(|(i, p)| (i, p, format!("imported by {path}")))
            .chain(
                ins.into_iter()
                    .map(|(i, p)| (i, p, format!("imports {path}"))),
            )
        {
            if nid == *id {
                continue;
            }
            let e = boost.entry(nid).or_insert((0.0, npath, why.clone()));
            if weight > e.0 {
                e.0 = weight;
                e.2 = why;
            }
        }
    }
    for (s, c) in scored.iter_mut() {
        if let Some((b, _, why)) = boost.get(&c.file_id) {
            *s += b * weight;
            c.why.push(why.clone());
        }
    }
    if add_files {
        for (fid, (b, path, why)) in boost {
            if !best.contains_key(&fid) && filter(&path) {
                scored.push((
                    b * weight * 0.8,
                    Cand {
                        file_id: fid,
                        path,
                        start: 1,
                        end: 1,
                        symbol: None,
                        kind: None,
                        text: 0.0,
                        sym: 0.0,
                        bonus: 0.0,
                        why: vec![why],
                    },
                ));
            }
        }
    }
    Ok(())
}
