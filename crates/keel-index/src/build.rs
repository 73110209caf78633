//! Building and refreshing the index: walk, compare with what is stored (mtime and size,
//! then content hash), analyse changed files on every core (parse, symbols, imports,
//! chunks), write in batched transactions from one thread, then resolve the imports the
//! change can affect.
//!
//! Crash safety: each batch commits whole files; the `state` meta key is `building` from the
//! first write until the final import resolution commits, and a refresh that finds it so
//! resolves every import again. An interrupted build therefore resumes where it stopped and
//! ends equal to a fresh build.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use keel_fs::project::ProjectDir;

use crate::chunk::chunk_file;
use crate::index::{Index, Phase, Progress, RefreshStats};
use crate::store::{self, DbFiles, FileState, IndexedFile, MemFiles};
use crate::symbols::{Language, MAX_SOURCE_BYTES, TreeSitterExtractor};
use crate::walk::{FoundFile, content_skip};
use crate::{IndexError, content_hash, imports, now_ns, terms};

/// Files per write transaction during builds.
const BATCH_FILES: usize = 2_000;
/// Longest a write transaction stays open during builds.
const BATCH_TIME: Duration = Duration::from_millis(500);
/// Files larger than this are indexed as text windows without parsing (parsing is the
/// costliest step and such files are mostly data tables).
const MAX_PARSE_BYTES: u64 = 512 * 1024;
/// Above this many files to re-resolve, load the file list into memory once.
const MEM_RESOLVE_THRESHOLD: usize = 64;

/// What analysing one file produced.
enum Outcome {
    Write(Box<IndexedFile>),
    /// Same content, new metadata.
    Touch {
        id: i64,
        mtime_ns: i64,
        checked_ns: i64,
    },
    /// Unreadable, binary, generated or minified: not (or no longer) indexed.
    Skip {
        path: String,
    },
}

/// Most bytes read from one file to index it (the walk admits far smaller files; this bounds
/// a file swapped in after the walk).
pub(crate) const MAX_ANALYSED_BYTES: u64 = 64 * 1024 * 1024;

