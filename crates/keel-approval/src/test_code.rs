//! Test code the session changed (red-team pass 2, R21): `run_tests` is judged by the command
//! it resolves to, but a test run also loads files by convention — `conftest.py`,
//! `test_*.py`, `build.rs`, `jest.config.js`, `*_test.go` — that the model may have written
//! a moment before (writes run unasked under `on-request`). Under `on-request` the first
//! `run_tests` after such a file changed asks, naming the files.
//!
//! A change is seen by the file's status-change time (`ctime`), which a command cannot set
//! back (`touch -d` sets the modification time only), so a file written and back-dated is
//! still new.

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use keel_fs::beneath::FileKind;
use keel_fs::walk::{Visit, WalkOptions};
use keel_tools::Workspace;

/// Where Python keeps bytecode: passed over when looking for test code, looked into for code
/// (Python loads a `.pyc` there in place of the module's source: red-team pass 5, R5-2).
const BYTECODE_DIR: &str = "__pycache__";

/// Directories never looked into: version control, dependencies, build output, virtual
/// environments and caches (a runner does not load test code from them by convention).
const SKIPPED_DIRS: &[&str] = &[
    ".git",
    "node_modules",
    "target",
    ".venv",
    "venv",
    BYTECODE_DIR,
    ".tox",
    ".nox",
    ".mypy_cache",
    ".pytest_cache",
    "dist",
    ".next",
];

/// Directories still passed over when looking for code an interpreter may load: version
/// control, Keel's own directory (its snapshots and state, read-only to commands and the file
/// tools), Rust's build output and caches. Dependency trees and virtual environments are
/// looked into: an interpreter loads them first (a `.pth` in the activated `.venv`'s
/// site-packages, `sitecustomize.py`, `node_modules/dep/index.js`, the venv's `bin/python3`:
/// red-team pass 7, R7-22).
const SKIPPED_FOR_CODE: &[&str] = &[".git", ".keel", "target", ".mypy_cache", ".pytest_cache"];

/// Entries looked at before the scan gives up (a huge tree: nothing is reported).
const MAX_ENTRIES: usize = 200_000;

/// Files shown in a request before "and N more".
const SHOWN: usize = 6;

/// Whether a runner loads the file `name` (in directory `dir`) as code by convention.
fn is_test_code(dir: &str, name: &str) -> bool {
    const NAMES: &[&str] = &[
        "conftest.py",
        "setup.py",
        "noxfile.py",
        "pyproject.toml",
        "pytest.ini",
        "tox.ini",
        "setup.cfg",
        "build.rs",
        "Cargo.toml",
        "package.json",
        ".babelrc",
        "spec_helper.rb",
        "rails_helper.rb",
        "Rakefile",
        "go.mod",
    ];
    if NAMES.contains(&name) {
        return true;
    }
    let stem_ext = name.rsplit_once('.');
    let ext = stem_ext.map_or("", |(_, e)| e);
    let code_js = matches!(
        ext,
        "js" | "ts" | "mjs" | "cjs" | "mts" | "cts" | "jsx" | "tsx"
    );
    (name.starts_with("test_") && ext == "py")
        || name.ends_with("_test.py")
        || name.ends_with("_test.go")
        || name.ends_with("_spec.rb")
        || name.ends_with("_test.rb")
        || (code_js
            && (name.contains(".config.")
                || name.contains(".test.")
                || name.contains(".spec.")
                || name.starts_with("jest.setup")
                || name.starts_with("vitest.setup")))
        || (code_js && dir.split('/').any(|d| d == "__tests__"))
        || (ext == "rs" && dir.split('/').next() == Some("tests"))
        || (dir == ".cargo" && name.starts_with("config"))
}

/// The files a test run loads by convention whose status changed at or after `since`, with a
/// fingerprint of (path, change time, size) of them all; `None` when there is none.
pub(super) fn changed_since(ws: &Workspace, since: SystemTime) -> Option<(Vec<String>, String)> {
    changed_where(ws, since, false, is_test_code).0
}

