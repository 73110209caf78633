//! Workspace confinement: every path a tool touches is relative to the workspace root and may
//! never leave it — no absolute paths, no `..`, no symlink pointing outside — and is opened
//! beneath the workspace's open directory handle, never by path.

use std::path::{Component, Path, PathBuf};

use crate::beneath::{DirHandle, ResolveError, ResolvedPath};

/// Why a path was refused. Messages tell the model what to send instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    #[error(
        "`{0}` is an absolute path; paths are relative to the workspace root (e.g. `src/main.rs`)"
    )]
    Absolute(String),
    #[error("`{0}` contains `..`; paths may not leave the workspace, give them from its root")]
    ParentDir(String),
    #[error(
        "`{path}` resolves through a symlink to `{target}`, outside the workspace; it cannot be used"
    )]
    SymlinkEscape { path: String, target: String },
    #[error("`{0}` is a symlink whose target does not exist; it cannot be used")]
    DanglingSymlink(String),
    #[error("`{0}` contains a NUL byte")]
    Nul(String),
    #[error(
        "`{0}` is protected (`.git/` at any depth, any other git directory, `.keel/` and the \
         project's protected paths are read-only to the agent); change other files, or ask \
         the user to change this one"
    )]
    Protected(String),
    #[error(
        "`{path}` is read-only to the agent: the repository's git configuration or an installed \
         hook names `{named}` (`{key}`), so the user's own git reads or runs it outside the \
         sandbox (at their next `git commit` or `git status`). Change other files; if this one \
         must change, tell the user what to change and why"
    )]
    GitRuns {
        path: String,
        named: String,
        key: String,
    },
    #[error("`{path}` is not written by the file tools: {reason}")]
    GitReachUnknown { path: String, reason: String },
    #[error(
        "`{path}` is read-only to the agent: it lies in installed dependencies or build output \
         (`{tree}`), code the user's own tools (`npm test`, `python`, `cargo test`) run later without it showing in any \
         diff. Change the project's own files; if a dependency must change, ask the user to \
         install it"
    )]
    DependencyTree { path: String, tree: String },
    #[error(
        "`{path}` is not written by the file tools: {reason}, so the user's own tools would \
         load it without any diff showing it. Change the source the tools build it from; if \
         this file is needed, ask the user to build or install it"
    )]
    LoadedUnseen { path: String, reason: String },
    #[error(
        "`{path}` is not written: {why}. The agent does not change files here: tell the user \
         what should change and why, or ask them to start keel in the project's own directory"
    )]
    UserConfig { path: String, why: String },
    #[error(
        "`{path}` is not replaced or edited by the file tools: {reason}, so no snapshot holds \
         it and `keel undo` could not bring it back. If it must change, do it with a command \
         (the user is asked first) or ask the user"
    )]
    Unrecorded { path: String, reason: String },
    #[error(
        "`{path}` cannot be used: {reason}; it is neither read nor changed for the agent (the \
         user's secret stores and Keel's own files are off limits even inside the workspace)"
    )]
    Store { path: String, reason: String },
    #[error(
        "`{0}` looks like a glob pattern (`*`, `?`, a `[a-z]` class or a `{{a,b}}` set), not a \
         file name; the file tools take one exact path such as `src/lib.rs` (find files with \
         list_files or grep and a pattern, then name each one)"
    )]
    GlobPattern(String),
    #[error(
        "`{0}` has a quote character at the start or end of a name: a quote from the \
         arguments' encoding (`&#34;`, `\\\"`), not part of a file name; send the path without it"
    )]
    StrayQuote(String),
    #[error(
        "`{path}` holds a control character ({code}); file names are plain text, so the file \
         tools neither create nor look up such a name: send the path without it"
    )]
    ControlChar { path: String, code: String },
    #[error(
        "`{path}` holds `{placeholder}`, a template placeholder, not a file name; put the real \
         name in its place (one exact path such as `src/lib.rs`; list_files shows what exists)"
    )]
    Placeholder { path: String, placeholder: String },
    #[error("cannot open the workspace `{path}`: {reason}")]
    Root { path: String, reason: String },
    #[error("cannot inspect `{path}`: {reason}")]
    Io { path: String, reason: String },
}

