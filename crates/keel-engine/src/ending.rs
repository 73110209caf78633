//! How an attempt of the loop ends ([`Ending`]) and what a failure becomes: [`Failure`], the
//! recovery tier's evaluation and prompt, and the emergency tier's fixed, rule-based
//! classification ([`emergency_error`]). No loop here: the chain that uses it is `fallback`,
//! and guardrails raise endings through `HookAction::End`.

use keel_llm::LlmError;
use keel_protocol::{ErrorCode, ErrorInfo, SessionStatus};

use crate::EngineError;
use crate::blockers::BlockerDraft;

/// Why a step stopped early.
pub(crate) enum Interrupt {
    Cancelled,
    Llm(LlmError),
    Engine(EngineError),
}

impl From<EngineError> for Interrupt {
    fn from(e: EngineError) -> Self {
        Interrupt::Engine(e)
    }
}

/// How one attempt of the loop ended (the loop's own endings, and what a guardrail's
/// `HookAction::End` asks for).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Ending {
    /// The model finished and verification passed; its final answer.
    Completed(String),
    /// A human must answer first.
    Blocked(BlockerDraft),
    /// The attempt failed; the fallback chain decides what happens next.
    Failed(Failure),
}

/// Why a run attempt failed, before the chain classifies it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub code: ErrorCode,
    /// What happened, as raised.
    pub message: String,
    /// The underlying error's details (a provider error's debug form, a gate's output).
    pub original: Option<String>,
    /// How the session ends if this failure stands: `failed` or `max_steps`.
    pub status: SessionStatus,
    /// Specific advice from where the failure was raised, shown before the class's rules.
    pub hints: Vec<String>,
    /// Sending the same request again cannot change the outcome (a request the provider
    /// rejects as invalid, a model it does not have, no server at the address): no recovery
    /// attempt, and the error is not called retryable.
    pub permanent: bool,
}

impl Failure {
    /// A failure with `code` and `message`, ending the session `failed`.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            original: None,
            status: SessionStatus::Failed,
            hints: Vec::new(),
            permanent: false,
        }
    }

    /// Adds the original error text.
    pub fn with_original(mut self, original: impl Into<String>) -> Self {
        self.original = Some(original.into());
        self
    }

    /// Adds a specific hint.
    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hints.push(hint.into());
        self
    }

    /// Classifies a provider failure (after the request's own retries).
    pub fn from_llm(e: &LlmError) -> Self {
        let code = match e {
            LlmError::Timeout(_) | LlmError::Stalled(_) => ErrorCode::Timeout,
            LlmError::Auth { .. } | LlmError::Config(_) | LlmError::ModelNotFound { .. } => {
                ErrorCode::ConfigError
            }
            LlmError::ContextLength { .. } => ErrorCode::ContextOverflow,
            _ => ErrorCode::LlmFailure,
        };
        let mut failure = Failure::new(code, e.to_string()).with_original(format!("{e:?}"));
        failure.permanent = matches!(
            e,
            LlmError::BadRequest { .. }
                | LlmError::InvalidResponse(_)
                | LlmError::Unreachable { .. }
                | LlmError::Stalled(_)
                | LlmError::ScriptExhausted(_)
        );
        match e {
            LlmError::Auth { .. } => failure.with_hint(
                "check the API key variable for this provider (`keel doctor` shows which are set)",
            ),
            LlmError::Unreachable { .. } => failure.with_hint(
                "start the model server, or point --base-url (llm.base_url) at the one that runs; `keel doctor --ping` checks it",
            ),
            LlmError::BadRequest { .. } | LlmError::InvalidResponse(_) => failure.with_hint(
                "the server rejects this request as it is, so retrying cannot help: read its message and log; for a local OpenAI-compatible server see the README's troubleshooting section",
            ),
            LlmError::ScriptExhausted(_) => {
                failure.with_hint("add turns to the script, ending with a text-only turn (a resumed session goes on after the turns it already played)")
            }
            LlmError::InvalidToolArguments { .. } => {
                failure.with_hint("retry; the model's reply was cut off or malformed")
            }
            _ => failure,
        }
    }

    /// Whether a recovery attempt (reflect and retry with the main model) can help.
    pub fn recoverable(&self) -> bool {
        !self.permanent
            && matches!(
                self.code,
                ErrorCode::Timeout
                    | ErrorCode::LoopDetected
                    | ErrorCode::LlmFailure
                    | ErrorCode::MaxSteps
            )
    }
}

