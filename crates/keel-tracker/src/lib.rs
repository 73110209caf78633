//! Is the run getting anywhere? The fix tracker, the loop guard and the progress meter (K1.3).
//!
//! - [`FixTracker`] normalises tool errors into signatures (paths, line numbers, addresses
//!   and numbers stripped) and escalates to a blocker when the same signature fails 3 times,
//!   the same file fails 3 times, or more than 5 fix attempts fail in total. It also keeps the
//!   errors not yet resolved, which compaction must never drop.
//! - [`LoopGuard`] answers a workspace read made again with nothing changed since (also
//!   alternating A, B, A, B) with its earlier result and a note naming the next step instead
//!   of running it again, and stops a run once [`IGNORED_ANSWER_LIMIT`] such answers went
//!   unused (no new successful call or change since), or after the same other call (a
//!   command) 3 times in a row: a loop is not progress.
//! - [`Progress`] tells whether recent iterations did anything new, so that running out of
//!   iterations can end `blocked` (resumable) instead of failed.
//!
//! Nothing here talks to the model or the store; the loop feeds it and acts on its verdicts.

use std::collections::{BTreeMap, HashSet};
use std::sync::LazyLock;

use keel_protocol::ToolCall;
use regex::Regex;
use serde_json::Value;

/// The same error signature this many times escalates.
pub const SAME_SIGNATURE_LIMIT: u32 = 3;
/// The same file failing this many times escalates.
pub const SAME_FILE_LIMIT: u32 = 3;
/// More failed fix attempts than this in one run escalates.
pub const TOTAL_FAILURE_LIMIT: u32 = 5;
/// This many identical consecutive tool calls is a loop.
pub const IDENTICAL_CALL_LIMIT: u32 = 3;
/// Unresolved errors remembered (the most recent ones).
const OPEN_ERRORS_KEPT: usize = 8;

static PATH: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(
        r"(?:[A-Za-z]:)?(?:[\w.@~+-]*[/\\])+[\w.@+-]+|\b[\w-]+\.(?:rs|py|pyi|ts|tsx|js|jsx|mjs|go|java|kt|c|h|cc|cpp|hpp|rb|php|cs|swift|sh|toml|json|yaml|yml|md|txt|lock|cfg|ini)\b",
    )
    .ok()
});
static ADDRESS: LazyLock<Option<Regex>> = LazyLock::new(|| Regex::new(r"\b0x[0-9a-fA-F]+\b").ok());
static LINE_COL: LazyLock<Option<Regex>> = LazyLock::new(|| Regex::new(r":\d+(?::\d+)?").ok());
static NUMBER: LazyLock<Option<Regex>> = LazyLock::new(|| Regex::new(r"\b\d+\b").ok());
static SPACE: LazyLock<Option<Regex>> = LazyLock::new(|| Regex::new(r"\s+").ok());
static KEY_LINE: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r"(?i)error|fail|panic|exception|traceback|cannot|can't|not found|denied|invalid")
        .ok()
});

fn replace(re: &LazyLock<Option<Regex>>, text: &str, with: &str) -> String {
    match re.as_ref() {
        Some(re) => re.replace_all(text, with).into_owned(),
        None => text.to_string(),
    }
}

/// The line of an error message that says what went wrong: the first one that reads like an
/// error, else the first non-empty one.
pub fn key_line(message: &str) -> &str {
    let mut lines = message.lines().map(str::trim).filter(|l| !l.is_empty());
    let first = lines.clone().next().unwrap_or("");
    let keyed = KEY_LINE
        .as_ref()
        .and_then(|re| lines.find(|l| re.is_match(l)));
    keyed.unwrap_or(first)
}

/// The signature of an error: its key line with paths, addresses, line/column numbers and
/// other numbers replaced, whitespace collapsed, at most 160 characters. Two failures with
/// the same signature are the same problem seen again.
pub fn signature(message: &str) -> String {
    let line = key_line(message);
    let s = replace(&PATH, line, "<path>");
    let s = replace(&ADDRESS, &s, "<addr>");
    let s = replace(&LINE_COL, &s, "");
    let s = replace(&NUMBER, &s, "<n>");
    let s = replace(&SPACE, &s, " ");
    s.trim().chars().take(160).collect()
}

