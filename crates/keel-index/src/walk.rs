//! Which files the index holds: a parallel walk honouring `.gitignore`, `.ignore`,
//! `.git/info/exclude`, `.keel/ignore`, Keel's default ignores (version control and tool
//! state, dependencies, build output, lock files, minified, generated and binary files) and a
//! size cap; and the same decision for a single path, for refreshes driven by file events.
//!
//! The user's global gitignore is deliberately not read: the index of a repository must not
//! depend on who builds it.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::UNIX_EPOCH;

use ignore::gitignore::{Gitignore, GitignoreBuilder};
use keel_fs::beneath::{DirHandle, FileKind};
use keel_fs::walk::{Visit, WalkOptions};

use crate::IndexSettings;
use crate::ignore_rules::IgnoreRules;

/// Patterns (gitignore syntax) every index leaves out.
pub const DEFAULT_IGNORES: &[&str] = &[
    // Version control and tool state.
    ".git/",
    ".hg/",
    ".svn/",
    ".keel/",
    ".idea/",
    ".vscode/",
    // Dependencies and vendored code.
    "node_modules/",
    "bower_components/",
    "/vendor/",
    ".venv/",
    "venv/",
    "site-packages/",
    "__pycache__/",
    ".tox/",
    ".nox/",
    ".mypy_cache/",
    ".pytest_cache/",
    ".ruff_cache/",
    ".yarn/",
    // Build output.
    "target/",
    "dist/",
    "/build/",
    "/out/",
    "/coverage/",
    ".next/",
    ".nuxt/",
    ".gradle/",
    ".terraform/",
    "*.egg-info/",
    // Lock files.
    "*.lock",
    "package-lock.json",
    "npm-shrinkwrap.json",
    "pnpm-lock.yaml",
    "go.sum",
    // Minified, generated and compiled files.
    "*.min.js",
    "*.min.css",
    "*.map",
    "*.pb.go",
    "*_pb2.py",
    "*_pb2_grpc.py",
    "*.pyc",
    "*.pyo",
    "*.class",
    "*.o",
    "*.a",
    "*.so",
    "*.dylib",
    "*.dll",
    "*.exe",
    "*.wasm",
    // Binary formats.
    "*.png",
    "*.jpg",
    "*.jpeg",
    "*.gif",
    "*.ico",
    "*.webp",
    "*.bmp",
    "*.pdf",
    "*.zip",
    "*.gz",
    "*.tgz",
    "*.xz",
    "*.bz2",
    "*.zst",
    "*.7z",
    "*.jar",
    "*.woff",
    "*.woff2",
    "*.ttf",
    "*.otf",
    "*.eot",
    "*.mp3",
    "*.mp4",
    "*.mov",
    "*.sqlite",
    "*.db",
    "*.db-wal",
    "*.db-shm",
];

/// A file the walk admitted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoundFile {
    /// Workspace-relative, `/`-separated.
    pub path: String,
    pub size: u64,
    /// Modification time in nanoseconds since the Unix epoch (0 when unknown).
    pub mtime_ns: i64,
}

/// Why a file's content keeps it out of the index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContentSkip {
    Binary,
    Generated,
    Minified,
}

/// Decides which files belong in the index.
#[derive(Debug)]
pub struct Walker {
    root: PathBuf,
    /// The workspace, open (`None` when it could not be opened: nothing is found).
    dir: Option<DirHandle>,
    settings: IndexSettings,
    /// Default ignores, configured patterns and `.keel/ignore`, relative to the root.
    extra: Gitignore,
    /// `.gitignore` + `.ignore` per directory and `.git/info/exclude`, read as project files
    /// (see [`crate::ignore_rules`]).
    rules: IgnoreRules,
}

