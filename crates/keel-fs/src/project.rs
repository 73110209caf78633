//! Project files: what a repository ships for Keel itself to read — `AGENTS.md`, `CLAUDE.md`
//! (root and nested), `.keel/rules/*.md`, skills' `SKILL.md`, `.keel/config.toml`,
//! `.keel/constitution.json`, `.mcp.json`, flows. A repository is hostile input, so these are
//! read only through [`ProjectDir`]:
//!
//! - resolved beneath the open workspace directory ([`crate::beneath`]): a symlink may point
//!   elsewhere inside the workspace, never out of it;
//! - only regular files: a FIFO, socket or device is refused before it is opened (and a FIFO
//!   swapped in at the last moment is opened non-blocking, so it can never hang Keel);
//! - size-bounded: a file over its limit is refused with a message naming the limit, never
//!   read without end (a link to `/dev/zero` is refused as a device or a link out anyway).
//!
//! Every refusal is a [`ProjectFileError`] naming the file, what it is and what to do.
//! The loaders (keel-index, keel-tools, keel-engine, keel-mcp, keel-flow) read project files
//! with nothing else; CI checks it (`.ci/clippy-project-files`).

use std::path::{Path, PathBuf};

use crate::beneath::{DirHandle, FileInfo, FileKind, ResolveError, ResolvedPath};

/// Limit for instruction files (AGENTS.md, CLAUDE.md, rules, skills): far above what a model
/// should be asked to read as instructions, far below what could exhaust memory.
pub const INSTRUCTIONS_LIMIT: u64 = 256 * 1024;
/// Limit for configuration files (`.keel/config.toml`, `.keel/constitution.json`,
/// `.mcp.json`).
pub const CONFIG_LIMIT: u64 = 256 * 1024;
/// Limit for a flow definition or an eval suite.
pub const DEFINITION_LIMIT: u64 = 1024 * 1024;

/// Why a project file was not read.
#[derive(Debug, thiserror::Error)]
#[error("`{path}` {problem}")]
pub struct ProjectFileError {
    /// The file, relative to the workspace root (as the repository names it).
    pub path: String,
    pub problem: Problem,
}

/// What was wrong with a project file.
#[derive(Debug, thiserror::Error)]
pub enum Problem {
    #[error(
        "is a symlink leading outside the workspace (to `{target}`); Keel reads project files \
         only inside the workspace — replace the link with the file itself"
    )]
    LinksOut { target: String },
    #[error("is a symlink whose target does not exist; remove it or point it at a file")]
    Dangling,
    #[error(
        "is {}, not a regular file; Keel reads project files only when they are regular \
         files — replace it with one, or remove it", .0.describe()
    )]
    NotRegular(FileKind),
    #[error(
        "is larger than {limit}, the limit for this kind of project file; shorten it (or split \
         it up)"
    )]
    TooLarge { limit: String },
    #[error("is not valid UTF-8 text; save it as UTF-8")]
    NotUtf8,
    #[error("cannot be read: {0}")]
    Io(String),
}

/// `dir/name` for workspace-relative paths, `name` when `dir` is the root (`""`).
pub fn join_rel(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_string()
    } else {
        format!("{dir}/{name}")
    }
}

/// A workspace's project files, read through the open workspace directory.
#[derive(Debug, Clone)]
pub struct ProjectDir {
    dir: DirHandle,
}

/// One entry of a project directory listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProjectEntry {
    /// The entry's name (valid UTF-8 names only; others are left out).
    pub name: String,
    /// What it is; a symlink is reported as one (not followed).
    pub kind: FileKind,
}

impl ProjectDir {
    /// Opens the workspace at `root`.
    pub fn open(root: &Path) -> std::io::Result<Self> {
        Ok(Self {
            dir: DirHandle::open(root)?,
        })
    }

    /// The project files beneath an already open directory.
    pub fn of(dir: &DirHandle) -> Self {
        Self { dir: dir.clone() }
    }

    /// The directory `rel` beneath the root as a project directory of its own (symlinks in
    /// it may not leave it).
    pub fn subdir(&self, rel: &str) -> Result<ProjectDir, ProjectFileError> {
        let error = |problem| ProjectFileError {
            path: rel.to_string(),
            problem,
        };
        self.locate(rel)?
            .ok_or_else(|| error(Problem::Io("is not a directory".into())))?;
        self.dir
            .subdir(Path::new(rel))
            .map(|dir| ProjectDir { dir })
            .map_err(|e| match e {
                ResolveError::Io(e) if e.raw_os_error() == Some(20) => {
                    error(Problem::Io("is not a directory".into()))
                }
                ResolveError::Io(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    error(Problem::Io("is not a directory (it does not exist)".into()))
                }
                other => error(Problem::Io(other.to_string())),
            })
    }

