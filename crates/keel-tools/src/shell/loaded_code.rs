//! Code the user's own tools load from places no diff shows (red-team passes 7 and 8: R7-2,
//! R8-4, R8-6, R8-22). One shape: a command nobody approved (or a file tool) writes a file
//! that a later `python3 -m pytest`, `pytest`, `cargo test` of the user's runs — unconfined —
//! in a place `git status` does not show (ignored, or unreviewable bytes):
//!
//! - **bytecode** (`*.pyc`, `*.pyo`): Python may run it without reading its source (R7-2);
//!   a symlink of that name to a blob of another name counts too (R8-22);
//! - **native extension modules** (`pluggy.so`, `x.cpython-311-x86_64-linux-gnu.so`,
//!   `x.abi3.so`, `x.pyd`): the import system prefers them to a `.py`, and `-m` puts the
//!   working directory first on `sys.path` (R8-6);
//! - **packaging metadata** (`*.egg-info` / `*.dist-info`): `importlib.metadata` finds it in
//!   any `sys.path` directory, and pytest loads every `[pytest11]` entry point it declares
//!   (R8-4 a, c);
//! - **test files the runners collect** (`conftest.py`, `test_*.py`, `*_test.py`,
//!   `*.test.js`/`*.spec.ts`…, `*_test.go`) in an *ignored* directory: plain `pytest` or
//!   `jest` collects `data/conftest.py` though git does not show it (R8-4 e). A test file the
//!   diff shows is the user's to review, and stays;
//! - **Cargo's build output** (`target/debug/deps/<test binary>`, reused by the user's
//!   `cargo test` while its fingerprints look fresh: R8-4 b, d): kept apart by the kernel —
//!   see [`super::dependency_trees`] (a profile directory is read-only to a command nobody
//!   approved, whose Cargo builds into [`KEEL_TARGET`] instead).
//!
//! After a command nobody approved, what of these it created or changed is moved out of the
//! loaders' way (bytecode removed: a cache) and reported; the file tools refuse to write them
//! ([`refused_for_file_tools`]); a restore from a snapshot is checked the same way.
//! Virtual environments and Cargo's profile directories are left to their own rules.

use std::path::{Path, PathBuf};

/// Where a command nobody approved builds with Cargo (`CARGO_TARGET_DIR`, workspace-relative):
/// never a directory the user's own `cargo` reuses outputs from.
pub(crate) const KEEL_TARGET: &str = "target/keel";

/// What a file is to the loaders.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Bytecode,
    Native,
    Metadata,
    TestFile,
    /// A Cargo profile directory (`target/debug`) a command nobody approved built into.
    CargoOutput,
    /// A dependency tree (`node_modules`, a virtual environment) such a command created.
    NewTree,
    /// A `.gitignore` / `.gitattributes` git does not show ([`super::session_hidden`]).
    Hiding,
    /// A `.gitattributes` that marks files `-diff` / `binary`.
    Blinding,
    /// A Python module on `sys.path[0]` of a `python3 -m …` run from the root.
    Importable,
    /// A tool's configuration that runs programs (`.cargo/config.toml`).
    ToolConfig,
    /// A file the user's `make` reads (an `include` / `-include` of a makefile).
    MakeFragment,
    /// A build output the user's build tool reuses while it looks up to date (`build/main.o`,
    /// a makefile's target, `target/classes/*.class`).
    BuildOutput,
    /// Any other file git does not show, made or changed by a writer nobody approved (the
    /// session's default-deny: [`super::session_hidden`]).
    Unreviewed,
}

impl Kind {
    const ALL: [Kind; 13] = [
        Kind::Bytecode,
        Kind::Native,
        Kind::Metadata,
        Kind::TestFile,
        Kind::CargoOutput,
        Kind::NewTree,
        Kind::Hiding,
        Kind::Blinding,
        Kind::Importable,
        Kind::ToolConfig,
        Kind::MakeFragment,
        Kind::BuildOutput,
        Kind::Unreviewed,
    ];

    /// A number for the kind, kept on disk ([`super::session_hidden`]).
    pub(crate) fn code(self) -> usize {
        Self::ALL.iter().position(|k| *k == self).unwrap_or(0)
    }

    /// The kind of [`Self::code`].
    pub(crate) fn from_code(code: usize) -> Option<Self> {
        Self::ALL.get(code).copied()
    }
}

