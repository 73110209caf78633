//! Rollback with validation after a phase fails (R19–R21).
//!
//! A phase may declare `validation_command` and `rollback_command` (opt-in, no defaults). When
//! a plan_exec run fails in a phase: the validation command runs; if it fails and a rollback
//! command is set, the rollback runs, then validation again. The phase's checkpoint may be
//! saved only if that second validation passes — or when no rollback is configured. Every
//! command run is recorded in the session log (`phase_validation`, `rollback_started`,
//! `rollback_completed`, `rollback_failed`).
//!
//! The commands come from the user's configuration and run through the one command runner
//! ([`keel_tools::shell::harness`]: the kernel sandbox, allowlisted environment, timeout, process-group
//! kill), not through the model's shell tool and its phase restrictions.

use std::path::Path;
use std::time::Duration;

use keel_protocol::EventKind;
use tokio_util::sync::CancellationToken;

use crate::{Emitter, EngineError};
use keel_phase::Phase;
use keel_tools::shell::harness::{CommandSpec, run_command_with_timeout};

/// Characters of a command's output kept in its event.
const OUTPUT_CHARS: usize = 4_000;

/// What failure handling did, and whether the phase's checkpoint may be saved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RollbackOutcome {
    /// No validation command: nothing to check.
    NotConfigured,
    /// Validation passed: the workspace is fine, no rollback needed.
    ValidationPassed,
    /// Validation failed and no rollback command is configured.
    NoRollback,
    /// Validation failed, the rollback ran and validation now passes.
    RolledBack,
    /// The rollback failed, or validation still fails after it. Why.
    RollbackFailed(String),
}

impl RollbackOutcome {
    /// R21: save the checkpoint only when the workspace validates after a rollback, or when no
    /// rollback was configured.
    pub fn saves_checkpoint(&self) -> bool {
        !matches!(self, RollbackOutcome::RollbackFailed(_))
    }
}

/// The commands and where and how long they run.
#[derive(Debug, Clone)]
pub struct RollbackPlan<'a> {
    pub phase: Phase,
    pub validation_command: Option<&'a str>,
    pub rollback_command: Option<&'a str>,
    pub cwd: &'a Path,
    pub timeout: Duration,
    /// The `[shell]` sandbox and environment settings the commands run under.
    pub shell: &'a keel_tools::shell::ShellSettings,
}

struct Ran {
    passed: bool,
    exit_code: Option<i32>,
    output: String,
    status: String,
    duration_ms: u64,
}

async fn run(command: &str, plan: &RollbackPlan<'_>, cancel: &CancellationToken) -> Ran {
    let mut spec = CommandSpec::shell(command, plan.cwd, plan.timeout).with_shell(plan.shell);
    // The user's own rollback (`git checkout -- .`) may update the index and refs; what makes
    // git run code (config, hooks) stays read-only.
    spec.git = keel_tools::sandbox::GitProtection::CodePaths;
    match run_command_with_timeout(&spec, cancel).await {
        Ok(out) => Ran {
            passed: out.success(),
            exit_code: out.exit_code,
            output: keel_tools::text::truncate_middle(&out.combined(), OUTPUT_CHARS),
            status: out.status_line(plan.timeout),
            duration_ms: out.duration.as_millis() as u64,
        },
        Err(e) => Ran {
            passed: false,
            exit_code: None,
            output: e.to_string(),
            status: "could not start".into(),
            duration_ms: 0,
        },
    }
}

async fn validate(
    command: &str,
    plan: &RollbackPlan<'_>,
    after_rollback: bool,
    emitter: &Emitter,
    cancel: &CancellationToken,
) -> Result<Ran, EngineError> {
    let ran = run(command, plan, cancel).await;
    emitter
        .emit(EventKind::PhaseValidation {
            phase: plan.phase.as_str().to_string(),
            command: command.to_string(),
            passed: ran.passed,
            exit_code: ran.exit_code,
            output: ran.output.clone(),
            duration_ms: ran.duration_ms,
            after_rollback,
        })
        .await?;
    Ok(ran)
}

/// Runs the validation → rollback → validation sequence for a failed phase and records each
/// command in the session log. Only the store failing is an `Err`.
pub async fn after_phase_failure(
    plan: &RollbackPlan<'_>,
    emitter: &Emitter,
    cancel: &CancellationToken,
) -> Result<RollbackOutcome, EngineError> {
    let Some(validation) = plan.validation_command else {
        return Ok(RollbackOutcome::NotConfigured);
    };
    if validate(validation, plan, false, emitter, cancel)
        .await?
        .passed
    {
        return Ok(RollbackOutcome::ValidationPassed);
    }
    let Some(rollback) = plan.rollback_command else {
        return Ok(RollbackOutcome::NoRollback);
    };
    let phase = plan.phase.as_str().to_string();
    emitter
        .emit(EventKind::RollbackStarted {
            phase: phase.clone(),
            command: rollback.to_string(),
        })
        .await?;
    let ran = run(rollback, plan, cancel).await;
    if !ran.passed {
        let reason = format!("the rollback command failed ({})", ran.status);
        emitter
            .emit(EventKind::RollbackFailed {
                phase,
                command: rollback.to_string(),
                reason: reason.clone(),
                exit_code: ran.exit_code,
                output: ran.output,
            })
            .await?;
        return Ok(RollbackOutcome::RollbackFailed(reason));
    }
    let check = validate(validation, plan, true, emitter, cancel).await?;
    if !check.passed {
        let reason = format!(
            "validation still fails after the rollback ({})",
            check.status
        );
        emitter
            .emit(EventKind::RollbackFailed {
                phase,
                command: rollback.to_string(),
                reason: reason.clone(),
                exit_code: ran.exit_code,
                output: ran.output,
            })
            .await?;
        return Ok(RollbackOutcome::RollbackFailed(reason));
    }
    emitter
        .emit(EventKind::RollbackCompleted {
            phase,
            command: rollback.to_string(),
            exit_code: ran.exit_code,
            output: ran.output,
            duration_ms: ran.duration_ms,
        })
        .await?;
    Ok(RollbackOutcome::RolledBack)
}
