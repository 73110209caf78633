//! The executor: runs a compiled [`Flow`] as a DAG — dependencies, bounded parallelism,
//! per-node timeouts and step caps, failure handling in seed 003's order (the node and its
//! dependents are marked failed → `validation_command` → `rollback_command` if the workspace
//! does not validate → checkpoint only if it then validates), a checkpoint in the store after
//! every node, resume from the last checkpoint, and replay from a run's trace.

pub mod agent;
mod ctx;
pub mod deliver;
mod leaf;
mod node;
mod parallel;
pub mod replay;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::sync::Arc;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use keel_engine::approval::ApprovalRules;
use keel_tools::build_dirs::BuildDirs;
use keel_tools::shell::ShellSettings;
use keel_tools::shell::harness::{CommandSpec, run_command_with_timeout};
use serde::Serialize;
use tokio_util::sync::CancellationToken;

pub use agent::{AgentRequest, AgentResult, AgentRunner, EngineAgents};
pub use ctx::Mode;

use crate::FlowError;
use crate::ir::{Flow, NodeKind, Value};
use crate::state::{NodeState, NodeStatus, RunState, Trace};
use crate::store::{FlowStore, RunRecord};
use ctx::{Ctx, VALIDATION_TIMEOUT};
use leaf::{Leaf, Outcome};
use node::run_node;

/// Progress of a run, for the CLI's live view, chat and the web UI.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum FlowEvent {
    RunStarted {
        run_id: String,
        flow: String,
    },
    NodeStarted {
        run_id: String,
        node: String,
        attempt: u32,
    },
    NodeFinished {
        run_id: String,
        node: String,
        status: String,
        detail: String,
    },
    Step {
        run_id: String,
        step: String,
    },
    RunFinished {
        run_id: String,
        status: String,
    },
}

/// Receives [`FlowEvent`]s.
pub type EventSink = Arc<dyn Fn(&FlowEvent) + Send + Sync>;

/// How a run ended.
#[derive(Debug, Clone)]
pub struct RunSummary {
    pub run_id: String,
    /// `completed`, `failed` or `cancelled`.
    pub status: String,
    pub state: RunState,
    pub trace: Trace,
    pub error: Option<String>,
}

/// Runs flows.
#[derive(Clone)]
pub struct Executor {
    pub store: FlowStore,
    pub agents: Arc<dyn AgentRunner>,
    /// The `[shell]` settings commands run under (sandbox, environment).
    pub shell: ShellSettings,
    /// Build and dependency directories left out of traces and branch copies
    /// (`[snapshots] build_dirs`).
    pub build_dirs: BuildDirs,
    pub events: Option<EventSink>,
    pub cancel: CancellationToken,
    /// The approval policy and rules the flow's own command lines (`shell`/`test`/`verify`
    /// nodes, `validation_command`, `rollback_command`) are judged by before they run, as
    /// `keel run` judges the project's gates: nobody answers a flow run, so a line the policy
    /// would ask about is refused. `None` runs them unjudged (tests of the executor).
    pub approvals: Option<Arc<ApprovalRules>>,
}

impl std::fmt::Debug for Executor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Executor").finish_non_exhaustive()
    }
}

impl Executor {
    fn emit(&self, e: FlowEvent) {
        if let Some(sink) = &self.events {
            sink(&e);
        }
    }

    fn ctx(
        &self,
        run_id: &str,
        flow: Flow,
        workspace: &Path,
        inputs: BTreeMap<String, Value>,
        mode: Mode,
    ) -> Arc<Ctx> {
        let mut flow = flow;
        if is_project_file(&flow.file, workspace) {
            // A script the flow names must be a file of the workspace too (read bounded and
            // regular-only by the scripted provider), not a link or path leading out of it.
            let project = keel_tools::project::ProjectDir::open(workspace).ok();
            let script_ok = |script: &Path| {
                let rel = keel_tools::project::workspace_relative(workspace, script);
                match (rel, &project) {
                    (Some(rel), Some(p)) => p.check_inside(&rel).is_ok(),
                    _ => false,
                }
            };
            let nodes = flow.drop_model_choices(&script_ok);
            if !nodes.is_empty() {
                self.emit(FlowEvent::Step {
                    run_id: run_id.to_string(),
                    step: format!(
                        "note: {} is a file of the workspace, so its choice of provider or model, or of a script outside the workspace (node {}), is not used: your own model settings apply (a repository may not choose where your data goes; run a copy outside the workspace to make it yours)",
                        flow.file.display(),
                        nodes.join(", ")
                    ),
                });
            }
        }
        Arc::new(Ctx {
            run_id: run_id.to_string(),
            flow: Arc::new(flow),
            workspace: workspace.to_path_buf(),
            inputs,
            mode,
            agents: self.agents.clone(),
            shell: self.shell.clone(),
            build_dirs: self.build_dirs.clone(),
            cancel: self.cancel.clone(),
            approvals: self.approvals.clone(),
        })
    }

