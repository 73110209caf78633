//! Running tasks: one task (`keel work start --execute`) or every ready one in dependency
//! order (`keel work batch`), each in its own session of the session runtime.
//!
//! **One at a time, in place.** Tasks generated from one PRD build on each other (task 2 edits
//! the files task 1 created), so running dependents in separate git worktrees would need a
//! merge after every task, with conflicts nobody is there to resolve; and independent tasks
//! of a small PRD are rare enough that parallelism buys little. Running in place also means
//! the user's workspace *is* the result — no branch to merge afterwards.
//!
//! **Crash safety.** A task is claimed (`in_progress`, with this process's pid and its
//! session id) in the store before its turn starts, and its end status is stored before the
//! next task is picked. After a kill, the interrupted task (in progress, its process gone) is
//! resumed first — its *own* session continues, so nothing it did is redone — and done tasks
//! are never picked again: no task runs twice, none is lost.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use keel_protocol::{Op, SessionStatus};
use keel_store::work::{TaskRecord, TaskStatus};
use keel_store::work::{WorkStore, WorkStores};
use keel_store::{BlockerStatus, Store};
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::context::task_brief;
use crate::proof::{self, GateRun, Proof};
use keel_config::ApprovalPolicy;
use keel_engine::approval::{ApprovalGate, ApprovalRules, Verdict};
use keel_engine::gates::ProjectGates;
use keel_engine::runtime::{OpAck, SessionBuilder, SessionHandle, SessionOverrides};
use keel_engine::verify::GateDetector;
use keel_engine::{Engine, EngineError, EventSink};
use keel_tools::sandbox::SandboxPolicy;
use keel_tools::shell::harness::{CommandSpec, run_command_with_timeout};

/// How one task's run ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskRun {
    pub task: u32,
    pub title: String,
    pub session_id: String,
    pub status: TaskStatus,
    /// The question, when the run ended blocked.
    pub question: Option<String>,
    pub resumed: bool,
    pub proof: Option<Proof>,
}

/// What a batch did.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BatchReport {
    pub runs: Vec<TaskRun>,
    /// Tasks left waiting because a dependency failed or is blocked: (task, dependency).
    pub stopped: Vec<(u32, u32)>,
}

/// Runs tasks of one workspace: new tasks with one engine (one provider for the whole
/// batch); an interrupted task's session, when the runner has a session builder, with the
/// provider, model, base URL, script and mode it was started with (flags still win).
pub struct TaskRunner {
    engine: EngineSource,
    /// The configuration the runner's own gates read (the test command, the timeout).
    config: keel_engine::Config,
    store: Arc<dyn Store>,
    work: Arc<dyn WorkStore>,
    workspace: PathBuf,
    sinks: Vec<Arc<dyn EventSink>>,
    /// An in-progress task is this runner's to resume whatever process claimed it (a job
    /// queue hands a task to one worker at a time, on any machine).
    takeover: bool,
    /// The approval policy when the caller chose one (else the configuration's, see
    /// [`TaskRunner::policy`]).
    approval: Option<ApprovalPolicy>,
}

/// Where a runner's engines come from.
enum EngineSource {
    /// One ready-made engine for every task.
    Fixed(Arc<Engine>),
    /// Built when needed: new tasks with `flags` (once), a resumed session from its record.
    Built(Box<Built>),
}

struct Built {
    builder: SessionBuilder,
    flags: SessionOverrides,
    fresh: tokio::sync::OnceCell<Arc<Engine>>,
}

fn err(e: impl std::fmt::Display) -> EngineError {
    EngineError::Setup(e.to_string())
}

impl TaskRunner {
    /// A runner whose sessions run on `engine`, record tasks in `store` and publish to `sinks`.
    pub fn new(engine: Arc<Engine>, stores: WorkStores, sinks: Vec<Arc<dyn EventSink>>) -> Self {
        let workspace = engine.workspace().root().to_path_buf();
        Self {
            config: engine.config().clone(),
            engine: EngineSource::Fixed(engine),
            store: stores.sessions,
            work: stores.work,
            workspace,
            sinks,
            takeover: false,
            approval: None,
        }
    }

