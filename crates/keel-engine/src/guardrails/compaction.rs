//! Compaction as a guardrail: before a request that crosses the threshold — or when the loop
//! needs it now (the `compact` operation, a request the server refused as too large) — the
//! working context is compacted through `crate::compaction`'s stages and handed back to the
//! loop as [`HookAction::Compact`]. The hook owns what compaction carries from one compaction
//! to the next ([`Carry`]: the running summary and the notes its block keeps).
//!
//! A compaction is all or nothing: when its summary request fails or is cancelled, the working
//! context and the carried state stay as they were (the usage already spent still counts).

use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use keel_llm::Provider;
use keel_protocol::{ContentBlock, Message, Role};
use keel_tools::ToolRegistry;
use tokio_util::sync::CancellationToken;

use super::lock;
use crate::compaction::{
    Carry, Compacted, Compaction, Summarizer, apply_summary, ask_for_summary, clear_tool_results,
    drop_dead_ends, earlier_work_block, fit_summary_input, has_block, kept_calls,
    render_for_summary, rule_based_summary, rule_based_summary_within, shrink_failed_calls,
    shrink_refused_calls, summaries_by_rules, summary_max_tokens, tail_start_keeping,
};
use crate::ending::Interrupt;
use crate::hooks::{Hook, HookAction, HookContext};

/// Characters of a folded user message the summary block keeps.
const USER_NOTE_CHARS: usize = 300;

/// The compaction guardrail of one run.
pub(crate) struct CompactionHook {
    /// The main model (the summary's second choice).
    main: Arc<dyn Provider>,
    /// The auxiliary model (the summary's first choice).
    auxiliary: Option<Arc<dyn Provider>>,
    tools: Arc<ToolRegistry>,
    cancel: CancellationToken,
    carry: Mutex<Carry>,
}

impl CompactionHook {
    pub(crate) fn new(
        main: Arc<dyn Provider>,
        auxiliary: Option<Arc<dyn Provider>>,
        tools: Arc<ToolRegistry>,
        cancel: CancellationToken,
    ) -> Self {
        Self {
            main,
            auxiliary,
            tools,
            cancel,
            carry: Mutex::new(Carry::default()),
        }
    }

    /// Compacts `cx`'s working context: at the threshold down to the target, or (`force`) now
    /// and through every stage that applies.
    async fn compact_now(&self, cx: &HookContext, force: bool) -> HookAction {
        let window = &cx.window;
        let before = window.tokens(&cx.messages);
        if !force && before < window.budget.threshold_tokens() {
            return HookAction::Continue;
        }
        let mut carry = lock(&self.carry).clone();
        let mut messages = cx.messages.as_ref().clone();
        match self
            .stages(cx, force, before, &mut messages, &mut carry)
            .await
        {
            Ok(done) => {
                *lock(&self.carry) = carry;
                match done {
                    Some(done) => HookAction::Compact(Box::new(Compaction { messages, done })),
                    None => HookAction::Continue,
                }
            }
            Err(interrupt) => {
                cx.interrupt(interrupt);
                HookAction::Continue
            }
        }
    }

