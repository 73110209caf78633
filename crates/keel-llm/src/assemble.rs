//! Folding a reply stream into one complete model turn.

use std::collections::BTreeMap;

use keel_protocol::{ContentBlock, Message, Role, ToolCall, Usage};
use serde_json::Value;

use crate::{LlmError, StreamEvent};

/// Why the model stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopReason {
    /// The model finished its answer.
    EndTurn,
    /// The model wants tool results.
    ToolUse,
    /// The output token limit cut the reply.
    MaxTokens,
    /// A stop sequence ended the reply.
    StopSequence,
    /// The model refused.
    Refusal,
    /// Anything else the provider reported, verbatim.
    Other(String),
}

impl StopReason {
    /// The snake_case name used in JSON and logs.
    pub fn as_str(&self) -> &str {
        match self {
            StopReason::EndTurn => "end_turn",
            StopReason::ToolUse => "tool_use",
            StopReason::MaxTokens => "max_tokens",
            StopReason::StopSequence => "stop_sequence",
            StopReason::Refusal => "refusal",
            StopReason::Other(s) => s,
        }
    }
}

/// One complete model reply.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelTurn {
    /// The answer text (may be empty when the model only calls tools).
    pub text: String,
    /// Thinking text, if the model produced any (all thinking blocks, concatenated).
    pub reasoning: Option<String>,
    /// The last thinking block's signature, for providers that require it back.
    pub reasoning_signature: Option<String>,
    /// Each thinking block as it must be sent back: [`ContentBlock::Reasoning`] with its own
    /// signature, or [`ContentBlock::RedactedReasoning`]. Empty when there was no thinking.
    pub reasoning_blocks: Vec<ContentBlock>,
    /// Tool calls with parsed arguments, in the order the model made them. Argument text that
    /// is not JSON (malformed, or cut off at the output limit) arrives as a JSON string holding
    /// the raw text, for the agent loop to repair or refuse.
    pub tool_calls: Vec<ToolCall>,
    pub stop_reason: StopReason,
    pub usage: Usage,
}

impl ModelTurn {
    /// The assistant message to append to the conversation: reasoning, text, tool uses.
    pub fn to_message(&self) -> Message {
        let mut content = Vec::new();
        if !self.reasoning_blocks.is_empty() {
            content.extend(self.reasoning_blocks.iter().cloned());
        } else if let Some(reasoning) = &self.reasoning {
            content.push(ContentBlock::Reasoning {
                text: reasoning.clone(),
                signature: self.reasoning_signature.clone(),
            });
        }
        if !self.text.is_empty() {
            content.push(ContentBlock::Text {
                text: self.text.clone(),
            });
        }
        for call in &self.tool_calls {
            content.push(ContentBlock::ToolUse {
                id: call.id.clone(),
                name: call.name.clone(),
                input: call.arguments.clone(),
            });
        }
        Message {
            role: Role::Assistant,
            content,
        }
    }
}

#[derive(Debug, Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

/// Accumulates [`StreamEvent`]s; [`TurnAssembler::finish`] yields the [`ModelTurn`].
#[derive(Debug, Default)]
pub struct TurnAssembler {
    text: String,
    /// Closed thinking blocks, in order.
    reasoning_blocks: Vec<ContentBlock>,
    /// The thinking block being streamed (no signature yet).
    open_reasoning: Option<String>,
    signature: Option<String>,
    calls: BTreeMap<usize, PartialCall>,
    usage: Usage,
    stop_reason: Option<StopReason>,
}