fn is_identifier(s: &str) -> bool {
    !s.is_empty()
        && !s.starts_with(|c: char| c.is_ascii_digit())
        && s.chars().all(|c| c.is_alphanumeric() || c == '_')
}

/// What the entry named `name`, in a directory named `parent`, is to the loaders (by name).
pub(crate) fn kind(parent: &str, name: &str) -> Option<Kind> {
    if name.ends_with(".pyc") || name.ends_with(".pyo") {
        return Some(Kind::Bytecode);
    }
    if name.ends_with(".so") || name.ends_with(".pyd") {
        // Importable names only: `<module>.so`, `<module>.<tag>.so` (Cargo's
        // `libserde_derive-0123.so` is none).
        return is_identifier(name.split('.').next().unwrap_or("")).then_some(Kind::Native);
    }
    if name.ends_with(".egg-info")
        || name.ends_with(".dist-info")
        || ((parent.ends_with(".egg-info") || parent.ends_with(".dist-info"))
            && name == "entry_points.txt")
    {
        return Some(Kind::Metadata);
    }
    is_test_file(name).then_some(Kind::TestFile)
}

fn is_test_file(name: &str) -> bool {
    if let Some(stem) = name.strip_suffix(".py") {
        // unittest's (and Django's) discovery takes `test*.py` (R10-14: `testutils.py`).
        return stem == "conftest" || stem.starts_with("test") || stem.ends_with("_test");
    }
    if name.ends_with("_test.go") {
        return true;
    }
    let Some((stem, ext)) = name.rsplit_once('.') else {
        return false;
    };
    // jest's and vitest's `*.test.*` / `*.spec.*`; `node --test`'s `test-*`, `*-test`,
    // `*_test`, `test` (red-team pass 9, R9-14).
    JS.contains(&ext)
        && (stem.ends_with(".test")
            || stem.ends_with(".spec")
            || stem.starts_with("test-")
            || stem.ends_with("-test")
            || stem.ends_with("_test")
            || stem == "test")
}

/// The script extensions the JavaScript test runners load.
const JS: &[&str] = &["js", "mjs", "cjs", "ts", "mts", "cts", "jsx", "tsx"];

/// Whether a script named `name` lies in a directory the JavaScript runners collect whole
/// (`node --test`: any `test/`; jest: any `__tests__/`), given the directories on its way.
fn in_test_dir<'a>(mut dirs: impl Iterator<Item = &'a std::ffi::OsStr>, name: &str) -> bool {
    name.rsplit_once('.')
        .is_some_and(|(_, ext)| JS.contains(&ext))
        && dirs.any(|d| d == "test" || d == "__tests__")
}

/// What Python's and the test runners' files the runner's walk met.
#[derive(Debug, Default)]
pub(crate) struct Found {
    entries: Vec<(PathBuf, Kind)>,
    /// Every symlink met (R9-8: `target/debug -> keel/debug` made Keel's own Cargo output
    /// the user's).
    links: Vec<PathBuf>,
    /// More were met than are kept: said in the report, never silent (R8-10).
    pub(crate) truncated: bool,
    /// The workspace walked, when known: what lies at its top is judged by place too.
    pub(crate) root: Option<PathBuf>,
    /// Entries whose place and name may make them hidden code ([`super::session_hidden`]).
    session: Vec<PathBuf>,
    /// The makefiles met ([`super::session_hidden`] reads what they include).
    makefiles: Vec<PathBuf>,
    /// When set, every file (and symlink) met that changed since then is noted in `changed`:
    /// the session's default-deny for what git does not show ([`super::session_hidden`]).
    pub(crate) since: Option<std::time::SystemTime>,
    changed: Vec<PathBuf>,
}

/// The most entries kept per walk.
pub(crate) const MAX_KEPT: usize = 100_000;

impl Found {
    /// An empty walk of `root` noting what changed since `since`.
    pub(crate) fn changed_in(root: &Path, since: std::time::SystemTime) -> Self {
        Self {
            root: Some(root.to_path_buf()),
            since: Some(since),
            ..Self::default()
        }
    }

    /// Entries the session's hiddenness check judges ([`super::session_hidden::kind`]).
    pub(crate) fn session_candidates(&self) -> impl Iterator<Item = &PathBuf> {
        self.session.iter()
    }

