//! The built-in guardrails that are [`Hook`](crate::hooks::Hook)s: each owns its state for one
//! run and talks to the loop only through [`HookContext`](crate::hooks::HookContext) and
//! [`HookAction`](crate::hooks::HookAction). The engine creates one of each per run, in the
//! order `hooks::builtin::standard` registers them. None of them imports the loop.

pub(crate) mod approval;
pub(crate) mod blockers;
pub(crate) mod compaction;
pub(crate) mod constitution;
pub(crate) mod phase;
pub(crate) mod rules;
pub(crate) mod scope;
pub(crate) mod skills;
pub(crate) mod snapshot;
pub(crate) mod tracker;
pub(crate) mod verify;

/// Locks a guardrail's state (a poisoned lock still holds usable state: a panic inside a
/// guardrail ends the run anyway).
pub(crate) fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
