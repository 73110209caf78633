//! Finding and reading a project's tests: which runner a directory uses (cargo, pytest —
//! or Python's own `unittest` when pytest is not installed and the tests are `unittest` tests —
//! npm/vitest/jest, go test, or the configured command), the command that runs them (optionally
//! scoped to a path), and a summary of the output (passed/failed/skipped and the first failure).
//!
//! [`detect_test_command`] is public so verification gates can use the detected command as
//! their default.

use std::path::{Path, PathBuf};

use serde::Serialize;

/// The test runner a project uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TestRunner {
    Cargo,
    Pytest,
    /// `python3 -m unittest`: a Python project whose tests are `unittest.TestCase`s, where
    /// pytest is not installed.
    Unittest,
    Npm,
    Vitest,
    Jest,
    GoTest,
    /// The command configured in `[shell] test_command`.
    Configured,
}

impl TestRunner {
    /// The runner's name for messages (`cargo test`, `pytest`, …).
    pub fn label(self) -> &'static str {
        match self {
            TestRunner::Cargo => "cargo test",
            TestRunner::Pytest => "pytest",
            TestRunner::Unittest => "unittest",
            TestRunner::Npm => "npm test",
            TestRunner::Vitest => "vitest",
            TestRunner::Jest => "jest",
            TestRunner::GoTest => "go test",
            TestRunner::Configured => "test command",
        }
    }
}

/// A test command ready to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestCommand {
    pub runner: TestRunner,
    /// A bash command line.
    pub command: String,
    /// Where to run it (absolute).
    pub cwd: PathBuf,
}

/// The test command for the project at `dir`: the configured one if given, else the first
/// runner whose marker files are there (Cargo.toml, go.mod, package.json with a test script,
/// pytest configuration or test files). `None` when nothing is recognised.
pub fn detect_test_command(dir: &Path, configured: Option<&str>) -> Option<TestCommand> {
    detect(dir, configured, true)
}

/// `weak`: also accept bare `test_*.py` files as a sign of pytest.
fn detect(dir: &Path, configured: Option<&str>, weak: bool) -> Option<TestCommand> {
    if let Some(c) = configured.map(str::trim).filter(|c| !c.is_empty()) {
        return Some(TestCommand {
            runner: TestRunner::Configured,
            command: c.to_string(),
            cwd: dir.to_path_buf(),
        });
    }
    let cmd = |runner, command: &str| {
        Some(TestCommand {
            runner,
            command: command.to_string(),
            cwd: dir.to_path_buf(),
        })
    };
    if dir.join("Cargo.toml").is_file() {
        return cmd(TestRunner::Cargo, "cargo test --no-fail-fast --color never");
    }
    if dir.join("go.mod").is_file() {
        return cmd(TestRunner::GoTest, "go test -v ./...");
    }
    if let Some(script) = npm_test_script(dir) {
        if script.contains("vitest") {
            return cmd(TestRunner::Vitest, "npx vitest run");
        }
        if script.contains("jest") {
            return cmd(TestRunner::Jest, "npx jest");
        }
        return cmd(TestRunner::Npm, "npm test");
    }
    if uses_pytest(dir, weak) {
        if !has_pytest()
            && let Some(command) = unittest_command(dir)
        {
            return cmd(TestRunner::Unittest, &command);
        }
        return cmd(TestRunner::Pytest, &pytest_command());
    }
    None
}

