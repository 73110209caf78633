//! One attempt of the ReAct loop: ask the model, run the tools it calls, feed back the results,
//! until it answers without tool calls and verification passes (completed), a blocker is
//! raised (blocked), a failure ends it (failed) or the user cancels (cancelled).
//!
//! The loop only asks the session's hooks (`hooks`) at its points: before each request
//! (compaction, which hands back a smaller working context), before each tool call (the loop guard, skills, the constitution, the
//! plan_exec phase policy, approval), after each result (the fix tracker, blockers, rules,
//! the phase's exit criteria, verification's change tracking), once after a reply's results
//! (auto-advance) and when the model says it is done (ambiguity, the phase nudge, final
//! verification), and right before an allowed call runs (the turn's snapshot before its
//! first write). The fallback chain wraps the whole attempt (`fallback`). Starting and
//! resuming sessions is `session`.

use std::collections::BTreeSet;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures::{FutureExt, StreamExt};
use keel_llm::{ChatRequest, ModelTurn, StreamEvent, TurnAssembler};
use keel_protocol::{
    ContentBlock, DeltaChannel, ErrorCode, EventKind, Message, Role, SessionStatus, ToolCall,
    ToolDetails, ToolSpec, Truncation, Usage,
};
use keel_tools::sandbox::SandboxPolicy;
use keel_tools::{ToolContext, ToolError, ToolOutput};

use crate::blockers::{BlockerDraft, BlockerSource};
use crate::calls::PreparedCall;
use crate::compaction::ContextBudget;
use crate::ending::{Ending, Failure, Interrupt};
use crate::engine::{Engine, RunOptions};
use crate::hooks::builtin::{Dispatch, Outcome, Stop};
use crate::{Emitter, EngineError};
use keel_phase::CommandAccess;
use keel_tracker::PROGRESS_WINDOW;

mod agents;
mod chain;
mod hooks;
mod window;

/// The state of a session's loop: the working context and everything the guardrails track.
pub(crate) struct Run<'a> {
    engine: &'a Engine,
    emitter: &'a Emitter,
    ctx: ToolContext,
    /// The system prompt of this run: the engine's, or its compact form for a small window
    /// (`head`). Part of the byte-stable head.
    system_prompt: Arc<str>,
    /// The active tool catalog, computed once: part of the byte-stable head.
    tools: Arc<[ToolSpec]>,
    /// The run uses the compact head (`head`): a window too small for the full one.
    compact_head: bool,
    /// The working context sent to the model (compaction may shrink it; the store keeps all).
    messages: Arc<Vec<Message>>,
    /// Session-wide usage.
    usage: Usage,
    /// Session-wide model requests.
    iterations: u32,
    /// The context window as known now (learned from overflows) and the estimate's
    /// calibration.
    budget: ContextBudget,
    /// Files the session created or modified (from tool metadata `paths`).
    files: Arc<BTreeSet<String>>,
    /// The recovery attempt in progress (`fallback`): a model failure during it names the
    /// failure it retried.
    recovering: Option<Recovering>,
    /// The hooks of this run, in order (each guardrail hook owns its state for this run).
    hooks: crate::hooks::Hooks,
    /// Oversized tool results kept whole for `read_result` (session working memory).
    stored_results: keel_results::StoredResults,
    /// The subagents this run opened (`agents`).
    agents: crate::agents::AgentPool,
}

