//! Code hidden from the user's review, judged for the session rather than per command
//! (red-team pass 9, R9-7 and R9-11). A file git does not show is one the user never reviews;
//! a command can make any file such a file after the fact — `echo '*' > pkg/.gitignore`
//! ignores the package *and the rule itself* (a new directory's `.gitignore` hides its own
//! change), `app.py -diff` in a `.gitattributes` turns the diff of a rewritten file into
//! "Binary files differ" — and the file tools can do the same in two writes. So:
//!
//! - every file of the kinds below that a command nobody approved, or a file tool, created or
//!   changed is **remembered for the session** (per workspace, in this process), and after
//!   each command (and each file-tool write of a `.gitignore` / `.gitattributes`) all of them
//!   are asked of git again: what git ignores now is moved aside and said — whichever
//!   command's rule hid it;
//! - the kinds: Python files on `sys.path[0]` of a `python3 -m …` run from the root (a module
//!   at the root, a root package's `__init__.py`: a shadow `iniconfig/` is imported by the
//!   user's `python3 -m pytest`), the test files the runners collect
//!   ([`super::loaded_code`]), tool configuration that runs programs (`.cargo/config.toml`'s
//!   `runner`, `.mvn/jvm.config`, `.vscode/tasks.json`, `.devcontainer/`, `.envrc`), the
//!   files the user's `make` reads (a makefile's `include` / `-include`, found by the
//!   Makefile judge's own reader: [`super::makefile`]), and `.gitignore` / `.gitattributes`
//!   themselves (a rule file git does not show hides its own effect);
//! - a `.gitattributes` such a writer left that marks files `-diff` or `binary` is moved
//!   aside whether git shows it or not (it blinds the review of other files' diffs);
//! - **default-deny** (issue 29): every *other* file such a command created or changed is
//!   remembered and judged the same way — what git does not show at the end of a command is
//!   moved aside, whatever its kind, unless it is the project's own build output
//!   ([`own_output`]: a tool's self-declared cache under the name the tool gives it, Cargo's
//!   `Cargo.lock`) or lies in a tree with a rule of its own (dependency trees, virtual
//!   environments, Cargo's profile directories and Keel's own Cargo target; bytecode is
//!   removed). A list of dangerous kinds misses the next tool (every per-name list did); this
//!   one names what may stay.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

use super::loaded_code::{Kind, Moved};

/// The most files remembered per workspace (more are said, never dropped silently).
const MAX_REMEMBERED: usize = 100_000;
/// The most makefiles read per check, and the largest read.
const MAX_MAKEFILES: usize = 32;
const MAX_MAKEFILE: u64 = 1024 * 1024;

/// Configuration files, by name in any directory, that make the user's tools run programs or
/// fetch code from elsewhere: the package managers' (`.npmrc`'s `script-shell`: R10-12; a
/// virtual environment's `pip.conf` `index-url`, kept by `python3 -m venv`: R10-11), the
/// test runners', the debuggers' and build tools'.
const TOOL_CONFIGS: &[&str] = &[
    ".devcontainer.json",
    ".envrc",
    ".npmrc",
    ".yarnrc",
    ".yarnrc.yml",
    ".pnpmfile.cjs",
    "bunfig.toml",
    ".bunfig.toml",
    "pip.conf",
    "pip.ini",
    ".pdbrc",
    "pytest.ini",
    "tox.ini",
    "setup.cfg",
    "pyproject.toml",
    "package.json",
    "gradle.properties",
    "local.properties",
    "init.gradle",
    ".mavenrc",
    "Makefile",
    "makefile",
    "GNUmakefile",
];

/// The extensions of build outputs make, javac/Maven/Gradle and `tsc -b` reuse while they look
/// up to date.
const BUILD_OUTPUTS: &[&str] = &["o", "obj", "a", "class", "jar", "tsbuildinfo", "gch", "pch"];

/// What the session's writers nobody approved made, per workspace root.
static MADE: Mutex<BTreeMap<PathBuf, BTreeMap<PathBuf, Kind>>> = Mutex::new(BTreeMap::new());

fn made() -> std::sync::MutexGuard<'static, BTreeMap<PathBuf, BTreeMap<PathBuf, Kind>>> {
    MADE.lock().unwrap_or_else(|e| e.into_inner())
}