/// The test command for `path` (workspace-relative, may be empty): found from the nearest
/// directory at or above it (inside `root`) that has a recognised project, and scoped to the
/// path where the runner allows it.
pub fn test_command_for(
    root: &Path,
    path: Option<&Path>,
    configured: Option<&str>,
) -> Option<TestCommand> {
    let Some(target) = path.filter(|p| *p != root) else {
        return detect_test_command(root, configured);
    };
    if configured.is_some_and(|c| !c.trim().is_empty()) {
        let mut c = detect_test_command(root, configured)?;
        c.command = format!("{} {}", c.command, quote(&rel(target, root)));
        return Some(c);
    }
    let start = if target.is_dir() {
        target.to_path_buf()
    } else {
        target.parent()?.to_path_buf()
    };
    // Project files (Cargo.toml, pytest.ini, …) first, bare test files only if none.
    let ancestors: Vec<&Path> = start
        .ancestors()
        .take_while(|d| d.starts_with(root))
        .collect();
    let mut c = ancestors
        .iter()
        .find_map(|d| detect(d, None, false))
        .or_else(|| ancestors.iter().find_map(|d| detect(d, None, true)))?;
    let arg = rel(target, &c.cwd);
    match c.runner {
        TestRunner::Cargo => {
            // An integration-test file runs alone; a crate directory is handled by its cwd.
            let in_tests = Path::new(&arg)
                .parent()
                .is_some_and(|p| p == Path::new("tests"));
            if in_tests
                && let Some(stem) = target.file_stem().and_then(|s| s.to_str())
                && target.extension().is_some_and(|e| e == "rs")
            {
                // `--test=NAME`: a stem starting with `-` stays the option's value.
                c.command = if stem.starts_with('-') {
                    format!("{} --test={}", c.command, quote(stem))
                } else {
                    format!("{} --test {}", c.command, quote(stem))
                };
            }
        }
        TestRunner::Pytest | TestRunner::Vitest | TestRunner::Jest => {
            if !arg.is_empty() && arg != "." {
                c.command = format!("{} {}", c.command, quote(&arg));
            }
        }
        TestRunner::Unittest => {
            if !arg.is_empty() && arg != "." {
                c.command = if target.is_dir() {
                    format!("{UNITTEST} discover -s {}", quote(&arg))
                } else {
                    format!("{UNITTEST} {}", quote(&arg))
                };
            }
        }
        TestRunner::Npm => {
            if !arg.is_empty() && arg != "." {
                c.command = format!("{} -- {}", c.command, quote(&arg));
            }
        }
        TestRunner::GoTest => {
            let dir_arg = if target.is_dir() {
                arg.clone()
            } else {
                Path::new(&arg)
                    .parent()
                    .map(|p| p.to_string_lossy().into_owned())
                    .unwrap_or_default()
            };
            if !dir_arg.is_empty() {
                c.command = format!("go test -v ./{}/...", dir_arg.trim_end_matches('/'));
            }
        }
        TestRunner::Configured => {}
    }
    Some(c)
}

/// `path` relative to `base`, as a runner's *argument*: a name starting with `-` is written
/// `./-…`, so no runner reads a file name the model chose as an option (red-team R5-14: a file
/// named `--junitxml=README.md` made pytest overwrite README.md, `-p evilplug` loaded a plugin).
fn rel(path: &Path, base: &Path) -> String {
    let r = path
        .strip_prefix(base)
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_else(|_| path.to_string_lossy().into_owned());
    if r.starts_with('-') {
        format!("./{r}")
    } else {
        r
    }
}

/// Quotes a word for bash when it needs it.
pub(crate) fn quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_./=:,+@%-".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// A project file in `dir`, read as one: regular, bounded, never blocking on a FIFO, never
/// through a symlink out of `dir`.
fn project_text(dir: &Path, file: &str) -> Option<String> {
    keel_fs::project::read_in_dir(&dir.join(file), keel_fs::project::CONFIG_LIMIT)
        .ok()
        .flatten()
}

fn npm_test_script(dir: &Path) -> Option<String> {
    let text = project_text(dir, "package.json")?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    let script = v.get("scripts")?.get("test")?.as_str()?.to_string();
    // npm init's placeholder fails on purpose.
    (!script.contains("no test specified")).then_some(script)
}

fn uses_pytest(dir: &Path, weak: bool) -> bool {
    let contains =
        |file: &str, needle: &str| project_text(dir, file).is_some_and(|t| t.contains(needle));
    if dir.join("pytest.ini").is_file()
        || dir.join("conftest.py").is_file()
        || contains("pyproject.toml", "[tool.pytest")
        || contains("setup.cfg", "[tool:pytest]")
        || contains("tox.ini", "[pytest]")
    {
        return true;
    }
    if !weak {
        return false;
    }
    test_dirs(dir).next().is_some()
}

