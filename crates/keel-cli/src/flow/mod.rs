//! `keel flow run|validate|status|runs|resume|replay|list`: typed workflows (keel-flow).
//! Runs live in PostgreSQL when a database URL is configured, else in the local SQLite store
//! (`backend.rs` picks it).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::{Args, Subcommand};
use keel_config::{ApprovalPolicy, Layer};
use keel_engine::approval::ApprovalRules;
use keel_flow::exec::{EngineAgents, EventSink};
use keel_flow::state::NodeStatus;
use keel_flow::store::RunRecord;
use keel_flow::{Executor, FlowEvent, RunSummary};
use tokio_util::sync::CancellationToken;

use crate::args::{CommonArgs, ProviderArgs};
use crate::backend::Backend;
use crate::{exit, setup};
use exec::{executor, find_run, node_line, node_order, open, runtime, store_error};
use files::{Prepared, compile, listing, prepare, resolve};

pub mod exec;
pub mod files;
mod follow;
mod queue;

#[derive(Debug, Args)]
pub struct FlowArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    #[command(subcommand)]
    pub command: FlowCommand,
}

#[derive(Debug, Subcommand)]
pub enum FlowCommand {
    /// Run a flow file in the workspace, printing node states as they change.
    Run {
        /// The flow file (YAML), or the name of a flow `keel flow list` shows.
        file: PathBuf,
        /// An input value, `NAME=VALUE` (repeatable).
        #[arg(long = "input", value_name = "NAME=VALUE")]
        inputs: Vec<String>,
        #[command(flatten)]
        llm: ProviderArgs,
        /// Print one JSON event per line instead of the progress view.
        #[arg(long)]
        json: bool,
        /// Which tool calls of the agent nodes, and which of the flow's own commands, may run:
        /// nobody answers a flow run, so what the policy would ask about is refused. Default:
        /// `[approval] policy` when your configuration sets it, else `never` (as `keel run`).
        #[arg(long, value_enum, value_name = "POLICY")]
        approval: Option<crate::args::ApprovalArg>,
        /// Store the run as queued in the shared PostgreSQL database (KEEL_DATABASE_URL) for a
        /// `keel worker` to run, and return at once.
        #[arg(long)]
        queue: bool,
    },
    /// Check a flow file without running it; every mistake is printed as file:line:column.
    Validate { file: PathBuf },
    /// Node states of a run (default: the newest run in this workspace).
    Status {
        /// The run: its id or a unique prefix of it, as `keel flow runs` lists them (default:
        /// the newest run in this workspace).
        run: Option<String>,
        /// Print the run as one JSON object: id, flow, status, each node's state and outputs,
        /// and the failure-handling steps.
        #[arg(long)]
        json: bool,
        /// Keep watching: print node state changes until the run ends.
        #[arg(long, short = 'f', conflicts_with = "json")]
        follow: bool,
    },
    /// The workspace's flow runs, newest first.
    Runs {
        /// Print the runs as a JSON array (id, flow, status, created_at).
        #[arg(long)]
        json: bool,
    },
    /// Continue a run from its last checkpoint; finished nodes are not run again.
    Resume {
        run: String,
        #[command(flatten)]
        llm: ProviderArgs,
        #[arg(long)]
        json: bool,
        /// The approval policy, as for `keel flow run`.
        #[arg(long, value_enum, value_name = "POLICY")]
        approval: Option<crate::args::ApprovalArg>,
    },
    /// Re-execute a run from its trace in a new directory, with no model call, and check that
    /// the node outputs and the final files match the recording.
    Replay {
        run: String,
        /// Where to replay (an empty or new directory; default: a new temporary directory).
        #[arg(long, value_name = "DIR")]
        into: Option<PathBuf>,
    },
    /// Flows available here: `.keel/flows/` and the `flows/` folder of skills in `.keel/skills/`.
    List,
}

pub fn execute(args: FlowArgs) -> anyhow::Result<u8> {
    let root = setup::workspace_dir(args.common.workspace.as_deref())?;
    match args.command {
        FlowCommand::Validate { file } => validate(&root, &resolve(&root, &file)),
        FlowCommand::List => list(&root),
        FlowCommand::Run {
            file,
            inputs,
            llm,
            json,
            approval,
            queue,
        } => {
            let file = resolve(&root, &file);
            let approval = approval.map(crate::args::ApprovalArg::policy);
            if queue {
                queue::queue(&root, &file, &inputs, &llm, json)
            } else {
                run(&root, &file, &inputs, &llm, json, approval)
            }
        }
        FlowCommand::Resume {
            run,
            llm,
            json,
            approval,
        } => with_executor(
            &root,
            &llm,
            json,
            approval.map(crate::args::ApprovalArg::policy),
            |exec| async move { exec.resume(&run).await },
        ),
        FlowCommand::Status { run, json, follow } => {
            if follow {
                follow::follow(&root, run.as_deref())
            } else {
                status(&root, run.as_deref(), json)
            }
        }
        FlowCommand::Runs { json } => runs(&root, json),
        FlowCommand::Replay { run, into } => replay(&root, &run, into),
    }
}

