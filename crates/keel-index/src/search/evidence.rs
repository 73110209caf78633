//! Structural evidence from a bug report, per file: the files its traceback frames name
//! (innermost first), the files raising its error messages, the modules its dotted names
//! point to, the files defining the identifiers of its snippets, and the files defining or
//! reading the config keys and options it names. Each piece adds to a
//! file's score and says why; the definitions found become locations too.

use std::collections::{BTreeMap, BTreeSet};

use rusqlite::{Connection, params};

use super::report::Report;
use super::snippet::FileLines;
use super::*;
use crate::pathrole::PathRole;

/// Innermost project frame's weight; each frame further out keeps `FRAME_DECAY` of the last.
const W_FRAME: f64 = 2.0;
const FRAME_DECAY: f64 = 0.6;
/// A frame's function defined in the frame's file.
const W_FRAME_FUNCTION: f64 = 0.5;
/// A file whose code holds an error message of the report, near a raise/throw/panic.
const W_RAISE: f64 = 1.6;
/// …and one that holds it elsewhere.
const W_MESSAGE: f64 = 0.9;
/// Messages found in more files than this are too common to point anywhere.
const MESSAGE_MAX_FILES: usize = 12;
/// A dotted name's module (`pvlib.iam` of `pvlib.iam.physical`), with its member defined there.
const W_MODULE_MEMBER: f64 = 1.3;
const W_MODULE: f64 = 0.8;
/// A definition of an identifier from a code span or the title / from a snippet / an error type.
const W_SPAN_DEF: f64 = 1.0;
const W_BLOCK_DEF: f64 = 0.45;
const W_ERROR_KIND_DEF: f64 = 0.35;
/// Identifiers defined in more files than this are too common to point anywhere.
const DEF_MAX_FILES: usize = 10;
/// The most identifier lookups one report makes.
const MAX_IDENT_LOOKUPS: usize = 48;
/// The modules a test in the traceback imports, per frame weight.
const W_TESTED: f64 = 0.4;
/// A file the report names by path (`jsonrep.py`, `src/app/models.py`).
const W_PATH_MENTION: f64 = 1.5;
/// An identifier with no definition, mentioned in few files (an alias, a constant).
const W_MENTION: f64 = 0.4;
const MENTION_MAX_FILES: usize = 6;
/// A single lowercase word (`fix`, `parse`) is as often English as a name.
const PLAIN_WORD: f64 = 0.4;
/// Locations found by evidence enter the location ranking at this share of their weight
/// (the file already has the evidence).
pub(super) const LOCATION_SHARE: f64 = 0.35;
/// The most one file gains from definitions (a snippet naming ten methods of one class).
const DEF_CAP: f64 = 2.0;
/// What a definition that forwards to a namesake keeps of its weight.
const FORWARDER: f64 = 0.5;

/// Evidence for one file.
#[derive(Debug, Clone, Default)]
pub(super) struct FileEvidence {
    pub path: String,
    pub score: f64,
    /// Score from definitions (capped separately).
    pub defs: f64,
    /// Whole-file BM25 over the best file's (0–1).
    pub text_share: f64,
    pub why: Vec<String>,
}

/// What the report's structure says: per-file scores and the locations it names.
#[derive(Debug, Default)]
pub(super) struct Evidence {
    pub files: BTreeMap<i64, FileEvidence>,
    pub locations: Vec<Cand>,
}

impl Evidence {
    pub(super) fn add(&mut self, file_id: i64, path: &str, score: f64, why: String) {
        let e = self.files.entry(file_id).or_insert_with(|| FileEvidence {
            path: path.to_string(),
            ..FileEvidence::default()
        });
        e.score += score;
        if !e.why.contains(&why) {
            e.why.push(why);
        }
    }

    fn add_def(&mut self, file_id: i64, path: &str, score: f64, why: String) {
        let e = self.files.entry(file_id).or_insert_with(|| FileEvidence {
            path: path.to_string(),
            ..FileEvidence::default()
        });
        let room = (DEF_CAP - e.defs).max(0.0);
        let s = score.min(room);
        e.defs += s;
        e.score += s;
        if s > 0.0 && !e.why.contains(&why) && e.why.len() < 6 {
            e.why.push(why);
        }
    }

