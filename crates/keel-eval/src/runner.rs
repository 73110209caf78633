//! Running a suite: each task in a fresh workspace, as a normal session built by the runtime's
//! [`SessionBuilder`] (so it is stored and `keel sessions --all` lists it), N tasks at a time;
//! then the task's check command, confined by the same process runner as verification gates.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use keel_protocol::Op;
use keel_store::eval::EvalTaskResult;
use tokio_util::sync::CancellationToken;

use crate::suite::{EvalTask, Suite};
use crate::workspace;
use keel_engine::runtime::{OpAck, SessionBuilder, SessionHandle, SessionOverrides};
use keel_tools::shell::harness::{CommandSpec, run_command_with_timeout};

/// How a suite runs.
#[derive(Debug, Clone)]
pub struct EvalOptions {
    /// Tasks at a time (at least 1).
    pub jobs: usize,
    /// Provider flags, over each task's own settings (script, step cap).
    pub overrides: SessionOverrides,
    /// Where the task workspaces are created (one directory per task id).
    pub work_root: PathBuf,
}

/// What a suite run produced.
#[derive(Debug, Clone)]
pub struct EvalOutcome {
    /// In suite order.
    pub results: Vec<EvalTaskResult>,
    /// The provider and model the sessions ran with (from the first stored session).
    pub provider: String,
    pub model: String,
}

/// Called as each task finishes: (its index in the suite, its result).
pub type Progress = Arc<dyn Fn(usize, &EvalTaskResult) + Send + Sync>;

/// Lines of check output kept in a result.
const TAIL_LINES: usize = 15;
const TAIL_CHARS: usize = 2_000;

/// The last lines of `text` (at most [`TAIL_LINES`] and about [`TAIL_CHARS`] characters).
pub fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.trim_end().lines().collect();
    let start = lines.len().saturating_sub(TAIL_LINES);
    let joined = lines[start..].join("\n");
    let count = joined.chars().count();
    if count <= TAIL_CHARS {
        joined
    } else {
        let skip = count - TAIL_CHARS;
        format!("…{}", joined.chars().skip(skip).collect::<String>())
    }
}

/// A task's session settings: its script (only when no flag chooses another provider or
/// script) and step cap, under the flags.
pub fn task_overrides(task: &EvalTask, flags: &SessionOverrides) -> SessionOverrides {
    let scripted = flags.script.is_none()
        && flags
            .provider
            .as_deref()
            .is_none_or(|p| p.eq_ignore_ascii_case("scripted"));
    let own = SessionOverrides {
        script: if scripted { task.script.clone() } else { None },
        max_iterations: task.max_steps,
        ..SessionOverrides::default()
    };
    own.with(flags)
}

/// Runs every task of `suite`, `opts.jobs` at a time, and returns their results in suite
/// order. A task that cannot run (workspace, provider) fails with the reason; the others run.
pub async fn run_suite(
    builder: &SessionBuilder,
    suite: &Suite,
    opts: &EvalOptions,
    progress: Progress,
) -> EvalOutcome {
    let jobs = opts.jobs.max(1);
    let mut results: Vec<(usize, EvalTaskResult)> =
        futures::stream::iter(suite.tasks.iter().enumerate())
            .map(|(i, task)| {
                let progress = progress.clone();
                async move {
                    let result = run_task(builder, task, opts).await;
                    progress(i, &result);
                    (i, result)
                }
            })
            .buffer_unordered(jobs)
            .collect()
            .await;
    results.sort_by_key(|(i, _)| *i);
    let results: Vec<EvalTaskResult> = results.into_iter().map(|(_, r)| r).collect();
    let (mut provider, mut model) = (String::new(), String::new());
    for r in results.iter().filter(|r| !r.session_id.is_empty()) {
        if let Ok(record) = builder.store().get_session(&r.session_id).await {
            provider = record.provider;
            model = record.model;
            break;
        }
    }
    EvalOutcome {
        results,
        provider,
        model,
    }
}

fn failed(task: &EvalTask, started: Instant, error: String) -> EvalTaskResult {
    EvalTaskResult {
        id: task.id.clone(),
        success: false,
        status: "error".into(),
        wall_ms: started.elapsed().as_millis() as u64,
        error,
        ..EvalTaskResult::default()
    }
}

