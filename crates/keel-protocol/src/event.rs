//! The event stream: everything the engine does, as typed events with a session id, a
//! monotonic sequence number and the run that produced them. The CLI, `--json` output, the
//! store and the server consume it.
//!
//! Two words are kept apart: a **turn** is one user message and everything the session does
//! about it (it ends with `turn_finished`); a **step** is one model request inside a turn
//! (`turn_started {iteration}` — the historical name of a step's start, kept because event
//! type names are a public contract — then the reply and its tool calls).

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::Usage;

/// One event of a session. Serialises flat: `{"session_id", "seq", "ts", "type", ...fields}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    pub session_id: String,
    /// Strictly increasing within a session, starting at 1.
    pub seq: u64,
    /// Unix time in milliseconds when the event was emitted.
    pub ts: u64,
    /// The run that produced the event: one turn of an agent (a user message and the model
    /// requests — steps — it takes), or one operation on the session (an undo). A subagent's
    /// or flow node's events carry their own run id.
    #[serde(default)]
    pub run_id: String,
    /// The run that started this one (a subagent's parent turn), absent for a top-level run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_run_id: Option<String>,
    #[serde(flatten)]
    pub kind: EventKind,
}

/// Files a session's successful tool results reported writing (their typed `files`; events
/// stored before tool results were typed said it in `metadata.paths`).
pub fn files_written(events: &[Event]) -> BTreeSet<String> {
    let mut files = BTreeSet::new();
    for e in events {
        if let EventKind::ToolResult {
            is_error: false,
            details,
            metadata,
            ..
        } = &e.kind
        {
            files.extend(details.files.iter().cloned());
            if let Some(paths) = metadata
                .as_ref()
                .and_then(|m| m.get("paths"))
                .and_then(|p| p.as_array())
            {
                files.extend(paths.iter().filter_map(|p| p.as_str()).map(str::to_string));
            }
        }
    }
    files
}

impl Event {
    /// The event's `type` name as it appears in JSON.
    pub fn type_name(&self) -> &'static str {
        self.kind.type_name()
    }
}

/// Which stream a delta belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeltaChannel {
    Text,
    Reasoning,
}