/// The files of [`MADE`] by identity (device, inode), per workspace root: one the session made
/// is still its own after a rename of a directory above it, which changes no time stamp of the
/// file itself (red-team pass 10, R10-15: a visible `pkg/conftest.py`, then `mv pkg data/pkg`
/// into an ignored directory).
static MADE_IDS: Mutex<BTreeMap<PathBuf, BTreeSet<(u64, u64)>>> = Mutex::new(BTreeMap::new());

fn made_ids() -> std::sync::MutexGuard<'static, BTreeMap<PathBuf, BTreeSet<(u64, u64)>>> {
    MADE_IDS.lock().unwrap_or_else(|e| e.into_inner())
}

fn id_of(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(path)
        .ok()
        .map(|m| (m.dev(), m.ino()))
}

/// Where the memory of `root` is kept between Keel's processes: in Keel's data directory (a
/// store no command can write), one file per workspace (red-team pass 11, R11-3: a visible
/// `pkg/conftest.py` left by one `keel run` and moved into an ignored directory by the next
/// was never judged again — the memory was this process's). `None` before the data directory
/// is known.
fn kept_at(root: &Path) -> Option<PathBuf> {
    let dir = super::pending::data_dir()?;
    let name = crate::trust::sha256_hex(root.as_os_str().as_encoded_bytes());
    Some(dir.join("session-made").join(name))
}

/// Workspaces whose kept memory this process has read.
static LOADED: Mutex<BTreeSet<PathBuf>> = Mutex::new(BTreeSet::new());

/// Reads the memory kept for `root` by earlier processes into this one's, once.
fn load(root: &Path) {
    {
        let mut loaded = LOADED.lock().unwrap_or_else(|e| e.into_inner());
        if !loaded.insert(root.to_path_buf()) {
            return;
        }
    }
    let Some(path) = kept_at(root) else {
        return;
    };
    // Keel's own record in its data directory (bytes: names need not be UTF-8).
    #[allow(clippy::disallowed_methods)]
    let Ok(text) = std::fs::read(&path) else {
        return;
    };
    let mut all = made();
    let mine = all.entry(root.to_path_buf()).or_default();
    let mut ids = made_ids();
    let my_ids = ids.entry(root.to_path_buf()).or_default();
    for line in text.split(|b| *b == b'\n') {
        let text = String::from_utf8_lossy(line);
        let mut parts = text.split(' ');
        match (parts.next(), parts.next(), parts.next()) {
            (Some("p"), Some(code), Some(hex)) => {
                let kind = code.parse().ok().and_then(Kind::from_code);
                if let (Some(kind), Some(bytes)) = (kind, unhex(hex))
                    && mine.len() < MAX_REMEMBERED
                {
                    let rel = PathBuf::from(
                        <std::ffi::OsString as std::os::unix::ffi::OsStringExt>::from_vec(bytes),
                    );
                    mine.entry(rel).or_insert(kind);
                }
            }
            (Some("i"), Some(dev), Some(ino)) => {
                if let (Ok(dev), Ok(ino)) = (dev.parse(), ino.parse())
                    && my_ids.len() < MAX_REMEMBERED
                {
                    my_ids.insert((dev, ino));
                }
            }
            _ => {}
        }
    }
}

