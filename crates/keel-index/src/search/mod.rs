//! Hybrid search: one ranked list of locations from four signals.
//!
//! 1. **Text**: BM25 over code chunks (FTS5; the definition name weighs most, then the body,
//!    then the camel-case words).
//! 2. **Symbol names**: exact (case-insensitive) and prefix matches of identifier-like query
//!    tokens, and how well a name's words (`parse_config` → parse, config) cover the query.
//! 3. **Paths**: BM25 over path words, and path-like tokens (`src/net.rs`) matched by suffix.
//! 4. **Graph proximity**: files imported by or importing the strongest hits get a boost.
//!
//! Hits overlapping in one file merge into one location carrying every reason. Each hit has
//! the file, line span, symbol, a short snippet read from the file, and why it matched.
//! [`Ranking::Bm25`] ranks by chunk-body BM25 alone (the baseline the benchmarks compare to).

use std::collections::{BTreeMap, HashMap, HashSet};

use globset::GlobMatcher;
use serde::Serialize;

use crate::pathrole::PathRole;
use crate::terms::{QueryTerms, fts_phrases};
use crate::{Index, IndexError};

mod bm25;
mod catalogs;
mod config_keys;
mod definitions;
mod evidence;
mod forwarding;
mod recall;
mod registry;
pub mod report;
mod runtime;
mod signals;
mod snippet;
mod words;

pub(crate) use catalogs::Catalogs;
use evidence::{Evidence, gather};
use report::Report;
use signals::*;
use snippet::*;
use words::{file_words, text_phrases};

/// What to search for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SearchKind {
    /// Code locations of any kind.
    #[default]
    Any,
    /// Definitions only.
    Symbol,
    /// Files (one hit per file).
    File,
}

impl SearchKind {
    /// `any`, `symbol` or `file`.
    pub fn parse(s: &str) -> Option<Self> {
        match s.to_ascii_lowercase().as_str() {
            "any" | "" => Some(Self::Any),
            "symbol" | "symbols" | "function" | "functions" | "definition" | "definitions" => {
                Some(Self::Symbol)
            }
            "file" | "files" | "path" => Some(Self::File),
            _ => None,
        }
    }
}

/// How to rank.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Ranking {
    /// All signals fused.
    #[default]
    Hybrid,
    /// BM25 over chunk bodies only (a baseline).
    Bm25,
}

/// A search request.
#[derive(Debug, Clone, Default)]
pub struct SearchQuery {
    pub text: String,
    pub kind: SearchKind,
    /// Only files matching this glob (`src/**/*.rs`, `*.py`: without `/` it matches the file
    /// name).
    pub path_glob: Option<String>,
    pub limit: usize,
    pub ranking: Ranking,
}

impl SearchQuery {
    /// A hybrid search for `text`, any kind, 10 hits.
    pub fn new(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            limit: 10,
            ..Self::default()
        }
    }
}

/// One result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Hit {
    pub path: String,
    pub start_line: usize,
    pub end_line: usize,
    /// The definition (qualified name) at this location, if any.
    pub symbol: Option<String>,
    /// Its kind (`function`, `class`, …).
    pub kind: Option<String>,
    /// A few lines of the location, each `(line number, text)`.
    pub snippet: Vec<(usize, String)>,
    pub score: f64,
    /// Why it matched, strongest reason first.
    pub why: Vec<String>,
}

const W_TEXT: f64 = 1.0;
const W_SYMBOL: f64 = 1.1;
const W_PATH: f64 = 0.5;
const W_GRAPH: f64 = 0.35;
/// The graph's weight for a one-line query (its best files are less sure).
const W_GRAPH_SHORT: f64 = 0.175;
/// Full-text matches of a long report's whole text (prose and snippets included).
const W_BODY: f64 = 0.5;
/// Whole-file BM25 of a long report's words: a file's share of the best file's BM25 adds
/// this much of the best result's score.
const W_FILE_TEXT: f64 = 0.8;
/// Whole-file BM25 counts for nothing with up to the first number of indexed files, fully
/// from the second on, and in proportion between.
const FILE_TEXT_FULL_AT: (f64, f64) = (5.0, 50.0);
/// How many files whole-file BM25 contributes.
const FILE_TEXT_CANDIDATES: usize = 40;
/// How a file's best locations add up for file results.
const FILE_SHARES: [f64; 3] = [1.0, 0.3, 0.15];
/// BM25 column weights of `chunks_fts` (symbol, body, terms) in hybrid ranking.
const CHUNK_WEIGHTS: &str = "bm25(2.0, 1.0, 0.5)";
/// How many chunk candidates BM25 contributes.
const TEXT_CANDIDATES: usize = 150;
/// The fewest chunk candidates a file ranking draws from, whatever its limit (50 files'
/// worth at 8 chunks a file). A file's score sums its best chunks, so a pool sized by the
/// limit (`codebase_search`'s 10 → 150 chunks) cut the second and third chunks of files
/// that a larger limit ranked first: asking for more results reordered the first ones, and
/// the development titles' file Acc@5 / @10 at limit 20 were 207 / 220 of 255 against 212 /
/// 228 at limit 50.
const FILE_TEXT_POOL: usize = 400;
/// Files whose neighbours get a graph boost.
const GRAPH_SEEDS: usize = 5;
const MAX_SNIPPET_LINES: usize = 3;
/// Longest span a symbol hit reports (larger definitions are shown by their head).
const MAX_SYMBOL_HIT_LINES: usize = 40;
const MAX_SNIPPET_CHARS: usize = 160;

