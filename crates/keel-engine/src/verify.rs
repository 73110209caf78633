//! Final verification and self-correction (K1.2).
//!
//! When the model answers without tool calls it claims to be done. Before the run counts as
//! completed, the configured gates run (`[verify] commands`; unset means the detected ones:
//! the project's test command, plus lint), followed by the constitution's `required_gates`
//! (`.keel/constitution.json`), which run whatever `[verify] commands` says and are marked
//! `required` in their events. Every gate that fails is reported back to the
//! model, which gets up to `agent.self_correction_cap` more rounds to fix it; after that the
//! run fails with the gate output (`verification_failed`). Each gate run is a `verification`
//! event.
//!
//! Gate detection is pluggable ([`GateDetector`]): the engine does not know how to find a
//! project's test command; keel-tools' detection is connected through
//! [`crate::EngineBuilder::gate_detector`].

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use keel_protocol::{ErrorCode, EventKind, Message, ToolCall};
use keel_tools::ToolEffect;
use keel_tools::shell::{CommandSafety, SafetyClass};

use crate::ending::Failure;
use crate::ending::{Ending, Interrupt};
use crate::process::{CommandSpec, run_command_with_timeout};
use crate::run::Run;
use keel_phase::CommandAccess;

/// Characters of a gate's output kept in its `verification` event.
const EVENT_OUTPUT_CHARS: usize = 8_000;
/// At least this many characters of a failing gate's output reach the model.
const MIN_FEEDBACK_CHARS: usize = 2_000;

/// One verification gate: a shell command that must exit 0.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gate {
    /// A short name for events and feedback (`tests`, `lint`, or the command itself).
    pub name: String,
    /// The shell command, run in the workspace root.
    pub command: String,
}

impl Gate {
    /// A gate named after its command.
    pub fn command(command: impl Into<String>) -> Self {
        let command = command.into();
        Self {
            name: command.clone(),
            command,
        }
    }
}

/// Finds a project's default gates (its test command, plus lint) when `[verify] commands` is
/// unset.
pub trait GateDetector: Send + Sync {
    /// The gates for the project at `workspace`, in the order they should run.
    fn detect(&self, workspace: &Path) -> Vec<Gate>;
}

impl<F: Fn(&Path) -> Vec<Gate> + Send + Sync> GateDetector for F {
    fn detect(&self, workspace: &Path) -> Vec<Gate> {
        self(workspace)
    }
}

/// A detector that finds nothing: with it and no `[verify] commands`, a run completes when the
/// model says it is done (the engine's default is [`crate::gates::ProjectGates`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoDetectedGates;

impl GateDetector for NoDetectedGates {
    fn detect(&self, _workspace: &Path) -> Vec<Gate> {
        Vec::new()
    }
}

/// A shared [`GateDetector`].
pub type SharedGateDetector = Arc<dyn GateDetector>;

/// The outcome of one gate run.
#[derive(Debug, Clone, PartialEq)]
pub struct GateResult {
    pub gate: Gate,
    /// Required by the repository constitution.
    pub required: bool,
    pub passed: bool,
    /// How it ended (`exit code 1`, `timed out after 600 s and was killed`).
    pub status: String,
    /// stdout and stderr.
    pub output: String,
    pub exit_code: Option<i32>,
    pub duration: Duration,
}

/// What the engine asked the model to do again, so that a model failure during it names the
/// cause first (the gate that failed, or the failure a recovery attempt retries).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Retrying {
    /// A correction round after failing gates.
    Correction {
        round: u32,
        cap: u32,
        /// One line per failing gate: name, command, how it ended, the output's last lines.
        gates: Vec<String>,
        /// What the sandbox had to do with it, when the output says so.
        sandbox: Option<String>,
        /// The failing gates' output (for `original_error`).
        output: String,
    },
    /// A recovery attempt after a failure.
    Recovery { attempt: u32, after: String },
}