/// Writes this process's memory of `root` where the next process reads it.
fn save(root: &Path) {
    let Some(path) = kept_at(root) else {
        return;
    };
    let mut text = Vec::new();
    if let Some(mine) = made().get(root) {
        for (rel, kind) in mine {
            text.extend_from_slice(format!("p {} ", kind.code()).as_bytes());
            text.extend_from_slice(hex(rel.as_os_str().as_encoded_bytes()).as_bytes());
            text.push(b'\n');
        }
    }
    if let Some(ids) = made_ids().get(root) {
        for (dev, ino) in ids {
            text.extend_from_slice(format!("i {dev} {ino}\n").as_bytes());
        }
    }
    let Some(dir) = path.parent() else {
        return;
    };
    if std::fs::create_dir_all(dir).is_err() {
        return;
    }
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    if std::fs::write(&tmp, &text).is_ok() {
        let _ = std::fs::rename(&tmp, &path);
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    (0..text.len())
        .step_by(2)
        .map(|i| {
            text.get(i..i + 2)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        })
        .collect()
}

/// Remembers `rels` (workspace-relative) as made by the session in `root`; `false` when the
/// bound was reached.
fn remember(root: &Path, rels: impl IntoIterator<Item = (PathBuf, Kind)>) -> bool {
    let full = !remember_here(root, rels);
    save(root);
    !full
}

/// [`remember`] in this process's memory only.
fn remember_here(root: &Path, rels: impl IntoIterator<Item = (PathBuf, Kind)>) -> bool {
    load(root);
    let mut all = made();
    let mine = all.entry(root.to_path_buf()).or_default();
    let mut ids = made_ids();
    let my_ids = ids.entry(root.to_path_buf()).or_default();
    for (rel, kind) in rels {
        if my_ids.len() < MAX_REMEMBERED
            && let Some(id) = id_of(&root.join(&rel))
        {
            my_ids.insert(id);
        }
        if mine.len() >= MAX_REMEMBERED && !mine.contains_key(&rel) {
            return false;
        }
        mine.insert(rel, kind);
    }
    true
}

/// What the session made in `root` that still exists.
fn remembered(root: &Path) -> Vec<(PathBuf, Kind)> {
    load(root);
    let mut all = made();
    let Some(mine) = all.get_mut(root) else {
        return Vec::new();
    };
    mine.retain(|rel, _| std::fs::symlink_metadata(root.join(rel)).is_ok());
    mine.iter().map(|(r, k)| (r.clone(), *k)).collect()
}

/// The tools' caches that declare themselves one (a `CACHEDIR.TAG` with the Cache Directory
/// Tagging signature), by the name each tool gives its cache: what the tool keeps there it
/// reads back as data (test ids, type-check results, lint results), never as code.
const TAGGED_CACHES: &[&str] = &[".pytest_cache", ".mypy_cache", ".ruff_cache"];

/// The Cache Directory Tagging signature a `CACHEDIR.TAG` starts with.
const CACHEDIR_SIGNATURE: &[u8] = b"Signature: 8a477f597d28d172789f06886806bc55";

/// Whether the workspace-relative `rel` is the project's own build output, which the
/// session's default-deny leaves where it is: inside a tool's self-declared cache under the
/// name that tool gives it ([`TAGGED_CACHES`]), or Cargo's `Cargo.lock` beside its
/// `Cargo.toml` (a library crate's is often ignored; it names versions of what `Cargo.toml`
/// declares, with their checksums). Keel's own Cargo target, dependency trees, virtual
/// environments and Cargo's profile directories have rules of their own, and bytecode is
/// removed by its own ([`super::loaded_code`]); the kinds above are judged in any place.
pub(crate) fn own_output(root: &Path, rel: &Path) -> bool {
    let Some(name) = rel.file_name() else {
        return false;
    };
    if name == "Cargo.lock" {
        return std::fs::symlink_metadata(root.join(rel).with_file_name("Cargo.toml"))
            .is_ok_and(|m| m.is_file());
    }
    let mut dir = root.to_path_buf();
    let mut comps = rel.components().peekable();
    while let Some(c) = comps.next() {
        if comps.peek().is_none() {
            break;
        }
        dir.push(c);
        if TAGGED_CACHES.iter().any(|t| c.as_os_str() == *t) {
            // A regular file, read beneath its directory (never a FIFO or a link out).
            let tagged = keel_fs::project::read_in_dir(&dir.join("CACHEDIR.TAG"), 4096)
                .ok()
                .flatten()
                .is_some_and(|t| t.as_bytes().starts_with(CACHEDIR_SIGNATURE));
            return tagged && std::fs::symlink_metadata(&dir).is_ok_and(|m| m.is_dir());
        }
    }
    false
}

/// Whether a repository governs `root`, so that "what git does not show" means something
/// there: `root` is a work tree, or a directory of one its rules do not ignore. A workspace in
/// an ignored directory of another repository (a scratch directory under `target/`), or in
/// none, is shown by no git at all: the default-deny does not apply there (Keel's own
/// snapshots record it; the kinds above are still judged) — but it does inside the
/// repositories below it (a folder of clones).
pub(crate) fn governed(root: &Path) -> bool {
    let Ok(mut git) = crate::safe_git::in_repository(root, &[]) else {
        return false;
    };
    git.args(["check-ignore", "-q", "."])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    // 1: not ignored; 0: ignored; 128: no repository.
    git.status().is_ok_and(|s| s.code() == Some(1))
}

/// Whether `name` is a file of git's rules that hide files or their diffs.
pub(crate) fn is_rule_file(name: &str) -> bool {
    name == ".gitignore" || name == ".gitattributes"
}

/// What the workspace-relative `rel` is to this check, by name (see the module's doc).
pub(crate) fn kind(rel: &Path) -> Option<Kind> {
    let name = rel.file_name()?.to_str()?;
    let parent = rel
        .parent()
        .and_then(Path::file_name)
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    let depth = rel.components().count();
    if is_rule_file(name) {
        return Some(Kind::Hiding);
    }
    // Build outputs the build tools reuse by time stamp (R10-6): objects, archives, classes,
    // TypeScript's build info.
    if let Some((_, ext)) = name.rsplit_once('.')
        && BUILD_OUTPUTS.contains(&ext)
    {
        return Some(Kind::BuildOutput);
    }
    if (depth == 1 && name.ends_with(".py")) || (depth == 2 && name == "__init__.py") {
        return Some(Kind::Importable);
    }
    let tool_config = matches!(
        (parent, name),
        (".cargo", "config" | "config.toml")
            | (".mvn", _)
            | (".devcontainer", _)
            | (
                ".vscode",
                "tasks.json" | "settings.json" | "launch.json" | "extensions.json"
            )
    ) || TOOL_CONFIGS.contains(&name)
        // dotenv files: `node --env-file=.env` takes `NODE_OPTIONS` from one (R10-9).
        || name == ".env"
        || name.starts_with(".env.");
    if tool_config {
        return Some(Kind::ToolConfig);
    }
    match super::loaded_code::kind(parent, name) {
        Some(Kind::TestFile) => Some(Kind::TestFile),
        _ => None,
    }
}

/// Whether the `.gitattributes` text marks files so their diffs do not show (`-diff`,
/// `binary`, in a pattern line or a macro).
fn blinds_diffs(text: &str) -> bool {
    text.lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .any(|l| {
            l.split_whitespace()
                .skip(1)
                .any(|a| a == "-diff" || a == "binary")
        })
}

fn read(path: &Path) -> Option<String> {
    keel_fs::project::read_in_dir(path, MAX_MAKEFILE)
        .ok()
        .flatten()
}

/// The files (workspace-relative, existing, inside the workspace) the makefiles `makefiles`
/// read when the user runs `make` in their directories — each makefile's includes, found by
/// the Makefile judge's reader — and, apart, the files they build (their rules' targets:
/// make reuses one that looks newer than its sources, R10-6).
fn make_files(root: &Path, makefiles: &[PathBuf]) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let mut out = Vec::new();
    let mut built = Vec::new();
    for mk in makefiles.iter().take(MAX_MAKEFILES) {
        let Some(dir) = mk.parent() else {
            continue;
        };
        let Some(name) = mk.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        let mut asked: Vec<PathBuf> = Vec::new();
        let mut reader = |n: &str| -> Result<Option<String>, String> {
            let path = super::loaded_code::lexical(&dir.join(n));
            if !path.starts_with(root) {
                return Ok(None);
            }
            asked.push(path.clone());
            Ok(read(&path))
        };
        // The parse may stop at what it cannot judge; the files read until then count.
        let parsed = super::makefile::recipes(&[name.to_string()], false, &[], &[], &mut reader);
        for target in parsed.map(|r| r.targets).unwrap_or_default() {
            let path = super::loaded_code::lexical(&dir.join(&target));
            if let Ok(rel) = path.strip_prefix(root)
                && std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_file())
                && !built.iter().any(|r| r == rel)
            {
                built.push(rel.to_path_buf());
            }
        }
        for path in asked.into_iter().skip(1) {
            if let Ok(rel) = path.strip_prefix(root)
                && std::fs::symlink_metadata(&path).is_ok()
                && !out.iter().any(|r| r == rel)
            {
                out.push(rel.to_path_buf());
            }
        }
    }
    (out, built)
}

