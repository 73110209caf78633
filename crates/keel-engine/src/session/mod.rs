//! Sessions: starting one for a task, continuing a stored one with a new message (resume,
//! follow-up messages, answered blockers), and closing a run — blocker stored, `error` and
//! `session_finished` emitted, the session record updated.

use std::panic::AssertUnwindSafe;

use futures::FutureExt;

use keel_protocol::{
    ContentBlock, ErrorCode, ErrorInfo, EventKind, Message, Role, SessionStatus, Usage,
};
use keel_store::{BlockerStatus, NewBlocker, NewSession, SessionRecord, StoreError};

use crate::blockers::{BlockerDraft, BlockerInfo, answers_text, new_blocker_id};
use crate::ending::Interrupt;
use crate::engine::{Engine, RunOptions, RunOutcome};
use crate::fallback::{ChainEnd, Failure, emergency_error, original_error};
use crate::run::Run;
use crate::{Emitter, EngineError};
use keel_knowledge::prompt;

mod setup;

use keel_protocol::files_written;
pub(crate) use setup::{budget, ensure_not_running, give_back, take_lease, tool_context};

/// The record of a new session of `engine` for `task` (empty for a session created before its
/// first message).
fn new_session(engine: &Engine, task: &str, repo: Option<keel_store::RepoSource>) -> NewSession {
    let info = engine.provider.info();
    NewSession {
        id: crate::time::new_session_id(),
        workspace: engine.workspace.root().display().to_string(),
        task: task.to_string(),
        provider: info.provider,
        model: info.model,
        mode: engine.mode().as_str().to_string(),
        base_url: engine.config.llm.base_url.clone().unwrap_or_default(),
        script: engine
            .config
            .llm
            .script
            .as_ref()
            .map(|s| s.display().to_string())
            .unwrap_or_default(),
        repo,
    }
}

/// The codemap for the first message, when it is cheap (see [`keel_index::SharedIndex::codemap_within`]).
async fn codemap(engine: &Engine) -> Option<String> {
    let cfg = &engine.config.index;
    if !cfg.enabled || cfg.codemap_tokens == 0 {
        return None;
    }
    let index = engine.index.clone();
    let root = engine.workspace.root().to_path_buf();
    let (tokens, wait) = (
        cfg.codemap_tokens,
        std::time::Duration::from_millis(cfg.codemap_wait_ms),
    );
    let map = tokio::task::spawn_blocking(move || index.codemap_within(&root, tokens, wait))
        .await
        .ok()
        .flatten()?;
    Some(prompt::codemap_block(&map))
}

/// The first message's standing layers: the user's own rules file, their memory (the facts
/// relevant to `task`, within `agent.memory_tokens`) and the promoted lessons — all tail, so
/// the cached head never depends on them.
async fn tail_layers(engine: &Engine, task: &str) -> Result<Vec<String>, EngineError> {
    let entries = engine.store.memory_entries().await?;
    let mut out: Vec<String> = Vec::new();
    out.extend(keel_knowledge::rules::user_rules(
        keel_knowledge::rules::user_config_dir().as_deref(),
    ));
    out.extend(keel_knowledge::memory::relevant_memory_block(
        &entries,
        task,
        engine.config.agent.memory_tokens,
    ));
    out.extend(keel_knowledge::memory::lessons_block(&entries));
    Ok(out)
}

/// A new session for `task`.
pub(crate) async fn start(
    engine: &Engine,
    task: &str,
    options: RunOptions,
) -> Result<RunOutcome, EngineError> {
    let new = new_session(engine, task, None);
    let session_id = new.id.clone();
    let lease = take_lease(engine, &session_id, &options).await?;
    let outcome = match engine.store.create_session(&new).await {
        Ok(()) => begin(engine, session_id, task, options).await,
        Err(e) => Err(e.into()),
    };
    give_back(lease).await;
    outcome
}

/// A new session with no task and no events yet, `idle` until its first message.
pub(crate) async fn create(
    engine: &Engine,
    repo: Option<keel_store::RepoSource>,
) -> Result<SessionRecord, EngineError> {
    let new = new_session(engine, "", repo);
    engine.store.create_session(&new).await?;
    engine
        .store
        .update_session(&new.id, SessionStatus::Idle, 0, &Usage::default())
        .await?;
    Ok(engine.store.get_session(&new.id).await?)
}

