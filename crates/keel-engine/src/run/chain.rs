//! The fallback chain around a run's attempts (`crate::fallback` says what each tier does):
//! the main attempt, recovery attempts while the failure allows them, then the emergency
//! error.

use keel_protocol::{EventKind, Message};

use super::{Recovering, Run};
use crate::ending::{
    Ending, Failure, Interrupt, emergency_error, evaluation, original_error, recovery_prompt,
};
use crate::fallback::ChainEnd;

impl Run<'_> {
    /// A failed model request as the run's failure: when the engine asked the model to redo
    /// something (a hook's correction round after failing gates, a recovery attempt), the
    /// latest of those comes first, as its cause.
    pub(crate) fn model_failure(&self, e: &keel_llm::LlmError) -> Failure {
        let f = Failure::from_llm(e);
        if let Some(explained) = self.explained_failure(&f) {
            return explained;
        }
        match &self.recovering {
            Some(r) => {
                let mut f = f;
                f.message = format!(
                    "{} (during recovery attempt {}, which retried after: {})",
                    f.message, r.attempt, r.after
                );
                f
            }
            None => f,
        }
    }

    /// Runs the main attempt, then recovery attempts while the failure allows them, then
    /// turns a remaining failure into the emergency error. Cancellation and engine failures
    /// propagate as [`Interrupt`]s untouched.
    pub(crate) async fn run_chain(&mut self) -> Result<ChainEnd, Interrupt> {
        let chain = self.engine.config.fallback_chain.clone();
        let mut ending = self.drive().await?;
        let mut root: Option<Failure> = None;
        let mut recovery_failures = Vec::new();
        let mut attempt = 0;
        loop {
            let failure = match ending {
                Ending::Completed(text) => return Ok(ChainEnd::Completed(text)),
                Ending::Blocked(draft) => return Ok(ChainEnd::Blocked(draft)),
                Ending::Failed(f) => f,
            };
            match &root {
                None => root = Some(failure.clone()),
                Some(_) => recovery_failures.push(failure.clone()),
            }
            let first = root.as_ref().unwrap_or(&failure);
            // Recovery retries with the loop's own policy unless a hook forbids it (plan_exec
            // runs roll back instead: the phase policy and recovery are mutually exclusive).
            let can_recover = chain.enabled
                && chain.recovery.enabled
                && attempt < chain.recovery.max_retries
                && failure.recoverable()
                && self.recovery_allowed();
            if !can_recover {
                let mut first = first.clone();
                for hint in self.failure_hints().await? {
                    first = first.with_hint(hint);
                }
                let first = &first;
                let error = if chain.enabled && chain.emergency.enabled {
                    emergency_error(first, &recovery_failures)
                } else {
                    original_error(first)
                };
                return Ok(ChainEnd::Failed {
                    status: first.status,
                    error,
                });
            }
            attempt += 1;
            self.emitter
                .emit(EventKind::Recovery {
                    attempt,
                    error_code: failure.code,
                    evaluation: evaluation(&failure),
                })
                .await?;
            self.recovery_started();
            self.recovering = Some(Recovering {
                attempt,
                after: failure.message.clone(),
            });
            self.push_message(Message::user_text(recovery_prompt(&failure, attempt)))
                .await?;
            ending = self.drive().await?;
        }
    }
}