    /// A new run's record: every node pending, the workspace's tree fingerprinted.
    async fn new_record(
        &self,
        flow: &Flow,
        source: &str,
        workspace: &Path,
        inputs: &BTreeMap<String, Value>,
        status: &str,
        pid: Option<u32>,
    ) -> RunRecord {
        let mut trace = Trace::default();
        match leaf::snapshot(workspace, &self.build_dirs).await {
            Ok(t) => trace.initial_tree = Some(t),
            Err(e) => trace.initial_tree_error = Some(e),
        }
        let mut state = RunState::default();
        for id in flow.all_node_ids() {
            state.nodes.insert(id, NodeState::default());
        }
        RunRecord {
            id: uuid::Uuid::now_v7().to_string(),
            workspace: workspace.display().to_string(),
            flow_name: flow.name.clone(),
            flow_file: flow.file.display().to_string(),
            flow_source: source.to_string(),
            inputs: inputs.clone(),
            status: status.into(),
            state,
            trace,
            pid,
            created_at: keel_store::now_ms(),
            updated_at: keel_store::now_ms(),
        }
    }

    /// Stores a new run of `flow` as `queued` without running it; a job queue's worker runs
    /// it with [`Executor::resume`] (a queued run resumes from its start). Returns its id.
    pub async fn queue(
        &self,
        flow: &Flow,
        source: &str,
        workspace: &Path,
        inputs: &BTreeMap<String, Value>,
    ) -> Result<String, FlowError> {
        let record = self
            .new_record(flow, source, workspace, inputs, "queued", None)
            .await;
        self.store.create(&record).await?;
        Ok(record.id)
    }

    /// Starts a new run of `flow` (compiled from `source`) in `workspace`.
    pub async fn start(
        &self,
        flow: Flow,
        source: &str,
        workspace: &Path,
        inputs: BTreeMap<String, Value>,
    ) -> Result<RunSummary, FlowError> {
        let record = self
            .new_record(
                &flow,
                source,
                workspace,
                &inputs,
                "running",
                Some(std::process::id()),
            )
            .await;
        let (run_id, state, trace) = (
            record.id.clone(),
            record.state.clone(),
            record.trace.clone(),
        );
        self.store.create(&record).await?;
        let lease = self.store.take_lease(&run_id).await?;
        self.emit(FlowEvent::RunStarted {
            run_id: run_id.clone(),
            flow: flow.name.clone(),
        });
        let ctx = self.ctx(&run_id, flow, workspace, inputs, Mode::Live);
        let summary = self.drive(ctx, state, trace, true).await;
        release(lease).await;
        summary
    }

    /// Continues a run from its last checkpoint: finished nodes are not run again; a node
    /// that was running when the process died runs again.
    pub async fn resume(&self, run_id: &str) -> Result<RunSummary, FlowError> {
        let rec = self.store.get(run_id).await?;
        if rec.status == "completed" {
            return Err(FlowError::Usage(format!(
                "flow run {} already completed; nothing to resume",
                rec.id
            )));
        }
        if rec.status == "running"
            && rec.pid != Some(std::process::id())
            && self.store.run_alive(&rec).await?
        {
            return Err(FlowError::Usage(format!(
                "flow run {} is still running in process {}; stop it first (Ctrl-C), then resume",
                rec.id,
                rec.pid.map_or_else(|| "?".to_string(), |p| p.to_string())
            )));
        }
        let lease = self.store.take_lease(&rec.id).await?;
        let flow = crate::compile(&rec.flow_source, Path::new(&rec.flow_file))?;
        let mut state = rec.state;
        for s in state.nodes.values_mut() {
            if s.status == NodeStatus::Running {
                s.status = NodeStatus::Pending;
            }
        }
        // A run that stopped because rollback failed may be resumed after a fix: failed
        // nodes run again.
        for s in state.nodes.values_mut() {
            if s.status == NodeStatus::Failed {
                *s = NodeState {
                    attempts: s.attempts,
                    ..NodeState::default()
                };
            }
        }
        self.store
            .update(
                &rec.id,
                "running",
                &state,
                &rec.trace,
                Some(std::process::id()),
            )
            .await?;
        self.emit(FlowEvent::RunStarted {
            run_id: rec.id.clone(),
            flow: flow.name.clone(),
        });
        let ctx = self.ctx(
            &rec.id,
            flow,
            Path::new(&rec.workspace),
            rec.inputs,
            Mode::Live,
        );
        let summary = self.drive(ctx, state, rec.trace, true).await;
        release(lease).await;
        summary
    }