    /// A runner that builds its engines with `builder` for `workspace`: new tasks with the
    /// `flags`, and an interrupted task's session with what it was started with under them
    /// ([`SessionOverrides::resuming`]), so resuming needs no repeated flags. No engine is
    /// built until a task runs.
    pub fn with_builder(
        builder: SessionBuilder,
        workspace: &Path,
        flags: SessionOverrides,
        stores: WorkStores,
        sinks: Vec<Arc<dyn EventSink>>,
    ) -> Result<Self, EngineError> {
        let workspace = keel_tools::Workspace::new(workspace)?.root().to_path_buf();
        let config = builder.config(&workspace, &flags)?;
        Ok(Self {
            engine: EngineSource::Built(Box::new(Built {
                builder,
                flags,
                fresh: tokio::sync::OnceCell::new(),
            })),
            config,
            store: stores.sessions,
            work: stores.work,
            workspace,
            sinks,
            takeover: false,
            approval: None,
        })
    }

    /// Resumes a task left in progress whatever process claimed it (for a job queue's
    /// worker: the queue runs a task's job on one worker at a time, so an in-progress task it
    /// hands over is one whose worker died, possibly on another machine).
    pub fn taking_over(mut self) -> Self {
        self.takeover = true;
        self
    }

    /// Runs the tasks' sessions, and the runner's own test runs, under `policy` instead of the
    /// configuration's.
    pub fn approval(mut self, policy: ApprovalPolicy) -> Self {
        self.approval = Some(policy);
        self
    }

    /// The approval policy of the tasks' sessions and of the runner's test runs, as for
    /// `keel run`: the caller's, else the one the configuration sets, else `never`. Nobody
    /// answers a task's run, so a call the policy would ask about is denied (the model is
    /// told), and so is a test run that does more than test.
    pub fn policy(&self) -> ApprovalPolicy {
        match (self.approval, self.config.approval_policy_set) {
            (Some(p), _) => p,
            (None, true) => self.config.approval.policy,
            (None, false) => ApprovalPolicy::Never,
        }
    }

    /// Whether `task` is in progress with nobody running it.
    fn interrupted(&self, task: &TaskRecord) -> bool {
        task.is_interrupted() || (self.takeover && task.status == TaskStatus::InProgress)
    }

    /// The engine for a new task's session, or for resuming the stored session `resumed`.
    async fn engine_for(&self, resumed: Option<&str>) -> Result<Arc<Engine>, EngineError> {
        let (builder, flags, fresh) = match &self.engine {
            EngineSource::Fixed(engine) => return Ok(engine.clone()),
            EngineSource::Built(b) => (&b.builder, &b.flags, &b.fresh),
        };
        let batch_engine = || async {
            fresh
                .get_or_try_init(|| async { builder.engine(&self.workspace, flags).map(Arc::new) })
                .await
                .cloned()
        };
        let Some(session) = resumed else {
            return batch_engine().await;
        };
        let record = self.store.get_session(session).await?;
        // A provider (or script) named on the command line replaces the stored one: the
        // batch's own engine serves (one provider for the whole batch) when the mode matches.
        if flags.provider.is_some() || flags.script.is_some() {
            let engine = batch_engine().await?;
            if engine.mode().as_str() == record.mode {
                return Ok(engine);
            }
        }
        let overrides = SessionOverrides::resuming(&record, flags);
        Ok(Arc::new(builder.engine(&self.workspace, &overrides)?))
    }

    /// The workspace the tasks run in (its canonical path).
    pub fn workspace(&self) -> &Path {
        &self.workspace
    }

    fn ws(&self) -> String {
        self.workspace.display().to_string()
    }

    /// The task layer the next run of `task` would get (the intent preview).
    pub async fn preview(&self, id: u32) -> Result<String, EngineError> {
        let task = self.work.task(&self.ws(), id).await?;
        preview_for(&*self.store, &*self.work, &self.ws(), &task).await
    }