    /// The workspace root.
    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    /// Resolves `rel` beneath the root; `Ok(None)` when a file stands where a directory on
    /// the way should be (so nothing is there).
    fn locate(&self, rel: &str) -> Result<Option<ResolvedPath>, ProjectFileError> {
        let error = |problem| ProjectFileError {
            path: rel.to_string(),
            problem,
        };
        if Path::new(rel).is_absolute() || rel.split('/').any(|c| c == "..") {
            return Err(error(Problem::Io(
                "is not a path inside the workspace".to_string(),
            )));
        }
        match self.dir.resolve(Path::new(rel)) {
            Ok(t) => Ok(Some(t)),
            Err(ResolveError::NotADirectory(_)) => Ok(None),
            Err(ResolveError::Escape { target }) => Err(error(Problem::LinksOut { target })),
            Err(ResolveError::Dangling) => Err(error(Problem::Dangling)),
            Err(other) => Err(error(Problem::Io(other.to_string()))),
        }
    }

    /// Reads the text of the project file `rel` (relative to the root, `/`-separated), at
    /// most `limit` bytes. `Ok(None)` when there is no such file (or a directory on the way
    /// is missing); an error for anything that is there but must not be read.
    pub fn read(&self, rel: &str, limit: u64) -> Result<Option<String>, ProjectFileError> {
        let Some(bytes) = self.read_bytes(rel, limit)? else {
            return Ok(None);
        };
        String::from_utf8(bytes)
            .map(Some)
            .map_err(|_| ProjectFileError {
                path: rel.to_string(),
                problem: Problem::NotUtf8,
            })
    }

    /// Like [`Self::read`], the bytes.
    pub fn read_bytes(&self, rel: &str, limit: u64) -> Result<Option<Vec<u8>>, ProjectFileError> {
        let error = |problem| ProjectFileError {
            path: rel.to_string(),
            problem,
        };
        let Some(target) = self.locate(rel)? else {
            return Ok(None);
        };
        let info = match target.info() {
            Ok(Some(info)) => info,
            Ok(None) => return Ok(None),
            Err(e) => return Err(error(Problem::Io(e.to_string()))),
        };
        if info.kind != FileKind::File {
            return Err(error(Problem::NotRegular(info.kind)));
        }
        if info.len > limit {
            return Err(error(Problem::TooLarge {
                limit: crate::human_size(limit),
            }));
        }
        target.read_bounded(limit).map(Some).map_err(|e| {
            if e.kind() == std::io::ErrorKind::InvalidData {
                error(Problem::TooLarge {
                    limit: crate::human_size(limit),
                })
            } else {
                error(Problem::Io(e.to_string()))
            }
        })
    }