    async fn drive(
        &self,
        ctx: Arc<Ctx>,
        mut state: RunState,
        mut trace: Trace,
        persist: bool,
    ) -> Result<RunSummary, FlowError> {
        let flow = ctx.flow.clone();
        let run_id = ctx.run_id.clone();
        let mut running = FuturesUnordered::new();
        let mut halted: Option<String> = None;
        // Which recorded execution of each node a replay takes next.
        let mut executions: HashMap<String, usize> = HashMap::new();
        loop {
            if halted.is_none() && !self.cancel.is_cancelled() {
                for n in &flow.nodes {
                    if running.len() >= flow.max_parallel {
                        break;
                    }
                    let Some(st) = state.nodes.get(&n.id) else {
                        continue;
                    };
                    if st.status != NodeStatus::Pending {
                        continue;
                    }
                    let dep_status: Vec<NodeStatus> = n
                        .deps
                        .iter()
                        .map(|d| state.nodes.get(d).map(|s| s.status).unwrap_or_default())
                        .collect();
                    if dep_status.contains(&NodeStatus::Skipped) {
                        mark(&mut state, &n.id, NodeStatus::Skipped, None);
                        self.emit(finished(&run_id, &n.id, NodeStatus::Skipped, ""));
                        continue;
                    }
                    if !dep_status.iter().all(|s| *s == NodeStatus::Completed) {
                        continue;
                    }
                    let attempts = state.nodes.get(&n.id).map_or(0, |s| s.attempts) + 1;
                    if let Some(s) = state.nodes.get_mut(&n.id) {
                        s.status = NodeStatus::Running;
                        s.attempts = attempts;
                    }
                    self.emit(FlowEvent::NodeStarted {
                        run_id: run_id.clone(),
                        node: n.id.clone(),
                        attempt: attempts,
                    });
                    let nth = executions.get(&n.id).copied().unwrap_or(0);
                    *executions.entry(n.id.clone()).or_default() += 1;
                    let outputs = state.outputs();
                    let feedback = state.feedback.get(&n.id).cloned();
                    let ctx = ctx.clone();
                    let node = n.clone();
                    running.push(async move {
                        let o = run_node(Leaf {
                            ctx: &ctx,
                            node: &node,
                            dir: &ctx.workspace,
                            outputs: &outputs,
                            feedback: feedback.as_deref(),
                            attempt: attempts,
                            nth,
                        })
                        .await;
                        (node.id.clone(), o)
                    });
                }
            }
            let Some((id, outcome)) = running.next().await else {
                break;
            };
            if let Some(reason) = self
                .finish(&ctx, &id, outcome, &mut state, &mut trace, persist)
                .await?
            {
                halted.get_or_insert(reason);
            }
        }
        let failed = state.nodes.values().any(|s| s.status == NodeStatus::Failed);
        let unfinished = state.nodes.values().any(|s| !s.status.finished());
        let status = if self.cancel.is_cancelled() {
            "cancelled"
        } else if failed || halted.is_some() || unfinished {
            "failed"
        } else {
            "completed"
        };
        if let Ok(t) = leaf::snapshot(&ctx.workspace, &ctx.build_dirs).await {
            trace.final_tree = Some(crate::tree::fingerprint(&t));
        }
        if persist {
            self.store
                .update(&run_id, status, &state, &trace, None)
                .await?;
        }
        self.emit(FlowEvent::RunFinished {
            run_id: run_id.clone(),
            status: status.to_string(),
        });
        let error = halted.or_else(|| {
            state
                .nodes
                .iter()
                .find(|(_, s)| s.status == NodeStatus::Failed)
                .map(|(id, s)| {
                    format!(
                        "node `{id}` failed: {}",
                        s.error.clone().unwrap_or_default()
                    )
                })
        });
        Ok(RunSummary {
            run_id,
            status: status.to_string(),
            state,
            trace,
            error,
        })
    }