/// The first run of the recorded session `session_id`: `task` is its first message.
async fn begin(
    engine: &Engine,
    session_id: String,
    task: &str,
    options: RunOptions,
) -> Result<RunOutcome, EngineError> {
    let info = engine.provider.info();
    let workspace = engine.workspace.root().display().to_string();
    let emitter = Emitter::new(
        session_id.clone(),
        engine.store.clone(),
        options.sinks.clone(),
    )
    .in_run(options.run_id.clone(), options.parent_run_id.clone());
    emitter
        .emit(EventKind::SessionStarted {
            task: task.to_string(),
            workspace,
            provider: info.provider,
            model: info.model,
            mode: engine.mode().as_str().to_string(),
            max_iterations: engine.config.agent.max_iterations,
            phase: engine
                .phase_policy
                .as_ref()
                .map(|p| p.start.as_str().to_string()),
        })
        .await?;

    let env = prompt::Environment::current(engine.workspace.root());
    // `active` MCP servers' tools are in the catalog: wait (bounded) until they settled, so
    // the first-turn catalog never depends on timing.
    engine.tools.settle_listed().await;
    let mut run = Run::new(
        engine,
        &emitter,
        tool_context(engine, &options),
        budget(engine),
        &options,
    );
    let mut context = options.context.clone();
    context.extend(tail_layers(engine, task).await?);
    context.extend(run.first_message_blocks(task));
    // A window too small for the full head has no room for the codemap either.
    if !run.compact_head()
        && let Some(map) = codemap(engine).await
    {
        context.push(map);
    }
    let first = Message::user_text(prompt::task_message(task, &context, &env));
    run.push_message(first).await?;
    conclude(engine, run, &emitter).await
}

/// Another session's live lease of `workspace` (a run of `session`, if given, does not count),
/// checked before a run starts so a busy workspace is refused before anything is recorded.
pub async fn workspace_busy(
    store: &dyn keel_store::Store,
    workspace: &std::path::Path,
    session: Option<&str>,
) -> Result<Option<keel_store::WorkspaceLease>, EngineError> {
    let lease = store
        .workspace_lease(&workspace.display().to_string())
        .await?;
    Ok(lease.filter(|l| l.is_live() && Some(l.session_id.as_str()) != session))
}

/// The checks before `engine` continues the stored session `record`: not running, same
/// workspace (unless the session works in a checkout of its git source, which each worker
/// makes in a directory of its own), same mode.
pub(crate) fn ensure_resumable(engine: &Engine, record: &SessionRecord) -> Result<(), EngineError> {
    ensure_not_running(record)?;
    let root = engine.workspace.root().display().to_string();
    if record.workspace != root && record.repo.is_none() {
        return Err(EngineError::Setup(format!(
            "session {} works in {}, not {root}; resume it from that workspace (--workspace {})",
            record.id, record.workspace, record.workspace
        )));
    }
    if record.mode != engine.mode().as_str() {
        return Err(EngineError::Setup(format!(
            "session {} runs in {} mode, but this engine is {}; resume it in its own mode (`keel run --resume` picks it automatically, or pass --mode {})",
            record.id,
            record.mode,
            engine.mode(),
            record.mode
        )));
    }
    Ok(())
}

/// Continues the stored session `session_ref` (full id or unique prefix) with `message`.
pub(crate) async fn resume(
    engine: &Engine,
    session_ref: &str,
    message: &str,
    options: RunOptions,
) -> Result<RunOutcome, EngineError> {
    let record = engine.store.get_session(session_ref).await?;
    ensure_resumable(engine, &record)?;
    let lease = take_lease(engine, &record.id, &options).await?;
    // Read again under the lease: a run that ended in between has stored its last state.
    let outcome = match engine.store.get_session(&record.id).await {
        Ok(record) => resume_held(engine, record, message, options).await,
        Err(e) => Err(e.into()),
    };
    give_back(lease).await;
    outcome
}