/// Whether a file name is a Python test module (`test_x.py`, `x_test.py`).
fn is_test_module(name: &str) -> bool {
    name.ends_with(".py") && (name.starts_with("test_") || name.ends_with("_test.py"))
}

/// The Python test modules directly in `d`, sorted.
fn test_modules(d: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(d)
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .filter(|e| is_test_module(&e.file_name().to_string_lossy()))
        .map(|e| e.path())
        .collect();
    out.sort();
    out
}

/// `dir`, `dir/tests` and `dir/test`, those holding Python test modules.
fn test_dirs(dir: &Path) -> impl Iterator<Item = PathBuf> {
    [dir.to_path_buf(), dir.join("tests"), dir.join("test")]
        .into_iter()
        .filter(|d| !test_modules(d).is_empty())
}

/// Whether `pytest` (or `py.test`) is on commands' PATH (an activated venv's counts: the
/// command runs confined).
fn has_pytest() -> bool {
    super::exec::on_path("pytest") || super::exec::on_path("py.test")
}

/// `pytest` when it is on PATH, else `python3 -m pytest`; quiet, short tracebacks, and no
/// cache directory left in the workspace.
fn pytest_command() -> String {
    let base = if has_pytest() {
        "pytest"
    } else {
        "python3 -m pytest"
    };
    format!("{base} -q --tb=short --color=no -p no:cacheprovider")
}

const UNITTEST: &str = "python3 -m unittest";
/// Test modules read to tell `unittest` tests from pytest ones, and how much of each.
const SNIFF_FILES: usize = 50;
const SNIFF_BYTES: u64 = 256 * 1024;

/// The `unittest` command for the project at `dir` when its tests are all `unittest` tests
/// (they import `unittest` and none imports pytest), else `None`.
fn unittest_command(dir: &Path) -> Option<String> {
    let dirs: Vec<PathBuf> = test_dirs(dir).collect();
    let modules: Vec<PathBuf> = dirs
        .iter()
        .flat_map(|d| test_modules(d))
        .take(SNIFF_FILES)
        .collect();
    let mut any_unittest = false;
    for m in &modules {
        let text = read_head(m)?;
        if text.contains("import pytest")
            || text.contains("from pytest")
            || text.contains("@pytest")
        {
            return None;
        }
        any_unittest |= text.contains("import unittest") || text.contains("from unittest");
    }
    if !any_unittest {
        return None;
    }
    // Discovery looks for `test*.py`; `x_test.py` modules need the pattern.
    let pattern = if modules.iter().all(|m| {
        m.file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("test"))
    }) {
        String::new()
    } else {
        " -p '*test*.py'".to_string()
    };
    let first = dirs.first()?;
    // Discovery enters only packages: a tests directory without `__init__.py` is started in.
    let start = if first == dir || first.join("__init__.py").is_file() {
        String::new()
    } else {
        format!(" -s {}", quote(&rel(first, dir)))
    };
    Some(if start.is_empty() && pattern.is_empty() {
        UNITTEST.to_string()
    } else {
        format!("{UNITTEST} discover{start}{pattern}")
    })
}

/// The start of a regular file, as text: opened beneath its own directory (a symlink out of
/// it, a FIFO or a device is not read), at most [`SNIFF_BYTES`].
fn read_head(path: &Path) -> Option<String> {
    use std::io::Read;
    let dir = crate::beneath::DirHandle::open(path.parent()?).ok()?;
    let opened = dir
        .resolve(Path::new(path.file_name()?))
        .map_err(|_| ())
        .and_then(|t| t.open_regular().map_err(|_| ()));
    let Ok((file, _)) = opened else {
        return Some(String::new());
    };
    let mut buf = Vec::new();
    file.take(SNIFF_BYTES).read_to_end(&mut buf).ok()?;
    Some(String::from_utf8_lossy(&buf).into_owned())
}

/// What a test run amounted to.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct TestSummary {
    pub passed: u64,
    pub failed: u64,
    pub skipped: u64,
    /// True when a count line was found (else the exit code is all there is).
    pub counted: bool,
    /// The first failing test's output (or the build error), when there is one.
    pub first_failure: Option<String>,
}