    /// Runs one task (resuming its interrupted session if it has one) and records the outcome
    /// and its proof.
    pub async fn run_task(&self, id: u32) -> Result<TaskRun, EngineError> {
        let ws = self.ws();
        let task = self.work.task(&ws, id).await?;
        if task.status == TaskStatus::Done {
            return Err(err(format!(
                "task #{id} is already done; `keel task edit {id} --status ready` runs it again"
            )));
        }
        if task.status == TaskStatus::Blocked {
            return Err(err(format!(
                "task #{id} is blocked on a question: {}; answer it with `keel blocker answer ID \"…\"` (`keel blocker list` shows the id)",
                task.question.as_deref().unwrap_or("(no question recorded)")
            )));
        }
        let resume = self
            .interrupted(&task)
            .then(|| task.session_id.clone())
            .flatten();
        let pid = std::process::id();
        let (handle, message, fresh, engine) = match &resume {
            Some(session) => {
                let engine = self.engine_for(Some(session)).await?;
                self.work.claim_task(&ws, id, session, pid).await?;
                let handle =
                    SessionHandle::new(engine.clone(), session.clone(), self.sinks.clone())
                        .approvals(self.gate(&engine));
                // Killed before its first turn started: the session has no task yet, so it
                // gets the whole task layer; otherwise it continues its own transcript.
                if self.store.get_session(session).await?.status == SessionStatus::Idle {
                    let (brief, fresh) = brief_for(&*self.store, &*self.work, &ws, &task).await?;
                    (handle, brief, fresh, engine)
                } else {
                    (
                        handle,
                        "Continue the task from where you stopped (the previous run was interrupted)."
                            .to_string(),
                        Vec::new(),
                        engine,
                    )
                }
            }
            None => {
                let (brief, fresh) = brief_for(&*self.store, &*self.work, &ws, &task).await?;
                let engine = self.engine_for(None).await?;
                let (handle, record) =
                    SessionHandle::create(engine.clone(), self.sinks.clone()).await?;
                let handle = handle.approvals(self.gate(&engine));
                self.work.claim_task(&ws, id, &record.id, pid).await?;
                (handle, brief, fresh, engine)
            }
        };
        let session_id = handle.id().to_string();
        let gates = self.gates();
        let before = proof::snapshot_files(&self.workspace);
        let tests_before = self.run_tests(&gates, &engine).await;
        let ticket = match handle.submit(Op::user_message(message)).await {
            Ok(OpAck::Turn(ticket)) => ticket,
            other => {
                // Nothing ran: the task is ready again rather than stuck in progress.
                self.work
                    .finish_task(&ws, id, TaskStatus::Ready, None)
                    .await?;
                let why = match other {
                    Err(e) => e.to_string(),
                    Ok(_) => "the session did not start a turn".into(),
                };
                return Err(err(format!("task #{id} could not start: {why}")));
            }
        };
        let result = ticket.finished().await;
        if !fresh.is_empty() {
            self.store.mark_blockers_delivered(&fresh).await?;
        }
        let (status, question) = match result.status {
            SessionStatus::Completed => (TaskStatus::Done, None),
            SessionStatus::Blocked => (
                TaskStatus::Blocked,
                Some(
                    result
                        .outcome
                        .as_ref()
                        .and_then(|o| o.blocker.as_ref())
                        .map(|b| b.question.clone())
                        .unwrap_or_else(|| "the run stopped with a question".into()),
                ),
            ),
            SessionStatus::Cancelled => (TaskStatus::Ready, None),
            _ => (TaskStatus::Failed, None),
        };
        let mut status = status;
        let mut proof = None;
        if matches!(status, TaskStatus::Done | TaskStatus::Failed) {
            let tests_after = self.run_tests(&gates, &engine).await;
            let events = self.store.events(&session_id, 0).await?;
            let mut all_gates = proof::verification_gates(&events);
            all_gates.extend(tests_after.iter().cloned());
            let final_text = result
                .outcome
                .as_ref()
                .map(|o| o.final_text.clone())
                .unwrap_or_default();
            let criteria = proof::check_criteria(
                &task.criteria,
                &final_text,
                &self.workspace,
                tests_after.as_ref(),
                &proof::commands_run(&events),
            );
            let p = Proof {
                task: id,
                session_id: session_id.clone(),
                run_status: result.status.as_str().to_string(),
                tests_before,
                tests_after,
                gates: all_gates,
                files: proof::diff_files(&before, &proof::snapshot_files(&self.workspace)),
                criteria,
                resumed: resume.is_some(),
            };
            // A run that says it is done while the project's gates fail is not done.
            if status == TaskStatus::Done && !p.gates_passed() {
                status = TaskStatus::Failed;
            }
            let body = serde_json::to_value(&p).map_err(err)?;
            self.work.add_proof(&ws, id, &session_id, &body).await?;
            proof = Some(p);
        }
        self.work
            .finish_task(&ws, id, status, question.as_deref())
            .await?;
        Ok(TaskRun {
            task: id,
            title: task.title,
            session_id,
            status,
            question,
            resumed: resume.is_some(),
            proof,
        })
    }