impl Walker {
    /// A walker for `root`. Invalid configured patterns are skipped (the walk must not fail
    /// over one bad line); [`Walker::pattern_errors`] reports them.
    pub fn new(root: &Path, settings: &IndexSettings) -> Self {
        let mut b = GitignoreBuilder::new(root);
        for line in DEFAULT_IGNORES {
            let _ = b.add_line(None, line);
        }
        for line in &settings.ignore {
            let _ = b.add_line(None, line);
        }
        // A project file: beneath the workspace, regular, bounded (a FIFO cannot hang the
        // index).
        let dir = DirHandle::open(root).ok();
        let ignore_file = dir
            .as_ref()
            .map(keel_fs::project::ProjectDir::of)
            .and_then(|p| p.read(".keel/ignore", keel_fs::project::CONFIG_LIMIT).ok())
            .flatten();
        if let Some(text) = ignore_file {
            for line in text.lines() {
                let _ = b.add_line(None, line);
            }
        }
        let extra = b.build().unwrap_or_else(|_| Gitignore::empty());
        Self {
            root: root.to_path_buf(),
            dir,
            settings: settings.clone(),
            extra,
            rules: IgnoreRules::new(root),
        }
    }

    /// Configured ignore patterns that are not valid gitignore lines.
    pub fn pattern_errors(settings: &IndexSettings) -> Vec<String> {
        settings
            .ignore
            .iter()
            .filter_map(|l| {
                let mut b = GitignoreBuilder::new("/");
                let checked = b
                    .add_line(None, l)
                    .map(|_| ())
                    .and_then(|_| b.build().map(|_| ()));
                checked.err().map(|e| format!("`{l}`: {e}"))
            })
            .collect()
    }

    /// The workspace root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Every admitted file under `dir` (the root when `None`), sorted by path. Uses all
    /// cores (or `settings.threads`). Directories are listed beneath the open workspace
    /// (`keel_fs::walk`): one swapped for a symlink mid-walk is not entered, so nothing
    /// outside is ever listed.
    pub fn walk(&self, dir: Option<&str>) -> Vec<FoundFile> {
        let Some(handle) = &self.dir else {
            return Vec::new();
        };
        let start = Path::new(dir.unwrap_or(""));
        let found = Mutex::new(Vec::new());
        let extra = &self.extra;
        let rules = &self.rules;
        let max = self.settings.max_file_bytes;
        let _ = handle.walk_parallel(start, WalkOptions::default(), self.settings.threads, |e| {
            let Some(rel) = e.rel_str() else {
                return Visit::Skip;
            };
            let is_dir = e.is_dir();
            if extra.matched(rel, is_dir).is_ignore() || rules.ignored(rel, is_dir) {
                return Visit::Skip;
            }
            if e.is_file()
                && e.len <= max
                && let Ok(mut f) = found.lock()
            {
                f.push(FoundFile {
                    path: rel.to_string(),
                    size: e.len,
                    mtime_ns: e.mtime_ns,
                });
            }
            Visit::Continue
        });
        let mut files = found.into_inner().unwrap_or_default();
        files.sort_by(|a, b| a.path.cmp(&b.path));
        files
    }

    /// The same decision as [`Walker::walk`] for one workspace-relative path: `Some` when it
    /// is a regular file the index should hold (looked at beneath the open workspace, a final
    /// symlink not followed).
    pub fn check(&self, rel: &str) -> Option<FoundFile> {
        let info = self
            .dir
            .as_ref()?
            .resolve_entry(Path::new(rel))
            .ok()?
            .info()
            .ok()??;
        if info.kind != FileKind::File || info.len > self.settings.max_file_bytes {
            return None;
        }
        if self.is_ignored(rel, false) {
            return None;
        }
        Some(FoundFile {
            path: rel.to_string(),
            size: info.len,
            mtime_ns: info.mtime_ns,
        })
    }

    /// Whether `rel` (or a directory above it) is ignored by any rule.
    pub fn is_ignored(&self, rel: &str, is_dir: bool) -> bool {
        let parts: Vec<&str> = rel.split('/').filter(|p| !p.is_empty()).collect();
        if parts.is_empty() {
            return false;
        }
        for i in 0..parts.len() {
            let sub = parts[..=i].join("/");
            let sub_is_dir = i + 1 < parts.len() || is_dir;
            if self.extra.matched(&sub, sub_is_dir).is_ignore() {
                return true;
            }
            if self.rules.ignored(&sub, sub_is_dir) {
                return true;
            }
        }
        false
    }
}

