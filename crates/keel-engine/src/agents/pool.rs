//! The children of one run: opening them (a child engine with narrowed authority), their
//! turns in the background behind the `agents.max_concurrent` slots with a step cap and a
//! timeout, waiting for their results, closing them, and rolling their usage up into the
//! parent's.

use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::FutureExt;
use keel_protocol::{ChildUsage, Event, EventKind, SessionStatus, ToolCall, Usage};
use keel_tools::{ToolError, ToolOutput, ToolState, parse_args};
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::roles::AgentRole;
use super::store::ChildStore;
use super::tools::{AgentCloseArgs, AgentEvalArgs, AgentOpenArgs};
use super::{AGENT_CLOSE, AGENT_EVAL, AGENT_OPEN, AgentScope};
use crate::{Engine, EngineBuilder, EngineError, EventSink, RunOptions};
use keel_phase::ExecutionMode;

/// Characters of a child's answer shown to the parent at once; the rest is kept for
/// `read_result`.
const RESULT_CHARS: usize = 8_000;

/// What the run that opens children lends them for a call (`AgentPool::call`).
pub(crate) struct Parent<'a> {
    pub(crate) engine: &'a Engine,
    pub(crate) emitter: &'a crate::Emitter,
    pub(crate) cancel: &'a CancellationToken,
    /// The run is read-only (its own scope, or a plan_exec phase that allows no writes): so is
    /// every child it opens.
    pub(crate) read_only: bool,
    /// The run's working memory: a long answer is kept whole there.
    pub(crate) results: &'a mut crate::results::StoredResults,
}

/// What children did for their parent's run since its last subagent call.
#[derive(Default)]
pub(crate) struct ChildWork {
    /// Usage of child turns that ended (rolled up into the parent's).
    pub(crate) usage: Usage,
    /// Files they changed.
    pub(crate) files: Vec<String>,
    /// They changed the workspace.
    pub(crate) changed: bool,
}

/// The children a run opened.
pub(crate) struct AgentPool {
    children: BTreeMap<String, Child>,
    opened: usize,
    slots: Arc<Semaphore>,
    /// Usage of ended child turns not yet added to the parent's.
    pending: Usage,
    /// Every child this run opened (closed ones too), for `session_finished.children`.
    summary: BTreeMap<String, ChildUsage>,
    /// The session's approval gate: children ask through it too.
    approvals: Option<Arc<keel_approval::ApprovalGate>>,
}

struct Child {
    role: String,
    engine: Arc<Engine>,
    cancel: CancellationToken,
    run_id: String,
    running: Option<JoinHandle<TurnEnd>>,
    last: Option<TurnEnd>,
    progress: Arc<Progress>,
    /// The child's usage already added to the parent's.
    rolled: Usage,
}

/// How a child's turn ended.
#[derive(Debug, Clone)]
struct TurnEnd {
    status: SessionStatus,
    text: String,
    error: Option<String>,
    usage: Usage,
    iterations: u32,
    session: Option<String>,
}

impl TurnEnd {
    fn failed(status: SessionStatus, error: String, session: Option<String>) -> Self {
        Self {
            status,
            text: String::new(),
            error: Some(error),
            usage: Usage::default(),
            iterations: 0,
            session,
        }
    }
}

impl AgentPool {
    pub(crate) fn new(
        max_concurrent: usize,
        approvals: Option<Arc<keel_approval::ApprovalGate>>,
    ) -> Self {
        Self {
            children: BTreeMap::new(),
            opened: 0,
            slots: Arc::new(Semaphore::new(max_concurrent.max(1))),
            pending: Usage::default(),
            summary: BTreeMap::new(),
            approvals,
        }
    }

    /// Usage of child turns that ended since the last call, to add to the parent's.
    pub(crate) fn take_usage(&mut self) -> Usage {
        std::mem::take(&mut self.pending)
    }

    /// Cancels every child still running and waits for it to record its end; returns the
    /// usage not yet rolled up and every child's share, in the order they were opened.
    pub(crate) async fn close_all(&mut self) -> (Usage, Vec<ChildUsage>) {
        let ids: Vec<String> = self.children.keys().cloned().collect();
        for id in ids {
            if let Some(child) = self.children.get_mut(&id)
                && let Some(handle) = child.running.take()
            {
                child.cancel.cancel();
                let end = joined(handle.await);
                self.record(&id, end);
            }
        }
        let mut children: Vec<ChildUsage> = self.summary.values().cloned().collect();
        children.sort_by_key(|c| {
            c.agent_id
                .trim_start_matches('a')
                .parse::<u64>()
                .unwrap_or(u64::MAX)
        });
        (self.take_usage(), children)
    }