impl TurnAssembler {
    /// A fresh assembler.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds one event. [`StreamEvent::Retry`] and [`StreamEvent::Fallback`] discard
    /// everything received so far: the next attempt starts the reply again.
    pub fn push(&mut self, event: StreamEvent) {
        match event {
            StreamEvent::TextDelta(t) => self.text.push_str(&t),
            StreamEvent::ReasoningDelta(t) => {
                self.open_reasoning
                    .get_or_insert_with(String::new)
                    .push_str(&t);
            }
            StreamEvent::ReasoningSignature(s) => {
                let text = self.open_reasoning.take().unwrap_or_default();
                self.reasoning_blocks.push(ContentBlock::Reasoning {
                    text,
                    signature: Some(s.clone()),
                });
                self.signature = Some(s);
            }
            StreamEvent::RedactedReasoning(data) => {
                self.close_reasoning();
                self.reasoning_blocks
                    .push(ContentBlock::RedactedReasoning { data });
            }
            StreamEvent::ToolCallStart { index, id, name } => {
                let call = self.calls.entry(index).or_default();
                if !id.is_empty() {
                    call.id = id;
                }
                if !name.is_empty() {
                    call.name = name;
                }
            }
            StreamEvent::ToolCallDelta { index, arguments } => {
                self.calls
                    .entry(index)
                    .or_default()
                    .arguments
                    .push_str(&arguments);
            }
            StreamEvent::Usage(u) => self.usage = u,
            StreamEvent::Finish { stop_reason } => self.stop_reason = Some(stop_reason),
            StreamEvent::Retry { .. } | StreamEvent::Fallback { .. } => *self = Self::default(),
            StreamEvent::Notice(_) => {}
        }
    }

    /// Whether the terminal [`StreamEvent::Finish`] has arrived.
    pub fn is_finished(&self) -> bool {
        self.stop_reason.is_some()
    }

    /// The answer text received so far.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The usage reported so far.
    pub fn usage(&self) -> Usage {
        self.usage
    }

    /// The stop reason, once [`StreamEvent::Finish`] has arrived.
    pub fn stop_reason(&self) -> Option<&StopReason> {
        self.stop_reason.as_ref()
    }

    fn close_reasoning(&mut self) {
        if let Some(text) = self.open_reasoning.take() {
            self.reasoning_blocks.push(ContentBlock::Reasoning {
                text,
                signature: None,
            });
        }
    }

    /// Completes the turn. Fails when the stream never finished or a tool call has no name.
    /// Unparseable arguments do not fail it (see [`ModelTurn::tool_calls`]).
    pub fn finish(mut self) -> Result<ModelTurn, LlmError> {
        let Some(stop_reason) = self.stop_reason.take() else {
            return Err(LlmError::Truncated(
                "the stream closed without a final event".into(),
            ));
        };
        self.close_reasoning();
        let mut tool_calls = Vec::with_capacity(self.calls.len());
        for (index, call) in std::mem::take(&mut self.calls) {
            let name = if call.name.is_empty() {
                return Err(LlmError::InvalidResponse(format!(
                    "tool call #{index} has no name"
                )));
            } else {
                call.name
            };
            let arguments = parse_arguments(&call.arguments);
            let id = if call.id.is_empty() {
                format!("call_{index}")
            } else {
                call.id
            };
            tool_calls.push(ToolCall {
                id,
                name,
                arguments,
            });
        }
        let reasoning = (!self.reasoning_blocks.is_empty()).then(|| {
            self.reasoning_blocks
                .iter()
                .filter_map(|b| match b {
                    ContentBlock::Reasoning { text, .. } => Some(text.as_str()),
                    _ => None,
                })
                .collect::<String>()
        });
        let mut usage = self.usage;
        usage.requests = 1;
        Ok(ModelTurn {
            text: self.text,
            reasoning,
            reasoning_signature: self.signature,
            reasoning_blocks: self.reasoning_blocks,
            tool_calls,
            stop_reason,
            usage,
        })
    }
}