    /// The next task a batch should run: an interrupted one first, then the lowest-numbered
    /// ready task whose dependencies are done (within `scope` when given).
    pub async fn next_task(&self, scope: Option<&[u32]>) -> Result<Option<u32>, EngineError> {
        let tasks = self.work.list_tasks(&self.ws()).await?;
        let in_scope = |t: &TaskRecord| scope.is_none_or(|s| s.contains(&t.id));
        if let Some(t) = tasks.iter().find(|t| in_scope(t) && self.interrupted(t)) {
            return Ok(Some(t.id));
        }
        let done = |d: &u32| {
            tasks
                .iter()
                .any(|t| t.id == *d && t.status == TaskStatus::Done)
        };
        Ok(tasks
            .iter()
            .find(|t| in_scope(t) && t.status == TaskStatus::Ready && t.depends_on.iter().all(done))
            .map(|t| t.id))
    }

    /// Runs ready tasks one at a time in dependency order until none is left (or `until` is
    /// done). Dependents of a failed or blocked task are not started.
    pub async fn run_batch(&self, until: Option<u32>) -> Result<BatchReport, EngineError> {
        let ws = self.ws();
        let scope = match until {
            Some(u) => Some(self.closure(u).await?),
            None => None,
        };
        let mut report = BatchReport::default();
        while let Some(id) = self.next_task(scope.as_deref()).await? {
            let run = self.run_task(id).await?;
            let stop = run.status == TaskStatus::Ready; // cancelled
            report.runs.push(run);
            if stop {
                break;
            }
        }
        let tasks = self.work.list_tasks(&ws).await?;
        for t in &tasks {
            if t.status != TaskStatus::Ready || scope.as_ref().is_some_and(|s| !s.contains(&t.id)) {
                continue;
            }
            if let Some(d) = t.depends_on.iter().find(|d| {
                tasks.iter().any(|x| {
                    x.id == **d && matches!(x.status, TaskStatus::Failed | TaskStatus::Blocked)
                })
            }) {
                report.stopped.push((t.id, *d));
            }
        }
        Ok(report)
    }

    /// `id` and every task it depends on, directly or not.
    pub async fn closure(&self, id: u32) -> Result<Vec<u32>, EngineError> {
        let tasks = self.work.list_tasks(&self.ws()).await?;
        if !tasks.iter().any(|t| t.id == id) {
            return Err(err(format!(
                "no task #{id} in this workspace; `keel task list` lists them"
            )));
        }
        let mut out = vec![id];
        let mut i = 0;
        while i < out.len() {
            if let Some(t) = tasks.iter().find(|t| t.id == out[i]) {
                for d in &t.depends_on {
                    if !out.contains(d) {
                        out.push(*d);
                    }
                }
            }
            i += 1;
        }
        Ok(out)
    }

    fn gates(&self) -> Vec<keel_engine::Gate> {
        ProjectGates {
            test_command: self.config.shell.test_command.clone(),
        }
        .detect(&self.workspace)
        .into_iter()
        .filter(|g| g.name == "tests")
        .collect()
    }

    /// The approval gate of a task's session on `engine`: [`Self::policy`], headless.
    fn gate(&self, engine: &Engine) -> Arc<ApprovalGate> {
        Arc::new(ApprovalGate::from_config(
            engine.config(),
            Some(self.policy()),
            false,
        ))
    }

    /// Runs the project's test command (detected again after the run: the task may have
    /// added the first tests) — when the approval policy lets it: it is judged like the
    /// session's tests gate, by what it runs (the package.json script, the Makefile recipe,
    /// a project-set `test_command`); one the policy would ask about is not run (nobody can
    /// answer) and fails with the reason.
    async fn run_tests(&self, gates: &[keel_engine::Gate], engine: &Engine) -> Option<GateRun> {
        let gate = gates
            .first()
            .cloned()
            .or_else(|| self.gates().into_iter().next())?;
        let policy = match self.judge_tests(&gate, engine) {
            Ok(policy) => policy,
            Err(why) => {
                return Some(GateRun {
                    name: gate.name,
                    command: gate.command,
                    passed: false,
                    exit_code: None,
                    output: why,
                });
            }
        };
        Some(
            run_gate(
                &self.workspace,
                &gate.name,
                &gate.command,
                self.config.verify.timeout_secs,
                policy,
            )
            .await,
        )
    }
}