    /// Keeps a child's ended turn and rolls its new usage up.
    fn record(&mut self, id: &str, end: TurnEnd) {
        let Some(child) = self.children.get_mut(id) else {
            return;
        };
        if end.usage.requests >= child.rolled.requests {
            self.pending.add(&minus(&end.usage, &child.rolled));
            child.rolled = end.usage;
        }
        let info = child.engine.provider_info();
        self.summary.insert(
            id.to_string(),
            ChildUsage {
                agent_id: id.to_string(),
                role: child.role.clone(),
                model: info.model,
                status: end.status,
                iterations: end.iterations,
                usage: child.rolled,
            },
        );
        child.last = Some(end);
    }
}

impl Drop for AgentPool {
    fn drop(&mut self) {
        for child in self.children.values() {
            child.cancel.cancel();
        }
    }
}

/// `a - b`, field by field (never below zero).
fn minus(a: &Usage, b: &Usage) -> Usage {
    Usage {
        input_tokens: a.input_tokens.saturating_sub(b.input_tokens),
        output_tokens: a.output_tokens.saturating_sub(b.output_tokens),
        cache_read_tokens: a.cache_read_tokens.saturating_sub(b.cache_read_tokens),
        cache_creation_tokens: a
            .cache_creation_tokens
            .saturating_sub(b.cache_creation_tokens),
        cost_usd: (a.cost_usd - b.cost_usd).max(0.0),
        requests: a.requests.saturating_sub(b.requests),
        estimated: a.estimated,
    }
}

fn joined(r: Result<TurnEnd, tokio::task::JoinError>) -> TurnEnd {
    r.unwrap_or_else(|e| {
        TurnEnd::failed(
            SessionStatus::Failed,
            format!("the subagent's task failed: {e}"),
            None,
        )
    })
}

/// What a child is doing, from its events (for `agent_eval` with `wait: false`), and what it
/// changed (for the parent's final verification).
struct Progress {
    run_id: String,
    state: Mutex<(u32, String)>,
    changes: Mutex<Changes>,
}

/// Files a child wrote and whether it ran commands, not yet reported to the parent.
#[derive(Default)]
struct Changes {
    files: Vec<String>,
    changed: bool,
}

impl EventSink for Progress {
    fn publish(&self, event: &Event) {
        if event.run_id != self.run_id {
            return;
        }
        let Ok(mut state) = self.state.lock() else {
            return;
        };
        if let EventKind::ToolResult {
            is_error: false,
            details,
            ..
        } = &event.kind
            && (!details.files.is_empty() || details.exit_code.is_some())
            && let Ok(mut changes) = self.changes.lock()
        {
            changes.files.extend(details.files.iter().cloned());
            changes.changed = true;
        }
        match &event.kind {
            EventKind::TurnStarted { .. } => state.0 += 1,
            EventKind::ToolCall { name, .. } => state.1 = format!("called {name}"),
            EventKind::AssistantMessage { text, .. } if !text.trim().is_empty() => {
                state.1 = format!(
                    "said: {}",
                    text.trim().chars().take(200).collect::<String>()
                );
            }
            _ => {}
        }
    }
}

/// Runs one turn of a child: waits for a slot, then runs (or continues) its session, cancelled
/// after `timeout`. Never fails: every ending is a [`TurnEnd`].
async fn child_turn(
    engine: Arc<Engine>,
    session: Option<String>,
    input: String,
    options: RunOptions,
    slots: Arc<Semaphore>,
    timeout: Duration,
) -> TurnEnd {
    let cancel = options.cancel.clone();
    let permit = tokio::select! {
        biased;
        _ = cancel.cancelled() => None,
        p = slots.acquire_owned() => p.ok(),
    };
    if permit.is_none() {
        return TurnEnd::failed(
            SessionStatus::Cancelled,
            "cancelled before it started".into(),
            session,
        );
    }
    let known = session.clone();
    let run = async move {
        match &session {
            None => engine.run(&input, options).await,
            Some(id) => engine.continue_session(id, &input, options).await,
        }
    };
    let run = AssertUnwindSafe(run).catch_unwind();
    tokio::pin!(run);
    let mut timed_out = false;
    let result = tokio::select! {
        r = &mut run => r,
        _ = tokio::time::sleep(timeout) => {
            timed_out = true;
            cancel.cancel();
            run.await
        }
    };
    drop(permit);
    match result {
        Ok(Ok(outcome)) => {
            let error = if timed_out {
                Some(format!(
                    "timed out after {}s (agents.timeout_secs) and was cancelled",
                    timeout.as_secs()
                ))
            } else {
                outcome
                    .error
                    .map(|e| e.message)
                    .or(outcome.blocker.map(|b| format!("blocked: {}", b.question)))
            };
            TurnEnd {
                status: if timed_out {
                    SessionStatus::Failed
                } else {
                    outcome.status
                },
                text: outcome.final_text,
                error,
                usage: outcome.usage,
                iterations: outcome.iterations,
                session: Some(outcome.session_id),
            }
        }
        Ok(Err(e)) => TurnEnd::failed(SessionStatus::Failed, e.to_string(), known),
        Err(_) => TurnEnd::failed(SessionStatus::Failed, "the subagent crashed".into(), known),
    }
}

