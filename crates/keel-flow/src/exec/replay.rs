//! `keel flow replay RUN`: re-executes a recorded run from its trace in a fresh directory —
//! the workspace as the run found it, agent, review and deliver results taken from the trace
//! (no model call, no commit), every command run again — and compares the node outputs and
//! the final tree with the recording.

use std::path::{Path, PathBuf};

use super::ctx::Mode;
use super::{Executor, RunSummary};
use crate::FlowError;
use crate::state::{NodeState, RunState};
use crate::tree;

/// What a replay found.
#[derive(Debug, Clone)]
pub struct ReplayReport {
    pub run_id: String,
    pub dir: PathBuf,
    pub summary: RunSummary,
    /// Node outputs that differ from the recording (empty when the replay reproduced it).
    pub mismatches: Vec<String>,
    pub final_tree: Option<String>,
    pub recorded_final_tree: Option<String>,
}

impl ReplayReport {
    pub fn reproduced(&self) -> bool {
        self.mismatches.is_empty() && self.final_tree == self.recorded_final_tree
    }
}

impl Executor {
    /// Replays run `run_id` in `into` (which must be empty or absent).
    pub async fn replay(&self, run_id: &str, into: &Path) -> Result<ReplayReport, FlowError> {
        let rec = self.store.get(run_id).await?;
        let Some(initial) = rec.trace.initial_tree.clone() else {
            return Err(FlowError::Usage(format!(
                "run {} cannot be replayed: its starting workspace was not recorded ({})",
                rec.id,
                rec.trace
                    .initial_tree_error
                    .as_deref()
                    .unwrap_or("unknown reason")
            )));
        };
        if into.exists()
            && std::fs::read_dir(into)
                .map(|mut d| d.next().is_some())
                .unwrap_or(true)
        {
            return Err(FlowError::Usage(format!(
                "{} is not empty; replay needs an empty or new directory",
                into.display()
            )));
        }
        std::fs::create_dir_all(into)
            .map_err(|e| FlowError::Usage(format!("cannot create {}: {e}", into.display())))?;
        // Files recorded by their hash come from the run's workspace, if still unchanged.
        tree::materialize(into, &initial, Some(Path::new(&rec.workspace)))
            .map_err(FlowError::Usage)?;
        let flow = crate::compile(&rec.flow_source, Path::new(&rec.flow_file))?;
        let mut state = RunState::default();
        for id in flow.all_node_ids() {
            state.nodes.insert(id, NodeState::default());
        }
        let recorded = std::sync::Arc::new(rec.trace.clone());
        let ctx = self.ctx(
            &rec.id,
            flow,
            into,
            rec.inputs.clone(),
            Mode::Replay(recorded),
        );
        let summary = self.drive(ctx, state, Default::default(), false).await?;
        let mut mismatches = Vec::new();
        for (id, s) in &rec.state.nodes {
            let got = summary.state.nodes.get(id);
            if got.map(|g| (&g.status, &g.outputs)) != Some((&s.status, &s.outputs)) {
                mismatches.push(format!(
                    "node `{id}`: recorded {} {:?}, replayed {} {:?}",
                    s.status.as_str(),
                    s.outputs,
                    got.map_or("missing", |g| g.status.as_str()),
                    got.map(|g| &g.outputs)
                ));
            }
        }
        Ok(ReplayReport {
            run_id: rec.id.clone(),
            dir: into.to_path_buf(),
            final_tree: summary.trace.final_tree.clone(),
            recorded_final_tree: rec.trace.final_tree.clone(),
            summary,
            mismatches,
        })
    }
}