/// Reads (beneath the open workspace: regular files only, never a link out, never blocking)
/// and analyses one file.
fn analyse(project: Option<&ProjectDir>, found: &FoundFile, prev: Option<FileState>) -> Outcome {
    let checked_ns = now_ns();
    let Some(Ok(Some(bytes))) = project.map(|p| p.read_bytes(&found.path, MAX_ANALYSED_BYTES))
    else {
        return Outcome::Skip {
            path: found.path.clone(),
        };
    };
    if content_skip(&bytes).is_some() {
        return Outcome::Skip {
            path: found.path.clone(),
        };
    }
    let hash = content_hash(&bytes);
    if let Some(p) = prev
        && p.hash == hash
    {
        return Outcome::Touch {
            id: p.id,
            mtime_ns: found.mtime_ns,
            checked_ns,
        };
    }
    let text = String::from_utf8_lossy(&bytes);
    let language = Language::detect(std::path::Path::new(&found.path), &text);
    let mut symbols = Vec::new();
    let mut raw_imports = Vec::new();
    let mut parse_error = false;
    if let Some(lang) = language
        && (bytes.len() as u64) <= MAX_PARSE_BYTES
        && bytes.len() <= MAX_SOURCE_BYTES
    {
        match TreeSitterExtractor::new().extract_with_tree(lang, &text) {
            Ok((fs, tree)) => {
                parse_error = fs.has_syntax_errors;
                symbols = fs.symbols;
                raw_imports = imports::extract(lang, &tree, &text);
            }
            Err(_) => parse_error = true,
        }
    }
    let lines: Vec<&str> = text
        .split('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .collect();
    let line_count = if text.ends_with('\n') {
        lines.len() - 1
    } else {
        lines.len()
    };
    let chunks = chunk_file(&lines[..line_count], &symbols)
        .into_iter()
        .map(|c| {
            let body = lines[c.start_line - 1..c.end_line.min(line_count)].join("\n");
            let extra = terms::camel_parts(&body);
            (c, body, extra)
        })
        .collect();
    let def_terms = crate::defterms::definition_terms(&lines, &symbols);
    Outcome::Write(Box::new(IndexedFile {
        path: found.path.clone(),
        hash,
        mtime_ns: found.mtime_ns,
        size: found.size,
        checked_ns,
        language,
        lines: line_count,
        parse_error,
        chunks,
        symbols,
        def_terms,
        imports: raw_imports,
    }))
}

/// Changes gathered while writing, for import resolution afterwards.
#[derive(Default)]
struct Changes {
    stats: RefreshStats,
    /// Ids of files written (their imports need resolving).
    written: BTreeSet<i64>,
    /// Paths that appeared in or left the index (imports naming them may resolve anew).
    appeared_or_left: Vec<String>,
}

impl Changes {
    fn apply(
        &mut self,
        tx: &rusqlite::Transaction<'_>,
        outcome: Outcome,
        prev: Option<FileState>,
    ) -> Result<(), IndexError> {
        match outcome {
            Outcome::Write(f) => {
                let id = store::write_file(tx, &f)?;
                if prev.is_none() {
                    self.appeared_or_left.push(f.path.clone());
                }
                self.written.insert(id);
                self.stats.indexed += 1;
            }
            Outcome::Touch {
                id,
                mtime_ns,
                checked_ns,
            } => {
                store::touch_file(tx, id, mtime_ns, checked_ns)?;
                self.stats.touched += 1;
            }
            Outcome::Skip { path } => {
                if let Some(p) = prev {
                    store::delete_file(tx, p.id)?;
                    self.appeared_or_left.push(path);
                    self.stats.removed += 1;
                }
            }
        }
        Ok(())
    }

    /// Resolves the imports of written files and of files importing what appeared or left.
    fn resolve(
        &mut self,
        tx: &rusqlite::Transaction<'_>,
        everything: bool,
    ) -> Result<(), IndexError> {
        let mut ids: BTreeSet<i64> = if everything {
            store::files_with_imports(tx)?.into_iter().collect()
        } else {
            self.written.clone()
        };
        if !everything {
            ids.extend(store::importers_of_keys(tx, &self.appeared_or_left)?);
        }
        let ids: Vec<i64> = ids.into_iter().collect();
        if ids.len() > MEM_RESOLVE_THRESHOLD {
            let files = MemFiles::load(tx)?;
            store::resolve_imports(tx, &ids, &files)?;
        } else {
            store::resolve_imports(tx, &ids, &DbFiles(tx))?;
        }
        self.stats.resolved = ids.len();
        Ok(())
    }
}

impl Index {
    /// Brings the index up to date with the workspace: walks it, (re)indexes new and changed
    /// files on all cores, drops deleted ones. The first refresh builds the index; later
    /// ones read only files whose mtime or size changed. Cancelling through `progress`
    /// stops at a batch boundary with [`IndexError::Cancelled`]; the next refresh resumes.
    pub fn refresh(&mut self, progress: &dyn Progress) -> Result<RefreshStats, IndexError> {
        progress.phase(Phase::Scanning);
        let found = self.walker.walk(None);
        let states = store::load_states(&self.conn)?;
        let interrupted = !matches!(store::meta(&self.conn, "state")?.as_deref(), Some("ready"));
        let found_paths: HashSet<&str> = found.iter().map(|f| f.path.as_str()).collect();
        let deleted: Vec<(String, i64)> = states
            .iter()
            .filter(|(p, _)| !found_paths.contains(p.as_str()))
            .map(|(p, s)| (p.clone(), s.id))
            .collect();
        let mut jobs: Vec<(FoundFile, Option<FileState>)> = found
            .iter()
            .filter_map(|f| {
                let prev = states.get(&f.path).copied();
                match prev {
                    Some(p) if p.unchanged(f.mtime_ns, f.size) => None,
                    _ => Some((f.clone(), prev)),
                }
            })
            .collect();
        // Path order, whatever order the walk found them in: with the in-order writes below,
        // the same tree always gets the same row ids (so equal scores tie the same way).
        jobs.sort_by(|a, b| a.0.path.cmp(&b.0.path));
        progress.phase(Phase::Reading);
        progress.planned(found.len(), jobs.len());
        let mut changes = Changes::default();
        changes.stats.files = found.len();
        if jobs.is_empty() && deleted.is_empty() && !interrupted {
            crate::fts_merge::after_refresh(&self.conn, 0, found.len(), false)?;
            return Ok(changes.stats);
        }
        let built = interrupted || states.is_empty();
        store::set_meta(&self.conn, "state", "building")?;
        {
            let tx = self.conn.transaction()?;
            for (path, id) in deleted {
                store::delete_file(&tx, id)?;
                changes.appeared_or_left.push(path);
                changes.stats.removed += 1;
            }
            tx.commit()?;
        }
        self.write_parallel(jobs, progress, &mut changes)?;
        progress.phase(Phase::Linking);
        let tx = self.conn.transaction()?;
        changes.resolve(&tx, built)?;
        store::set_meta(&tx, "state", "ready")?;
        store::set_meta(&tx, "generation", &now_ns().to_string())?;
        tx.commit()?;
        let written = changes.stats.indexed + changes.stats.removed;
        crate::fts_merge::after_refresh(&self.conn, written, found.len(), built)?;
        self.forget_frequencies();
        Ok(changes.stats)
    }

    /// Analyses `jobs` on worker threads and writes the results here in batches.
    fn write_parallel(
        &mut self,
        jobs: Vec<(FoundFile, Option<FileState>)>,
        progress: &dyn Progress,
        changes: &mut Changes,
    ) -> Result<(), IndexError> {
        let threads = match self.settings.threads {
            0 => std::thread::available_parallelism().map_or(2, |n| n.get()),
            n => n,
        }
        .min(jobs.len().max(1));
        let next = AtomicUsize::new(0);
        let (tx_out, rx) = mpsc::sync_channel::<(usize, Outcome)>(1024);
        let project = ProjectDir::open(&self.root).ok();
        let prevs: HashMap<usize, Option<FileState>> =
            jobs.iter().enumerate().map(|(i, (_, p))| (i, *p)).collect();
        let jobs = &jobs;
        let next = &next;
        let project = project.as_ref();
        std::thread::scope(|scope| -> Result<(), IndexError> {
            for _ in 0..threads {
                let tx_out = tx_out.clone();
                scope.spawn(move || {
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some((found, prev)) = jobs.get(i) else {
                            break;
                        };
                        if tx_out.send((i, analyse(project, found, *prev))).is_err() {
                            break;
                        }
                    }
                });
            }
            drop(tx_out);
            let result = (|| -> Result<(), IndexError> {
                let mut done = 0usize;
                let mut tx = self.conn.transaction()?;
                let mut in_batch = 0usize;
                let mut batch_start = Instant::now();
                // Outcomes arrive in whatever order the workers finish; they are written in
                // job order (the few that arrive early wait here), so row ids do not depend
                // on thread timing.
                let mut pending: BTreeMap<usize, Outcome> = BTreeMap::new();
                let mut next_write = 0usize;
                for (i, outcome) in rx.iter() {
                    pending.insert(i, outcome);
                    while let Some(outcome) = pending.remove(&next_write) {
                        changes.apply(&tx, outcome, prevs.get(&next_write).copied().flatten())?;
                        next_write += 1;
                        done += 1;
                        in_batch += 1;
                    }
                    if in_batch >= BATCH_FILES || batch_start.elapsed() >= BATCH_TIME {
                        tx.commit()?;
                        progress.advanced(done);
                        if progress.cancelled() {
                            return Err(IndexError::Cancelled);
                        }
                        tx = self.conn.transaction()?;
                        in_batch = 0;
                        batch_start = Instant::now();
                    }
                }
                tx.commit()?;
                progress.advanced(done);
                Ok(())
            })();
            if result.is_err() {
                // Stop the workers: they exit when the queue is exhausted.
                next.store(usize::MAX / 2, Ordering::Relaxed);
            }
            result
        })
    }

    /// Re-indexes just `paths` (workspace-relative files or directories, e.g. from file
    /// events): changed files are re-read, deleted or newly ignored ones dropped, new
    /// directories walked. One transaction; takes milliseconds per file. A changed
    /// `.gitignore` or `.ignore` triggers a full [`Index::refresh`].
    pub fn refresh_paths(&mut self, paths: &[String]) -> Result<RefreshStats, IndexError> {
        let mut rels: BTreeSet<String> = BTreeSet::new();
        for p in paths {
            if p.split(['/', '\\']).any(|s| s == "..") {
                continue;
            }
            let rel = normalize_rel(p);
            let name = rel.rsplit('/').next().unwrap_or("");
            if matches!(name, ".gitignore" | ".ignore") || rel == ".keel/ignore" {
                self.walker = crate::walk::Walker::new(&self.root, &self.settings);
                return self.refresh(&crate::NoProgress);
            }
            if rel.is_empty() {
                return self.refresh(&crate::NoProgress);
            }
            rels.insert(rel);
        }
        if !self.is_built() {
            return self.refresh(&crate::NoProgress);
        }
        let mut changes = Changes::default();
        let root = self.root.clone();
        let project = ProjectDir::open(&root).ok();
        let tx = self.conn.transaction()?;
        for rel in rels {
            let abs = root.join(&rel);
            let found: Vec<FoundFile> = if abs.is_dir() && !self.walker.is_ignored(&rel, true) {
                self.walker.walk(Some(&rel))
            } else {
                self.walker.check(&rel).into_iter().collect()
            };
            // Whatever the index holds at or under `rel` that the file system no longer
            // offers goes.
            let keep: HashSet<&str> = found.iter().map(|f| f.path.as_str()).collect();
            for (path, id) in paths_under(&tx, &rel)? {
                if !keep.contains(path.as_str()) {
                    store::delete_file(&tx, id)?;
                    changes.appeared_or_left.push(path);
                    changes.stats.removed += 1;
                }
            }
            for f in &found {
                changes.stats.files += 1;
                let prev = store::file_state(&tx, &f.path)?;
                if prev.is_some_and(|p| p.unchanged(f.mtime_ns, f.size)) {
                    continue;
                }
                changes.apply(&tx, analyse(project.as_ref(), f, prev), prev)?;
            }
        }
        if changes.stats.changed() {
            changes.resolve(&tx, false)?;
            store::set_meta(&tx, "generation", &now_ns().to_string())?;
            crate::fts_merge::count_writes(&tx, changes.stats.indexed + changes.stats.removed)?;
        }
        tx.commit()?;
        if changes.stats.changed() {
            self.forget_frequencies();
        }
        Ok(changes.stats)
    }
}

/// `rel` and every indexed path under it, with ids.
fn paths_under(conn: &rusqlite::Connection, rel: &str) -> Result<Vec<(String, i64)>, IndexError> {
    let mut stmt = conn.prepare_cached(
        "SELECT path, id FROM files WHERE path = ?1 OR (path >= ?2 AND path < ?3)",
    )?;
    let lo = format!("{rel}/");
    let hi = format!("{rel}0"); // '0' follows '/'
    let rows = stmt
        .query_map(rusqlite::params![rel, lo, hi], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

/// A workspace-relative path with `/` separators, no `.` segments, no leading or trailing
/// slash.
fn normalize_rel(p: &str) -> String {
    p.replace('\\', "/")
        .split('/')
        .filter(|s| !s.is_empty() && *s != ".")
        .collect::<Vec<_>>()
        .join("/")
}
