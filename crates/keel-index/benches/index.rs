//! Index figures on a real tree, each next to a baseline measured in the same run:
//!
//! - cold build: time, files/s, index size vs source size, peak RSS;
//! - refresh with nothing changed (walk + stat) and one-file refresh (`refresh_paths`);
//! - `codebase_search` latency p50/p99 over 100 identifier queries vs `rg -F -l` on the same
//!   literal terms over the same tree (ratio per query);
//! - with `--bugs FILE` (a TSV of real bug reports and fixed files, see
//!   `benches/data/django_bugs.tsv`; columns PR, file, title, source): where the fixed file
//!   ranks, hybrid vs plain BM25.
//!
//! `cargo bench -p keel-index --bench index -- TREE [--bugs FILE] [--rg N]`; without TREE it
//! indexes this repository. The index database goes to a temp dir (the tree is not
//! touched). `--rg N` limits the ripgrep baseline to the first N queries (default 20: each
//! rg run over a large tree takes about a second).

// Benchmarks start programs of their own (the keel binary, baselines such as `bash -c true`):
// allowed here, outside Keel's one spawn path (docs/SECURITY.md, "One way to start a process").
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use keel_index::{Index, IndexSettings, NoProgress, Ranking, SearchKind, SearchQuery};

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn percentile(v: &mut [Duration], p: f64) -> Duration {
    v.sort();
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v[i.min(v.len() - 1)]
}

fn peak_rss_mb() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

fn tree_bytes(root: &Path) -> (u64, u64) {
    let mut files = 0;
    let mut bytes = 0;
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let Ok(ft) = e.file_type() else { continue };
            if ft.is_dir() {
                stack.push(e.path());
            } else if ft.is_file() {
                files += 1;
                bytes += e.metadata().map(|m| m.len()).unwrap_or(0);
            }
        }
    }
    (files, bytes)
}