fn validate(root: &Path, file: &Path) -> anyhow::Result<u8> {
    let (flow, _) = compile(root, file)?;
    say!(
        "{}: flow `{}` is valid ({} nodes, {} inputs)",
        file.display(),
        flow.name,
        flow.all_node_ids().len(),
        flow.inputs.len()
    );
    Ok(exit::COMPLETED)
}

fn list(root: &Path) -> anyhow::Result<u8> {
    let lines = listing(root);
    if lines.is_empty() {
        say!("No flows in .keel/flows/ or .keel/skills/*/flows/.");
    }
    for line in lines {
        say!("{line}");
    }
    Ok(exit::COMPLETED)
}

fn printer(json: bool) -> EventSink {
    Arc::new(move |e: &FlowEvent| {
        if json {
            if let Ok(line) = crate::out::json(e) {
                say!("{line}");
            }
            return;
        }
        match e {
            FlowEvent::RunStarted { run_id, flow } => say!("flow {flow}: run {run_id}"),
            FlowEvent::NodeStarted { node, attempt, .. } => {
                if *attempt > 1 {
                    say!("  ▶ {node} (attempt {attempt})");
                } else {
                    say!("  ▶ {node}");
                }
            }
            FlowEvent::NodeFinished {
                node,
                status,
                detail,
                ..
            } => {
                let mark = match status.as_str() {
                    "completed" => "✓",
                    "skipped" => "·",
                    _ => "✗",
                };
                let detail = detail.lines().next().unwrap_or("");
                say!(
                    "  {mark} {node} {status}{}",
                    if detail.is_empty() {
                        String::new()
                    } else {
                        format!(": {detail}")
                    }
                );
            }
            FlowEvent::Step { step, .. } => {
                if !step.starts_with("checkpoint:") {
                    say!("    {step}");
                }
            }
            FlowEvent::RunFinished { run_id, status } => say!("run {run_id} {status}"),
        }
    })
}

fn with_executor<F, Fut>(
    root: &Path,
    llm: &ProviderArgs,
    json: bool,
    approval: Option<ApprovalPolicy>,
    go: F,
) -> anyhow::Result<u8>
where
    F: FnOnce(Executor) -> Fut,
    Fut: std::future::Future<Output = Result<RunSummary, keel_flow::FlowError>>,
{
    let config = setup::load_config(root, Layer::from_overrides(&[]))?;
    let cancel = CancellationToken::new();
    let rt = runtime()?;
    let summary = rt.block_on(async {
        let backend = Backend::open(&config).await?;
        let exec = executor(
            &config,
            backend.flows(),
            backend.sessions(),
            crate::launch::overrides(llm, None, None),
            approval,
            printer(json),
            cancel.clone(),
        );
        let stop = cancel.clone();
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                stop.cancel();
            }
        });
        anyhow::Ok(go(exec).await)
    })?;
    let summary = summary.map_err(|e| match e {
        keel_flow::FlowError::Usage(m) => setup::UsageError(m).into(),
        keel_flow::FlowError::Compile(c) => setup::UsageError(c.to_string()).into(),
        other => anyhow::Error::from(other),
    })?;
    if let Some(err) = &summary.error
        && !json
    {
        tell!("keel: {err}");
    }
    Ok(match summary.status.as_str() {
        "completed" => exit::COMPLETED,
        "cancelled" => {
            tell!(
                "keel: stopped; `keel flow resume {}` continues it",
                summary.run_id
            );
            exit::CANCELLED
        }
        _ => exit::FAILED,
    })
}

fn run(
    root: &Path,
    file: &Path,
    inputs: &[String],
    llm: &ProviderArgs,
    json: bool,
    approval: Option<ApprovalPolicy>,
) -> anyhow::Result<u8> {
    let Prepared {
        flow,
        source,
        values,
    } = prepare(root, file, inputs)?;
    let ws = root.to_path_buf();
    with_executor(root, llm, json, approval, |exec| async move {
        exec.start(flow, &source, &ws, values).await
    })
}

