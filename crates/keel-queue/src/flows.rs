//! Flow runs as jobs: `keel flow run FILE --queue` stores the run as `queued` in the shared
//! database and pushes a [`FlowJob`]; a `keel worker` ([`run_flow_worker`]) runs it with the
//! flow executor, which checkpoints every node in the database. When a worker dies mid-run,
//! apalis hands the job to another worker once the dead one's heartbeats stop, and that worker
//! resumes the run from its last checkpoint (finished nodes are not run again) as soon as the
//! dead run's lease has expired.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use apalis::prelude::{BoxDynError, Data, TaskBuilder, TaskSink};
use apalis_postgres::{PgPool, PostgresStorage};
use keel_engine::runtime::{SessionBuilder, SessionOverrides};
use keel_flow::Executor;
use keel_flow::exec::agent::EngineAgents;
use keel_flow::store::FlowStore;
use keel_store::PgStore;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::supervise::supervised_queue;
use crate::worker::{WorkerOptions, WorkerStats, counted};
use crate::{QueueError, config_for};

/// The apalis queue flow runs go to.
pub const FLOW_QUEUE: &str = "keel-flows";

/// A stored flow run to run (or resume) on a worker, with the provider choices of the
/// command that queued it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlowJob {
    pub run_id: String,
    pub provider: Option<String>,
    pub model: Option<String>,
    pub base_url: Option<String>,
    pub script: Option<String>,
}

impl FlowJob {
    pub fn new(run_id: &str, overrides: &SessionOverrides) -> Self {
        Self {
            run_id: run_id.to_string(),
            provider: overrides.provider.clone(),
            model: overrides.model.clone(),
            base_url: overrides.base_url.clone(),
            script: overrides.script.as_ref().map(|p| p.display().to_string()),
        }
    }

    fn overrides(&self) -> SessionOverrides {
        SessionOverrides {
            provider: self.provider.clone(),
            model: self.model.clone(),
            base_url: self.base_url.clone(),
            script: self.script.as_ref().map(Into::into),
            ..SessionOverrides::default()
        }
    }
}

/// Queues flow runs (one job per run: the run id is the job's idempotency key).
pub async fn push_flow(pool: &PgPool, job: FlowJob) -> Result<(), QueueError> {
    let mut storage = PostgresStorage::<FlowJob>::new(pool).with_config(config_for(
        FLOW_QUEUE,
        Duration::from_secs(30),
        1,
    ));
    let key = job.run_id.clone();
    let task = TaskBuilder::new(job).idempotency_key(&key).build();
    storage
        .push_task(task)
        .await
        .map_err(|e| QueueError::Push(e.to_string()))
}

#[derive(Clone)]
struct State {
    builder: SessionBuilder,
    flows: FlowStore,
    stats: Arc<WorkerStats>,
}

async fn run_flow_job(job: FlowJob, state: Data<State>) -> Result<(), BoxDynError> {
    let what = format!("flow run {}", job.run_id);
    counted(&state.stats, what, flow_job(&job, &state)).await
}

async fn flow_job(job: &FlowJob, state: &State) -> Result<(), BoxDynError> {
    let rec = state.flows.get(&job.run_id).await?;
    // Queued, or running on a worker that died: anything else already ended (an earlier
    // attempt finished the run and died before its job was marked done).
    if rec.status != "queued" && rec.status != "running" {
        return Ok(());
    }
    let overrides = job.overrides();
    let workspace = Path::new(&rec.workspace);
    let config = state.builder.config(workspace, &overrides)?;
    // A worker's flow runs as `keel flow run` would: its agents' calls and its own commands
    // under the configured approval policy (nobody answers: what would ask is refused).
    let agents = EngineAgents {
        builder: state.builder.clone(),
        defaults: overrides,
        approval: None,
    };
    let exec = Executor {
        store: state.flows.clone(),
        approvals: Some(Arc::new(keel_engine::approval::ApprovalRules::new(
            &config.approval,
            agents.policy(&config),
            &config.shell.allow,
        ))),
        agents: Arc::new(agents),
        shell: config.shell.tool_settings(),
        build_dirs: config.snapshots.build_dirs(),
        events: None,
        cancel: CancellationToken::new(),
    };
    // A dead worker's run keeps its lease for a few seconds: resuming fails until then, and
    // the attempt is retried with backoff.
    let summary = exec.resume(&rec.id).await?;
    crate::notice::tell!(
        "keel worker: flow run {} ({}) {}",
        summary.run_id,
        rec.flow_name,
        summary.status
    );
    Ok(())
}

/// Runs flow jobs of `pool`'s database, one run at a time per worker process, until `stop`
/// is cancelled; a running flow then finishes before this returns. After a database failure
/// the apalis worker is started again once the database answers.
pub async fn run_flow_worker(
    pool: PgPool,
    builder: SessionBuilder,
    store: Arc<PgStore>,
    options: WorkerOptions,
    stats: Arc<WorkerStats>,
    stop: CancellationToken,
) -> Result<(), QueueError> {
    let flows = FlowStore::from_dyn(store.clone(), Some(store));
    let state = State {
        builder,
        flows,
        stats,
    };
    supervised_queue!(
        FlowJob,
        FLOW_QUEUE,
        "flows",
        run_flow_job,
        pool,
        options,
        state,
        stop
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flow_job_carries_the_provider_choices_of_the_command_that_queued_it() {
        let overrides = SessionOverrides {
            provider: Some("scripted".into()),
            script: Some("/w/s.yaml".into()),
            ..SessionOverrides::default()
        };
        let job = FlowJob::new("run-1", &overrides);
        assert_eq!(job.overrides(), overrides);
        let json = serde_json::to_string(&job).unwrap();
        assert_eq!(serde_json::from_str::<FlowJob>(&json).unwrap(), job);
    }
}