    /// The entries of the project directory `rel` (`""` for the root), sorted by name; empty
    /// when it does not exist or is not a directory. Symlinks are listed as symlinks.
    pub fn list(&self, rel: &str) -> Vec<ProjectEntry> {
        let Ok(Some(target)) = self.locate(rel) else {
            return Vec::new();
        };
        let Ok(fd) = target.open_dir() else {
            return Vec::new();
        };
        let Ok(mut dir) = rustix::fs::Dir::new(fd) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        while let Some(Ok(entry)) = dir.read() {
            let Ok(name) = entry.file_name().to_str() else {
                continue;
            };
            if name == "." || name == ".." {
                continue;
            }
            let kind = match entry.file_type() {
                rustix::fs::FileType::RegularFile => FileKind::File,
                rustix::fs::FileType::Directory => FileKind::Dir,
                rustix::fs::FileType::Symlink => FileKind::Symlink,
                rustix::fs::FileType::Fifo => FileKind::Fifo,
                rustix::fs::FileType::Socket => FileKind::Socket,
                rustix::fs::FileType::CharacterDevice | rustix::fs::FileType::BlockDevice => {
                    FileKind::Device
                }
                _ => {
                    // The file system did not say (d_type unknown): ask.
                    let child = join_rel(rel, name);
                    match self
                        .locate(&child)
                        .ok()
                        .flatten()
                        .and_then(|t| t.info().ok().flatten())
                    {
                        Some(info) => info.kind,
                        None => FileKind::Other,
                    }
                }
            };
            out.push(ProjectEntry {
                name: name.to_string(),
                kind,
            });
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }

    /// What `rel` is, without following a final symlink; `None` when nothing is there (or it
    /// cannot be resolved beneath the root).
    pub fn entry_info(&self, rel: &str) -> Option<FileInfo> {
        self.dir
            .resolve_entry(Path::new(rel))
            .ok()?
            .info()
            .ok()
            .flatten()
    }

    /// The target of the symlink `rel` (as written in the link).
    pub fn read_link(&self, rel: &str) -> Option<PathBuf> {
        self.dir
            .resolve_entry(Path::new(rel))
            .ok()?
            .read_link()
            .ok()
    }

    /// Whether `rel` resolves beneath the root: `Ok` for a path that stays inside (existing
    /// or not), the reason otherwise (a symlink out, dangling, a loop).
    pub fn check_inside(&self, rel: &str) -> Result<(), ProjectFileError> {
        self.locate(rel).map(|_| ())
    }

    /// The absolute path of a project file, for messages (never for opening it).
    pub fn display_path(&self, rel: &str) -> PathBuf {
        self.root().join(rel)
    }
}

/// Reads a file of the user's own (their config, their `AGENTS.md`, their skills): symlinks
/// are followed — dotfile managers link these — but only a regular file is opened (a FIFO
/// cannot hang Keel, a device is never opened) and at most `limit` bytes are read.
/// `Ok(None)` when it does not exist.
pub fn read_user_file(path: &Path, limit: u64) -> Result<Option<String>, ProjectFileError> {
    use std::io::Read;
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let fail = |problem| ProjectFileError {
        path: path.display().to_string(),
        problem,
    };
    let kind = |meta: &std::fs::Metadata| {
        let t = meta.file_type();
        if t.is_file() {
            FileKind::File
        } else if t.is_dir() {
            FileKind::Dir
        } else {
            use std::os::unix::fs::FileTypeExt;
            if t.is_fifo() {
                FileKind::Fifo
            } else if t.is_socket() {
                FileKind::Socket
            } else if t.is_char_device() || t.is_block_device() {
                FileKind::Device
            } else {
                FileKind::Other
            }
        }
    };
    let before = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(fail(Problem::Io(e.to_string()))),
    };
    if kind(&before) != FileKind::File {
        return Err(fail(Problem::NotRegular(kind(&before))));
    }
    let too_large = || {
        fail(Problem::TooLarge {
            limit: crate::human_size(limit),
        })
    };
    // The user's file by path, on purpose: opened non-blocking, its type checked again once
    // open, the read bounded.
    #[allow(clippy::disallowed_methods)]
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags((rustix::fs::OFlags::NONBLOCK | rustix::fs::OFlags::NOCTTY).bits() as i32)
        .open(path)
        .map_err(|e| fail(Problem::Io(e.to_string())))?;
    let meta = file
        .metadata()
        .map_err(|e| fail(Problem::Io(e.to_string())))?;
    if kind(&meta) != FileKind::File || meta.ino() != before.ino() || meta.dev() != before.dev() {
        return Err(fail(Problem::Io(
            "it was replaced while Keel opened it; try again".into(),
        )));
    }
    if meta.len() > limit {
        return Err(too_large());
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| fail(Problem::Io(e.to_string())))?;
    if bytes.len() as u64 > limit {
        return Err(too_large());
    }
    String::from_utf8(bytes)
        .map(Some)
        .map_err(|_| fail(Problem::NotUtf8))
}

