//! Localization on real issues from projects other than Django: does `codebase_search`
//! (file results, the whole issue text as the query) put a file the real fix changed at the
//! top? Reported next to whole-file BM25 computed in the same run, per project.
//!
//! Data: `benches/data/dev_issues.jsonl` — SWE-bench *dev* instances (never a test split) —,
//! `benches/data/heldout_issues.jsonl` — SWE-Gym moto instances — and
//! `benches/data/fresh_b_issues.jsonl` — SWE-Gym-Lite instances of MONAI, dvc, conan, hydra
//! and bokeh: the issue text (problem statement; long dumps
//! and the records read only as excerpts are marked `trimmed`), the files of the gold patch,
//! and the PyPI release searched (`sdist`; `approx` says how it stands in for the base
//! commit); `source` says where each record was read. The trees are not in the repository:
//!
//! ```text
//! python3 crates/keel-index/benches/data/fetch_dev_sources.py /tmp/keel-dev-trees
//! cargo bench -p keel-index --bench localize -- --trees /tmp/keel-dev-trees
//! D=$PWD/crates/keel-index/benches/data
//! cargo bench -p keel-index --bench localize -- --trees /tmp/keel-dev-trees \
//!     --issues $D/dev_issues.jsonl --issues $D/heldout_issues.jsonl \
//!     --issues $D/fresh_b_issues.jsonl
//! ```
//!
//! A record with a `patch` (the gold patch) is also measured at function level: the
//! definitions the patch edits (`localize/defs.rs`) against Keel's definition results
//! (`kind: symbol`) and definition-level BM25. Figures are summed per issues file (its stem),
//! so a held-out file is reported apart from the development ones. `--cache DIR` keeps each
//! tree's index between runs (`--index-only` builds them and searches nothing); `--defs-only`
//! skips the baselines.
//!
//! `--issues FILE` may be given more than once (absolute paths: the bench runs in the crate
//! directory); without it the bench reads `dev_issues.jsonl`. `--dump FILE` writes each
//! issue's first 50 files (Keel, with scores and reasons, and BM25) as JSON lines;
//! `--dump-defs FILE` each issue's definition results.
//!
//! Without `--trees` (or with trees missing) the bench says so and skips those issues.
//! Metrics: Acc@k (a gold file among the first k results), MRR over the first 20.
//! Baseline: Okapi BM25 (k1 1.2, b 0.75) over whole files, candidates = the tree's indexed
//! non-test `.py` files (the measurement of issue 15), query = the same text.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "localize/defs.rs"]
mod defs;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use keel_index::pathrole::PathRole;
use keel_index::terms::{is_stopword, split_identifier};
use keel_index::{Index, IndexSettings, NoProgress, Ranking, SearchKind, SearchQuery};

const DEPTH: usize = 20;

struct Issue {
    id: String,
    project: String,
    sdist: String,
    files: Vec<String>,
    query: String,
    /// The gold patch, when the record has one: the edited definitions come from it.
    patch: Option<String>,
    /// The file it came from (its stem): figures are summed per file.
    set: String,
}

fn tokens(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for tok in text.split(|c: char| !(c.is_alphanumeric() || c == '_')) {
        if tok.is_empty() {
            continue;
        }
        let lower = tok.to_lowercase();
        let parts = split_identifier(tok);
        if parts.len() > 1 {
            for p in parts {
                if p.len() > 1 && !is_stopword(&p) {
                    out.push(p);
                }
            }
        }
        if lower.len() > 1 && !is_stopword(&lower) {
            out.push(lower);
        }
    }
    out
}

/// Whole-file BM25 over a fixed candidate set.
struct Bm25 {
    docs: Vec<(String, HashMap<String, u32>, usize)>,
    df: HashMap<String, usize>,
    avg: f64,
}