    /// Whole-file BM25: `share` is the file's score over the best file's (0–1); the ranking
    /// adds it in proportion to the best result's score, so it weighs the same beside strong
    /// and weak structural evidence. `trust` (0–1) scales what it adds, not what it says
    /// (the reason is given from a share of 0.5 on).
    pub(super) fn add_text(&mut self, file_id: i64, path: &str, share: f64, trust: f64) {
        let e = self.files.entry(file_id).or_insert_with(|| FileEvidence {
            path: path.to_string(),
            ..FileEvidence::default()
        });
        e.text_share = share * trust;
        if share >= 0.5 {
            e.why
                .push("the whole file matches the report's words".to_string());
        }
    }

    /// A file's whole-file BM25 share (0 when none).
    pub fn text_share(&self, file_id: i64) -> f64 {
        self.files.get(&file_id).map_or(0.0, |e| e.text_share)
    }

    /// A file's evidence score (0 when none).
    pub fn score(&self, file_id: i64) -> f64 {
        self.files.get(&file_id).map_or(0.0, |e| e.score)
    }
}

/// `/home/u/.venv/lib/site-packages/pkg/mod.py` → `home/u/.venv/lib/site-packages/pkg/mod.py`
/// with `/` separators and no `./`, `file://`, `webpack:///` prefixes.
fn normalize_frame_path(p: &str) -> String {
    let p = p.replace('\\', "/");
    let p = p
        .strip_prefix("webpack:///")
        .or_else(|| p.strip_prefix("file://"))
        .unwrap_or(&p);
    p.split('/')
        .filter(|s| !s.is_empty() && *s != ".")
        .collect::<Vec<_>>()
        .join("/")
}