/// The files of the workspace an interpreter may load as code whose status changed at or
/// after `since` (red-team pass 2, R12/R15: a remembered approval of `python3 gen.py`
/// covered gen.py, not the modules it imports). That is every file, whatever its name: what
/// a script loads is decided by a path it may build (`sys.path.insert`, `importlib` with a
/// computed name, `require(name)`) and by resolution rules that take any name — node's
/// `require("./helpers")` loads a file named `helpers` before `helpers.js` (and then
/// `.json`, `.node`, `helpers/index.js`, the `main` a `package.json` names), Python's
/// `import m` takes `m/__init__.py`, an extension module or bytecode before `m.py`, a `.pth`
/// runs at startup, `require("./x.txt")` runs a text file as JavaScript. A list of code
/// names missed the extension-less `test/helpers` (red-team pass 10, R10-19); so no name is
/// passed over, only the directories in [`SKIPPED_FOR_CODE`], and every program in a `bin`
/// directory and every link (a re-pointed `.venv/bin/python3`) counts too.
/// A workspace too large to look through counts as changed.
pub(super) fn code_changed_since(
    ws: &Workspace,
    since: SystemTime,
) -> Option<(Vec<String>, String)> {
    match changed_where(ws, since, true, |_, _| true) {
        (Some(found), _) => Some(found),
        (None, false) => None,
        (None, true) => Some((
            vec![format!(
                "(the workspace: more than {MAX_ENTRIES} entries to look through)"
            )],
            "unchecked".into(),
        )),
    }
}

/// The files matching `wanted(dir, name)` whose status changed at or after `since` (looking
/// into [`BYTECODE_DIR`] too when `into_bytecode`), and whether the walk stopped before the end (a huge tree, or one that could not be read).
fn changed_where(
    ws: &Workspace,
    since: SystemTime,
    into_bytecode: bool,
    wanted: fn(&str, &str) -> bool,
) -> (Option<(Vec<String>, String)>, bool) {
    let since_ns = since
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i128::try_from(d.as_nanos()).unwrap_or(i128::MAX));
    let handle = ws.handle();
    let mut candidates = Vec::new();
    let mut seen = 0usize;
    let walked = handle.walk_sorted(Path::new(""), WalkOptions::default(), |e| {
        seen += 1;
        if seen > MAX_ENTRIES {
            return Visit::Stop;
        }
        let name = e.name().to_string_lossy();
        if e.is_dir() {
            let skipped = if into_bytecode {
                SKIPPED_FOR_CODE.contains(&name.as_ref())
            } else {
                SKIPPED_DIRS.contains(&name.as_ref())
            };
            return if skipped {
                Visit::Skip
            } else {
                Visit::Continue
            };
        }
        // A link counts when code is looked for: a re-pointed `.venv/bin/python3`.
        let file = e.kind == FileKind::File || (into_bytecode && e.kind == FileKind::Symlink);
        if file && let Some(rel) = e.rel_str() {
            let dir = rel.rsplit_once('/').map_or("", |(d, _)| d);
            if wanted(dir, &name) {
                candidates.push(rel.to_string());
            }
        }
        Visit::Continue
    });
    if walked.is_err() {
        return (None, true);
    }
    let stopped = seen > MAX_ENTRIES;
    let mut changed = Vec::new();
    let mut print = String::new();
    for rel in candidates {
        let Ok(st) = rustix::fs::statat(
            handle.fd(),
            rel.as_str(),
            rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
        ) else {
            continue;
        };
        let ctime = i128::from(st.st_ctime) * 1_000_000_000 + i128::from(st.st_ctime_nsec);
        if ctime >= since_ns {
            print.push_str(&format!("{rel}\0{ctime}\0{}\n", st.st_size));
            changed.push(rel);
        }
    }
    if changed.is_empty() {
        return (None, stopped);
    }
    let mut fp = keel_tools::trust::sha256_hex(print.as_bytes());
    fp.truncate(16);
    (Some((changed, fp)), stopped)
}

