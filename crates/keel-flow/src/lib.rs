//! Keel flows: typed workflows. A YAML flow file compiles to a typed, validated IR
//! ([`compile`]) — node types `agent`, `shell`, `test`, `verify`, `review`, `branch`,
//! `parallel`, `deliver`, typed inputs, outputs and `${…}` references, every mistake reported
//! with file, line and column before anything runs — and the [`exec::Executor`] runs it as a
//! DAG with bounded parallelism, per-node timeouts and step caps, validation and rollback in
//! seed 003's order, a checkpoint in the session database after every node, resume after a
//! crash, and a trace per run that `replay` re-executes without any model call.
//!
//! Sits above keel-engine (agent leaves are engine sessions built by the runtime's session
//! builder; commands go through its confined process runner) and below the CLI and server.

pub mod compile;
pub mod exec;
mod graph;
pub mod ir;
pub mod spec;
pub mod state;
pub mod store;
pub mod template;
pub mod tree;

pub use compile::{CompileError, DiagKind, Diagnostic, compile, compile_file};
pub use exec::{Executor, FlowEvent, RunSummary};
pub use ir::Flow;

/// Why a flow could not be run.
#[derive(Debug, thiserror::Error)]
pub enum FlowError {
    #[error("{0}")]
    Compile(#[from] CompileError),
    #[error(transparent)]
    Store(#[from] keel_store::StoreError),
    /// A mistake in how the flow was invoked; the message says what to do.
    #[error("{0}")]
    Usage(String),
}

/// `s` cut to `max` characters with an ellipsis.
pub fn short(s: &str, max: usize) -> String {
    let s = s.trim();
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let mut out: String = s.chars().take(max).collect();
        out.push('…');
        out
    }
}

/// The flow files found in `dirs` (`*.yaml`, `*.yml`), sorted by path.
pub fn find_flows(dirs: &[std::path::PathBuf]) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for d in dirs {
        let Ok(entries) = std::fs::read_dir(d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.extension().is_some_and(|x| x == "yaml" || x == "yml") && p.is_file() {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}
