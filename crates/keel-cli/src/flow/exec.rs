//! Running flows and reading their runs: the async runtime, the executor, the run store of
//! the configured backend, and how a run's nodes print.

use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use keel_config::{ApprovalPolicy, Layer};
use keel_engine::approval::ApprovalRules;
use keel_flow::Executor;
use keel_flow::exec::{EngineAgents, EventSink};
use keel_flow::state::NodeStatus;
use keel_flow::store::{FlowStore, RunRecord};
use tokio_util::sync::CancellationToken;

use crate::backend::Backend;
use crate::setup;

pub(crate) fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

/// The executor `keel flow run|resume` and chat's `/workflow` run flows with.
/// Flow runs are stored in `flows`, agent nodes' sessions in `sessions`.
pub(crate) fn executor(
    config: &keel_config::Config,
    flows: FlowStore,
    sessions: Arc<dyn keel_store::Store>,
    defaults: keel_engine::runtime::SessionOverrides,
    approval: Option<ApprovalPolicy>,
    events: EventSink,
    cancel: CancellationToken,
) -> Executor {
    let builder = setup::session_builder(sessions);
    let agents = EngineAgents {
        builder,
        defaults,
        approval,
    };
    // The flow's own command lines are judged under the same policy as its agents' calls.
    let rules = ApprovalRules::new(&config.approval, agents.policy(config), &config.shell.allow);
    Executor {
        store: flows,
        agents: Arc::new(agents),
        shell: config.shell.tool_settings(),
        build_dirs: config.snapshots.build_dirs(),
        events: Some(events),
        cancel,
        approvals: Some(Arc::new(rules)),
    }
}

/// The flow runs of the configured store (PostgreSQL when a database URL is set, else
/// SQLite); call it inside the runtime that uses the store.
pub(crate) async fn open(root: &Path) -> anyhow::Result<FlowStore> {
    let config = setup::load_config(root, Layer::from_overrides(&[]))?;
    Ok(Backend::open(&config).await?.flows())
}

pub(crate) fn store_error(e: keel_store::StoreError) -> anyhow::Error {
    match e {
        keel_store::StoreError::Missing(m) | keel_store::StoreError::Conflict(m) => {
            setup::UsageError(m).into()
        }
        other => other.into(),
    }
}

/// Run `run`, or the newest run in workspace `ws`.
pub(crate) async fn find_run(
    store: &FlowStore,
    ws: &str,
    run: Option<&str>,
) -> Result<RunRecord, keel_store::StoreError> {
    match run {
        Some(id) => store.get(id).await,
        None => store.list(Some(ws), 1).await.and_then(|mut v| {
            v.pop().ok_or_else(|| {
                keel_store::StoreError::Missing(
                    "no flow runs in this workspace; `keel flow run FILE` starts one".into(),
                )
            })
        }),
    }
}

/// The run's nodes in the flow's order (stored order if the source no longer compiles).
pub(crate) fn node_order(rec: &RunRecord) -> Vec<String> {
    keel_flow::compile(&rec.flow_source, Path::new(&rec.flow_file))
        .map(|f| f.all_node_ids())
        .unwrap_or_else(|_| rec.state.nodes.keys().cloned().collect())
}

/// `  completed  build                 <output or error>`
pub(crate) fn node_line(id: &str, s: &keel_flow::state::NodeState) -> String {
    let extra = match s.status {
        NodeStatus::Failed => s.error.clone().unwrap_or_default(),
        _ => {
            let out = s
                .outputs
                .get("output")
                .map(|v| keel_flow::short(&v.to_string().replace('\n', " "), 60))
                .unwrap_or_default();
            match s.outputs.get("passed") {
                Some(p) if out.is_empty() => format!("passed: {p}"),
                _ => out,
            }
        }
    };
    format!("  {:<10} {:<20} {}", s.status.as_str(), id, extra)
}