/// Whether `rel` reads as a glob pattern rather than a file name: it holds `*` or `?`, a
/// bracket class with a range or a negation (`[0-9]`, `[!x]`, `[^x]`), or a brace set
/// (`{a,b}`, `{1..3}`). Plain bracketed names such as the web-route files `[id].tsx` or
/// Whether a name in `rel` starts or ends with a quote (`"`, `'`, a backquote): what is left
/// of a quoted or escaped argument (issue 34: an `&#34;`-decoded path made `src/lib.rs"`).
fn stray_quote(rel: &str) -> bool {
    rel.split('/')
        .any(|name| name.starts_with(['"', '\'', '`']) || name.ends_with(['"', '\'', '`']))
}

/// `[...slug]` are names, not patterns.
pub fn looks_like_glob(rel: &str) -> bool {
    if rel.contains(['*', '?']) {
        return true;
    }
    let inside = |open: char, close: char| {
        rel.match_indices(open).filter_map(move |(i, _)| {
            let rest = &rel[i + open.len_utf8()..];
            rest.find(close).map(|end| &rest[..end])
        })
    };
    // `[0-9]`, `[a-zA-Z]`: nothing but ranges.
    let ranges = |body: &str| {
        let b = body.as_bytes();
        !b.is_empty()
            && b.len().is_multiple_of(3)
            && b.chunks(3).all(|r| {
                r[0].is_ascii_alphanumeric() && r[1] == b'-' && r[2].is_ascii_alphanumeric()
            })
    };
    let class = inside('[', ']').any(|body| body.starts_with(['!', '^']) || ranges(body));
    let set = inside('{', '}').any(|body| body.contains(',') || body.contains(".."));
    class || set
}

/// The first unfilled template placeholder in `rel`, if any: `<word>`, or a variable name in
/// single braces — snake case or five letters and more (a model's `{file_path}`, which
/// otherwise became a file of that name). Short brace names (`{x}.txt`, a route's `{id}`),
/// double braces (`{{cookiecutter.name}}`) and brace sets (`{a,b}`, a glob) are names.
pub fn placeholder(rel: &str) -> Option<&str> {
    let word = |w: &str, angle: bool| {
        w.chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && w.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || (angle && matches!(c, ' ' | '-')))
            && (angle || w.contains('_') || w.len() >= 5)
    };
    for (open, close, angle) in [('{', '}', false), ('<', '>', true)] {
        for (i, _) in rel.match_indices(open) {
            let rest = &rel[i + 1..];
            let Some(end) = rest.find(close) else {
                continue;
            };
            let doubled = rel[..i].ends_with(open) || rest[end + 1..].starts_with(close);
            if !doubled && word(&rest[..end], angle) {
                return Some(&rel[i..i + end + 2]);
            }
        }
    }
    None
}

/// The first control character in `rel` (a newline, a tab, a carriage return, an escape
/// sequence's `ESC`, DEL or a C1 control), if any. NUL is refused earlier, for every path.
pub fn control_char(rel: &str) -> Option<char> {
    rel.chars().find(|c| c.is_control())
}

/// The refusal for a path holding a control character, the path shown escaped (`\n`,
/// `\x1b`) so the message itself is one plain line.
fn control_char_error(rel: &str, c: char) -> PathError {
    PathError::ControlChar {
        path: crate::text::escape_name(rel).into_owned(),
        code: format!("U+{:04X}", c as u32),
    }
}

/// The directory the agent works in, held open: every path is resolved beneath this handle
/// (see [`crate::beneath`]), so no symlink and no race can lead a file operation outside it.
/// Cheap to clone (the handle is shared).
#[derive(Debug, Clone)]
pub struct Workspace {
    root: PathBuf,
    dir: DirHandle,
    /// Paths (relative to the root) read-only besides `.git` and `.keel`.
    protected: Vec<PathBuf>,
    /// The size bound of the files this workspace's snapshots record, in MiB (0: none): the
    /// user's `[snapshots] max_file_mb`, which the engine gives the snapshots too
    /// ([`crate::recorded`]).
    snapshot_max_file_mb: u64,
}

