//! Proof per task: what a task's run did and what shows it worked — the gates run with their
//! results (the project's tests before and after the run, and the engine's own verification),
//! the files changed with diff stats, and each acceptance criterion marked `met` (the model
//! cited evidence Keel could check), `unverified` (claimed, but the evidence is missing or does
//! not check out) or `not_shown`.
//!
//! Evidence is checked, never taken on trust: a `file` must exist in the workspace, a `test`
//! must name an existing test file and the tests must pass after the run, a `command` must be
//! one the session actually ran without error.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::LazyLock;

use keel_protocol::{Event, EventKind};
use keel_tools::fs::FileKind;
use keel_tools::project::{ProjectDir, join_rel};
use regex::Regex;
use serde::{Deserialize, Serialize};

/// One gate's run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GateRun {
    pub name: String,
    pub command: String,
    pub passed: bool,
    pub exit_code: Option<i32>,
    /// The end of its output.
    pub output: String,
}

/// One file the run changed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FileChange {
    pub path: String,
    /// `added`, `modified` or `deleted`.
    pub change: String,
    pub lines_added: usize,
    pub lines_removed: usize,
}

/// How one acceptance criterion was shown.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CriterionProof {
    pub index: usize,
    pub criterion: String,
    /// `met`, `unverified` or `not_shown`.
    pub status: String,
    /// The evidence the model cited (`test …`, `command …`, `file …`).
    pub evidence: Option<String>,
    /// Why the evidence counts or does not.
    pub check: String,
}

/// The proof of one run of a task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Proof {
    pub task: u32,
    pub session_id: String,
    /// How the run ended (`completed`, `failed` …).
    pub run_status: String,
    pub tests_before: Option<GateRun>,
    pub tests_after: Option<GateRun>,
    /// Every gate run after the model finished: the engine's verification, then Keel's own.
    pub gates: Vec<GateRun>,
    pub files: Vec<FileChange>,
    pub criteria: Vec<CriterionProof>,
    /// Whether the run resumed one that was interrupted (its "before" is the resume point).
    #[serde(default)]
    pub resumed: bool,
}

impl Proof {
    /// Every gate passed (no gates: vacuously).
    pub fn gates_passed(&self) -> bool {
        self.gates.iter().all(|g| g.passed)
    }
}

/// Text files of a workspace by relative path (to diff before and after a run).
pub type FileSnapshot = BTreeMap<String, String>;

const SKIP_DIRS: &[&str] = &[
    ".git",
    ".keel",
    "target",
    "node_modules",
    "__pycache__",
    ".pytest_cache",
    ".venv",
    "venv",
    ".mypy_cache",
    ".ruff_cache",
    "dist",
    "build",
];
const MAX_FILES: usize = 5_000;
const MAX_FILE_BYTES: u64 = 512 * 1024;

/// The workspace's text files (skipping VCS, build and cache directories, big and binary files).
/// Listed and read beneath the open workspace directory: symlinks are not followed, FIFOs and
/// devices never opened.
pub fn snapshot_files(root: &Path) -> FileSnapshot {
    let mut out = FileSnapshot::new();
    let Ok(project) = ProjectDir::open(root) else {
        return out;
    };
    let mut stack = vec![String::new()];
    while let Some(dir) = stack.pop() {
        for entry in project.list(&dir) {
            let rel = join_rel(&dir, &entry.name);
            match entry.kind {
                FileKind::Dir if !SKIP_DIRS.contains(&entry.name.as_str()) => stack.push(rel),
                FileKind::File => {
                    if let Ok(Some(text)) = project.read(&rel, MAX_FILE_BYTES) {
                        out.insert(rel, text);
                        if out.len() >= MAX_FILES {
                            return out;
                        }
                    }
                }
                _ => {}
            }
        }
    }
    out
}

/// Files changed between two snapshots, with line diff stats.
pub fn diff_files(before: &FileSnapshot, after: &FileSnapshot) -> Vec<FileChange> {
    let mut out = Vec::new();
    for (path, new) in after {
        let (change, old) = match before.get(path) {
            Some(old) if old == new => continue,
            Some(old) => ("modified", old.as_str()),
            None => ("added", ""),
        };
        let (added, removed) = line_stats(old, new);
        out.push(FileChange {
            path: path.clone(),
            change: change.into(),
            lines_added: added,
            lines_removed: removed,
        });
    }
    for (path, old) in before {
        if !after.contains_key(path) {
            out.push(FileChange {
                path: path.clone(),
                change: "deleted".into(),
                lines_added: 0,
                lines_removed: old.lines().count(),
            });
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out
}

fn line_stats(old: &str, new: &str) -> (usize, usize) {
    let diff = keel_tools::edit::line_diff(old, new);
    let (mut added, mut removed) = (0, 0);
    for change in diff.iter_all_changes() {
        match change.tag() {
            similar::ChangeTag::Insert => added += 1,
            similar::ChangeTag::Delete => removed += 1,
            similar::ChangeTag::Equal => {}
        }
    }
    (added, removed)
}

static CRITERION: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(
        r"(?im)^[\s>*_`-]*criterion\s+#?(\d+)\s*[:.)-]\s*(met|not shown|not met|unmet)\b(.*)$",
    )
    .ok()
});
static EVIDENCE: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"(?i)evidence\s*:\s*(test|command|file)\s+(.+)$").ok());