    /// The makefiles met.
    pub(crate) fn makefiles(&self) -> &[PathBuf] {
        &self.makefiles
    }

    /// The files (and symlinks) met that changed since [`Self::since`].
    pub(crate) fn changed_files(&self) -> &[PathBuf] {
        &self.changed
    }

    /// Notes `name` of `dir` for the session's hiddenness check, by a cheap look at its name
    /// and place first.
    fn note_session(&mut self, dir: &Path, path: PathBuf, name: &str, parent: &str) {
        let at_top = self.root.as_deref() == Some(dir);
        if matches!(name, "Makefile" | "makefile" | "GNUmakefile") && self.makefiles.len() < 64 {
            self.makefiles.push(path.clone());
        }
        // A cheap look at the name first: most entries are none of these.
        let maybe = super::session_hidden::is_rule_file(name)
            || (name.ends_with(".py") && (at_top || name == "__init__.py"))
            || matches!(parent, ".cargo" | ".mvn" | ".devcontainer" | ".vscode")
            || name.starts_with(".env")
            || [
                "rc",
                "rc.yml",
                ".json",
                ".conf",
                ".ini",
                ".cfg",
                ".toml",
                ".properties",
                ".gradle",
                ".cjs",
                "akefile",
            ]
            .iter()
            .any(|s| name.ends_with(s))
            || [
                ".o",
                ".obj",
                ".a",
                ".class",
                ".jar",
                ".tsbuildinfo",
                ".gch",
                ".pch",
            ]
            .iter()
            .any(|s| name.ends_with(s))
            || is_test_file(name);
        if !maybe {
            return;
        }
        let Some(root) = &self.root else {
            return;
        };
        let Ok(rel) = path.strip_prefix(root).map(Path::to_path_buf) else {
            return;
        };
        if super::session_hidden::kind(&rel).is_some() {
            if self.session.len() < MAX_KEPT {
                self.session.push(root.join(rel));
            } else {
                self.truncated = true;
            }
        }
    }

    /// Notes `entry` (in the directory `dir`) when its name is one the loaders take: a
    /// regular file, a symlink (followed by the loader: R8-22), or a metadata directory.
    pub(crate) fn note(&mut self, dir: &Path, entry: &std::fs::DirEntry) {
        let Ok(t) = entry.file_type() else {
            return;
        };
        self.note_path(dir, entry.path(), &entry.file_name(), t, None);
    }

    /// [`Self::note`] for `path` (named `name`, in `dir`), of type `t` (and its metadata when
    /// known).
    pub(crate) fn note_path(
        &mut self,
        dir: &Path,
        path: PathBuf,
        name: &std::ffi::OsStr,
        t: std::fs::FileType,
        meta: Option<&std::fs::Metadata>,
    ) {
        if t.is_symlink() {
            if self.links.len() < MAX_KEPT {
                self.links.push(path.clone());
            } else {
                self.truncated = true;
            }
        }
        // Names that are not UTF-8 are judged by what they say (red-team pass 10, R10-7:
        // `zz\377.egg-info/entry_points.txt` was skipped, and pytest loaded its plug-in).
        let name = name.to_string_lossy();
        let name = name.as_ref();
        let parent = dir
            .file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default();
        let parent = parent.as_ref();
        // A metadata directory is judged by its `entry_points.txt` (met inside), unless it is
        // a link (to a directory elsewhere holding one).
        if !(t.is_file() || t.is_symlink()) {
            return;
        }
        if let Some(since) = self.since {
            let changed = match meta {
                Some(m) => super::venv_startup::changed_since(m, since),
                None => std::fs::symlink_metadata(&path)
                    .is_ok_and(|m| super::venv_startup::changed_since(&m, since)),
            };
            if changed {
                if self.changed.len() < MAX_KEPT {
                    self.changed.push(path.clone());
                } else {
                    self.truncated = true;
                }
            }
        }
        self.note_session(dir, path.clone(), name, parent);
        let by_dir = || {
            let dirs = dir.components().map(|c| c.as_os_str());
            in_test_dir(dirs, name).then_some(Kind::TestFile)
        };
        let Some(kind) = kind(parent, name).or_else(by_dir) else {
            return;
        };
        if self.entries.len() < MAX_KEPT {
            self.entries.push((path, kind));
        } else {
            self.truncated = true;
        }
    }
}