/// Indexed files a printed path refers to: the file whose path shares the longest run of
/// trailing segments with it — the whole indexed path (`/home/u/app/src/x/y.py` →
/// `src/x/y.py`), or at least the package directory and the file (an installed package:
/// `site-packages/x/y.py` → `src/x/y.py`).
fn files_by_suffix(
    conn: &Connection,
    path: &str,
    filter: &dyn Fn(&str) -> bool,
) -> Result<Vec<(i64, String)>, IndexError> {
    let path = normalize_frame_path(path);
    let segs: Vec<&str> = path.split('/').collect();
    let name = segs.last().copied().unwrap_or("");
    let mut stmt =
        conn.prepare_cached("SELECT id, path FROM files WHERE name = ?1 ORDER BY path")?;
    let rows: Vec<(i64, String)> = stmt
        .query_map([name], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<Result<_, _>>()?;
    let mut best = 0usize;
    let mut out = Vec::new();
    for (id, p) in rows {
        if !filter(&p) {
            continue;
        }
        let psegs: Vec<&str> = p.split('/').collect();
        let common = psegs
            .iter()
            .rev()
            .zip(segs.iter().rev())
            .take_while(|(a, b)| a == b)
            .count();
        let whole = common == psegs.len();
        // A bare file name (`jsonrep.py`) names every file so called.
        let bare = segs.len() == 1 && common == 1;
        if !(whole || bare || common >= 2) {
            continue;
        }
        match common.cmp(&best) {
            std::cmp::Ordering::Greater => {
                best = common;
                out = vec![(id, p)];
            }
            std::cmp::Ordering::Equal => out.push((id, p)),
            std::cmp::Ordering::Less => {}
        }
    }
    Ok(out)
}

/// The indexed files whose path is `candidate` or ends with `/candidate` (a clean relative
/// path: no `.`, `..` or empty segments), in path order — the files [`files_by_suffix`]
/// finds for it that hold all of it — looked up by file name and parent directory.
fn files_ending_with(
    conn: &Connection,
    candidate: &str,
    filter: &dyn Fn(&str) -> bool,
) -> Result<Vec<(i64, String)>, IndexError> {
    let (dir, name) = crate::imports::split_path(candidate);
    let rows: Vec<(i64, String)> = if dir.is_empty() {
        conn.prepare_cached("SELECT id, path FROM files WHERE name = ?1 ORDER BY path")?
            .query_map([name], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<Result<_, _>>()?
    } else {
        let parent = crate::imports::split_path(dir).1;
        conn.prepare_cached(
            "SELECT id, path FROM files WHERE name = ?1 AND dir_name = ?2 ORDER BY path",
        )?
        .query_map([name, parent], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<Result<_, _>>()?
    };
    let tail = format!("/{candidate}");
    Ok(rows
        .into_iter()
        .filter(|(_, p)| (p == candidate || p.ends_with(&tail)) && filter(p))
        .collect())
}

pub(super) type SymRow = (usize, usize, String, String);

/// The first definition named `name` in a file (top-level first).
fn symbol_in_file(
    conn: &Connection,
    file_id: i64,
    name: &str,
) -> Result<Option<SymRow>, IndexError> {
    let mut stmt = conn.prepare_cached(
        "SELECT start_line, end_line, qualified, kind FROM symbols
         WHERE file_id = ?1 AND name = ?2 ORDER BY depth, start_line LIMIT 1",
    )?;
    let mut rows = stmt.query_map(params![file_id, name], |r| {
        Ok((
            r.get::<_, i64>(0)?.max(1) as usize,
            r.get::<_, i64>(1)?.max(1) as usize,
            r.get::<_, String>(2)?,
            r.get::<_, String>(3)?,
        ))
    })?;
    Ok(rows.next().transpose()?)
}

pub(super) fn location(
    file_id: i64,
    path: &str,
    sym: SymRow,
    score: f64,
    bonus: f64,
    why: String,
) -> Cand {
    let (start, end, qualified, kind) = sym;
    Cand {
        file_id,
        path: path.to_string(),
        start,
        end: end.min(start + MAX_SYMBOL_HIT_LINES),
        symbol: Some(qualified),
        kind: Some(kind),
        text: 0.0,
        sym: score,
        bonus,
        why: vec![why],
    }
}

/// Literal runs of three or more words in an error message, longest first: the part a
/// raise site's string holds (`Dropped elements in sequence matching! 'select …' != ';'` →
/// `dropped elements in sequence matching`).
pub(super) fn message_fragments(message: &str) -> Vec<Vec<String>> {
    let mut out: Vec<Vec<String>> = Vec::new();
    let mut in_quote: Option<char> = None;
    let mut run: Vec<String> = Vec::new();
    let mut word = String::new();
    let flush_run = |run: &mut Vec<String>, out: &mut Vec<Vec<String>>| {
        if run.len() >= 3 && run.iter().any(|w| w.len() >= 4) && !out.contains(run) {
            out.push(std::mem::take(run));
        }
        run.clear();
    };
    for c in message.chars().chain(std::iter::once('\n')) {
        if let Some(q) = in_quote {
            if c == q {
                in_quote = None;
            }
            continue;
        }
        if c.is_alphabetic() {
            word.push(c.to_ascii_lowercase());
            continue;
        }
        if !word.is_empty() {
            run.push(std::mem::take(&mut word));
        }
        match c {
            ' ' => {}
            '\'' | '"' | '`' => {
                flush_run(&mut run, &mut out);
                in_quote = Some(c);
            }
            _ => flush_run(&mut run, &mut out),
        }
    }
    out.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
    out.truncate(3);
    out
}

/// Gathers the evidence of a long report.
pub(super) fn gather(
    conn: &Connection,
    root: &std::path::Path,
    files: &mut FileLines,
    report: &Report,
    paths: &[String],
    filter: &dyn Fn(&str) -> bool,
) -> Result<Evidence, IndexError> {
    let mut ev = Evidence::default();
    let mut named = BTreeSet::new();
    // A traceback frame's file is weighed by its frame (innermost first), not again as a
    // file the report names: every frame printing its path would flatten that order.
    let frame_paths: BTreeSet<String> = report
        .frames
        .iter()
        .map(|f| normalize_frame_path(&f.path))
        .collect();
    for p in paths.iter().take(20) {
        if frame_paths.contains(&normalize_frame_path(p)) {
            continue;
        }
        let files = files_by_suffix(conn, p, filter)?;
        // `__init__.py` names no file in particular.
        if files.len() > 3 {
            continue;
        }
        for (id, path) in files {
            if named.insert(id) {
                ev.add(
                    id,
                    &path,
                    W_PATH_MENTION,
                    format!("named by the report (`{p}`)"),
                );
            }
        }
    }
    frames(conn, report, filter, &mut ev)?;
    messages(conn, report, filter, &mut ev)?;
    dotted(conn, report, filter, &mut ev)?;
    definitions(conn, root, files, report, filter, &mut ev)?;
    super::runtime::gather(conn, report, filter, &mut ev)?;
    super::config_keys::matches(conn, root, files, &report.config_keys, filter, &mut ev)?;
    Ok(ev)
}

fn frames(
    conn: &Connection,
    report: &Report,
    filter: &dyn Fn(&str) -> bool,
    ev: &mut Evidence,
) -> Result<(), IndexError> {
    let mut matched = 0usize;
    let mut seen = BTreeSet::new();
    for frame in &report.frames {
        let files = files_by_suffix(conn, &frame.path, filter)?;
        if files.is_empty() {
            continue;
        }
        let weight = W_FRAME * FRAME_DECAY.powi(matched as i32);
        matched += 1;
        let share = 1.0 / files.len() as f64;
        for (id, path) in files {
            if PathRole::of(&path) == PathRole::Test {
                tested_modules(conn, id, &path, weight * share, filter, ev)?;
            }
            let at = frame.line.map_or(String::new(), |l| format!(":{l}"));
            let func = frame
                .function
                .as_deref()
                .map_or(String::new(), |f| format!(" in {f}"));
            let depth = if matched == 1 { " (innermost)" } else { "" };
            // Each file counts once per report, at its innermost frame.
            if seen.insert(id) {
                ev.add(
                    id,
                    &path,
                    weight * share,
                    format!("traceback frame {path}{at}{func}{depth}"),
                );
            } else {
                ev.add(
                    id,
                    &path,
                    weight * share * 0.3,
                    format!("traceback frame {path}{at}{func}"),
                );
            }
            if let Some(f) = &frame.function
                && let Some(sym) = symbol_in_file(conn, id, f)?
            {
                ev.add(
                    id,
                    &path,
                    W_FRAME_FUNCTION * weight / W_FRAME * share,
                    format!("defines `{f}` from the traceback"),
                );
                ev.locations.push(location(
                    id,
                    &path,
                    sym,
                    weight * share * LOCATION_SHARE,
                    // The frame's function is where to look first.
                    weight * share * (1.0 - LOCATION_SHARE) * W_SYMBOL,
                    format!("traceback frame `{f}`"),
                ));
            }
        }
    }
    Ok(())
}

/// A test the traceback runs through points at the modules it imports (the code under
/// test): each gets a share of the frame's weight.
fn tested_modules(
    conn: &Connection,
    test_id: i64,
    test_path: &str,
    weight: f64,
    filter: &dyn Fn(&str) -> bool,
    ev: &mut Evidence,
) -> Result<(), IndexError> {
    let mut stmt = conn.prepare_cached(
        "SELECT DISTINCT f.id, f.path FROM imports i JOIN files f ON f.path = i.target
         WHERE i.file_id = ?1 ORDER BY f.path LIMIT 12",
    )?;
    let targets: Vec<(i64, String)> = stmt
        .query_map([test_id], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<Result<_, _>>()?;
    let targets: Vec<(i64, String)> = targets
        .into_iter()
        .filter(|(_, p)| filter(p) && PathRole::of(p) == PathRole::Source)
        .collect();
    if targets.is_empty() {
        return Ok(());
    }
    let each = W_TESTED * weight / (targets.len() as f64).sqrt();
    for (id, path) in targets {
        ev.add(
            id,
            &path,
            each,
            format!("imported by {test_path} (a test in the traceback)"),
        );
    }
    Ok(())
}

fn messages(
    conn: &Connection,
    report: &Report,
    filter: &dyn Fn(&str) -> bool,
    ev: &mut Evidence,
) -> Result<(), IndexError> {
    let mut stmt = conn.prepare_cached(
        "SELECT c.file_id, f.path, c.start_line, c.end_line, c.symbol, c.kind
         FROM (SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ?1 LIMIT 2000) m
         JOIN chunks c ON c.id = m.rowid JOIN files f ON f.id = c.file_id
         ORDER BY f.path, c.start_line LIMIT 60",
    )?;
    type Row = (i64, String, i64, i64, Option<String>, Option<String>);
    // The chunks (file, path, span, symbol, kind) whose body matches an FTS query.
    let mut chunk_rows = |query: &str| -> rusqlite::Result<Vec<Row>> {
        stmt.query_map([query], |r| TryFrom::try_from(r))?.collect()
    };
    let mut done = BTreeSet::new();
    for err in report.errors.iter().take(6) {
        // The interpreter's own wording ("object has no attribute") is raised nowhere in
        // the project; the names it quotes are weighed in `runtime`.
        if super::runtime::runtime_names(&err.message).is_some() {
            continue;
        }
        for whole in message_fragments(&err.message) {
            // The whole run, or (when the code interpolates a value the report shows, as
            // in `f"no {name} left"`) its four-word windows.
            let mut tries = vec![whole.clone()];
            if whole.len() > 4 {
                // At most five windows, spread over the run.
                let windows: Vec<Vec<String>> = whole.windows(4).map(<[String]>::to_vec).collect();
                let step = windows.len().div_ceil(5).max(1);
                tries.extend(windows.into_iter().step_by(step));
            }
            // Each file is credited once per run (by its longest matching part).
            let mut credited = BTreeSet::new();
            for (n, frag) in tries.into_iter().enumerate() {
                if !done.insert(frag.clone()) {
                    continue;
                }
                let phrase = format!("body : \"{}\"", frag.join(" "));
                let rows: Vec<Row> = chunk_rows(&phrase)?;
                let files: BTreeSet<i64> =
                    rows.iter().filter(|r| filter(&r.1)).map(|r| r.0).collect();
                if files.is_empty() || files.len() > MESSAGE_MAX_FILES {
                    continue;
                }
                let raising = format!(
                    "{phrase} AND body : (\"raise\" OR \"throw\" OR \"panic\" OR \"errorf\" OR \"error\" OR \"exception\"{})",
                    err.kind
                        .as_deref()
                        .map_or(String::new(), |k| format!(" OR \"{}\"", k.replace('"', "")))
                );
                let raise_rows: Vec<Row> = chunk_rows(&raising)?;
                let raise_files: BTreeSet<i64> = raise_rows.iter().map(|r| r.0).collect();
                let share = 1.0 / (files.len() as f64).sqrt();
                let text = frag.join(" ");
                for (fid, path, start, end, symbol, kind) in rows {
                    if !filter(&path) {
                        continue;
                    }
                    let raises = raise_files.contains(&fid);
                    let part = if n == 0 { 1.0 } else { 0.8 };
                    let w = if raises { W_RAISE } else { W_MESSAGE } * share * part;
                    let why = if raises {
                        format!("raises the reported error (\"{text}\")")
                    } else {
                        format!("holds the reported message (\"{text}\")")
                    };
                    if credited.insert(fid) {
                        ev.add(fid, &path, w, why.clone());
                    }
                    ev.locations.push(Cand {
                        file_id: fid,
                        path,
                        start: start.max(1) as usize,
                        end: end.max(1) as usize,
                        symbol,
                        kind,
                        text: 0.0,
                        sym: w * LOCATION_SHARE,
                        bonus: 0.0,
                        why: vec![why],
                    });
                }
            }
        }
    }
    Ok(())
}

const MODULE_SUFFIXES: &[&str] = &[
    ".py",
    "/__init__.py",
    ".rs",
    "/mod.rs",
    ".go",
    ".js",
    ".ts",
    ".tsx",
    "/index.js",
    "/index.ts",
    ".rb",
    ".java",
];

pub(super) fn dotted(
    conn: &Connection,
    report: &Report,
    filter: &dyn Fn(&str) -> bool,
    ev: &mut Evidence,
) -> Result<(), IndexError> {
    for parts in report.dotted.iter().take(40) {
        let parts: Vec<&str> = parts
            .iter()
            .map(String::as_str)
            .filter(|p| !matches!(*p, "crate" | "self" | "super" | "this"))
            .collect();
        'outer: for k in (1..=parts.len()).rev() {
            let module = parts[..k].join("/");
            let member = parts.get(k).copied();
            for suffix in MODULE_SUFFIXES {
                let candidate = format!("{module}{suffix}");
                for (id, path) in files_ending_with(conn, &candidate, filter)? {
                    let dotted_name = parts.join(".");
                    match member {
                        Some(m) => {
                            if let Some(sym) = symbol_in_file(conn, id, m)? {
                                ev.add(
                                    id,
                                    &path,
                                    W_MODULE_MEMBER,
                                    format!("module of `{dotted_name}`"),
                                );
                                ev.locations.push(location(
                                    id,
                                    &path,
                                    sym,
                                    W_MODULE_MEMBER * LOCATION_SHARE,
                                    0.0,
                                    format!("`{dotted_name}`"),
                                ));
                            } else if k >= 2 {
                                ev.add(id, &path, W_MODULE, format!("module of `{dotted_name}`"));
                            } else {
                                continue;
                            }
                        }
                        None if k >= 2 => {
                            ev.add(id, &path, W_MODULE, format!("module `{dotted_name}`"))
                        }
                        None => continue,
                    }
                    break 'outer;
                }
            }
        }
    }
    Ok(())
}

fn definitions(
    conn: &Connection,
    root: &std::path::Path,
    files_read: &mut FileLines,
    report: &Report,
    filter: &dyn Fn(&str) -> bool,
    ev: &mut Evidence,
) -> Result<(), IndexError> {
    let kinds: Vec<String> = report
        .errors
        .iter()
        .filter_map(|e| e.kind.clone())
        .collect();
    let mut looked = BTreeSet::new();
    let lists: [(&[String], f64, &str); 3] = [
        (&report.span_identifiers, W_SPAN_DEF, "named in the report"),
        (
            &report.block_identifiers,
            W_BLOCK_DEF,
            "used in the report's snippet",
        ),
        (&kinds, W_ERROR_KIND_DEF, "the reported error type"),
    ];
    for (idents, weight, said) in lists {
        for ident in idents.iter() {
            if looked.len() >= MAX_IDENT_LOOKUPS {
                return Ok(());
            }
            if !looked.insert(ident.to_lowercase()) {
                continue;
            }
            let rows = super::runtime::defs(conn, ident, filter)?;
            let files: BTreeSet<i64> = rows.iter().map(|r| r.0).collect();
            let plain = ident.chars().all(|c| c.is_ascii_lowercase());
            let weight = if plain { weight * PLAIN_WORD } else { weight };
            if files.is_empty() {
                if !plain {
                    mentions(conn, ident, weight, filter, ev)?;
                }
                continue;
            }
            if files.len() > DEF_MAX_FILES {
                continue;
            }
            let share = weight / (files.len() as f64).sqrt();
            let mut done = BTreeSet::new();
            for (fid, path, start, end, qualified, kind, name) in rows {
                if !done.insert(fid) {
                    continue;
                }
                let exact = if name == *ident { 1.0 } else { 0.8 };
                let mut s = share * exact;
                // Of several namesakes, one that only calls on to another (an API layer
                // handing `describe_tags` to its backend's `describe_tags`) is not where
                // the behaviour lives.
                if files.len() > 1
                    && forwarding::forwards(files_read, root, &path, start, end, &name)
                {
                    s *= FORWARDER;
                    ev.add(
                        fid,
                        &path,
                        0.0,
                        format!("`{name}` here calls on to a namesake"),
                    );
                }
                ev.add_def(fid, &path, s, format!("defines `{name}` ({said})"));
                let sym = (start.max(1) as usize, end.max(1) as usize, qualified, kind);
                ev.locations.push(location(
                    fid,
                    &path,
                    sym,
                    s * LOCATION_SHARE,
                    0.0,
                    format!("defines `{name}` ({said})"),
                ));
            }
        }
    }
    Ok(())
}

/// An identifier nothing defines (an alias, a constant, a generated name): the few files
/// that mention it get a little.
fn mentions(
    conn: &Connection,
    ident: &str,
    weight: f64,
    filter: &dyn Fn(&str) -> bool,
    ev: &mut Evidence,
) -> Result<(), IndexError> {
    let words: Vec<String> = ident
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect();
    if words.is_empty() {
        return Ok(());
    }
    let mut stmt = conn.prepare_cached(
        "SELECT DISTINCT f.id, f.path FROM
         (SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ?1 LIMIT 2000) m
         JOIN chunks c ON c.id = m.rowid JOIN files f ON f.id = c.file_id ORDER BY f.path LIMIT 40",
    )?;
    let phrase = format!("body : \"{}\"", words.join(" "));
    let files: Vec<(i64, String)> = stmt
        .query_map([&phrase], |r| {
            Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?))
        })?
        .collect::<Result<Vec<_>, _>>()?
        .into_iter()
        .filter(|(_, p)| filter(p))
        .collect();
    if files.is_empty() || files.len() > MENTION_MAX_FILES {
        return Ok(());
    }
    let share = W_MENTION * weight / (files.len() as f64).sqrt();
    for (id, path) in files {
        ev.add(id, &path, share, format!("mentions `{ident}`"));
    }
    Ok(())
}