/// [`resume`] once the run holds the session's lease.
async fn resume_held(
    engine: &Engine,
    record: SessionRecord,
    message: &str,
    options: RunOptions,
) -> Result<RunOutcome, EngineError> {
    let id = record.id.clone();
    if record.status == SessionStatus::Idle {
        // Created before its first message (`create_session`): this message is its task.
        // Its only events may be the `turn_finished` of first messages cancelled before any
        // run took them (queue mode: `keel serve --database`).
        if engine.store.last_seq(&id).await? > 0
            && engine
                .store
                .events(&id, 0)
                .await?
                .iter()
                .any(|e| !matches!(e.kind, EventKind::TurnFinished { .. }))
        {
            return Err(StoreError::Conflict(format!(
                "session {id} is idle but has events; it cannot start again"
            ))
            .into());
        }
        engine.store.set_session_task(&id, message).await?;
        engine
            .store
            .update_session(&id, SessionStatus::Running, 0, &Usage::default())
            .await?;
        return begin(engine, id, message, options).await;
    }
    let messages = engine.store.messages(&id).await?;
    let blockers = engine.store.list_blockers(Some(&id), true).await?;
    let events = engine.store.events(&id, 0).await?;
    // A scripted model goes on with the turn after the last one this session played, not
    // from its first (a live model ignores this). Each reply and each retried failure played
    // one turn.
    let played = played_replies(&events);
    engine.provider.fast_forward(&played);
    // Blockers still open are settled by resuming: the new message is the reply (a budget
    // blocker needs none).
    let mut answered = Vec::new();
    for b in blockers {
        match b.status {
            BlockerStatus::Answered => answered.push(b),
            BlockerStatus::Open => {
                let reply = if message.trim().is_empty() {
                    "(the user resumed the session without answering)".to_string()
                } else {
                    message.trim().to_string()
                };
                let id = b.id.clone();
                let updated = engine.store.answer_blocker(&id, &reply).await?;
                answered.push(updated);
            }
            BlockerStatus::Delivered => {}
        }
    }
    let answered_ids: Vec<String> = answered.iter().map(|b| b.id.clone()).collect();
    answered.retain(|b| b.source != crate::blockers::BlockerSource::Budget.as_str());

    let emitter = Emitter::new(id.clone(), engine.store.clone(), options.sinks.clone())
        .in_run(options.run_id.clone(), options.parent_run_id.clone());
    {
        let (id, usage, iterations) = (id.clone(), record.usage, record.iterations);
        engine
            .store
            .update_session(&id, SessionStatus::Running, iterations, &usage)
            .await?;
    }
    emitter
        .emit(EventKind::SessionResumed {
            message: message.to_string(),
            answered_blockers: answered_ids.clone(),
        })
        .await?;

    // `active` MCP servers' tools are in the catalog: wait (bounded) until they settled, so
    // the first-turn catalog never depends on timing.
    engine.tools.settle_listed().await;
    let mut run = Run::new(
        engine,
        &emitter,
        tool_context(engine, &options),
        budget(engine),
        &options,
    );
    // After an on-demand compaction the next turn starts from its checkpoint.
    let (messages, carry) =
        crate::compaction::working_context(engine, &id, &events, messages).await?;
    run.continue_from(
        messages,
        record.usage,
        record.iterations,
        files_written(&events),
    );
    run.carry_on(&carry);
    run.hooks_resumed(&events);
    {
        let sid = id.clone();
        let stored = engine.store.stored_results(&sid).await?;
        let prefix = crate::compaction::CHECKPOINT_PREFIX;
        run.restore_results(
            stored
                .into_iter()
                .filter(|(h, _)| !h.starts_with(prefix))
                .collect(),
        );
    }

    // A run killed mid-step may have left tool calls unanswered: answer them so the
    // transcript stays valid.
    if let Some(last) = run.messages().last()
        && last.role == Role::Assistant
    {
        let pending = last.tool_calls();
        if !pending.is_empty() {
            let blocks = pending
                .into_iter()
                .map(|c| ContentBlock::ToolResult {
                    tool_use_id: c.id,
                    content: "not run: the session stopped before this call ran".into(),
                    is_error: true,
                })
                .collect();
            run.push_message(Message {
                role: Role::User,
                content: blocks,
            })
            .await?;
        }
    }
    let answers = answers_text(&answered);
    let mut text = prompt::continuation_message(message, answers.as_deref());
    for block in run.user_message_blocks(message) {
        text.push('\n');
        text.push_str(&block);
        text.push('\n');
    }
    run.push_message(Message::user_text(text)).await?;
    if !answered_ids.is_empty() {
        engine.store.mark_blockers_delivered(&answered_ids).await?;
    }
    conclude(engine, run, &emitter).await
}