/// Runs one task: workspace, session, check.
pub async fn run_task(
    builder: &SessionBuilder,
    task: &EvalTask,
    opts: &EvalOptions,
) -> EvalTaskResult {
    let started = Instant::now();
    let dest = opts.work_root.join(&task.id);
    let source = task.source.clone();
    let target = dest.clone();
    let overrides = task_overrides(task, &opts.overrides);
    // The source directory's own `[snapshots] build_dirs` (else the defaults) say what not
    // to copy.
    let build_dirs = match &task.source {
        crate::suite::Source::Dir { base, rel } => builder
            .config(&base.join(rel), &overrides)
            .map(|c| c.snapshots.build_dirs())
            .unwrap_or_default(),
        crate::suite::Source::Git { .. } | crate::suite::Source::LocalGit { .. } => {
            Default::default()
        }
    };
    let prepared = tokio::task::spawn_blocking(move || {
        if target.exists() {
            std::fs::remove_dir_all(&target)
                .map_err(|e| format!("cannot clear {}: {e}", target.display()))?;
        }
        workspace::prepare(&source, &target, &build_dirs)?;
        target
            .canonicalize()
            .map_err(|e| format!("cannot open {}: {e}", target.display()))
    })
    .await;
    let ws = match prepared {
        Ok(Ok(ws)) => ws,
        Ok(Err(e)) => return failed(task, started, format!("workspace: {e}")),
        Err(e) => return failed(task, started, format!("workspace: {e}")),
    };
    let engine = match builder.engine(&ws, &overrides) {
        Ok(engine) => Arc::new(engine),
        Err(e) => return failed(task, started, format!("session: {e}")),
    };
    let shell = engine.config().shell.tool_settings();
    let handle = match SessionHandle::create(engine, Vec::new()).await {
        Ok((handle, _)) => handle,
        Err(e) => return failed(task, started, format!("session: {e}")),
    };
    let session_id = handle.id().to_string();
    let ticket = match handle.submit(Op::user_message(task.task.clone())).await {
        Ok(OpAck::Turn(ticket)) => ticket,
        Ok(_) => {
            let mut r = failed(task, started, "the session did not start a turn".into());
            r.session_id = session_id;
            return r;
        }
        Err(e) => {
            let mut r = failed(task, started, format!("session: {e}"));
            r.session_id = session_id;
            return r;
        }
    };
    let finished = ticket.finished();
    tokio::pin!(finished);
    let mut error = String::new();
    let turn = tokio::select! {
        turn = &mut finished => turn,
        () = tokio::time::sleep(Duration::from_secs(task.timeout_secs)) => {
            error = format!("the run passed its timeout of {} s and was interrupted", task.timeout_secs);
            let _ = handle.submit(Op::Interrupt).await;
            finished.await
        }
    };
    handle.shutdown().await;
    let (steps, usage) = match &turn.outcome {
        Some(o) => (o.iterations, o.usage),
        None => (0, Default::default()),
    };
    if error.is_empty()
        && let Some(message) = turn
            .outcome
            .as_ref()
            .and_then(|o| o.error.as_ref())
            .map(|e| e.message.clone())
            .or(turn.message.clone())
    {
        error = message;
    }
    let (check_exit, check_ok, check_tail) = run_check(task, &ws, &shell).await;
    EvalTaskResult {
        id: task.id.clone(),
        success: check_ok,
        status: turn.status.as_str().to_string(),
        session_id,
        steps,
        input_tokens: usage.input_tokens,
        output_tokens: usage.output_tokens,
        cost_usd: usage.cost_usd,
        wall_ms: started.elapsed().as_millis() as u64,
        check_exit,
        check_tail,
        error,
    }
}

/// Runs the task's check in `ws`: (exit code, passed, output tail).
async fn run_check(
    task: &EvalTask,
    ws: &Path,
    shell: &keel_tools::shell::ShellSettings,
) -> (Option<i32>, bool, String) {
    let timeout = Duration::from_secs(task.check_timeout_secs);
    let spec = CommandSpec::shell(&task.check, ws, timeout).with_shell(shell);
    match run_command_with_timeout(&spec, &CancellationToken::new()).await {
        Ok(out) => {
            let mut text = tail(&out.combined());
            if !out.success() {
                let line = out.status_line(timeout);
                text = if text.is_empty() {
                    line
                } else {
                    format!("{text}\n({line})")
                };
            }
            (out.exit_code, out.success(), text)
        }
        Err(e) => (None, false, format!("the check could not run: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::suite::Source;

    fn task(script: Option<&str>) -> EvalTask {
        EvalTask {
            id: "t".into(),
            source: Source::Dir {
                base: PathBuf::from("/x"),
                rel: "fx".into(),
            },
            task: "t".into(),
            check: "true".into(),
            script: script.map(PathBuf::from),
            timeout_secs: 1,
            max_steps: Some(4),
            check_timeout_secs: 1,
        }
    }

    #[test]
    fn a_task_script_applies_unless_a_flag_picks_another_model() {
        let none = SessionOverrides::default();
        let o = task_overrides(&task(Some("/s.yaml")), &none);
        assert_eq!(o.script, Some(PathBuf::from("/s.yaml")));
        assert_eq!(o.max_iterations, Some(4));
        let openai = SessionOverrides {
            provider: Some("openai".into()),
            ..SessionOverrides::default()
        };
        assert_eq!(task_overrides(&task(Some("/s.yaml")), &openai).script, None);
        let script = SessionOverrides {
            script: Some(PathBuf::from("/other.yaml")),
            max_iterations: Some(9),
            ..SessionOverrides::default()
        };
        let o = task_overrides(&task(Some("/s.yaml")), &script);
        assert_eq!(o.script, Some(PathBuf::from("/other.yaml")));
        assert_eq!(o.max_iterations, Some(9));
    }

    #[test]
    fn tails_keep_the_end() {
        let text: String = (0..40).map(|i| format!("line {i}\n")).collect();
        let t = tail(&text);
        assert!(t.starts_with("line 25"), "{t}");
        assert!(t.ends_with("line 39"));
        let long = "x".repeat(5_000);
        assert_eq!(tail(&long).chars().count(), TAIL_CHARS + 1);
    }
}