fn main() {
    let mut args = std::env::args().skip(1).filter(|a| a != "--bench");
    let mut tree: Option<PathBuf> = None;
    let mut bugs: Option<PathBuf> = None;
    let mut rg_n = 20usize;
    let mut keep_db: Option<PathBuf> = None;
    while let Some(a) = args.next() {
        match a.as_str() {
            "--bugs" => bugs = args.next().map(PathBuf::from),
            "--db" => keep_db = args.next().map(PathBuf::from),
            "--rg" => rg_n = args.next().and_then(|n| n.parse().ok()).unwrap_or(rg_n),
            _ => tree = Some(PathBuf::from(a)),
        }
    }
    let tree = tree
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."))
        .canonicalize()
        .unwrap();
    let db_dir = tempfile::tempdir().unwrap();
    // `--db PATH` keeps the database: a second run skips the cold build.
    let reuse = keep_db.as_ref().is_some_and(|p| p.exists());
    let db = keep_db.unwrap_or_else(|| db_dir.path().join("index.db"));
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!("tree: {} ({cores} cores)", tree.display());
    let (all_files, all_bytes) = tree_bytes(&tree);
    println!(
        "tree on disk: {all_files} files, {:.1} MB",
        all_bytes as f64 / 1e6
    );

    // Cold build.
    if reuse {
        println!(
            "(reusing {}: the cold-build figures are those of the run that built it)",
            db.display()
        );
    }
    let t = Instant::now();
    let mut idx = Index::open_at(&tree, &db, IndexSettings::default()).unwrap();
    let built = idx.refresh(&NoProgress).unwrap();
    let cold = t.elapsed();
    let rss = peak_rss_mb();
    let stats = idx.stats().unwrap();
    println!("\n## cold build");
    println!(
        "indexed {} files ({} admitted by the walk) in {:.1} s: {:.0} files/s, {:.1} MB/s of source",
        stats.files,
        built.files,
        cold.as_secs_f64(),
        stats.files as f64 / cold.as_secs_f64(),
        stats.source_bytes as f64 / 1e6 / cold.as_secs_f64()
    );
    // Baselines of the same run: listing the tree (`rg --files | wc -l`) and a plain
    // tree-sitter parse of every indexed file on two threads (no chunks, no storage).
    let t = Instant::now();
    let listed = Command::new("sh")
        .arg("-c")
        .arg("rg --files | wc -l")
        .current_dir(&tree)
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    let rg_files = t.elapsed();
    match listed {
        Some(n) if !n.is_empty() => println!(
            "baseline `rg --files | wc -l`: {n} files in {:.0} ms",
            ms(rg_files)
        ),
        _ => println!("baseline `rg --files | wc -l`: SKIPPED (rg not found)"),
    }
    let paths: Vec<PathBuf> = keel_index::walk::Walker::new(&tree, &IndexSettings::default())
        .walk(None)
        .into_iter()
        .map(|f| tree.join(&f.path))
        .collect();
    let t = Instant::now();
    let next = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                use keel_index::SymbolExtractor;
                let ex = keel_index::TreeSitterExtractor::new();
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(p) = paths.get(i) else { break };
                    if let Ok(text) = std::fs::read_to_string(p) {
                        let _ = ex.extract_path(p, &text);
                    }
                }
            });
        }
    });
    println!(
        "baseline plain parse (read + tree-sitter symbols of {} walked files, 2 threads): {:.1} s; the cold build is {:.1}x that",
        paths.len(),
        t.elapsed().as_secs_f64(),
        cold.as_secs_f64() / t.elapsed().as_secs_f64().max(1e-9)
    );
    println!(
        "source indexed: {:.1} MB; index: {:.1} MB = {:.2}x the indexed source ({:.2}x the whole tree)",
        stats.source_bytes as f64 / 1e6,
        stats.db_bytes as f64 / 1e6,
        stats.db_bytes as f64 / stats.source_bytes.max(1) as f64,
        stats.db_bytes as f64 / all_bytes.max(1) as f64
    );
    println!(
        "chunks {}, symbols {}, imports {} ({} resolved), parse errors in {} files",
        stats.chunks, stats.symbols, stats.imports, stats.resolved_imports, stats.parse_errors
    );
    println!("peak RSS after the build: {rss:.0} MB");

    // Refresh with nothing changed.
    let mut nochange = Vec::new();
    for _ in 0..3 {
        let t = Instant::now();
        let r = idx.refresh(&NoProgress).unwrap();
        nochange.push(t.elapsed());
        assert_eq!(r.indexed, 0);
    }
    println!("\n## refresh");
    println!(
        "full refresh, nothing changed (walk + stat of every file): {:.0} ms (median of 3)",
        ms(percentile(&mut nochange, 0.5))
    );

    // One-file refresh: a mid-sized parsed file gets a line appended, then restored.
    let conn = rusqlite::Connection::open(&db).unwrap();
    let victim: String = conn
        .query_row(
            "SELECT path FROM files WHERE language IS NOT NULL AND size BETWEEN 8000 AND 40000
             ORDER BY path LIMIT 1 OFFSET (SELECT COUNT(*) / 2 FROM files WHERE language IS NOT NULL AND size BETWEEN 8000 AND 40000)",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let victim_abs = tree.join(&victim);
    let original = std::fs::read(&victim_abs).unwrap();
    let mut one = Vec::new();
    for i in 0..15 {
        let mut changed = original.clone();
        changed.extend_from_slice(format!("\n// keel bench edit {i}\n").as_bytes());
        std::fs::write(&victim_abs, &changed).unwrap();
        let t = Instant::now();
        let r = idx.refresh_paths(std::slice::from_ref(&victim)).unwrap();
        one.push(t.elapsed());
        assert_eq!(r.indexed, 1, "{r:?}");
    }
    std::fs::write(&victim_abs, &original).unwrap();
    idx.refresh_paths(std::slice::from_ref(&victim)).unwrap();
    let mut read_only = Vec::new();
    for _ in 0..15 {
        let t = Instant::now();
        let _ = std::fs::read(&victim_abs).unwrap();
        read_only.push(t.elapsed());
    }
    println!(
        "one-file refresh ({victim}, {:.1} KB): p50 {:.1} ms, max {:.1} ms (baseline: reading the file {:.3} ms)",
        original.len() as f64 / 1024.0,
        ms(percentile(&mut one.clone(), 0.5)),
        ms(percentile(&mut one, 1.0)),
        ms(percentile(&mut read_only, 0.5))
    );

    // Search latency vs ripgrep on the same literal terms.
    let total: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM symbols WHERE length(name) >= 6",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let stride = (total / 100).max(1);
    let mut stmt = conn
        .prepare("SELECT name FROM symbols WHERE length(name) >= 6 ORDER BY id")
        .unwrap();
    let terms: Vec<String> = stmt
        .query_map([], |r| r.get::<_, String>(0))
        .unwrap()
        .flatten()
        .step_by(stride as usize)
        .take(100)
        .collect();
    let mut keel_times = Vec::new();
    let mut found = 0;
    for term in &terms {
        let t = Instant::now();
        let hits = idx.search(&SearchQuery::new(term.clone())).unwrap();
        keel_times.push(t.elapsed());
        if hits.iter().any(|h| {
            h.symbol
                .as_deref()
                .is_some_and(|s| s.ends_with(term.as_str()))
        }) {
            found += 1;
        }
    }
    println!(
        "\n## codebase_search latency ({} queries: symbol names sampled from the index)",
        terms.len()
    );
    let kp50 = percentile(&mut keel_times.clone(), 0.5);
    let kp99 = percentile(&mut keel_times.clone(), 0.99);
    println!(
        "keel hybrid search: p50 {:.2} ms, p99 {:.2} ms; the definition was among the hits for {found}/{}",
        ms(kp50),
        ms(kp99),
        terms.len()
    );
    let rg_ok = Command::new("rg")
        .arg("--version")
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if rg_ok && rg_n > 0 {
        let mut ratios = Vec::new();
        let mut rg_times = Vec::new();
        for (i, term) in terms.iter().take(rg_n).enumerate() {
            let t = Instant::now();
            let _ = Command::new("rg")
                .args(["-F", "-l", "--no-messages", term])
                .arg(&tree)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
            let rg = t.elapsed();
            rg_times.push(rg);
            ratios.push(rg.as_secs_f64() / keel_times[i].as_secs_f64().max(1e-9));
        }
        ratios.sort_by(|a, b| a.total_cmp(b));
        println!(
            "rg -F -l (same terms, first {}): p50 {:.0} ms; keel is {:.0}x faster per query (median ratio; min {:.0}x)",
            rg_times.len(),
            ms(percentile(&mut rg_times, 0.5)),
            ratios[ratios.len() / 2],
            ratios[0]
        );
    } else {
        println!("rg not found: no ripgrep baseline (Debian: apt-get install ripgrep)");
    }

    if let Some(bugs) = bugs {
        localization(&idx, &bugs);
    }
}