/// Runs the fallback chain and closes the run.
async fn conclude(
    engine: &Engine,
    mut run: Run<'_>,
    emitter: &Emitter,
) -> Result<RunOutcome, EngineError> {
    // A bug anywhere in the loop must not take the process down: it becomes an internal error.
    let end = match AssertUnwindSafe(run.run_chain()).catch_unwind().await {
        Ok(end) => end,
        Err(panic) => {
            let what = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "unknown panic".into());
            let failure = Failure::new(
                ErrorCode::InternalError,
                format!("the engine crashed: {what}"),
            );
            let chain = &engine.config.fallback_chain;
            let error = if chain.enabled && chain.emergency.enabled {
                emergency_error(&failure, &[])
            } else {
                original_error(&failure)
            };
            Ok(ChainEnd::Failed {
                status: SessionStatus::Failed,
                error,
            })
        }
    };
    // Subagents still running are cancelled; their usage rolls up into the session's.
    let children = run.close_agents().await;
    let session_id = emitter.session_id().to_string();
    let (status, final_text, error, blocker) = match end {
        Ok(ChainEnd::Completed(text)) => (SessionStatus::Completed, text, None, None),
        Ok(ChainEnd::Blocked(draft)) => {
            let info = raise_blocker(engine, emitter, draft).await?;
            (SessionStatus::Blocked, String::new(), None, Some(info))
        }
        Ok(ChainEnd::Failed { status, error }) => (status, String::new(), Some(error), None),
        Err(Interrupt::Cancelled) => (
            SessionStatus::Cancelled,
            String::new(),
            Some(ErrorInfo {
                error_code: ErrorCode::Cancelled,
                message: "the run was cancelled by the user".into(),
                suggestions: vec![],
                retryable: true,
                original_error: None,
            }),
            None,
        ),
        Err(Interrupt::Llm(e)) => (
            SessionStatus::Failed,
            String::new(),
            Some(emergency_error(&Failure::from_llm(&e), &[])),
            None,
        ),
        Err(Interrupt::Engine(e)) => {
            // The store (or another part of the machinery) failed: record what we can.
            let (usage, iterations) = (run.usage(), run.iterations());
            let _ = engine
                .store
                .update_session(&session_id, SessionStatus::Failed, iterations, &usage)
                .await;
            return Err(e);
        }
    };
    if let Some(err) = &error {
        emitter.emit(EventKind::Error(err.clone())).await?;
    }
    emitter
        .emit(EventKind::SessionFinished {
            status,
            iterations: run.iterations(),
            usage: run.usage(),
            children,
            unchanged: status == SessionStatus::Completed && run.changed_nothing(),
        })
        .await?;
    let (iterations, usage) = (run.iterations(), run.usage());
    let id = session_id.clone();
    engine
        .store
        .update_session(&id, status, iterations, &usage)
        .await?;
    Ok(RunOutcome {
        session_id,
        status,
        iterations,
        usage,
        final_text,
        error,
        blocker,
    })
}

/// Stores a blocker and emits its event.
async fn raise_blocker(
    engine: &Engine,
    emitter: &Emitter,
    draft: BlockerDraft,
) -> Result<BlockerInfo, EngineError> {
    let mut new = NewBlocker {
        id: new_blocker_id(),
        session_id: emitter.session_id().to_string(),
        question: draft.question,
        source: draft.source.as_str().to_string(),
        evidence: draft.evidence,
    };
    let first = new.clone();
    if engine.store.create_blocker(&first).await.is_err() {
        // An id collision is the only expected failure: try once more with a fresh id.
        new.id = new_blocker_id();
        let again = new.clone();
        engine.store.create_blocker(&again).await?;
    }
    emitter
        .emit(EventKind::Blocker {
            id: new.id.clone(),
            question: new.question.clone(),
            source: new.source.clone(),
            evidence: new.evidence.clone(),
        })
        .await?;
    Ok(BlockerInfo {
        id: new.id,
        question: new.question,
        source: new.source,
        evidence: new.evidence,
    })
}

