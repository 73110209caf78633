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

pub use compile::{CompileError, DiagKind, Diagnostic, compile, compile_file, read_flow};
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

/// The flow files of the workspace at `root`, sorted by path: `*.yaml` / `*.yml` in
/// `.keel/flows/` and in each skill's `.keel/skills/NAME/flows/`. Listed beneath the open
/// workspace (a repository is hostile input): a `.keel` or skill directory that is a symlink
/// is not entered, FIFOs, sockets and devices are left out, and a flow that is a symlink is
/// listed as found — reading it ([`compile_file`]) refuses one that leads out.
pub fn find_flows(root: &std::path::Path) -> Vec<std::path::PathBuf> {
    use keel_tools::fs::FileKind;
    let Ok(project) = keel_tools::project::ProjectDir::open(root) else {
        return Vec::new();
    };
    let mut dirs = vec![".keel/flows".to_string()];
    for skill in project.list(".keel/skills") {
        if skill.kind == FileKind::Dir {
            dirs.push(format!(".keel/skills/{}/flows", skill.name));
        }
    }
    let mut out = Vec::new();
    for d in dirs {
        // A directory on the way that is a link (`.keel/flows -> elsewhere`) is not listed.
        if d.split('/')
            .scan(String::new(), |at, part| {
                *at = keel_tools::project::join_rel(at, part);
                Some(project.entry_info(at).map(|i| i.kind))
            })
            .any(|kind| kind.is_some_and(|k| k != FileKind::Dir))
        {
            continue;
        }
        for e in project.list(&d) {
            let yaml = std::path::Path::new(&e.name)
                .extension()
                .is_some_and(|x| x == "yaml" || x == "yml");
            if yaml && matches!(e.kind, FileKind::File | FileKind::Symlink) {
                out.push(root.join(&d).join(&e.name));
            }
        }
    }
    out.sort();
    out
}