/// After a command that started at `since` (slack already taken off), in `root`: what of
/// the walk's `found` it created or changed (outside the trees `skip`) is remembered when
/// `unapproved`; then everything
/// the session made that git ignores now is moved aside, and every `.gitattributes` this
/// command changed that blinds diffs.
pub(crate) fn check(
    root: &Path,
    found: &super::loaded_code::Found,
    skip: &[PathBuf],
    since: SystemTime,
    unapproved: bool,
) -> (Vec<Moved>, Option<super::bounds::Cut>) {
    let mut out = Vec::new();
    let mut full = false;
    if unapproved {
        let changed = |rel: &Path| {
            std::fs::symlink_metadata(root.join(rel))
                .is_ok_and(|m| super::venv_startup::changed_since(&m, since))
        };
        // Or one the session made before, met at a new path (R10-15) — in this process or an
        // earlier one (R11-3).
        load(root);
        let ours: BTreeSet<(u64, u64)> = made_ids().get(root).cloned().unwrap_or_default();
        let changed_or_ours = |rel: &Path| {
            changed(rel) || id_of(&root.join(rel)).is_some_and(|id| ours.contains(&id))
        };
        let mut mine: Vec<(PathBuf, Kind)> = found
            .session_candidates()
            // Dependency trees (and Cargo's output) have their own rules: an install's
            // hundreds of `package.json` are not configuration the user's tools read.
            .filter(|p| !skip.iter().any(|s| p.starts_with(s)))
            .filter_map(|p| p.strip_prefix(root).ok())
            .filter_map(|rel| kind(rel).map(|k| (rel.to_path_buf(), k)))
            .filter(|(rel, _)| changed_or_ours(rel))
            .collect();
        let (reads, built) = make_files(root, found.makefiles());
        mine.extend(
            reads
                .into_iter()
                .filter(|rel| changed(rel))
                .map(|rel| (rel, Kind::MakeFragment)),
        );
        let outputs: Vec<(PathBuf, Kind)> = built
            .into_iter()
            .filter(|rel| changed(rel) && !mine.iter().any(|(r, _)| r == rel))
            .map(|rel| (rel, Kind::BuildOutput))
            .collect();
        mine.extend(outputs);
        // Every other file it created or changed: the default is that what git does not show
        // does not stay (see the module's doc), unless it is the project's own build output.
        let known: BTreeSet<PathBuf> = mine.iter().map(|(r, _)| r.clone()).collect();
        let mut rest: Vec<(PathBuf, Kind)> = found
            .changed_files()
            .iter()
            .filter(|p| !skip.iter().any(|s| p.starts_with(s)))
            .filter_map(|p| p.strip_prefix(root).ok())
            .filter(|rel| !known.contains(*rel) && kind(rel).is_none())
            .filter(|rel| !own_output(root, rel))
            .map(|rel| (rel.to_path_buf(), Kind::Unreviewed))
            .collect();
        // Where a repository shows what changes: the workspace's own, or one below it.
        if !rest.is_empty() && !governed(root) {
            let mut cache = std::collections::HashMap::new();
            rest.retain(|(rel, _)| {
                super::loaded_code::nearest_repo(root, rel, &mut cache).is_some()
            });
        }
        mine.extend(rest);
        for (rel, _) in mine.iter().filter(|(r, k)| {
            *k == Kind::Hiding && r.file_name().is_some_and(|n| n == ".gitattributes")
        }) {
            if read(&root.join(rel)).is_some_and(|t| blinds_diffs(&t)) {
                out.push(super::loaded_code::move_aside(root, rel, Kind::Blinding));
            }
        }
        full = !remember(root, mine);
    }
    out.extend(hidden_now(root));
    let cut = full.then(|| {
        super::bounds::Cut::new(
            "files the session made that git could hide",
            format!("more than {MAX_REMEMBERED}: those past the bound are not remembered, so a later rule that hides them is not seen"),
        )
    });
    (out, cut)
}