/// What happened. The `type` names are a public contract; never rename them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum EventKind {
    SessionStarted {
        task: String,
        workspace: String,
        provider: String,
        model: String,
        mode: String,
        max_iterations: u32,
        /// The phase a plan_exec session starts in (absent in react mode).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        phase: Option<String>,
    },
    /// A step starts: one model request (`iteration` counts the session's steps). Despite its
    /// name it is not a turn; a turn is a user message and ends with `turn_finished`.
    TurnStarted {
        iteration: u32,
    },
    /// A fragment of streamed model output.
    AssistantDelta {
        text: String,
        #[serde(default = "text_channel")]
        channel: DeltaChannel,
    },
    /// The model's complete reply for one request.
    AssistantMessage {
        text: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reasoning: Option<String>,
        /// Number of tool calls the reply requests (each follows as a `tool_call` event).
        tool_calls: usize,
        /// Usage of this one request.
        usage: Usage,
    },
    ToolCall {
        id: String,
        name: String,
        arguments: Value,
    },
    ToolResult {
        id: String,
        name: String,
        is_error: bool,
        content: String,
        /// What the call did, typed: files changed and their diff, exit code, a question for
        /// the user, truncation. Renderers and guardrails read these.
        #[serde(default, skip_serializing_if = "crate::ToolDetails::is_empty")]
        details: crate::ToolDetails,
        /// Free-form extras for UIs (a match level, a sandbox name …); not sent to the model.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        metadata: Option<Value>,
    },
    /// Keel changed a tool call before running it: a foreign or misspelled name mapped onto
    /// a canonical tool, or malformed arguments repaired (`how` says what was done). Follows
    /// the call's `tool_call` event; the result carries a short note too.
    ToolRepaired {
        call_id: String,
        from: String,
        to: String,
        how: String,
    },
    PhaseChanged {
        phase: String,
        previous: String,
    },
    PhaseViolation {
        tool: String,
        phase: String,
        hint: String,
    },
    /// A phase's `validation_command` ran after the phase failed (and again after a rollback).
    PhaseValidation {
        phase: String,
        command: String,
        passed: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        exit_code: Option<i32>,
        output: String,
        #[serde(default)]
        duration_ms: u64,
        /// `true` for the check after the rollback command.
        #[serde(default)]
        after_rollback: bool,
    },
    /// Validation failed after a phase failure: the phase's `rollback_command` starts.
    RollbackStarted {
        phase: String,
        command: String,
    },
    /// The rollback ran and the workspace validates again; the checkpoint is saved.
    RollbackCompleted {
        phase: String,
        command: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        exit_code: Option<i32>,
        output: String,
        #[serde(default)]
        duration_ms: u64,
    },
    /// The rollback command failed, or validation still fails after it: no checkpoint is
    /// saved and the workspace may be broken.
    RollbackFailed {
        phase: String,
        command: String,
        reason: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        exit_code: Option<i32>,
        output: String,
    },
    /// A phase's state was saved as a resume point: when the phase completed, or after a
    /// failure once validation and rollback allowed it.
    Checkpoint {
        phase: String,
        /// The workspace snapshot commit (`refs/keel/checkpoints/<session>/<phase>`), when
        /// snapshots are on.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        commit: Option<String>,
        reason: String,
    },
    /// The workspace was recorded before the first write of a turn: `turn` is the turn whose
    /// end state it holds (`keel undo --to TURN` restores it).
    Snapshot {
        turn: u32,
        commit: String,
        /// Files over `[snapshots] max_file_mb` the snapshot did not record (an undo leaves
        /// them as they are).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        left_out: Vec<String>,
    },
    /// A snapshot could not be taken (snapshots stay off for the rest of the run).
    SnapshotFailed {
        turn: u32,
        message: String,
    },
    /// A queue worker committed the session's changes in its checkout of the session's git
    /// source and pushed them to `branch` of the remote `url` (password hidden), where the
    /// session's next turn — on any worker — starts from.
    WorkspacePushed {
        url: String,
        branch: String,
        commit: String,
    },
    /// `keel undo` restored the workspace to the end of `turn`.
    Undo {
        turn: u32,
        commit: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        modified: Vec<String>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        recreated: Vec<String>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        removed: Vec<String>,
    },
    /// The working context was compacted before a model request. The stored transcript keeps
    /// every message; only what is sent to the model shrinks.
    Compaction {
        tokens_before: u64,
        tokens_after: u64,
        /// Which summariser produced the summary: `auxiliary`, `main` or `rule_based`; `none`
        /// when clearing tool results and dropping dead ends was enough.
        summarizer: String,
        /// The stages that changed something, in order: `clear_tool_results`,
        /// `drop_dead_ends`, `summarize`.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        stages: Vec<String>,
        /// A compaction the user asked for (`compact` operation) stores the compacted working
        /// context under this handle; the session's later turns start from it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        checkpoint: Option<String>,
    },
    Blocker {
        id: String,
        question: String,
        /// Who raised it: `model`, `pattern` or `fix_tracker`.
        source: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        evidence: Vec<String>,
    },
    /// One verification gate ran after the model said it was done.
    Verification {
        gate: String,
        passed: bool,
        output: String,
        /// Verification round: 1 for the first check, then one more per self-correction.
        attempt: u32,
        /// The gate's exit code (none when it was killed: timeout or cancellation).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        exit_code: Option<i32>,
        #[serde(default)]
        duration_ms: u64,
        /// The gate is required by the repository constitution (`required_gates` in
        /// `.keel/constitution.json`); it runs whatever `[verify] commands` says.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        required: bool,
    },
    /// A stored session continues with a new user message (`keel run --resume`, a follow-up
    /// message on the server). Seq numbering continues from the stored events.
    SessionResumed {
        message: String,
        /// Blocker ids whose answers are delivered with this message.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        answered_blockers: Vec<String>,
    },
    /// The run failed and the fallback chain's recovery tier retries it: the model is told
    /// what went wrong and asked to reflect before continuing.
    Recovery {
        attempt: u32,
        /// The failure being recovered from.
        error_code: ErrorCode,
        /// The rule-based evaluation given to the model.
        evaluation: String,
    },
    /// A model request failed in a way worth retrying; Keel waits `delay_ms` and sends it
    /// again. Text streamed before the failure is superseded by the retry's.
    ModelRetry {
        /// Retries so far (1 for the first retry): the next attempt is `attempt + 1`.
        attempt: u32,
        /// Attempts this failure gets in all, the first included (0: not recorded).
        #[serde(default)]
        attempts: u32,
        delay_ms: u64,
        /// One short line: the kind of failure and the start of the provider's message.
        message: String,
    },
    /// The model `from` still failed after its retries; the request went to `to`, the next
    /// model of the fallback list. Text streamed before is superseded.
    ModelFallback {
        from: String,
        to: String,
        message: String,
    },
    /// Keel adapted to the model server, or found something about it the user should know
    /// (a chat template that drops tool results or the tools; a file of learned server facts
    /// ignored). Said once; not part of the model's reply.
    ModelNotice {
        message: String,
    },
    /// What Keel's checks after a command (or a restore) did about files the command left —
    /// moved aside, removed — or could NOT check (a bound reached: `unchecked`, and commands
    /// nobody approved then run read-only). For the user: the model reads the same text in
    /// the tool result, which is not where a person looks.
    WorkspaceCheck {
        /// The tool call the command ran for, when it ran for one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        call_id: Option<String>,
        /// True when something was not checked.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        unchecked: bool,
        message: String,
    },
    Error(ErrorInfo),
    SessionFinished {
        status: SessionStatus,
        iterations: u32,
        /// The session's usage, its subagents' included (`children` breaks theirs down).
        usage: Usage,
        /// The usage of each subagent this run opened, included in `usage`.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        children: Vec<ChildUsage>,
        /// The task asked for a change ("add…", "fix…") and the run completed without one: no
        /// file written, no command that is not read-only, no external tool (`keel run` exits
        /// 4). Only on `completed`.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        unchanged: bool,
    },
    /// A subagent (`agent_open`) started a turn: its task, or the input `agent_eval` sent. The
    /// event carries the child's own `run_id` and its parent's as `parent_run_id`, like every
    /// event of the child.
    AgentStarted {
        agent_id: String,
        role: String,
        task: String,
        model: String,
    },
    /// A subagent's turn ended; `usage` is the child's total so far.
    AgentFinished {
        agent_id: String,
        role: String,
        status: SessionStatus,
        iterations: u32,
        usage: Usage,
    },
    /// A tool call waits for a person's approval (`Approve` or `Deny` with its `call_id`).
    ApprovalRequested {
        call_id: String,
        tool: String,
        /// The command line, or the tool and its main argument.
        summary: String,
        /// The command-safety class (`destructive`, `network`, `unknown`, …) or the tool's
        /// effect (`writes_workspace`).
        class: String,
        /// Why that class, in the classifier's words (`` `rm` deletes files ``); empty when
        /// it gave none (events stored before it was recorded, tools judged by effect).
        #[serde(default, skip_serializing_if = "String::is_empty")]
        reason: String,
    },
    /// How a call that needed approval was settled: approved (once or for the session), or
    /// denied with the reason the model is given (a person, the timeout, a headless run).
    ApprovalResolved {
        call_id: String,
        approved: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        scope: Option<crate::ApprovalScope>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// The session finished handling one user message (a *turn*; each model request inside
    /// it is a *step*, `turn_started`'s `iteration`): the last event of every turn, from every
    /// front end, also when the run could not start or the engine failed, so a client always
    /// knows the turn is over.
    TurnFinished {
        status: SessionStatus,
        /// Why the turn failed before or outside the run, when it did.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<String>,
    },
}

