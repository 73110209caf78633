//! One attempt of the ReAct loop: ask the model, run the tools it calls, feed back the results,
//! until it answers without tool calls and verification passes (completed), a blocker is
//! raised (blocked), a failure ends it (failed) or the user cancels (cancelled).
//!
//! Each step of the state machine lives in its own module: compaction before a request
//! (`compaction`), checks before a tool runs ([`Run::pre_dispatch`]: the loop guard, then the
//! plan_exec phase policy, `phase`), a workspace snapshot before the turn's first write
//! (`snapshot`), the fix tracker and blockers after a result (`tracker`, `blockers`),
//! final verification when the model says it is done (`verify`), and the fallback chain
//! around the whole attempt (`fallback`). Starting and resuming sessions is `session`.

use std::collections::BTreeSet;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures::{FutureExt, StreamExt};
use keel_llm::{ChatRequest, LlmError, ModelTurn, StreamEvent, TurnAssembler};
use keel_protocol::{
    ContentBlock, DeltaChannel, ErrorCode, EventKind, Message, Role, SessionStatus, ToolCall,
    ToolDetails, ToolSpec, Truncation, Usage,
};
use keel_tools::{ToolContext, ToolEffect, ToolError, ToolOutput};

use crate::approval::ApprovalGate;
use crate::blockers::{
    BlockerDraft, BlockerSource, SharedUserPrompt, credentials_blocker, requested_question,
};
use crate::calls::PreparedCall;
use crate::compaction::Compactor;
use crate::engine::Engine;
use crate::fallback::Failure;
use crate::phase::{ADVANCE_PHASE, CommandAccess, PhaseState};
use crate::tracker::{FixTracker, LoopGuard, Progress, call_target};
use crate::{Emitter, EngineError};

/// Hard cap on one tool result as sent to the model; tools keep their own tighter budgets.
const MAX_TOOL_RESULT_CHARS: usize = 60_000;
/// Iterations looked back at to decide whether a run that hit the cap was progressing.
const PROGRESS_WINDOW: u32 = 5;

/// Why a step stopped early.
pub(crate) enum Interrupt {
    Cancelled,
    Llm(LlmError),
    Engine(EngineError),
}

impl From<EngineError> for Interrupt {
    fn from(e: EngineError) -> Self {
        Interrupt::Engine(e)
    }
}

/// How one attempt of the loop ended.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Ending {
    /// The model finished and verification passed; its final answer.
    Completed(String),
    /// A human must answer first.
    Blocked(BlockerDraft),
    /// The attempt failed; the fallback chain decides what happens next.
    Failed(Failure),
}

/// What happens to a tool call before it runs.
pub(crate) enum Dispatch {
    /// Run it; commands it starts get this access (the read-only sandbox in read-only phases).
    Run(CommandAccess),
    /// Do not run it; tell the model why (a policy refusal the loop survives).
    Refuse(String),
    /// Do not run it and end the attempt with this failure; the model reads the message.
    Stop(Failure, String),
}