/// Reads counts and the first failure from a runner's output.
pub fn summarize(runner: TestRunner, output: &str) -> TestSummary {
    let mut s = match runner {
        TestRunner::Cargo => cargo_counts(output),
        TestRunner::GoTest => go_counts(output),
        TestRunner::Unittest => unittest_counts(output),
        _ => generic_counts(output),
    };
    s.first_failure = match runner {
        TestRunner::Cargo => section(
            output,
            |l| l.starts_with("---- ") && l.ends_with(" ----"),
            |l| {
                (l.starts_with("---- ") && l.ends_with(" ----"))
                    || l == "failures:"
                    || l.starts_with("test result:")
            },
        )
        .or_else(|| (!s.counted).then(|| first_error_block(output)).flatten()),
        TestRunner::Pytest => section(
            output,
            |l| l.starts_with("___") && l.ends_with("___"),
            |l| (l.starts_with("___") && l.ends_with("___")) || l.starts_with("==="),
        )
        .or_else(|| {
            section(
                output,
                |l| l.starts_with("===") && l.contains("ERRORS"),
                |l| {
                    l.starts_with("=== short test summary")
                        || (l.starts_with("===") && l.contains(" in "))
                },
            )
        })
        .or_else(|| {
            section(
                output,
                |l| l.starts_with("E ") || l.contains("Error"),
                |l| l.trim().is_empty(),
            )
        }),
        TestRunner::Unittest => section(
            output,
            |l| l.starts_with("FAIL: ") || l.starts_with("ERROR: "),
            |l| l.starts_with("=====") || l.starts_with("Ran "),
        )
        .map(|f| f.trim_end_matches(['-', '\n']).trim_end().to_string()),
        TestRunner::Jest => section(
            output,
            |l| l.trim_start().starts_with("● ") && !l.contains("Console"),
            |l| l.trim_start().starts_with("● "),
        ),
        TestRunner::Vitest => section(
            output,
            |l| l.contains("FAIL "),
            |l| l.contains("⎯⎯⎯") && !l.contains("Failed Tests"),
        ),
        TestRunner::GoTest => go_first_failure(output),
        TestRunner::Npm | TestRunner::Configured => section(
            output,
            |l| l.contains("FAIL") || l.contains("✗") || l.contains("✕"),
            |l| l.trim().is_empty(),
        ),
    };
    s
}

/// The lines from the first line matching `start` up to (not including) the next line
/// matching `end`, at most 60 lines.
fn section(
    output: &str,
    start: impl Fn(&str) -> bool,
    end: impl Fn(&str) -> bool,
) -> Option<String> {
    let lines: Vec<&str> = output.lines().collect();
    let i = lines.iter().position(|l| start(l))?;
    let mut out = vec![lines[i]];
    for l in lines.iter().skip(i + 1) {
        if end(l) || out.len() >= 60 {
            break;
        }
        out.push(l);
    }
    let text = out.join("\n").trim_end().to_string();
    (!text.is_empty()).then_some(text)
}

fn first_error_block(output: &str) -> Option<String> {
    section(output, |l| l.starts_with("error"), |l| l.trim().is_empty())
}

fn number_before(text: &str, word: &str) -> Option<u64> {
    let idx = text.find(word)?;
    text[..idx].split_whitespace().last()?.parse().ok()
}

fn cargo_counts(output: &str) -> TestSummary {
    let mut s = TestSummary::default();
    for line in output.lines().filter(|l| l.starts_with("test result:")) {
        s.counted = true;
        s.passed += number_before(line, " passed").unwrap_or(0);
        s.failed += number_before(line, " failed").unwrap_or(0);
        s.skipped += number_before(line, " ignored").unwrap_or(0);
    }
    s
}

fn go_counts(output: &str) -> TestSummary {
    let mut s = TestSummary::default();
    for line in output.lines().map(str::trim_start) {
        if line.starts_with("--- PASS:") {
            s.passed += 1;
        } else if line.starts_with("--- FAIL:") {
            s.failed += 1;
        } else if line.starts_with("--- SKIP:") {
            s.skipped += 1;
        }
    }
    s.counted = s.passed + s.failed + s.skipped > 0;
    s
}

