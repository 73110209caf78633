//! `/workflow` in `keel chat`: lists the flows `keel flow list` finds, or compiles one and runs
//! it in the background with the same executor as `keel flow run`, its `FlowEvent`s sent to the
//! chat loop as they happen.

use std::path::Path;
use std::sync::Arc;

use keel_config::Config;
use keel_engine::runtime::SessionOverrides;
use keel_flow::FlowEvent;
use keel_store::SqliteStore;
use tokio::sync::mpsc::UnboundedSender;
use tokio_util::sync::CancellationToken;

use super::app::App;
use super::msg::{Done, Msg};
use super::transcript::Level;
use crate::flow;

/// A flow running in the background.
#[derive(Debug)]
pub struct Running {
    pub name: String,
    pub cancel: CancellationToken,
}

/// `/workflow` with no argument: the flows here and how to run one.
pub fn list_text(root: &Path) -> String {
    let lines = flow::files::listing(root);
    if lines.is_empty() {
        return "No flows in .keel/flows/ or .keel/skills/*/flows/; `/workflow PATH` runs a flow file."
            .into();
    }
    format!(
        "flows:\n{}\n/workflow NAME [key=value …] runs one here; /workflow stop stops it",
        lines.join("\n")
    )
}

/// Compiles the flow `/workflow ARG` names (`NAME-or-PATH [k=v …]`) and starts it in the
/// background; mistakes come back as one message naming file:line:column.
pub fn start(
    root: &Path,
    arg: &str,
    config: &Config,
    store: Arc<SqliteStore>,
    defaults: SessionOverrides,
    tx: UnboundedSender<Msg>,
) -> Result<Running, String> {
    let mut words = arg.split_whitespace();
    let target = words.next().unwrap_or_default();
    let inputs: Vec<String> = words.map(str::to_string).collect();
    // A relative path is the workspace's (the chat may run elsewhere), else a listed name.
    let in_workspace = root.join(target);
    let file = if in_workspace.symlink_metadata().is_ok() {
        in_workspace
    } else {
        let found = flow::files::resolve(root, Path::new(target));
        if found.is_relative() {
            root.join(found)
        } else {
            found
        }
    };
    let prepared = flow::files::prepare(root, &file, &inputs).map_err(|e| e.to_string())?;
    let name = prepared.flow.name.clone();
    let cancel = CancellationToken::new();
    let events_tx = tx.clone();
    let exec = flow::exec::executor(
        config,
        keel_flow::store::FlowStore::new(store.clone()),
        store,
        defaults,
        None,
        Arc::new(move |e: &FlowEvent| {
            let _ = events_tx.send(Msg::Flow(Box::new(e.clone())));
        }),
        cancel.clone(),
    );
    let ws = root.to_path_buf();
    tokio::spawn(async move {
        let flow::files::Prepared {
            flow,
            source,
            values,
        } = prepared;
        let done = match exec.start(flow, &source, &ws, values).await {
            Ok(s) => Done::Ended {
                run_id: s.run_id,
                status: s.status,
                error: s.error,
            },
            Err(e) => Done::Failed(e.to_string()),
        };
        let _ = tx.send(Msg::FlowDone(done));
    });
    Ok(Running { name, cancel })
}

/// The transcript line for one event (`None`: not shown).
pub fn event_line(e: &FlowEvent) -> Option<(String, Level)> {
    Some(match e {
        FlowEvent::RunStarted { run_id, flow } => {
            (format!("flow {flow}: run {run_id}"), Level::Info)
        }
        FlowEvent::NodeStarted { node, attempt, .. } if *attempt > 1 => {
            (format!("▶ {node} (attempt {attempt})"), Level::Info)
        }
        FlowEvent::NodeStarted { node, .. } => (format!("▶ {node}"), Level::Info),
        FlowEvent::NodeFinished {
            node,
            status,
            detail,
            ..
        } => {
            let (mark, level) = match status.as_str() {
                "completed" => ("✓", Level::Ok),
                "skipped" => ("·", Level::Info),
                _ => ("✗", Level::Error),
            };
            let detail = detail.lines().next().unwrap_or("");
            let detail = if detail.is_empty() {
                String::new()
            } else {
                format!(": {detail}")
            };
            (format!("{mark} {node} {status}{detail}"), level)
        }
        FlowEvent::Step { .. } => return None,
        // The final line comes with `Done`, which also names `keel flow status`.
        FlowEvent::RunFinished { .. } => return None,
    })
}

/// The final line of a run.
pub fn done_line(name: &str, done: &Done) -> (String, Level) {
    match done {
        Done::Ended {
            run_id,
            status,
            error,
        } => {
            let level = match status.as_str() {
                "completed" => Level::Ok,
                "cancelled" => Level::Warn,
                _ => Level::Error,
            };
            let why = error
                .as_deref()
                .map(|e| format!(" ({e})"))
                .unwrap_or_default();
            let more = if status == "completed" {
                String::new()
            } else {
                format!(", `keel flow resume {run_id}` continues it")
            };
            (
                format!(
                    "flow {name}: run {run_id} {status}{why} · `keel flow status {run_id}` shows its nodes{more}"
                ),
                level,
            )
        }
        Done::Failed(e) => (format!("✗ flow {name} failed: {e}"), Level::Error),
    }
}

/// Shows a progress event in the transcript.
pub fn show_event(app: &mut App, e: &FlowEvent) {
    if let Some((line, level)) = event_line(e) {
        app.notice(line, level);
    }
}

/// Shows how the run `name` ended.
pub fn show_done(app: &mut App, name: &str, done: &Done) {
    let (line, level) = done_line(name, done);
    app.notice(line, level);
}
