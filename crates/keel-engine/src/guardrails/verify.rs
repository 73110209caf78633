//! Final verification as a hook: when the model says it is done, the gates run
//! (`crate::verify::GatePlan` says which); a failing gate goes back to the model for up to
//! `agent.self_correction_cap` correction rounds, after which the attempt fails with the gates'
//! output. The hook owns its run's share: whether the run changed anything (a successful write
//! or command, or subagents' edits — verification runs only then, unless `verify.always`), the
//! rounds that failed, and the round in progress (a model failure during it names the failing
//! gate first). A gate the repository chose, or one that would load test code the session
//! changed (`conftest.py`, `build.rs`: red-team pass 2, R21), is put to the session's approval
//! gate first, like the same command from the model (and `run_tests`).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use keel_phase::CommandAccess;
use keel_protocol::{ErrorCode, EventKind, ToolCall};
use keel_tools::shell::ShellSettings;
use keel_tools::{ToolEffect, ToolRegistry, Workspace};
use tokio_util::sync::CancellationToken;

use super::lock;
use crate::ending::Failure;
use crate::hooks::{Hook, HookAction, HookContext, HookEnd, ToolResultView};
use crate::verify::{
    EVENT_OUTPUT_CHARS, Gate, GatePlan, GateResult, feedback, gate_line, sandbox_cause,
};
use crate::{Emitter, EngineError};
use keel_approval::ApprovalGate;
use keel_tools::shell::harness::{CommandSpec, run_command_with_timeout};

/// A correction round in progress: what the model was asked to fix.
#[derive(Debug, Clone, PartialEq)]
struct Correction {
    round: u32,
    cap: u32,
    /// One line per failing gate: name, command, how it ended, the output's last lines.
    gates: Vec<String>,
    /// What the sandbox had to do with it, when the output says so.
    sandbox: Option<String>,
    /// The failing gates' output (for `original_error`).
    output: String,
}

impl Correction {
    /// The failure of a model request made during this round: the failing gates first.
    fn explain(&self, model: &Failure) -> Failure {
        let mut f = Failure::new(
            ErrorCode::VerificationFailed,
            format!(
                "{}{}; Keel asked the model to fix it (correction round {} of {}), and then the model failed: {}",
                self.gates.join("; "),
                self.sandbox
                    .as_deref()
                    .map(|s| format!(" — {s}"))
                    .unwrap_or_default(),
                self.round,
                self.cap,
                model.message
            ),
        )
        .with_original(format!(
            "{}\n\n{}",
            self.output,
            model.original.as_deref().unwrap_or(&model.message)
        ));
        if self.sandbox.is_some() {
            f = f.with_hint(
                "the gate failed because of the sandbox, not the code: give the tool a writable or existing home (`[shell] writable`, or set its *_HOME variable), or set `[verify] commands`",
            );
        }
        f.hints.extend(model.hints.iter().cloned());
        f
    }
}

#[derive(Default)]
struct State {
    /// A write or a command succeeded in this run (or subagents changed the workspace).
    changed: bool,
    /// Verification rounds that failed so far.
    failures: u32,
    /// The correction round the model is in, until the gates pass or a recovery starts.
    correction: Option<Correction>,
}

/// Final verification and its self-correction rounds, for one run.
pub(crate) struct VerifyHook {
    plan: GatePlan,
    /// `agent.self_correction_cap`.
    cap: u32,
    shell: ShellSettings,
    workspace: Workspace,
    tools: Arc<ToolRegistry>,
    /// Asked about gates the repository chose, when the session has a gate.
    approvals: Option<Arc<ApprovalGate>>,
    cancel: CancellationToken,
    state: Mutex<State>,
}

impl VerifyHook {
    pub(crate) fn new(
        plan: GatePlan,
        config: &keel_config::Config,
        workspace: Workspace,
        tools: Arc<ToolRegistry>,
        approvals: Option<Arc<ApprovalGate>>,
        cancel: CancellationToken,
    ) -> Self {
        Self {
            plan,
            cap: config.agent.self_correction_cap,
            shell: config.shell.tool_settings(),
            workspace,
            tools,
            approvals,
            cancel,
            state: Mutex::new(State::default()),
        }
    }

    /// Asks the session's approval policy about a gate the repository chose, as about the
    /// same command from the model (`run_command`): allowed (read-only when it was allowed
    /// only because it only reads), asked (and waited for) or denied — denied when nobody can
    /// answer. `Err` is why it may not run.
    async fn approve_gate(
        &self,
        cx: &HookContext,
        gate: &Gate,
        round: u32,
        index: usize,
    ) -> Result<Result<CommandAccess, String>, EngineError> {
        let Some(approvals) = &self.approvals else {
            return Ok(Ok(CommandAccess::Write));
        };
        let call = ToolCall {
            id: format!("gate-{}-{round}-{index}", cx.iteration),
            name: "run_command".into(),
            arguments: serde_json::json!({ "command": gate.command }),
        };
        approvals
            .check_gate(
                &call,
                &self.tools,
                &self.workspace,
                &cx.events,
                &self.cancel,
            )
            .await
    }

