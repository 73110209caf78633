//! The flow file as written: YAML deserialized with positions, before any checking. Every
//! field is optional or loosely typed here so that [`crate::compile`] can report each mistake
//! with its file, line and column instead of stopping at the first serde error.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_saphyr::Spanned;

/// A whole flow file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawFlow {
    pub name: Spanned<String>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub inputs: BTreeMap<String, Spanned<RawInput>>,
    #[serde(default)]
    pub max_parallel: Option<Spanned<u32>>,
    pub nodes: Vec<Spanned<RawNode>>,
}

/// A declared input: `task: {type: string, default: "…"}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawInput {
    #[serde(rename = "type")]
    pub ty: Spanned<String>,
    #[serde(default)]
    pub default: Option<serde_json::Value>,
    #[serde(default)]
    pub description: Option<String>,
}

/// One node, whatever its type; the compiler checks which fields its type takes.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawNode {
    pub id: Spanned<String>,
    #[serde(rename = "type")]
    pub ty: Spanned<String>,
    #[serde(default)]
    pub needs: Vec<Spanned<String>>,
    // agent / review
    #[serde(default)]
    pub task: Option<Spanned<String>>,
    #[serde(default)]
    pub role: Option<String>,
    #[serde(default)]
    pub provider: Option<String>,
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub script: Option<String>,
    #[serde(default)]
    pub output: Option<Spanned<String>>,
    /// Run the session's final verification gates (`[verify]`, the detected test command)
    /// when the agent says it is done. Off by default: a flow's own test and verify nodes
    /// are its gates.
    #[serde(default)]
    pub verify: Option<bool>,
    #[serde(default)]
    pub on_changes: Option<Spanned<String>>,
    #[serde(default)]
    pub max_loops: Option<u32>,
    // shell / test / verify
    #[serde(default)]
    pub command: Option<Spanned<String>>,
    // branch
    #[serde(default)]
    pub condition: Option<Spanned<String>>,
    #[serde(default)]
    pub then: Vec<Spanned<String>>,
    #[serde(default, rename = "else")]
    pub otherwise: Vec<Spanned<String>>,
    // parallel
    #[serde(default)]
    pub branches: Vec<RawBranch>,
    #[serde(default)]
    pub select: Option<Spanned<String>>,
    // deliver
    #[serde(default)]
    pub branch: Option<Spanned<String>>,
    #[serde(default)]
    pub message: Option<Spanned<String>>,
    #[serde(default)]
    pub pr_file: Option<String>,
    // every node
    #[serde(default)]
    pub timeout_secs: Option<u64>,
    #[serde(default)]
    pub max_steps: Option<u32>,
    #[serde(default)]
    pub validation_command: Option<String>,
    #[serde(default)]
    pub rollback_command: Option<String>,
}

/// One branch of a `parallel` node: a name and the nodes it runs in order.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawBranch {
    pub name: Spanned<String>,
    pub nodes: Vec<Spanned<RawNode>>,
}