fn go_first_failure(output: &str) -> Option<String> {
    let lines: Vec<&str> = output.lines().collect();
    let fail = lines
        .iter()
        .position(|l| l.trim_start().starts_with("--- FAIL:"))?;
    let name = lines[fail]
        .trim_start()
        .trim_start_matches("--- FAIL:")
        .split_whitespace()
        .next()?;
    let run = format!("=== RUN   {name}");
    let start = lines[..fail]
        .iter()
        .rposition(|l| l.trim_start() == run)
        .unwrap_or(fail);
    Some(lines[start..=fail].join("\n"))
}

/// `unittest`: `Ran 4 tests in 0.01s`, then `OK`, `OK (skipped=1)` or
/// `FAILED (failures=1, errors=1, skipped=1)`.
fn unittest_counts(output: &str) -> TestSummary {
    let mut s = TestSummary::default();
    let Some(ran) = output.lines().rev().find_map(|l| {
        l.strip_prefix("Ran ")?
            .split_whitespace()
            .next()?
            .parse::<u64>()
            .ok()
    }) else {
        return s;
    };
    s.counted = true;
    let status = output
        .lines()
        .rev()
        .find(|l| l.starts_with("OK") || l.starts_with("FAILED") || l.starts_with("NO TESTS"))
        .unwrap_or("");
    let field = |name: &str| -> u64 {
        status
            .split(['(', ')', ','])
            .filter_map(|part| part.trim().strip_prefix(name)?.strip_prefix('='))
            .filter_map(|n| n.trim().parse::<u64>().ok())
            .sum()
    };
    s.failed = field("failures") + field("errors") + field("unexpected successes");
    s.skipped = field("skipped") + field("expected failures");
    s.passed = ran.saturating_sub(s.failed + s.skipped);
    s
}