/// The first file path an error message names, if any.
pub fn path_in(message: &str) -> Option<String> {
    let re = PATH.as_ref()?;
    re.find(message).map(|m| {
        m.as_str()
            .trim_start_matches("./")
            .trim_end_matches(['.', ','])
            .to_string()
    })
}

pub use keel_protocol::canonical_args;

/// The identity of a call for loop and progress checks: name plus canonical arguments.
pub fn call_key(call: &ToolCall) -> String {
    format!("{}{}", call.name, canonical_args(&call.arguments))
}

/// What a tool call acted on, for grouping failures and resolutions: its `path` argument, else
/// its `command`, else nothing.
pub fn call_target(call: &ToolCall) -> Option<String> {
    ["path", "command", "file", "pattern"]
        .iter()
        .find_map(|k| call.arguments.get(*k).and_then(Value::as_str))
        .map(|s| s.trim_start_matches("./").to_string())
}

/// An error the run has not yet resolved (no later success of the same tool on the same
/// target).
#[derive(Debug, Clone, PartialEq)]
pub struct OpenError {
    pub tool: String,
    pub target: Option<String>,
    /// The key line of the error, at most 300 characters.
    pub message: String,
}

/// The tracker's decision that a human should step in.
#[derive(Debug, Clone, PartialEq)]
pub struct Escalation {
    pub question: String,
    pub evidence: Vec<String>,
}

/// Counts failed fix attempts by signature, by file and in total.
#[derive(Debug, Default)]
pub struct FixTracker {
    by_signature: BTreeMap<String, (u32, String)>,
    by_file: BTreeMap<String, u32>,
    total: u32,
    open: Vec<OpenError>,
    escalated: bool,
}

impl FixTracker {
    /// Records a failed tool call. `fix_attempt` is false for calls that only look (reads,
    /// searches): their errors are remembered as unresolved but not counted. Returns an
    /// escalation the first time a limit is crossed.
    pub fn record_error(
        &mut self,
        tool: &str,
        target: Option<&str>,
        message: &str,
        fix_attempt: bool,
    ) -> Option<Escalation> {
        let key: String = key_line(message).chars().take(300).collect();
        self.open
            .retain(|e| !(e.tool == tool && e.target.as_deref() == target));
        self.open.push(OpenError {
            tool: tool.to_string(),
            target: target.map(str::to_string),
            message: key.clone(),
        });
        if self.open.len() > OPEN_ERRORS_KEPT {
            self.open.remove(0);
        }
        if !fix_attempt {
            return None;
        }
        self.total += 1;
        let sig = signature(message);
        let entry = self.by_signature.entry(sig.clone()).or_insert((0, key));
        entry.0 += 1;
        let same_sig = entry.0;
        let file = target
            .map(str::to_string)
            .or_else(|| path_in(message))
            .filter(|f| !f.is_empty());
        let same_file = match &file {
            Some(f) => {
                let n = self.by_file.entry(f.clone()).or_insert(0);
                *n += 1;
                *n
            }
            None => 0,
        };
        if self.escalated {
            return None;
        }
        let mut reasons = Vec::new();
        if same_sig >= SAME_SIGNATURE_LIMIT {
            reasons.push(format!("the same error came back {same_sig} times: {sig}"));
        }
        if let Some(f) = file.as_deref().filter(|_| same_file >= SAME_FILE_LIMIT) {
            reasons.push(format!("`{f}` failed {same_file} times"));
        }
        if self.total > TOTAL_FAILURE_LIMIT {
            reasons.push(format!("{} failed attempts in this run", self.total));
        }
        if reasons.is_empty() {
            return None;
        }
        self.escalated = true;
        let question = format!(
            "I am stuck: {}. Last error from `{tool}`: {}. How should I proceed?",
            reasons.join("; "),
            key_line(message).chars().take(200).collect::<String>()
        );
        let mut evidence = reasons;
        for (sig, (count, example)) in &self.by_signature {
            evidence.push(format!("{count}× {sig} (e.g. {example})"));
        }
        for (file, count) in &self.by_file {
            let noun = if *count == 1 { "failure" } else { "failures" };
            evidence.push(format!("{file}: {count} {noun}"));
        }
        Some(Escalation { question, evidence })
    }

