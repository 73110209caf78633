//! The project a test run belongs to, read for its judgement: each file read beneath the
//! open workspace, bounded in size and count, recorded with its hash ([`Source`]).

use std::path::{Path, PathBuf};

/// The largest project file read to judge a test run.
const MAX_FILE_BYTES: u64 = 256 * 1024;
/// How many project files one judgement may read.
const MAX_READS: usize = 32;

/// A project file a test run's judgement read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    /// Relative to the workspace root.
    pub path: PathBuf,
    /// What in it was used (`scripts.test`, `target test`, `addopts`).
    pub what: String,
    /// The first 64 bits of SHA-256 of the whole file.
    pub hash: u64,
}

/// The project a test run's command belongs to.
#[derive(Debug, Clone)]
pub(crate) struct Project {
    pub(crate) root: PathBuf,
    /// The workspace, open: project files are read beneath it.
    dir: Option<keel_fs::beneath::DirHandle>,
    /// Where the command runs; `None` once a `cd` went somewhere not known.
    pub(crate) cwd: Option<PathBuf>,
    pub(crate) sources: Vec<Source>,
    /// Files the judgement looked for that were not there (relative to the workspace root):
    /// one appearing later changes what runs (a `GNUmakefile` make prefers, an optional
    /// include), so they are part of the fingerprint too (R6-14).
    pub(crate) absent: Vec<PathBuf>,
    reads: usize,
    /// A test run (`run_tests`): test runners count as its work.
    pub(crate) test_run: bool,
    /// What the line writes before the files it is judged by are read (R7-30).
    pub(crate) line: super::super::line_writes::LineWrites,
    /// The ignore rules read so far, by directory ([`super::super::unrecorded`]).
    pub(crate) ignores: std::collections::HashMap<PathBuf, Option<ignore::gitignore::Gitignore>>,
    /// The size bound of the files the workspace's snapshots record, in bytes (`None`: no
    /// bound): a write over a larger file destroys what no snapshot holds (R10-20).
    pub(crate) max_file_bytes: Option<u64>,
}

/// Where a command is judged: the workspace root, and the size bound of the files its
/// snapshots record. From a [`crate::Workspace`] (the bound the engine configured: the
/// user's `[snapshots] max_file_mb`), or from a bare root (the default bound).
#[derive(Debug, Clone, Copy)]
pub struct ProjectRoot<'a> {
    root: &'a Path,
    max_file_mb: u64,
}

impl<'a> ProjectRoot<'a> {
    /// The workspace root.
    pub fn path(&self) -> &'a Path {
        self.root
    }
}

impl<'a> From<&'a crate::Workspace> for ProjectRoot<'a> {
    fn from(ws: &'a crate::Workspace) -> Self {
        Self {
            root: ws.root(),
            max_file_mb: ws.snapshot_max_file_mb(),
        }
    }
}

impl<'a> From<&'a Path> for ProjectRoot<'a> {
    fn from(root: &'a Path) -> Self {
        Self {
            root,
            max_file_mb: crate::recorded::DEFAULT_MAX_FILE_MB,
        }
    }
}

impl<'a> From<&'a PathBuf> for ProjectRoot<'a> {
    fn from(root: &'a PathBuf) -> Self {
        root.as_path().into()
    }
}

impl Project {
    pub(crate) fn new(root: &Path, cwd: &Path, test_run: bool) -> Self {
        let root = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
        let cwd = cwd.canonicalize().unwrap_or_else(|_| cwd.to_path_buf());
        Self {
            cwd: cwd.starts_with(&root).then_some(cwd),
            dir: keel_fs::beneath::DirHandle::open(&root).ok(),
            root,
            sources: Vec::new(),
            absent: Vec::new(),
            reads: 0,
            test_run,
            line: Default::default(),
            ignores: Default::default(),
            max_file_bytes: crate::recorded::max_file_bytes(crate::recorded::DEFAULT_MAX_FILE_MB),
        }
    }

    /// The project of `root` (with its snapshots' size bound), the command run in `cwd`.
    pub(crate) fn at(root: ProjectRoot<'_>, cwd: &Path, test_run: bool) -> Self {
        Self::new(root.root, cwd, test_run).recording(root.max_file_mb)
    }

