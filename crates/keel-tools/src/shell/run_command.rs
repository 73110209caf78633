//! `run_command`: a bash command in the workspace, judged by the analyser, confined by the
//! sandbox, bounded in time and output.

use std::ffi::OsString;
use std::sync::Arc;
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;

use super::exec::{self, Ending, ExecOutput, ExecRequest};
use super::{CommandSafety, ShellSettings};
use crate::sandbox::{self, SandboxPolicy, WritableRoots};
use crate::{ToolContext, ToolEffect, ToolError, ToolOutput, TypedTool};

/// Arguments of `run_command`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunCommandArgs {
    /// The bash command line, run in the workspace root.
    pub command: String,
    /// Seconds before the command is killed (default 60, max 300).
    pub timeout: Option<u64>,
}

/// Runs shell commands for the model.
#[derive(Debug, Clone)]
pub struct RunCommand {
    settings: Arc<ShellSettings>,
    safety: CommandSafety,
}

impl RunCommand {
    /// The tool with these settings (deny/allow lists, timeouts, sandbox roots).
    pub fn new(settings: Arc<ShellSettings>) -> Self {
        let safety = CommandSafety::with_allow(&settings.allow);
        Self { settings, safety }
    }
}

impl TypedTool for RunCommand {
    type Args = RunCommandArgs;
    const NAME: &'static str = "run_command";

    fn description(&self) -> &str {
        "Run a bash command in the workspace root (stdin closed; long output is cut to its head and tail). Returns the exit code and output. Use the file tools to read and edit files, run_tests for tests."
    }

    fn effect(&self) -> ToolEffect {
        ToolEffect::RunsCommands
    }

    async fn run(&self, args: RunCommandArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let command = args.command.trim();
        if command.is_empty() {
            return Err(ToolError::model("run_command needs a non-empty `command`"));
        }
        let analysis = self.safety.classify(command);
        if let Some(entry) = analysis.denied_by(&self.settings.deny) {
            return Err(ToolError::model(format!(
                "refused: `{entry}` is on the [shell] deny list of this project's configuration. \
                 Do the task without it, or ask the user to run it."
            )));
        }
        if ctx.sandbox == SandboxPolicy::ReadOnly && !analysis.is_read_only() {
            return Err(ToolError::model(format!(
                "refused: only read-only commands may run now, and this one is {}: {}. \
                 Use a read-only command (ls, cat, grep, git status/diff/log, …).",
                analysis.class,
                analysis.reasons.join("; ")
            )));
        }
        let timeout = self.settings.timeout_for(args.timeout);
        let policy = self.settings.policy_for(ctx.sandbox);
        let mut roots = self.settings.approved_roots(ctx);
        if ctx.sandbox == SandboxPolicy::ReadOnly {
            // Allowed only because it reads (a read-only phase, approval's read-only lane): a
            // reading command needs no network, and a program it runs that the analyser
            // did not see (a repository's `core.fsmonitor`) gets none (red-team pass 4, R4-10).
            roots.network = false;
        }
        let mut req = ExecRequest::with_roots(
            vec![
                exec::shell_program().into_os_string(),
                OsString::from("-c"),
                OsString::from(command),
            ],
            ctx.workspace.root(),
            roots,
        );
        req.timeout = timeout;
        req.policy = policy;
        req.env_keep = self.settings.env_keep.clone();
        req.cancel = ctx.cancel.clone();
        // A person's yes lifts the dependency-tree protections only when the prompt said the
        // line changes installed dependencies (R9-13); otherwise they hold as for any command.
        req.approved = ctx.approved
            && !self
                .safety
                .classify_in_project(command, &ctx.workspace)
                .changes_installed
                .is_empty();
        let out = exec::run(req)
            .await
            .map_err(|e| ToolError::model(format!("the command could not start: {e}")))?;
        let quarantined = out.quarantined.clone();
        if out.ending == Ending::Cancelled {
            return Err(ToolError::model(
                "the command was cancelled by the user; its processes were killed",
            ));
        }
        let mut text = String::new();
        if policy != SandboxPolicy::Off
            && let Some(notice) = sandbox::take_unavailable_notice()
        {
            text.push_str(&notice);
            text.push('\n');
        }
        // The whole output (up to the safety cap): the engine fits it to the result budget and
        // keeps the rest retrievable.
        text.push_str(&render(&out, timeout, crate::text::OUTPUT_CAP_CHARS));
        if out.exit_code() == Some(127)
            && let Some(hint) = super::missing::missing_program_hint(Some(127), &out.stderr.text())
        {
            text.push('\n');
            text.push_str(&hint);
        }
        if let Some(report) = &quarantined {
            text.push('\n');
            text.push_str(report);
        }
        let mut metadata = serde_json::json!({
            "timed_out": out.ending == Ending::TimedOut,
            "class": analysis.class,
            "sandbox": policy.as_str(),
            "sandboxed": out.sandboxed,
            "duration_ms": u64::try_from(out.duration.as_millis()).unwrap_or(u64::MAX),
        });
        // Only when a planted repository was quarantined: the result's shape stays the same
        // for every ordinary command.
        if let (Some(report), Some(map)) = (&quarantined, metadata.as_object_mut()) {
            map.insert("quarantined_git".into(), report.clone().into());
        }
        Ok(ToolOutput::text(text)
            .with_exit_code(out.exit_code())
            .with_output_tail(&out.combined_text())
            .with_metadata(metadata))
    }
}

