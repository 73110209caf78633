//! Token accounting and context compaction (K2, R13–R15).
//!
//! Before every model request the engine estimates the request's size (per-message estimates,
//! calibrated by the provider's reported input tokens when it reports them). At
//! `agent.compact_threshold` of the context window it compacts the **working context** — the
//! messages sent to the model; the stored transcript always keeps everything — in three
//! stages, in order of safety, stopping once the request is back under the target:
//!
//! 1. clear old, consumed tool results to one-line summaries (`[compacted] read_file
//!    src/a.rs: 120 lines — defines: parse, render`), shrink long tool arguments, drop old
//!    reasoning;
//! 2. drop dead-end steps: an error later resolved by a successful call of the same tool on
//!    the same target, a read repeated later (its assistant text is kept as a note);
//! 3. summarise the oldest turns with the **auxiliary model**; if it fails or answers with
//!    nothing but whitespace, with the main model; if that fails too, with a rule-based
//!    summary.
//!
//! Always kept: the first user message (the task) byte for byte, the last 5 tool call/result
//! pairs, and — in a deterministic block no summariser can lose — the files created or
//! modified, the unresolved errors, the user's later messages and the notes of dropped steps.
//! The byte-stable head (system prompt and tool catalog) is never touched.

mod on_demand;
mod stages;
mod summary;

pub use on_demand::CompactReport;
pub(crate) use on_demand::{CHECKPOINT_PREFIX, compact_session, working_context};

use std::sync::Arc;

use keel_llm::tokens::{estimate_message, estimate_request};
use keel_protocol::{EventKind, Message, ToolSpec, Usage};
use serde::{Deserialize, Serialize};

pub(crate) use stages::has_block;
pub use stages::{
    FULL_TAIL_WINDOW, Facts, KEEP_LAST_TOOL_CALLS, apply_summary, clear_tool_results,
    drop_dead_ends, earlier_work_block, kept_calls, result_summary, shrink_refused_calls,
    tail_start, tail_start_keeping,
};
pub use summary::{SUMMARY_PROMPT, Summarizer, render_for_summary, rule_based_summary};
pub(crate) use summary::{ask_for_summary, fit_summary_input, summary_max_tokens};

/// The window assumed when neither the configuration nor the provider knows it.
pub const DEFAULT_CONTEXT_WINDOW: u64 = 128_000;
/// Compaction aims this far below the threshold, so it does not run again next turn.
const TARGET_FRACTION_OF_THRESHOLD: f64 = 0.6;

/// The smallest window learned from an overflow (a smaller one leaves no room to work).
const MIN_LEARNED_WINDOW: u64 = 1_000;
/// Tokens of the window a request must leave for the reply (keel-llm does not send a request
/// that leaves less than its smallest reply, 256 tokens).
const REPLY_RESERVE_TOKENS: u64 = 256;
/// Tokens a local server's chat template adds to every prompt (keel-llm counts 128 into its
/// own estimate before it sends), beside a tenth of the prompt it keeps as its margin.
const TEMPLATE_ALLOWANCE_TOKENS: u64 = 128;
/// How far before keel-llm's refusal point compaction starts (its estimate and the engine's
/// calibrated one differ a little).
const SEND_MARGIN_TOKENS: u64 = 100;

/// The context window, the threshold and the estimate's calibration.
#[derive(Debug, Clone, PartialEq)]
pub struct ContextBudget {
    pub window: u64,
    pub threshold: f64,
    /// Reported input tokens ÷ estimated input tokens of the last request (1.0 until a
    /// provider reports usage).
    ratio: f64,
}

impl ContextBudget {
    pub fn new(window: u64, threshold: f64) -> Self {
        Self {
            window,
            threshold,
            ratio: 1.0,
        }
    }

    /// Tokens at which compaction starts: the configured share of the window, and in a small
    /// window no later than the point where the request would leave no room for a reply
    /// (keel-llm refuses to send such a request: a 2,048-token window must compact at about
    /// 1,400 estimated tokens, not at 85% = 1,740).
    pub fn threshold_tokens(&self) -> u64 {
        let share = (self.window as f64 * self.threshold) as u64;
        // keel-llm sends a prompt whose estimate, plus the template's allowance and a tenth,
        // leaves the reply its reserve; compaction starts a margin before that point (in a
        // window over ~6,000 tokens the configured share comes first).
        let sendable = self.window.saturating_sub(REPLY_RESERVE_TOKENS) * 10 / 11;
        let room = sendable.saturating_sub(TEMPLATE_ALLOWANCE_TOKENS + SEND_MARGIN_TOKENS);
        share.min(room)
    }

    /// Tokens compaction aims for.
    pub fn target_tokens(&self) -> u64 {
        (self.threshold_tokens() as f64 * TARGET_FRACTION_OF_THRESHOLD) as u64
    }

    /// Calibrated tokens of one message.
    pub fn message_tokens(&self, message: &Message) -> u64 {
        (estimate_message(message) as f64 * self.ratio).ceil() as u64
    }

    /// Calibrated tokens of a request.
    pub fn request_tokens(&self, system: &str, tools: &[ToolSpec], messages: &[Message]) -> u64 {
        (estimate_request(system, tools, messages) as f64 * self.ratio).ceil() as u64
    }