/// The state of a session's loop: the working context and everything the guardrails track.
pub(crate) struct Run<'a> {
    pub(crate) engine: &'a Engine,
    pub(crate) emitter: &'a Emitter,
    pub(crate) ctx: ToolContext,
    /// The active tool catalog, computed once: part of the byte-stable head.
    pub(crate) tools: Vec<ToolSpec>,
    /// The working context sent to the model (compaction may shrink it; the store keeps all).
    pub(crate) messages: Vec<Message>,
    /// Session-wide usage.
    pub(crate) usage: Usage,
    /// Session-wide model requests.
    pub(crate) iterations: u32,
    pub(crate) compactor: Compactor,
    pub(crate) tracker: FixTracker,
    pub(crate) guard: LoopGuard,
    pub(crate) progress: Progress,
    /// Files the session created or modified (from tool metadata `paths`).
    pub(crate) files: BTreeSet<String>,
    /// A write or a command succeeded in this run (final verification only runs then, unless
    /// `verify.always`).
    pub(crate) changed: bool,
    /// Verification rounds that failed so far.
    pub(crate) verify_failures: u32,
    /// Answers `ask_user` interactively when set.
    pub(crate) ask_user: Option<SharedUserPrompt>,
    /// Asks a person before risky calls, when the session has an approval gate.
    pub(crate) approvals: Option<Arc<ApprovalGate>>,
    /// The plan_exec phase machine (none in react mode).
    pub(crate) phase: Option<PhaseState>,
    /// The iteration whose first write was already preceded by a snapshot.
    pub(crate) snapshot_turn: Option<u32>,
    /// The session's latest snapshot in this run (the next one's parent).
    pub(crate) last_snapshot: Option<crate::snapshot::SnapshotInfo>,
    /// A snapshot failed: no more attempts in this run.
    pub(crate) snapshots_failed: bool,
    /// Nested instruction files and glob rules not yet injected (`rules`).
    pub(crate) tail_rules: crate::rules::TailRules,
    /// Oversized tool results kept whole for `read_result` (session working memory).
    pub(crate) stored_results: crate::results::StoredResults,
    /// Loaded skills and the active tool restriction (`skills`).
    pub(crate) skills: crate::skills::SkillState,
    /// The subagents this run opened (`agents`).
    pub(crate) agents: crate::agents::AgentPool,
}

/// What one batch of tool calls led to.
enum Batch {
    Continue,
    Stop(Ending),
}

impl<'a> Run<'a> {
    pub(crate) fn new(
        engine: &'a Engine,
        emitter: &'a Emitter,
        ctx: ToolContext,
        compactor: Compactor,
        ask_user: Option<SharedUserPrompt>,
    ) -> Self {
        Self {
            engine,
            emitter,
            ctx,
            tools: engine.tools.specs(),
            messages: Vec::new(),
            usage: Usage::default(),
            iterations: 0,
            compactor,
            tracker: FixTracker::default(),
            guard: LoopGuard::default(),
            progress: Progress::default(),
            files: BTreeSet::new(),
            changed: false,
            verify_failures: 0,
            ask_user,
            approvals: None,
            phase: engine
                .phase_policy
                .clone()
                .map(|p| PhaseState::new(p, engine.judge.clone())),
            snapshot_turn: None,
            last_snapshot: None,
            snapshots_failed: false,
            tail_rules: crate::rules::TailRules::new(engine.workspace.root()),
            stored_results: crate::results::StoredResults::default(),
            skills: crate::skills::SkillState::new(engine.skills.clone(), engine.workspace.root()),
            agents: crate::agents::AgentPool::new(engine.config.agents.max_concurrent),
        }
    }