/// A child engine: the parent's configuration, workspace, sandbox, approval policy, command
/// judge and tools, with the tools outside `scope` hidden (a call to one is refused, naming the
/// role), the step cap, no final verification (the parent verifies) and the role's prompt.
fn child_engine(
    parent: &Engine,
    provider: Arc<dyn keel_llm::Provider>,
    scope: AgentScope,
    prompt: &str,
    store: Arc<dyn keel_store::Store>,
) -> Result<Engine, EngineError> {
    let mut config = parent.config.clone();
    config.agent.max_iterations = config.agents.max_steps;
    config.agent.mode = ExecutionMode::React.as_str().to_string();
    config.index.codemap_tokens = 0;
    config.verify.enabled = false;
    config.llm.fallback.clear();
    let mut tools = (*parent.tools).clone();
    let names: Vec<String> = tools.names().map(str::to_string).collect();
    for name in names {
        if !scope.tools.contains(&name) {
            tools.set_state(&name, ToolState::Hidden);
        } else if let Some(state) = tools.state(&name).cloned() {
            // Pins an MCP tool that already arrived against the default below.
            tools.set_state(&name, state);
        }
    }
    // The parent's MCP servers are shared; tools that arrive after the scope was fixed are
    // outside it.
    tools.set_late_default(Some(ToolState::Hidden));
    let mut engine = EngineBuilder::new(config, parent.workspace.root())
        .store(store)
        .provider(provider)
        .tools(tools)
        .gate_detector(parent.gate_detector.clone())
        .command_judge(parent.judge.clone())
        .inherit_mcp(parent.mcp.clone())
        .build()?;
    engine.system_prompt.push_str(&format!(
        "\n\n# Subagent\n\nYou are subagent {} (role `{}`), working for another agent on one bounded job. It sees only your final answer, not your tool calls: make that answer complete and concise.{} {prompt}\n",
        scope.agent_id,
        scope.role,
        if scope.read_only { " You are read-only: do not try to change files." } else { "" }
    ));
    engine.agent_depth = parent.agent_depth + 1;
    engine.agent_scope = Some(Arc::new(scope));
    engine.child_providers = parent.child_providers.clone();
    Ok(engine)
}

impl AgentPool {
    /// Answers `agent_open`, `agent_eval` and `agent_close` for `parent`'s run: the result,
    /// and what the children did for it since the last call (usage of turns that ended, files
    /// they changed, whether they changed the workspace).
    pub(crate) async fn call(
        &mut self,
        call: &ToolCall,
        parent: &mut Parent<'_>,
    ) -> (Result<ToolOutput, ToolError>, ChildWork) {
        let out = match call.name.as_str() {
            AGENT_OPEN => match parse_args(AGENT_OPEN, call.arguments.clone()) {
                Ok(args) => self.agent_open(args, parent).await,
                Err(e) => Err(e),
            },
            AGENT_EVAL => match parse_args(AGENT_EVAL, call.arguments.clone()) {
                Ok(args) => self.agent_eval(args, parent).await,
                Err(e) => Err(e),
            },
            AGENT_CLOSE => {
                match parse_args::<AgentCloseArgs>(AGENT_CLOSE, call.arguments.clone()) {
                    Ok(args) => self.agent_close(&args.agent_id).await,
                    Err(e) => Err(e),
                }
            }
            other => Err(ToolError::model(format!(
                "`{other}` is not a subagent tool"
            ))),
        };
        let mut work = ChildWork {
            usage: self.take_usage(),
            ..ChildWork::default()
        };
        // A worker's edits are the run's changes: final verification covers them (its hook
        // reads `agents_changed` on the call's result).
        for child in self.children.values() {
            if let Ok(mut changes) = child.progress.changes.lock() {
                work.changed |= std::mem::take(&mut changes.changed);
                work.files.extend(std::mem::take(&mut changes.files));
            }
        }
        (out, work)
    }