/// Commands the session ran successfully: `run_command` calls whose result was no error and
/// whose typed details report exit code 0 (a command that ran but failed is not evidence).
pub fn commands_run(events: &[Event]) -> Vec<String> {
    let mut calls: BTreeMap<String, String> = BTreeMap::new();
    let mut ok = Vec::new();
    for e in events {
        match &e.kind {
            EventKind::ToolCall {
                id,
                name,
                arguments,
            } if name == "run_command" => {
                if let Some(c) = arguments.get("command").and_then(|c| c.as_str()) {
                    calls.insert(id.clone(), c.to_string());
                }
            }
            EventKind::ToolResult {
                id,
                is_error,
                details,
                ..
            } => {
                if let Some(c) = calls.remove(id)
                    && !is_error
                    && details.exit_code == Some(0)
                {
                    ok.push(c);
                }
            }
            _ => {}
        }
    }
    ok
}

/// The engine's verification gates in the session's events.
pub fn verification_gates(events: &[Event]) -> Vec<GateRun> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Verification {
                gate,
                passed,
                output,
                exit_code,
                ..
            } => Some(GateRun {
                name: format!("verification: {gate}"),
                command: gate.clone(),
                passed: *passed,
                exit_code: *exit_code,
                output: tail(output, 2_000),
            }),
            _ => None,
        })
        .collect()
}

/// The last `max` characters of `s`.
pub fn tail(s: &str, max: usize) -> String {
    let n = s.chars().count();
    if n <= max {
        return s.to_string();
    }
    format!("…{}", s.chars().skip(n - max).collect::<String>())
}

/// Marks each criterion from the final answer's `CRITERION n:` lines, checking the evidence.
pub fn check_criteria(
    criteria: &[String],
    final_text: &str,
    workspace: &Path,
    tests_after: Option<&GateRun>,
    commands: &[String],
) -> Vec<CriterionProof> {
    let mut claims: BTreeMap<usize, (bool, Option<String>)> = BTreeMap::new();
    if let (Some(re), Some(ev)) = (CRITERION.as_ref(), EVIDENCE.as_ref()) {
        for cap in re.captures_iter(final_text) {
            let Some(n) = cap.get(1).and_then(|m| m.as_str().parse::<usize>().ok()) else {
                continue;
            };
            let met = cap
                .get(2)
                .is_some_and(|m| m.as_str().eq_ignore_ascii_case("met"));
            let rest = cap.get(3).map_or("", |m| m.as_str());
            let evidence = ev.captures(rest).map(|c| {
                let what = c.get(2).map_or("", |m| m.as_str()).trim().trim_matches('`');
                format!(
                    "{} {}",
                    c.get(1).map_or("", |m| m.as_str()).to_lowercase(),
                    what.trim()
                )
            });
            claims.insert(n, (met, evidence));
        }
    }
    criteria
        .iter()
        .enumerate()
        .map(|(i, text)| {
            let index = i + 1;
            let (status, evidence, check) = match claims.get(&index) {
                None => (
                    "not_shown",
                    None,
                    "the final answer does not report it".to_string(),
                ),
                Some((false, ev)) => (
                    "not_shown",
                    ev.clone(),
                    "the model reports it not shown".into(),
                ),
                Some((true, None)) => ("unverified", None, "claimed without evidence".into()),
                Some((true, Some(ev))) => {
                    let (ok, why) = check_evidence(ev, workspace, tests_after, commands);
                    (if ok { "met" } else { "unverified" }, Some(ev.clone()), why)
                }
            };
            CriterionProof {
                index,
                criterion: text.clone(),
                status: status.into(),
                evidence,
                check,
            }
        })
        .collect()
}