    /// Records a finished node; returns why the run must stop, if it must.
    async fn finish(
        &self,
        ctx: &Arc<Ctx>,
        id: &str,
        outcome: Outcome,
        state: &mut RunState,
        trace: &mut Trace,
        persist: bool,
    ) -> Result<Option<String>, FlowError> {
        let flow = ctx.flow.clone();
        let Some(node) = flow.node(id) else {
            return Ok(None);
        };
        for (inner_id, inner_state, inner_trace) in &outcome.inner {
            state.nodes.insert(inner_id.clone(), inner_state.clone());
            trace.nodes.push(inner_trace.clone());
        }
        trace.nodes.push(outcome.trace.clone());
        let detail = outcome
            .error
            .clone()
            .or_else(|| {
                outcome
                    .outputs
                    .get("output")
                    .map(|v| crate::short(&v.to_string(), 80))
            })
            .unwrap_or_default();
        let mut halt = None;
        if outcome.status == NodeStatus::Completed {
            if let Some(s) = state.nodes.get_mut(id) {
                s.status = NodeStatus::Completed;
                s.outputs = outcome.outputs.clone();
                s.error = None;
            }
            self.emit(finished(&ctx.run_id, id, NodeStatus::Completed, &detail));
            match &node.kind {
                NodeKind::Branch {
                    then, otherwise, ..
                } => {
                    let took_then =
                        outcome.outputs.get("output") == Some(&Value::String("then".into()));
                    let skip = if took_then { otherwise } else { then };
                    for s in skip {
                        mark(state, s, NodeStatus::Skipped, None);
                        self.emit(finished(
                            &ctx.run_id,
                            s,
                            NodeStatus::Skipped,
                            "branch not taken",
                        ));
                    }
                }
                NodeKind::Review {
                    on_changes,
                    max_loops,
                    ..
                } if outcome.outputs.get("approved") == Some(&Value::Bool(false)) => {
                    let taken = state.loops.get(id).copied().unwrap_or(0);
                    match on_changes {
                        Some(target) if taken < *max_loops => {
                            let path = loop_path(&flow, target, id);
                            for n in &path {
                                if let Some(s) = state.nodes.get_mut(n) {
                                    s.status = NodeStatus::Pending;
                                }
                            }
                            let comments = outcome
                                .outputs
                                .get("output")
                                .map(|v| v.to_string())
                                .unwrap_or_default();
                            state.feedback.insert(target.clone(), comments);
                            state.loops.insert(id.to_string(), taken + 1);
                            self.step(ctx, trace, format!("loop_back:{id}->{target}"));
                        }
                        _ => {
                            let noun = if taken == 1 {
                                "loop-back"
                            } else {
                                "loop-backs"
                            };
                            let reason =
                                format!("the reviewer still requests changes after {taken} {noun}");
                            return self.fail(ctx, node, reason, state, trace, persist).await;
                        }
                    }
                }
                _ => {}
            }
            self.step(ctx, trace, format!("checkpoint:{id}"));
            if persist {
                self.store
                    .checkpoint(&ctx.run_id, id, "running", state, trace)
                    .await?;
            }
        } else {
            let reason = outcome.error.unwrap_or_else(|| "failed".into());
            if let Some(s) = state.nodes.get_mut(id) {
                s.outputs = outcome.outputs;
            }
            halt = self.fail(ctx, node, reason, state, trace, persist).await?;
        }
        let _ = detail;
        Ok(halt)
    }

    fn step(&self, ctx: &Ctx, trace: &mut Trace, step: String) {
        self.emit(FlowEvent::Step {
            run_id: ctx.run_id.clone(),
            step: step.clone(),
        });
        trace.steps.push(step);
    }