    /// The same project with snapshots recording files of at most `mb` MiB (0: no bound).
    pub(crate) fn recording(mut self, mb: u64) -> Self {
        self.max_file_bytes = crate::recorded::max_file_bytes(mb);
        self
    }

    /// A `cd` in the judged script: followed when it stays inside the workspace.
    pub(crate) fn cd(&mut self, dir: Option<&str>) {
        // `cd dat?`: where bash's expansion leads when it leads to one directory (R11-6).
        if let (Some(d), Some(cwd)) = (dir, &self.cwd)
            && super::super::glob_targets::has_glob(d)
        {
            let found: Vec<PathBuf> = super::super::glob_targets::expand(cwd, d)
                .into_iter()
                .filter(|p| p.is_dir())
                .collect();
            self.cwd = match found.as_slice() {
                [one] => {
                    Some(keel_fs::lexical_normalize(one)).filter(|n| n.starts_with(&self.root))
                }
                [] => Some(keel_fs::lexical_normalize(&cwd.join(d)))
                    .filter(|n| n.starts_with(&self.root)),
                _ => None,
            };
            return;
        }
        self.cwd = match (dir, &self.cwd) {
            (Some(d), Some(cwd)) if !d.starts_with(['/', '~']) && d != "-" => {
                let next = keel_fs::lexical_normalize(&cwd.join(d));
                next.starts_with(&self.root).then_some(next)
            }
            _ => None,
        };
    }

    /// Reads the project file `name` (relative to where the command runs): regular, inside
    /// the workspace once links are resolved, at most [`MAX_FILE_BYTES`]; recorded as a
    /// source. `Ok(None)` when it does not exist.
    pub(crate) fn read(&mut self, name: &str, what: &str) -> Result<Option<String>, String> {
        self.read_text(name, what).map_err(ReadFailure::into_reason)
    }

    pub(super) fn read_text(
        &mut self,
        name: &str,
        what: &str,
    ) -> Result<Option<String>, ReadFailure> {
        let cwd = self
            .cwd
            .clone()
            .ok_or_else(|| ReadFailure::Refused("the directory it runs in is not known".into()))?;
        self.read_path(&cwd.join(name), what)
    }

    pub(crate) fn read_at(&mut self, path: &Path, what: &str) -> Result<Option<String>, String> {
        self.read_path(path, what).map_err(ReadFailure::into_reason)
    }

    fn read_path(&mut self, path: &Path, what: &str) -> Result<Option<String>, ReadFailure> {
        use ReadFailure::Refused;
        if self.reads >= MAX_READS {
            return Err(Refused(format!(
                "it reads more than {MAX_READS} project files"
            )));
        }
        self.reads += 1;
        // Beneath the open workspace (keel-fs): a link out, a FIFO or a device is refused, and
        // nothing is opened by path.
        let outside = || Refused(format!("`{}` leads outside the workspace", path.display()));
        let rel = keel_fs::lexical_normalize(path)
            .strip_prefix(&self.root)
            .map_err(|_| outside())?
            .to_path_buf();
        let dir = match &self.dir {
            Some(d) => d,
            None => return Err(Refused("the workspace cannot be opened".into())),
        };
        let named = rel.clone();
        let target = match dir.resolve(&rel) {
            Ok(t) => t,
            Err(keel_fs::beneath::ResolveError::Escape { .. }) => return Err(outside()),
            Err(
                keel_fs::beneath::ResolveError::NotADirectory(_)
                | keel_fs::beneath::ResolveError::Dangling,
            ) => {
                self.judged_read(named, rel.clone(), None);
                return Ok(self.not_there(rel));
            }
            Err(e) => {
                return Err(Refused(format!("`{}` cannot be read: {e}", rel.display())));
            }
        };
        let rel = target.rel().to_path_buf();
        let info = match target.info() {
            Ok(Some(info)) => info,
            Ok(None) => {
                self.judged_read(named, rel.clone(), None);
                return Ok(self.not_there(rel));
            }
            Err(e) => {
                return Err(Refused(format!("`{}` cannot be read: {e}", rel.display())));
            }
        };
        self.judged_read(named, rel.clone(), Some(info));
        info.check_regular()
            .map_err(|e| Refused(format!("`{}`: {e}", rel.display())))?;
        if info.len > MAX_FILE_BYTES {
            return Err(Refused(format!(
                "`{}` is larger than {} KiB",
                rel.display(),
                MAX_FILE_BYTES / 1024
            )));
        }
        let bytes = target.read_bounded(MAX_FILE_BYTES).map_err(|e| {
            if e.kind() == std::io::ErrorKind::InvalidData {
                Refused(format!("`{}` grew while it was read", rel.display()))
            } else {
                Refused(format!("`{}`: {e}", rel.display()))
            }
        })?;
        // The first 64 bits of SHA-256: what approvals and the spawn check compare (R8-13;
        // FNV-1a has easy second preimages).
        let hash = crate::trust::sha256_u64(&bytes);
        let Ok(text) = String::from_utf8(bytes) else {
            return Err(ReadFailure::NotText);
        };
        self.sources.push(Source {
            path: rel,
            what: what.to_string(),
            hash,
        });
        Ok(Some(text))
    }
}