    /// One attempt: up to `agent.max_iterations` model requests.
    pub(crate) async fn drive(&mut self) -> Result<Ending, Interrupt> {
        let max = self.engine.config.agent.max_iterations;
        let mut steps = 0;
        while steps < max {
            if self.ctx.cancel.is_cancelled() {
                return Err(Interrupt::Cancelled);
            }
            steps += 1;
            self.iterations += 1;
            self.emitter
                .emit(EventKind::TurnStarted {
                    iteration: self.iterations,
                })
                .await?;
            self.maybe_compact().await?;
            let estimated = keel_llm::tokens::estimate_request(
                &self.engine.system_prompt,
                &self.tools,
                &self.messages,
            );
            let (needed, window) = (self.context_tokens(), self.compactor.budget.window);
            if needed > window {
                return Ok(Ending::Failed(Failure::new(
                    ErrorCode::ContextOverflow,
                    format!(
                        "the next request needs about {needed} tokens, more than the model's {window}-token window, even after compaction"
                    ),
                )));
            }
            let turn = match self.call_model().await {
                Ok(turn) => turn,
                // Too large for the server (its window is smaller than Keel thought): learn
                // the window, compact to it, and send once more.
                Err(Interrupt::Llm(keel_llm::LlmError::ContextLength { window, .. })) => {
                    self.compactor
                        .budget
                        .learn_overflow(window, self.context_tokens());
                    self.maybe_compact().await?;
                    match self.call_model().await {
                        Ok(turn) => turn,
                        Err(Interrupt::Llm(e)) => {
                            return Ok(Ending::Failed(Failure::from_llm(&e)));
                        }
                        Err(other) => return Err(other),
                    }
                }
                Err(Interrupt::Llm(e)) => return Ok(Ending::Failed(Failure::from_llm(&e))),
                Err(other) => return Err(other),
            };
            self.usage.add(&turn.usage);
            self.compactor.budget.observe(estimated, &turn.usage);
            self.emitter
                .emit(EventKind::AssistantMessage {
                    text: turn.text.clone(),
                    reasoning: turn.reasoning.clone(),
                    tool_calls: turn.tool_calls.len(),
                    usage: turn.usage,
                })
                .await?;
            let calls =
                crate::calls::prepare_calls(&self.engine.tools, &turn, self.ctx.workspace.root());
            let message = crate::calls::transcript_message(&turn, &calls);
            if message.content.is_empty() {
                // An empty reply is not an answer: nudge once per occurrence and go on.
                self.push_message(Message::assistant_text("(no reply)"))
                    .await?;
                self.push_message(Message::user_text(
                    "Your reply was empty. Continue the task with a tool call, or reply with a summary if it is done.",
                ))
                .await?;
                continue;
            }
            self.push_message(message).await?;
            if turn.tool_calls.is_empty() {
                if turn.stop_reason == keel_llm::StopReason::MaxTokens {
                    self.push_message(Message::user_text(
                        "Your reply was cut off at the output limit. Continue where you stopped.",
                    ))
                    .await?;
                    continue;
                }
                match self.finish(&turn.text).await? {
                    Some(ending) => return Ok(ending),
                    None => continue,
                }
            }
            if let Batch::Stop(ending) = self.run_tools(&calls).await? {
                return Ok(ending);
            }
        }
        Ok(self.out_of_budget(max))
    }

    /// The iteration cap was hit: a run that was still progressing is `blocked` ("budget
    /// exhausted", resumable); one that was not is a `max_steps` failure.
    fn out_of_budget(&self, max: u32) -> Ending {
        if self.progress.recent(self.iterations, PROGRESS_WINDOW) {
            let mut evidence = vec![format!(
                "a new successful step happened within the last {PROGRESS_WINDOW} iterations"
            )];
            if !self.files.is_empty() {
                evidence.push(format!(
                    "files changed so far: {}",
                    self.files.iter().cloned().collect::<Vec<_>>().join(", ")
                ));
            }
            return Ending::Blocked(BlockerDraft {
                question: format!(
                    "Budget exhausted: the run used its {max} iterations while still making progress. Resume the session to continue, optionally with guidance."
                ),
                source: BlockerSource::Budget,
                evidence,
            });
        }
        let mut failure = Failure::new(
            ErrorCode::MaxSteps,
            format!(
                "stopped after {max} iterations without finishing the task; the last {} made no progress (no new successful tool call)",
                PROGRESS_WINDOW.min(max)
            ),
        );
        failure.status = SessionStatus::MaxSteps;
        Ending::Failed(failure)
    }

    /// Saves newly stored oversized results with the session (a store that cannot keep
    /// them leaves them for this run only).
    async fn persist_results(&mut self) {
        for (handle, content) in self.stored_results.take_unsaved() {
            let id = self.emitter.session_id().to_string();
            let _ = self.engine.store.save_result(&id, &handle, &content).await;
        }
    }

    pub(crate) async fn push_message(&mut self, message: Message) -> Result<(), EngineError> {
        let id = self.emitter.session_id().to_string();
        self.engine.store.append_message(&id, &message).await?;
        self.messages.push(message);
        Ok(())
    }

    fn request(&self) -> ChatRequest {
        ChatRequest {
            system: self.engine.system_prompt.clone(),
            tools: self.tools.clone(),
            messages: wire_messages(&self.messages),
            max_tokens: None,
        }
    }