/// A location being scored.
#[derive(Debug, Clone)]
struct Cand {
    file_id: i64,
    path: String,
    start: usize,
    end: usize,
    symbol: Option<String>,
    kind: Option<String>,
    text: f64,
    sym: f64,
    /// Added to this location's score in location results only (its file's score already
    /// has the same evidence).
    bonus: f64,
    why: Vec<String>,
}

impl Index {
    /// Searches the index (call [`Index::refresh`] first for fresh results).
    pub fn search(&self, q: &SearchQuery) -> Result<Vec<Hit>, IndexError> {
        let glob = match &q.path_glob {
            Some(g) if !g.trim().is_empty() => Some(compile_glob(g)?),
            _ => None,
        };
        let report = Report::parse(&q.text);
        // A long report: the ordinary pipeline gets its focus (title, code identifiers,
        // error lines); the rest reaches the ranking as structural evidence and a
        // low-weight full-text pass over the whole text.
        let long = report.long && q.ranking == Ranking::Hybrid;
        let all_terms = QueryTerms::parse(&q.text);
        let terms = if long {
            QueryTerms::parse(&report.focus_text())
        } else {
            all_terms.clone()
        };
        if terms.is_empty() && all_terms.is_empty() {
            return Ok(Vec::new());
        }
        let limit = q.limit.clamp(1, 200);
        let filter = |path: &str| glob.as_ref().is_none_or(|g| g.is_match(path));
        let mut fetch = if glob.is_some() {
            TEXT_CANDIDATES * 6
        } else {
            TEXT_CANDIDATES
        };
        if q.kind == SearchKind::File {
            // Enough chunks for `limit` distinct files, and never fewer than
            // `FILE_TEXT_POOL`: up to 50 results, the first files do not depend on how many
            // were asked for.
            fetch = fetch.max(FILE_TEXT_POOL).max(limit * 8);
        }
        let conn = &self.conn;
        let mut cands: Vec<Cand> = Vec::new();
        let mut path_scores: HashMap<i64, (f64, String)> = HashMap::new();
        let mut evidence = Evidence::default();
        let mut files_read = FileLines::new();
        // Whole-file BM25's best files, best first (file results only).
        let mut by_text: Vec<(i64, String)> = Vec::new();
        match q.ranking {
            Ranking::Bm25 => {
                let phrases: Vec<String> = fts_phrases(&all_terms.words)
                    .into_iter()
                    .map(|p| format!("body : {p}"))
                    .collect();
                if !phrases.is_empty() {
                    text_candidates(
                        conn,
                        &phrases,
                        "bm25(0.0, 1.0, 0.0)",
                        fetch,
                        &filter,
                        &HashSet::new(),
                        &mut cands,
                    )?;
                }
            }
            Ranking::Hybrid => {
                let catalogs = self.catalogs()?;
                let selective = self.selective_words(&terms)?;
                let phrases = text_phrases(&terms, &selective);
                if !phrases.is_empty() {
                    text_candidates(
                        conn,
                        &phrases,
                        CHUNK_WEIGHTS,
                        fetch,
                        &filter,
                        &catalogs.chunks,
                        &mut cands,
                    )?;
                }
                symbol_candidates(conn, &terms, &selective, &filter, &mut cands)?;
                if !long && q.kind == SearchKind::File {
                    by_text = recall::text_files(conn, &terms.words, &filter, &catalogs.files)?;
                }
                path_candidates(conn, &terms, &filter, &mut path_scores)?;
                // Names a registry gives its entries (`use-yield-from`, `W0511`), not
                // already read as config keys.
                let registry_names: Vec<String> = registry::names(&q.text)
                    .into_iter()
                    .filter(|n| {
                        let k = n.replace('-', "_").to_lowercase();
                        !report
                            .config_keys
                            .iter()
                            .any(|c| c.name.replace('-', "_").to_lowercase() == k)
                    })
                    .collect();
                // A title's dotted names (`sphinx.ext.linkcode`, `io.fits.Card`) name modules
                // as a report's do.
                if !long {
                    evidence::dotted(conn, &report, &filter, &mut evidence)?;
                    cands.extend(std::mem::take(&mut evidence.locations));
                }
                if !long && !registry_names.is_empty() {
                    registry::matches(
                        conn,
                        &self.root,
                        &mut files_read,
                        &registry_names,
                        &filter,
                        &mut evidence,
                    )?;
                    cands.extend(std::mem::take(&mut evidence.locations));
                }
                if long {
                    let body_words = self.selective_words(&all_terms)?;
                    // The chunk pass scores every chunk holding any of its words: the
                    // rarest few carry its ranking and keep it fast on long reports.
                    let chunk_words = self.rarest(&body_words, BODY_CHUNK_WORDS)?;
                    let chunk_phrases = fts_phrases(&chunk_words);
                    let file_phrases = fts_phrases(&file_words(&body_words, &all_terms));
                    let trust = self.file_text_trust()?;
                    // The two full-text passes read the index on a second connection while
                    // this one gathers the structural evidence (both only read).
                    let text_passes = |conn: &rusqlite::Connection| {
                        let filter = |path: &str| glob.as_ref().is_none_or(|g| g.is_match(path));
                        let mut body = Vec::new();
                        if !chunk_phrases.is_empty() {
                            text_candidates(
                                conn,
                                &chunk_phrases,
                                CHUNK_WEIGHTS,
                                fetch,
                                &filter,
                                &catalogs.chunks,
                                &mut body,
                            )?;
                        }
                        let files = if file_phrases.is_empty() {
                            Vec::new()
                        } else {
                            file_text_scores(
                                conn,
                                &file_phrases,
                                FILE_TEXT_CANDIDATES,
                                &filter,
                                &catalogs.files,
                            )?
                        };
                        Ok::<_, IndexError>((body, files))
                    };
                    let mut gather_evidence = || {
                        let mut ev = gather(
                            conn,
                            &self.root,
                            &mut files_read,
                            &report,
                            &all_terms.paths,
                            &filter,
                        )?;
                        registry::matches(
                            conn,
                            &self.root,
                            &mut files_read,
                            &registry_names,
                            &filter,
                            &mut ev,
                        )?;
                        Ok::<_, IndexError>(ev)
                    };
                    let (passes, gathered) = match self.take_reader() {
                        Some(other) => std::thread::scope(|s| {
                            let passes = s.spawn(|| {
                                let passes = text_passes(&other);
                                (passes, other)
                            });
                            let gathered = gather_evidence();
                            let (passes, other) = passes
                                .join()
                                .unwrap_or_else(|p| std::panic::resume_unwind(p));
                            self.put_reader(other);
                            (passes, gathered)
                        }),
                        None => (text_passes(conn), gather_evidence()),
                    };
                    let (mut body, file_text) = passes?;
                    evidence = gathered?;
                    for c in &mut body {
                        c.text *= W_BODY;
                    }
                    cands.extend(body);
                    cands.extend(std::mem::take(&mut evidence.locations));
                    if q.kind == SearchKind::File {
                        by_text = file_text
                            .iter()
                            .map(|(id, p, _)| (*id, p.clone()))
                            .collect();
                    }
                    for (fid, path, s) in file_text {
                        evidence.add_text(fid, &path, s, trust);
                    }
                }
            }
        }
        let mut hits = merge(cands);
        // Files that match only by path or by evidence still deserve a hit.
        let path_floor = if q.kind == SearchKind::File { 0.0 } else { 0.3 };
        let mut extra: Vec<(i64, String)> = path_scores
            .iter()
            .filter(|(_, (score, _))| *score > path_floor)
            .map(|(fid, (_, path))| (*fid, path.clone()))
            .chain(evidence.files.iter().map(|(fid, e)| (*fid, e.path.clone())))
            .collect();
        extra.sort();
        extra.dedup();
        for (fid, path) in extra {
            if !hits.iter().any(|h| h.file_id == fid) {
                hits.push(Cand {
                    file_id: fid,
                    path,
                    start: 1,
                    end: 1,
                    symbol: None,
                    kind: None,
                    text: 0.0,
                    sym: 0.0,
                    bonus: 0.0,
                    why: Vec::new(),
                });
            }
        }
        let mut scored: Vec<(f64, Cand)> = hits
            .into_iter()
            .map(|c| {
                let mut s = c.text * W_TEXT + c.sym * W_SYMBOL;
                // A one-line function is usually a prototype (C headers): the definition
                // wins.
                if c.start == c.end && matches!(c.kind.as_deref(), Some("function" | "method")) {
                    s *= 0.8;
                }
                let mut c = c;
                if let Some((p, _)) = path_scores.get(&c.file_id) {
                    s += p * W_PATH;
                    if *p > 0.0 {
                        c.why.push("path matches".into());
                    }
                }
                (s, c)
            })
            .collect();
        if q.ranking == Ranking::Hybrid {
            // A short query's best files are a guess more often than a report's: the files
            // they import or are imported by gain less from them.
            let graph_weight = if long { W_GRAPH } else { W_GRAPH_SHORT };
            graph_boost(
                conn,
                &mut scored,
                q.kind == SearchKind::File,
                &filter,
                graph_weight,
            )?;
        }
        // A report or a many-word description asks which definition to open: definitions
        // are ranked with their file's evidence (`definitions.rs`).
        let by_definition = q.kind == SearchKind::Symbol
            && q.ranking == Ranking::Hybrid
            && (long || terms.words.len() >= DEF_QUERY_WORDS);
        if q.kind == SearchKind::Symbol && !by_definition {
            scored.retain(|(_, c)| c.symbol.is_some());
        }
        // A report, an error line or a one-line fault description asks for the code behind a
        // behaviour: docs and data rank lower (`PathRole::weight`).
        let behaviour = long || !report.errors.is_empty() || report.fault;
        let hybrid = q.ranking == Ranking::Hybrid;
        let role_weight = |path: &str| {
            if hybrid {
                PathRole::of(path).weight(report.about_tests, behaviour)
            } else {
                1.0
            }
        };
        let mut scored = if by_definition {
            let mut files = files_ranked(scored.clone(), &evidence, &role_weight);
            files.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.path.cmp(&b.1.path)));
            let words = if long { &all_terms.words } else { &terms.words };
            let idf = self.idf(words)?;
            let named = named_definitions(&report, &terms);
            definitions::ranked(
                conn,
                &files,
                &scored,
                &idf,
                &named,
                &filter,
                &role_weight,
                limit,
            )?
        } else if q.kind == SearchKind::File {
            files_ranked(scored, &evidence, &role_weight)
        } else {
            locations_ranked(scored, &evidence, &role_weight)
        };
        scored.sort_by(|a, b| {
            b.0.total_cmp(&a.0)
                .then_with(|| a.1.path.cmp(&b.1.path))
                .then(a.1.start.cmp(&b.1.start))
        });
        if q.kind == SearchKind::File && hybrid {
            recall::files_tail(&mut scored, &by_text);
        }
        scored.truncate(limit);
        let words = &all_terms.words;
        let mut out = Vec::with_capacity(scored.len());
        for (score, c) in scored {
            let lines = lines_of(&mut files_read, &self.root, &c.path).unwrap_or(&[]);
            let (snippet, found) = snippet(lines, c.start, c.end, words);
            let mut why = c.why;
            if !found.is_empty() && c.text > 0.0 {
                let shown: Vec<&String> = found.iter().take(8).collect();
                why.insert(
                    0,
                    format!(
                        "text: {}",
                        shown
                            .iter()
                            .map(|s| s.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                );
            }
            dedup_keep_order(&mut why);
            out.push(Hit {
                path: c.path,
                start_line: c.start,
                end_line: c.end,
                symbol: c.symbol,
                kind: c.kind,
                snippet,
                score: (score * 1000.0).round() / 1000.0,
                why,
            });
        }
        Ok(out)
    }
}