    async fn agent_open(
        &mut self,
        args: AgentOpenArgs,
        parent: &mut Parent<'_>,
    ) -> Result<ToolOutput, ToolError> {
        let engine = parent.engine;
        let agents = &engine.config.agents;
        if engine.agent_depth >= agents.max_depth {
            return Err(ToolError::model(format!(
                "refused: subagents nest at most agents.max_depth = {} level(s) deep; do the work yourself",
                agents.max_depth
            )));
        }
        if args.task.trim().is_empty() {
            return Err(ToolError::model(
                "the task is empty; say what the subagent should do, self-contained",
            ));
        }
        let mut role = AgentRole::resolve(&args.role, agents).map_err(ToolError::model)?;
        role.read_only |= parent.read_only;
        let may_nest = engine.agent_depth + 1 < agents.max_depth;
        // A role that may get MCP tools (all the parent's, or named ones) waits (bounded) for
        // servers still starting, so the child's scope has the same tools as if they were up.
        let wants_mcp = role
            .tools
            .as_ref()
            .is_none_or(|list| list.iter().any(|t| t.starts_with("mcp")));
        if wants_mcp {
            tokio::select! {
                _ = engine.tools.settle_all() => {}
                _ = parent.cancel.cancelled() => {}
            }
        }
        let mut tools = role
            .tools_under(&engine.tools, may_nest, args.tools.as_deref())
            .map_err(ToolError::model)?;
        if let Some(parent) = &engine.agent_scope {
            tools.retain(|t| parent.tools.contains(t));
        }
        let model = args.model.clone().or(role.model.clone());
        let provider = match &engine.child_providers {
            Some(build) => build(model.as_deref())
                .map_err(|e| ToolError::model(format!("cannot start the subagent's model: {e}")))?,
            None => engine.provider.clone(),
        };
        let model_name = provider.info().model;
        self.opened += 1;
        let id = format!("a{}", self.opened);
        let scope = AgentScope {
            agent_id: id.clone(),
            role: role.name.clone(),
            tools,
            read_only: role.read_only,
        };
        let store: Arc<dyn keel_store::Store> = Arc::new(ChildStore {
            inner: engine.store.clone(),
            parent_session: parent.emitter.session_id().to_string(),
            agent_id: id.clone(),
            role: role.name.clone(),
            model: model_name.clone(),
        });
        let child = child_engine(engine, provider, scope, &role.prompt, store)
            .map_err(|e| ToolError::model(format!("cannot start the subagent: {e}")))?;
        let run_id = crate::time::new_run_id();
        let progress = Arc::new(Progress {
            run_id: run_id.clone(),
            state: Mutex::new((0, String::new())),
            changes: Mutex::new(Changes::default()),
        });
        self.children.insert(
            id.clone(),
            Child {
                role: role.name.clone(),
                engine: Arc::new(child),
                cancel: parent.cancel.child_token(),
                run_id,
                running: None,
                last: None,
                progress,
                rolled: Usage::default(),
            },
        );
        self.start_child_turn(&id, None, args.task, parent);
        Ok(ToolOutput::text(format!(
            "Started subagent {id} (role `{}`, model {model_name}); it is working in the background. Get its answer with agent_eval {{\"agent_id\": \"{id}\"}}.",
            role.name
        )))
    }

    /// Starts a turn of child `id` in the background (its first with `session` unset).
    fn start_child_turn(
        &mut self,
        id: &str,
        session: Option<String>,
        input: String,
        parent: &Parent<'_>,
    ) {
        let mut sinks: Vec<Arc<dyn EventSink>> = parent.emitter.sinks().to_vec();
        let parent_run = parent.emitter.run_id().to_string();
        let approvals = self.approvals.clone();
        let timeout = Duration::from_secs(parent.engine.config.agents.timeout_secs.max(1));
        let slots = self.slots.clone();
        let Some(child) = self.children.get_mut(id) else {
            return;
        };
        sinks.push(child.progress.clone());
        let options = RunOptions {
            sinks,
            cancel: child.cancel.child_token(),
            approvals,
            run_id: Some(child.run_id.clone()),
            parent_run_id: Some(parent_run),
            ..RunOptions::default()
        };
        child.running = Some(tokio::spawn(child_turn(
            child.engine.clone(),
            session,
            input,
            options,
            slots,
            timeout,
        )));
    }