/// A recovery attempt in progress.
#[derive(Debug, Clone, PartialEq)]
struct Recovering {
    attempt: u32,
    /// The failure it retries.
    after: String,
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
        budget: ContextBudget,
        options: &RunOptions,
    ) -> Self {
        let (system_prompt, tools, compact_head) = keel_knowledge::head::for_window(
            &engine.system_prompt,
            &engine.tools.specs(),
            budget.window,
        );
        Self {
            engine,
            emitter,
            ctx,
            system_prompt: system_prompt.into(),
            tools: tools.into(),
            compact_head,
            messages: Arc::new(Vec::new()),
            usage: Usage::default(),
            iterations: 0,
            budget,
            files: Arc::default(),
            recovering: None,
            hooks: crate::hooks::builtin::for_run(engine, options),
            stored_results: keel_results::StoredResults::default(),
            agents: crate::agents::AgentPool::new(
                engine.config.agents.max_concurrent,
                options.approvals.clone(),
            ),
        }
    }

    /// Goes on from a stored session: its working context, its totals so far (usage, model
    /// requests) and the files it wrote.
    pub(crate) fn continue_from(
        &mut self,
        messages: Vec<Message>,
        usage: Usage,
        iterations: u32,
        files: BTreeSet<String>,
    ) {
        self.messages = Arc::new(messages);
        self.usage = usage;
        self.iterations = iterations;
        self.files = Arc::new(files);
    }

    /// The oversized results the session stored earlier, for `read_result`.
    pub(crate) fn restore_results(&mut self, stored: Vec<(String, String)>) {
        self.stored_results.restore(stored);
    }

    /// The working context.
    pub(crate) fn messages(&self) -> &[Message] {
        &self.messages
    }

    /// Session-wide usage so far.
    pub(crate) fn usage(&self) -> Usage {
        self.usage
    }

    /// Session-wide model requests so far.
    pub(crate) fn iterations(&self) -> u32 {
        self.iterations
    }

    /// The run uses the compact head (a window too small for the full one).
    pub(crate) fn compact_head(&self) -> bool {
        self.compact_head
    }

    /// Cancels the subagents still running and rolls their usage up into the run's; every
    /// child's share, in the order they were opened.
    pub(crate) async fn close_agents(&mut self) -> Vec<keel_protocol::ChildUsage> {
        let (usage, children) = self.agents.close_all().await;
        self.usage.add(&usage);
        children
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
            // Compaction measures with the provider's own figure (what it learned so far).
            self.budget.set_scale(self.engine.provider.token_scale());
            if let Some(ending) = self.before_request().await? {
                return Ok(ending);
            }
            let estimated = keel_llm::tokens::estimate_request(
                &self.system_prompt,
                &self.tools,
                &self.messages,
            );
            let (needed, window) = (self.context_tokens(), self.budget.window);
            if needed > window {
                return Ok(Ending::Failed(self.overflow(needed, window)));
            }
            let turn = match self.call_model().await {
                Ok(turn) => turn,
                // Too large for the server (its window is smaller than Keel thought): learn
                // the window, compact to it, and send once more.
                Err(Interrupt::Llm(keel_llm::LlmError::ContextLength { window, .. })) => {
                    match self.resend_smaller(window).await? {
                        Ok(turn) => turn,
                        Err(e) => return Ok(Ending::Failed(self.model_failure(&e))),
                    }
                }
                Err(Interrupt::Llm(e)) => return Ok(Ending::Failed(self.model_failure(&e))),
                Err(other) => return Err(other),
            };
            self.usage.add(&turn.usage);
            self.budget.observe(estimated, &turn.usage);
            self.emitter
                .emit(EventKind::AssistantMessage {
                    text: turn.text.clone(),
                    reasoning: turn.reasoning.clone(),
                    tool_calls: turn.tool_calls.len(),
                    usage: turn.usage,
                })
                .await?;
            // A call to a tool of an MCP server still starting waits (bounded) for it.
            let tools = &self.engine.tools;
            let waits = turn.tool_calls.iter().map(|c| tools.wait_for(&c.name));
            tokio::select! {
                _ = futures::future::join_all(waits) => {}
                _ = self.ctx.cancel.cancelled() => {}
            }
            let calls =
                crate::calls::prepare_calls(&self.engine.tools, &turn, self.ctx.workspace.root());
            let message = crate::calls::transcript_message(&turn, &calls);
            let empty = message.content.is_empty()
                || (turn.tool_calls.is_empty() && turn.text.trim().is_empty());
            // An empty or whitespace reply is not an answer: the hooks say what the model is
            // told, or end the attempt (`finish`: twice in a row).
            let note = match self.reply_arrived(empty) {
                Ok(note) => note,
                Err(ending) => return Ok(ending),
            };
            if empty {
                self.push_message(Message::assistant_text("(no reply)"))
                    .await?;
                self.push_message(Message::user_text(note)).await?;
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
                match self.on_finish(&turn.text).await? {
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
        let mut evidence = self.progress_evidence();
        if !evidence.is_empty() {
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

    /// This run's result budget (`results::output_budget` for the window it knows now).
    pub(crate) fn output_budget(&self) -> usize {
        keel_results::output_budget(
            self.engine.config.agent.max_output_chars,
            self.budget.window,
        )
    }

    pub(crate) async fn push_message(&mut self, message: Message) -> Result<(), EngineError> {
        let id = self.emitter.session_id().to_string();
        self.engine.store.append_message(&id, &message).await?;
        Arc::make_mut(&mut self.messages).push(message);
        Ok(())
    }

    fn request(&self) -> ChatRequest {
        ChatRequest {
            system: self.system_prompt.to_string(),
            tools: self.tools.to_vec(),
            messages: wire_messages(&self.messages),
            max_tokens: None,
        }
    }

    /// One model request with streaming. Retries and fallbacks happen inside the provider
    /// stream (the engine's [`keel_llm::ReliableProvider`]); they surface here as events.
    pub(crate) async fn call_model(&mut self) -> Result<ModelTurn, Interrupt> {
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
                StreamEvent::Notice(message) => Some(EventKind::ModelNotice {
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

    /// Runs an allowed call: a call a hook owns (`advance_phase`, the skill tool) and
    /// `read_result` are the run's own; any other is first shown to the hooks' `before_run`
    /// (the turn's snapshot before its first write).
    /// `approved`: a person approved this very call. `agents_changed`: set when subagents
    /// the call waited for changed the workspace.
    async fn dispatch(
        &mut self,
        call: &ToolCall,
        access: CommandAccess,
        approved: bool,
        agents_changed: &mut bool,
    ) -> Result<Result<Result<ToolOutput, ToolError>, String>, EngineError> {
        if let Some(result) = self.hook_tool(call).await? {
            return Ok(Ok(result));
        }
        if call.name == keel_results::READ_RESULT {
            let limit = self.output_budget();
            return Ok(Ok(self.stored_results.read(&call.arguments, limit)));
        }
        if crate::agents::is_agent_tool(&call.name) {
            let (result, changed) = self.agent_call(call).await;
            *agents_changed = changed;
            return Ok(Ok(result));
        }
        self.before_run(call, access).await?;
        Ok(tokio::select! {
            biased;
            _ = self.ctx.cancel.cancelled() => Ok(Err(ToolError::model("cancelled by the user while running"))),
            r = self.execute(call, access, approved) => r,
        })
    }

    /// The tool context a call runs with: the read-only sandbox when the hooks granted only
    /// read access (a read-only phase, or approval's read-only lane); in plan_exec, the
    /// workspace-write sandbox when the phase policy granted write access.
    fn context_for(&self, access: CommandAccess) -> keel_tools::ToolContext {
        let mut ctx = self.ctx.clone();
        match access {
            CommandAccess::ReadOnly => ctx.sandbox = SandboxPolicy::ReadOnly,
            CommandAccess::Write if self.engine.phase_policy.is_some() => {
                ctx.sandbox = SandboxPolicy::WorkspaceWrite;
            }
            CommandAccess::Write => {}
        }
        ctx
    }

    /// Runs a tool, turning a panic inside it into an internal error instead of a crash.
    /// `approved`: a person approved this very call ([`keel_tools::ToolContext::approved`]).
    async fn execute(
        &self,
        call: &ToolCall,
        access: CommandAccess,
        approved: bool,
    ) -> Result<Result<ToolOutput, ToolError>, String> {
        let mut ctx = self.context_for(access);
        ctx.approved = approved;
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

    /// Runs the calls of one reply in order; the hooks judge each before it runs and record
    /// what its result means. A cancelled, fatal, looping or blocking call still leaves a
    /// result for every call, so the transcript stays valid for resumption.
    async fn run_tools(&mut self, prepared: &[PreparedCall]) -> Result<Batch, Interrupt> {
        let mut blocks = Vec::with_capacity(prepared.len());
        let mut stop: Stop = None;
        for p in prepared {
            self.emitter
                .emit(EventKind::ToolCall {
                    id: p.sent.id.clone(),
                    name: p.sent.name.clone(),
                    arguments: p.sent.arguments.clone(),
                })
                .await?;
            // The canonical call runs and is what the hooks see (a `Bash` call is checked as
            // `run_command`); every repair is an event and a note in the result.
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
            let mut out = self.run_one(p, call, &mut stop).await?;
            self.after_tool(call, &mut out, &mut stop).await;
            if !out.is_error && !out.details.files.is_empty() {
                Arc::make_mut(&mut self.files).extend(out.details.files.iter().cloned());
            }
            let content = match note {
                Some(note) if !out.content.starts_with("not run:") => {
                    format!("{note}\n{}", out.content)
                }
                _ => out.content,
            };
            let mut details = out.details;
            let original_chars = content.chars().count();
            // Over the result budget: stored whole, the model sees head, tail and handle.
            let content = if call.name == keel_results::READ_RESULT {
                content
            } else {
                let limit = self.output_budget();
                self.stored_results.fit(content, limit)
            };
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
                    is_error: out.is_error,
                    content: content.clone(),
                    details,
                    metadata: out.metadata,
                })
                .await?;
            self.emitter
                .workspace_checks(self.ctx.workspace.root(), Some(&call.id))
                .await?;
            blocks.push(ContentBlock::ToolResult {
                tool_use_id: call.id.clone(),
                content,
                is_error: out.is_error,
            });
        }
        // Hooks may add notes after the results (a phase step is done and auto-advance moved
        // on). A batch that ends the attempt adds none: the failure belongs to this step.
        if stop.is_none() {
            for text in self.after_batch().await? {
                blocks.push(ContentBlock::Text { text });
            }
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

    /// One call of a batch: not run after a stop or a cancel, the model's to fix when it
    /// could not be resolved, else judged by the hooks and run.
    async fn run_one(
        &mut self,
        p: &PreparedCall,
        call: &ToolCall,
        stop: &mut Stop,
    ) -> Result<Outcome, EngineError> {
        let (mut ran_with, mut refused, mut agents_changed) = (None, false, false);
        let result = if let Some((_, why)) = stop {
            Err(ToolError::model(format!("not run: {why}")))
        } else if self.ctx.cancel.is_cancelled() {
            Err(ToolError::model("not run: the user cancelled the turn"))
        } else if let Err(unresolved) = &p.resolved {
            // A call that cannot run as sent is the model's to fix: it reads why (with the
            // schema); it counts for the loop guard and the fix tracker like any failure.
            match self.unresolved_call(call) {
                Some(end) => {
                    *stop = Some((end.ending, end.why));
                    Err(ToolError::Model(end.message))
                }
                None => Err(ToolError::Model(unresolved.clone())),
            }
        } else {
            match self.before_tool(call).await? {
                Dispatch::Run(access, approved) => {
                    ran_with = Some(access);
                    match self
                        .dispatch(call, access, approved, &mut agents_changed)
                        .await?
                    {
                        Ok(r) => r,
                        Err(panic) => {
                            let failure = Failure::new(
                                ErrorCode::InternalError,
                                format!("tool `{}` crashed: {panic}", call.name),
                            );
                            *stop = Some((
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
                Dispatch::Stop(ending, why, msg) => {
                    *stop = Some((ending, why));
                    Err(ToolError::Model(msg))
                }
            }
        };
        let mut out = Outcome {
            content: String::new(),
            is_error: true,
            details: ToolDetails::default(),
            metadata: None,
            ran_with,
            refused,
            fatal: false,
            agents_changed,
        };
        match result {
            Ok(output) => {
                out.content = output.content;
                out.is_error = false;
                out.details = output.details;
                out.metadata = output.metadata;
            }
            Err(ToolError::Model(msg)) => out.content = msg,
            Err(ToolError::Failed(output)) => {
                out.content = output.content;
                out.details = output.details;
                out.metadata = output.metadata;
            }
            Err(ToolError::Fatal(msg)) => {
                let failure = Failure::new(
                    ErrorCode::ToolFailure,
                    format!("tool `{}` failed: {msg}", call.name),
                )
                .with_original(msg.clone())
                .with_hint("check the message above; it is not something the model can fix");
                if stop.is_none() {
                    *stop = Some((
                        Ending::Failed(failure),
                        "an earlier tool call in this reply failed fatally",
                    ));
                }
                out.content = msg;
                out.fatal = true;
            }
        }
        Ok(out)
    }
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
