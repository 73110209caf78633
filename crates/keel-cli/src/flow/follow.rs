//! `keel flow status RUN --follow`: re-reads the run from the store every 200 ms and prints
//! each node state change until the run ends (or its process is gone), so a second terminal
//! can watch a run live.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use keel_flow::state::NodeState;
use keel_flow::store::RunRecord;

use super::exec::{find_run, node_line, node_order, open, runtime, store_error};
use crate::exit;

/// How often the store is read again.
const POLL: Duration = Duration::from_millis(200);

pub fn follow(root: &Path, run: Option<&str>) -> anyhow::Result<u8> {
    let rt = runtime()?;
    let ws = root.display().to_string();
    rt.block_on(async {
        let store = open(root).await?;
        let mut rec = find_run(&store, &ws, run).await.map_err(store_error)?;
        say!("run {} · flow {} · {}", rec.id, rec.flow_name, rec.status);
        let order = node_order(&rec);
        let mut seen: BTreeMap<String, NodeState> = BTreeMap::new();
        loop {
            print_changes(&rec, &order, &mut seen);
            // Queued: waiting for a `keel worker` (keel flow run --queue).
            if rec.status == "queued" {
                tokio::select! {
                    _ = tokio::time::sleep(POLL) => {}
                    _ = tokio::signal::ctrl_c() => return Ok(exit::COMPLETED),
                }
                rec = store.get(&rec.id).await.map_err(store_error)?;
                continue;
            }
            if rec.status != "running" {
                say!("run {} {}", rec.id, rec.status);
                return Ok(outcome(&rec.status));
            }
            if let Some(pid) = rec.pid
                && pid != std::process::id()
                && !store.run_alive(&rec).await.map_err(store_error)?
            {
                // It may have finished between the two reads: look once more.
                rec = store.get(&rec.id).await.map_err(store_error)?;
                if rec.status == "running" {
                    say!(
                        "run {} stopped: its process ({pid}) is gone; `keel flow resume {}` continues it",
                        rec.id, rec.id
                    );
                    return Ok(exit::FAILED);
                }
                continue;
            }
            tokio::select! {
                _ = tokio::time::sleep(POLL) => {}
                _ = tokio::signal::ctrl_c() => return Ok(exit::COMPLETED),
            }
            rec = store.get(&rec.id).await.map_err(store_error)?;
        }
    })
}

/// Prints the nodes whose state differs from what was last printed.
fn print_changes(rec: &RunRecord, order: &[String], seen: &mut BTreeMap<String, NodeState>) {
    let extra = rec.state.nodes.keys().filter(|k| !order.contains(k));
    for id in order.iter().chain(extra) {
        let Some(s) = rec.state.nodes.get(id) else {
            continue;
        };
        if seen.get(id) != Some(s) {
            say!("{}", node_line(id, s));
            seen.insert(id.clone(), s.clone());
        }
    }
}

/// The exit code for how the run ended: 0 completed, otherwise as `keel flow run` exits.
fn outcome(status: &str) -> u8 {
    match status {
        "completed" => exit::COMPLETED,
        "cancelled" => exit::CANCELLED,
        _ => exit::FAILED,
    }
}
