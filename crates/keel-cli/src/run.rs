//! `keel run`.

use std::sync::Arc;

use anyhow::Context;
use keel_engine::config::Layer;
use keel_engine::{EngineBuilder, EventSink, RunOptions};
use keel_protocol::{ErrorCode, SessionStatus};
use tokio_util::sync::CancellationToken;

use crate::render::{Human, JsonLines, stdout_color};
use crate::{RunArgs, exit, input, setup};

/// The exit code for a run's final status.
pub fn exit_code(status: SessionStatus) -> u8 {
    match status {
        SessionStatus::Completed => exit::COMPLETED,
        SessionStatus::Blocked => exit::BLOCKED,
        SessionStatus::Cancelled => exit::CANCELLED,
        SessionStatus::Failed
        | SessionStatus::MaxSteps
        | SessionStatus::Running
        | SessionStatus::Idle => exit::FAILED,
    }
}

pub fn execute(args: RunArgs) -> anyhow::Result<u8> {
    let mut workspace = setup::workspace_dir(args.common.workspace.as_deref())?;
    let task = input::task_text(&args.task, args.resume.is_some())?;
    if task.trim().is_empty() && args.resume.is_none() {
        return Err(setup::UsageError(
            "the task is empty; say what the agent should do: keel run \"TASK\", or pipe it in: echo \"TASK\" | keel run -".into(),
        )
        .into());
    }
    let mut mode = args.mode.map(|m| m.as_str().to_string());
    if let Some(session) = &args.resume {
        let record = setup::session_record(&workspace, session)?;
        if args.common.workspace.is_none() {
            // A resumed session runs where it started…
            workspace = setup::session_workspace(&record)?;
        }
        // …and in the mode it started in.
        mode.get_or_insert(record.mode);
    }
    let task = input::attach_mentioned_files(&task, &workspace)?;
    let mut overrides = setup::llm_overrides(&args.llm);
    if let Some(m) = mode {
        overrides.push(("agent.mode", toml::Value::String(m)));
    }
    if let Some(n) = args.max_iterations {
        overrides.push(("agent.max_iterations", toml::Value::Integer(i64::from(n))));
    }
    let config = setup::load_config(&workspace, Layer::from_overrides(&overrides))?;
    let providers = setup::providers(&config, &workspace)?;
    let store = setup::open_store(&config)?;

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async move {
        let engine = providers
            .attach(EngineBuilder::new(config, &workspace).store(store))
            .build()?;
        let sink: Arc<dyn EventSink> = if args.json {
            Arc::new(JsonLines)
        } else {
            Arc::new(Human::new(stdout_color(), true))
        };
        let cancel = CancellationToken::new();
        watch_ctrl_c(cancel.clone());
        let options = RunOptions {
            sinks: vec![sink],
            cancel,
            ..RunOptions::default()
        };
        let outcome = match &args.resume {
            Some(session) => engine
                .continue_session(session, &task, options)
                .await
                .map_err(setup::engine_usage_error)?,
            None => engine.run(&task, options).await?,
        };
        // A provider that refuses the key or does not know the model is a configuration
        // error: exit 2, as for any other (README).
        if outcome
            .error
            .as_ref()
            .is_some_and(|e| e.error_code == ErrorCode::ConfigError)
        {
            return Ok(exit::USAGE);
        }
        Ok(exit_code(outcome.status))
    })
}

/// First Ctrl-C cancels the turn cleanly; a second one quits at once.
fn watch_ctrl_c(cancel: CancellationToken) {
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_err() {
            return;
        }
        eprintln!("\nkeel: cancelling the turn… (press Ctrl-C again to quit now)");
        cancel.cancel();
        if tokio::signal::ctrl_c().await.is_ok() {
            std::process::exit(i32::from(exit::CANCELLED));
        }
    });
}