    /// One model request with streaming. Retries and fallbacks happen inside the provider
    /// stream (the engine's [`keel_llm::ReliableProvider`]); they surface here as events.
    async fn call_model(&mut self) -> Result<ModelTurn, Interrupt> {
        let request = self.request();
        tokio::select! {
            biased;
            _ = self.ctx.cancel.cancelled() => Err(Interrupt::Cancelled),
            r = self.stream_once(&request) => r,
        }
    }

    async fn stream_once(&self, request: &ChatRequest) -> Result<ModelTurn, Interrupt> {
        let mut stream = self
            .engine
            .provider
            .stream(request)
            .await
            .map_err(Interrupt::Llm)?;
        let mut assembler = TurnAssembler::new();
        while let Some(event) = stream.next().await {
            let event = event.map_err(Interrupt::Llm)?;
            let kind = match &event {
                StreamEvent::TextDelta(t) if !t.is_empty() => Some(EventKind::AssistantDelta {
                    text: t.clone(),
                    channel: DeltaChannel::Text,
                }),
                StreamEvent::ReasoningDelta(t) if !t.is_empty() => {
                    Some(EventKind::AssistantDelta {
                        text: t.clone(),
                        channel: DeltaChannel::Reasoning,
                    })
                }
                StreamEvent::Retry {
                    attempt,
                    attempts,
                    delay,
                    message,
                } => Some(EventKind::ModelRetry {
                    attempt: *attempt,
                    attempts: *attempts,
                    delay_ms: delay.as_millis() as u64,
                    message: message.clone(),
                }),
                StreamEvent::Fallback { from, to, message } => Some(EventKind::ModelFallback {
                    from: from.clone(),
                    to: to.clone(),
                    message: message.clone(),
                }),
                _ => None,
            };
            if let Some(kind) = kind {
                self.emitter.emit(kind).await?;
            }
            let done = matches!(event, StreamEvent::Finish { .. });
            assembler.push(event);
            if done {
                break;
            }
        }
        assembler.finish().map_err(Interrupt::Llm)
    }

    /// Checks every tool call before it runs: the loop guard, then the phase policy (a
    /// disallowed call is refused with a structured `phase_violation` and an event), then
    /// approval (a denied call is refused with the reason).
    async fn pre_dispatch(&mut self, call: &ToolCall) -> Result<Dispatch, EngineError> {
        if let Some(looping) = self.guard.check(call) {
            return Ok(Dispatch::Stop(
                Failure::new(ErrorCode::LoopDetected, looping.clone()),
                format!("not run: {looping}; a loop is not progress"),
            ));
        }
        if let Some(refusal) = crate::agents::scope_refusal(self.engine, call) {
            return Ok(Dispatch::Refuse(refusal));
        }
        if let Some(refusal) = self.skills.check(&call.name) {
            return Ok(Dispatch::Refuse(refusal));
        }
        if let Some(refusal) = self.engine.constitution.check_call(call) {
            return Ok(Dispatch::Refuse(refusal));
        }
        let access = match self.phase_check(call).await? {
            Ok(access) => access,
            Err(refusal) => return Ok(Dispatch::Refuse(refusal)),
        };
        if let Some(gate) = self.approvals.clone()
            && let Err(refusal) = gate
                .check(call, &self.engine.tools, self.emitter, &self.ctx.cancel)
                .await?
        {
            return Ok(Dispatch::Refuse(refusal));
        }
        Ok(Dispatch::Run(access))
    }