    /// Records a successful call: it resolves earlier errors of the same tool on the same
    /// target.
    pub fn record_success(&mut self, tool: &str, target: Option<&str>) {
        self.open
            .retain(|e| !(e.tool == tool && e.target.as_deref() == target));
    }

    /// Errors not resolved yet, oldest first.
    pub fn open_errors(&self) -> &[OpenError] {
        &self.open
    }

    /// Failed fix attempts so far.
    pub fn total_failures(&self) -> u32 {
        self.total
    }

    /// Forgets the counts (after a human answered the escalation), keeping the open errors.
    pub fn reset_counts(&mut self) {
        self.by_signature.clear();
        self.by_file.clear();
        self.total = 0;
        self.escalated = false;
    }
}

/// Tools whose result depends only on the workspace (and the run's own stored results): the
/// same call again with nothing changed since gets the same result, so it is answered with
/// the earlier one instead of running again.
pub const REPEATABLE_TOOLS: &[&str] = &[
    "codebase_search",
    "git_diff",
    "git_status",
    "grep",
    "list_files",
    "memory_search",
    "read_file",
    "read_result",
    "tool_search",
];
/// Iterations looked back at to decide whether a run that hit its iteration cap was still
/// progressing.
pub const PROGRESS_WINDOW: u32 = 5;
/// Repeats answered with earlier results, with no new successful call or change since the
/// first of them, before the run stops (a blocker naming the loop). Each answer named the
/// exact next step; a model that ignored it this often will not take it: SmolLM2-135M listed
/// the files again after every answer, between failed reads, until the iteration cap (6 in a
/// row never came, the failed reads in between broke every row).
pub const IGNORED_ANSWER_LIMIT: u32 = 3;
/// Characters of a result kept to answer a repeat (a longer one runs again).
const REMEMBERED_CHARS: usize = 200_000;

/// A result kept to answer the same call again.
#[derive(Debug, Clone)]
struct Earlier {
    iteration: u32,
    content: String,
    is_error: bool,
}

/// A repeated call's answer: the earlier result and a note.
#[derive(Debug, Clone, PartialEq)]
pub struct RepeatAnswer {
    pub content: String,
    pub is_error: bool,
}

/// Detects the same call made again and again, and remembers the results of workspace reads
/// until something changes, to answer a repeat (also an alternation A, B, A, B) with what the
/// model already got.
#[derive(Debug, Default)]
pub struct LoopGuard {
    last: Option<String>,
    repeats: u32,
    earlier: std::collections::HashMap<String, Earlier>,
    /// The keys of the latest calls, newest last (at most four).
    recent: std::collections::VecDeque<String>,
    /// Calls answered with earlier results since the run last did something new.
    answered_since_progress: u32,
}

impl LoopGuard {
    /// Notes a call about to run. Returns a description of the loop when this call is the
    /// [`IDENTICAL_CALL_LIMIT`]-th identical one in a row (it should not run).
    pub fn check(&mut self, call: &ToolCall) -> Option<String> {
        let key = call_key(call);
        if self.last.as_deref() == Some(key.as_str()) {
            self.repeats += 1;
        } else {
            self.last = Some(key);
            self.repeats = 1;
        }
        (self.repeats >= IDENTICAL_CALL_LIMIT).then(|| {
            let args = canonical_args(&call.arguments);
            let args: String = args.chars().take(200).collect();
            format!(
                "`{}` was called {} times in a row with the same arguments {args}",
                call.name, self.repeats
            )
        })
    }

    /// Starts over (after a recovery prompt or a human's answer).
    pub fn reset(&mut self) {
        self.last = None;
        self.repeats = 0;
    }

    /// Something may have changed in the workspace: no earlier result answers a repeat.
    pub fn invalidate(&mut self) {
        self.earlier.clear();
        self.answered_since_progress = 0;
    }

    /// The run did something new (a successful call it had not made before): the answers so
    /// far were not ignored.
    pub fn progressed(&mut self) {
        self.answered_since_progress = 0;
    }

    /// Notes a call about to be made, for the alternation check.
    fn push_recent(&mut self, key: String) {
        self.recent.push_back(key);
        if self.recent.len() > 4 {
            self.recent.pop_front();
        }
    }