/// `a, b, c and 3 more`.
pub(super) fn list(files: &[String]) -> String {
    let mut text = files
        .iter()
        .take(SHOWN)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if files.len() > SHOWN {
        text.push_str(&format!(" and {} more", files.len() - SHOWN));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conventional_test_code_is_recognised() {
        for (dir, name) in [
            ("", "conftest.py"),
            ("tests", "test_a.py"),
            ("pkg", "a_test.py"),
            ("", "build.rs"),
            ("", "jest.config.js"),
            ("", "vitest.config.ts"),
            ("src", "app.test.tsx"),
            ("src/__tests__", "a.js"),
            ("tests", "it.rs"),
            (".cargo", "config.toml"),
            ("x", "a_test.go"),
            ("spec", "a_spec.rb"),
            ("", "package.json"),
        ] {
            assert!(is_test_code(dir, name), "{dir}/{name}");
        }
        for (dir, name) in [
            ("", "README.md"),
            ("src", "main.rs"),
            ("src", "app.js"),
            ("", "notes.py"),
        ] {
            assert!(!is_test_code(dir, name), "{dir}/{name}");
        }
    }

    #[test]
    fn only_files_changed_since_count_even_when_back_dated() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        std::fs::create_dir_all(dir.path().join("tests")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::create_dir_all(dir.path().join("node_modules/x"))
            .unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(dir.path().join("tests/test_old.py"), "").unwrap_or_else(|e| panic!("{e}"));
        let ws = Workspace::new(dir.path()).unwrap_or_else(|e| panic!("{e}"));
        std::thread::sleep(std::time::Duration::from_millis(20));
        let since = SystemTime::now();
        assert_eq!(changed_since(&ws, since), None);
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::write(dir.path().join("conftest.py"), "import os\n")
            .unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(dir.path().join("node_modules/x/a.test.js"), "")
            .unwrap_or_else(|e| panic!("{e}"));
        // Back-dating the modification time does not hide the change.
        let old = std::fs::File::options()
            .write(true)
            .open(dir.path().join("conftest.py"))
            .unwrap_or_else(|e| panic!("{e}"));
        old.set_modified(UNIX_EPOCH)
            .unwrap_or_else(|e| panic!("{e}"));
        let (files, fp) = changed_since(&ws, since).unwrap_or_default();
        assert_eq!(files, ["conftest.py"]);
        assert_eq!(fp.len(), 16);
    }

    /// Red-team pass 5, R5-2: after `python3 gen.py` was approved for the session, an
    /// "unchecked-hash" `__pycache__/util.cpython-311.pyc` (which Python loads in place of
    /// `util.py`) counts as changed code, like `util.py` itself.
    #[test]
    fn planted_bytecode_counts_as_changed_code() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(dir.path().join("gen.py"), "import util\n")
            .unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(dir.path().join("util.py"), "def hello(): pass\n")
            .unwrap_or_else(|e| panic!("{e}"));
        let ws = Workspace::new(dir.path()).unwrap_or_else(|e| panic!("{e}"));
        std::thread::sleep(std::time::Duration::from_millis(20));
        let since = SystemTime::now();
        assert_eq!(code_changed_since(&ws, since), None);
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::create_dir_all(dir.path().join("__pycache__")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(
            dir.path().join("__pycache__/util.cpython-311.pyc"),
            b"\xa7\x0d\x0d\x0a",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let (files, _) = code_changed_since(&ws, since).unwrap_or_default();
        assert_eq!(files, ["__pycache__/util.cpython-311.pyc"]);
    }

    /// Red-team pass 7, R7-22: what the interpreter loads first from the workspace — a `.pth`
    /// or `sitecustomize.py` in the activated `.venv`, a dependency's code in `node_modules`,
    /// the venv's `python3` itself — counts as changed code for a remembered approval.
    #[test]
    fn what_an_interpreter_loads_at_startup_counts_as_changed_code() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let p = |rel: &str| dir.path().join(rel);
        let site = ".venv/lib/python3.11/site-packages";
        for d in [
            site,
            ".venv/bin",
            "node_modules/dep",
            "node_modules/.bin",
            "target/debug",
        ] {
            std::fs::create_dir_all(p(d)).unwrap_or_else(|e| panic!("{e}"));
        }
        std::fs::write(p("gen.py"), "print(1)\n").unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(p("node_modules/dep/index.js"), "module.exports = 1\n")
            .unwrap_or_else(|e| panic!("{e}"));
        std::os::unix::fs::symlink("/usr/bin/python3", p(".venv/bin/python3"))
            .unwrap_or_else(|e| panic!("{e}"));
        let ws = Workspace::new(dir.path()).unwrap_or_else(|e| panic!("{e}"));
        std::thread::sleep(std::time::Duration::from_millis(20));
        let since = SystemTime::now();
        assert_eq!(code_changed_since(&ws, since), None);
        std::thread::sleep(std::time::Duration::from_millis(20));
        // Build output is still passed over.
        std::fs::write(p("target/debug/x.js"), "").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(code_changed_since(&ws, since), None);
        std::fs::write(p(&format!("{site}/zz.pth")), "import shutil\n")
            .unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(
            p("node_modules/dep/index.js"),
            "require('fs').rmSync('src')\n",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        std::fs::remove_file(p(".venv/bin/python3")).unwrap_or_else(|e| panic!("{e}"));
        std::os::unix::fs::symlink("/bin/sh", p(".venv/bin/python3"))
            .unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(p("node_modules/.bin/jest"), "#!/bin/sh\n")
            .unwrap_or_else(|e| panic!("{e}"));
        let (files, _) = code_changed_since(&ws, since).unwrap_or_default();
        assert_eq!(
            files,
            [
                ".venv/bin/python3",
                &format!("{site}/zz.pth"),
                "node_modules/.bin/jest",
                "node_modules/dep/index.js",
            ]
        );
    }

    /// Red-team pass 10, R10-19: after `npm test` was approved for the session, the model
    /// created an extension-less `test/helpers`, which node's `require("./helpers")` loads in
    /// place of the approved `test/helpers.js`: the re-run was not asked. Every file
    /// resolution may load — any name — counts as changed code; Keel's own `.keel/` does not.
    #[test]
    fn a_file_resolution_loads_counts_whatever_its_name() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let p = |rel: &str| dir.path().join(rel);
        for d in ["test", "lib/native", "pkg", ".keel/snapshots"] {
            std::fs::create_dir_all(p(d)).unwrap_or_else(|e| panic!("{e}"));
        }
        std::fs::write(p("test/helpers.js"), "module.exports = {}\n")
            .unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(p("test/a.test.js"), "require('./helpers')\n")
            .unwrap_or_else(|e| panic!("{e}"));
        let ws = Workspace::new(dir.path()).unwrap_or_else(|e| panic!("{e}"));
        std::thread::sleep(std::time::Duration::from_millis(20));
        let since = SystemTime::now();
        assert_eq!(code_changed_since(&ws, since), None);
        std::thread::sleep(std::time::Duration::from_millis(20));
        for (rel, text) in [
            (
                "test/helpers",
                "require('http').get('http://127.0.0.1:9/')\n",
            ),
            ("lib/config.json", "{}\n"),
            ("lib/native/addon.node", "\x7fELF"),
            ("pkg/data.txt", "print(1)\n"),
            (".keel/snapshots/abc", "keel's own\n"),
        ] {
            std::fs::write(p(rel), text).unwrap_or_else(|e| panic!("{e}"));
        }
        let (files, _) = code_changed_since(&ws, since).unwrap_or_default();
        assert_eq!(
            files,
            [
                "lib/config.json",
                "lib/native/addon.node",
                "pkg/data.txt",
                "test/helpers",
            ]
        );
    }
}
