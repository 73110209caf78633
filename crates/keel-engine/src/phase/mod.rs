//! PLAN_EXEC inside the loop. What the phases and their policy *are* (`Phase`,
//! `ExecutionMode`, `[plan_exec]`, `PhasePolicy`, `advance_phase`) is the `keel-phase` crate;
//! this module is the loop's side of it:
//!
//! - Enforcement happens before dispatch (`enforce`): a disallowed call is not run, the model
//!   gets `{"error":"phase_violation","tool","phase","hint"}`, a `phase_violation` event is
//!   emitted and the step counts. Allowed commands in read-only phases run under the read-only
//!   sandbox.
//! - `advance_phase` moves to the next phase (`phase_changed`), saving a checkpoint of the
//!   finished phase; the loop answers it itself, because the phase is the run's state, not the
//!   tool's.
//! - [`EngineJudge`]: the policy's `CommandJudge` on the shell's safety analysis and the
//!   project's test commands.
//! - After a failure, [`rollback`] runs the phase's validation and rollback commands in order
//!   (R19–R21) and decides whether the checkpoint may be saved.

mod enforce;
mod judge;
pub mod rollback;

pub(crate) use enforce::{PhaseState, stored_phase};
pub use judge::{EngineJudge, matches_test_command};

/// Whether commands in read-only phases run under an enforced kernel sandbox (so they cannot
/// write and need no snapshot first).
pub(crate) fn read_only_sandbox_enforced() -> bool {
    keel_tools::sandbox::is_available()
}