impl Project {
    /// Records `rel` as looked for and not there.
    fn not_there(&mut self, rel: PathBuf) -> Option<String> {
        if !self.absent.contains(&rel) {
            self.absent.push(rel);
        }
        None
    }

    /// The regular file `rel` (a workspace path, links followed beneath the workspace), at
    /// most `limit` bytes, without recording it as a source; `None` when it is not there or
    /// cannot be read.
    pub(crate) fn read_quietly(&self, rel: &Path, limit: u64) -> Option<Vec<u8>> {
        let target = self.dir.as_ref()?.resolve(rel).ok()?;
        let info = target.info().ok()??;
        info.check_regular().ok()?;
        (info.len <= limit).then_some(())?;
        target.read_bounded(limit).ok()
    }

    /// Where the workspace path `rel` leads now (links followed) and what is there; `None`
    /// when it leads outside or cannot be resolved.
    pub(crate) fn resolve_existing(
        &self,
        rel: &Path,
    ) -> Option<(PathBuf, Option<keel_fs::beneath::FileInfo>)> {
        let found = self.dir.as_ref()?.resolve(rel).ok()?;
        let info = found.info().ok().flatten();
        Some((found.rel().to_path_buf(), info))
    }

    /// What is at `path` (absolute, inside the workspace), beneath the open workspace and
    /// without following a final link; `None` when nothing is there or it is outside.
    pub(crate) fn kind(&self, path: &Path) -> Option<keel_fs::beneath::FileKind> {
        let rel = keel_fs::lexical_normalize(path)
            .strip_prefix(&self.root)
            .ok()?
            .to_path_buf();
        let dir = self.dir.as_ref()?;
        Some(dir.resolve_entry(&rel).ok()?.info().ok()??.kind)
    }

    /// The subdirectories of `path` (absolute, inside the workspace), listed beneath the open
    /// workspace (links are not directories here), sorted.
    pub(crate) fn subdirs(&self, path: &Path) -> Vec<PathBuf> {
        let Some(rel) = keel_fs::lexical_normalize(path)
            .strip_prefix(&self.root)
            .ok()
            .and_then(|r| r.to_str().map(str::to_string))
        else {
            return Vec::new();
        };
        let Some(dir) = &self.dir else {
            return Vec::new();
        };
        keel_fs::project::ProjectDir::of(dir)
            .list(&rel)
            .into_iter()
            .filter(|e| e.kind == keel_fs::beneath::FileKind::Dir)
            .map(|e| path.join(e.name))
            .collect()
    }
}

/// Why a project file was not read.
pub(super) enum ReadFailure {
    /// Not UTF-8 text (a built program).
    NotText,
    /// Outside the workspace, not a regular file, too large, too many reads.
    Refused(String),
}

impl ReadFailure {
    fn into_reason(self) -> String {
        match self {
            ReadFailure::NotText => "it is not a text file".into(),
            ReadFailure::Refused(why) => why,
        }
    }
}