impl PartialEq for Workspace {
    fn eq(&self, other: &Self) -> bool {
        self.root == other.root
            && self.protected == other.protected
            && self.snapshot_max_file_mb == other.snapshot_max_file_mb
    }
}

impl Eq for Workspace {}

impl Workspace {
    /// Opens a workspace at `root`, which must be an existing directory. The root is
    /// canonicalised, so a workspace reached through a symlink is fine; the directory is
    /// opened and kept open.
    pub fn new(root: impl AsRef<Path>) -> Result<Self, PathError> {
        let root = root.as_ref();
        let err = |reason: String| PathError::Root {
            path: root.display().to_string(),
            reason,
        };
        let dir = DirHandle::open(root).map_err(|e| {
            if e.raw_os_error() == Some(20) {
                err("not a directory".into())
            } else {
                err(e.to_string())
            }
        })?;
        // Whatever the agent writes here is never a program Keel starts (R23).
        crate::shell::lookup::distrust(dir.path());
        Ok(Self {
            root: dir.path().to_path_buf(),
            dir,
            protected: Vec::new(),
            snapshot_max_file_mb: crate::recorded::DEFAULT_MAX_FILE_MB,
        })
    }

    /// The same workspace with more paths (relative to the root) read-only to the file tools,
    /// besides `.git/` and `.keel/`.
    pub fn with_protected(mut self, paths: Vec<PathBuf>) -> Self {
        self.protected = paths;
        self
    }

    /// The same workspace with snapshots recording files of at most `mb` MiB (0: no bound;
    /// [`crate::recorded::DEFAULT_MAX_FILE_MB`] unless set): a larger file is one `keel undo`
    /// could not bring back, so the file tools do not replace it and a command writing over
    /// it is asked about (R10-20). The engine sets the user's `[snapshots] max_file_mb`.
    pub fn with_snapshot_max_file_mb(mut self, mb: u64) -> Self {
        self.snapshot_max_file_mb = mb;
        self
    }

    /// The size bound of the files this workspace's snapshots record, in MiB (0: none).
    pub fn snapshot_max_file_mb(&self) -> u64 {
        self.snapshot_max_file_mb
    }

    /// The canonical root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The open root directory every path is resolved beneath.
    pub fn handle(&self) -> &DirHandle {
        &self.dir
    }

    /// Resolves a workspace-relative path beneath the workspace handle, for a file that may or
    /// may not exist yet: the way to read, write, create or delete it. `""` and `"."` are the
    /// root. Absolute paths, `..` and symlinks leading out are refused.
    pub fn locate(&self, rel: &str) -> Result<ResolvedPath, PathError> {
        let path = check_relative(rel)?;
        self.dir.resolve(&path).map_err(|e| resolve_error(rel, e))
    }

    /// Like [`Self::locate`], but a final symlink is not followed: the result is the link
    /// itself (to delete or replace it). Links on the way are followed, inside only.
    pub fn locate_entry(&self, rel: &str) -> Result<ResolvedPath, PathError> {
        let path = check_relative(rel)?;
        self.dir
            .resolve_entry(&path)
            .map_err(|e| resolve_error(rel, e))
    }