/// Where the fixed file of each bug report ranks: hybrid vs plain BM25 (file results).
fn localization(idx: &Index, bugs: &Path) {
    let text = std::fs::read_to_string(bugs).unwrap();
    let cases: Vec<(String, String, String)> = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| {
            // Columns: PR, fixed file, report title, source (the 4th and any later are ignored).
            let mut p = l.split('\t');
            Some((p.next()?.into(), p.next()?.into(), p.next()?.into()))
        })
        .collect();
    println!(
        "\n## localization ({} bug reports, query = report title)",
        cases.len()
    );
    for ranking in [Ranking::Bm25, Ranking::Hybrid] {
        let (mut top1, mut top5, mut rr) = (0, 0, 0.0);
        let mut times = Vec::new();
        for (_, file, title) in &cases {
            let q = SearchQuery {
                text: title.clone(),
                kind: SearchKind::File,
                limit: 10,
                ranking,
                path_glob: None,
            };
            let t = Instant::now();
            let hits = idx.search(&q).unwrap();
            times.push(t.elapsed());
            if let Some(pos) = hits.iter().position(|h| &h.path == file) {
                if pos == 0 {
                    top1 += 1;
                }
                if pos < 5 {
                    top5 += 1;
                }
                rr += 1.0 / (pos as f64 + 1.0);
            }
        }
        let n = cases.len() as f64;
        println!(
            "{:<7} top-1 {top1}/{} ({:.0}%), top-5 {top5}/{} ({:.0}%), MRR@10 {:.3}, p50 {:.1} ms",
            format!("{ranking:?}"),
            cases.len(),
            100.0 * top1 as f64 / n,
            cases.len(),
            100.0 * top5 as f64 / n,
            rr / n,
            ms(percentile(&mut times, 0.5))
        );
    }
}
