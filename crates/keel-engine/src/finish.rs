//! Is a final answer really one? A weak model (or a server whose chat template drops the tool
//! definitions) "completes" a task that asked for a change with an empty reply, a few spaces,
//! or a plain-text answer and no tool call at all — exit 0, nothing changed. The checks here:
//!
//! - an empty or whitespace-only reply (no tool call) is never an answer: the model is nudged
//!   once; a second empty reply in a row ends the attempt with a clear cause;
//! - a task that asks for a change, answered without a successful change, gets one nudge
//!   naming what is missing; answered so again with no tool call in the whole run, the attempt
//!   fails saying the model never used its tools (a template that drops them is the usual
//!   cause). A model that looked and then explains why no change is needed may finish —
//!   but the run is marked [`FinishCheck::changed_nothing`] (`session_finished`'s `unchanged`),
//!   so `keel run` exits 4, not 0: a change task that changed nothing is not a pass.
//!
//! What counts as a change ([`FinishCheck::note_call`]): a successful file write, a successful
//! command the analyser does not judge read-only, or a successful external (MCP) tool call.
//! Reading, searching, listing and read-only commands (`ls`, `cat`, `git diff`) do not.

use keel_protocol::{ErrorCode, ToolCall};
use keel_tools::ToolEffect;

use crate::ending::Failure;

/// Words that, leading a sentence of the task, ask for a change to the workspace.
const CHANGE_VERBS: &[&str] = &[
    "add",
    "append",
    "build",
    "bump",
    "change",
    "convert",
    "correct",
    "create",
    "delete",
    "disable",
    "edit",
    "enable",
    "extend",
    "extract",
    "fix",
    "generate",
    "implement",
    "insert",
    "introduce",
    "make",
    "migrate",
    "modify",
    "move",
    "patch",
    "port",
    "refactor",
    "remove",
    "rename",
    "replace",
    "repair",
    "resolve",
    "rewrite",
    "set",
    "split",
    "support",
    "update",
    "upgrade",
    "write",
];

/// Words that may precede the verb of a request ("please add", "can you fix").
const LEAD_INS: &[&str] = &[
    "please", "can", "could", "would", "you", "now", "then", "and", "also", "kindly",
];

/// Whether `task` asks for a change to the workspace (a sentence of it starts with a change
/// verb, after lead-ins such as "please" or "can you"), rather than a question or a review.
pub(crate) fn asks_for_change(task: &str) -> bool {
    task.split(['.', '!', '?', '\n', ';', ':']).any(|sentence| {
        let words = sentence
            .split(|c: char| !c.is_alphanumeric() && c != '\'')
            .filter(|w| !w.is_empty())
            .map(str::to_lowercase);
        for word in words {
            if LEAD_INS.contains(&word.as_str()) {
                continue;
            }
            return CHANGE_VERBS.contains(&word.as_str());
        }
        false
    })
}

/// What the finish check decided.
#[derive(Debug, PartialEq)]
pub(crate) enum Verdict {
    /// The answer may stand (the other finish hooks decide).
    Accept,
    /// Send the model this note and ask again.
    Nudge(String),
    /// The attempt fails.
    Fail(Failure),
}

/// The per-run state of the finish checks.
#[derive(Debug, Default)]
pub(crate) struct FinishCheck {
    /// The task asks for a change.
    pub(crate) change_task: bool,
    /// The no-change nudge was sent.
    nudged: bool,
    /// Empty replies in a row.
    empty_in_a_row: u32,
    /// A call that may have changed the workspace succeeded in this run.
    changed: bool,
}

impl FinishCheck {
    /// The checks for a run about `task`.
    pub(crate) fn for_task(task: &str) -> Self {
        Self {
            change_task: asks_for_change(task),
            ..Self::default()
        }
    }

    /// A reply with no text and no tool call arrived.
    pub(crate) fn empty_reply(&mut self) -> Verdict {
        self.empty_in_a_row += 1;
        if self.empty_in_a_row >= 2 {
            let mut failure = Failure::new(
                ErrorCode::LlmFailure,
                format!(
                    "the model replied with nothing (no text, no tool call) {} times in a row; an empty reply is not an answer",
                    self.empty_in_a_row
                ),
            );
            failure = failure.with_hint(
                "check the model and server (a template that drops the prompt, a too-small window), or try a stronger model",
            );
            return Verdict::Fail(failure);
        }
        Verdict::Nudge(if self.change_task {
            "Your reply was empty, and nothing has been changed yet. The task asks for a change: make it with a tool call (edit_file, create_file or apply_patch), then reply with a short summary.".into()
        } else {
            "Your reply was empty. Continue the task with a tool call, or reply with a summary if it is done.".into()
        })
    }

    /// A reply with content arrived (text or tool calls).
    pub(crate) fn reply(&mut self) {
        self.empty_in_a_row = 0;
    }

    /// `call`, of a tool with `effect`, succeeded: a write, a command that is not judged
    /// read-only, or an external tool counts as a change.
    pub(crate) fn note_call(&mut self, effect: Option<ToolEffect>, call: &ToolCall) {
        self.changed |= match effect {
            Some(ToolEffect::WritesFiles | ToolEffect::Unknown) => true,
            Some(ToolEffect::RunsCommands) => {
                match call.arguments.get("command").and_then(|c| c.as_str()) {
                    Some(command) => {
                        keel_tools::shell::classify(command).class
                            != keel_tools::shell::SafetyClass::ReadOnly
                    }
                    // A test run or another runner: it may write (snapshots, generated files).
                    None => true,
                }
            }
            _ => false,
        };
    }