impl Bm25 {
    fn new(root: &Path, paths: &[String]) -> Bm25 {
        let mut docs = Vec::new();
        let mut df: HashMap<String, usize> = HashMap::new();
        for p in paths {
            let text = std::fs::read_to_string(root.join(p)).unwrap_or_default();
            let toks = tokens(&text);
            let mut tf: HashMap<String, u32> = HashMap::new();
            for t in &toks {
                *tf.entry(t.clone()).or_default() += 1;
            }
            for t in tf.keys() {
                *df.entry(t.clone()).or_default() += 1;
            }
            docs.push((p.clone(), tf, toks.len()));
        }
        let avg = docs.iter().map(|d| d.2 as f64).sum::<f64>() / docs.len().max(1) as f64;
        Bm25 { docs, df, avg }
    }

    fn rank(&self, query: &str) -> Vec<String> {
        self.scored(query, DEPTH)
            .into_iter()
            .map(|(_, p)| p)
            .collect()
    }

    fn scored(&self, query: &str, depth: usize) -> Vec<(f64, String)> {
        let mut q = tokens(query);
        q.sort();
        q.dedup();
        let n = self.docs.len() as f64;
        let mut scored: Vec<(f64, &str)> = self
            .docs
            .iter()
            .map(|(path, tf, len)| {
                let mut s = 0.0;
                for t in &q {
                    let Some(&f) = tf.get(t) else { continue };
                    let df = *self.df.get(t).unwrap_or(&0) as f64;
                    let idf = ((n - df + 0.5) / (df + 0.5) + 1.0).ln();
                    let f = f as f64;
                    s += idf * f * 2.2 / (f + 1.2 * (0.25 + 0.75 * *len as f64 / self.avg));
                }
                (s, path.as_str())
            })
            .filter(|(s, _)| *s > 0.0)
            .collect();
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(b.1)));
        scored
            .into_iter()
            .take(depth)
            .map(|(s, p)| (s, p.to_string()))
            .collect()
    }
}

#[derive(Default, Clone)]
struct Tally {
    n: usize,
    at: [usize; 4],
    rr: f64,
}

impl Tally {
    fn add(&mut self, ranked: &[String], gold: &[String]) -> Option<usize> {
        self.n += 1;
        let pos = ranked.iter().position(|p| gold.contains(p));
        if let Some(pos) = pos {
            for (i, k) in [1, 5, 10, 20].iter().enumerate() {
                if pos < *k {
                    self.at[i] += 1;
                }
            }
            self.rr += 1.0 / (pos as f64 + 1.0);
        }
        pos
    }

    fn row(&self, name: &str, label: &str) -> String {
        let pct = |x: usize| 100.0 * x as f64 / self.n.max(1) as f64;
        format!(
            "| {name} | {label} | {} | {:.0}% | {:.0}% | {:.0}% | {:.0}% | {:.3} |",
            self.n,
            pct(self.at[0]),
            pct(self.at[1]),
            pct(self.at[2]),
            pct(self.at[3]),
            self.rr / self.n.max(1) as f64
        )
    }
}