/// Counts from the last line that states them: pytest (`1 failed, 2 passed in 0.1s`), jest
/// (`Tests: 1 failed, 2 passed, 3 total`), vitest (`Tests  1 failed | 2 passed (3)`), mocha,
/// node's test runner (`# pass 2`), and the plain `N passed, N failed` form.
fn generic_counts(output: &str) -> TestSummary {
    let mut s = TestSummary::default();
    for line in output.lines().rev() {
        let l = line.trim().to_lowercase();
        let l = l.trim_matches('=').trim();
        let passed = number_before(l, " passed").or_else(|| number_before(l, " passing"));
        let failed = number_before(l, " failed").or_else(|| number_before(l, " failing"));
        let node_pass = l
            .strip_prefix("# pass ")
            .and_then(|n| n.trim().parse().ok());
        let node_fail = l
            .strip_prefix("# fail ")
            .and_then(|n| n.trim().parse().ok());
        if let Some(n) = node_fail {
            s.failed = n;
            s.counted = true;
            continue;
        }
        if let Some(n) = node_pass {
            s.passed = n;
            s.counted = true;
            break;
        }
        if passed.is_some() || failed.is_some() {
            s.counted = true;
            s.passed = passed.unwrap_or(0);
            s.failed = failed.unwrap_or(0) + number_before(l, " error").unwrap_or(0);
            s.skipped = number_before(l, " skipped").unwrap_or(0)
                + number_before(l, " pending").unwrap_or(0)
                + number_before(l, " todo").unwrap_or(0);
            break;
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cargo_output_is_summarised() {
        let out = "running 2 tests\ntest a ... ok\ntest b ... FAILED\n\nfailures:\n\n---- b stdout ----\nthread 'b' panicked at src/lib.rs:9:5:\nassertion failed\n\nfailures:\n    b\n\ntest result: FAILED. 1 passed; 1 failed; 2 ignored; 0 measured; 0 filtered out\n\ntest result: ok. 3 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out\n";
        let s = summarize(TestRunner::Cargo, out);
        assert_eq!((s.passed, s.failed, s.skipped), (4, 1, 2));
        let f = s.first_failure.unwrap_or_default();
        assert!(f.starts_with("---- b stdout ----"), "{f}");
        assert!(f.contains("assertion failed"), "{f}");
        assert!(!f.contains("test result"), "{f}");
    }

    #[test]
    fn pytest_jest_vitest_and_plain_counts() {
        let s = summarize(
            TestRunner::Pytest,
            "F.s\n=== FAILURES ===\n___ test_x ___\n    def test_x():\n>       assert 1 == 2\nE       assert 1 == 2\n=== short test summary info ===\n1 failed, 1 passed, 1 skipped in 0.05s\n",
        );
        assert_eq!((s.passed, s.failed, s.skipped), (1, 1, 1));
        assert!(
            s.first_failure
                .unwrap_or_default()
                .contains("assert 1 == 2")
        );
        let s = summarize(
            TestRunner::Jest,
            "Tests:       1 failed, 4 passed, 5 total\n",
        );
        assert_eq!((s.passed, s.failed), (4, 1));
        let s = summarize(TestRunner::Vitest, " Tests  2 failed | 7 passed (9)\n");
        assert_eq!((s.passed, s.failed), (7, 2));
        let s = summarize(TestRunner::Configured, "result: 3 passed, 0 failed\n");
        assert_eq!((s.passed, s.failed, s.counted), (3, 0, true));
        let s = summarize(TestRunner::Configured, "nothing to see\n");
        assert!(!s.counted);
    }

    #[test]
    fn unittest_output_is_summarised() {
        let out = "F.s.\n======================================================================\nFAIL: test_b (test_calc.CalcTest.test_b)\n----------------------------------------------------------------------\nTraceback (most recent call last):\n  File \"test_calc.py\", line 9, in test_b\n    self.assertEqual(2 + 2, 5)\nAssertionError: 4 != 5\n\n----------------------------------------------------------------------\nRan 4 tests in 0.001s\n\nFAILED (failures=1, skipped=1)\n";
        let s = summarize(TestRunner::Unittest, out);
        assert_eq!((s.passed, s.failed, s.skipped, s.counted), (2, 1, 1, true));
        let f = s.first_failure.unwrap_or_default();
        assert!(
            f.starts_with("FAIL: test_b") && f.ends_with("4 != 5"),
            "{f}"
        );
        let s = summarize(TestRunner::Unittest, "..\n---\nRan 2 tests in 0.0s\n\nOK\n");
        assert_eq!((s.passed, s.failed, s.counted), (2, 0, true));
        let s = summarize(
            TestRunner::Unittest,
            "/usr/bin/python3: No module named unittest_x\n",
        );
        assert!(!s.counted);
    }

    #[test]
    fn unittest_runs_unittest_tests_when_pytest_is_missing() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let d = dir.path();
        std::fs::create_dir_all(d.join("tests")).unwrap_or_default();
        std::fs::write(
            d.join("tests/test_calc.py"),
            "import unittest\n\nclass T(unittest.TestCase):\n    pass\n",
        )
        .unwrap_or_default();
        assert_eq!(
            unittest_command(d).as_deref(),
            Some("python3 -m unittest discover -s tests")
        );
        // A package is found by plain discovery.
        std::fs::write(d.join("tests/__init__.py"), "").unwrap_or_default();
        assert_eq!(unittest_command(d).as_deref(), Some("python3 -m unittest"));
        // `x_test.py` modules need a pattern.
        std::fs::write(
            d.join("tests/calc_test.py"),
            "from unittest import TestCase\n",
        )
        .unwrap_or_default();
        assert_eq!(
            unittest_command(d).as_deref(),
            Some("python3 -m unittest discover -p '*test*.py'")
        );
        // Any pytest test module means pytest.
        std::fs::write(d.join("tests/test_other.py"), "import pytest\n").unwrap_or_default();
        assert_eq!(unittest_command(d), None);
        // Plain pytest-style functions (no unittest) mean pytest.
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(
            dir.path().join("test_a.py"),
            "def test_a():\n    assert 1\n",
        )
        .unwrap_or_default();
        assert_eq!(unittest_command(dir.path()), None);
    }

    #[test]
    fn go_output_is_summarised() {
        let out = "=== RUN   TestA\n--- PASS: TestA (0.00s)\n=== RUN   TestB\n    b_test.go:9: want 2, got 3\n--- FAIL: TestB (0.00s)\nFAIL\n";
        let s = summarize(TestRunner::GoTest, out);
        assert_eq!((s.passed, s.failed), (1, 1));
        let f = s.first_failure.unwrap_or_default();
        assert!(
            f.starts_with("=== RUN   TestB") && f.contains("want 2"),
            "{f}"
        );
    }

    #[test]
    fn detection_prefers_configuration_then_markers() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let d = dir.path();
        assert_eq!(detect_test_command(d, None), None);
        std::fs::write(d.join("test_a.py"), "def test_a(): pass\n").unwrap_or_default();
        assert_eq!(
            detect_test_command(d, None).map(|c| c.runner),
            Some(TestRunner::Pytest)
        );
        std::fs::write(d.join("package.json"), r#"{"scripts":{"test":"vitest"}}"#)
            .unwrap_or_default();
        assert_eq!(
            detect_test_command(d, None).map(|c| c.runner),
            Some(TestRunner::Vitest)
        );
        std::fs::write(d.join("Cargo.toml"), "[package]\nname='x'\n").unwrap_or_default();
        assert_eq!(
            detect_test_command(d, None).map(|c| c.runner),
            Some(TestRunner::Cargo)
        );
        let c = detect_test_command(d, Some("make check"));
        assert_eq!(
            c.map(|c| (c.runner, c.command)),
            Some((TestRunner::Configured, "make check".into()))
        );
    }

    #[test]
    fn paths_scope_the_command() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let d = dir.path();
        std::fs::create_dir_all(d.join("tests")).unwrap_or_default();
        std::fs::write(d.join("Cargo.toml"), "[package]\nname='x'\n").unwrap_or_default();
        std::fs::write(d.join("tests/api.rs"), "").unwrap_or_default();
        let c = test_command_for(d, Some(&d.join("tests/api.rs")), None).map(|c| c.command);
        assert_eq!(
            c.as_deref(),
            Some("cargo test --no-fail-fast --color never --test api")
        );
        std::fs::create_dir_all(d.join("py/tests")).unwrap_or_default();
        std::fs::write(d.join("py/pytest.ini"), "[pytest]\n").unwrap_or_default();
        std::fs::write(d.join("py/tests/test_x.py"), "").unwrap_or_default();
        let c = test_command_for(d, Some(&d.join("py/tests/test_x.py")), None)
            .unwrap_or_else(|| panic!("none"));
        assert_eq!(c.runner, TestRunner::Pytest);
        assert!(c.command.ends_with(" tests/test_x.py"), "{}", c.command);
        assert_eq!(c.cwd, d.join("py"));
    }

    /// R5-14: a test path whose name starts with `-` reaches the runner as a path, never as an
    /// option (`--junitxml=README.md` overwrote README.md; `-p evilplug` loaded a plugin).
    #[test]
    fn a_path_starting_with_a_dash_is_never_an_option() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let d = dir.path();
        std::fs::write(d.join("pytest.ini"), "[pytest]\n").unwrap_or_default();
        for name in ["--junitxml=README.md", "-p evilplug"] {
            std::fs::write(d.join(name), "").unwrap_or_default();
            let c =
                test_command_for(d, Some(&d.join(name)), None).unwrap_or_else(|| panic!("none"));
            // The name reaches the runner as one word, `./`-prefixed (quoted as bash needs).
            let word = format!(" {}", quote(&format!("./{name}")));
            assert!(c.command.ends_with(&word), "{}", c.command);
            let configured = test_command_for(d, Some(&d.join(name)), Some("make test"))
                .unwrap_or_else(|| panic!("none"));
            assert!(
                configured.command.ends_with(&word),
                "{}",
                configured.command
            );
        }
        std::fs::write(d.join("Cargo.toml"), "[package]\nname='x'\n").unwrap_or_default();
        std::fs::create_dir_all(d.join("tests")).unwrap_or_default();
        std::fs::write(d.join("tests/-p x.rs"), "").unwrap_or_default();
        let c = test_command_for(d, Some(&d.join("tests/-p x.rs")), None)
            .unwrap_or_else(|| panic!("none"));
        assert!(c.command.ends_with(" --test='-p x'"), "{}", c.command);
    }
}