fn text_channel() -> DeltaChannel {
    DeltaChannel::Text
}

impl EventKind {
    /// Events of the plan_exec phase machine (what a REST response lists beside the result):
    /// phase changes and violations, checkpoints, validation and rollback runs.
    pub fn is_phase_event(&self) -> bool {
        matches!(
            self,
            EventKind::PhaseChanged { .. }
                | EventKind::PhaseViolation { .. }
                | EventKind::Checkpoint { .. }
                | EventKind::PhaseValidation { .. }
                | EventKind::RollbackStarted { .. }
                | EventKind::RollbackCompleted { .. }
                | EventKind::RollbackFailed { .. }
        )
    }

    /// The `type` name as it appears in JSON.
    pub fn type_name(&self) -> &'static str {
        match self {
            EventKind::SessionStarted { .. } => "session_started",
            EventKind::TurnStarted { .. } => "turn_started",
            EventKind::AssistantDelta { .. } => "assistant_delta",
            EventKind::AssistantMessage { .. } => "assistant_message",
            EventKind::ToolCall { .. } => "tool_call",
            EventKind::ToolResult { .. } => "tool_result",
            EventKind::ToolRepaired { .. } => "tool_repaired",
            EventKind::PhaseChanged { .. } => "phase_changed",
            EventKind::PhaseViolation { .. } => "phase_violation",
            EventKind::PhaseValidation { .. } => "phase_validation",
            EventKind::RollbackStarted { .. } => "rollback_started",
            EventKind::RollbackCompleted { .. } => "rollback_completed",
            EventKind::RollbackFailed { .. } => "rollback_failed",
            EventKind::Checkpoint { .. } => "checkpoint",
            EventKind::Snapshot { .. } => "snapshot",
            EventKind::SnapshotFailed { .. } => "snapshot_failed",
            EventKind::WorkspacePushed { .. } => "workspace_pushed",
            EventKind::Undo { .. } => "undo",
            EventKind::Compaction { .. } => "compaction",
            EventKind::Blocker { .. } => "blocker",
            EventKind::Verification { .. } => "verification",
            EventKind::SessionResumed { .. } => "session_resumed",
            EventKind::Recovery { .. } => "recovery",
            EventKind::ModelRetry { .. } => "model_retry",
            EventKind::ModelFallback { .. } => "model_fallback",
            EventKind::ModelNotice { .. } => "model_notice",
            EventKind::WorkspaceCheck { .. } => "workspace_check",
            EventKind::Error(_) => "error",
            EventKind::SessionFinished { .. } => "session_finished",
            EventKind::TurnFinished { .. } => "turn_finished",
            EventKind::AgentStarted { .. } => "agent_started",
            EventKind::AgentFinished { .. } => "agent_finished",
            EventKind::ApprovalRequested { .. } => "approval_requested",
            EventKind::ApprovalResolved { .. } => "approval_resolved",
        }
    }
}