fn main() {
    let mut args = std::env::args().skip(1).filter(|a| a != "--bench");
    let here = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/data");
    let mut issue_files: Vec<PathBuf> = Vec::new();
    let mut trees: Option<PathBuf> = None;
    let mut verbose = false;
    let mut dump: Option<std::fs::File> = None;
    let mut dump_defs: Option<std::fs::File> = None;
    let mut cache: Option<PathBuf> = None;
    let mut defs_only = false;
    let mut index_only = false;
    let mut dump_depth = 50;
    while let Some(a) = args.next() {
        match a.as_str() {
            "--issues" => issue_files.push(args.next().map(PathBuf::from).unwrap()),
            "--trees" => trees = args.next().map(PathBuf::from),
            "-v" | "--verbose" => verbose = true,
            "--dump" => dump = args.next().map(|p| std::fs::File::create(p).unwrap()),
            // Every issue's definition results (path, symbol, lines, score, why) as JSON
            // lines: two builds' rankings can be compared byte for byte.
            "--dump-defs" => dump_defs = args.next().map(|p| std::fs::File::create(p).unwrap()),
            // Keeps each tree's index in DIR (reruns skip the builds).
            "--cache" => cache = args.next().map(PathBuf::from),
            // Function-level figures of Keel only (no baselines, no file ranking).
            "--defs-only" => defs_only = true,
            // Builds (or refreshes) each tree's index in `--cache` and searches nothing: a
            // held-out set's indexes can be made ahead of its one search.
            "--index-only" => index_only = true,
            // How many file results `--dump` keeps per issue (default 50; a search returns at
            // most 200): a list shorter than asked holds every file the search ranked, so a
            // gold file missing from it was never a candidate.
            "--dump-depth" => dump_depth = args.next().and_then(|n| n.parse().ok()).unwrap_or(50),
            _ => {}
        }
    }
    if issue_files.is_empty() {
        issue_files.push(here.join("dev_issues.jsonl"));
    }
    let mut issues: Vec<Issue> = Vec::new();
    for f in &issue_files {
        let set = f
            .file_stem()
            .map(|s| s.to_string_lossy().trim_end_matches("_issues").to_string())
            .unwrap_or_default();
        let text = std::fs::read_to_string(f).unwrap();
        for l in text.lines().filter(|l| !l.trim().is_empty()) {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            let s = |k: &str| v[k].as_str().unwrap_or("").to_string();
            issues.push(Issue {
                id: s("id"),
                project: s("project"),
                sdist: s("sdist"),
                files: v["files"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter_map(|f| f.as_str().map(str::to_string))
                    .collect(),
                query: s("query"),
                patch: v["patch"].as_str().map(str::to_string),
                set: set.clone(),
            });
        }
    }
    let Some(trees) = trees else {
        println!(
            "SKIPPED: no --trees DIR. Fetch the sources first:\n  python3 crates/keel-index/benches/data/fetch_dev_sources.py DIR"
        );
        return;
    };
    let mut by_tree: BTreeMap<String, Vec<&Issue>> = BTreeMap::new();
    for i in &issues {
        by_tree
            .entry(i.sdist.replace("==", "-"))
            .or_default()
            .push(i);
    }
    let mut keel: BTreeMap<String, Tally> = BTreeMap::new();
    let mut bm25: BTreeMap<String, Tally> = BTreeMap::new();
    let mut chunk_bm25: BTreeMap<String, Tally> = BTreeMap::new();
    let mut keel_defs: BTreeMap<String, defs::DefTally> = BTreeMap::new();
    let mut bm25_defs: BTreeMap<String, defs::DefTally> = BTreeMap::new();
    let mut def_times: Vec<Duration> = Vec::new();
    let mut times: Vec<Duration> = Vec::new();
    // The index's own chunk-body BM25 (`Ranking::Bm25`) on the same query: the latency
    // baseline of the same run.
    let mut bm25_times: Vec<Duration> = Vec::new();
    let mut skipped = Vec::new();
    for (tree, list) in &by_tree {
        let root = trees.join(tree);
        if !root.is_dir() {
            skipped.push(tree.clone());
            continue;
        }
        let db_dir = tempfile::tempdir().unwrap();
        let db = match &cache {
            Some(dir) => {
                std::fs::create_dir_all(dir).unwrap();
                dir.join(format!("{tree}.db"))
            }
            None => db_dir.path().join("index.db"),
        };
        let mut idx = Index::open_at(&root, &db, IndexSettings::default()).unwrap();
        idx.refresh(&NoProgress).unwrap();
        if index_only {
            continue;
        }
        let conn = rusqlite::Connection::open(&db).unwrap();
        let mut stmt = conn
            .prepare("SELECT path FROM files ORDER BY path")
            .unwrap();
        let paths: Vec<String> = stmt
            .query_map([], |r| r.get::<_, String>(0))
            .unwrap()
            .flatten()
            .filter(|p| {
                p.ends_with(".py") && !matches!(PathRole::of(p), PathRole::Test | PathRole::Fixture)
            })
            .collect();
        let base = Bm25::new(&root, if defs_only { &[] } else { &paths });
        let with_patch = list.iter().any(|i| i.patch.is_some());
        let all_defs = if with_patch {
            defs::definitions(&conn)
        } else {
            HashMap::new()
        };
        let def_base = with_patch.then(|| {
            defs::DefBm25::new(
                &root,
                if defs_only { &[] } else { &paths },
                &all_defs,
                &tokens,
            )
        });
        for issue in list {
            let gold = &issue.files;
            let b = base.rank(&issue.query);
            let key = format!("{}/{}", issue.set, issue.project);
            let bpos = bm25.entry(key.clone()).or_default().add(&b, gold);
            let mut q = SearchQuery::new(issue.query.clone());
            q.kind = SearchKind::File;
            q.limit = DEPTH;
            let t = Instant::now();
            let hits = idx.search(&q).unwrap();
            times.push(t.elapsed());
            let k: Vec<String> = hits.iter().map(|h| h.path.clone()).collect();
            let kpos = keel.entry(key.clone()).or_default().add(&k, gold);
            q.ranking = Ranking::Bm25;
            let t = Instant::now();
            let chunk_hits = idx.search(&q).unwrap();
            bm25_times.push(t.elapsed());
            let c: Vec<String> = chunk_hits.iter().map(|h| h.path.clone()).collect();
            chunk_bm25.entry(key.clone()).or_default().add(&c, gold);
            if let Some(f) = dump.as_mut() {
                use std::io::Write;
                let mut q50 = SearchQuery::new(issue.query.clone());
                q50.kind = SearchKind::File;
                q50.limit = dump_depth;
                let deep: Vec<serde_json::Value> = idx
                    .search(&q50)
                    .unwrap()
                    .iter()
                    .map(|h| serde_json::json!([h.path, h.score, h.why]))
                    .collect();
                let b50 = base.scored(&issue.query, 50);
                let mut lines = serde_json::Map::new();
                for p in deep
                    .iter()
                    .filter_map(|v| v[0].as_str().map(str::to_string))
                    .chain(b50.iter().map(|(_, p)| p.clone()))
                {
                    let n = std::fs::read_to_string(root.join(&p))
                        .map(|t| t.lines().count())
                        .unwrap_or(0);
                    lines.insert(p, n.into());
                }
                let rec = serde_json::json!({"id": issue.id, "project": issue.project,
                    "gold": gold, "keel": deep, "bm25": b50, "lines": lines,
                    "nfiles": paths.len()});
                writeln!(f, "{rec}").unwrap();
            }
            let show = |p: Option<usize>| p.map_or("-".to_string(), |p| (p + 1).to_string());
            let mut def_line = String::new();
            if let (Some(patch), Some(db)) = (&issue.patch, &def_base) {
                let gold_defs = defs::gold_definitions(&root, patch, gold, &all_defs);
                if !gold_defs.is_empty() {
                    let mut dq = SearchQuery::new(issue.query.clone());
                    dq.kind = SearchKind::Symbol;
                    dq.limit = DEPTH;
                    let t = Instant::now();
                    let dh = idx.search(&dq).unwrap();
                    def_times.push(t.elapsed());
                    if let Some(f) = dump_defs.as_mut() {
                        use std::io::Write;
                        let rows: Vec<serde_json::Value> = dh
                            .iter()
                            .map(|h| {
                                serde_json::json!([
                                    h.path,
                                    h.symbol,
                                    h.start_line,
                                    h.end_line,
                                    h.score,
                                    h.why
                                ])
                            })
                            .collect();
                        writeln!(f, "{}", serde_json::json!({"id": issue.id, "defs": rows}))
                            .unwrap();
                    }
                    let kd: Vec<(String, String)> = dh
                        .iter()
                        .filter_map(|h| h.symbol.clone().map(|s| (h.path.clone(), s)))
                        .collect();
                    let kp = keel_defs
                        .entry(key.clone())
                        .or_default()
                        .add(&kd, &gold_defs);
                    let bd = db.rank(&issue.query, DEPTH, &tokens);
                    let bp = bm25_defs
                        .entry(key.clone())
                        .or_default()
                        .add(&bd, &gold_defs);
                    def_line = format!("  defs: keel {:>3}  bm25 {:>3}", show(kp), show(bp));
                    if verbose {
                        println!("    gold defs {gold_defs:?}");
                        for h in dh.iter().take(5) {
                            println!(
                                "    def {:.3} {} {:?} {:?}",
                                h.score, h.path, h.symbol, h.why
                            );
                        }
                    }
                }
            }
            println!(
                "{:<36} keel {:>3}  bm25 {:>3}  ({} files listed){def_line}",
                issue.id,
                show(kpos),
                show(bpos),
                k.len()
            );
            if verbose {
                for h in hits.iter().take(5) {
                    println!("    {:.3} {} {:?}", h.score, h.path, h.why);
                }
            }
        }
    }
    if !skipped.is_empty() {
        println!(
            "SKIPPED (tree missing under {}): {}",
            trees.display(),
            skipped.join(", ")
        );
    }
    println!("\n| project | ranking | issues | Acc@1 | Acc@5 | Acc@10 | Acc@20 | MRR |");
    println!("|---|---|---|---|---|---|---|---|");
    let sum = |m: &BTreeMap<String, Tally>, pick: &dyn Fn(&str) -> bool| {
        let mut t = Tally::default();
        for (p, x) in m {
            if pick(p) {
                t.n += x.n;
                t.rr += x.rr;
                for i in 0..4 {
                    t.at[i] += x.at[i];
                }
            }
        }
        t
    };
    for p in keel.keys() {
        println!("{}", keel[p].row(p, "keel"));
        println!("{}", bm25[p].row(p, "whole-file BM25"));
    }
    let sets: Vec<String> = {
        let mut v: Vec<String> = issues.iter().map(|i| i.set.clone()).collect();
        v.dedup();
        v
    };
    let in_set = |set: &str| {
        let prefix = format!("{set}/");
        move |p: &str| p.starts_with(&prefix)
    };
    for set in &sets {
        let pick = &in_set(set);
        let name = format!("{set} (all)");
        let name = name.as_str();
        println!("{}", sum(&keel, pick).row(name, "keel"));
        println!("{}", sum(&bm25, pick).row(name, "whole-file BM25"));
        println!(
            "{}",
            sum(&chunk_bm25, pick).row(name, "chunk BM25 (keel's baseline)")
        );
    }
    let all = |_: &str| true;
    println!("{}", sum(&keel, &all).row("all", "keel"));
    println!("{}", sum(&bm25, &all).row("all", "whole-file BM25"));
    if !keel_defs.is_empty() {
        println!(
            "\nFunction level (issues whose gold patch edits a function, method or class):\n\n| project | ranking | issues | Acc@1 | Acc@5 | Acc@10 | Acc@20 | all@5 | all@20 |"
        );
        println!("|---|---|---|---|---|---|---|---|---|");
        let sum = |m: &BTreeMap<String, defs::DefTally>, pick: &dyn Fn(&str) -> bool| {
            let mut t = defs::DefTally::default();
            for (p, x) in m {
                if pick(p) {
                    t.merge(x);
                }
            }
            t
        };
        for p in keel_defs.keys() {
            println!("{}", keel_defs[p].row(p, "keel"));
            println!("{}", bm25_defs[p].row(p, "definition BM25"));
        }
        for set in &sets {
            let pick = &in_set(set);
            let name = format!("{set} (all)");
            println!("{}", sum(&keel_defs, pick).row(&name, "keel"));
            println!("{}", sum(&bm25_defs, pick).row(&name, "definition BM25"));
        }
        if let Some(l) = latency(&mut def_times) {
            println!("\nkeel definition search latency (whole issue text): {l}");
        }
    }
    if let Some(l) = latency(&mut times) {
        println!("\nkeel search latency (whole issue text, file results): {l}");
    }
    if let Some(l) = latency(&mut bm25_times) {
        println!("chunk BM25 search latency (same queries, same index, `Ranking::Bm25`): {l}");
    }
}

/// `p50 …, p95 …, max … ms` of `times` (sorted in place), or `None` when empty.
fn latency(times: &mut [Duration]) -> Option<String> {
    times.sort();
    let ms = |i: usize| times[i].as_secs_f64() * 1000.0;
    let n = times.len();
    (n > 0).then(|| {
        format!(
            "p50 {:.1} ms, p95 {:.1} ms, max {:.1} ms",
            ms(n / 2),
            ms(((n * 95).div_ceil(100)).saturating_sub(1).min(n - 1)),
            ms(n - 1)
        )
    })
}
