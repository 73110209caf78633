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

mod last_resort;
mod on_demand;
mod stages;
mod summary;

pub use last_resort::shrink_failed_calls;
pub use on_demand::CompactReport;
pub(crate) use on_demand::{CHECKPOINT_PREFIX, compact_session, working_context};

use std::sync::Arc;

use keel_llm::tokens::{TokenScale, estimate_message};
use keel_protocol::{EventKind, Message, ToolSpec, Usage};
use serde::{Deserialize, Serialize};

pub(crate) use stages::has_block;
pub use stages::{
    FULL_TAIL_WINDOW, Facts, KEEP_LAST_TOOL_CALLS, apply_summary, clear_tool_results,
    drop_dead_ends, earlier_work_block, kept_calls, result_summary, shrink_refused_calls,
    tail_start, tail_start_keeping,
};
pub use summary::{
    SUMMARY_PROMPT, Summarizer, render_for_summary, rule_based_summary, rule_based_summary_within,
};
pub(crate) use summary::{
    ask_for_summary, fit_summary_input, summaries_by_rules, summary_max_tokens,
};

/// The window assumed when neither the configuration nor the provider knows it.
pub const DEFAULT_CONTEXT_WINDOW: u64 = 128_000;
/// Compaction aims this far below the threshold, so it does not run again next turn.
const TARGET_FRACTION_OF_THRESHOLD: f64 = 0.6;

/// The smallest window learned from an overflow (a smaller one leaves no room to work).
const MIN_LEARNED_WINDOW: u64 = 1_000;
/// Tokens of the window a request must leave for the reply (keel-llm does not send a request
/// that leaves less than its smallest reply, 256 tokens).
const REPLY_RESERVE_TOKENS: u64 = 256;
/// How far before the point where keel-llm would send only its smallest reply compaction
/// starts: the size is the same figure on both sides ([`TokenScale`]), so this is room for the
/// reply, not for two estimates that disagree.
const SEND_MARGIN_TOKENS: u64 = 100;

/// The context window, the threshold and the estimate's calibration.
#[derive(Debug, Clone, PartialEq)]
pub struct ContextBudget {
    pub window: u64,
    pub threshold: f64,
    /// How the provider counts a request, when it checks a request's size itself before
    /// sending (keel-llm's OpenAI-compatible client: its learned scale and the template's
    /// allowance). Compaction measures with the same figure, so a context it judged small
    /// enough is one the provider sends.
    scale: Option<TokenScale>,
    /// Without a provider scale: reported input tokens ÷ estimated input tokens of the last
    /// request (1.0 until a provider reports usage). With one: 1.0, raised only by a refusal
    /// the scale does not explain (until the next reported usage).
    ratio: f64,
}

impl ContextBudget {
    pub fn new(window: u64, threshold: f64) -> Self {
        Self {
            window,
            threshold,
            scale: None,
            ratio: 1.0,
        }
    }

    /// Measures with the provider's own figure from now on (`None`: the provider does not
    /// check sizes; the budget calibrates on reported usage).
    pub fn set_scale(&mut self, scale: Option<TokenScale>) {
        if scale.is_some() && self.scale.is_none() {
            // The usage ratio measured the bare estimate; the provider's scale replaces it.
            self.ratio = 1.0;
        }
        self.scale = scale;
    }

    /// Tokens at which compaction starts: the configured share of the window, and in a small
    /// window no later than the point where the request would leave no room for a reply
    /// (keel-llm sends a request whose size, plus a tenth, leaves less than that only with its
    /// smallest reply: a 2,048-token window compacts at 1,529 tokens, not at 85% = 1,740).
    pub fn threshold_tokens(&self) -> u64 {
        let share = (self.window as f64 * self.threshold) as u64;
        // In a window over ~6,000 tokens the configured share comes first.
        let sendable = self.window.saturating_sub(REPLY_RESERVE_TOKENS) * 10 / 11;
        share.min(sendable.saturating_sub(SEND_MARGIN_TOKENS))
    }

    /// Tokens compaction aims for.
    pub fn target_tokens(&self) -> u64 {
        (self.threshold_tokens() as f64 * TARGET_FRACTION_OF_THRESHOLD) as u64
    }

    /// Calibrated tokens of one message (the template's allowance is the request's, not a
    /// message's).
    pub fn message_tokens(&self, message: &Message) -> u64 {
        let per_mille = self.scale.map_or(1000, |s| s.per_mille);
        let scaled = estimate_message(message).saturating_mul(per_mille) / 1000;
        (scaled as f64 * self.ratio).ceil() as u64
    }

    /// Calibrated tokens of a request: with a provider scale, exactly the provider's figure
    /// (times a refusal's correction, if any).
    pub fn request_tokens(&self, system: &str, tools: &[ToolSpec], messages: &[Message]) -> u64 {
        let scale = self.scale.unwrap_or(TokenScale::PLAIN);
        (scale.request(system, tools, messages) as f64 * self.ratio).ceil() as u64
    }

    /// The server (or keel-llm, before sending) refused a request of about `sent` tokens as
    /// too large. When the window is known (`reported`), it is the fact and Keel's estimate
    /// was low: the calibration rises so that `sent` counts as the whole window (the next
    /// reported usage sets it again), and the window stays. Without a reported window it
    /// shrinks to what is known not to fit, so the next compaction aims below it. With a
    /// provider scale, `sent` is measured after the provider learned from the refusal (the
    /// prompt size a server's refusal states), so the correction covers only what it did not.
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
        if reported == 0 || estimated == 0 {
            return;
        }
        if self.scale.is_some() {
            // The provider calibrated its scale on this report itself.
            self.ratio = 1.0;
        } else {
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
