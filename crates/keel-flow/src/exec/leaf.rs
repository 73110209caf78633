//! What running one node takes and gives — a [`Leaf`] (the node, its workspace, the outputs so
//! far) and its [`Outcome`] — and the workspace snapshots and copies nodes and parallel
//! branches are run against.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures::future::BoxFuture;
use keel_tools::build_dirs::BuildDirs;

use super::ctx::Ctx;
use crate::ir::{Node, Value};
use crate::state::{NodeState, NodeStatus, NodeTrace};
use crate::tree::{self, Tree};

/// What running a node produced.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    pub status: NodeStatus,
    pub outputs: BTreeMap<String, Value>,
    pub error: Option<String>,
    pub trace: NodeTrace,
    /// Nodes inside a `parallel` node's branches: their final states and traces.
    pub inner: Vec<(String, NodeState, NodeTrace)>,
}

impl Outcome {
    pub(crate) fn failed(reason: impl Into<String>) -> Self {
        Self {
            status: NodeStatus::Failed,
            error: Some(reason.into()),
            ..Self::default()
        }
    }
}

pub(crate) async fn snapshot(dir: &Path, build_dirs: &BuildDirs) -> Result<Tree, String> {
    let dir = dir.to_path_buf();
    let build_dirs = build_dirs.clone();
    tokio::task::spawn_blocking(move || tree::snapshot(&dir, &build_dirs))
        .await
        .map_err(|e| format!("the snapshot worker failed: {e}"))?
}

/// What a leaf node needs from the run.
pub(crate) struct Leaf<'a> {
    pub ctx: &'a Arc<Ctx>,
    pub node: &'a Node,
    pub dir: &'a Path,
    pub outputs: &'a BTreeMap<String, BTreeMap<String, Value>>,
    pub feedback: Option<&'a str>,
    pub attempt: u32,
    /// Which recorded execution of this node to replay.
    pub nth: usize,
}

/// A fresh directory holding a copy of `tree` (a parallel branch's workspace); files recorded
/// by their hash are copied from `source`, the workspace the tree was taken from.
pub(crate) async fn branch_copy(
    tree: &Tree,
    source: &Path,
) -> Result<(tempfile::TempDir, PathBuf), String> {
    let dir = tempfile::Builder::new()
        .prefix("keel-flow-branch-")
        .tempdir()
        .map_err(|e| format!("cannot create a branch workspace: {e}"))?;
    let path = dir.path().to_path_buf();
    let t = tree.clone();
    let p = path.clone();
    let source = source.to_path_buf();
    tokio::task::spawn_blocking(move || tree::materialize(&p, &t, Some(&source)))
        .await
        .map_err(|e| e.to_string())??;
    Ok((dir, path))
}

/// How a node is run: given to a `parallel` node's branches, which run nodes of their own.
pub(crate) type RunNode = for<'a> fn(Leaf<'a>) -> BoxFuture<'a, Outcome>;
