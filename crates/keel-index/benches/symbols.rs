//! Symbol extraction throughput against universal-ctags on the same files, and the share of
//! ctags' function/class definitions Keel also finds.
//!
//! `cargo bench -p keel-index --bench symbols -- [DIR…]`; without arguments it uses the
//! tokio sources in `~/.cargo/registry/src` and the Python standard library in
//! `/usr/lib/python3.*` when present. Needs `ctags` (Debian: universal-ctags) on PATH.

// Benchmarks start programs of their own (the keel binary, baselines such as `bash -c true`):
// allowed here, outside Keel's one spawn path (docs/SECURITY.md, "One way to start a process").
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use keel_index::symbols::{Language, SymbolExtractor, TreeSitterExtractor};

/// ctags kinds that are function or class definitions (Python's `member` is a method).
const DEF_KINDS: &[&str] = &[
    "function",
    "method",
    "class",
    "struct",
    "interface",
    "trait",
    "enum",
    "singletonMethod",
];

fn default_trees() -> Vec<PathBuf> {
    let mut trees = Vec::new();
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default();
    if let Ok(registries) = std::fs::read_dir(home.join(".cargo/registry/src")) {
        let mut tokio: Vec<PathBuf> = registries
            .flatten()
            .flat_map(|r| std::fs::read_dir(r.path()).into_iter().flatten().flatten())
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("tokio-1."))
            })
            .collect();
        tokio.sort();
        trees.extend(tokio.pop());
    }
    if let Ok(lib) = std::fs::read_dir("/usr/lib") {
        let mut py: Vec<PathBuf> = lib
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("python3.") && !n.ends_with("-config"))
            })
            .collect();
        py.sort();
        trees.extend(py.pop());
    }
    trees
}

