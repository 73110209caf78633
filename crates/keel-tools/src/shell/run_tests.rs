//! `run_tests`: runs the project's tests with the detected (or configured) runner and returns a
//! summary and only the first failure, unless verbose.
//!
//! The run passed only if the command exited 0 and no test failed. Anything else — failing
//! tests, a runner that could not start or found nothing to count (`No module named pytest`,
//! exit code 1), a timeout — is returned as an error result ([`ToolError::Failed`], which
//! keeps the exit code, output tail and counts), so every front end marks it ✗ and the loop
//! counts it as a failed attempt.

use std::ffi::OsString;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;

use super::exec::{self, Ending, ExecRequest};
use super::testing::{summarize, test_command_for};
use super::{CommandSafety, ShellSettings};
use crate::sandbox::{self, SandboxPolicy};
use crate::{PlannedCommand, ToolContext, ToolEffect, ToolError, ToolOutput, TypedTool, Workspace};

/// Arguments of `run_tests`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunTestsArgs {
    /// A test file or directory (workspace-relative); all tests when omitted.
    pub path: Option<String>,
    /// Return the whole output instead of the summary and first failure.
    pub verbose: Option<bool>,
}

/// Runs the project's tests.
#[derive(Debug, Clone)]
pub struct RunTests {
    settings: Arc<ShellSettings>,
}

impl RunTests {
    /// The tool with these settings (configured test command, timeout, sandbox roots).
    pub fn new(settings: Arc<ShellSettings>) -> Self {
        Self { settings }
    }
}

impl RunTests {
    /// The command a call runs: the configured or detected test command, scoped to `path`.
    /// The approval gate and the phase policy judge this same command
    /// ([`Tool::planned_command`](crate::Tool::planned_command)) before it runs.
    fn test_command(
        &self,
        args: &RunTestsArgs,
        workspace: &Workspace,
    ) -> Result<super::TestCommand, ToolError> {
        let target = match args
            .path
            .as_deref()
            .map(str::trim)
            .filter(|p| !p.is_empty())
        {
            Some(p) => {
                let abs = workspace.locate_named(p)?.abs();
                if !abs.exists() {
                    return Err(ToolError::model(format!(
                        "`{p}` does not exist; give a test file or directory, or omit `path`"
                    )));
                }
                Some(abs)
            }
            None => None,
        };
        let configured = self.settings.test_command.as_deref();
        test_command_for(workspace.root(), target.as_deref(), configured).ok_or_else(|| {
            ToolError::model(
                "no test runner found (looked for Cargo.toml, go.mod, a package.json test \
                 script, pytest files). Run the tests with run_command, or set \
                 `[shell] test_command` in .keel/config.toml",
            )
        })
    }
}

impl TypedTool for RunTests {
    type Args = RunTestsArgs;
    const NAME: &'static str = "run_tests";

    fn description(&self) -> &str {
        "Run the project's tests (cargo, pytest, npm/vitest/jest, go, or the configured command). Returns pass/fail counts and the first failure's output."
    }

    fn effect(&self) -> ToolEffect {
        ToolEffect::RunsCommands
    }

    fn planned_command(
        &self,
        args: &serde_json::Value,
        workspace: &Workspace,
    ) -> Option<PlannedCommand> {
        let args: RunTestsArgs = serde_json::from_value(args.clone()).ok()?;
        let test = self.test_command(&args, workspace).ok()?;
        Some(PlannedCommand {
            command: test.command,
            cwd: test.cwd,
        })
    }

