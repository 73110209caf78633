//! Running a shell command for the harness itself (verification gates, phase validation and
//! rollback commands, flow and `keel work` steps): a thin adapter over the one command runner
//! ([`super::exec`]), so these commands get exactly what the model's
//! `run_command` gets — the kernel sandbox (workspace-write: the workspace minus `.git`/`.keel`,
//! a private temp dir, network off unless the command line was approved or configured by the
//! user and `shell.network` is on), the allowlisted environment, a timeout
//! and cancellation that kill the whole process group, and bounded output.
//!
//! Their command lines come from configuration or detection, but what they run (a planted
//! `package.json` test script, a Makefile) is repository content: it is confined like anything
//! the model runs, and its output (stored in events) never holds Keel's secrets.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use crate::sandbox::{GitProtection, SandboxPolicy};
use crate::shell::ShellSettings;
use crate::shell::exec::{self, Ending, ExecRequest};
use tokio_util::sync::CancellationToken;

/// A command line to run with the shell, confined.
#[derive(Debug, Clone)]
pub struct CommandSpec {
    /// The shell command line.
    pub command: String,
    /// Working directory.
    pub cwd: PathBuf,
    /// The workspace root: writable (minus its protected paths) under the workspace-write
    /// policy. Defaults to `cwd`.
    pub workspace: PathBuf,
    /// Wall-clock limit; the process group is killed when it passes.
    pub timeout: Duration,
    /// Extra environment variables (on top of the allowlisted environment).
    pub env: Vec<(String, String)>,
    /// Bytes kept per stream (stdout, stderr); beyond it the head and tail are kept.
    pub max_output_bytes: usize,
    /// The sandbox and environment settings (`[shell]`: sandbox on/off, network, writable
    /// caches, `env_keep`).
    pub shell: ShellSettings,
    /// The kernel policy (workspace-write by default).
    pub policy: SandboxPolicy,
    /// How much of `.git` is read-only (all of it by default).
    pub git: GitProtection,
    /// Whether the command may have the network when `shell.network` is on: only a command
    /// line the approval policy judged or the user configured. Off by default — a command
    /// Keel starts on its own (a detected gate, a rollback, a flow's) runs repository code
    /// nobody approved (red-team pass 4, R4-10).
    pub network: bool,
}

impl CommandSpec {
    /// `command` in `cwd` with `timeout`, confined by the default `[shell]` settings (sandbox
    /// on, network off, allowlisted environment), keeping 256 KB per stream.
    pub fn shell(command: impl Into<String>, cwd: impl Into<PathBuf>, timeout: Duration) -> Self {
        let cwd = cwd.into();
        Self {
            command: command.into(),
            workspace: cwd.clone(),
            cwd,
            timeout,
            env: Vec::new(),
            max_output_bytes: 256 * 1024,
            shell: ShellSettings::default(),
            policy: SandboxPolicy::WorkspaceWrite,
            git: GitProtection::Whole,
            network: false,
        }
    }

    /// The same, confined by these `[shell]` settings.
    pub fn with_shell(mut self, shell: &ShellSettings) -> Self {
        self.shell = shell.clone();
        self
    }
}

/// What a finished (or killed) command produced.
#[derive(Debug, Clone, PartialEq)]
pub struct CommandOutput {
    /// The exit code; `None` when a signal ended it (including Keel's kill).
    pub exit_code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    /// Killed because it ran past the timeout.
    pub timed_out: bool,
    /// Killed because the run was cancelled.
    pub cancelled: bool,
    pub duration: Duration,
    /// True when the kernel sandbox confined the run.
    pub sandboxed: bool,
}

impl CommandOutput {
    /// Exited on its own with code 0.
    pub fn success(&self) -> bool {
        self.exit_code == Some(0) && !self.timed_out && !self.cancelled
    }

    /// stdout then stderr, each trimmed, joined by a newline when both have text.
    pub fn combined(&self) -> String {
        let out = self.stdout.trim_end();
        let err = self.stderr.trim_end();
        match (out.is_empty(), err.is_empty()) {
            (true, _) => err.to_string(),
            (false, true) => out.to_string(),
            (false, false) => format!("{out}\n{err}"),
        }
    }

    /// A one-line account of how it ended: `exit code 1`, `timed out after 30 s`, …
    pub fn status_line(&self, timeout: Duration) -> String {
        if self.timed_out {
            format!("timed out after {} s and was killed", timeout.as_secs())
        } else if self.cancelled {
            "cancelled".into()
        } else {
            match self.exit_code {
                Some(code) => format!("exit code {code}"),
                None => "killed by a signal".into(),
            }
        }
    }
}

/// Why a command could not be run at all.
#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    #[error("cannot start `{command}` in {cwd}: {source}")]
    Spawn {
        command: String,
        cwd: String,
        #[source]
        source: std::io::Error,
    },
}

/// Runs `spec` to completion, timeout or cancellation, through the one command runner. The
/// command gets its own process group; when it ends, times out or is cancelled the whole group
/// is killed, so background children never outlive it. stdin is closed.
pub async fn run_command_with_timeout(
    spec: &CommandSpec,
    cancel: &CancellationToken,
) -> Result<CommandOutput, ProcessError> {
    let mut req = ExecRequest::new(
        vec![
            exec::shell_program().into_os_string(),
            OsString::from("-c"),
            OsString::from(&spec.command),
        ],
        &spec.cwd,
    );
    req.timeout = spec.timeout;
    req.policy = spec.shell.policy_for(spec.policy);
    req.roots = if spec.network && spec.policy != SandboxPolicy::ReadOnly {
        spec.shell.approved_roots_for(&spec.workspace)
    } else {
        spec.shell.roots_for(&spec.workspace)
    };
    req.roots.git = spec.git;
    req.env_keep = spec.shell.env_keep.clone();
    req.env_set = spec.env.clone();
    req.cancel = cancel.clone();
    let out = exec::run(req).await.map_err(|source| ProcessError::Spawn {
        command: spec.command.clone(),
        cwd: spec.cwd.display().to_string(),
        source,
    })?;
    let budget = spec.max_output_bytes.max(64);
    let mut stderr = out.stderr.render(budget);
    // A git repository the command planted was quarantined by the runner: the report goes
    // where every gate, rollback and flow result shows its output.
    if let Some(report) = &out.quarantined {
        if !stderr.is_empty() && !stderr.ends_with('\n') {
            stderr.push('\n');
        }
        stderr.push_str(report);
    }
    Ok(CommandOutput {
        exit_code: out.exit_code(),
        stdout: out.stdout.render(budget),
        stderr,
        timed_out: out.ending == Ending::TimedOut,
        cancelled: out.ending == Ending::Cancelled,
        duration: out.duration,
        sandboxed: out.sandboxed,
    })
}
