//! `keel index`, `keel search`, `keel map` and the index line of `keel doctor`: the codebase
//! index from the terminal, with a progress bar while it builds.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use keel_config::Layer;
use keel_engine::Config;
use keel_index::{Index, IndexStats, Progress, SearchKind, SearchQuery};

use crate::args::{IndexArgs, MapArgs, SearchArgs};
use crate::check::{Check, Status};
use crate::{exit, setup};

/// A rate for people: "276 files/s", "0.4 files/s" (never "276.4334/s").
fn files_per_sec(rate: f64) -> String {
    if !rate.is_finite() || rate <= 0.0 {
        "— files/s".to_string()
    } else if rate < 10.0 {
        format!("{rate:.1} files/s")
    } else {
        format!("{rate:.0} files/s")
    }
}

/// The bar while files are read: count, rate and time left.
fn reading_style() -> indicatif::ProgressStyle {
    indicatif::ProgressStyle::with_template(
        "indexing {bar:30} {pos}/{len} files ({rate}, {eta} left)",
    )
    .map(|style| {
        style.with_key(
            "rate",
            |state: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
                let _ = w.write_str(&files_per_sec(state.per_sec()));
            },
        )
    })
    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
}

/// A progress bar on stderr when it is a terminal (a spinner naming the step while the tree
/// is scanned and the imports linked); silent otherwise.
struct Bar {
    bar: Option<indicatif::ProgressBar>,
    stop: Arc<AtomicBool>,
}

impl Bar {
    fn new(stop: Arc<AtomicBool>) -> Self {
        let bar = crate::out::stderr_is_terminal().then(|| {
            let b = indicatif::ProgressBar::new(0);
            b.set_style(reading_style());
            // The spinner of the scanning and linking steps moves without file counts.
            b.enable_steady_tick(Duration::from_millis(120));
            b
        });
        Self { bar, stop }
    }

    fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

impl Progress for Bar {
    fn phase(&self, phase: keel_index::Phase) {
        let Some(b) = &self.bar else { return };
        match phase {
            keel_index::Phase::Reading => b.set_style(reading_style()),
            // Scanning and linking have no count: a spinner with the step and the time.
            other => {
                b.set_style(
                    indicatif::ProgressStyle::with_template("{spinner} {msg} ({elapsed})")
                        .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
                );
                b.set_message(other.label());
            }
        }
    }

    fn planned(&self, _files: usize, to_read: usize) {
        if let Some(b) = &self.bar {
            b.set_length(to_read as u64);
        }
    }

    fn advanced(&self, done: usize) {
        if let Some(b) = &self.bar {
            b.set_position(done as u64);
        }
    }

    fn cancelled(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }
}

fn load(common: &crate::args::CommonArgs) -> anyhow::Result<(std::path::PathBuf, Config)> {
    let workspace = setup::workspace_dir(common.workspace.as_deref())?;
    let config = setup::load_config(&workspace, Layer::from_overrides(&[]))?;
    Ok((workspace, config))
}

/// Opens and refreshes the index, with a progress bar; Ctrl-C stops the build cleanly.
fn fresh_index(
    workspace: &Path,
    config: &Config,
    stop: &Arc<AtomicBool>,
) -> anyhow::Result<(Index, keel_index::RefreshStats, Duration)> {
    let mut index = Index::open(workspace, config.index.settings())
        .with_context(|| format!("cannot open the index of {}", workspace.display()))?;
    let bar = Bar::new(stop.clone());
    let started = Instant::now();
    let stats = index.refresh(&bar);
    bar.finish();
    let stats = stats?;
    Ok((index, stats, started.elapsed()))
}

fn ctrl_c_flag() -> Arc<AtomicBool> {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    // Best effort: without a handler Ctrl-C still kills the process, and the index stays
    // consistent either way.
    let _ = std::thread::Builder::new()
        .name("ctrl-c".into())
        .spawn(move || {
            if let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                rt.block_on(async {
                    if tokio::signal::ctrl_c().await.is_ok() {
                        flag.store(true, Ordering::Relaxed);
                    }
                });
            }
        });
    stop
}

pub fn execute_index(args: IndexArgs) -> anyhow::Result<u8> {
    let (workspace, config) = load(&args.common)?;
    let stop = ctrl_c_flag();
    let (mut index, stats, took) = match fresh_index(&workspace, &config, &stop) {
        Ok(r) => r,
        Err(e)
            if e.downcast_ref::<keel_index::IndexError>()
                .is_some_and(|e| matches!(e, keel_index::IndexError::Cancelled)) =>
        {
            tell!("keel: indexing stopped; run `keel index` again to finish (nothing is lost)");
            return Ok(exit::CANCELLED);
        }
        Err(e) => return Err(e),
    };
    say!(
        "indexed {} files ({} read, {} removed) in {:.2} s",
        stats.files,
        stats.indexed,
        stats.removed,
        took.as_secs_f64()
    );
    if args.stats {
        say_part!("{}", render_stats(&index.stats()?));
    }
    if !args.watch {
        return Ok(exit::COMPLETED);
    }
    let watcher = keel_index::watch::Watcher::new(index.root())?;
    say!("watching {} (Ctrl-C stops)", index.root().display());
    while !stop.load(Ordering::Relaxed) {
        let changes = watcher.wait(Duration::from_millis(250), Duration::from_millis(100));
        if changes.is_empty() {
            continue;
        }
        let t = Instant::now();
        let r = if changes.rescan {
            index.refresh(&keel_index::NoProgress)?
        } else {
            let paths: Vec<String> = changes.paths.into_iter().collect();
            index.refresh_paths(&paths)?
        };
        if r.changed() {
            say!(
                "re-indexed {}, removed {} in {:.1} ms",
                keel_tools::text::count(r.indexed, "file", "files"),
                r.removed,
                t.elapsed().as_secs_f64() * 1000.0
            );
        }
    }
    Ok(exit::CANCELLED)
}