    /// Runs an allowed call: `advance_phase` is the loop's own; anything that may write is
    /// preceded by the turn's snapshot.
    async fn dispatch(
        &mut self,
        call: &ToolCall,
        access: CommandAccess,
    ) -> Result<Result<Result<ToolOutput, ToolError>, String>, EngineError> {
        if call.name == ADVANCE_PHASE && self.phase.is_some() {
            return Ok(Ok(self.advance_call(&call.arguments).await?));
        }
        if call.name == crate::skills::SKILL_TOOL {
            return Ok(Ok(self.skills.call(&call.arguments)));
        }
        if call.name == crate::results::READ_RESULT {
            return Ok(Ok(self.stored_results.read(&call.arguments)));
        }
        if crate::agents::is_agent_tool(&call.name) {
            return Ok(Ok(self.agent_call(call).await));
        }
        self.snapshot_before_write(call, access).await?;
        Ok(tokio::select! {
            biased;
            _ = self.ctx.cancel.cancelled() => Ok(Err(ToolError::model("cancelled by the user while running"))),
            r = self.execute(call, access) => r,
        })
    }

    /// Runs a tool, turning a panic inside it into an internal error instead of a crash.
    async fn execute(
        &self,
        call: &ToolCall,
        access: CommandAccess,
    ) -> Result<Result<ToolOutput, ToolError>, String> {
        let ctx = self.context_for(access);
        let run = self
            .engine
            .tools
            .execute(&call.name, call.arguments.clone(), &ctx);
        match AssertUnwindSafe(run).catch_unwind().await {
            Ok(result) => Ok(result),
            Err(panic) => Err(panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "unknown panic".into())),
        }
    }

    /// Runs the calls of one reply in order and records what they mean for the guardrails. A
    /// cancelled, fatal, looping or blocking call still leaves a result for every call, so the
    /// transcript stays valid for resumption.
    async fn run_tools(&mut self, prepared: &[PreparedCall]) -> Result<Batch, Interrupt> {
        let mut blocks = Vec::with_capacity(prepared.len());
        let mut stop: Option<(Ending, &'static str)> = None;
        for p in prepared {
            let mut refused = false;
            let mut ran_with: Option<CommandAccess> = None;
            self.emitter
                .emit(EventKind::ToolCall {
                    id: p.sent.id.clone(),
                    name: p.sent.name.clone(),
                    arguments: p.sent.arguments.clone(),
                })
                .await?;
            // The canonical call runs and is what the guardrails see (a `Bash` call is checked
            // as `run_command`); every repair is an event and a note in the result.
            let call = &p.runnable();
            let note = match &p.resolved {
                Ok(r) => {
                    for repair in &r.repairs {
                        self.emitter
                            .emit(EventKind::ToolRepaired {
                                call_id: call.id.clone(),
                                from: repair.from.clone(),
                                to: repair.to.clone(),
                                how: repair.how.clone(),
                            })
                            .await?;
                    }
                    r.note()
                }
                Err(_) => None,
            };
            let result = if let Some((_, why)) = &stop {
                Err(ToolError::model(format!("not run: {why}")))
            } else if self.ctx.cancel.is_cancelled() {
                Err(ToolError::model("not run: the user cancelled the turn"))
            } else if let Err(unresolved) = &p.resolved {
                // A call that cannot run as sent is the model's to fix: it reads why (with the
                // schema); it counts for the loop guard and the fix tracker like any failure.
                match self.guard.check(call) {
                    Some(looping) => {
                        stop = Some((
                            Ending::Failed(Failure::new(ErrorCode::LoopDetected, looping.clone())),
                            "a loop was detected",
                        ));
                        Err(ToolError::Model(format!(
                            "not run: {looping}; a loop is not progress"
                        )))
                    }
                    None => Err(ToolError::Model(unresolved.clone())),
                }
            } else {
                match self.pre_dispatch(call).await? {
                    Dispatch::Run(access) => {
                        ran_with = Some(access);
                        let outcome = self.dispatch(call, access).await?;
                        match outcome {
                            Ok(r) => r,
                            Err(panic) => {
                                let failure = Failure::new(
                                    ErrorCode::InternalError,
                                    format!("tool `{}` crashed: {panic}", call.name),
                                );
                                stop = Some((
                                    Ending::Failed(failure),
                                    "an earlier tool call in this reply crashed",
                                ));
                                Err(ToolError::model(format!(
                                    "internal error: the tool crashed ({panic})"
                                )))
                            }
                        }
                    }
                    Dispatch::Refuse(msg) => {
                        refused = true;
                        Err(ToolError::Model(msg))
                    }
                    Dispatch::Stop(failure, msg) => {
                        stop = Some((Ending::Failed(failure), "a loop was detected"));
                        Err(ToolError::Model(msg))
                    }
                }
            };
            let (content, is_error, mut details, metadata) = match result {
                Ok(ToolOutput {
                    content,
                    details,
                    metadata,
                }) => {
                    let content = self.after_success(call, content, &details, &mut stop).await;
                    let content = self.tail_rules.annotate(call, content);
                    let content = crate::skills::annotate(&mut self.skills, call, content);
                    (content, false, details, metadata)
                }
                Err(ToolError::Model(msg)) => {
                    if !refused {
                        self.after_error(call, &msg, &mut stop);
                    }
                    (msg, true, ToolDetails::default(), None)
                }
                Err(ToolError::Fatal(msg)) => {
                    let failure = Failure::new(
                        ErrorCode::ToolFailure,
                        format!("tool `{}` failed: {msg}", call.name),
                    )
                    .with_original(msg.clone())
                    .with_hint("check the message above; it is not something the model can fix");
                    if stop.is_none() {
                        stop = Some((
                            Ending::Failed(failure),
                            "an earlier tool call in this reply failed fatally",
                        ));
                    }
                    (msg, true, ToolDetails::default(), None)
                }
            };
            if let Some(access) = ran_with {
                self.phase_note_call(call, !is_error, access);
            }
            if !is_error && changes_state(&self.engine.tools, call) {
                // A call that changed something is progress, not a loop, however alike the
                // calls around it are.
                self.guard.reset();
            }
            let content = match note {
                Some(note) if !content.starts_with("not run:") => format!("{note}\n{content}"),
                _ => content,
            };
            let original_chars = content.chars().count();
            let content = self.stored_results.fit(content, MAX_TOOL_RESULT_CHARS);
            self.persist_results().await;
            let shown_chars = content.chars().count();
            if shown_chars < original_chars {
                details.truncated = Some(Truncation {
                    original_chars,
                    shown_chars,
                });
            }
            self.emitter
                .emit(EventKind::ToolResult {
                    id: call.id.clone(),
                    name: call.name.clone(),
                    is_error,
                    content: content.clone(),
                    details,
                    metadata,
                })
                .await?;
            blocks.push(ContentBlock::ToolResult {
                tool_use_id: call.id.clone(),
                content,
                is_error,
            });
        }
        // A phase step is done (violations count too); auto-advance says so after the results.
        // A batch that ends the attempt does not advance: the failure belongs to this phase.
        if stop.is_none()
            && let Some(note) = self.phase_step_done().await?
        {
            blocks.push(ContentBlock::Text { text: note });
        }
        // Keep the transcript whole (every tool_use answered), whatever happens next.
        self.push_message(Message {
            role: Role::User,
            content: blocks,
        })
        .await?;
        if self.ctx.cancel.is_cancelled() {
            return Err(Interrupt::Cancelled);
        }
        Ok(match stop {
            Some((ending, _)) => Batch::Stop(ending),
            None => Batch::Continue,
        })
    }

    /// Records a successful call; a question for the user (`ask_user`'s blocker request) is
    /// answered interactively or becomes a blocker. Returns the content the model sees.
    async fn after_success(
        &mut self,
        call: &ToolCall,
        content: String,
        details: &ToolDetails,
        stop: &mut Option<(Ending, &'static str)>,
    ) -> String {
        self.note_change(call, details);
        if let Some(code) = failed_exit_code(&self.engine.tools, call, details) {
            // A command that ran but failed is a failed attempt, whatever the tool's result
            // type says.
            self.after_error(call, &format!("exit code {code}\n{content}"), stop);
            return content;
        }
        let target = call_target(call);
        self.tracker.record_success(&call.name, target.as_deref());
        self.progress.record_success(call, self.iterations);
        let is_control = self
            .engine
            .tools
            .get(&call.name)
            .is_some_and(|t| t.effect() == ToolEffect::Control);
        let Some((question, context)) = requested_question(details).filter(|_| is_control) else {
            return content;
        };
        if let Some(prompt) = self.ask_user.clone()
            && let Some(answer) = prompt.ask(&question, context.as_deref()).await
        {
            return format!("The user answered: {answer}");
        }
        if stop.is_none() {
            let mut evidence = Vec::new();
            if let Some(c) = context {
                evidence.push(c);
            }
            *stop = Some((
                Ending::Blocked(BlockerDraft {
                    question,
                    source: BlockerSource::Model,
                    evidence,
                }),
                "the run paused for the user's answer",
            ));
        }
        content
    }

    /// Records a failed call with the fix tracker and checks it for blocker patterns.
    fn after_error(
        &mut self,
        call: &ToolCall,
        message: &str,
        stop: &mut Option<(Ending, &'static str)>,
    ) {
        if message.starts_with("not run:") {
            return;
        }
        let effect = self.engine.tools.get(&call.name).map(|t| t.effect());
        let fix_attempt = matches!(
            effect,
            Some(ToolEffect::WritesFiles | ToolEffect::RunsCommands)
        );
        let target = call_target(call);
        let escalation =
            self.tracker
                .record_error(&call.name, target.as_deref(), message, fix_attempt);
        if stop.is_some() {
            return;
        }
        if effect == Some(ToolEffect::RunsCommands)
            && let Some(draft) = credentials_blocker(&call.name, message)
        {
            *stop = Some((
                Ending::Blocked(draft),
                "the run paused: credentials are missing",
            ));
            return;
        }
        if let Some(esc) = escalation {
            *stop = Some((
                Ending::Blocked(BlockerDraft {
                    question: esc.question,
                    source: BlockerSource::FixTracker,
                    evidence: esc.evidence,
                }),
                "the run paused for a human to look at the repeated failures",
            ));
        }
    }
}

/// The non-zero exit code a command-running tool reported, if any.
fn failed_exit_code(
    tools: &keel_tools::ToolRegistry,
    call: &ToolCall,
    details: &ToolDetails,
) -> Option<i32> {
    let runs_commands = tools
        .get(&call.name)
        .is_some_and(|t| t.effect() == ToolEffect::RunsCommands);
    let code = details.exit_code?;
    (runs_commands && code != 0).then_some(code)
}

/// The messages as sent: consecutive messages of the same role merged (a resumed session's
/// new message after tool results, a recovery note), so every provider sees roles alternate.
/// Tool results stay first in a merged user message.
pub(crate) fn wire_messages(messages: &[Message]) -> Vec<Message> {
    let mut out: Vec<Message> = Vec::with_capacity(messages.len());
    for m in messages {
        match out.last_mut() {
            Some(last) if last.role == m.role => last.content.extend(m.content.iter().cloned()),
            _ => out.push(m.clone()),
        }
    }
    out
}

/// Whether a successful `call` changed the workspace or the run's state (a write, a phase
/// change).
fn changes_state(tools: &keel_tools::ToolRegistry, call: &ToolCall) -> bool {
    tools
        .get(&call.name)
        .is_some_and(|t| matches!(t.effect(), ToolEffect::WritesFiles | ToolEffect::Control))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consecutive_messages_of_one_role_are_merged_for_the_wire() {
        let results = Message {
            role: Role::User,
            content: vec![ContentBlock::ToolResult {
                tool_use_id: "c1".into(),
                content: "ok".into(),
                is_error: false,
            }],
        };
        let msgs = vec![
            Message::user_text("task"),
            Message::assistant_text("calling"),
            results,
            Message::user_text("continue please"),
        ];
        let wire = wire_messages(&msgs);
        assert_eq!(wire.len(), 3);
        assert!(matches!(
            wire[2].content[0],
            ContentBlock::ToolResult { .. }
        ));
        assert_eq!(wire[2].text(), "continue please");
    }
}
