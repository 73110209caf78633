//! `keel run`: one session handle, one user message, the turn's events rendered as they come.

use std::sync::Arc;

use anyhow::Context;
use keel_config::ApprovalPolicy;
use keel_engine::EventSink;
use keel_engine::approval::ApprovalGate;
use keel_engine::runtime::{OpAck, SessionHandle};
use keel_protocol::{ErrorCode, Op, SessionStatus};

use crate::args::RunArgs;
use crate::launch::{self, Launch, Resume};
use crate::render::{Human, JsonLines, stdout_color};
use crate::{exit, input, setup};

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
    let here = setup::workspace_dir(args.common.workspace.as_deref())?;
    let continuing = args.resume.is_some() || args.cont;
    let task = input::task_text(&args.task, continuing)?;
    if task.trim().is_empty() && !continuing {
        return Err(setup::UsageError(
            "the task is empty; say what the agent should do: keel run \"TASK\", or pipe it in: echo \"TASK\" | keel run -".into(),
        )
        .into());
    }
    // The flags, the session to continue, its configuration and store: one pass.
    let Launch {
        workspace,
        overrides,
        resumed,
        config,
        store,
        builder,
        shared: _config_read,
        ..
    } = Launch::open(
        here,
        args.common.workspace.is_some(),
        launch::overrides(&args.llm, args.mode, args.max_iterations),
        Resume::from_flags(args.resume.as_deref(), args.cont),
    )?;
    // One workspace handle for the whole run: the configuration, the attached files, the
    // instructions, the tools, the index and the rules hook all open the workspace, and each
    // open would list and look at every protected store again (issue 33). The handle the
    // configuration was read through (`Launch::open`), its fence now also holding the
    // session's store, registered as Keel's own since; opened afresh when a resumed session
    // runs elsewhere.
    let _shared = launch::share_workspace(&workspace);
    let resumed = resumed.map(|r| r.id);
    let (task, attached) = input::attach_mentioned_files(&task, &workspace)?;
    // Nobody can answer a headless run: a call that would ask is denied. The flag decides;
    // without it, the policy your configuration sets; else nothing asks.
    let policy = match (args.approval, config.approval_policy_set) {
        (Some(flag), _) => flag.policy(),
        (None, true) => config.approval.policy,
        (None, false) => ApprovalPolicy::Never,
    };
    let gate = Arc::new(ApprovalGate::from_config(&config, Some(policy), false));
    let engine = builder
        .engine_with(config, &workspace)
        .map_err(setup::engine_usage_error)?;
    if !attached.is_empty() {
        tell!("keel: attached {}", attached.join(", "));
    }
    if policy != ApprovalPolicy::Never {
        // Only when it matters: calls will be denied that would run otherwise.
        tell!("keel: approval policy: {}", approval_note(policy));
    }

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async move {
        // One running session per workspace: refused (or, with --wait, waited for) before
        // this run records anything.
        let mut said = false;
        while let Some(other) =
            keel_engine::workspace_busy(store.as_ref(), &workspace, resumed.as_deref())
                .await
                .map_err(setup::engine_usage_error)?
        {
            if !args.wait {
                tell!("keel: {}", keel_engine::workspace_busy_message(&other));
                return Ok(exit::BUSY);
            }
            if !said {
                tell!(
                    "keel: waiting for session {} to finish in this workspace…",
                    other.session_id
                );
                said = true;
            }
            tokio::select! {
                () = tokio::time::sleep(std::time::Duration::from_millis(500)) => {}
                _ = tokio::signal::ctrl_c() => return Ok(exit::CANCELLED),
            }
        }
        let sink: Arc<dyn EventSink> = if args.json {
            Arc::new(JsonLines)
        } else {
            Arc::new(
                Human::new(stdout_color(), true)
                    .with_spinner(crate::out::stdout_is_terminal()),
            )
        };
        // The session's MCP servers end with the run (one still starting included).
        let mcp = engine.mcp().map(|m| m.hub.clone());
        let engine = Arc::new(engine);
        let handle = match resumed {
            Some(id) => SessionHandle::new(engine, id, vec![sink]),
            None => SessionHandle::create(engine, vec![sink]).await?.0,
        };
        let mut handle = handle
            .rebuild_with(builder, &workspace, overrides)
            .approvals(gate);
        if args.wait {
            // Also when another run takes the workspace between the check above and now.
            handle = handle.wait_for_workspace();
        }
        let handle = Arc::new(handle);
        let ack = match handle.submit(Op::user_message(task)).await {
            Ok(ack) => ack,
            Err(keel_engine::runtime::OpError::WorkspaceBusy(other)) => {
                tell!("keel: {}", keel_engine::workspace_busy_message(&other));
                return Ok(exit::BUSY);
            }
            Err(e) => return Err(setup::op_usage_error(e)),
        };
        let OpAck::Turn(ticket) = ack else {
            anyhow::bail!("the session did not start a turn for the message");
        };
        watch_ctrl_c(handle.clone());
        let result = ticket.finished().await;
        if let Some(hub) = mcp {
            hub.shutdown().await;
        }
        // A provider that refuses the key or does not know the model is a configuration
        // error: exit 2, as for any other (README).
        if result
            .outcome
            .as_ref()
            .and_then(|o| o.error.as_ref())
            .is_some_and(|e| e.error_code == ErrorCode::ConfigError)
        {
            // A new session whose very first request was refused (a wrong key, an unknown
            // model) holds nothing worth keeping: it does not stay in `keel sessions`.
            let answered = result
                .events
                .iter()
                .any(|e| matches!(e.kind, keel_protocol::EventKind::AssistantMessage { .. }));
            if !continuing && !answered {
                let id = handle.id().to_string();
                handle.shutdown().await;
                if keel_store::Store::delete_session(store.as_ref(), &id)
                    .await
                    .is_ok()
                {
                    tell!(
                        "keel: nothing ran, so session {id} was not kept; fix the setting above and run again"
                    );
                }
            }
            return Ok(exit::USAGE);
        }
        // Another session's turn took the workspace between the check above and this run.
        if let Some(e) = result
            .outcome
            .as_ref()
            .and_then(|o| o.error.as_ref())
            .filter(|e| e.error_code == ErrorCode::WorkspaceBusy)
        {
            tell!("keel: {}", e.message);
            return Ok(exit::BUSY);
        }
        // "Completed" with a write that was refused and never redone did not do the work; nor
        // did a change task that changed nothing (README, exit codes).
        if result.status == SessionStatus::Completed
            && (crate::render::unredone_refusal(&result.events).is_some()
                || crate::render::changed_nothing(&result.events))
        {
            return Ok(exit::INCOMPLETE);
        }
        Ok(exit_code(result.status))
    })
}

/// What `policy` means in a run nobody can answer.
fn approval_note(policy: ApprovalPolicy) -> String {
    match policy {
        ApprovalPolicy::Never => {
            "never (tool calls the sandbox allows run without asking; [approval] deny rules still apply)".into()
        }
        ApprovalPolicy::OnRequest => {
            "on-request (headless: destructive, network and unknown commands are denied and the model is told why)".into()
        }
        ApprovalPolicy::Untrusted => {
            "untrusted (headless: everything but reading is denied and the model is told why)".into()
        }
    }
}

/// First Ctrl-C interrupts the turn cleanly; a second one quits at once.
fn watch_ctrl_c(handle: Arc<SessionHandle>) {
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_err() {
            return;
        }
        tell!("\nkeel: cancelling the turn… (press Ctrl-C again to quit now)");
        let _ = handle.submit(Op::Interrupt).await;
        if tokio::signal::ctrl_c().await.is_ok() {
            // Running commands end and their checks run first (red-team pass 6, R6-7).
            keel_tools::shell::pending::exit_after_checks(i32::from(exit::CANCELLED));
        }
    });
}
