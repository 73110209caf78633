//! The evaluation loop (`keel eval`): a suite of tasks, each run as a normal session in a
//! fresh workspace and judged by its check command ([`runner`]); two runs compared with a
//! paired significance test ([`compare`]); successful traces distilled into rules, skills or
//! lessons, stored only on an explicit accept ([`promote`]). Runs are stored by
//! `keel_store::eval`.
//!
//! An application *of* the session runtime, like keel-work: the loop crate does not know it.

pub mod compare;
pub mod promote;
pub mod runner;
pub mod suite;
pub mod workspace;

pub use compare::{Change, Comparison, compare, mcnemar_exact};
pub use promote::{Draft, PromoteKind, Provenance, Stored};
pub use runner::{EvalOptions, EvalOutcome, Progress, run_suite};
pub use suite::{EvalTask, Source, Suite};