/// One file moved out of the loaders' way (`moved_to` empty: removed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Moved {
    pub(crate) path: String,
    pub(crate) moved_to: String,
    pub(crate) kind: Kind,
}

pub(crate) use super::git_view::{ignored, nearest_repo};

/// After a writer nobody approved that started at `since` (slack already taken off): moves
/// what of `found` it created or changed out of the loaders' way, except inside `skip`
/// (virtual environments and Cargo's profile directories, judged by their own rules).
pub(crate) fn check(
    workspace: &Path,
    found: &Found,
    skip: &[PathBuf],
    since: std::time::SystemTime,
) -> Vec<Moved> {
    let mut changed: Vec<(PathBuf, Kind)> = Vec::new();
    for (path, kind) in &found.entries {
        if *kind != Kind::Bytecode && skip.iter().any(|s| path.starts_with(s)) {
            continue;
        }
        let Ok(meta) = std::fs::symlink_metadata(path) else {
            continue;
        };
        if !super::venv_startup::changed_since(&meta, since) {
            continue;
        }
        if let Ok(rel) = path.strip_prefix(workspace) {
            changed.push((rel.to_path_buf(), *kind));
        }
    }
    // Test files only where git does not show them.
    let tests: Vec<PathBuf> = changed
        .iter()
        .filter(|(_, k)| *k == Kind::TestFile)
        .map(|(p, _)| p.clone())
        .collect();
    let hidden = ignored(workspace, &tests);
    let mut out = Vec::new();
    for (rel, kind) in changed {
        if kind == Kind::TestFile && !hidden.contains(&rel) {
            continue;
        }
        out.push(move_aside(workspace, &rel, kind));
    }
    out
}

/// What a writer nobody approved that started at `since` left of the files the loaders take
/// ([`super::loaded_code`]), moved out of their way: those the walk met in `python`.
pub(crate) fn loaded_after(
    root: &Path,
    python: &super::venv_startup::Seen,
    since: std::time::SystemTime,
) -> Vec<Moved> {
    let since = since
        .checked_sub(std::time::Duration::from_secs(1))
        .unwrap_or(since);
    // Virtual environments and Cargo's output have their own rules; what Keel's own Cargo
    // target holds is never the user's tools' to load.
    let mut skip: Vec<PathBuf> = python.venvs.iter().chain(&python.cargo).cloned().collect();
    skip.push(root.join(KEEL_TARGET));
    let mut out = check(root, &python.code, &skip, since);
    out.extend(check_cargo(root, &python.cargo, since));
    out.extend(check_links(root, &python.code, since));
    out
}

/// Removes bytecode (a cache), renames anything else aside; a failure is said.
pub(super) fn move_aside(workspace: &Path, rel: &Path, kind: Kind) -> Moved {
    let path = rel.display().to_string();
    if kind == Kind::Bytecode {
        if super::venv_startup::remove_beneath(workspace, rel) {
            return Moved {
                path,
                moved_to: String::new(),
                kind,
            };
        }
        return Moved {
            path,
            moved_to: "(COULD NOT be removed: delete it)".to_string(),
            kind,
        };
    }
    let moved_to = super::git_programs::quarantine(workspace, rel).map_or_else(
        || "(COULD NOT be moved: remove it)".to_string(),
        |to| to.display().to_string(),
    );
    Moved {
        path,
        moved_to,
        kind,
    }
}