/// The status line and the two streams, cut to `budget` characters.
pub(crate) fn render(out: &ExecOutput, timeout: Duration, budget: usize) -> String {
    let status = match out.ending {
        Ending::Exited(code) => format!("exit code: {code}"),
        Ending::Signalled(sig) => format!("killed by signal {sig}"),
        Ending::TimedOut => format!(
            "timed out after {} s: the command and its child processes were killed",
            timeout.as_secs()
        ),
        Ending::Cancelled => "cancelled".to_string(),
    };
    let (so, se) = (out.stdout.total_bytes(), out.stderr.total_bytes());
    if so == 0 && se == 0 {
        // Why a limit or a guard stopped it is said all the same (red-team pass 11, R11-2:
        // a command the disk guard killed read as a bare "killed by signal 9").
        return match &out.limit_note {
            Some(note) => format!("{status} (no output)\n{note}"),
            None => format!("{status} (no output)"),
        };
    }
    let budget = budget.saturating_sub(status.len() + 20).max(200);
    let (stdout_budget, stderr_budget) = if so == 0 {
        (0, budget)
    } else if se == 0 {
        (budget, 0)
    } else {
        let share = (budget as u128 * so as u128 / (so + se) as u128) as usize;
        let share = share.clamp(budget / 4, budget * 3 / 4);
        (share, budget - share)
    };
    let mut text = status;
    if so > 0 {
        text.push_str("\nstdout:\n");
        text.push_str(out.stdout.render(stdout_budget).trim_end_matches('\n'));
    }
    if se > 0 {
        text.push_str("\nstderr:\n");
        text.push_str(out.stderr.render(stderr_budget).trim_end_matches('\n'));
    }
    if let Some(note) = &out.limit_note {
        text.push('\n');
        text.push_str(note);
    }
    text
}

impl ShellSettings {
    /// The timeout for a call: the requested seconds (or the default), at most the maximum.
    pub fn timeout_for(&self, requested: Option<u64>) -> Duration {
        match requested {
            Some(0) | None => self.default_timeout,
            Some(s) => Duration::from_secs(s).min(self.max_timeout),
        }
    }

    /// The kernel policy for a context: the context's, unless the sandbox is switched off.
    pub fn policy_for(&self, requested: SandboxPolicy) -> SandboxPolicy {
        if self.sandbox {
            requested
        } else {
            SandboxPolicy::Off
        }
    }

    /// The writable roots for a command Keel starts on its own in `ctx`'s workspace
    /// ([`Self::roots_for`]: no network).
    pub fn roots(&self, ctx: &ToolContext) -> WritableRoots {
        self.roots_for(ctx.workspace.root())
    }

    /// The roots for a command the approval policy judged as it is, or the user typed: the
    /// model's `run_command` and `run_tests` ([`Self::approved_roots_for`]).
    pub fn approved_roots(&self, ctx: &ToolContext) -> WritableRoots {
        self.approved_roots_for(ctx.workspace.root())
    }

    /// [`Self::roots_for`] with the user's network setting (`shell.network`): only for a
    /// command line the approval policy judged as it is (the model's `run_command`, `run_tests`
    /// by the command it resolves to, a gate asked about), or one the user typed or configured
    /// (`keel chat`'s `!`, `keel sandbox --`).
    pub fn approved_roots_for(&self, workspace: &std::path::Path) -> WritableRoots {
        let mut roots = self.roots_for(workspace);
        roots.network = self.network;
        roots
    }

    /// The sandbox's roots for a command Keel starts in `workspace` on its own — auto-lint,
    /// detected verification gates, phase rollback, flow and `keel work` commands: the
    /// workspace, configured caches, protected paths, hidden secret stores, and **no network**
    /// whatever `shell.network` says. Nobody approved such a command line, and what it runs is
    /// repository code (a `build.rs`, a test script, a shipped `core.fsmonitor`): with the
    /// network it could post the workspace anywhere unasked (red-team pass 4, R4-10). The
    /// network is granted only through [`Self::approved_roots_for`].
    pub fn roots_for(&self, workspace: &std::path::Path) -> WritableRoots {
        WritableRoots {
            workspace: Some(workspace.to_path_buf()),
            private_tmp: None,
            extra: self.writable.clone(),
            network: false,
            protected: self.protected.clone(),
            git: crate::sandbox::GitProtection::Whole,
            hidden: self.hide.clone(),
            limits: self.limits,
            visible: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stopped_command_without_output_says_why() {
        let out = ExecOutput {
            ending: Ending::Signalled(9),
            stdout: Default::default(),
            stderr: Default::default(),
            duration: Duration::from_secs(1),
            sandboxed: true,
            limit_note: Some("keel: the command was stopped: it created files".into()),
            quarantined: None,
        };
        let text = render(&out, Duration::from_secs(60), 10_000);
        assert!(text.starts_with("killed by signal 9 (no output)"), "{text}");
        assert!(text.contains("the command was stopped"), "{text}");
    }
}