/// The replies a session received, as [`keel_llm::scripted::reply_fingerprint`]s: each
/// assistant message with the tools it called, and each retried failure.
fn played_replies(events: &[keel_protocol::Event]) -> Vec<String> {
    /// A reply's text and its calls (name, arguments); `None` for a retried failure.
    type Reply = Option<(String, Vec<(String, serde_json::Value)>)>;
    let mut replies: Vec<Reply> = Vec::new();
    // A subagent's replies (its events carry a parent run) came from its own model.
    for e in events.iter().filter(|e| e.parent_run_id.is_none()) {
        match &e.kind {
            EventKind::AssistantMessage { text, .. } => {
                replies.push(Some((text.clone(), Vec::new())));
            }
            EventKind::ToolCall {
                name, arguments, ..
            } => {
                if let Some(Some((_, calls))) = replies.last_mut() {
                    calls.push((name.clone(), arguments.clone()));
                }
            }
            EventKind::ModelRetry { .. } => replies.push(None),
            _ => {}
        }
    }
    replies
        .into_iter()
        .map(|r| match r {
            Some((text, calls)) => keel_llm::scripted::reply_fingerprint(&text, &calls),
            None => keel_llm::scripted::RETRY_FINGERPRINT.to_string(),
        })
        .collect()
}

/// The session entry points (here, not in `engine.rs`: the engine is what a run is made of,
/// a session is what runs it).
impl Engine {
    /// Runs `task` as a new session until it completes, fails, is blocked or is cancelled.
    /// Model and tool failures end up in the outcome and the event stream (through the
    /// fallback chain); only failures of the engine's own machinery (the store) are `Err`.
    pub async fn run(&self, task: &str, options: RunOptions) -> Result<RunOutcome, EngineError> {
        start(self, task, options).await
    }

    /// Records a new session of this engine (its workspace, provider, model and mode) with no
    /// task and no events yet: status `idle`. Its first message, sent with
    /// [`Engine::continue_session`], runs as its task (`session_started`). For clients that
    /// create a session before they say anything (`keel serve`).
    pub async fn create_session(&self) -> Result<keel_store::SessionRecord, EngineError> {
        create(self, None).await
    }

    /// [`Engine::create_session`] for a session whose workspace is a checkout of `repo` (queue
    /// mode: each worker checks it out into a directory of its own and runs the turn there).
    pub async fn create_repo_session(
        &self,
        repo: keel_store::RepoSource,
    ) -> Result<keel_store::SessionRecord, EngineError> {
        create(self, Some(repo)).await
    }

    /// Continues the stored session `session` (full id or unique prefix) with a new user
    /// `message`: the transcript is reloaded, event numbering continues, answered blockers of
    /// the session are delivered with the message (and marked delivered), and the run goes
    /// on with a fresh iteration budget. Used by `keel run --resume` and follow-up messages.
    /// The first message of an `idle` session ([`Engine::create_session`]) starts it instead,
    /// as its task.
    /// A session still running in a live process, or belonging to another workspace, is an
    /// `Err`.
    pub async fn continue_session(
        &self,
        session: &str,
        message: &str,
        options: RunOptions,
    ) -> Result<RunOutcome, EngineError> {
        resume(self, session, message, options).await
    }

    /// Compacts the stored session `session`'s working context now, whatever the threshold
    /// (the `compact` operation): a `compaction` event naming the stored checkpoint the next
    /// turns start from. The transcript itself keeps everything. A running session is an
    /// `Err`; a session with nothing to compact reports no stages and emits nothing.
    pub async fn compact_session(
        &self,
        session: &str,
        options: RunOptions,
    ) -> Result<crate::compaction::CompactReport, EngineError> {
        crate::compaction::compact_session(self, session, options).await
    }
}