    /// Seed 003's order: the node and its dependents failed → validate → roll back if the
    /// workspace does not validate → validate again → checkpoint only if it validates.
    async fn fail(
        &self,
        ctx: &Arc<Ctx>,
        node: &crate::ir::Node,
        reason: String,
        state: &mut RunState,
        trace: &mut Trace,
        persist: bool,
    ) -> Result<Option<String>, FlowError> {
        let id = node.id.as_str();
        mark(state, id, NodeStatus::Failed, Some(reason.clone()));
        self.emit(finished(&ctx.run_id, id, NodeStatus::Failed, &reason));
        self.step(ctx, trace, format!("failed:{id}"));
        let dependents = dependents(&ctx.flow, id);
        for d in &dependents {
            if state.nodes.get(d).is_some_and(|s| !s.status.finished()) {
                mark(
                    state,
                    d,
                    NodeStatus::Failed,
                    Some(format!("dependency `{id}` failed")),
                );
                self.emit(finished(
                    &ctx.run_id,
                    d,
                    NodeStatus::Failed,
                    &format!("dependency `{id}` failed"),
                ));
            }
        }
        let list: Vec<&str> = dependents.iter().map(String::as_str).collect();
        self.step(
            ctx,
            trace,
            format!("dependents_failed:{id}:{}", list.join(",")),
        );
        let mut saves = true;
        let mut halt = None;
        if let Some(validation) = &node.validation_command {
            let ok = self.command(ctx, validation).await;
            self.step(ctx, trace, format!("validate:{id}:{}", pass(ok)));
            if !ok && let Some(rollback) = &node.rollback_command {
                let rolled = self.command(ctx, rollback).await;
                self.step(
                    ctx,
                    trace,
                    format!("rollback:{id}:{}", if rolled { "ok" } else { "failed" }),
                );
                let again = rolled && self.command(ctx, validation).await;
                if rolled {
                    self.step(
                        ctx,
                        trace,
                        format!("validate_after_rollback:{id}:{}", pass(again)),
                    );
                }
                if !again {
                    saves = false;
                    halt = Some(format!(
                        "node `{id}` failed and the workspace does not validate after its rollback; fix it, then `keel flow resume {}`",
                        ctx.run_id
                    ));
                }
            }
        }
        if saves {
            self.step(ctx, trace, format!("checkpoint:{id}"));
            if persist {
                self.store
                    .checkpoint(&ctx.run_id, id, "running", state, trace)
                    .await?;
            }
        } else {
            self.step(ctx, trace, format!("no_checkpoint:{id}"));
        }
        Ok(halt)
    }

    async fn command(&self, ctx: &Ctx, command: &str) -> bool {
        let policy = match ctx.check_command(command, &ctx.workspace) {
            Ok(policy) => policy,
            Err(why) => {
                self.emit(FlowEvent::Step {
                    run_id: ctx.run_id.clone(),
                    step: format!("refused: {why}"),
                });
                return false;
            }
        };
        let mut spec =
            CommandSpec::shell(command, &ctx.workspace, VALIDATION_TIMEOUT).with_shell(&ctx.shell);
        spec.policy = policy;
        // A rollback (`git checkout -- .`) may update the index; git's code paths stay read-only.
        spec.git = keel_tools::sandbox::GitProtection::CodePaths;
        run_command_with_timeout(&spec, &ctx.cancel)
            .await
            .is_ok_and(|o| o.success())
    }
}

/// Whether the flow file `file` is repository content of `workspace`: a relative path, or one
/// that lies beneath it (links resolved where they exist).
fn is_project_file(file: &Path, workspace: &Path) -> bool {
    if file.is_relative() {
        return true;
    }
    let real = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    keel_tools::project::workspace_relative(workspace, file).is_some()
        || real(file).starts_with(real(workspace))
}

/// Gives a run's lease up (a failure only leaves it to expire).
async fn release(lease: Option<keel_store::RunLease>) {
    if let Some(lease) = lease {
        let _ = lease.release().await;
    }
}

fn pass(ok: bool) -> &'static str {
    if ok { "pass" } else { "fail" }
}

fn finished(run_id: &str, node: &str, status: NodeStatus, detail: &str) -> FlowEvent {
    FlowEvent::NodeFinished {
        run_id: run_id.to_string(),
        node: node.to_string(),
        status: status.as_str().to_string(),
        detail: detail.to_string(),
    }
}

fn mark(state: &mut RunState, id: &str, status: NodeStatus, error: Option<String>) {
    let s = state.nodes.entry(id.to_string()).or_default();
    s.status = status;
    s.error = error;
}

/// Every node that depends on `id`, directly or not, in file order.
pub fn dependents(flow: &Flow, id: &str) -> Vec<String> {
    let mut found: BTreeSet<String> = BTreeSet::new();
    let mut changed = true;
    while changed {
        changed = false;
        for n in &flow.nodes {
            if !found.contains(&n.id) && n.deps.iter().any(|d| d == id || found.contains(d)) {
                found.insert(n.id.clone());
                changed = true;
            }
        }
    }
    flow.nodes
        .iter()
        .filter(|n| found.contains(&n.id))
        .map(|n| n.id.clone())
        .collect()
}

/// The nodes a review loop-back runs again: `target`, the review, and everything between.
fn loop_path(flow: &Flow, target: &str, review: &str) -> Vec<String> {
    let after: BTreeSet<String> = dependents(flow, target).into_iter().collect();
    let before = crate::compile::ancestors(&flow.nodes, review);
    let mut out = vec![target.to_string()];
    out.extend(
        flow.nodes
            .iter()
            .filter(|n| after.contains(&n.id) && before.contains(&n.id))
            .map(|n| n.id.clone()),
    );
    out.push(review.to_string());
    out
}