/// One subagent's share of a session's usage (`session_finished.children`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChildUsage {
    pub agent_id: String,
    pub role: String,
    pub model: String,
    pub status: SessionStatus,
    pub iterations: u32,
    pub usage: Usage,
}

/// How a session (or one run of it) ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionStatus {
    /// Created (`keel serve`), waiting for its first message.
    Idle,
    Running,
    Completed,
    Failed,
    MaxSteps,
    Blocked,
    Cancelled,
}

impl SessionStatus {
    /// The snake_case name used in JSON and in the store.
    pub fn as_str(self) -> &'static str {
        match self {
            SessionStatus::Idle => "idle",
            SessionStatus::Running => "running",
            SessionStatus::Completed => "completed",
            SessionStatus::Failed => "failed",
            SessionStatus::MaxSteps => "max_steps",
            SessionStatus::Blocked => "blocked",
            SessionStatus::Cancelled => "cancelled",
        }
    }

    /// Parses a stored status name.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "idle" => SessionStatus::Idle,
            "running" => SessionStatus::Running,
            "completed" => SessionStatus::Completed,
            "failed" => SessionStatus::Failed,
            "max_steps" => SessionStatus::MaxSteps,
            "blocked" => SessionStatus::Blocked,
            "cancelled" => SessionStatus::Cancelled,
            _ => return None,
        })
    }
}

impl std::fmt::Display for SessionStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Machine-readable classification of a failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    Timeout,
    LoopDetected,
    LlmFailure,
    ToolFailure,
    ConfigError,
    ContextOverflow,
    MaxSteps,
    Cancelled,
    InternalError,
    /// Final verification still failed after the self-correction cap.
    VerificationFailed,
    /// Another session's run works in the workspace (one running session per workspace).
    WorkspaceBusy,
}