    async fn run(&self, args: RunTestsArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let test = self.test_command(&args, &ctx.workspace)?;
        // Tests build and write caches: they run under the workspace-write sandbox even in a
        // read-only phase (whether run_tests may run at all is the phase policy's call). A
        // test command that only reads (a project's `test_command = "git status"`) needs no
        // writes and runs read-only, without the network: what a repository's git
        // configuration runs behind it must not write (red-team pass 7, R7-25).
        let reads = CommandSafety::new()
            .classify_test_run(&test.command, &test.cwd, &ctx.workspace)
            .is_read_only();
        let policy = match ctx.sandbox {
            SandboxPolicy::Off => SandboxPolicy::Off,
            _ if reads => self.settings.policy_for(SandboxPolicy::ReadOnly),
            _ => self.settings.policy_for(SandboxPolicy::WorkspaceWrite),
        };
        let mut req = ExecRequest::with_roots(
            vec![
                exec::shell_program().into_os_string(),
                OsString::from("-c"),
                OsString::from(&test.command),
            ],
            &test.cwd,
            // Judged by the command it resolves to before it runs (the approval policy).
            self.settings.approved_roots(ctx),
        );
        if reads {
            req.roots.network = false;
        }
        req.timeout = self.settings.test_timeout;
        // As for run_command: only an approval of a line that changes installed
        // dependencies lifts their protections (R9-13).
        req.approved = ctx.approved
            && !CommandSafety::new()
                .classify_test_run(&test.command, &test.cwd, &ctx.workspace)
                .changes_installed
                .is_empty();
        req.policy = policy;
        req.env_keep = self.settings.env_keep.clone();
        req.cancel = ctx.cancel.clone();
        let out = exec::run(req)
            .await
            .map_err(|e| ToolError::model(format!("`{}` could not start: {e}", test.command)))?;
        let quarantined = out.quarantined.clone();
        if out.ending == Ending::Cancelled {
            return Err(ToolError::model("the tests were cancelled by the user"));
        }
        let combined = out.combined_text();
        let summary = summarize(test.runner, &combined);
        let where_ = ctx.workspace.relative(&test.cwd);
        let location = if where_ == "." {
            String::new()
        } else {
            format!(" in {where_}")
        };
        let status = match out.ending {
            Ending::Exited(c) => format!("exit code {c}"),
            Ending::Signalled(s) => format!("killed by signal {s}"),
            Ending::TimedOut => format!(
                "timed out after {} s, processes killed",
                self.settings.test_timeout.as_secs()
            ),
            Ending::Cancelled => "cancelled".into(),
        };
        let mut text = String::new();
        if policy != SandboxPolicy::Off
            && let Some(notice) = sandbox::take_unavailable_notice()
        {
            text.push_str(&notice);
            text.push('\n');
        }
        let passed = out.success() && summary.failed == 0;
        let headline = match (summary.counted, passed) {
            (true, _) => format!(
                "{}: {} passed, {} failed, {} skipped ({status}) — `{}`{location}",
                test.runner.label(),
                summary.passed,
                summary.failed,
                summary.skipped,
                test.command
            ),
            (false, true) => format!(
                "{}: no test counts found ({status}) — `{}`{location}",
                test.runner.label(),
                test.command
            ),
            (false, false) => format!(
                "{}: FAILED — the tests did not run to a result ({status}, no test counts) — `{}`{location}",
                test.runner.label(),
                test.command
            ),
        };
        text.push_str(&headline);
        // Up to the safety cap: the engine fits the result to its budget and keeps the rest.
        let budget = crate::text::OUTPUT_CAP_CHARS;
        if args.verbose.unwrap_or(false) {
            text.push_str("\n\n");
            text.push_str(&crate::text::truncate_middle(&combined, budget));
        } else if let Some(first) = &summary.first_failure
            && (summary.failed > 0 || !out.success())
        {
            text.push_str("\n\nFirst failure:\n");
            text.push_str(&crate::text::truncate_middle(first, budget));
        } else if !out.success() {
            // No recognisable failure section: the end of the output says most.
            text.push_str("\n\nOutput:\n");
            text.push_str(&crate::text::truncate_middle(&combined, budget));
        }
        if !out.success()
            && let Some(hint) = super::missing::missing_program_hint(out.exit_code(), &combined)
        {
            text.push_str("\n\n");
            text.push_str(&hint);
        }
        if let Some(report) = &quarantined {
            text.push_str("\n\n");
            text.push_str(report);
        }
        let output = ToolOutput::text(text)
            .with_exit_code(out.exit_code())
            .with_output_tail(&combined)
            .with_metadata(serde_json::json!({
                "runner": test.runner,
                "command": test.command,
                "cwd": where_,
                "passed": summary.passed,
                "failed": summary.failed,
                "skipped": summary.skipped,
                "counted": summary.counted,
                "sandbox": policy.as_str(),
                "status": if passed { "passed" } else { "failed" },
            }));
        // A failure keeps its details (exit code, output tail, counts): the renderers show
        // them under the ✗.
        if passed {
            Ok(output)
        } else {
            Err(ToolError::failed(output))
        }
    }
}