/// Location results: each location's own score, a little for other hits in its file (a
/// file that matches in many places is more likely the one), its file's evidence, and its
/// file's role.
fn locations_ranked(
    scored: Vec<(f64, Cand)>,
    evidence: &Evidence,
    role_weight: &dyn Fn(&str) -> f64,
) -> Vec<(f64, Cand)> {
    let mut per_file: HashMap<i64, f64> = HashMap::new();
    for (s, c) in &scored {
        *per_file.entry(c.file_id).or_default() += *s;
    }
    let ranked = scored
        .into_iter()
        .map(|(s, mut c)| {
            let rest = per_file.get(&c.file_id).copied().unwrap_or(s) - s;
            let mut s = s + (rest * 0.05).min(0.2) + evidence.score(c.file_id) + c.bonus;
            explain_file(&mut c, evidence, role_weight, &mut s);
            (s, c)
        })
        .collect();
    with_file_text(ranked, evidence, role_weight)
}

/// File results: one per file, scored by its strongest locations (the best, then a share of
/// the next two: a file matching in several places beats one lucky chunk), plus its
/// evidence, times its role's weight. The hit is the best location.
fn files_ranked(
    scored: Vec<(f64, Cand)>,
    evidence: &Evidence,
    role_weight: &dyn Fn(&str) -> f64,
) -> Vec<(f64, Cand)> {
    let mut by_file: BTreeMap<i64, Vec<(f64, Cand)>> = BTreeMap::new();
    for (s, c) in scored {
        by_file.entry(c.file_id).or_default().push((s, c));
    }
    let ranked: Vec<(f64, Cand)> = by_file
        .into_values()
        .filter_map(|mut locs| {
            locs.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.start.cmp(&b.1.start)));
            let agg = locs
                .iter()
                .zip(FILE_SHARES)
                .map(|((s, _), share)| s * share)
                .sum::<f64>();
            let mut it = locs.into_iter();
            let (_, mut best) = it.next()?;
            for (_, other) in it.take(2) {
                best.why.extend(other.why);
            }
            let mut s = agg + evidence.score(best.file_id);
            explain_file(&mut best, evidence, role_weight, &mut s);
            Some((s, best))
        })
        .collect();
    with_file_text(ranked, evidence, role_weight)
}