/// Whether the content keeps a file out: binary (a NUL byte near the start), generated (a
/// `@generated` or "DO NOT EDIT" marker near the top) or minified (very long lines).
pub fn content_skip(bytes: &[u8]) -> Option<ContentSkip> {
    let head = &bytes[..bytes.len().min(8192)];
    if head.contains(&0) {
        return Some(ContentSkip::Binary);
    }
    let top = &bytes[..bytes.len().min(1024)];
    let top = String::from_utf8_lossy(top);
    if top.contains("@generated") || top.contains("DO NOT EDIT") {
        return Some(ContentSkip::Generated);
    }
    if bytes.len() > 2048 {
        let lines = bytecount_newlines(bytes) + 1;
        if bytes.len() / lines > 400 {
            return Some(ContentSkip::Minified);
        }
    }
    None
}

fn bytecount_newlines(bytes: &[u8]) -> usize {
    bytes.iter().filter(|b| **b == b'\n').count()
}

/// A workspace-relative path as a `/`-separated string (`None` for non-UTF-8 names).
pub fn rel_string(rel: &Path) -> Option<String> {
    let mut out = String::new();
    for c in rel.components() {
        let s = c.as_os_str().to_str()?;
        if !out.is_empty() {
            out.push('/');
        }
        out.push_str(s);
    }
    Some(out)
}

/// The modification time of `meta` in nanoseconds since the epoch.
pub fn mtime_ns(meta: &std::fs::Metadata) -> i64 {
    meta.modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map(|d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(root: &Path, rel: &str, text: &str) {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap_or(root)).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(p, text).unwrap_or_else(|e| panic!("{e}"));
    }

    #[test]
    fn walk_and_check_agree_on_ignores() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let root = dir.path();
        write(root, ".gitignore", "*.log\nsecret/\n");
        write(root, "src/.gitignore", "gen_*.rs\n!gen_keep.rs\n");
        write(root, ".keel/ignore", "docs/private/\n");
        write(root, "src/main.rs", "fn main() {}\n");
        write(root, "src/gen_a.rs", "x\n");
        write(root, "src/gen_keep.rs", "x\n");
        write(root, "app.log", "x\n");
        write(root, "secret/key.txt", "x\n");
        write(root, "docs/private/a.md", "x\n");
        write(root, "docs/public.md", "x\n");
        write(root, "node_modules/x/index.js", "x\n");
        write(root, "Cargo.lock", "x\n");
        write(root, "web/app.min.js", "x\n");
        write(root, "big.txt", &"x".repeat(2000));
        write(root, "custom/skip.py", "x\n");
        let settings = IndexSettings {
            ignore: vec!["custom/".into()],
            max_file_bytes: 1000,
            ..IndexSettings::default()
        };
        let w = Walker::new(root, &settings);
        let paths: Vec<String> = w.walk(None).into_iter().map(|f| f.path).collect();
        assert_eq!(
            paths,
            [
                ".gitignore",
                "docs/public.md",
                "src/.gitignore",
                "src/gen_keep.rs",
                "src/main.rs"
            ]
        );
        for p in [
            "src/main.rs",
            "src/gen_a.rs",
            "src/gen_keep.rs",
            "app.log",
            "secret/key.txt",
            "docs/private/a.md",
            "docs/public.md",
            "node_modules/x/index.js",
            "Cargo.lock",
            "web/app.min.js",
            "big.txt",
            "custom/skip.py",
        ] {
            assert_eq!(
                w.check(p).is_some(),
                paths.iter().any(|x| x == p),
                "check and walk disagree on {p}"
            );
        }
        let sub: Vec<String> = w.walk(Some("src")).into_iter().map(|f| f.path).collect();
        assert_eq!(sub, ["src/.gitignore", "src/gen_keep.rs", "src/main.rs"]);
    }

    #[test]
    fn content_checks() {
        assert_eq!(content_skip(b"ab\0cd"), Some(ContentSkip::Binary));
        assert_eq!(
            content_skip(b"// Code generated by protoc. DO NOT EDIT.\npackage x\n"),
            Some(ContentSkip::Generated)
        );
        assert_eq!(
            content_skip("x".repeat(5000).as_bytes()),
            Some(ContentSkip::Minified)
        );
        assert_eq!(content_skip(b"fn main() {}\n"), None);
    }
}