/// The report line for one file.
pub(crate) fn line(m: &Moved) -> String {
    if m.path.starts_with('(') {
        return format!("\n- {}", m.path.trim_matches(|c| c == '(' || c == ')'));
    }
    let what = match m.kind {
        Kind::Bytecode => "Python bytecode, which Python may run instead of its source",
        Kind::Native => "a native extension module, which Python imports before a `.py`",
        Kind::Metadata => {
            "package metadata, whose entry points pytest and other tools load as plug-ins"
        }
        Kind::TestFile => "a test file in a directory git ignores, which the test runner collects",
        Kind::CargoOutput => {
            "Cargo's build output, which the user's `cargo test` runs again while it looks fresh"
        }
        Kind::NewTree => {
            "installed dependencies made by a command nobody approved, which the user's `npm install` or `python3 -m venv` would adopt as they are"
        }
        Kind::Hiding => {
            "a rule file git does not show, which hides files (and itself) from `git status` and the diff"
        }
        Kind::Blinding => {
            "it marks files `-diff`/`binary`, so the user's `git diff` would not show their changes"
        }
        Kind::Importable => {
            "Python code git does not show, imported by a `python3 -m …` run from the workspace before the installed module of that name"
        }
        Kind::ToolConfig => {
            "a tool's configuration git does not show, which can make the user's `cargo`, `mvn`, editor or shell run programs"
        }
        Kind::MakeFragment => {
            "a file the user's `make` reads (an `include`), which git does not show"
        }
        Kind::Unreviewed => {
            "a file git does not show (ignored), made or changed by a command nobody approved: nobody reviews it, so it does not stay where the project's tools may read or run it"
        }
        Kind::BuildOutput => {
            "a build output git does not show, which the user's `make` or build tool would reuse as up to date instead of building it from the source (it builds it again)"
        }
    };
    if m.moved_to.is_empty() {
        format!(
            "\n- `{}` removed ({what}; it compiles the source again)",
            m.path
        )
    } else {
        format!("\n- `{}` moved to `{}` ({what})", m.path, m.moved_to)
    }
}

/// After a command nobody approved: each Cargo profile directory in `cargo` outside
/// [`KEEL_TARGET`] that it built into (one that was read-only while it ran is not met) is
/// moved aside — the user's `cargo` rebuilds it.
pub(crate) fn check_cargo(
    workspace: &Path,
    cargo: &[PathBuf],
    since: std::time::SystemTime,
) -> Vec<Moved> {
    let changed = |p: &Path| {
        std::fs::symlink_metadata(p).is_ok_and(|m| super::venv_startup::changed_since(&m, since))
    };
    let mut out = Vec::new();
    for dir in cargo {
        if [dir.clone(), dir.join(".fingerprint"), dir.join("deps")]
            .iter()
            .any(|p| changed(p))
            && let Ok(rel) = dir.strip_prefix(workspace)
        {
            out.push(move_aside(workspace, rel, Kind::CargoOutput));
        }
    }
    out
}

/// After a command nobody approved that started at `since`: each
/// outermost dependency tree of `walked` (trees that were not read-only while it ran) that
/// the command created is moved aside (red-team pass 9, R9-2: a `.pth` in a
/// `.venv/lib/python3.11/site-packages` made before any environment, kept by the user's
/// `python3 -m venv .venv`; a fresh `node_modules` with npm's hidden lockfile, kept by the
/// user's `npm install`). Created: born since `since` (the file system's birth time; its
/// change time where there is none). Cargo's profile directories have their own rule.
///
/// A tree made across commands counts too (red-team pass 10, R10-3: `mkdir -p
/// .venv/lib/python3.11` in one command, not a tree yet, then `site-packages/zz.pth` in the
/// next): one that was no tree at the last walk (`known`: the trees it noted) and that this
/// command changed (its directories, three levels down, or its `pyvenv.cfg`).
pub(crate) fn check_new_trees(
    workspace: &Path,
    walked: &[PathBuf],
    known: Option<&[PathBuf]>,
    since: std::time::SystemTime,
) -> Vec<Moved> {
    let mut trees: Vec<&PathBuf> = walked
        .iter()
        .filter(|t| !t.starts_with(workspace.join(KEEL_TARGET)))
        .filter(|t| {
            !super::dependency_trees::is_cargo_profile(workspace, t, |n| {
                t.join(n).symlink_metadata().is_ok()
            })
        })
        .collect();
    trees.sort();
    trees.dedup();
    let mut out: Vec<Moved> = Vec::new();
    let mut moved: Vec<&PathBuf> = Vec::new();
    for tree in trees {
        let became = || {
            known.is_some_and(|k| !k.iter().any(|t| tree.starts_with(t)))
                && touched_since(tree, since)
        };
        if moved.iter().any(|m| tree.starts_with(m)) || !(born_since(tree, since) || became()) {
            continue;
        }
        if let Ok(rel) = tree.strip_prefix(workspace)
            && !rel.as_os_str().is_empty()
        {
            out.push(move_aside(workspace, rel, Kind::NewTree));
            moved.push(tree);
        }
    }
    out
}