fn render_stats(s: &IndexStats) -> String {
    let langs: Vec<String> = s
        .languages
        .iter()
        .map(|(l, n)| format!("{l} {n}"))
        .collect();
    format!(
        "state:    {}\nfiles:    {} ({:.1} MB of source)\nlanguages: {}\nchunks:   {}\nsymbols:  {}\nimports:  {} ({} resolved to workspace files)\nparse errors: {} files\ndatabase: {:.1} MB\n",
        s.state,
        s.files,
        s.source_bytes as f64 / 1e6,
        langs.join(", "),
        s.chunks,
        s.symbols,
        s.imports,
        s.resolved_imports,
        s.parse_errors,
        s.db_bytes as f64 / 1e6
    )
}

pub fn execute_search(args: SearchArgs) -> anyhow::Result<u8> {
    let (workspace, config) = load(&args.common)?;
    let kind_arg = if args.files {
        "file"
    } else if args.symbols {
        "symbol"
    } else {
        args.kind.as_str()
    };
    let kind = SearchKind::parse(kind_arg).ok_or_else(|| {
        setup::UsageError(format!(
            "--kind {} is not a kind; use any, symbol or file",
            args.kind
        ))
    })?;
    let stop = ctrl_c_flag();
    let (index, _, _) = fresh_index(&workspace, &config, &stop)?;
    let query = SearchQuery {
        text: args.query.join(" "),
        kind,
        path_glob: args.glob.clone(),
        limit: args.limit,
        ..SearchQuery::default()
    };
    let hits = index
        .search(&query)
        .map_err(|e| setup::UsageError(e.to_string()))?;
    if args.json {
        print_out(&format!("{}\n", crate::out::json_pretty(&hits)?));
        return Ok(exit::COMPLETED);
    }
    if hits.is_empty() {
        print_out("no matches\n");
        return Ok(exit::FAILED);
    }
    let mut out = String::new();
    for h in &hits {
        let what = match (&h.kind, &h.symbol) {
            (Some(k), Some(s)) => format!("  {k} {s}"),
            (None, Some(s)) => format!("  {s}"),
            _ => String::new(),
        };
        out.push_str(&format!(
            "{}:{}-{}{what}  [{}]\n",
            h.path,
            h.start_line,
            h.end_line,
            h.why.join("; ")
        ));
        for (n, line) in &h.snippet {
            out.push_str(&format!("  {n:>5}  {}\n", line.trim_end()));
        }
    }
    print_out(&out);
    Ok(exit::COMPLETED)
}

pub fn execute_map(args: MapArgs) -> anyhow::Result<u8> {
    let (workspace, config) = load(&args.common)?;
    let tokens = args.tokens.unwrap_or(match config.index.codemap_tokens {
        0 => 1000,
        n => n,
    });
    let stop = ctrl_c_flag();
    let (index, _, _) = fresh_index(&workspace, &config, &stop)?;
    print_out(&index.codemap(tokens)?);
    Ok(exit::COMPLETED)
}

/// The `index` line of `keel doctor`: whether the workspace has an index and how it is.
pub fn health_check(config: &Config, workspace: &Path) -> Check {
    if !config.index.enabled {
        return Check::new("index", Status::Info, "disabled by `index.enabled = false`");
    }
    if !Index::exists(workspace) {
        return Check::new(
            "index",
            Status::Info,
            "not built yet: the first codebase_search builds it (or run `keel index`)",
        );
    }
    let db = Index::db_path(workspace);
    match Index::open(workspace, config.index.settings()).and_then(|i| i.stats()) {
        Ok(s) if s.state == "ready" => Check::new(
            "index",
            Status::Ok,
            format!(
                "{} files, {} symbols, {} of {} imports resolved; {:.1} MB at {}",
                s.files,
                s.symbols,
                s.resolved_imports,
                s.imports,
                s.db_bytes as f64 / 1e6,
                db.display()
            ),
        ),
        Ok(s) => Check::new(
            "index",
            Status::Warn,
            format!(
                "a build was interrupted ({} files so far); the next search or `keel index` completes it",
                s.files
            ),
        ),
        Err(e) => Check::new(
            "index",
            Status::Fail,
            format!("{e}; delete {} to rebuild it", db.display()),
        ),
    }
}

/// Writes to stdout, ignoring a closed pipe (`keel search … | head`).
fn print_out(text: &str) {
    use std::io::Write;
    let _ = crate::out::stdout().write_all(text.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::files_per_sec;

    #[test]
    fn progress_rates_are_rounded() {
        assert_eq!(files_per_sec(276.4334), "276 files/s");
        assert_eq!(files_per_sec(0.4334), "0.4 files/s");
        assert_eq!(files_per_sec(f64::NAN), "— files/s");
    }
}