    /// The gates at the finish: `Continue` when they pass (or there are none), a note with
    /// their failures for another round, or the end of the attempt past the cap. A cancelled
    /// gate answers `Continue`: the loop sees the cancellation.
    async fn finish(&self, cx: &HookContext) -> Result<HookAction, EngineError> {
        let changed = lock(&self.state).changed;
        let gates = self.plan.gates(changed);
        if gates.is_empty() {
            return Ok(HookAction::Continue);
        }
        let round = lock(&self.state).failures + 1;
        let timeout = Duration::from_secs(self.plan.timeout_secs());
        let root = self.workspace.root();
        let events: &Emitter = &cx.events;
        // Gates run the project's tests and builds, which load test code the model may have
        // just written (`conftest.py`, `build.rs`): asked about as `run_tests` is (R21).
        let test_code = self
            .approvals
            .as_ref()
            .and_then(|a| a.gate_test_code_changed(&self.workspace));
        let mut results = Vec::with_capacity(gates.len());
        for (index, gate) in gates.into_iter().enumerate() {
            let source = self
                .plan
                .chosen_by_project(&gate)
                .map(|source| format!("the gate was set by {source}"))
                .or_else(|| crate::verify::gate_does_more_than_check(&gate, root))
                .or_else(|| {
                    test_code.as_ref().map(|files| {
                        format!("the gate runs test code changed in this session ({files})")
                    })
                });
            let source_judged = source.is_some();
            let approved = match source {
                Some(source) => self
                    .approve_gate(cx, &gate, round, index)
                    .await?
                    .map_err(|why| (why, source)),
                None => Ok(CommandAccess::Write),
            };
            if let Err((why, source)) = &approved {
                let output = format!("{why} ({source})");
                events
                    .emit(EventKind::Verification {
                        gate: gate.name.clone(),
                        passed: false,
                        output: output.clone(),
                        attempt: round,
                        exit_code: None,
                        duration_ms: 0,
                        required: self.plan.is_required(&gate),
                    })
                    .await?;
                // The model cannot fix a refusal: the run ends here, unverified.
                return Ok(fail(
                    Failure::new(
                        ErrorCode::VerificationFailed,
                        format!("verification gate `{}` was not run: {output}", gate.name),
                    )
                    .with_hint(
                        "approve the gate when asked (an interactive session or --approval never), or set [verify] commands in your own config",
                    ),
                ));
            }
            // Gates run repository code (a test script): confined like the model's commands;
            // a gate allowed only because it reads runs read-only.
            let mut spec = CommandSpec::shell(&gate.command, root, timeout).with_shell(&self.shell);
            if approved == Ok(CommandAccess::ReadOnly) {
                spec.policy = keel_tools::sandbox::SandboxPolicy::ReadOnly;
            }
            // The network only for a command line the approval policy judged or the user
            // configured; a detected gate runs repository code nobody approved (R4-10).
            spec.network =
                (source_judged && self.approvals.is_some()) || self.plan.chosen_by_user(&gate);
            let out = match run_command_with_timeout(&spec, &self.cancel).await {
                Ok(out) => out,
                Err(e) => {
                    return Ok(fail(
                        Failure::new(
                            ErrorCode::ConfigError,
                            format!("verification gate `{}` could not run: {e}", gate.name),
                        )
                        .with_hint("check `[verify] commands` and that a shell is available"),
                    ));
                }
            };
            if out.cancelled {
                return Ok(HookAction::Continue);
            }
            let result = GateResult {
                required: self.plan.is_required(&gate),
                passed: out.success(),
                status: out.status_line(timeout),
                output: out.combined(),
                exit_code: out.exit_code,
                duration: out.duration,
                gate,
            };
            events
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
            events.workspace_checks(root, None).await?;
            results.push(result);
        }
        let failed: Vec<&GateResult> = results.iter().filter(|r| !r.passed).collect();
        if failed.is_empty() {
            lock(&self.state).correction = None;
            return Ok(HookAction::Continue);
        }
        let sandbox = failed.iter().find_map(|r| sandbox_cause(&r.output, root));
        let cap = self.cap;
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
        let mut state = lock(&self.state);
        if state.failures >= cap {
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
            return Ok(fail(f));
        }
        state.failures += 1;
        state.correction = Some(Correction {
            round,
            cap,
            gates: lines,
            sandbox,
            output,
        });
        Ok(HookAction::Note(feedback(
            &failed,
            round,
            cap,
            cx.output_budget,
        )))
    }
}

/// The attempt ends with `failure` (at the finish: no calls left to tell).
fn fail(failure: Failure) -> HookAction {
    HookAction::End(HookEnd::failed(failure, ""))
}

impl Hook for VerifyHook {
    fn name(&self) -> &str {
        "verification"
    }

    fn after_tool<'a>(
        &'a self,
        _cx: &'a HookContext,
        call: &'a ToolCall,
        result: &'a ToolResultView,
    ) -> BoxFuture<'a, HookAction> {
        // A successful write or command, or subagents' edits, make final verification run.
        let effect = self.tools.get(&call.name).map(|t| t.effect());
        let wrote = !result.is_error
            && matches!(
                effect,
                Some(ToolEffect::WritesFiles | ToolEffect::RunsCommands)
            );
        if wrote || result.agents_changed {
            lock(&self.state).changed = true;
        }
        Box::pin(async { HookAction::Continue })
    }

    fn on_finish<'a>(&'a self, cx: &'a HookContext, _text: &'a str) -> BoxFuture<'a, HookAction> {
        Box::pin(async move {
            match self.finish(cx).await {
                Ok(action) => action,
                // The store could not record a gate's event or an approval: the run cannot
                // go on honestly (a later event would fail the same way).
                Err(e) => fail(Failure::new(
                    ErrorCode::InternalError,
                    format!("final verification could not record its events: {e}"),
                )),
            }
        })
    }

    fn recovery(&self, _cx: &HookContext) {
        // A recovery attempt is what the model is asked to do now.
        lock(&self.state).correction = None;
    }

    fn model_failed(&self, _cx: &HookContext, failure: &Failure) -> Option<Failure> {
        lock(&self.state)
            .correction
            .as_ref()
            .map(|c| c.explain(failure))
    }
}
