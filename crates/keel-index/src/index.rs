//! [`Index`]: a workspace's index database and the operations on it.

use std::path::{Path, PathBuf};

use rusqlite::Connection;

use crate::walk::Walker;
use crate::{IndexError, IndexSettings, store};

/// Where the index lives, relative to the workspace root.
pub const INDEX_DIR: &str = ".keel";
/// The database file name in [`INDEX_DIR`].
pub const INDEX_FILE: &str = "index.db";

/// Receives build progress (a terminal progress bar, a log line). Every method has a no-op
/// default.
pub trait Progress: Send + Sync {
    /// A step of the build starts: [`Phase::Scanning`] the tree, [`Phase::Reading`] the files
    /// (then `planned` and `advanced`), [`Phase::Linking`] the imports and writing the
    /// result. On a large tree the first and the last take seconds of their own.
    fn phase(&self, _phase: Phase) {}
    /// The walk found `files` admissible files, of which `to_read` need (re)reading.
    fn planned(&self, _files: usize, _to_read: usize) {}
    /// `done` of the planned files are processed.
    fn advanced(&self, _done: usize) {}
    /// Whether the caller wants the build to stop (it stops at the next batch boundary;
    /// what is written stays, and the next refresh resumes).
    fn cancelled(&self) -> bool {
        false
    }
}

/// A step of an index build.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Walking the tree: which files there are, and which changed.
    Scanning,
    /// Reading and parsing the changed files.
    Reading,
    /// Resolving imports between files and committing the result.
    Linking,
}

impl Phase {
    /// What the step does, for a progress line.
    pub fn label(self) -> &'static str {
        match self {
            Phase::Scanning => "scanning the workspace",
            Phase::Reading => "reading files",
            Phase::Linking => "linking imports",
        }
    }
}

/// Progress that nobody watches.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoProgress;

impl Progress for NoProgress {}

/// What a refresh did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RefreshStats {
    /// Admissible files seen (for a path refresh: the paths examined).
    pub files: usize,
    /// Files (re)indexed because they are new or their content changed.
    pub indexed: usize,
    /// Files removed from the index (deleted, now ignored, or now binary/generated).
    pub removed: usize,
    /// Files whose metadata changed but whose content did not.
    pub touched: usize,
    /// Files whose imports were resolved again.
    pub resolved: usize,
}

impl RefreshStats {
    /// Whether anything in the index changed.
    pub fn changed(&self) -> bool {
        self.indexed + self.removed > 0
    }
}

/// Counts describing an index.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct IndexStats {
    pub files: u64,
    /// Source bytes of the indexed files.
    pub source_bytes: u64,
    pub chunks: u64,
    pub symbols: u64,
    pub imports: u64,
    /// Imports that resolved to a workspace file.
    pub resolved_imports: u64,
    /// Files by language (`text` for files without a parser), largest first.
    pub languages: Vec<(String, u64)>,
    /// Files the parser reported syntax errors in.
    pub parse_errors: u64,
    /// Size of the database file(s) on disk.
    pub db_bytes: u64,
    /// `ready`, `building` (a build was interrupted; the next refresh completes it) or
    /// `empty`.
    pub state: String,
}

/// A workspace index: open it, [`Index::refresh`] it, search it.
pub struct Index {
    pub(crate) root: PathBuf,
    pub(crate) db_path: PathBuf,
    pub(crate) settings: IndexSettings,
    pub(crate) conn: Connection,
    pub(crate) walker: Walker,
    /// Chunk document frequencies of query words (capped), and the chunk count; cleared when
    /// the index changes.
    pub(crate) df_cache: std::sync::Mutex<std::collections::HashMap<String, usize>>,
    /// A second connection for reading, opened by the first search that reads on two
    /// threads.
    pub(crate) reader: std::sync::Mutex<Option<Connection>>,
    /// The rows of the message catalogs' chunks and files (`.po`, `.pot`), which the
    /// full-text passes leave out; cleared when the index changes.
    pub(crate) catalogs: std::sync::Mutex<Option<std::sync::Arc<crate::search::Catalogs>>>,
}

impl std::fmt::Debug for Index {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Index")
            .field("root", &self.root)
            .field("db", &self.db_path)
            .finish_non_exhaustive()
    }
}

impl Index {
    /// The database path of the index of `root`.
    pub fn db_path(root: &Path) -> PathBuf {
        root.join(INDEX_DIR).join(INDEX_FILE)
    }

    /// Whether `root` has an index database (built or partly built).
    pub fn exists(root: &Path) -> bool {
        Self::db_path(root).is_file()
    }

    /// Opens the index of the workspace `root`, creating `.keel/index.db` (and a
    /// `.keel/.gitignore` that keeps everything but the project's `config.toml` and `ignore`
    /// out of version control, itself included) when absent.
    /// Opening does not build: call [`Index::refresh`].
    pub fn open(root: &Path, settings: IndexSettings) -> Result<Self, IndexError> {
        let db_path = prepare_state_dir(root)?;
        Self::open_at(root, &db_path, settings)
    }

