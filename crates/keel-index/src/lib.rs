//! Keel's codebase intelligence: what is defined where, and where to look for something.
//!
//! - [`symbols`]: tree-sitter symbol extraction for one file (name, kind, container, exact
//!   span), the lookup behind symbol-level reads, outlines.
//! - [`Index`]: the always-on workspace index — one SQLite database per workspace
//!   (`.keel/index.db`) with FTS5/BM25 over code chunks and paths, the symbol table and the
//!   import graph; built on first use, refreshed incrementally by hash/mtime or from file
//!   events ([`watch`]). Builds are transactional per batch and resume after interruption.
//! - [`search`]: hybrid ranking (BM25 chunks + symbol names + paths + graph proximity).
//! - [`codemap`]: a deterministic structural overview within a token budget.
//! - [`grep`]: exact regex search over the same files (ripgrep's searcher).
//!
//! This crate does not run tools, talk to models or render terminal output; callers pass a
//! [`Progress`] to show build progress.

mod build;
pub mod chunk;
pub mod codemap;
pub mod defterms;
mod fts_merge;
pub mod grep;
pub mod ignore_rules;
pub mod imports;
mod index;
pub mod pathrole;
pub mod search;
pub mod service;
mod store;
pub mod symbols;
pub mod terms;
pub mod walk;
pub mod watch;

pub use index::{Index, IndexStats, NoProgress, Phase, Progress, RefreshStats};
pub use search::{Hit, Ranking, SearchKind, SearchQuery};
pub use service::{Freshness, SharedIndex};
pub use symbols::{
    ExtractError, FileSymbols, Language, Symbol, SymbolExtractor, SymbolKind, TreeSitterExtractor,
};

use std::path::{Path, PathBuf};

/// How the index chooses and reads files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexSettings {
    /// Extra gitignore-style patterns left out of the index (on top of `.gitignore`,
    /// `.ignore`, `.keel/ignore` and [`walk::DEFAULT_IGNORES`]).
    pub ignore: Vec<String>,
    /// Files larger than this (bytes) are left out.
    pub max_file_bytes: u64,
    /// Worker threads for builds; 0 means one per core.
    pub threads: usize,
}

impl Default for IndexSettings {
    fn default() -> Self {
        Self {
            ignore: Vec::new(),
            max_file_bytes: 1024 * 1024,
            threads: 0,
        }
    }
}

/// What went wrong with the index.
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    #[error("cannot open the index database {path}: {message} (delete it to rebuild the index)")]
    Open { path: PathBuf, message: String },
    #[error("index database error: {0} (delete .keel/index.db to rebuild the index)")]
    Sqlite(#[from] rusqlite::Error),
    #[error("cannot prepare {path}: {message}")]
    Io { path: PathBuf, message: String },
    #[error("invalid path glob `{glob}`: {message}")]
    Glob { glob: String, message: String },
    #[error("invalid regular expression `{pattern}`: {message}")]
    Pattern { pattern: String, message: String },
    #[error("indexing was cancelled; the next refresh resumes where it stopped")]
    Cancelled,
    #[error("the file watcher failed: {0}")]
    Watch(String),
}

impl IndexError {
    pub(crate) fn open(path: &Path, e: rusqlite::Error) -> Self {
        IndexError::Open {
            path: path.to_path_buf(),
            message: e.to_string(),
        }
    }

    pub(crate) fn io(path: &Path, e: std::io::Error) -> Self {
        IndexError::Io {
            path: path.to_path_buf(),
            message: e.to_string(),
        }
    }
}

/// FNV-1a, 64-bit: stable across runs and platforms (the one content hash, from keel-protocol).
pub(crate) use keel_protocol::fnv1a as content_hash;

/// Nanoseconds since the Unix epoch, now.
pub(crate) fn now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}