    /// Something changed the workspace on the run's behalf (a subagent's write or command).
    pub(crate) fn note_change(&mut self) {
        self.changed = true;
    }

    /// The run ends completed although its task asked for a change and nothing was changed
    /// (the model explained why none was needed, or did not do the work): not a pass.
    pub(crate) fn changed_nothing(&self) -> bool {
        self.change_task && !self.changed
    }

    /// The model says it is done. `called`: the working context holds a tool call.
    pub(crate) fn finish(&mut self, called: bool) -> Verdict {
        if !self.change_task || self.changed {
            return Verdict::Accept;
        }
        if !self.nudged {
            self.nudged = true;
            return Verdict::Nudge(if called {
                "The task asks for a change, but nothing has been changed yet (no file was written). Make the change with edit_file, create_file or apply_patch; if no change is needed, say exactly why.".into()
            } else {
                "The task asks for a change, but you answered without calling any tool, so nothing was changed. Call the tools: read the files involved (read_file), then change them (edit_file, create_file or apply_patch).".into()
            });
        }
        if called {
            return Verdict::Accept;
        }
        let mut failure = Failure::new(
            ErrorCode::LlmFailure,
            "the task asks for a change, but the model answered twice without calling any tool; nothing was changed",
        )
        .with_hint(
            "the server's chat template may drop the tool definitions (check with `keel doctor --ping`), or the model cannot call tools; try another template or a stronger model",
        );
        // The same model behind the same template answers the same way again.
        failure.permanent = true;
        Verdict::Fail(failure)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn change_requests_are_told_from_questions() {
        for task in [
            "add a function that returns 42",
            "Please fix the off-by-one in src/parser.rs",
            "Why does the build fail? Fix it.",
            "can you rename `foo` to `bar`",
            "Implement retries in the client",
        ] {
            assert!(asks_for_change(task), "{task}");
        }
        for task in [
            "what does src/parser.rs do?",
            "explain the retry logic",
            "list the files that add routes",
            "How do I fix this error?",
            "",
        ] {
            assert!(!asks_for_change(task), "{task}");
        }
    }

    #[test]
    fn an_unchanged_change_task_is_nudged_once_then_fails_without_any_tool_call() {
        let mut c = FinishCheck::for_task("add a function that returns 42");
        assert!(
            matches!(c.finish(false), Verdict::Nudge(n) if n.contains("without calling any tool"))
        );
        match c.finish(false) {
            Verdict::Fail(f) => assert!(
                f.message.contains("without calling any tool"),
                "{}",
                f.message
            ),
            other => panic!("{other:?}"),
        }
        // A change made: the answer stands.
        let mut fixed = FinishCheck::for_task("fix it");
        fixed.note_call(Some(ToolEffect::WritesFiles), &call("edit_file", "{}"));
        assert_eq!(fixed.finish(false), Verdict::Accept);
        assert!(!fixed.changed_nothing());
        // A question: the answer stands, and it is no "unchanged" change task.
        let mut question = FinishCheck::for_task("what is this?");
        assert_eq!(question.finish(false), Verdict::Accept);
        assert!(!question.changed_nothing());
    }

    fn call(name: &str, arguments: &str) -> ToolCall {
        ToolCall {
            id: "c1".into(),
            name: name.into(),
            arguments: serde_json::from_str(arguments).unwrap(),
        }
    }

    #[test]
    fn reads_and_read_only_commands_are_no_change_but_writing_commands_are() {
        let mut c = FinishCheck::for_task("fix the parser");
        c.note_call(Some(ToolEffect::ReadOnly), &call("read_file", "{}"));
        c.note_call(
            Some(ToolEffect::RunsCommands),
            &call(
                "run_command",
                r#"{"command": "ls -la && cat src/lib.rs | head"}"#,
            ),
        );
        c.note_call(Some(ToolEffect::Control), &call("update_plan", "{}"));
        assert!(c.changed_nothing());
        // Nudged: the task asks for a change and nothing was changed.
        assert!(matches!(c.finish(false), Verdict::Nudge(n) if n.contains("nothing was changed")));
        c.note_call(
            Some(ToolEffect::RunsCommands),
            &call("run_command", r#"{"command": "sed -i s/a/b/ src/lib.rs"}"#),
        );
        assert!(!c.changed_nothing());
        let mut tests = FinishCheck::for_task("fix the parser");
        tests.note_call(Some(ToolEffect::RunsCommands), &call("run_tests", "{}"));
        assert!(!tests.changed_nothing());
        let mut mcp = FinishCheck::for_task("fix the parser");
        mcp.note_call(Some(ToolEffect::Unknown), &call("mcp__fs__write", "{}"));
        assert!(!mcp.changed_nothing());
    }

    #[test]
    fn two_empty_replies_in_a_row_fail_but_content_between_resets() {
        let mut c = FinishCheck::for_task("explain");
        assert!(matches!(c.empty_reply(), Verdict::Nudge(_)));
        c.reply();
        assert!(matches!(c.empty_reply(), Verdict::Nudge(_)));
        assert!(
            matches!(c.empty_reply(), Verdict::Fail(f) if f.message.contains("2 times in a row"))
        );
    }
}