fn check_evidence(
    evidence: &str,
    workspace: &Path,
    tests_after: Option<&GateRun>,
    commands: &[String],
) -> (bool, String) {
    let (kind, what) = evidence.split_once(' ').unwrap_or((evidence, ""));
    let what = what.trim().trim_matches('`').trim();
    let file_exists = |p: &str| {
        let rel = Path::new(p);
        rel.is_relative()
            && !rel
                .components()
                .any(|c| matches!(c, std::path::Component::ParentDir))
            && workspace.join(rel).is_file()
    };
    match kind {
        "file" if file_exists(what) => (true, format!("{what} exists")),
        "file" => (false, format!("{what} is not a file in the workspace")),
        "test" => {
            let file = what.split("::").next().unwrap_or(what).trim();
            match tests_after {
                _ if !file_exists(file) => {
                    (false, format!("{file} is not a file in the workspace"))
                }
                Some(t) if t.passed => (
                    true,
                    format!("{file} exists and `{}` passed after the run", t.command),
                ),
                Some(t) => (false, format!("`{}` failed after the run", t.command)),
                None => (false, "no test command ran after the run".into()),
            }
        }
        "command" => {
            // The command itself (with arguments: `sh bye.sh Ada` for `sh bye.sh`), run as a
            // statement of the line, not a line that only mentions it (red-team pass 11,
            // R11-7: `echo 'sh tests/test_greet.sh' is fine` had proved the test passed).
            let want: Vec<&str> = what.split_whitespace().collect();
            let wanted = want.join(" ");
            let ran = commands.iter().any(|c| {
                c.split(['\n', ';'])
                    .flat_map(|s| s.split("&&"))
                    .any(|statement| {
                        let words: Vec<&str> = statement.split_whitespace().collect();
                        !want.is_empty() && words.starts_with(&want)
                    })
            });
            if ran && !wanted.is_empty() {
                (true, format!("the session ran `{wanted}` successfully"))
            } else {
                (
                    false,
                    format!("the session never ran `{wanted}` successfully"),
                )
            }
        }
        _ => (false, format!("unknown kind of evidence `{kind}`")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(seq: u64, kind: EventKind) -> Event {
        Event {
            session_id: "s".into(),
            seq,
            ts: 0,
            run_id: String::new(),
            parent_run_id: None,
            kind,
        }
    }

    #[test]
    fn only_commands_that_exited_zero_count_as_run() {
        let call = |id: &str, command: &str| EventKind::ToolCall {
            id: id.into(),
            name: "run_command".into(),
            arguments: serde_json::json!({ "command": command }),
        };
        let result = |id: &str, exit_code: Option<i32>| EventKind::ToolResult {
            id: id.into(),
            name: "run_command".into(),
            is_error: false,
            content: String::new(),
            details: keel_protocol::ToolDetails {
                exit_code,
                ..Default::default()
            },
            metadata: None,
        };
        let events = [
            event(1, call("a", "python greet.py")),
            event(2, result("a", Some(0))),
            event(3, call("b", "python missing.py")),
            event(4, result("b", Some(2))),
            event(5, call("c", "sleep 999")),
            event(6, result("c", None)),
        ];
        assert_eq!(commands_run(&events), vec!["python greet.py".to_string()]);
    }

    #[test]
    fn evidence_is_checked_not_trusted() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(dir.path().join("greet.py"), "print('hi')\n")
            .unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(dir.path().join("test_greet.py"), "def test_x(): pass\n")
            .unwrap_or_else(|e| panic!("{e}"));
        let tests = GateRun {
            name: "tests".into(),
            command: "pytest -q".into(),
            passed: true,
            exit_code: Some(0),
            output: String::new(),
        };
        let criteria: Vec<String> = (1..=6).map(|i| format!("c{i}")).collect();
        let answer = "Done.\nCRITERION 1: met — evidence: file `greet.py`\n\
            CRITERION 2: met — evidence: test test_greet.py::test_x\n\
            CRITERION 3: met — evidence: command `python greet.py`\n\
            CRITERION 4: met\nCRITERION 5: met — evidence: file nope.py\n";
        let got = check_criteria(
            &criteria,
            answer,
            dir.path(),
            Some(&tests),
            &["python greet.py".into()],
        );
        let statuses: Vec<&str> = got.iter().map(|c| c.status.as_str()).collect();
        assert_eq!(
            statuses,
            ["met", "met", "met", "unverified", "unverified", "not_shown"]
        );
        let none = check_criteria(
            &criteria[..1],
            "CRITERION 1: met — evidence: command ls",
            dir.path(),
            None,
            &[],
        );
        assert_eq!(none[0].status, "unverified");
        // A command that only mentions the evidence's command did not run it (R11-7).
        let echoed = check_criteria(
            &criteria[..1],
            "CRITERION 1: met — evidence: command `sh tests/test_greet.sh`",
            dir.path(),
            None,
            &["echo 'sh tests/test_greet.sh' is fine".into()],
        );
        assert_eq!(echoed[0].status, "unverified");
        // The command with its arguments, or after `cd`, did run it.
        for ran in [
            "sh tests/test_greet.sh -v",
            "cd . && sh tests/test_greet.sh",
        ] {
            let got = check_criteria(
                &criteria[..1],
                "CRITERION 1: met — evidence: command `sh tests/test_greet.sh`",
                dir.path(),
                None,
                &[ran.into()],
            );
            assert_eq!(got[0].status, "met", "{ran}");
        }
    }

    #[test]
    fn diff_stats_count_lines() {
        let mut a = FileSnapshot::new();
        a.insert("x".into(), "1\n2\n3\n".into());
        a.insert("gone".into(), "a\nb\n".into());
        let mut b = FileSnapshot::new();
        b.insert("x".into(), "1\nTWO\n3\n4\n".into());
        b.insert("new".into(), "n\n".into());
        let d = diff_files(&a, &b);
        let got: Vec<(&str, &str, usize, usize)> = d
            .iter()
            .map(|f| {
                (
                    f.path.as_str(),
                    f.change.as_str(),
                    f.lines_added,
                    f.lines_removed,
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                ("gone", "deleted", 0, 2),
                ("new", "added", 1, 0),
                ("x", "modified", 2, 1)
            ]
        );
    }
}