impl Retrying {
    /// The failure of a model request made while retrying this: the cause first.
    pub(crate) fn explain(&self, model: Failure) -> Failure {
        match self {
            Retrying::Correction {
                round,
                cap,
                gates,
                sandbox,
                output,
            } => {
                let mut f = Failure::new(
                    ErrorCode::VerificationFailed,
                    format!(
                        "{}{}; Keel asked the model to fix it (correction round {round} of {cap}), and then the model failed: {}",
                        gates.join("; "),
                        sandbox
                            .as_deref()
                            .map(|s| format!(" — {s}"))
                            .unwrap_or_default(),
                        model.message
                    ),
                )
                .with_original(format!(
                    "{output}\n\n{}",
                    model.original.as_deref().unwrap_or(&model.message)
                ));
                if sandbox.is_some() {
                    f = f.with_hint(
                        "the gate failed because of the sandbox, not the code: give the tool a writable or existing home (`[shell] writable`, or set its *_HOME variable), or set `[verify] commands`",
                    );
                }
                f.hints.extend(model.hints);
                f
            }
            Retrying::Recovery { attempt, after } => {
                let mut f = model;
                f.message = format!(
                    "{} (during recovery attempt {attempt}, which retried after: {after})",
                    f.message
                );
                f
            }
        }
    }
}

/// Lines of a failing gate's output quoted in an error message.
const ERROR_TAIL_LINES: usize = 3;

/// `gate `tests` (`cargo test`) failed with exit code 1: <last lines>`.
/// Why `gate` needs the approval policy's word, if it does: like `run_tests`, a gate is judged
/// by what its command runs in the workspace at `root` (the package.json script behind `npm
/// run lint`, the Makefile recipe, the shell script — files the model or the repository may
/// have written), and one that does more than build and check (deletes, reaches the network,
/// cannot be judged) is asked about like any such command. The tests gate is judged whole
/// (Keel detected its command); another gate only for what its line reads from the
/// repository. Test runners and checkers
/// (`cargo test`, `pytest`, `tsc`) running the project's code count as building: the kernel
/// sandbox confines them.
pub fn gate_does_more_than_check(gate: &Gate, root: &Path) -> Option<String> {
    let analysis = CommandSafety::new().classify_test_run(&gate.command, root, root);
    if matches!(
        analysis.class,
        SafetyClass::ReadOnly | SafetyClass::WritesWorkspace
    ) {
        return None;
    }
    // Another gate's command line is the user's own (`[verify] commands` in their config; a
    // project's are asked about anyway) or Keel's (`tsc --noEmit`): only what it reads from
    // the repository makes it ask.
    if gate.name != "tests" && analysis.sources.is_empty() {
        return None;
    }
    let files: Vec<String> = analysis
        .sources
        .iter()
        .map(|s| s.path.display().to_string())
        .collect();
    let what = if gate.name == "tests" {
        "the test command".to_string()
    } else {
        format!("the {} gate", gate.name)
    };
    Some(if files.is_empty() {
        format!("{what} is {}", analysis.class)
    } else {
        format!(
            "{what} runs {}, which is {}",
            files.join(", "),
            analysis.class
        )
    })
}

fn gate_line(r: &GateResult) -> String {
    let tail: Vec<&str> = r
        .output
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let start = tail.len().saturating_sub(ERROR_TAIL_LINES);
    let tail = keel_tools::text::truncate_middle(&tail[start..].join(" / "), 400);
    let mut what = if r.gate.name == r.gate.command {
        format!("verification gate `{}`", r.gate.command)
    } else {
        format!("verification gate `{}` (`{}`)", r.gate.name, r.gate.command)
    };
    if r.required {
        what.push_str(" (required by the constitution)");
    }
    if tail.is_empty() {
        format!("{what} failed ({})", r.status)
    } else {
        format!("{what} failed ({}): {tail}", r.status)
    }
}

/// When a gate's output shows the sandbox refusing a write outside the workspace (a tool's
/// home directory under a fresh or read-only `HOME`), says so.
pub(crate) fn sandbox_cause(output: &str, workspace: &Path) -> Option<String> {
    let line = output.lines().find(|l| {
        l.contains("Permission denied")
            || l.contains("Read-only file system")
            || l.contains("Operation not permitted")
    })?;
    // The path the command could not write: the first quoted or absolute one on the line.
    let path = line
        .split(['\'', '"', '`', ' ', '(', ')'])
        .map(|w| w.trim_end_matches([':', ',']))
        .find(|w| w.starts_with('/'))
        .map(str::to_string);
    match path {
        Some(p) if Path::new(&p).starts_with(workspace) => None,
        Some(p) => Some(format!(
            "the sandbox caused this: commands may write only inside the workspace, their temp directory and `[shell] writable`, and `{p}` is outside them"
        )),
        None => Some(
            "the sandbox may have caused this: a write was refused (commands may write only inside the workspace, their temp directory and `[shell] writable`)"
                .to_string(),
        ),
    }
}