/// Reads the file at `path` as a project file of its own directory (regular, bounded,
/// never blocking, a symlink out of that directory refused). `Ok(None)` when it or its
/// directory does not exist. For files named by path — a flow, `.mcp.json` — rather than
/// relative to a workspace.
pub fn read_in_dir(path: &Path, limit: u64) -> Result<Option<String>, ProjectFileError> {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    let fail = |problem| ProjectFileError {
        path: path.display().to_string(),
        problem,
    };
    if name.is_empty() {
        return Err(fail(Problem::Io("is not a file path".into())));
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let project = match ProjectDir::open(dir) {
        Ok(p) => p,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(fail(Problem::Io(e.to_string()))),
    };
    project.read(name, limit).map_err(|e| ProjectFileError {
        path: path.display().to_string(),
        problem: e.problem,
    })
}

/// `path` relative to the workspace `root` (`/`-separated), when it lies in the workspace:
/// either as written (made absolute against the current directory, `.` and `..` taken
/// lexically) or once its parent directory's symlinks are resolved (a path through a link
/// that leads into the workspace). `None` for a file elsewhere. Whether a file is the
/// repository's (hostile) or the user's own is decided here, in one place.
pub fn workspace_relative(root: &Path, path: &Path) -> Option<String> {
    let root = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
    let lexical = crate::lexical_normalize(&std::path::absolute(path).ok()?);
    let relative = |p: &Path| -> Option<String> {
        let rel = p.strip_prefix(&root).ok()?;
        let parts: Option<Vec<&str>> = rel.components().map(|c| c.as_os_str().to_str()).collect();
        Some(parts?.join("/"))
    };
    if let Some(rel) = relative(&lexical) {
        return Some(rel);
    }
    let name = lexical.file_name()?;
    let parent = lexical.parent()?.canonicalize().ok()?;
    relative(&parent.join(name))
}

/// Reads a file the user named (a flow to run, a PRD to add, a script): when it lies in the
/// workspace ([`workspace_relative`]) it is repository content and is read as a project file
/// beneath the open workspace — a symlink out of the workspace is refused; elsewhere it is
/// the user's own and read with [`read_user_file`]. Either way only a regular file is read,
/// never blocking on a FIFO, never opening a device, at most `limit` bytes. `Ok(None)` when
/// there is no such file.
pub fn read_named_file(
    root: &Path,
    path: &Path,
    limit: u64,
) -> Result<Option<String>, ProjectFileError> {
    let Some(rel) = workspace_relative(root, path) else {
        return read_user_file(path, limit);
    };
    let shown = |e: ProjectFileError| ProjectFileError {
        path: path.display().to_string(),
        problem: e.problem,
    };
    if rel.is_empty() {
        return Err(shown(ProjectFileError {
            path: rel,
            problem: Problem::NotRegular(FileKind::Dir),
        }));
    }
    let project = ProjectDir::open(root).map_err(|e| ProjectFileError {
        path: root.display().to_string(),
        problem: Problem::Io(e.to_string()),
    })?;
    project.read(&rel, limit).map_err(shown)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn setup() -> (tempfile::TempDir, ProjectDir) {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let p = ProjectDir::open(dir.path()).unwrap_or_else(|e| panic!("{e}"));
        (dir, p)
    }

    fn err(p: &ProjectDir, rel: &str) -> String {
        match p.read(rel, INSTRUCTIONS_LIMIT) {
            Err(e) => e.to_string(),
            Ok(v) => panic!("{rel} was read: {v:?}"),
        }
    }

    #[test]
    fn regular_files_inside_are_read_and_missing_ones_are_none() {
        let (dir, p) = setup();
        std::fs::create_dir_all(dir.path().join("docs")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(dir.path().join("docs/rules.md"), "be kind")
            .unwrap_or_else(|e| panic!("{e}"));
        symlink("docs/rules.md", dir.path().join("AGENTS.md")).unwrap_or_else(|e| panic!("{e}"));
        let read = |rel: &str| {
            p.read(rel, INSTRUCTIONS_LIMIT)
                .unwrap_or_else(|e| panic!("{e}"))
        };
        assert_eq!(read("AGENTS.md").as_deref(), Some("be kind"));
        assert_eq!(read("CLAUDE.md"), None);
        assert_eq!(read("nested/dir/AGENTS.md"), None);
        assert_eq!(read("AGENTS.md/x"), None);
    }

    #[test]
    fn links_out_fifos_devices_and_oversized_files_are_refused_with_what_to_do() {
        let (dir, p) = setup();
        let outside = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(outside.path().join("id_rsa"), "PRIVATE KEY")
            .unwrap_or_else(|e| panic!("{e}"));
        symlink(outside.path().join("id_rsa"), dir.path().join("AGENTS.md"))
            .unwrap_or_else(|e| panic!("{e}"));
        symlink("/dev/zero", dir.path().join("CLAUDE.md")).unwrap_or_else(|e| panic!("{e}"));
        rustix::fs::mknodat(
            rustix::fs::CWD,
            dir.path().join("fifo.md").as_path(),
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(dir.path().join("big.md"), vec![b'a'; 300 * 1024])
            .unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(dir.path().join("latin1.md"), b"caf\xe9").unwrap_or_else(|e| panic!("{e}"));
        let e = err(&p, "AGENTS.md");
        assert!(
            e.starts_with("`AGENTS.md` is a symlink leading outside the workspace"),
            "{e}"
        );
        assert!(!e.contains("PRIVATE"), "{e}");
        let e = err(&p, "CLAUDE.md");
        assert!(e.contains("outside the workspace (to `/dev/zero`)"), "{e}");
        let started = std::time::Instant::now();
        let e = err(&p, "fifo.md");
        assert!(
            e.contains("is a FIFO (named pipe), not a regular file"),
            "{e}"
        );
        assert!(started.elapsed() < std::time::Duration::from_secs(2));
        let e = err(&p, "big.md");
        assert!(e.contains("larger than 256.0 KB"), "{e}");
        assert!(err(&p, "latin1.md").contains("UTF-8"));
    }

    #[test]
    fn the_root_lists_the_same_every_time() {
        // A duplicated descriptor shares its read offset: the second listing came back empty
        // (an eval's local repository was then copied as nothing).
        let (dir, p) = setup();
        std::fs::write(dir.path().join("x.txt"), "x").unwrap_or_else(|e| panic!("{e}"));
        let first = p.list("");
        assert!(first.iter().any(|e| e.name == "x.txt"), "{first:?}");
        assert_eq!(p.list(""), first);
        let sub = p.subdir(".").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(sub.list(""), first);
        assert_eq!(sub.list(""), first);
    }

    #[test]
    fn listings_report_symlinks_as_symlinks() {
        let (dir, p) = setup();
        std::fs::create_dir_all(dir.path().join(".keel/rules")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(dir.path().join(".keel/rules/a.md"), "a").unwrap_or_else(|e| panic!("{e}"));
        symlink("/etc", dir.path().join(".keel/rules/b.md")).unwrap_or_else(|e| panic!("{e}"));
        let names: Vec<(String, FileKind)> = p
            .list(".keel/rules")
            .into_iter()
            .map(|e| (e.name, e.kind))
            .collect();
        assert_eq!(
            names,
            vec![
                ("a.md".to_string(), FileKind::File),
                ("b.md".to_string(), FileKind::Symlink)
            ]
        );
        assert!(p.list("missing").is_empty());
    }

    fn mkfifo(path: &Path) {
        rustix::fs::mknodat(
            rustix::fs::CWD,
            path,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap_or_else(|e| panic!("{e}"));
    }

    #[test]
    fn a_named_file_in_the_workspace_is_a_project_file_and_elsewhere_the_users() {
        let ws = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let outside = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let root = ws.path();
        std::fs::create_dir_all(root.join(".keel/flows")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(outside.path().join("secret"), "KEY").unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(outside.path().join("mine.yaml"), "name: mine")
            .unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(root.join(".keel/flows/ok.yaml"), "name: ok")
            .unwrap_or_else(|e| panic!("{e}"));
        symlink(
            outside.path().join("secret"),
            root.join(".keel/flows/secret.yaml"),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        symlink("/dev/zero", root.join(".keel/flows/zero.yaml")).unwrap_or_else(|e| panic!("{e}"));
        mkfifo(&root.join(".keel/flows/fifo.yaml"));
        mkfifo(&outside.path().join("fifo.yaml"));
        // A link elsewhere that leads into the workspace: still the repository's files.
        symlink(root.join(".keel"), outside.path().join("into-ws"))
            .unwrap_or_else(|e| panic!("{e}"));
        let read = |p: &Path| read_named_file(root, p, DEFINITION_LIMIT);
        let refused = |p: &Path, what: &str| match read(p) {
            Err(e) => assert!(e.to_string().contains(what), "{}: {e}", p.display()),
            Ok(v) => panic!("{} was read: {v:?}", p.display()),
        };
        assert_eq!(
            read(&root.join(".keel/flows/ok.yaml"))
                .unwrap_or_else(|e| panic!("{e}"))
                .as_deref(),
            Some("name: ok")
        );
        refused(
            &root.join(".keel/flows/secret.yaml"),
            "outside the workspace",
        );
        refused(
            &root.join(".keel/flows/../flows/secret.yaml"),
            "outside the workspace",
        );
        refused(
            &outside.path().join("into-ws/flows/secret.yaml"),
            "outside the workspace",
        );
        refused(&root.join(".keel/flows/zero.yaml"), "outside the workspace");
        refused(&root.join(".keel/flows/fifo.yaml"), "FIFO");
        refused(&root.join(".keel/flows"), "a directory");
        // The user's own files elsewhere: read, but never a FIFO or a device.
        assert_eq!(
            read(&outside.path().join("mine.yaml"))
                .unwrap_or_else(|e| panic!("{e}"))
                .as_deref(),
            Some("name: mine")
        );
        refused(&outside.path().join("fifo.yaml"), "FIFO");
        refused(Path::new("/dev/zero"), "a device");
        assert!(matches!(read(&root.join("missing.yaml")), Ok(None)));
        assert_eq!(
            workspace_relative(root, &root.join("a/./b/../c.yaml")).as_deref(),
            Some("a/c.yaml")
        );
        assert_eq!(
            workspace_relative(root, &outside.path().join("mine.yaml")),
            None
        );
    }
}