    /// Opens an index of `root` stored at `db_path` (benchmarks, tests).
    pub fn open_at(
        root: &Path,
        db_path: &Path,
        settings: IndexSettings,
    ) -> Result<Self, IndexError> {
        let root = root.canonicalize().map_err(|e| IndexError::io(root, e))?;
        let conn = store::open(db_path)?;
        let walker = Walker::new(&root, &settings);
        Ok(Self {
            root,
            db_path: db_path.to_path_buf(),
            settings,
            conn,
            walker,
            df_cache: std::sync::Mutex::new(std::collections::HashMap::new()),
            reader: std::sync::Mutex::new(None),
            catalogs: std::sync::Mutex::new(None),
        })
    }

    /// The workspace root (canonical).
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The settings the index was opened with.
    pub fn settings(&self) -> &IndexSettings {
        &self.settings
    }

    /// Whether a complete build exists (a refresh has finished at least once and none was
    /// interrupted since).
    pub fn is_built(&self) -> bool {
        matches!(store::meta(&self.conn, "state"), Ok(Some(s)) if s == "ready")
    }

    /// [`Index::codemap`], cached in the database until the index next changes.
    pub fn codemap_cached(&self, budget_tokens: usize) -> Result<String, IndexError> {
        let generation = store::meta(&self.conn, "generation")?.unwrap_or_default();
        let key = format!("{generation}:{budget_tokens}");
        if let Some(cached) = store::meta(&self.conn, "codemap")?
            && let Some((k, text)) = cached.split_once('\n')
            && k == key
        {
            return Ok(text.to_string());
        }
        let map = self.codemap(budget_tokens)?;
        // Best effort: another process may hold the write lock.
        let _ = store::set_meta(&self.conn, "codemap", &format!("{key}\n{map}"));
        Ok(map)
    }

    /// Counts describing the index.
    pub fn stats(&self) -> Result<IndexStats, IndexError> {
        let c = &self.conn;
        let count = |sql: &str| -> Result<u64, IndexError> {
            Ok(c.query_row(sql, [], |r| r.get::<_, i64>(0))?.max(0) as u64)
        };
        let mut stmt = c.prepare(
            "SELECT COALESCE(language, 'text'), COUNT(*) AS n FROM files GROUP BY 1 ORDER BY n DESC, 1",
        )?;
        let languages = stmt
            .query_map([], |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?.max(0) as u64))
            })?
            .collect::<Result<Vec<_>, _>>()?;
        let db_bytes = ["", "-wal"]
            .iter()
            .filter_map(|s| {
                let mut p = self.db_path.clone().into_os_string();
                p.push(s);
                std::fs::metadata(PathBuf::from(p)).ok()
            })
            .map(|m| m.len())
            .sum();
        Ok(IndexStats {
            files: count("SELECT COUNT(*) FROM files")?,
            source_bytes: count("SELECT COALESCE(SUM(size), 0) FROM files")?,
            chunks: count("SELECT COUNT(*) FROM chunks")?,
            symbols: count("SELECT COUNT(*) FROM symbols")?,
            imports: count(
                "SELECT COUNT(*) FROM (SELECT DISTINCT file_id, spec, line FROM imports)",
            )?,
            resolved_imports: count("SELECT COUNT(*) FROM imports WHERE target IS NOT NULL")?,
            languages,
            parse_errors: count("SELECT COUNT(*) FROM files WHERE parse_error != 0")?,
            db_bytes,
            state: store::meta(c, "state")?.unwrap_or_else(|| "empty".into()),
        })
    }

    /// The whole content of the index as canonical text (sorted, without row ids): files,
    /// chunks, symbols, imports with their targets, and the full-text vocabularies with
    /// document and occurrence counts. Two indexes of the same tree dump identically however
    /// they were built (tests of incremental refresh and crash recovery rely on this).
    pub fn dump(&self) -> Result<String, IndexError> {
        let c = &self.conn;
        let mut out = String::new();
        let mut section = |sql: &str| -> Result<(), IndexError> {
            let mut stmt = c.prepare(sql)?;
            let n = stmt.column_count();
            let mut rows = stmt.query([])?;
            while let Some(r) = rows.next()? {
                let mut fields = Vec::with_capacity(n);
                for i in 0..n {
                    let v: rusqlite::types::Value = r.get(i)?;
                    fields.push(match v {
                        rusqlite::types::Value::Null => "-".to_string(),
                        rusqlite::types::Value::Integer(i) => i.to_string(),
                        rusqlite::types::Value::Real(f) => f.to_string(),
                        rusqlite::types::Value::Text(t) => t,
                        rusqlite::types::Value::Blob(b) => format!("{b:?}"),
                    });
                }
                out.push_str(&fields.join("\t"));
                out.push('\n');
            }
            Ok(())
        };
        section(
            "SELECT 'F', path, hash, size, language, lines, parse_error FROM files ORDER BY path",
        )?;
        section(
            "SELECT 'C', f.path, c.start_line, c.end_line, c.symbol, c.kind FROM chunks c
             JOIN files f ON f.id = c.file_id ORDER BY f.path, c.start_line",
        )?;
        section(
            "SELECT 'S', f.path, s.qualified, s.kind, s.start_line, s.end_line, s.depth FROM symbols s
             JOIN files f ON f.id = s.file_id ORDER BY f.path, s.start_line, s.qualified, s.kind",
        )?;
        section(
            "SELECT 'I', f.path, i.spec, i.line, i.target FROM imports i
             JOIN files f ON f.id = i.file_id ORDER BY f.path, i.spec, i.line, i.target",
        )?;
        section(
            "SELECT 'K', f.path, k.key FROM import_keys k JOIN files f ON f.id = k.file_id
             ORDER BY f.path, k.key",
        )?;
        for t in ["chunks_fts", "paths_fts", "symbols_fts"] {
            c.execute_batch(&format!(
                "DROP TABLE IF EXISTS temp.v_{t}; CREATE VIRTUAL TABLE temp.v_{t} USING fts5vocab(main, {t}, 'row');"
            ))?;
            section(&format!(
                "SELECT 'V{t}', term, doc, cnt FROM temp.v_{t} ORDER BY term"
            ))?;
        }
        Ok(out)
    }
}