    /// The stages, in order of safety, on `messages` (see `crate::compaction`).
    async fn stages(
        &self,
        cx: &HookContext,
        force: bool,
        before: u64,
        messages: &mut Vec<Message>,
        carry: &mut Carry,
    ) -> Result<Option<Compacted>, Interrupt> {
        let window = &cx.window;
        let target = if force {
            0
        } else {
            window.budget.target_tokens()
        };
        let mut stages = Vec::new();
        let mut summarizer = "none";

        let keep = kept_calls(window.budget.window);
        let mut tail = tail_start_keeping(messages, keep);
        let cleared = clear_tool_results(messages.as_mut_slice(), tail);
        // Forced (the request was refused as too large, or the user asked): every failed
        // call is shrunk, the protected tail's too, whatever its size.
        let last_resort = force && shrink_failed_calls(messages.as_mut_slice());
        if shrink_refused_calls(messages.as_mut_slice(), tail) | cleared | last_resort {
            stages.push("clear_tool_results".to_string());
        }
        if window.tokens(messages) > target {
            let effect_of = |name: &str| self.tools.get(name).map(|t| t.effect());
            let (new_tail, notes) = drop_dead_ends(messages, tail, &effect_of);
            if new_tail != tail {
                stages.push("drop_dead_ends".to_string());
                tail = new_tail;
            }
            carry.notes.extend(notes);
        }
        let original = (messages.clone(), carry.clone());
        if window.tokens(messages) > target && tail > 1 {
            let unsummarized = (messages.clone(), carry.clone());
            let before_summary = window.tokens(messages);
            let region = &messages[1..tail];
            for m in region {
                let is_user_text = m.role == Role::User
                    && m.content
                        .iter()
                        .all(|b| matches!(b, ContentBlock::Text { .. }));
                if is_user_text {
                    let t: String = m.text().trim().chars().take(USER_NOTE_CHARS).collect();
                    if !t.is_empty() {
                        carry.user_notes.push(t);
                    }
                }
            }
            let previous = carry.summary.clone();
            let input = fit_summary_input(
                render_for_summary(previous.as_deref(), region),
                window.budget.window,
            );
            let (summary, who) = self
                .summarize(cx, &input, previous.as_deref(), &messages[1..tail])
                .await?;
            summarizer = who.as_str();
            let block = earlier_work_block(&summary, &cx.facts(), &carry.notes, &carry.user_notes);
            carry.summary = Some(summary);
            apply_summary(messages, tail, block);
            if window.tokens(messages) >= before_summary {
                // A summary no smaller than what it replaces is dropped: compaction never
                // grows the context (a weak model's 128-token summary of two short steps
                // took 1,410 → 1,585 tokens, and the next request no longer fit).
                (*messages, *carry) = unsummarized;
                stages.push("summary_dropped".to_string());
            } else {
                stages.push("summarize".to_string());
            }
        } else if !stages.is_empty() && has_block(&messages[0]) {
            // Keep the facts current even when no new summary was needed.
            let summary = carry.summary.clone().unwrap_or_default();
            let block = earlier_work_block(&summary, &cx.facts(), &carry.notes, &carry.user_notes);
            apply_summary(messages, 1, block);
        }
        if stages.is_empty() {
            return Ok(None);
        }
        if window.tokens(messages) > before {
            // The earlier-work block grew by more than the stages cut: keep the context as it
            // was.
            (*messages, *carry) = original;
            return Ok(None);
        }
        Ok(Some(Compacted {
            tokens_before: before,
            tokens_after: window.tokens(messages),
            summarizer,
            stages,
        }))
    }

    /// Stage 3's summary: auxiliary model, else main model, else rules. The usage of each
    /// request counts for the run.
    async fn summarize(
        &self,
        cx: &HookContext,
        input: &str,
        previous: Option<&str>,
        region: &[Message],
    ) -> Result<(String, Summarizer), Interrupt> {
        let max_tokens = summary_max_tokens(cx.window.budget.window);
        if let Some(aux) = &self.auxiliary {
            let (text, usage) =
                ask_for_summary(aux.as_ref(), input, max_tokens, &self.cancel).await?;
            cx.spend(&usage);
            if let Some(text) = text {
                return Ok((text, Summarizer::Auxiliary));
            }
        }
        if summaries_by_rules(cx.window.budget.window) {
            // Four characters a token: the size a model's summary would be allowed.
            let max_chars = usize::try_from(max_tokens).unwrap_or(usize::MAX) * 4;
            let summary = rule_based_summary_within(previous, region, max_chars);
            return Ok((summary, Summarizer::RuleBased));
        }
        let (text, usage) =
            ask_for_summary(self.main.as_ref(), input, max_tokens, &self.cancel).await?;
        cx.spend(&usage);
        if let Some(text) = text {
            return Ok((text, Summarizer::Main));
        }
        Ok((rule_based_summary(previous, region), Summarizer::RuleBased))
    }
}

impl Hook for CompactionHook {
    fn name(&self) -> &str {
        "compaction"
    }

    fn before_request<'a>(&'a self, cx: &'a HookContext) -> BoxFuture<'a, HookAction> {
        Box::pin(self.compact_now(cx, false))
    }

    fn compact<'a>(&'a self, cx: &'a HookContext, force: bool) -> BoxFuture<'a, HookAction> {
        Box::pin(self.compact_now(cx, force))
    }

    fn carried(&self) -> Option<Carry> {
        Some(lock(&self.carry).clone())
    }

    fn carry_on(&self, carry: &Carry) {
        *lock(&self.carry) = carry.clone();
    }
}
