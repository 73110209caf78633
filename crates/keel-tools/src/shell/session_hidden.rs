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
//!   aside whether git shows it or not (it blinds the review of other files' diffs).

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

/// Remembers `rels` (workspace-relative) as made by the session in `root`; `false` when the
/// bound was reached.
fn remember(root: &Path, rels: impl IntoIterator<Item = (PathBuf, Kind)>) -> bool {
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
    let mut all = made();
    let Some(mine) = all.get_mut(root) else {
        return Vec::new();
    };
    mine.retain(|rel, _| std::fs::symlink_metadata(root.join(rel)).is_ok());
    mine.iter().map(|(r, k)| (r.clone(), *k)).collect()
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
) -> Vec<Moved> {
    let mut out = Vec::new();
    let mut full = false;
    if unapproved {
        let changed = |rel: &Path| {
            std::fs::symlink_metadata(root.join(rel))
                .is_ok_and(|m| super::venv_startup::changed_since(&m, since))
        };
        // Or one the session made before, met at a new path (R10-15).
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
    if full {
        out.push(Moved {
            path: format!("(more than {MAX_REMEMBERED} files this session made that git could hide: those past the bound are not checked; review `git status --ignored` before running the project's tools)"),
            moved_to: "(NOT checked)".into(),
            kind: Kind::Hiding,
        });
    }
    out
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
    out
}

/// After a file tool wrote `written` (workspace-relative): what of it is of the kinds above
/// is remembered, and when a rule file was among it, what the session made that git now
/// ignores (and a `.gitattributes` that blinds diffs) is moved aside. The note for the
/// tool's result, or `None`.
pub fn after_file_write(root: &Path, written: &[String]) -> Option<String> {
    let mut mine = Vec::new();
    let mut out = Vec::new();
    let mut rules = false;
    for rel in written {
        let rel = Path::new(rel.trim_start_matches("./"));
        let Some(k) = kind(rel) else {
            continue;
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