fn status(root: &Path, run: Option<&str>, json: bool) -> anyhow::Result<u8> {
    let rt = runtime()?;
    let ws = root.display().to_string();
    let rec: RunRecord = rt.block_on(async {
        let store = open(root).await?;
        find_run(&store, &ws, run).await.map_err(store_error)
    })?;
    if json {
        let nodes: serde_json::Map<String, serde_json::Value> = rec
            .state
            .nodes
            .iter()
            .map(|(k, v)| (k.clone(), serde_json::to_value(v).unwrap_or_default()))
            .collect();
        let out = serde_json::json!({"id": rec.id, "flow": rec.flow_name, "status": rec.status, "nodes": nodes, "steps": rec.trace.steps});
        say!("{out}");
        return Ok(exit::COMPLETED);
    }
    say!("run {} · flow {} · {}", rec.id, rec.flow_name, rec.status);
    let order = node_order(&rec);
    let done = rec
        .state
        .nodes
        .values()
        .filter(|s| s.status.finished())
        .count();
    say!("{done}/{} nodes finished", rec.state.nodes.len());
    for id in order {
        if let Some(s) = rec.state.nodes.get(&id) {
            say!("{}", node_line(&id, s));
        }
    }
    let usage = rec.trace.usage();
    if usage.requests > 0 {
        say!(
            "model: {} requests, {} input + {} output tokens, ${:.4}",
            usage.requests,
            usage.input_tokens,
            usage.output_tokens,
            usage.cost_usd
        );
    }
    Ok(exit::COMPLETED)
}

fn runs(root: &Path, json: bool) -> anyhow::Result<u8> {
    let rt = runtime()?;
    let ws = root.display().to_string();
    let list = rt.block_on(async {
        let store = open(root).await?;
        store.list(Some(&ws), 50).await.map_err(store_error)
    })?;
    if json {
        let rows: Vec<serde_json::Value> = list
            .iter()
            .map(|r| serde_json::json!({"id": r.id, "flow": r.flow_name, "status": r.status, "created_at": r.created_at}))
            .collect();
        say!("{}", serde_json::Value::Array(rows));
        return Ok(exit::COMPLETED);
    }
    if list.is_empty() {
        say!("No flow runs in this workspace; `keel flow run FILE` starts one.");
        return Ok(exit::COMPLETED);
    }
    say!("{:<36}  {:<10} {:<24} NODES DONE", "RUN", "STATUS", "FLOW");
    for r in list {
        let done = r
            .state
            .nodes
            .values()
            .filter(|s| s.status == NodeStatus::Completed)
            .count();
        say!(
            "{}  {:<10} {:<24} {done}/{} nodes",
            r.id,
            r.status,
            r.flow_name,
            r.state.nodes.len()
        );
    }
    Ok(exit::COMPLETED)
}

fn replay(root: &Path, run: &str, into: Option<PathBuf>) -> anyhow::Result<u8> {
    let config = setup::load_config(root, Layer::from_overrides(&[]))?;
    // Without --into, the replay works in a temporary directory removed afterwards (kept
    // when the replay differs, to look at).
    let temporary = into.is_none();
    let target = match into {
        Some(p) => std::path::absolute(&p).unwrap_or(p),
        None => std::env::temp_dir().join(format!("keel-replay-{}", uuid_like())),
    };
    let rt = runtime()?;
    let report = rt.block_on(async {
        let backend = Backend::open(&config).await?;
        let exec = Executor {
            store: backend.flows(),
            // Replay never calls a model: agent results come from the trace.
            agents: Arc::new(EngineAgents {
                builder: setup::session_builder(backend.sessions()),
                defaults: Default::default(),
                approval: None,
            }),
            shell: config.shell.tool_settings(),
            build_dirs: config.snapshots.build_dirs(),
            events: Some(printer(false)),
            cancel: CancellationToken::new(),
            // A replay runs the recorded commands again, judged as when they first ran.
            approvals: Some(Arc::new(ApprovalRules::new(
                &config.approval,
                if config.approval_policy_set {
                    config.approval.policy
                } else {
                    ApprovalPolicy::Never
                },
                &config.shell.allow,
            ))),
        };
        exec.replay(run, &target).await.map_err(|e| match e {
            keel_flow::FlowError::Usage(m) => setup::UsageError(m).into(),
            keel_flow::FlowError::Store(s) => store_error(s),
            other => anyhow::Error::from(other),
        })
    });
    if report.is_err() && temporary {
        let _ = std::fs::remove_dir_all(&target);
    }
    let report = report?;
    if !temporary {
        say!("replayed into {}", report.dir.display());
    }
    for m in &report.mismatches {
        say!("  mismatch: {m}");
    }
    if report.reproduced() {
        say!(
            "reproduced: same node outputs, same final tree ({})",
            report.final_tree.as_deref().unwrap_or("-")
        );
        if temporary {
            let _ = std::fs::remove_dir_all(&report.dir);
        }
        Ok(exit::COMPLETED)
    } else {
        say!(
            "NOT reproduced: final tree {} (recorded {})",
            report.final_tree.as_deref().unwrap_or("-"),
            report.recorded_final_tree.as_deref().unwrap_or("-")
        );
        if temporary {
            say!("the replayed files are kept in {}", report.dir.display());
        }
        Ok(exit::FAILED)
    }
}

fn uuid_like() -> String {
    format!(
        "{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or(0)
    )
}