/// Whether the virtual environment `tree` (by its shape) was changed after `since` (a mark of
/// the clock file time stamps come from, which the command started after: a tree the user made
/// a moment before is not the command's) where it is one: its `pyvenv.cfg`, its `lib*`
/// directories, their `python*` directories and those's `site-packages`. A `lib` holding more
/// than 10,000 entries counts as changed. Other trees: no.
fn touched_since(tree: &Path, since: std::time::SystemTime) -> bool {
    use std::os::unix::fs::MetadataExt;
    let changed = |p: &Path| {
        std::fs::symlink_metadata(p).is_ok_and(|m| {
            let ctime = std::time::SystemTime::UNIX_EPOCH
                + std::time::Duration::new(
                    u64::try_from(m.ctime()).unwrap_or(0),
                    u32::try_from(m.ctime_nsec()).unwrap_or(0),
                );
            ctime > since
        })
    };
    if changed(&tree.join("pyvenv.cfg")) {
        return true;
    }
    for lib in ["lib", "lib64", "Lib"].map(|l| tree.join(l)) {
        let Ok(entries) = std::fs::read_dir(&lib) else {
            continue;
        };
        if changed(&lib) || changed(&lib.join("site-packages")) {
            return true;
        }
        for (n, e) in entries.flatten().enumerate() {
            if n >= 10_000 {
                return true;
            }
            if e.file_name().to_string_lossy().starts_with("python")
                && (changed(&e.path()) || changed(&e.path().join("site-packages")))
            {
                return true;
            }
        }
    }
    false
}

/// Whether `path` was created after `since` (birth time; change time without one).
fn born_since(path: &Path, since: std::time::SystemTime) -> bool {
    use rustix::fs::{AtFlags, CWD, StatxFlags, statx};
    let Ok(st) = statx(
        CWD,
        path,
        AtFlags::SYMLINK_NOFOLLOW,
        StatxFlags::BTIME | StatxFlags::CTIME,
    ) else {
        return false;
    };
    let time = |ts: rustix::fs::StatxTimestamp| {
        std::time::SystemTime::UNIX_EPOCH
            + std::time::Duration::new(u64::try_from(ts.tv_sec).unwrap_or(0), ts.tv_nsec)
    };
    // Birth times are exact against `since`, a mark of the clock they are stamped from that
    // the command started after ([`super::file_clock`]): a tree the user made just before the
    // command is stamped at or before it, one the command made, after. Change times get the
    // usual second of slack.
    if st.stx_mask & StatxFlags::BTIME.bits() != 0 {
        time(st.stx_btime) > since
    } else {
        let slack = since
            .checked_sub(std::time::Duration::from_secs(1))
            .unwrap_or(since);
        time(st.stx_ctime) >= slack
    }
}

/// After a command nobody approved: each symlink of `found` it created or changed that leads
/// into [`KEEL_TARGET`] is moved aside (red-team pass 9, R9-8: `ln -s keel/debug
/// target/debug` gave the user's `cargo test` a test binary the model had rewritten).
pub(crate) fn check_links(
    workspace: &Path,
    found: &Found,
    since: std::time::SystemTime,
) -> Vec<Moved> {
    let keel = workspace.join(KEEL_TARGET);
    let keel_real = std::fs::canonicalize(&keel).ok();
    let mut out = Vec::new();
    for link in &found.links {
        let Ok(meta) = std::fs::symlink_metadata(link) else {
            continue;
        };
        if !meta.file_type().is_symlink() || !super::venv_startup::changed_since(&meta, since) {
            continue;
        }
        let Ok(to) = std::fs::read_link(link) else {
            continue;
        };
        let lexical = lexical(&link.parent().unwrap_or(workspace).join(to));
        let real = std::fs::canonicalize(link).ok();
        let into = lexical.starts_with(&keel)
            || real
                .as_ref()
                .zip(keel_real.as_ref())
                .is_some_and(|(r, k)| r.starts_with(k));
        if into && let Ok(rel) = link.strip_prefix(workspace) {
            out.push(move_aside(workspace, rel, Kind::CargoOutput));
        }
    }
    out
}

/// `path` with `.` and `..` taken out by name.
pub(super) fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// The most files a report names one by one.
const MAX_LINES: usize = 200;