fn source_files(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            let Ok(ft) = e.file_type() else { continue };
            if ft.is_dir() {
                // Skip vendored test data that is not source (site-packages is not stdlib).
                if p.file_name()
                    .is_some_and(|n| n == "site-packages" || n == "__pycache__")
                {
                    continue;
                }
                stack.push(p);
            } else if ft.is_file() && Language::from_path(&p).is_some() {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

struct KeelRun {
    bytes: usize,
    elapsed: Duration,
    symbols: usize,
    /// (path, name) → lines where Keel has the name (name line and span start).
    found: HashMap<(PathBuf, String), Vec<(usize, usize)>>,
}

fn run_keel(files: &[PathBuf]) -> KeelRun {
    let extractor = TreeSitterExtractor;
    let mut bytes = 0;
    let mut symbols = 0;
    let mut found: HashMap<(PathBuf, String), Vec<(usize, usize)>> = HashMap::new();
    let start = Instant::now();
    for f in files {
        let Ok(raw) = std::fs::read(f) else { continue };
        bytes += raw.len();
        let text = String::from_utf8_lossy(&raw);
        if let Ok(fs) = extractor.extract_path(f, &text) {
            symbols += fs.symbols.len();
            for s in fs.symbols {
                found
                    .entry((f.clone(), s.name))
                    .or_default()
                    .push((s.start_line, s.name_line));
            }
        }
    }
    KeelRun {
        bytes,
        elapsed: start.elapsed(),
        symbols,
        found,
    }
}

struct CtagsRun {
    elapsed: Duration,
    tags: usize,
    defs: Vec<(PathBuf, String, usize, String)>,
}

fn run_ctags(files: &[PathBuf]) -> Option<CtagsRun> {
    let start = Instant::now();
    let mut child = Command::new("ctags")
        .args(["--output-format=json", "--fields=+nK", "-f", "-", "-L", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let list: String = files.iter().map(|f| format!("{}\n", f.display())).collect();
    let mut stdin = child.stdin.take()?;
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(list.as_bytes());
    });
    let out = child.wait_with_output().ok()?;
    let _ = writer.join();
    let elapsed = start.elapsed();
    let mut tags = 0;
    let mut defs = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if v["_type"] != "tag" {
            continue;
        }
        tags += 1;
        let kind = v["kind"].as_str().unwrap_or("");
        let path = PathBuf::from(v["path"].as_str().unwrap_or(""));
        let is_python = path.extension().is_some_and(|e| e == "py");
        if DEF_KINDS.contains(&kind) || (is_python && kind == "member") {
            defs.push((
                path,
                v["name"].as_str().unwrap_or("").to_string(),
                v["line"].as_u64().unwrap_or(0) as usize,
                kind.to_string(),
            ));
        }
    }
    Some(CtagsRun {
        elapsed,
        tags,
        defs,
    })
}

/// Parse every file and nothing else: the floor under any tree-sitter extraction.
fn parse_only(files: &[PathBuf]) -> Duration {
    let start = Instant::now();
    for f in files {
        let Ok(raw) = std::fs::read(f) else { continue };
        let text = String::from_utf8_lossy(&raw);
        let Some(lang) = Language::detect(f, &text) else {
            continue;
        };
        let mut parser = tree_sitter::Parser::new();
        if parser.set_language(&lang.grammar()).is_ok() {
            let _ = parser.parse(text.as_bytes(), None);
        }
    }
    start.elapsed()
}

fn mb_per_s(bytes: usize, d: Duration) -> f64 {
    bytes as f64 / 1_048_576.0 / d.as_secs_f64()
}

fn main() {
    let args: Vec<PathBuf> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .map(PathBuf::from)
        .collect();
    let trees = if args.is_empty() {
        default_trees()
    } else {
        args
    };
    if trees.is_empty() {
        eprintln!("no source tree found; pass directories as arguments");
        std::process::exit(2);
    }
    for tree in trees {
        let files = source_files(&tree);
        // Warm the page cache and the compiled queries so neither side pays for them.
        let _ = run_keel(&files[..files.len().min(20)]);
        for f in &files {
            let _ = std::fs::read(f);
        }
        let keel = run_keel(&files);
        println!(
            "== {} ({} files, {:.1} MB)",
            tree.display(),
            files.len(),
            keel.bytes as f64 / 1_048_576.0
        );
        println!(
            "keel (tree-sitter, 1 thread): {:>7.2} MB/s, {} symbols, {:.2} s",
            mb_per_s(keel.bytes, keel.elapsed),
            keel.symbols,
            keel.elapsed.as_secs_f64()
        );
        let parse = parse_only(&files);
        println!(
            "  of which parsing alone:     {:>7.2} MB/s, {:.2} s ({:.0}% of keel's time)",
            mb_per_s(keel.bytes, parse),
            parse.as_secs_f64(),
            100.0 * parse.as_secs_f64() / keel.elapsed.as_secs_f64()
        );
        let Some(ctags) = run_ctags(&files) else {
            println!("ctags: not found on PATH (install universal-ctags) — no baseline");
            continue;
        };
        println!(
            "universal-ctags (baseline):   {:>7.2} MB/s, {} tags, {:.2} s",
            mb_per_s(keel.bytes, ctags.elapsed),
            ctags.tags,
            ctags.elapsed.as_secs_f64()
        );
        println!(
            "speed ratio keel/ctags: {:.2}x",
            ctags.elapsed.as_secs_f64() / keel.elapsed.as_secs_f64()
        );
        let mut by_kind: HashMap<String, (usize, usize)> = HashMap::new();
        let mut missed = Vec::new();
        let mut seen = HashSet::new();
        for (path, name, line, kind) in &ctags.defs {
            if !seen.insert((path.clone(), name.clone(), *line)) {
                continue;
            }
            let hit = keel
                .found
                .get(&(path.clone(), name.clone()))
                .is_some_and(|spans| {
                    spans.iter().any(|(start, name_line)| {
                        *line == *name_line || (*start..=*name_line).contains(line)
                    })
                });
            let e = by_kind.entry(kind.clone()).or_default();
            e.0 += 1;
            if hit {
                e.1 += 1;
            } else if missed.len() < 8 {
                missed.push(format!("{}:{line} {kind} {name}", path.display()));
            }
        }
        let total: usize = by_kind.values().map(|v| v.0).sum();
        let hits: usize = by_kind.values().map(|v| v.1).sum();
        println!(
            "ctags function/class definitions also found by keel: {hits}/{total} = {:.1}%",
            100.0 * hits as f64 / total.max(1) as f64
        );
        let mut kinds: Vec<_> = by_kind.into_iter().collect();
        kinds.sort();
        for (kind, (n, h)) in kinds {
            println!(
                "  {kind:<16} {h:>6}/{n:<6} {:.1}%",
                100.0 * h as f64 / n.max(1) as f64
            );
        }
        for m in missed {
            println!("  missed e.g. {m}");
        }
    }
}
