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

use keel_llm::tokens::{estimate_message, estimate_request};
use keel_protocol::{ContentBlock, EventKind, Message, Role, ToolSpec, Usage};

use std::sync::Arc;

use crate::ending::Interrupt;
use crate::run::Run;

pub use stages::{
    Facts, KEEP_LAST_TOOL_CALLS, apply_summary, clear_tool_results, drop_dead_ends,
    earlier_work_block, result_summary, tail_start,
};
pub use summary::{SUMMARY_PROMPT, Summarizer, render_for_summary, rule_based_summary};

/// The window assumed when neither the configuration nor the provider knows it.
pub const DEFAULT_CONTEXT_WINDOW: u64 = 128_000;
/// Compaction aims this far below the threshold, so it does not run again next turn.
const TARGET_FRACTION_OF_THRESHOLD: f64 = 0.6;

/// The smallest window learned from an overflow (a smaller one leaves no room to work).
const MIN_LEARNED_WINDOW: u64 = 1_000;

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

    /// Tokens at which compaction starts.
    pub fn threshold_tokens(&self) -> u64 {
        (self.window as f64 * self.threshold) as u64
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

    /// Learns from a request's reported usage: `estimated` is its uncalibrated estimate.
    /// The server refused a request of about `sent` tokens as too large, saying its window
    /// is `reported` tokens (when it did): the window shrinks to what is known to fit at
    /// most, so the next compaction aims below it.
    pub fn learn_overflow(&mut self, reported: Option<u64>, sent: u64) {
        let limit = reported.map_or(sent, |r| r.min(sent));
        self.window = self.window.min(limit).max(MIN_LEARNED_WINDOW);
    }

    pub fn observe(&mut self, estimated: u64, usage: &Usage) {
        // `input_tokens` already counts the cached prompt tokens (see `Usage`).
        let reported = usage.input_tokens;
        if reported > 0 && estimated > 0 {
            self.ratio = (reported as f64 / estimated as f64).clamp(0.25, 4.0);
        }
    }
}

/// State compaction keeps across compactions within a run.
#[derive(Debug)]
pub struct Compactor {
    pub budget: ContextBudget,
    /// The latest summary of earlier work.
    pub(crate) summary: Option<String>,
    /// Assistant text of dropped dead-end steps (decisions, findings).
    pub(crate) notes: Vec<String>,
    /// The user's messages that were folded into a summary.
    pub(crate) user_notes: Vec<String>,
}

impl Compactor {
    pub fn new(budget: ContextBudget) -> Self {
        Self {
            budget,
            summary: None,
            notes: Vec::new(),
            user_notes: Vec::new(),
        }
    }
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

impl Run<'_> {
    /// The size of the next request, calibrated.
    pub(crate) fn context_tokens(&self) -> u64 {
        self.compactor
            .budget
            .request_tokens(&self.system_prompt, &self.tools, &self.messages)
    }

    /// Compacts the working context when the next request crosses the threshold, emitting a
    /// `compaction` event when something changed.
    pub(crate) async fn maybe_compact(&mut self) -> Result<(), Interrupt> {
        if let Some(done) = self.compact(false).await? {
            self.emitter.emit(done.event(None)).await?;
        }
        Ok(())
    }

    /// Compacts the working context: at the threshold down to the target, or (`force`, the
    /// `compact` operation) now and through every stage that applies. Returns what changed
    /// (`None`: nothing); the caller emits the event.
    pub(crate) async fn compact(&mut self, force: bool) -> Result<Option<Compacted>, Interrupt> {
        let before = self.context_tokens();
        if !force && before < self.compactor.budget.threshold_tokens() {
            return Ok(None);
        }
        let target = if force {
            0
        } else {
            self.compactor.budget.target_tokens()
        };
        let mut stages = Vec::new();
        let mut summarizer = "none";

        let mut tail = tail_start(&self.messages);
        if clear_tool_results(Arc::make_mut(&mut self.messages).as_mut_slice(), tail) {
            stages.push("clear_tool_results".to_string());
        }
        if self.context_tokens() > target {
            let tools = self.engine.tools.clone();
            let effect_of = move |name: &str| tools.get(name).map(|t| t.effect());
            let (new_tail, notes) =
                drop_dead_ends(Arc::make_mut(&mut self.messages), tail, &effect_of);
            if new_tail != tail {
                stages.push("drop_dead_ends".to_string());
                tail = new_tail;
            }
            self.compactor.notes.extend(notes);
        }
        if self.context_tokens() > target && tail > 1 {
            let region = &self.messages[1..tail];
            for m in region {
                let is_user_text = m.role == Role::User
                    && m.content
                        .iter()
                        .all(|b| matches!(b, ContentBlock::Text { .. }));
                if is_user_text {
                    let t: String = m.text().trim().chars().take(300).collect();
                    if !t.is_empty() {
                        self.compactor.user_notes.push(t);
                    }
                }
            }
            let previous = self.compactor.summary.clone();
            let input = render_for_summary(previous.as_deref(), region);
            let (summary, who) = self.summarize(&input, previous.as_deref(), tail).await?;
            summarizer = who.as_str();
            self.compactor.summary = Some(summary.clone());
            let mut facts = Facts {
                files: self.files.iter().cloned().collect(),
                open_errors: Vec::new(),
            };
            self.compaction_facts(&mut facts);
            let block = earlier_work_block(
                &summary,
                &facts,
                &self.compactor.notes,
                &self.compactor.user_notes,
            );
            apply_summary(Arc::make_mut(&mut self.messages), tail, block);
            stages.push("summarize".to_string());
        } else if !stages.is_empty() && stages::has_block(&self.messages[0]) {
            // Keep the facts current even when no new summary was needed.
            let mut facts = Facts {
                files: self.files.iter().cloned().collect(),
                open_errors: Vec::new(),
            };
            self.compaction_facts(&mut facts);
            let summary = self.compactor.summary.clone().unwrap_or_default();
            let block = earlier_work_block(
                &summary,
                &facts,
                &self.compactor.notes,
                &self.compactor.user_notes,
            );
            apply_summary(Arc::make_mut(&mut self.messages), 1, block);
        }
        if stages.is_empty() {
            return Ok(None);
        }
        Ok(Some(Compacted {
            tokens_before: before,
            tokens_after: self.context_tokens(),
            summarizer,
            stages,
        }))
    }

    /// Stage 3's summary: auxiliary model, else main model, else rules.
    async fn summarize(
        &mut self,
        input: &str,
        previous: Option<&str>,
        tail: usize,
    ) -> Result<(String, Summarizer), Interrupt> {
        if let Some(aux) = self.engine.auxiliary.clone() {
            let (text, usage) =
                summary::ask_for_summary(aux.as_ref(), input, &self.ctx.cancel).await?;
            self.usage.add(&usage);
            if let Some(text) = text {
                return Ok((text, Summarizer::Auxiliary));
            }
        }
        let main = self.engine.provider.clone();
        let (text, usage) =
            summary::ask_for_summary(main.as_ref(), input, &self.ctx.cancel).await?;
        self.usage.add(&usage);
        if let Some(text) = text {
            return Ok((text, Summarizer::Main));
        }
        Ok((
            rule_based_summary(previous, &self.messages[1..tail]),
            Summarizer::RuleBased,
        ))
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
}