    /// Whether `call` repeats an earlier workspace read with nothing changed since.
    pub fn is_repeat(&self, call: &ToolCall) -> bool {
        self.earlier.contains_key(&call_key(call))
    }

    /// Keeps the result of a workspace read that ran, to answer the same call again.
    pub fn remember(&mut self, call: &ToolCall, iteration: u32, content: &str, is_error: bool) {
        if !REPEATABLE_TOOLS.contains(&call.name.as_str()) {
            return;
        }
        let key = call_key(call);
        self.push_recent(key.clone());
        if content.len() <= REMEMBERED_CHARS {
            self.earlier.insert(
                key,
                Earlier {
                    iteration,
                    content: content.to_string(),
                    is_error,
                },
            );
        }
    }

    /// The answer to a repeated call (see [`Self::is_repeat`]): its earlier result with a
    /// note naming the `next` step ([`next_step`]). `Err` with a description of the loop once
    /// [`IGNORED_ANSWER_LIMIT`] repeats were answered so with nothing new done since.
    pub fn answer_repeat(
        &mut self,
        call: &ToolCall,
        next: &str,
    ) -> Option<Result<RepeatAnswer, String>> {
        let key = call_key(call);
        let earlier = self.earlier.get(&key)?.clone();
        self.answered_since_progress += 1;
        if self.answered_since_progress >= IGNORED_ANSWER_LIMIT {
            return Some(Err(format!(
                "the model made {} calls it had already made, with nothing changed and nothing new done since the first (`{}` the last); each was answered with its earlier result and the step to take next ({next}), and the model did not take it",
                self.answered_since_progress, call.name
            )));
        }
        // A, B, A: going back and forth.
        let n = self.recent.len();
        let alternating = n >= 2 && self.recent[n - 2] == key && self.recent[n - 1] != key;
        let other = alternating.then(|| {
            let other = &self.recent[n - 1];
            let name = other.split('{').next().unwrap_or("");
            // `list_files` and `list_files {"path": …}`: name the other call whole.
            if name == call.name {
                let args: String = other[name.len()..].chars().take(120).collect();
                format!("`{name}` with {args} as arguments")
            } else {
                format!("`{name}`")
            }
        });
        self.push_recent(key);
        let why = match other {
            Some(other) => format!(
                "you are going back and forth between `{}` and {other}, and nothing has changed since step {}",
                call.name, earlier.iteration
            ),
            None => format!(
                "you already made this exact `{}` call at step {}, and nothing has changed since",
                call.name, earlier.iteration
            ),
        };
        Some(Ok(RepeatAnswer {
            content: format!(
                "[keel: not run again: {why}. Its result is repeated below. Use it and {next} instead of calling it again.]\n{}",
                earlier.content
            ),
            is_error: earlier.is_error,
        }))
    }
}

/// The step a repeated read's answer points to, in the plan_exec `phase` (`None`: react
/// mode). In planning, after a read, the way on is a plan and `advance_phase`: a weak model
/// that keeps listing files is told that, not "an edit" it may not make yet (SmolLM2's
/// plan_exec runs listed files until the iteration cap, never advancing).
pub fn next_step(phase: Option<&str>) -> &'static str {
    match phase {
        Some("planning") => {
            "state your plan as numbered steps (update_plan, or advance_phase's `summary`), then call advance_phase"
        }
        _ => "take the next step of the task (another file, an edit, the tests)",
    }
}

/// Tracks when the run last did something new: a successful tool call it had not made before.
#[derive(Debug, Default)]
pub struct Progress {
    seen: HashSet<String>,
    last_novel: Option<u32>,
}

impl Progress {
    /// Records a successful call made during `iteration`; whether it was new.
    pub fn record_success(&mut self, call: &ToolCall, iteration: u32) -> bool {
        let new = self.seen.insert(call_key(call));
        if new {
            self.last_novel = Some(iteration);
        }
        new
    }