/// The report of what was moved, for the command's result.
pub(crate) fn report(moved: &[Moved]) -> Option<String> {
    if moved.is_empty() {
        return None;
    }
    let mut text = String::from(
        "keel: this command (or an earlier one, or a file tool, this session) created or changed files that Python, Cargo, make or the test runner load without the diff showing them; nobody approved that, so Keel moved them out of the loaders' way:",
    );
    for m in moved.iter().take(MAX_LINES) {
        text.push_str(&line(m));
    }
    if moved.len() > MAX_LINES {
        text.push_str(&format!(
            "\n- and {} more (their names end in `.quarantined-by-keel`)",
            moved.len() - MAX_LINES
        ));
    }
    text.push_str(&format!("\nCommands nobody approved build with Cargo into `{KEEL_TARGET}`. If the files are needed (an in-place build of an extension module, `pip install -e .`), ask the user to approve that command or to run it themselves."));
    Some(text)
}

/// Why the file tools refuse to write `rel` (workspace-relative) in `workspace`: it is a file
/// the loaders take that no diff shows (see the module's doc), or it lies in Cargo's build
/// output. `None`: it may be written.
pub(crate) fn refused_for_file_tools(workspace: &Path, rel: &Path) -> Option<String> {
    // Code on `sys.path[0]` or a tool's configuration, where git does not show it (R9-7).
    if matches!(
        super::session_hidden::kind(rel),
        Some(Kind::Importable | Kind::ToolConfig)
    ) && !ignored(workspace, &[rel.to_path_buf()]).is_empty()
    {
        return Some(
            "it is code or tool configuration the user's tools load, in a path git ignores (the diff would not show it)"
                .into(),
        );
    }
    let mut parent = "";
    for c in rel.components() {
        let std::path::Component::Normal(name) = c else {
            continue;
        };
        let name = name.to_str().unwrap_or_default();
        match kind(parent, name) {
            Some(Kind::Bytecode) => {
                return Some("Python bytecode runs in place of its source".to_string());
            }
            Some(Kind::Native) => {
                return Some("a native module is imported before the `.py` it shadows".into());
            }
            Some(Kind::Metadata) => {
                return Some(
                    "package metadata declares the plug-ins pytest and other tools load".into(),
                );
            }
            _ if c.as_os_str() == rel.file_name().unwrap_or_default()
                && (kind(parent, name) == Some(Kind::TestFile)
                    || in_test_dir(rel.components().map(|c| c.as_os_str()), name))
                && !ignored(workspace, &[rel.to_path_buf()]).is_empty() =>
            {
                return Some(
                    "it is a test file the test runner collects, in a path git ignores (the diff would not show it)"
                        .into(),
                );
            }
            _ => {}
        }
        parent = name;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_the_loaders_take() {
        assert_eq!(kind("", "pytest.pyc"), Some(Kind::Bytecode));
        assert_eq!(kind("", "pluggy.so"), Some(Kind::Native));
        assert_eq!(
            kind("", "x.cpython-311-x86_64-linux-gnu.so"),
            Some(Kind::Native)
        );
        assert_eq!(kind("", "x.abi3.so"), Some(Kind::Native));
        assert_eq!(kind("", "x.pyd"), Some(Kind::Native));
        assert_eq!(kind("deps", "libserde_derive-0123abcd.so"), None);
        assert_eq!(
            kind("pwn.egg-info", "entry_points.txt"),
            Some(Kind::Metadata)
        );
        assert_eq!(kind("", "pwn.dist-info"), Some(Kind::Metadata));
        assert_eq!(kind("", "entry_points.txt"), None);
        assert_eq!(kind("data", "conftest.py"), Some(Kind::TestFile));
        assert_eq!(kind("data", "test_a.py"), Some(Kind::TestFile));
        assert_eq!(kind("data", "a.spec.ts"), Some(Kind::TestFile));
        assert_eq!(kind("data", "a_test.go"), Some(Kind::TestFile));
        assert_eq!(kind("src", "app.py"), None);
        assert_eq!(kind("src", "contest.js"), None);
        for name in ["test-smoke.js", "x_test.js", "x-test.mjs", "test.cjs"] {
            assert_eq!(kind("data", name), Some(Kind::TestFile), "{name}");
        }
        let dirs = [std::ffi::OsStr::new("data"), std::ffi::OsStr::new("test")];
        assert!(in_test_dir(dirs.into_iter(), "y.js"));
        assert!(!in_test_dir(dirs.into_iter(), "y.txt"));
    }
}
