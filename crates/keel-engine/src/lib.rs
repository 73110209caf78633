//! Keel's agent engine: the ReAct loop (think → call a tool → observe → decide), the layered
//! prompt, configuration, the event stream every surface consumes, and the guardrails that
//! keep long runs honest: context compaction, the fallback chain, the fix tracker and loop
//! guard, blockers, final verification with self-correction; the plan_exec phase machine with
//! rollback; automatic workspace snapshots with undo.
//!
//! One [`Engine`] serves every entry point (CLI, server): build it with [`EngineBuilder`],
//! call [`Engine::run`] with a task (or [`Engine::continue_session`] with a follow-up
//! message; a server creates the session first with [`Engine::create_session`] and sends its
//! first message the same way) and event sinks, get a [`RunOutcome`]. The engine owns the loop's policy
//! (termination, budgets, escalation, cancellation); it does not know how providers speak
//! HTTP (keel-llm), how tools touch files (keel-tools) or how events are stored (keel-store).

pub mod agents;
pub mod blockers;
mod calls;
pub mod compaction;
mod emitter;
mod ending;
mod engine;
pub mod fallback;
mod finish;
pub mod gates;
mod guardrails;
pub mod hooks;
pub mod mcp;
pub mod phase;
mod run;
pub mod runtime;
mod session;
pub mod time;
pub mod verify;

/// What Keel tells the model about a project (the layered prompt, rules, constitution,
/// skills, memory, the context dashboard): the `keel-knowledge` crate, re-exported under the
/// paths front ends have always used.
pub use keel_knowledge::{constitution, context, frontmatter, head, memory, prompt, rules, skills};

/// Which tool calls wait for a person, and the waiting: the `keel-approval` crate,
/// re-exported under the path front ends have always used.
pub use keel_approval as approval;

/// The fix tracker, the loop guard and the progress meter: the `keel-tracker` crate,
/// re-exported under its old path.
pub use keel_tracker as tracker;

/// Session working memory (oversized tool results kept whole, `read_result`): the
/// `keel-results` crate, re-exported under its old path.
pub use keel_results as results;

pub use blockers::{BlockerInfo, UserPrompt};
pub use emitter::{CollectingSink, Emitter, EventSink};
pub use engine::{Engine, EngineBuilder, RunOptions, RunOutcome, first_request_tools};
/// The engine's configuration (`EngineBuilder::new` takes it; `EngineError::Config` carries
/// its error): the `keel-config` crate.
pub use keel_config::{Config, ConfigError};
pub use session::workspace_busy;
pub use verify::{Gate, GateDetector};

/// What a run refused because another session works in its workspace says.
pub fn workspace_busy_message(lease: &keel_store::WorkspaceLease) -> String {
    format!(
        "another session ({}) is running in this workspace ({}; {}); wait for it to finish (`keel run --wait` waits for it), or cancel it — `keel sessions show {}` shows what it does",
        lease.session_id, lease.workspace, lease.holder, lease.session_id
    )
}

/// A failure of the engine itself (not of the model or a tool, which become events).
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Store(#[from] keel_store::StoreError),
    #[error(transparent)]
    Workspace(#[from] keel_tools::PathError),
    #[error("{0}")]
    Setup(String),
    /// The model provider cannot be built (none configured, a key missing, a bad script).
    #[error("{0}")]
    Provider(String),
    /// The session is running a turn (here or in another process).
    #[error("{0}")]
    Busy(String),
    /// Another session's run works in this workspace (any process or machine sharing the
    /// store): one running session per workspace.
    #[error("{}", workspace_busy_message(.0))]
    WorkspaceBusy(keel_store::WorkspaceLease),
    #[error("internal error: {0}")]
    Internal(String),
}