/// Adds whole-file BM25 in proportion to the best result's score: `W_FILE_TEXT` × best ×
/// the file's share (times its role's weight), so the text of the whole file counts as much
/// beside strong structural evidence (a traceback, a quoted error) as beside weak.
fn with_file_text(
    mut scored: Vec<(f64, Cand)>,
    evidence: &Evidence,
    role_weight: &dyn Fn(&str) -> f64,
) -> Vec<(f64, Cand)> {
    let top = scored.iter().map(|(s, _)| *s).fold(0.0_f64, f64::max);
    for (s, c) in &mut scored {
        let share = evidence.text_share(c.file_id);
        if share > 0.0 {
            *s += W_FILE_TEXT * top * share * role_weight(&c.path).min(1.0);
        }
    }
    scored
}

/// Adds the file's evidence reasons and role to a hit, and applies the role's weight.
fn explain_file(c: &mut Cand, evidence: &Evidence, role_weight: &dyn Fn(&str) -> f64, s: &mut f64) {
    if let Some(e) = evidence.files.get(&c.file_id) {
        for w in &e.why {
            if !c.why.contains(w) {
                c.why.push(w.clone());
            }
        }
    }
    let w = role_weight(&c.path);
    if w < 1.0 {
        *s *= w;
        c.why.push(format!(
            "{} (ranked below source)",
            PathRole::of(&c.path).label()
        ));
    }
}

