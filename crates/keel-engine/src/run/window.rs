//! The loop's context window: the size of the next request, a request the server refused as
//! too large (the window learned, the context compacted by the compaction hook, sent again),
//! and the compact head once a learned window is too small for the full one (keel-knowledge's `head`).

use super::Run;
use crate::ending::Interrupt;
use keel_knowledge::head::for_window;

impl Run<'_> {
    /// The size of the next request, calibrated.
    pub(crate) fn context_tokens(&self) -> u64 {
        self.budget
            .request_tokens(&self.system_prompt, &self.tools, &self.messages)
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
            // The provider may have learned from the refusal (the prompt size it states):
            // measure with what it knows now.
            self.budget.set_scale(self.engine.provider.token_scale());
            self.budget.learn_overflow(window, self.context_tokens());
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

    /// Switches to the compact head when the window learned mid-run is too small for the
    /// full one (once: the compact head then stays).
    pub(crate) fn fit_head(&mut self) {
        if self.compact_head {
            return;
        }
        let (system, tools, compact) =
            for_window(&self.system_prompt, &self.tools, self.budget.window);
        if compact {
            self.system_prompt = system.into();
            self.tools = tools.into();
            self.compact_head = true;
        }
    }

    /// The failure of a request that does not fit the window: both sizes, and the head's.
    pub(crate) fn overflow(&self, needed: u64, window: u64) -> crate::ending::Failure {
        let head = self
            .budget
            .request_tokens(&self.system_prompt, &self.tools, &[]);
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