impl TaskRunner {
    /// `Err(why)` when the test run `gate` may not run under [`Self::policy`]: its command
    /// was set by the project, or what it runs does more than build and test, and the policy
    /// does not allow that command outright. `Ok`: the sandbox it runs under (read-only when
    /// it is allowed only because it was rated read-only).
    fn judge_tests(
        &self,
        gate: &keel_engine::Gate,
        engine: &Engine,
    ) -> Result<SandboxPolicy, String> {
        let set_by_project = self.config.set_by_project("shell.test_command")
            && self.config.shell.test_command.is_some();
        let Some(reason) = keel_engine::verify::gate_does_more_than_check(gate, &self.workspace)
            .or_else(|| {
                set_by_project.then(|| {
                    "the project's .keel/config.toml sets it ([shell] test_command)".into()
                })
            })
        else {
            return Ok(SandboxPolicy::WorkspaceWrite);
        };
        let rules = ApprovalRules::new(
            &self.config.approval,
            self.policy(),
            &self.config.shell.allow,
        );
        let call = keel_protocol::ToolCall {
            id: "work-tests".into(),
            name: "run_command".into(),
            arguments: serde_json::json!({ "command": gate.command }),
        };
        match rules
            .judge_in(&call, engine.tools(), Some(engine.workspace()))
            .0
        {
            Verdict::Allow => Ok(SandboxPolicy::WorkspaceWrite),
            Verdict::AllowReadOnly => Ok(SandboxPolicy::ReadOnly),
            Verdict::Ask => Err(format!(
                "not run: {reason}, and the approval policy ({}) asks about it, but nobody can answer a task's run; run the tests yourself, or allow the command in your own [approval] allow",
                self.policy().as_str()
            )),
            Verdict::Deny(rule) => Err(format!("not run: {reason}; {rule}")),
        }
    }
}

/// The task layer the next run of `task` in workspace `ws` would get (the intent preview):
/// no model, no session needed.
pub async fn preview_for(
    store: &dyn Store,
    work: &dyn WorkStore,
    ws: &str,
    task: &TaskRecord,
) -> Result<String, EngineError> {
    Ok(brief_for(store, work, ws, task).await?.0)
}

/// The task layer and the ids of the answers it delivers for the first time.
async fn brief_for(
    store: &dyn Store,
    work: &dyn WorkStore,
    ws: &str,
    task: &TaskRecord,
) -> Result<(String, Vec<String>), EngineError> {
    let prd = match task.prd {
        Some(p) => work.prd(ws, Some(p), None).await.ok(),
        None => None,
    };
    let mut answered = Vec::new();
    for s in &task.sessions {
        answered.extend(
            store
                .list_blockers(Some(s), true)
                .await?
                .into_iter()
                .filter(|b| b.status != BlockerStatus::Open),
        );
    }
    let fresh = answered
        .iter()
        .filter(|b| b.status == BlockerStatus::Answered)
        .map(|b| b.id.clone())
        .collect();
    Ok((task_brief(task, prd.as_ref(), &answered), fresh))
}

/// Runs one gate command in `workspace`.
pub async fn run_gate(
    workspace: &Path,
    name: &str,
    command: &str,
    timeout_secs: u64,
    policy: SandboxPolicy,
) -> GateRun {
    let mut spec = CommandSpec::shell(command, workspace, Duration::from_secs(timeout_secs.max(1)));
    spec.policy = policy;
    match run_command_with_timeout(&spec, &CancellationToken::new()).await {
        Ok(out) => GateRun {
            name: name.into(),
            command: command.into(),
            passed: out.success(),
            exit_code: out.exit_code,
            output: proof::tail(&out.combined(), 2_000),
        },
        Err(e) => GateRun {
            name: name.into(),
            command: command.into(),
            passed: false,
            exit_code: None,
            output: e.to_string(),
        },
    }
}