/// Definition results use the definition ranking from this many query words on (fewer:
/// a name or two, looked up as before).
const DEF_QUERY_WORDS: usize = 4;

/// Most words in a long report's full-text pass over chunks (the rarest of them). Chosen on
/// the development sets: 24 kept every file and definition figure (or raised it) and halved
/// that pass's cost on 2,000-file trees.
const BODY_CHUNK_WORDS: usize = 24;

/// The names a query gives for definitions (lowercase): the report's code-span, snippet and
/// traceback names, or a short query's identifiers; dunder names left out.
fn named_definitions(report: &Report, terms: &QueryTerms) -> std::collections::BTreeSet<String> {
    report
        .span_identifiers
        .iter()
        .chain(&report.block_identifiers)
        .chain(report.frames.iter().filter_map(|f| f.function.as_ref()))
        // `Emit a warning …`: a capitalised word opening a sentence names no definition.
        .chain(
            terms
                .identifiers
                .iter()
                .filter(|i| !terms.sentence_capitals.contains(i)),
        )
        .filter(|n| !(n.starts_with("__") && n.ends_with("__")))
        .map(|n| n.to_lowercase())
        .collect()
}

fn compile_glob(g: &str) -> Result<GlobMatcher, IndexError> {
    // Without a `/`, match the file name anywhere (`*.py`).
    let pattern = if g.contains('/') {
        g.to_string()
    } else {
        format!("**/{g}")
    };
    globset::GlobBuilder::new(&pattern)
        .literal_separator(true)
        .build()
        .map(|g| g.compile_matcher())
        .map_err(|e| IndexError::Glob {
            glob: g.to_string(),
            message: e.to_string(),
        })
}

#[cfg(test)]
mod tests;