    /// Like [`Self::locate`], for a path the agent wants to write, create, move or delete:
    /// refused when it is or lies under a protected path (checked on the resolved path, so an
    /// alias of `.git` is refused too), or when it holds a glob pattern and no file of that
    /// exact name exists (`src/**/*.rs` would otherwise create a directory named `**`), or
    /// when it holds a control character and no entry of that exact name exists (a model's
    /// `notes\n.md` or an escape sequence would otherwise become a file name that fakes lines
    /// in every listing and terminal).
    pub fn locate_writable(&self, rel: &str) -> Result<ResolvedPath, PathError> {
        let found = unless_control(rel, self.locate(rel))?;
        let found = self.check_writable(rel, found)?;
        // Nothing in a workspace that holds the user's own configuration (a home, a
        // dotfiles directory the home loads from).
        if let Some(why) = crate::shell::refused_in_home(&self.root) {
            return Err(PathError::UserConfig {
                path: rel.to_string(),
                why,
            });
        }
        // The only copy of a file no snapshot records (R10-21).
        if let Some(reason) = crate::shell::unrecorded_for_file_tools(self, found.rel()) {
            return Err(PathError::Unrecorded {
                path: rel.to_string(),
                reason,
            });
        }
        // What the user's tools load unseen: bytecode, native modules, package metadata, a
        // test file in an ignored directory (red-team pass 8, R8-4, R8-6).
        if let Some(reason) = crate::shell::refused_for_file_tools(&self.root, found.rel()) {
            return Err(PathError::LoadedUnseen {
                path: rel.to_string(),
                reason,
            });
        }
        Ok(found)
    }

    /// Like [`Self::locate`], for a path the model names to read or list: a path holding a
    /// control character is refused with the reason (rather than "not found") unless an
    /// entry of that exact name exists — names with control characters come from elsewhere,
    /// never from the file tools.
    pub fn locate_named(&self, rel: &str) -> Result<ResolvedPath, PathError> {
        let found = unless_control(rel, self.locate(rel))?;
        if let Some(c) = control_char(rel)
            && std::fs::symlink_metadata(found.abs()).is_err()
        {
            return Err(control_char_error(rel, c));
        }
        Ok(found)
    }

    /// Like [`Self::locate_entry`] (a final symlink is the entry itself), for an entry the
    /// agent wants to delete: refused like [`Self::locate_writable`].
    pub fn locate_entry_writable(&self, rel: &str) -> Result<ResolvedPath, PathError> {
        let found = unless_control(rel, self.locate_entry(rel))?;
        let found = self.check_writable(rel, found)?;
        // Nothing in a workspace that holds the user's own configuration (a home, a
        // dotfiles directory the home loads from).
        if let Some(why) = crate::shell::refused_in_home(&self.root) {
            return Err(PathError::UserConfig {
                path: rel.to_string(),
                why,
            });
        }
        Ok(found)
    }

    /// Like [`Self::locate`], but no symlink may redirect the path (see
    /// [`DirHandle::resolve_literal`]): for files Keel itself writes under `.keel/`.
    pub fn locate_literal(&self, rel: &str) -> Result<ResolvedPath, PathError> {
        let path = check_relative(rel)?;
        self.dir
            .resolve_literal(&path)
            .map_err(|e| resolve_error(rel, e))
    }

    fn check_writable(&self, rel: &str, found: ResolvedPath) -> Result<ResolvedPath, PathError> {
        if crate::sandbox::is_protected(&self.root, &found.abs(), &self.protected)
            || self.inside_git_dir(found.rel())
        {
            return Err(PathError::Protected(rel.to_string()));
        }
        // Installed dependencies: read-only to commands nobody approved, and to the file
        // tools (red-team pass 8, R8-9: `create_file .venv/lib/python3.11/site-packages/zz.pth`).
        if let Some(tree) = crate::shell::dependency_tree_of(&self.root, found.rel()) {
            return Err(PathError::DependencyTree {
                path: rel.to_string(),
                tree: tree.display().to_string(),
            });
        }
        // What the repository's git config names as configuration or a program (pass 2, R14;
        // pass 4, R4-3: `core.hooksPath = .husky`).
        if let Some(named) = crate::sandbox::git_config_path_of(&self.root, found.rel()) {
            return Err(PathError::GitRuns {
                path: rel.to_string(),
                named: named.path.display().to_string(),
                key: named.key,
            });
        }
        // Past the bound of the search for repositories below the workspace, any file may
        // be one a repository's git runs (red-team pass 9, R9-3).
        if let Some(reason) = crate::sandbox::search_cut(&self.root) {
            return Err(PathError::GitReachUnknown {
                path: rel.to_string(),
                reason,
            });
        }
        let glob = looks_like_glob(rel);
        let control = control_char(rel);
        let stub = placeholder(rel);
        let quoted = stray_quote(rel);
        if (glob || control.is_some() || stub.is_some() || quoted)
            && std::fs::symlink_metadata(found.abs()).is_err()
        {
            return Err(match (control, stub) {
                (Some(c), _) => control_char_error(rel, c),
                (None, Some(stub)) => PathError::Placeholder {
                    path: rel.to_string(),
                    placeholder: stub.to_string(),
                },
                (None, None) if quoted => PathError::StrayQuote(rel.to_string()),
                (None, None) => PathError::GlobPattern(rel.to_string()),
            });
        }
        Ok(found)
    }

