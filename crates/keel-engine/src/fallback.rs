//! The fallback chain around a run (R16–R18): main → recovery → emergency.
//!
//! - **Main**: the ReAct loop as configured.
//! - **Recovery**: when the main run fails in a way another attempt can fix (timeout, loop,
//!   provider failure, a budget spent without progress), Keel tells the model what went wrong
//!   (a rule-based evaluation), asks it to reflect in a sentence or two and retries with the
//!   main model and a fresh iteration budget, up to `fallback_chain.recovery.max_retries`
//!   times. Configuration errors, fatal tool errors, context overflow, internal errors and
//!   verification failures skip it: another attempt cannot fix those (verification already
//!   had its own self-correction rounds).
//! - **Emergency**: the failure becomes a structured error — `{error_code, message,
//!   suggestions[], retryable, original_error}` — classified by type with fixed, rule-based
//!   suggestions ([`emergency_error`]). No model is involved and nothing panics.
//!
//! Cancellation is never a failure here: it propagates untouched. Each tier can be disabled;
//! with emergency disabled the original error surfaces as it was raised ([`original_error`]).

use keel_protocol::{ErrorInfo, SessionStatus};

use crate::blockers::BlockerDraft;
pub use crate::ending::{Failure, emergency_error, evaluation, original_error, recovery_prompt};

/// How a run ended after the chain.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ChainEnd {
    Completed(String),
    Blocked(BlockerDraft),
    Failed {
        status: SessionStatus,
        error: ErrorInfo,
    },
}
