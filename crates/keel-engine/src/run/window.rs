//! The loop's context window: the size of the next request, compaction of the working context
//! before a request that crosses the threshold (the stages and the summary are
//! `crate::compaction`'s), and the compact head once a learned window is too small for the
//! full one (`crate::head`).

use std::sync::Arc;

use keel_protocol::{ContentBlock, Role};

use super::Run;
use crate::compaction::{
    Compacted, Facts, Summarizer, apply_summary, ask_for_summary, clear_tool_results,
    drop_dead_ends, earlier_work_block, fit_summary_input, has_block, kept_calls,
    render_for_summary, rule_based_summary, shrink_refused_calls, summary_max_tokens,
    tail_start_keeping,
};
use crate::ending::Interrupt;
use crate::head::for_window;

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

    /// The request was refused as too large for the window (by the server, or by keel-llm
    /// before sending): learn the window, compact to it and send again — and once more after
    /// compacting everything but the protected tail, since a weak model's garbage can count
    /// twice the tokens Keel estimates (a SmolLM2 run's resend still had 2,243 tokens for a
    /// 2,048 window). Returns the reply, or the error of the last refusal.
    pub(crate) async fn resend_smaller(
        &mut self,
        mut window: Option<u64>,
    ) -> Result<Result<keel_llm::ModelTurn, keel_llm::LlmError>, Interrupt> {
        let mut force = false;
        loop {
            self.compactor
                .budget
                .learn_overflow(window, self.context_tokens());
            self.fit_head();
            if let Some(done) = self.compact(force).await? {
                self.emitter.emit(done.event(None)).await?;
            }
            match self.call_model().await {
                Ok(turn) => return Ok(Ok(turn)),
                Err(Interrupt::Llm(keel_llm::LlmError::ContextLength { window: w, .. }))
                    if !force =>
                {
                    window = w;
                    force = true;
                }
                Err(Interrupt::Llm(e)) => return Ok(Err(e)),
                Err(other) => return Err(other),
            }
        }
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

        let keep = kept_calls(self.compactor.budget.window);
        let mut tail = tail_start_keeping(&self.messages, keep);
        let cleared = clear_tool_results(Arc::make_mut(&mut self.messages).as_mut_slice(), tail);
        if shrink_refused_calls(Arc::make_mut(&mut self.messages).as_mut_slice(), tail) | cleared {
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
            let input = fit_summary_input(
                render_for_summary(previous.as_deref(), region),
                self.compactor.budget.window,
            );
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
        } else if !stages.is_empty() && has_block(&self.messages[0]) {
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
        let max_tokens = summary_max_tokens(self.compactor.budget.window);
        if let Some(aux) = self.engine.auxiliary.clone() {
            let (text, usage) =
                ask_for_summary(aux.as_ref(), input, max_tokens, &self.ctx.cancel).await?;
            self.usage.add(&usage);
            if let Some(text) = text {
                return Ok((text, Summarizer::Auxiliary));
            }
        }
        let main = self.engine.provider.clone();
        let (text, usage) =
            ask_for_summary(main.as_ref(), input, max_tokens, &self.ctx.cancel).await?;
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

impl Run<'_> {
    /// Switches to the compact head when the window learned mid-run is too small for the
    /// full one (once: the compact head then stays).
    pub(crate) fn fit_head(&mut self) {
        if self.compact_head {
            return;
        }
        let (system, tools, compact) = for_window(
            &self.system_prompt,
            &self.tools,
            self.compactor.budget.window,
        );
        if compact {
            self.system_prompt = system;
            self.tools = tools;
            self.compact_head = true;
        }
    }

    /// The failure of a request that does not fit the window: both sizes, and the head's.
    pub(crate) fn overflow(&self, needed: u64, window: u64) -> crate::ending::Failure {
        let head = keel_llm::tokens::estimate_request(&self.system_prompt, &self.tools, &[]);
        let which = if self.compact_head {
            "the compact head"
        } else {
            "the head"
        };
        crate::ending::Failure::new(
            keel_protocol::ErrorCode::ContextOverflow,
            format!(
                "the next request needs about {needed} tokens, more than the model's {window}-token window, even after compaction ({which}, the system prompt and {} tools, takes about {head} of them)",
                self.tools.len()
            ),
        )
        .with_hint(if head.saturating_mul(2) > window {
            "use a model with a larger context window, or shorten the project's instruction files (AGENTS.md, the constitution); if the window is larger than Keel thinks, set agent.context_window"
        } else {
            "start a new session with a smaller task, or use a model with a larger context window"
        })
    }
}