/// Parsed arguments; text that is not JSON passes through as a JSON string holding it, so the
/// agent loop can repair it or answer the model with the schema — a malformed call is the
/// model's mistake to correct, never a provider failure that ends the run.
fn parse_arguments(raw: &str) -> Value {
    if raw.trim().is_empty() {
        return Value::Object(Default::default());
    }
    // Valid JSON of the wrong shape (an array, a string) passes through too: the tool layer
    // tells the model what it expected.
    serde_json::from_str::<Value>(raw).unwrap_or_else(|_| Value::String(raw.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(events: Vec<StreamEvent>) -> Result<ModelTurn, LlmError> {
        let mut a = TurnAssembler::new();
        for e in events {
            a.push(e);
        }
        a.finish()
    }

    #[test]
    fn assembles_split_tool_arguments_in_index_order() {
        let turn = feed(vec![
            StreamEvent::TextDelta("Let me ".into()),
            StreamEvent::TextDelta("look.".into()),
            StreamEvent::ToolCallStart {
                index: 1,
                id: "b".into(),
                name: "list_files".into(),
            },
            StreamEvent::ToolCallStart {
                index: 0,
                id: "a".into(),
                name: "read_file".into(),
            },
            StreamEvent::ToolCallDelta {
                index: 0,
                arguments: "{\"pa".into(),
            },
            StreamEvent::ToolCallDelta {
                index: 0,
                arguments: "th\": \"src/lib.rs\"}".into(),
            },
            StreamEvent::Finish {
                stop_reason: StopReason::ToolUse,
            },
        ])
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(turn.text, "Let me look.");
        assert_eq!(turn.tool_calls[0].name, "read_file");
        assert_eq!(turn.tool_calls[0].arguments["path"], "src/lib.rs");
        assert_eq!(turn.tool_calls[1].arguments, serde_json::json!({}));
    }

    #[test]
    fn each_signed_thinking_block_is_kept_for_the_round_trip() {
        let turn = feed(vec![
            StreamEvent::ReasoningDelta("first ".into()),
            StreamEvent::ReasoningDelta("thought".into()),
            StreamEvent::ReasoningSignature("sig-1".into()),
            StreamEvent::RedactedReasoning("opaque".into()),
            StreamEvent::ReasoningDelta("second".into()),
            StreamEvent::ReasoningSignature("sig-2".into()),
            StreamEvent::TextDelta("Answer.".into()),
            StreamEvent::Finish {
                stop_reason: StopReason::EndTurn,
            },
        ])
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(turn.reasoning.as_deref(), Some("first thoughtsecond"));
        assert_eq!(turn.reasoning_signature.as_deref(), Some("sig-2"));
        let message = turn.to_message();
        assert_eq!(
            message.content,
            vec![
                ContentBlock::Reasoning {
                    text: "first thought".into(),
                    signature: Some("sig-1".into())
                },
                ContentBlock::RedactedReasoning {
                    data: "opaque".into()
                },
                ContentBlock::Reasoning {
                    text: "second".into(),
                    signature: Some("sig-2".into())
                },
                ContentBlock::Text {
                    text: "Answer.".into()
                },
            ]
        );
    }

    #[test]
    fn a_retry_discards_the_failed_attempt() {
        let turn = feed(vec![
            StreamEvent::TextDelta("half an ans".into()),
            StreamEvent::ToolCallStart {
                index: 0,
                id: "a".into(),
                name: "read_file".into(),
            },
            StreamEvent::Retry {
                attempt: 1,
                attempts: 2,
                delay: std::time::Duration::ZERO,
                message: "connection reset".into(),
            },
            StreamEvent::TextDelta("The whole answer.".into()),
            StreamEvent::Finish {
                stop_reason: StopReason::EndTurn,
            },
        ])
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(turn.text, "The whole answer.");
        assert!(turn.tool_calls.is_empty());
    }

    #[test]
    fn missing_finish_is_truncation() {
        let err = feed(vec![StreamEvent::TextDelta("hi".into())]).err();
        assert!(matches!(err, Some(LlmError::Truncated(_))));
    }

    #[test]
    fn cut_arguments_pass_through_as_text_with_the_usage() {
        let turn = feed(vec![
            StreamEvent::ToolCallStart {
                index: 0,
                id: "a".into(),
                name: "create_file".into(),
            },
            StreamEvent::ToolCallDelta {
                index: 0,
                arguments: "{\"path\": \"a.txt\", \"content\": \"hel".into(),
            },
            StreamEvent::Usage(Usage {
                output_tokens: 4096,
                ..Usage::default()
            }),
            StreamEvent::Finish {
                stop_reason: StopReason::MaxTokens,
            },
        ])
        .unwrap_or_else(|e| panic!("a cut-off call must not fail the turn: {e}"));
        assert_eq!(turn.stop_reason, StopReason::MaxTokens);
        assert_eq!(
            turn.tool_calls[0].arguments,
            Value::String("{\"path\": \"a.txt\", \"content\": \"hel".into())
        );
        assert_eq!(
            turn.usage.output_tokens, 4096,
            "the step's tokens still count"
        );
    }
}
