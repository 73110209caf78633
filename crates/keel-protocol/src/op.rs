//! Operations: what a front end asks of a live session. Every front end (`keel run`, the
//! server's REST and WebSocket endpoints, a terminal chat) turns its input into [`Op`]s and
//! reads [`crate::Event`]s back; nothing else drives a session.
//!
//! Serialises tagged by `type` in snake case, like events:
//! `{"type": "user_message", "text": "fix the tests"}`, `{"type": "interrupt"}`.

use serde::{Deserialize, Serialize};

/// One request to a live session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Op {
    /// The user's next message: a new turn (the session's task when it is the first one).
    /// Refused while a turn runs.
    UserMessage {
        text: String,
        /// Extra context attached to the message (file excerpts, pasted logs).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        attachments: Vec<Attachment>,
    },
    /// Stops the running turn; it ends `cancelled`.
    Interrupt,
    /// Lets the tool call waiting for approval run.
    Approve {
        call_id: String,
        #[serde(default)]
        scope: ApprovalScope,
    },
    /// Refuses the tool call waiting for approval; the model is told why.
    Deny {
        call_id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// Answers the session's blocker `id`; the session goes on with the answer.
    AnswerBlocker { id: String, answer: String },
    /// Restores the workspace to the end of turn `to_turn` (the last turn that changed files
    /// when absent).
    Undo {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        to_turn: Option<u32>,
    },
    /// Uses another model (a model of the session's provider, or an alias) from the next turn.
    SetModel { model: String },
    /// Changes the execution mode (`react`, `plan_exec`) of a session that has not started.
    SetMode { mode: String },
    /// Compacts the working context now rather than at the threshold.
    Compact,
    /// Ends the session's live handle: a running turn is cancelled, later ops are refused.
    Shutdown,
}

impl Op {
    /// The op's `type` name as it appears in JSON.
    pub fn type_name(&self) -> &'static str {
        match self {
            Op::UserMessage { .. } => "user_message",
            Op::Interrupt => "interrupt",
            Op::Approve { .. } => "approve",
            Op::Deny { .. } => "deny",
            Op::AnswerBlocker { .. } => "answer_blocker",
            Op::Undo { .. } => "undo",
            Op::SetModel { .. } => "set_model",
            Op::SetMode { .. } => "set_mode",
            Op::Compact => "compact",
            Op::Shutdown => "shutdown",
        }
    }

    /// A user message with no attachments.
    pub fn user_message(text: impl Into<String>) -> Self {
        Op::UserMessage {
            text: text.into(),
            attachments: Vec::new(),
        }
    }
}

/// Context attached to a user message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attachment {
    /// What it is (a file path, "clipboard", a URL the user pasted from).
    pub name: String,
    pub content: String,
}

/// How long an approval holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalScope {
    /// This one call.
    #[default]
    Once,
    /// This call and every later one like it (same tool, same command) in this session.
    Session,
}

/// An op with the id its sender chose, so replies and errors can name it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Submission {
    pub id: String,
    pub op: Op,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ops_read_and_write_their_documented_json() {
        let cases = [
            (
                r#"{"type":"user_message","text":"fix it"}"#,
                Op::user_message("fix it"),
            ),
            (r#"{"type":"interrupt"}"#, Op::Interrupt),
            (
                r#"{"type":"approve","call_id":"c1","scope":"session"}"#,
                Op::Approve {
                    call_id: "c1".into(),
                    scope: ApprovalScope::Session,
                },
            ),
            (
                r#"{"type":"deny","call_id":"c1","reason":"not on main"}"#,
                Op::Deny {
                    call_id: "c1".into(),
                    reason: Some("not on main".into()),
                },
            ),
            (
                r#"{"type":"answer_blocker","id":"b1","answer":"yes"}"#,
                Op::AnswerBlocker {
                    id: "b1".into(),
                    answer: "yes".into(),
                },
            ),
            (
                r#"{"type":"undo","to_turn":2}"#,
                Op::Undo { to_turn: Some(2) },
            ),
            (r#"{"type":"shutdown"}"#, Op::Shutdown),
        ];
        for (json, op) in cases {
            let parsed: Op = serde_json::from_str(json).unwrap_or_else(|e| panic!("{json}: {e}"));
            assert_eq!(parsed, op);
            assert_eq!(
                serde_json::to_string(&op).unwrap_or_else(|e| panic!("{e}")),
                json
            );
            assert!(json.contains(op.type_name()));
        }
        // The scope defaults to this one call.
        let once: Op = serde_json::from_str(r#"{"type":"approve","call_id":"c"}"#)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            once,
            Op::Approve {
                call_id: "c".into(),
                scope: ApprovalScope::Once
            }
        );
    }

    #[test]
    fn unknown_ops_and_fields_are_refused() {
        assert!(serde_json::from_str::<Op>(r#"{"type":"reboot"}"#).is_err());
        assert!(serde_json::from_str::<Op>(r#"{"type":"undo","turn":2}"#).is_err());
    }
}