    /// Whether `rel` (canonical, workspace-relative) is or lies below a git directory that is
    /// not named `.git` — one a `.git` file's `gitdir:` names, a bare fixture repository —
    /// recognised by what it holds ([`crate::sandbox::is_git_dir_by_names`]), checked beneath
    /// the workspace handle for every directory on the way (red-team pass 2, R2); or whether
    /// writing it would make one of those directories, the root included, a git directory
    /// (`src/HEAD` beside a `src/commondir`: red-team pass 7, R7-9).
    fn inside_git_dir(&self, rel: &Path) -> bool {
        let names: Vec<_> = rel.components().map(|c| c.as_os_str()).collect();
        let mut prefix = PathBuf::new();
        for i in 0..=names.len() {
            let adding = names.get(i).and_then(|n| n.to_str());
            if crate::sandbox::is_git_dir_beneath(self.dir.fd(), &prefix, adding) {
                return true;
            }
            if let Some(n) = names.get(i) {
                prefix.push(n);
            }
        }
        false
    }

    /// The absolute path a workspace-relative path resolves to (symlinks inside followed),
    /// checked like [`Self::locate`]. For *naming* a file — to a command, in a message —
    /// never for opening it: open through [`Self::locate`].
    pub fn resolve(&self, rel: &str) -> Result<PathBuf, PathError> {
        Ok(self.locate(rel)?.abs())
    }

    /// The workspace-relative form of an absolute path inside the workspace, with `/`
    /// separators (`.` for the root).
    pub fn relative(&self, abs: &Path) -> String {
        match abs.strip_prefix(&self.root) {
            Ok(p) if p.as_os_str().is_empty() => ".".to_string(),
            Ok(p) => p
                .components()
                .map(|c| c.as_os_str().to_string_lossy())
                .collect::<Vec<_>>()
                .join("/"),
            Err(_) => abs.display().to_string(),
        }
    }
}

/// A path holding a control character that could not be resolved is refused for that reason:
/// "cannot inspect `a` + newline + …" would echo the raw name and say less (a SmolLM2
/// `read_file` path with a reply's worth of prose in it).
fn unless_control(
    rel: &str,
    found: Result<ResolvedPath, PathError>,
) -> Result<ResolvedPath, PathError> {
    match (found, control_char(rel)) {
        (Err(_), Some(c)) => Err(control_char_error(rel, c)),
        (found, _) => found,
    }
}

fn resolve_error(rel: &str, e: ResolveError) -> PathError {
    match e {
        ResolveError::Escape { target } => PathError::SymlinkEscape {
            path: rel.to_string(),
            target,
        },
        ResolveError::Dangling => PathError::DanglingSymlink(rel.to_string()),
        ResolveError::Protected(f) => PathError::Store {
            path: rel.to_string(),
            reason: f.to_string(),
        },
        ResolveError::NotADirectory(at) => PathError::Io {
            path: rel.to_string(),
            reason: format!("`{at}` is a file, not a directory"),
        },
        e
        @ (ResolveError::TooManyLinks | ResolveError::Io(_) | ResolveError::Redirected { .. }) => {
            PathError::Io {
                path: rel.to_string(),
                reason: e.to_string(),
            }
        }
    }
}