/// The message that hands failing gates back to the model.
pub fn feedback(failed: &[&GateResult], round: u32, cap: u32, max_chars: usize) -> String {
    let budget = max_chars.max(MIN_FEEDBACK_CHARS);
    let mut out = format!(
        "Final verification failed (round {round}; {} more correction round(s) allowed). Fix what the gates report, check it, then reply with a short summary when done.\n",
        cap.saturating_sub(round)
    );
    for r in failed {
        out.push_str(&format!(
            "\n## Gate `{}`{} ({})\n$ {}\n{}\n",
            r.gate.name,
            if r.required {
                format!(
                    " (required by {})",
                    keel_knowledge::constitution::CONSTITUTION_FILE
                )
            } else {
                String::new()
            },
            r.status,
            r.gate.command,
            keel_tools::text::truncate_middle(r.output.trim_end(), budget)
        ));
    }
    out
}

impl Run<'_> {
    /// A failed model request as the run's failure: when the engine was retrying something
    /// (a correction round after a failing gate, a recovery attempt), that comes first.
    pub(crate) fn model_failure(&self, e: &keel_llm::LlmError) -> Failure {
        let f = Failure::from_llm(e);
        match &self.retrying {
            Some(r) => r.explain(f),
            None => f,
        }
    }

    /// The gates for this run: none when verification is off or (unless `verify.always`) when
    /// the run changed nothing; else `[verify] commands` or the detected gates.
    fn gates(&self) -> Vec<Gate> {
        let cfg = &self.engine.config.verify;
        if !cfg.enabled || (!cfg.always && !self.changed) {
            return Vec::new();
        }
        let mut gates = match &cfg.commands {
            Some(cmds) => cmds.iter().map(Gate::command).collect(),
            None => self
                .engine
                .gate_detector
                .detect(self.engine.workspace.root()),
        };
        // The constitution's required gates, after the others, each once.
        for command in &self.engine.constitution.required_gates {
            if !gates.iter().any(|g| g.command.trim() == command.trim()) {
                gates.push(Gate::command(command.trim()));
            }
        }
        gates
    }

    /// Which repository file chose `gate`, if one did: the project's `.keel/config.toml`
    /// (`[verify] commands`, or `[shell] test_command` behind the detected tests gate) or the
    /// constitution's `required_gates`. Such a gate is judged like any command before it runs.
    fn chosen_by_project(&self, gate: &Gate) -> Option<&'static str> {
        let config = &self.engine.config;
        if self.is_required(gate) {
            return Some(keel_knowledge::constitution::CONSTITUTION_FILE);
        }
        match &config.verify.commands {
            Some(cmds)
                if config.set_by_project("verify.commands")
                    && cmds.iter().any(|c| c.trim() == gate.command.trim()) =>
            {
                Some("the project's .keel/config.toml ([verify] commands)")
            }
            None if gate.name == "tests" && config.set_by_project("shell.test_command") => {
                Some("the project's .keel/config.toml ([shell] test_command)")
            }
            _ => None,
        }
    }

    /// Asks the session's approval policy about a gate the repository chose, as about the
    /// same command from the model (`run_command`): allowed (read-only when it was allowed
    /// only because it only reads), asked (and waited for) or denied — denied when nobody can
    /// answer. `Err` is why it may not run.
    async fn approve_gate(
        &mut self,
        gate: &Gate,
        index: usize,
    ) -> Result<Result<CommandAccess, String>, Interrupt> {
        let Some(approvals) = self.approvals.clone() else {
            return Ok(Ok(CommandAccess::Write));
        };
        let call = ToolCall {
            id: format!(
                "gate-{}-{}-{index}",
                self.iterations,
                self.verify_failures + 1
            ),
            name: "run_command".into(),
            arguments: serde_json::json!({ "command": gate.command }),
        };
        Ok(approvals
            .check(
                &call,
                &self.engine.tools,
                &self.engine.workspace,
                self.emitter,
                &self.ctx.cancel,
            )
            .await?)
    }

    /// Why a gate needs the approval policy's word because of what it runs
    /// ([`gate_does_more_than_check`]).
    fn does_more_than_test(&self, gate: &Gate) -> Option<String> {
        gate_does_more_than_check(gate, self.engine.workspace.root())
    }

    /// Whether the constitution requires `gate`.
    fn is_required(&self, gate: &Gate) -> bool {
        self.engine
            .constitution
            .required_gates
            .iter()
            .any(|c| c.trim() == gate.command.trim())
    }

    /// Notes that a call succeeded: files it wrote, and whether it changed anything (which
    /// makes final verification run).
    pub(crate) fn note_change(&mut self, call: &ToolCall, details: &keel_protocol::ToolDetails) {
        let effect = self.engine.tools.get(&call.name).map(|t| t.effect());
        if matches!(
            effect,
            Some(ToolEffect::WritesFiles | ToolEffect::RunsCommands)
        ) {
            self.changed = true;
        }
        self.files.extend(details.files.iter().cloned());
    }

    /// The verification hook at the finish (after the other hooks let the answer stand): the
    /// gates run, and a failure either goes back to the model (`None`: keep looping) or, past
    /// the cap, fails the run.
    pub(crate) async fn finish(&mut self, text: &str) -> Result<Option<Ending>, Interrupt> {
        let gates = self.gates();
        if gates.is_empty() {
            return Ok(Some(Ending::Completed(text.to_string())));
        }
        let round = self.verify_failures + 1;
        let timeout = Duration::from_secs(self.engine.config.verify.timeout_secs);
        let mut results = Vec::with_capacity(gates.len());
        let shell = self.engine.config.shell.tool_settings();
        for (index, gate) in gates.into_iter().enumerate() {
            let source = self
                .chosen_by_project(&gate)
                .map(|source| format!("the gate was set by {source}"))
                .or_else(|| self.does_more_than_test(&gate));
            let approved = match source {
                Some(source) => self
                    .approve_gate(&gate, index)
                    .await?
                    .map_err(|why| (why, source)),
                None => Ok(CommandAccess::Write),
            };
            let access = match approved {
                Ok(access) => access,
                Err((why, source)) => {
                    let output = format!("{why} ({source})");
                    self.emitter
                        .emit(EventKind::Verification {
                            gate: gate.name.clone(),
                            passed: false,
                            output: output.clone(),
                            attempt: round,
                            exit_code: None,
                            duration_ms: 0,
                            required: self.is_required(&gate),
                        })
                        .await?;
                    // The model cannot fix a refusal: the run ends here, unverified.
                    return Ok(Some(Ending::Failed(
                    Failure::new(
                        ErrorCode::VerificationFailed,
                        format!("verification gate `{}` was not run: {output}", gate.name),
                    )
                    .with_hint(
                        "approve the gate when asked (an interactive session or --approval never), or set [verify] commands in your own config",
                    ),
                )));
                }
            };
            // Gates run repository code (a test script): confined like the model's commands;
            // a gate allowed only because it reads runs read-only.
            let mut spec = CommandSpec::shell(&gate.command, self.engine.workspace.root(), timeout)
                .with_shell(&shell);
            if access == CommandAccess::ReadOnly {
                spec.policy = keel_tools::sandbox::SandboxPolicy::ReadOnly;
            }
            let out = match run_command_with_timeout(&spec, &self.ctx.cancel).await {
                Ok(out) => out,
                Err(e) => {
                    return Ok(Some(Ending::Failed(
                        Failure::new(
                            ErrorCode::ConfigError,
                            format!("verification gate `{}` could not run: {e}", gate.name),
                        )
                        .with_hint("check `[verify] commands` and that a shell is available"),
                    )));
                }
            };
            if out.cancelled {
                return Err(Interrupt::Cancelled);
            }
            let result = GateResult {
                required: self.is_required(&gate),
                passed: out.success(),
                status: out.status_line(timeout),
                output: out.combined(),
                exit_code: out.exit_code,
                duration: out.duration,
                gate,
            };
            self.emitter
                .emit(EventKind::Verification {
                    gate: result.gate.name.clone(),
                    passed: result.passed,
                    output: keel_tools::text::truncate_middle(&result.output, EVENT_OUTPUT_CHARS),
                    attempt: round,
                    exit_code: result.exit_code,
                    duration_ms: result.duration.as_millis() as u64,
                    required: result.required,
                })
                .await?;
            results.push(result);
        }
        let failed: Vec<&GateResult> = results.iter().filter(|r| !r.passed).collect();
        if failed.is_empty() {
            self.retrying = None;
            return Ok(Some(Ending::Completed(text.to_string())));
        }
        let root = self.engine.workspace.root();
        let sandbox = failed.iter().find_map(|r| sandbox_cause(&r.output, root));
        let cap = self.engine.config.agent.self_correction_cap;
        if self.verify_failures >= cap {
            let names: Vec<String> = failed
                .iter()
                .map(|r| {
                    if r.required {
                        format!("`{}` (required by the constitution)", r.gate.name)
                    } else {
                        format!("`{}`", r.gate.name)
                    }
                })
                .collect();
            let output: String = failed
                .iter()
                .map(|r| {
                    format!(
                        "$ {} ({})\n{}",
                        r.gate.command,
                        r.status,
                        keel_tools::text::truncate_middle(&r.output, EVENT_OUTPUT_CHARS)
                    )
                })
                .collect::<Vec<_>>()
                .join("\n\n");
            let lines: Vec<String> = failed.iter().map(|r| gate_line(r)).collect();
            let mut f = Failure::new(
                ErrorCode::VerificationFailed,
                format!(
                    "{}{} — still failing after {cap} self-correction round{}",
                    lines.join("; "),
                    sandbox
                        .as_deref()
                        .map(|s| format!(" — {s}"))
                        .unwrap_or_default(),
                    if cap == 1 { "" } else { "s" }
                ),
            )
            .with_original(output);
            if names.len() > 1 {
                f = f.with_hint(format!("failing gates: {}", names.join(", ")));
            }
            return Ok(Some(Ending::Failed(f)));
        }
        self.verify_failures += 1;
        self.retrying = Some(Retrying::Correction {
            round,
            cap,
            gates: failed.iter().map(|r| gate_line(r)).collect(),
            sandbox,
            output: failed
                .iter()
                .map(|r| {
                    format!(
                        "$ {} ({})\n{}",
                        r.gate.command,
                        r.status,
                        keel_tools::text::truncate_middle(&r.output, EVENT_OUTPUT_CHARS)
                    )
                })
                .collect::<Vec<_>>()
                .join("\n\n"),
        });
        let message = feedback(&failed, round, cap, self.output_budget());
        self.push_message(Message::user_text(message)).await?;
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn feedback_names_each_failing_gate_with_its_output() {
        let r = GateResult {
            gate: Gate::command("cargo test"),
            required: false,
            passed: false,
            status: "exit code 101".into(),
            output: "test parses ... FAILED\nassertion failed: left == right".into(),
            exit_code: Some(101),
            duration: Duration::from_millis(5),
        };
        let text = feedback(&[&r], 1, 3, 4_000);
        assert!(
            text.contains("round 1; 2 more correction round(s) allowed"),
            "{text}"
        );
        assert!(text.contains("## Gate `cargo test` (exit code 101)"));
        assert!(text.contains("assertion failed"));
        let required = GateResult {
            required: true,
            ..r.clone()
        };
        let text = feedback(&[&required], 1, 3, 4_000);
        assert!(
            text.contains(
                "## Gate `cargo test` (required by .keel/constitution.json) (exit code 101)"
            ),
            "{text}"
        );
        let last = feedback(&[&r], 3, 3, 4_000);
        assert!(last.contains("0 more"), "{last}");
    }

    #[test]
    fn a_refused_write_outside_the_workspace_is_blamed_on_the_sandbox() {
        let ws = Path::new("/work/repo");
        let home = "error: could not create home directory: '/tmp/h/.rustup': Permission denied (os error 13)";
        let why = sandbox_cause(home, ws).unwrap_or_default();
        assert!(why.contains("`/tmp/h/.rustup` is outside"), "{why}");
        // Inside the workspace it is the repository's own problem.
        assert_eq!(
            sandbox_cause("cannot open /work/repo/x: Permission denied", ws),
            None
        );
        assert!(sandbox_cause("touch: Read-only file system", ws).is_some());
        assert_eq!(sandbox_cause("test failed: 1 != 2", ws), None);
    }

    #[test]
    fn detectors_can_be_closures() {
        let d = |p: &Path| vec![Gate::command(format!("test -d {}", p.display()))];
        let gates = GateDetector::detect(&d, Path::new("/w"));
        assert_eq!(gates[0].command, "test -d /w");
        assert!(NoDetectedGates.detect(Path::new("/w")).is_empty());
    }
}