    /// Whether one of the last `window` iterations (up to `iteration`) made a new successful
    /// call.
    pub fn recent(&self, iteration: u32, window: u32) -> bool {
        self.last_novel
            .is_some_and(|i| iteration.saturating_sub(i) < window.max(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(name: &str, args: Value) -> ToolCall {
        ToolCall {
            id: "c".into(),
            name: name.into(),
            arguments: args,
        }
    }

    #[test]
    fn signatures_ignore_paths_lines_addresses_and_numbers() {
        let a = signature(
            "compiling…\nerror[E0425]: cannot find value `x` in this scope\n --> src/main.rs:3:5",
        );
        let b = signature(
            "error[E0425]: cannot find value `x` in this scope\n --> src/other/lib.rs:40:9",
        );
        assert_eq!(a, b);
        assert_eq!(a, "error[E0425]: cannot find value `x` in this scope");
        assert_eq!(
            signature("panicked at 0x7ffd12ab in /tmp/a/b.rs:12 after 3 tries"),
            signature("panicked at 0x1 in /home/u/c.rs:99 after 41 tries")
        );
        assert_eq!(
            signature("`src/lib.rs` already exists as a file"),
            "`<path>` already exists as a file"
        );
        assert_ne!(
            signature("error: expected `;`"),
            signature("error: mismatched types")
        );
    }

    #[test]
    fn paths_are_found_in_messages() {
        assert_eq!(
            path_in("error at src/parser.rs:10:4: bad").as_deref(),
            Some("src/parser.rs")
        );
        assert_eq!(
            path_in("FAILED test_app.py::test_x").as_deref(),
            Some("test_app.py")
        );
        assert_eq!(path_in("nothing here"), None);
    }

    #[test]
    fn the_same_signature_three_times_escalates_once_with_evidence() {
        let mut t = FixTracker::default();
        let msg = |n: u32| format!("error: cannot find value `y`\n --> src/m{n}.rs:{n}:1");
        assert!(t.record_error("run_tests", None, &msg(1), true).is_none());
        assert!(t.record_error("run_tests", None, &msg(2), true).is_none());
        let esc = t
            .record_error("run_tests", None, &msg(3), true)
            .unwrap_or_else(|| panic!("expected an escalation"));
        assert!(esc.question.contains("3 times"), "{}", esc.question);
        assert!(
            esc.evidence
                .iter()
                .any(|e| e.starts_with("3× error: cannot find value `y`")),
            "{:?}",
            esc.evidence
        );
        assert!(t.record_error("run_tests", None, &msg(4), true).is_none());
    }

    #[test]
    fn the_same_file_three_times_or_six_failures_escalate() {
        let mut t = FixTracker::default();
        for (i, m) in [
            "no match for the search block",
            "syntax error",
            "bad indent",
        ]
        .iter()
        .enumerate()
        {
            let r = t.record_error("edit_file", Some("src/a.rs"), m, true);
            assert_eq!(r.is_some(), i == 2);
        }
        let esc = t.record_error("edit_file", Some("src/a.rs"), "x", true);
        assert!(esc.is_none(), "escalates once");

        let mut t = FixTracker::default();
        for i in 0..5 {
            assert!(
                t.record_error(
                    "w",
                    Some(&format!("f{i}.rs")),
                    &format!("oops {}", "x".repeat(i)),
                    true
                )
                .is_none()
            );
        }
        let esc = t.record_error("w", Some("g.rs"), "different", true);
        assert!(
            esc.is_some_and(|e| e.question.contains("6 failed attempts")),
            "the sixth failure escalates"
        );
    }

    #[test]
    fn reads_are_remembered_but_not_counted_and_success_resolves() {
        let mut t = FixTracker::default();
        for _ in 0..5 {
            assert!(
                t.record_error("read_file", Some("x.rs"), "`x.rs` does not exist", false)
                    .is_none()
            );
        }
        assert_eq!(t.total_failures(), 0);
        assert_eq!(
            t.open_errors().len(),
            1,
            "one open error per tool and target"
        );
        t.record_error("create_file", Some("y.rs"), "disk full", true);
        assert_eq!(t.open_errors().len(), 2);
        t.record_success("read_file", Some("x.rs"));
        assert_eq!(t.open_errors().len(), 1);
        assert_eq!(t.open_errors()[0].tool, "create_file");
    }

    #[test]
    fn identical_consecutive_calls_are_a_loop() {
        let mut g = LoopGuard::default();
        let a = call("read_file", json!({"path": "a", "start_line": 1}));
        let same = call("read_file", json!({"start_line": 1, "path": "a"}));
        let b = call("read_file", json!({"path": "b"}));
        assert!(g.check(&a).is_none());
        assert!(g.check(&same).is_none());
        assert!(g.check(&b).is_none(), "a different call breaks the run");
        assert!(g.check(&a).is_none());
        assert!(g.check(&a).is_none());
        let msg = g.check(&same).unwrap_or_default();
        assert!(msg.contains("3 times in a row"), "{msg}");
        g.reset();
        assert!(g.check(&a).is_none());
    }

    #[test]
    fn repeated_reads_are_answered_with_the_earlier_result_until_something_changes() {
        let mut g = LoopGuard::default();
        let a = call("list_files", json!({}));
        let b = call("read_file", json!({"path": "a"}));
        assert!(!g.is_repeat(&a));
        g.remember(&a, 1, "a\nb\n", false);
        g.remember(&b, 2, "1\tx\n", false);
        assert!(g.is_repeat(&a));
        let again = g
            .answer_repeat(&a, next_step(None))
            .and_then(Result::ok)
            .unwrap_or_else(|| panic!());
        assert!(
            again
                .content
                .contains("going back and forth between `list_files` and `read_file`"),
            "{}",
            again.content
        );
        assert!(again.content.ends_with("\na\nb\n"));
        let same = g
            .answer_repeat(&a, next_step(None))
            .and_then(Result::ok)
            .unwrap_or_else(|| panic!());
        assert!(
            same.content
                .contains("this exact `list_files` call at step 1"),
            "{}",
            same.content
        );
        // Commands and writes are never answered so.
        g.remember(
            &call("run_command", json!({"command": "ls"})),
            3,
            "x",
            false,
        );
        assert!(!g.is_repeat(&call("run_command", json!({"command": "ls"}))));
        // A change forgets every earlier result.
        g.invalidate();
        assert!(!g.is_repeat(&a) && g.answer_repeat(&a, next_step(None)).is_none());
        // Answers the model keeps ignoring end the run, however the repeats are spread: a
        // failed read in between (remembered, not new) does not start the count again.
        g.remember(&a, 4, "a\n", false);
        assert!(matches!(g.answer_repeat(&a, next_step(None)), Some(Ok(_))));
        g.remember(&b, 5, "no such file", true);
        assert!(matches!(g.answer_repeat(&a, next_step(None)), Some(Ok(_))));
        let Some(Err(looping)) = g.answer_repeat(&a, "read calc.py") else {
            panic!("the third ignored answer ends the run")
        };
        assert!(looping.contains("3 calls it had already made"), "{looping}");
        assert!(looping.contains("read calc.py"), "{looping}");
        // Something new in between: the answers were used.
        g.invalidate();
        g.remember(&a, 6, "a\n", false);
        assert!(matches!(g.answer_repeat(&a, next_step(None)), Some(Ok(_))));
        assert!(matches!(g.answer_repeat(&a, next_step(None)), Some(Ok(_))));
        g.progressed();
        assert!(matches!(g.answer_repeat(&a, next_step(None)), Some(Ok(_))));
        assert!(matches!(g.answer_repeat(&a, next_step(None)), Some(Ok(_))));
    }

    #[test]
    fn going_back_and_forth_between_two_calls_of_one_tool_names_both() {
        let mut g = LoopGuard::default();
        let a = call("list_files", json!({}));
        let b = call("list_files", json!({"path": "src"}));
        g.remember(&a, 1, "x\n", false);
        g.remember(&b, 2, "no such directory", true);
        let Some(Ok(answer)) = g.answer_repeat(&a, next_step(None)) else {
            panic!("answered")
        };
        assert!(
            answer.content.contains(
                "back and forth between `list_files` and `list_files` with {\"path\":\"src\"} as arguments"
            ),
            "{}",
            answer.content
        );
    }

    #[test]
    fn progress_means_a_new_successful_call_recently() {
        let mut p = Progress::default();
        assert!(!p.recent(1, 5));
        p.record_success(&call("list_files", json!({})), 1);
        assert!(p.recent(5, 5));
        assert!(!p.recent(6, 5));
        p.record_success(&call("list_files", json!({})), 6);
        assert!(!p.recent(6, 5), "repeating a call is not progress");
        p.record_success(&call("read_file", json!({"path": "a"})), 6);
        assert!(p.recent(6, 5));
    }
}
