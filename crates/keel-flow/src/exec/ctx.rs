//! What every node of one run shares: the run's context and whether it runs live or replays a
//! recorded trace.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use keel_engine::approval::{ApprovalRules, Verdict};
use keel_tools::build_dirs::BuildDirs;
use keel_tools::sandbox::SandboxPolicy;
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
    pub approvals: Option<Arc<ApprovalRules>>,
}

impl Ctx {
    /// Whether the approval policy lets the flow's command line `cmd` run in `dir` unasked,
    /// and under which sandbox: the read-only one when it is allowed only because it was
    /// rated read-only (the read-only lane), else the workspace-write one. `Err` says why
    /// not and what to do.
    pub(crate) fn check_command(&self, cmd: &str, dir: &Path) -> Result<SandboxPolicy, String> {
        let Some(rules) = &self.approvals else {
            return Ok(SandboxPolicy::WorkspaceWrite);
        };
        let call = keel_protocol::ToolCall {
            id: "flow-command".into(),
            name: "run_command".into(),
            arguments: serde_json::json!({ "command": cmd }),
        };
        let mut tools = keel_tools::ToolRegistry::new();
        keel_tools::builtin::register_defaults(&mut tools);
        let ws = keel_tools::Workspace::new(dir).ok();
        let (verdict, summary) = rules.judge_in(&call, &tools, ws.as_ref());
        match verdict {
            Verdict::Allow => Ok(SandboxPolicy::WorkspaceWrite),
            Verdict::AllowReadOnly => Ok(SandboxPolicy::ReadOnly),
            Verdict::Deny(why) => Err(format!("`{cmd}` was refused: {why}")),
            Verdict::Ask => Err(format!(
                "`{cmd}` needs approval under the `{}` policy ({}{}), and nobody can answer a flow run; run it with `--approval never` if you trust this flow, or allow the command with an [approval] allow rule",
                rules.policy.as_str(),
                summary.class,
                if summary.reason.is_empty() {
                    String::new()
                } else {
                    format!(": {}", summary.reason)
                }
            )),
        }
    }
}

/// How long a replayed or live command may take when none is configured.
pub(crate) const VALIDATION_TIMEOUT: Duration = Duration::from_secs(600);
