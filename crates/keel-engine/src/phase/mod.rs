//! PLAN_EXEC's engine side. What the phases and their policy *are* (`Phase`,
//! `ExecutionMode`, `[plan_exec]`, `PhasePolicy`, `advance_phase`) is the `keel-phase` crate;
//! enforcing it in a run — the check before each call, `advance_phase`, auto-advance,
//! checkpoints — is the phase hook (`crate::guardrails::phase`). Here:
//!
//! - [`EngineJudge`]: the policy's `CommandJudge` on the shell's safety analysis and the
//!   project's test commands.
//! - After a failure, [`rollback`] runs the phase's validation and rollback commands in order
//!   (R19–R21) and decides whether the checkpoint may be saved.

mod judge;
pub mod rollback;

pub use judge::{EngineJudge, matches_test_command};

/// Whether commands in read-only phases run under an enforced kernel sandbox (so they cannot
/// write and need no snapshot first).
pub(crate) fn read_only_sandbox_enforced() -> bool {
    keel_tools::sandbox::is_available()
}