impl ErrorCode {
    /// The snake_case name used in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::Timeout => "timeout",
            ErrorCode::LoopDetected => "loop_detected",
            ErrorCode::LlmFailure => "llm_failure",
            ErrorCode::ToolFailure => "tool_failure",
            ErrorCode::ConfigError => "config_error",
            ErrorCode::ContextOverflow => "context_overflow",
            ErrorCode::MaxSteps => "max_steps",
            ErrorCode::Cancelled => "cancelled",
            ErrorCode::InternalError => "internal_error",
            ErrorCode::VerificationFailed => "verification_failed",
            ErrorCode::WorkspaceBusy => "workspace_busy",
        }
    }
}

/// A structured error: what failed, in words and as a code, and what the user can do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorInfo {
    pub error_code: ErrorCode,
    pub message: String,
    #[serde(default)]
    pub suggestions: Vec<String>,
    #[serde(default)]
    pub retryable: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub original_error: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_serialise_flat_with_fixed_type_names() {
        let ev = Event {
            session_id: "s1".into(),
            seq: 3,
            ts: 0,
            run_id: "r-1".into(),
            parent_run_id: Some("r-0".into()),
            kind: EventKind::ToolResult {
                id: "c1".into(),
                name: "edit_file".into(),
                is_error: false,
                content: "Edited.".into(),
                details: crate::ToolDetails {
                    files: vec!["src/main.rs".into()],
                    exit_code: Some(0),
                    ..crate::ToolDetails::default()
                },
                metadata: None,
            },
        };
        let json = serde_json::to_value(&ev).unwrap_or_default();
        assert_eq!(json["type"], "tool_result");
        assert_eq!(json["seq"], 3);
        assert_eq!(json["session_id"], "s1");
        assert_eq!(json["run_id"], "r-1");
        assert_eq!(json["parent_run_id"], "r-0");
        assert_eq!(json["is_error"], false);
        assert_eq!(json["details"]["files"][0], "src/main.rs");
        assert!(
            json["details"].get("diff").is_none(),
            "unset fields are left out"
        );
        let back: Event = serde_json::from_value(json).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(back, ev);
        assert_eq!(back.type_name(), "tool_result");
        // Events stored before runs and typed results read back with empty ones.
        let old: Event = serde_json::from_str(
            r#"{"session_id":"s","seq":1,"ts":0,"type":"tool_result","id":"c","name":"n","is_error":false,"content":""}"#,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(old.run_id, "");
        assert!(
            matches!(old.kind, EventKind::ToolResult { ref details, .. } if details.is_empty())
        );
    }

    #[test]
    fn tool_repaired_serialises_with_its_fields() {
        let kind = EventKind::ToolRepaired {
            call_id: "c1".into(),
            from: "Bash".into(),
            to: "run_command".into(),
            how: "name: Claude Code alias".into(),
        };
        let json = serde_json::to_value(&kind).unwrap_or_default();
        assert_eq!(json["type"], "tool_repaired");
        assert_eq!(json["call_id"], "c1");
        assert_eq!(kind.type_name(), "tool_repaired");
    }

    #[test]
    fn error_event_carries_code_and_suggestions() {
        let ev = EventKind::Error(ErrorInfo {
            error_code: ErrorCode::LoopDetected,
            message: "same call three times".into(),
            suggestions: vec!["rephrase the task".into()],
            retryable: false,
            original_error: None,
        });
        let json = serde_json::to_value(&ev).unwrap_or_default();
        assert_eq!(json["type"], "error");
        assert_eq!(json["error_code"], "loop_detected");
        assert_eq!(json["suggestions"][0], "rephrase the task");
        assert_eq!(ev.type_name(), "error");
    }

    #[test]
    fn status_names_round_trip() {
        for s in [
            SessionStatus::Idle,
            SessionStatus::Running,
            SessionStatus::Completed,
            SessionStatus::Failed,
            SessionStatus::MaxSteps,
            SessionStatus::Blocked,
            SessionStatus::Cancelled,
        ] {
            assert_eq!(SessionStatus::parse(s.as_str()), Some(s));
            let json = serde_json::to_string(&s).unwrap_or_default();
            assert_eq!(json, format!("\"{}\"", s.as_str()));
        }
    }
}
