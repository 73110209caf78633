//! What every node of one run shares: the run's context and whether it runs live or replays a
//! recorded trace.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use keel_tools::build_dirs::BuildDirs;
use keel_tools::shell::ShellSettings;
use tokio_util::sync::CancellationToken;

use super::agent::AgentRunner;
use crate::ir::{Flow, Value};
use crate::state::Trace;

/// Live, or re-executing a recorded run (no model calls, recorded agent results).
#[derive(Debug, Clone)]
pub enum Mode {
    Live,
    Replay(Arc<Trace>),
}

/// What every node of one run shares.
pub(crate) struct Ctx {
    pub run_id: String,
    pub flow: Arc<Flow>,
    pub workspace: PathBuf,
    pub inputs: BTreeMap<String, Value>,
    pub mode: Mode,
    pub agents: Arc<dyn AgentRunner>,
    pub shell: ShellSettings,
    pub build_dirs: BuildDirs,
    pub cancel: CancellationToken,
}

/// How long a replayed or live command may take when none is configured.
pub(crate) const VALIDATION_TIMEOUT: Duration = Duration::from_secs(600);