/// A relative path made of normal components, or the model-friendly reason it is not one.
fn check_relative(rel: &str) -> Result<PathBuf, PathError> {
    if rel.contains('\0') {
        return Err(PathError::Nul(rel.replace('\0', "\\0")));
    }
    let mut out = PathBuf::new();
    for comp in Path::new(rel).components() {
        match comp {
            Component::Prefix(_) | Component::RootDir => {
                return Err(PathError::Absolute(rel.to_string()));
            }
            Component::ParentDir => return Err(PathError::ParentDir(rel.to_string())),
            Component::CurDir => {}
            Component::Normal(c) => out.push(c),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ws() -> (tempfile::TempDir, Workspace) {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let ws = Workspace::new(dir.path()).unwrap_or_else(|e| panic!("{e}"));
        (dir, ws)
    }

    #[test]
    fn plain_paths_resolve_inside() {
        let (_d, ws) = ws();
        let p = ws
            .resolve("src/new/file.rs")
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(p.starts_with(ws.root()));
        assert_eq!(ws.relative(&p), "src/new/file.rs");
        assert_eq!(ws.resolve(".").ok().as_deref(), Some(ws.root()));
        assert_eq!(ws.resolve("").ok().as_deref(), Some(ws.root()));
        assert_eq!(ws.relative(ws.root()), ".");
    }

    #[test]
    fn escapes_are_refused() {
        let (_d, ws) = ws();
        assert!(matches!(ws.resolve("../x"), Err(PathError::ParentDir(_))));
        assert!(matches!(
            ws.resolve("a/../../x"),
            Err(PathError::ParentDir(_))
        ));
        assert!(matches!(
            ws.resolve("/etc/passwd"),
            Err(PathError::Absolute(_))
        ));
        assert!(matches!(ws.resolve("a\0b"), Err(PathError::Nul(_))));
    }

    #[cfg(unix)]
    #[test]
    fn protected_paths_are_not_writable_even_through_an_alias() {
        let (dir, ws) = ws();
        std::fs::create_dir_all(dir.path().join(".git/hooks")).unwrap_or_else(|e| panic!("{e}"));
        std::os::unix::fs::symlink(dir.path().join(".git"), dir.path().join("g"))
            .unwrap_or_else(|e| panic!("{e}"));
        for rel in [
            ".git/config",
            ".git/hooks/pre-commit",
            ".keel/config.toml",
            "g/config",
            ".git",
        ] {
            assert!(
                matches!(ws.locate_writable(rel), Err(PathError::Protected(_))),
                "{rel}"
            );
            assert!(ws.resolve(rel).is_ok(), "{rel} stays readable");
        }
        // A nested repository too, at any depth and in any case (red-team B16).
        for rel in [
            "src/.git",
            "docs/.git/config",
            "vendor/lib/.GIT/hooks/post-checkout",
            "a/b/.Git",
        ] {
            assert!(
                matches!(ws.locate_writable(rel), Err(PathError::Protected(_))),
                "{rel}"
            );
        }
        assert!(ws.locate_writable("src/.gitignore").is_ok());
        assert!(ws.locate_writable("src/x.git/config").is_ok());
        // A git directory under another name (a `.git` file's `gitdir: realgit`, a bare
        // fixture): its config and hooks run when the user's git looks there (pass 2, R2).
        for git_dir in ["realgit", "tests/data/x.git"] {
            for d in ["objects", "refs/heads", "hooks"] {
                std::fs::create_dir_all(dir.path().join(git_dir).join(d))
                    .unwrap_or_else(|e| panic!("{e}"));
            }
            std::fs::write(
                dir.path().join(git_dir).join("HEAD"),
                "ref: refs/heads/main\n",
            )
            .unwrap_or_else(|e| panic!("{e}"));
            for rel in ["config", "hooks/post-checkout", "refs/heads/main", "HEAD"] {
                let rel = format!("{git_dir}/{rel}");
                assert!(
                    matches!(ws.locate_writable(&rel), Err(PathError::Protected(_))),
                    "{rel}"
                );
                assert!(ws.resolve(&rel).is_ok(), "{rel} stays readable");
            }
        }
        // Not a git directory: a `refs` that is a link, or no HEAD.
        std::fs::create_dir_all(dir.path().join("notgit/objects"))
            .unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(dir.path().join("notgit/HEAD"), "x").unwrap_or_else(|e| panic!("{e}"));
        assert!(ws.locate_writable("notgit/config").is_ok());
        let ws = ws.with_protected(vec![PathBuf::from("CONSTITUTION.md")]);
        assert!(ws.locate_writable("CONSTITUTION.md").is_err());
    }

    #[test]
    fn names_with_a_stray_quote_are_not_created() {
        let (_dir, ws) = ws();
        for rel in ["src/lib.rs\"", "\"src/lib.rs", "'notes.md'", "a/`b`"] {
            let e = ws.locate_writable(rel).err();
            assert!(matches!(e, Some(PathError::StrayQuote(_))), "{rel}: {e:?}");
        }
        assert!(ws.locate_writable("it's.md").is_ok());
    }

    #[test]
    fn glob_patterns_are_not_writable_paths_unless_the_file_exists() {
        let (dir, ws) = ws();
        for rel in [
            "src/**/*.rs",
            "a?.txt",
            "x[0-9].py",
            "x[!a].py",
            "{a,b}.md",
            "f{1..3}.txt",
            "*",
        ] {
            let e = ws.locate_writable(rel).err();
            assert!(matches!(e, Some(PathError::GlobPattern(_))), "{rel}: {e:?}");
            assert!(ws.resolve(rel).is_ok(), "{rel} still resolves for reading");
        }
        let msg = PathError::GlobPattern("src/**/*.rs".into()).to_string();
        assert!(
            msg.contains("glob pattern") && msg.contains("list_files"),
            "{msg}"
        );
        // Web-route names are names.
        for rel in [
            "app/[id]/page.tsx",
            "src/[...slug].ts",
            "b/[[...all]].js",
            "{x}.txt",
        ] {
            assert!(ws.locate_writable(rel).is_ok(), "{rel}");
        }
        // A file that really has such a name stays writable.
        std::fs::write(dir.path().join("x[0-9].py"), "x = 0\n").unwrap_or_else(|e| panic!("{e}"));
        assert!(ws.locate_writable("x[0-9].py").is_ok());
    }

    #[cfg(unix)]
    #[test]
    fn symlinks_out_are_refused_and_in_are_fine() {
        let (dir, ws) = ws();
        let outside = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(outside.path().join("secret"), "s").unwrap_or_else(|e| panic!("{e}"));
        std::os::unix::fs::symlink(outside.path(), dir.path().join("out"))
            .unwrap_or_else(|e| panic!("{e}"));
        std::os::unix::fs::symlink(outside.path().join("secret"), dir.path().join("s"))
            .unwrap_or_else(|e| panic!("{e}"));
        std::os::unix::fs::symlink("/nonexistent/zzz", dir.path().join("dangling"))
            .unwrap_or_else(|e| panic!("{e}"));
        std::fs::create_dir(dir.path().join("real")).unwrap_or_else(|e| panic!("{e}"));
        std::os::unix::fs::symlink(dir.path().join("real"), dir.path().join("alias"))
            .unwrap_or_else(|e| panic!("{e}"));

        let e = ws.resolve("out/secret").err();
        assert!(matches!(e, Some(PathError::SymlinkEscape { .. })), "{e:?}");
        assert!(matches!(
            ws.resolve("s"),
            Err(PathError::SymlinkEscape { .. })
        ));
        // A new file under a directory symlink pointing out is refused too.
        assert!(matches!(
            ws.resolve("out/new.txt"),
            Err(PathError::SymlinkEscape { .. })
        ));
        // A link out is refused as such even when its target does not exist; a dangling
        // link inside is refused as dangling.
        assert!(matches!(
            ws.resolve("dangling"),
            Err(PathError::SymlinkEscape { .. })
        ));
        std::os::unix::fs::symlink("real/nothing", dir.path().join("dangling_in"))
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(
            ws.resolve("dangling_in"),
            Err(PathError::DanglingSymlink(_))
        ));
        let p = ws.resolve("alias/x.rs").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(ws.relative(&p), "real/x.rs");
    }
}