/// Everything the session made in `root` that git ignores now, moved aside.
fn hidden_now(root: &Path) -> Vec<Moved> {
    let made = remembered(root);
    if made.is_empty() {
        return Vec::new();
    }
    let rels: Vec<PathBuf> = made.iter().map(|(r, _)| r.clone()).collect();
    let hidden = super::loaded_code::ignored(root, &rels);
    // All judged before any is moved: moving a rule file aside changes what git ignores.
    let mut out = Vec::new();
    for (rel, kind) in made.into_iter().filter(|(r, _)| hidden.contains(r)) {
        out.push(super::loaded_code::move_aside(root, &rel, kind));
    }
    let mut all = self::made();
    if let Some(mine) = all.get_mut(root) {
        for m in &out {
            mine.remove(Path::new(&m.path));
        }
    }
    drop(all);
    if !out.is_empty() {
        save(root);
    }
    out
}

/// Forgets this process's memory of every workspace, as a new process starts with (what is
/// kept in Keel's data directory stays): for tests of the memory across processes.
#[doc(hidden)]
pub fn forget_in_process() {
    made().clear();
    made_ids().clear();
    LOADED.lock().unwrap_or_else(|e| e.into_inner()).clear();
}

/// After a file tool wrote `written` (workspace-relative): what of it is of the kinds above,
/// or any other file where a repository shows the workspace (the default-deny), is
/// remembered, and when a rule file or such a file was among it, what the session made that
/// git now ignores (and a `.gitattributes` that blinds diffs) is moved aside. The note for the
/// tool's result, or `None`.
pub fn after_file_write(root: &Path, written: &[String]) -> Option<String> {
    let mut mine = Vec::new();
    let mut out = Vec::new();
    let mut rules = false;
    // The file tools are a writer nobody approved too: what they write that git does not show
    // goes, whatever its kind (red-team pass 11, R11-5: `create_file build/main.d`, a file the
    // Makefile `-include`s, stayed), where a repository shows the workspace.
    let mut governs = None;
    let mut repos = std::collections::HashMap::new();
    for rel in written {
        let rel = Path::new(rel.trim_start_matches("./"));
        let k = match kind(rel) {
            Some(k) => k,
            None if !own_output(root, rel)
                && (*governs.get_or_insert_with(|| governed(root))
                    || super::loaded_code::nearest_repo(root, rel, &mut repos).is_some()) =>
            {
                rules = true;
                Kind::Unreviewed
            }
            None => continue,
        };
        if k == Kind::Hiding {
            rules = true;
            if rel.file_name().is_some_and(|n| n == ".gitattributes")
                && read(&root.join(rel)).is_some_and(|t| blinds_diffs(&t))
            {
                out.push(super::loaded_code::move_aside(root, rel, Kind::Blinding));
                continue;
            }
        }
        mine.push((rel.to_path_buf(), k));
    }
    if mine.is_empty() && out.is_empty() {
        return None;
    }
    remember(root, mine);
    if rules {
        out.extend(hidden_now(root));
    }
    super::loaded_code::report(&out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_by_place_and_name() {
        assert_eq!(
            kind(Path::new("iniconfig/__init__.py")),
            Some(Kind::Importable)
        );
        assert_eq!(kind(Path::new("pluggy.py")), Some(Kind::Importable));
        assert_eq!(kind(Path::new("src/pkg/__init__.py")), None);
        assert_eq!(kind(Path::new("src/app.py")), None);
        assert_eq!(kind(Path::new("pkg/.gitignore")), Some(Kind::Hiding));
        assert_eq!(
            kind(Path::new(".cargo/config.toml")),
            Some(Kind::ToolConfig)
        );
        assert_eq!(
            kind(Path::new("crates/x/.cargo/config")),
            Some(Kind::ToolConfig)
        );
        assert_eq!(kind(Path::new("data/conftest.py")), Some(Kind::TestFile));
        for config in [".env", ".env.local", "frontend/.npmrc", ".venv/pip.conf"] {
            assert_eq!(kind(Path::new(config)), Some(Kind::ToolConfig), "{config}");
        }
        assert!(blinds_diffs("app.py -diff\n"));
        assert!(blinds_diffs("*.py binary\n"));
        assert!(!blinds_diffs("*.sh text eol=lf\n# x -diff\n"));
    }

    #[test]
    fn make_reads_its_includes() {
        assert_eq!(kind(Path::new("build/main.o")), Some(Kind::BuildOutput));
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::write(
            root.join("Makefile"),
            "OBJS := build/main.o\n-include $(OBJS:.o=.d)\ninclude local.mk\ntest:\n\t@echo ok\n",
        )
        .unwrap();
        std::fs::create_dir(root.join("build")).unwrap();
        std::fs::write(root.join("build/main.d"), "x: y\n").unwrap();
        std::fs::write(root.join("local.mk"), "A := 1\n").unwrap();
        let (reads, _) = make_files(root, &[root.join("Makefile")]);
        assert!(reads.contains(&PathBuf::from("build/main.d")), "{reads:?}");
        assert!(reads.contains(&PathBuf::from("local.mk")), "{reads:?}");
    }
}
