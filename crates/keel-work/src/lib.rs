//! From a PRD to working code (`keel task`, `keel work`): task generation from a PRD
//! (structured output, validated), the task layer of a task's run, running tasks one at a time
//! in dependency order, and the proof each run leaves. The records live in `keel_store::work`.
//!
//! An application *of* the session runtime: every task runs as a normal session built by
//! keel-engine's [`keel_engine::runtime::SessionBuilder`]; the loop crate does not know this one.

pub mod context;
pub mod generate;
pub mod proof;
pub mod runner;

pub use context::{PRD_EXCERPT_CHARS, task_brief};
pub use generate::{GenerateError, generate_request, generate_tasks, parse_tasks};
pub use proof::{CriterionProof, FileChange, GateRun, Proof};
pub use runner::{BatchReport, TaskRun, TaskRunner};
