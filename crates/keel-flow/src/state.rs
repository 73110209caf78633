//! A run's state (checkpointed after every node) and its trace (the evidence replay uses).

use std::collections::BTreeMap;

use keel_protocol::Usage;
use serde::{Deserialize, Serialize};

use crate::ir::Value;
use crate::tree::{Changes, Tree};

/// Where a node is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum NodeStatus {
    #[default]
    Pending,
    Running,
    Completed,
    Failed,
    Skipped,
}

impl NodeStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            NodeStatus::Pending => "pending",
            NodeStatus::Running => "running",
            NodeStatus::Completed => "completed",
            NodeStatus::Failed => "failed",
            NodeStatus::Skipped => "skipped",
        }
    }

    pub fn finished(self) -> bool {
        matches!(
            self,
            NodeStatus::Completed | NodeStatus::Failed | NodeStatus::Skipped
        )
    }
}

/// One node's state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct NodeState {
    pub status: NodeStatus,
    #[serde(default)]
    pub outputs: BTreeMap<String, Value>,
    #[serde(default)]
    pub error: Option<String>,
    /// How many times it has started (review loop-backs and resumes run a node again).
    #[serde(default)]
    pub attempts: u32,
}

/// The whole run's state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct RunState {
    pub nodes: BTreeMap<String, NodeState>,
    /// Review loop-backs taken, per review node.
    #[serde(default)]
    pub loops: BTreeMap<String, u32>,
    /// A reviewer's requested changes, handed to the node it loops back to.
    #[serde(default)]
    pub feedback: BTreeMap<String, String>,
}

impl RunState {
    /// Node outputs by node id (what `${nodes.…}` resolves against).
    pub fn outputs(&self) -> BTreeMap<String, BTreeMap<String, Value>> {
        self.nodes
            .iter()
            .filter(|(_, s)| s.status == NodeStatus::Completed || !s.outputs.is_empty())
            .map(|(id, s)| (id.clone(), s.outputs.clone()))
            .collect()
    }
}

/// One node execution in the trace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct NodeTrace {
    pub node: String,
    pub kind: String,
    pub attempt: u32,
    pub status: NodeStatus,
    /// The rendered task or command.
    pub input: String,
    pub outputs: BTreeMap<String, Value>,
    #[serde(default)]
    pub error: Option<String>,
    /// The workspace changes the node made.
    #[serde(default)]
    pub changes: Changes,
    pub started_ms: u64,
    pub duration_ms: u64,
    /// The agent session the node ran as.
    #[serde(default)]
    pub session_id: Option<String>,
    #[serde(default)]
    pub usage: Usage,
    /// Model requests and responses, tool calls and results, from the session's event log.
    #[serde(default)]
    pub events: Vec<serde_json::Value>,
}

/// The evidence of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Trace {
    /// The workspace when the run started (None when it was too large; replay then refuses).
    #[serde(default)]
    pub initial_tree: Option<Tree>,
    #[serde(default)]
    pub initial_tree_error: Option<String>,
    pub nodes: Vec<NodeTrace>,
    /// Failure handling and checkpoints, in the order they happened.
    #[serde(default)]
    pub steps: Vec<String>,
    /// The fingerprint of the final tree (set when the run ends).
    #[serde(default)]
    pub final_tree: Option<String>,
}

impl Trace {
    /// Total usage of every node.
    pub fn usage(&self) -> Usage {
        let mut u = Usage::default();
        for n in &self.nodes {
            u.input_tokens += n.usage.input_tokens;
            u.output_tokens += n.usage.output_tokens;
            u.cost_usd += n.usage.cost_usd;
            u.requests += n.usage.requests;
        }
        u
    }

    /// The `nth` (0-based) recorded execution of `node` (interrupted executions leave none).
    pub fn find(&self, node: &str, nth: usize) -> Option<&NodeTrace> {
        self.nodes.iter().filter(|n| n.node == node).nth(nth)
    }
}