    async fn agent_eval(
        &mut self,
        args: AgentEvalArgs,
        parent: &mut Parent<'_>,
    ) -> Result<ToolOutput, ToolError> {
        let id = args.agent_id.trim().to_string();
        self.known_child(&id)?;
        let input = args.input.filter(|i| !i.trim().is_empty());
        let running = self
            .children
            .get(&id)
            .is_some_and(|c| c.running.as_ref().is_some_and(|h| !h.is_finished()));
        if let Some(input) = input {
            if running {
                return Err(ToolError::model(format!(
                    "subagent {id} is still working on its turn; wait for its answer (agent_eval without input) before sending more"
                )));
            }
            self.settle(&id).await;
            let session = self
                .children
                .get(&id)
                .and_then(|c| c.last.as_ref())
                .and_then(|l| l.session.clone());
            let Some(session) = session else {
                return Err(ToolError::model(format!(
                    "subagent {id} never started (its first turn failed); open a new one"
                )));
            };
            self.start_child_turn(&id, Some(session), input, parent);
        } else if args.wait == Some(false) && running {
            let Some(child) = self.children.get(&id) else {
                return Err(ToolError::model(format!("no subagent {id}")));
            };
            let (steps, last) = child
                .progress
                .state
                .lock()
                .map(|s| s.clone())
                .unwrap_or_default();
            return Ok(ToolOutput::text(format!(
                "subagent {id} ({}) is still working: {steps} model request(s) so far{}. Call agent_eval again (wait defaults to true) for its answer.",
                child.role,
                if last.is_empty() {
                    String::new()
                } else {
                    format!("; last it {last}")
                }
            )));
        }
        if args.wait == Some(false)
            && self
                .children
                .get(&id)
                .is_some_and(|c| c.running.as_ref().is_some_and(|h| !h.is_finished()))
        {
            return Ok(ToolOutput::text(format!(
                "subagent {id} started working on the input; call agent_eval again for its answer."
            )));
        }
        self.settle(&id).await;
        self.child_result(&id, parent)
    }

    /// Waits for child `id`'s running turn, if any, and records its end.
    async fn settle(&mut self, id: &str) {
        let handle = self.children.get_mut(id).and_then(|c| c.running.take());
        if let Some(handle) = handle {
            let end = joined(handle.await);
            self.record(id, end);
        }
    }

    fn known_child(&self, id: &str) -> Result<(), ToolError> {
        if self.children.contains_key(id) {
            return Ok(());
        }
        let open: Vec<&str> = self.children.keys().map(String::as_str).collect();
        Err(ToolError::model(format!(
            "no open subagent `{id}`; open ones: {}",
            if open.is_empty() {
                "none (start one with agent_open)".to_string()
            } else {
                open.join(", ")
            }
        )))
    }

    /// The last answer of child `id`, as the parent's model should see it.
    fn child_result(&mut self, id: &str, parent: &mut Parent<'_>) -> Result<ToolOutput, ToolError> {
        let Some(child) = self.children.get(id) else {
            return Err(ToolError::model(format!("no open subagent `{id}`")));
        };
        let Some(end) = child.last.clone() else {
            return Err(ToolError::model(format!("subagent {id} has no result yet")));
        };
        let role = child.role.clone();
        if end.status == SessionStatus::Completed {
            let text = parent.results.fit(end.text, RESULT_CHARS);
            return Ok(ToolOutput::text(format!(
                "[subagent {id} ({role}) completed in {} step(s)]\n{text}",
                end.iterations
            )));
        }
        Err(ToolError::model(format!(
            "subagent {id} ({role}) ended {}: {}",
            end.status,
            end.error.unwrap_or_else(|| "no answer".into())
        )))
    }

    async fn agent_close(&mut self, id: &str) -> Result<ToolOutput, ToolError> {
        let id = id.trim();
        self.known_child(id)?;
        let running = match self.children.get(id) {
            Some(c) => {
                c.cancel.cancel();
                c.running.as_ref().is_some_and(|h| !h.is_finished())
            }
            None => false,
        };
        self.settle(id).await;
        let status = self
            .children
            .remove(id)
            .and_then(|c| c.last)
            .map_or_else(|| "never ran".to_string(), |l| l.status.to_string());
        Ok(ToolOutput::text(format!(
            "subagent {id} closed{} (last status: {status})",
            if running { ", its turn cancelled" } else { "" }
        )))
    }
}