/// The fixed rules of the emergency tier: a lead-in, suggestions and whether retrying the
/// same request may work, per error class.
fn rules(code: ErrorCode) -> (&'static str, &'static [&'static str], bool) {
    match code {
        ErrorCode::Timeout => (
            "A step took too long",
            &[
                "retry in a minute; the provider or a command was slow",
                "raise the timeout, or split the task into smaller steps",
            ],
            true,
        ),
        ErrorCode::LoopDetected => (
            "The agent was repeating itself",
            &[
                "split the task into smaller, more specific steps",
                "check the arguments of the repeated tool call in the last tool results",
                "try a stronger model",
            ],
            true,
        ),
        ErrorCode::LlmFailure => (
            "The model provider failed",
            &[
                "retry later; the provider failed after all retries",
                "switch to another model or configure a fallback model",
            ],
            true,
        ),
        ErrorCode::ToolFailure => (
            "A tool failed in a way the model cannot fix",
            &[
                "fix the environment problem in the message (disk, permissions, store), then resume the session",
            ],
            false,
        ),
        ErrorCode::ConfigError => (
            "The configuration is wrong",
            &["fix the setting named in the message (`keel doctor` checks providers and keys)"],
            false,
        ),
        ErrorCode::ContextOverflow => (
            "The conversation no longer fits the model's context window",
            &[
                "start a new session with a narrower task",
                "use a model with a larger context window (agent.context_window)",
            ],
            false,
        ),
        ErrorCode::MaxSteps => (
            "The iteration budget ran out without progress",
            &[
                "raise the cap with --max-iterations or agent.max_iterations",
                "split the task into smaller steps",
            ],
            true,
        ),
        ErrorCode::VerificationFailed => (
            "Final verification still fails",
            &[
                "read the gate output and fix the failure, or adjust `[verify] commands`",
                "resume the session with guidance: keel run --resume SESSION \"…\"",
            ],
            false,
        ),
        ErrorCode::WorkspaceBusy => (
            "Another session is running in this workspace",
            &[
                "wait for it to finish and send the message again (`keel run --wait` waits by itself)",
            ],
            true,
        ),
        ErrorCode::Cancelled => ("The run was cancelled", &[], true),
        ErrorCode::InternalError => (
            "Keel hit an internal error",
            &[
                "this is a bug in Keel: report it with the session's events (`keel sessions show ID --json`)",
            ],
            false,
        ),
    }
}

/// The emergency tier: a structured error for `failure`, classified by its type with fixed,
/// rule-based suggestions. `recovery_failures` are the failures of recovery attempts, noted in
/// the message (the code stays the original failure's: it is the root cause).
pub fn emergency_error(failure: &Failure, recovery_failures: &[Failure]) -> ErrorInfo {
    let (lead, suggestions, retryable) = rules(failure.code);
    // A permanent failure keeps only its own hints: "retry later" would be wrong advice.
    let retryable = retryable && !failure.permanent;
    let mut message = format!("{lead}: {}", failure.message);
    for (i, f) in recovery_failures.iter().enumerate() {
        message.push_str(&format!(
            " (recovery attempt {} also failed: {})",
            i + 1,
            f.message
        ));
    }
    let mut all: Vec<String> = failure.hints.clone();
    all.extend(
        suggestions
            .iter()
            .filter(|s| !(failure.permanent && s.starts_with("retry")))
            .map(|s| s.to_string()),
    );
    all.dedup();
    ErrorInfo {
        error_code: failure.code,
        message,
        suggestions: all,
        retryable,
        original_error: failure.original.clone().or(Some(failure.message.clone())),
    }
}

/// With the emergency tier disabled: the error exactly as it was raised, no suggestions.
pub fn original_error(failure: &Failure) -> ErrorInfo {
    ErrorInfo {
        error_code: failure.code,
        message: failure.message.clone(),
        suggestions: Vec::new(),
        retryable: false,
        original_error: failure.original.clone(),
    }
}

/// What the recovery tier tells the model about the failure: a rule-based evaluation.
pub fn evaluation(failure: &Failure) -> String {
    let why = match failure.code {
        ErrorCode::LoopDetected => {
            "You repeated the same tool call with the same arguments; it gives the same result every time."
        }
        ErrorCode::MaxSteps => {
            "The iteration budget ran out while the recent steps made no progress (no new successful tool call)."
        }
        ErrorCode::Timeout => "A request timed out.",
        ErrorCode::LlmFailure => "The model request failed.",
        _ => "The attempt failed.",
    };
    format!("The previous attempt stopped: {} {why}", failure.message)
}

/// The user message that starts a recovery attempt.
pub fn recovery_prompt(failure: &Failure, attempt: u32) -> String {
    format!(
        "[Recovery attempt {attempt}] {}\n\nFirst reflect in two or three sentences: what went wrong, and what will you do differently? Then continue the task with a different approach. If you cannot go on without the user's decision or information, call ask_user.",
        evaluation(failure)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_class_gets_its_code_fixed_suggestions_and_retryability() {
        let cases = [
            (LlmError::Timeout("30 s".into()), ErrorCode::Timeout, true),
            (
                LlmError::Server {
                    status: 503,
                    message: "down".into(),
                    retry_after: None,
                },
                ErrorCode::LlmFailure,
                true,
            ),
            (
                LlmError::Auth {
                    status: 401,
                    message: "bad key".into(),
                },
                ErrorCode::ConfigError,
                false,
            ),
            (
                LlmError::Config("no model".into()),
                ErrorCode::ConfigError,
                false,
            ),
        ];
        for (e, code, retryable) in cases {
            let info = emergency_error(&Failure::from_llm(&e), &[]);
            assert_eq!(info.error_code, code, "{e}");
            assert_eq!(info.retryable, retryable, "{e}");
            assert!(!info.suggestions.is_empty());
            assert!(info.original_error.is_some());
        }
        for code in [
            ErrorCode::LoopDetected,
            ErrorCode::ToolFailure,
            ErrorCode::ContextOverflow,
            ErrorCode::MaxSteps,
            ErrorCode::VerificationFailed,
            ErrorCode::InternalError,
        ] {
            let info = emergency_error(&Failure::new(code, "x"), &[]);
            assert_eq!(info.error_code, code);
            assert!(!info.suggestions.is_empty(), "{code:?} has suggestions");
        }
        let auth = emergency_error(
            &Failure::from_llm(&LlmError::Auth {
                status: 401,
                message: "bad key".into(),
            }),
            &[],
        );
        assert!(auth.suggestions[0].contains("API key"), "hint first");
    }

    #[test]
    fn requests_the_server_rejects_as_invalid_are_neither_recovered_nor_retryable() {
        for e in [
            LlmError::BadRequest {
                status: 500,
                message:
                    "validation error: body.messages.2.content: Input should be a valid string"
                        .into(),
            },
            LlmError::Unreachable {
                url: "http://localhost:8080/v1".into(),
                detail: "connection refused".into(),
            },
        ] {
            let f = Failure::from_llm(&e);
            assert!(!f.recoverable(), "{e}");
            let info = emergency_error(&f, &[]);
            assert!(!info.retryable, "{e}");
            assert!(
                info.suggestions.iter().all(|s| !s.contains("retry later")),
                "{:?}",
                info.suggestions
            );
        }
        let f = Failure::from_llm(&LlmError::ModelNotFound {
            status: 404,
            model: "qwen".into(),
            base_url: "http://localhost:11434/v1".into(),
            message: "model not found".into(),
        });
        assert_eq!(f.code, ErrorCode::ConfigError);
        let f = Failure::from_llm(&LlmError::ContextLength {
            message: "too long".into(),
            window: Some(4096),
        });
        assert_eq!(f.code, ErrorCode::ContextOverflow);
    }

    #[test]
    fn only_failures_another_attempt_can_fix_are_recoverable() {
        assert!(Failure::new(ErrorCode::LoopDetected, "x").recoverable());
        assert!(Failure::new(ErrorCode::Timeout, "x").recoverable());
        assert!(Failure::new(ErrorCode::MaxSteps, "x").recoverable());
        assert!(!Failure::new(ErrorCode::ConfigError, "x").recoverable());
        assert!(!Failure::new(ErrorCode::ToolFailure, "x").recoverable());
        assert!(!Failure::new(ErrorCode::VerificationFailed, "x").recoverable());
        assert!(!Failure::new(ErrorCode::InternalError, "x").recoverable());
    }

    #[test]
    fn emergency_keeps_the_root_cause_and_notes_recovery() {
        let root = Failure::new(ErrorCode::LoopDetected, "read_file 3 times");
        let later = Failure::new(ErrorCode::LlmFailure, "HTTP 500");
        let info = emergency_error(&root, &[later]);
        assert_eq!(info.error_code, ErrorCode::LoopDetected);
        assert!(
            info.message
                .contains("recovery attempt 1 also failed: HTTP 500")
        );
        let raw = original_error(&root);
        assert_eq!(raw.message, "read_file 3 times");
        assert!(raw.suggestions.is_empty());
    }

    #[test]
    fn the_emergency_error_json_is_stable() {
        let failure = Failure::new(
            ErrorCode::LoopDetected,
            "`read_file` was called 3 times in a row with the same arguments {\"path\":\"a.rs\"}",
        );
        let later = Failure::new(
            ErrorCode::LlmFailure,
            "provider server error (HTTP 503): busy",
        );
        insta::assert_json_snapshot!(
            "emergency_loop_detected",
            keel_protocol::EventKind::Error(emergency_error(&failure, &[later]))
        );
    }

    #[test]
    fn the_recovery_prompt_evaluates_and_asks_for_reflection() {
        let p = recovery_prompt(
            &Failure::new(ErrorCode::LoopDetected, "`read_file` was called 3 times"),
            1,
        );
        assert!(p.contains("[Recovery attempt 1]"));
        assert!(p.contains("`read_file` was called 3 times"));
        assert!(p.contains("reflect"));
    }
}