    /// The server (or keel-llm, before sending) refused a request of about `sent` tokens as
    /// too large. When the window is known (`reported`), it is the fact and Keel's estimate
    /// was low: the calibration rises so that `sent` counts as the whole window (the next
    /// reported usage sets it again), and the window stays. Without a reported window it
    /// shrinks to what is known not to fit, so the next compaction aims below it.
    pub fn learn_overflow(&mut self, reported: Option<u64>, sent: u64) {
        match reported {
            Some(window) if window >= MIN_LEARNED_WINDOW => {
                self.window = self.window.min(window);
                if sent > 0 && sent < window {
                    self.ratio = (self.ratio * window as f64 / sent as f64).clamp(0.25, 4.0);
                }
            }
            _ => {
                let limit = reported.map_or(sent, |r| r.min(sent));
                self.window = self.window.min(limit).max(MIN_LEARNED_WINDOW);
            }
        }
    }

    pub fn observe(&mut self, estimated: u64, usage: &Usage) {
        // `input_tokens` already counts the cached prompt tokens (see `Usage`).
        let reported = usage.input_tokens;
        if reported > 0 && estimated > 0 {
            self.ratio = (reported as f64 / estimated as f64).clamp(0.25, 4.0);
        }
    }
}

/// What compaction carries from one compaction to the next within a session: the running
/// summary (a later summary builds on it) and the notes its block keeps. The compaction hook
/// owns it for a run (`guardrails/compaction.rs`); an on-demand compaction's checkpoint stores
/// it for later turns ([`on_demand`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Carry {
    /// The latest summary of earlier work.
    pub(crate) summary: Option<String>,
    /// Assistant text of dropped dead-end steps (decisions, findings).
    #[serde(default)]
    pub(crate) notes: Vec<String>,
    /// The user's messages that were folded into a summary.
    #[serde(default)]
    pub(crate) user_notes: Vec<String>,
}

/// The context window as the loop knows it at a hook point, with the head every request sends
/// (system prompt and tool catalog): what a compaction measures a working context against.
#[derive(Debug, Clone)]
pub struct Window {
    pub(crate) budget: ContextBudget,
    system: Arc<str>,
    tools: Arc<[ToolSpec]>,
}

impl Window {
    pub(crate) fn new(budget: ContextBudget, system: Arc<str>, tools: Arc<[ToolSpec]>) -> Self {
        Self {
            budget,
            system,
            tools,
        }
    }

    /// The calibrated size of a request sending `messages`.
    pub fn tokens(&self, messages: &[Message]) -> u64 {
        self.budget
            .request_tokens(&self.system, &self.tools, messages)
    }
}

/// A compacted working context a hook hands the loop ([`crate::hooks::HookAction::Compact`]):
/// the messages the next request sends instead, and what changed.
#[derive(Debug, Clone, PartialEq)]
pub struct Compaction {
    pub(crate) messages: Vec<Message>,
    pub(crate) done: Compacted,
}

/// What one compaction changed.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Compacted {
    pub(crate) tokens_before: u64,
    pub(crate) tokens_after: u64,
    pub(crate) summarizer: &'static str,
    pub(crate) stages: Vec<String>,
}

impl Compacted {
    /// Its `compaction` event; `checkpoint`: the stored working context later turns start from.
    pub(crate) fn event(self, checkpoint: Option<String>) -> EventKind {
        EventKind::Compaction {
            tokens_before: self.tokens_before,
            tokens_after: self.tokens_after,
            summarizer: self.summarizer.to_string(),
            stages: self.stages,
            checkpoint,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_calibrates_on_reported_usage() {
        let mut b = ContextBudget::new(10_000, 0.85);
        assert_eq!(b.threshold_tokens(), 8_500);
        assert_eq!(b.target_tokens(), 5_100);
        let msg = Message::user_text("x".repeat(400));
        let raw = b.message_tokens(&msg);
        b.observe(
            1_000,
            &Usage {
                input_tokens: 2_000,
                cache_read_tokens: 500,
                ..Usage::default()
            },
        );
        assert_eq!(
            b.message_tokens(&msg),
            raw * 2,
            "cached tokens are part of the input"
        );
        b.observe(1_000, &Usage::default());
        assert_eq!(b.message_tokens(&msg), raw * 2, "no report: keep the ratio");
    }

    #[test]
    fn a_small_window_compacts_before_the_request_leaves_no_room_for_a_reply() {
        // 85% of 2,048 (1,740) would leave keel-llm's smallest reply no room: it refuses to
        // send at about 1,500 estimated tokens.
        assert_eq!(ContextBudget::new(2_048, 0.85).threshold_tokens(), 1_401);
        assert_eq!(ContextBudget::new(4_096, 0.85).threshold_tokens(), 3_262);
        // From about 6,000 tokens the configured share comes first, as before.
        assert_eq!(ContextBudget::new(8_192, 0.85).threshold_tokens(), 6_963);
        assert_eq!(
            ContextBudget::new(128_000, 0.85).threshold_tokens(),
            108_800
        );
    }

    #[test]
    fn an_overflow_with_a_known_window_raises_the_estimate_not_shrinks_the_window() {
        let msg = Message::user_text("x".repeat(4_000));
        let mut b = ContextBudget::new(2_048, 0.85);
        let raw = b.message_tokens(&msg);
        b.learn_overflow(Some(2_048), 1_024);
        assert_eq!(b.window, 2_048);
        assert_eq!(b.message_tokens(&msg), raw * 2);
        // Without a reported window it shrinks to what did not fit.
        let mut b = ContextBudget::new(128_000, 0.85);
        b.learn_overflow(None, 30_000);
        assert_eq!(b.window, 30_000);
        assert_eq!(b.message_tokens(&msg), raw);
    }
}