/// The `.keel/.gitignore` Keel writes when there is none.
const STATE_GITIGNORE: &str = "# Keel's local state (the index database): never commit it. The project's\n# config.toml and ignore file stay visible to git.\n*\n!config.toml\n!ignore\n";

/// Creates `.keel/` and its `.gitignore` beneath the open workspace directory and returns the
/// database path to open, after checking that the database (and SQLite's companion files) is
/// absent or a regular file — never a symlink: a repository shipping `.keel/index.db` linked
/// to another SQLite database would have Keel rewrite it, a dangling one would have Keel
/// create a database wherever it points. `.keel` itself must be a real directory.
fn prepare_state_dir(root: &Path) -> Result<PathBuf, IndexError> {
    use keel_fs::beneath::{DirHandle, FileKind, WriteMode};
    let ws = DirHandle::open(root).map_err(|e| IndexError::io(root, e))?;
    let refuse = |rel: &str, what: &str| IndexError::Io {
        path: ws.path().join(rel),
        message: format!(
            "it is {what}; Keel keeps its index only in a real file inside the workspace's real `.keel/` directory — remove it"
        ),
    };
    let entry = |rel: &str| {
        ws.resolve_entry(Path::new(rel))
            .map_err(|e| IndexError::Io {
                path: ws.path().join(rel),
                message: e.to_string(),
            })
    };
    let kind = |found: &keel_fs::beneath::ResolvedPath, rel: &str| {
        found
            .info()
            .map(|i| i.map(|i| i.kind))
            .map_err(|e| IndexError::io(&ws.path().join(rel), e))
    };
    let dir = entry(INDEX_DIR)?;
    match kind(&dir, INDEX_DIR)? {
        None => dir
            .create_dir_all()
            .map_err(|e| IndexError::io(&ws.path().join(INDEX_DIR), e))?,
        Some(FileKind::Dir) => {}
        Some(other) => return Err(refuse(INDEX_DIR, other.describe())),
    }
    let gitignore_rel = format!("{INDEX_DIR}/.gitignore");
    let gitignore = entry(&gitignore_rel)?;
    if kind(&gitignore, &gitignore_rel)?.is_none() {
        // Created new beneath `.keel`: never through a link, never over anything.
        match gitignore.write_atomic(STATE_GITIGNORE.as_bytes(), WriteMode::CreateNew, None) {
            Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => {
                return Err(IndexError::io(&ws.path().join(&gitignore_rel), e));
            }
            _ => {}
        }
    }
    // Owner-only (red-team pass 5, R5-9): the index holds the text of every indexed file,
    // private ones too. The database is created 0600 before SQLite opens it (SQLite gives its
    // `-wal`, `-shm` and `-journal` the database's mode); files an older Keel left 0644 are
    // tightened through a descriptor opened without following links.
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let rel = format!("{INDEX_DIR}/{INDEX_FILE}{suffix}");
        let found = entry(&rel)?;
        match kind(&found, &rel)? {
            None if suffix.is_empty() => {
                match found.write_atomic(&[], WriteMode::CreateNew, Some(0o600)) {
                    Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => {
                        return Err(IndexError::io(&ws.path().join(&rel), e));
                    }
                    _ => {}
                }
            }
            None => {}
            Some(FileKind::File) => {
                make_private(&found).map_err(|e| IndexError::io(&ws.path().join(&rel), e))?
            }
            Some(other) => return Err(refuse(&rel, other.describe())),
        }
    }
    Ok(ws.path().join(INDEX_DIR).join(INDEX_FILE))
}

/// Removes group and other access from the regular file `found` (never adds any); a file
/// owned by someone else is left as it is.
fn make_private(found: &keel_fs::beneath::ResolvedPath) -> std::io::Result<()> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let (file, _) = found.open_regular()?;
    let mode = file.metadata()?.mode() & 0o7777;
    if mode & 0o077 == 0 {
        return Ok(());
    }
    match file.set_permissions(std::fs::Permissions::from_mode(mode & !0o077)) {
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => Ok(()),
        other => other,
    }
}
