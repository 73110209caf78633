//! `parallel`: every branch runs its nodes in order in its own copy of the workspace, at most
//! `max_parallel` branches at a time; the first branch (in file order) whose last node passed
//! is chosen and its changes are applied to the workspace.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::future::join_all;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use super::leaf::{Leaf, Outcome, RunNode, branch_copy, snapshot};
use crate::ir::{ParallelBranch, Value};
use crate::state::{NodeState, NodeStatus, NodeTrace};
use crate::tree;

struct BranchRun {
    name: String,
    passed: bool,
    changes: tree::Changes,
    /// The branch's copy of the workspace, kept until its changes are applied (files recorded
    /// by their hash are copied from it).
    dir: Option<(tempfile::TempDir, std::path::PathBuf)>,
    inner: Vec<(String, NodeState, NodeTrace)>,
    error: Option<String>,
}

pub(crate) async fn run(
    leaf: &Leaf<'_>,
    branches: &[ParallelBranch],
    _cancel: &CancellationToken,
    run_node: RunNode,
) -> Outcome {
    let base = match snapshot(leaf.dir, &leaf.ctx.build_dirs).await {
        Ok(t) => t,
        Err(e) => {
            return Outcome {
                status: NodeStatus::Failed,
                error: Some(e),
                ..Outcome::default()
            };
        }
    };
    let gate = Arc::new(Semaphore::new(leaf.ctx.flow.max_parallel));
    let runs = branches.iter().map(|b| {
        let gate = gate.clone();
        let base = &base;
        async move {
            let _permit = gate.acquire().await.ok();
            run_branch(leaf, b, base, run_node).await
        }
    });
    let results = join_all(runs).await;
    let mut out = Outcome::default();
    for r in &results {
        out.inner.extend(r.inner.iter().cloned());
    }
    let chosen = results.iter().find(|r| r.passed);
    match chosen {
        Some(r) => {
            let source = r.dir.as_ref().map(|(_, p)| p.as_path());
            if let Err(e) = tree::apply(leaf.dir, &r.changes, source) {
                out.status = NodeStatus::Failed;
                out.error = Some(e);
                return out;
            }
            out.status = NodeStatus::Completed;
            out.outputs
                .insert("output".into(), Value::String(r.name.clone()));
            out.outputs.insert("passed".into(), Value::Bool(true));
        }
        None => {
            out.status = NodeStatus::Failed;
            let why: Vec<String> = results
                .iter()
                .map(|r| {
                    format!(
                        "{}: {}",
                        r.name,
                        r.error.as_deref().unwrap_or("its last node did not pass")
                    )
                })
                .collect();
            out.error = Some(format!("no branch passed ({})", why.join("; ")));
            out.outputs
                .insert("output".into(), Value::String(String::new()));
            out.outputs.insert("passed".into(), Value::Bool(false));
        }
    }
    let names: Vec<&str> = results.iter().map(|r| r.name.as_str()).collect();
    out.trace.input = format!("branches: {}", names.join(", "));
    out
}

async fn run_branch(
    leaf: &Leaf<'_>,
    b: &ParallelBranch,
    base: &tree::Tree,
    run_node: RunNode,
) -> BranchRun {
    let mut run = BranchRun {
        name: b.name.clone(),
        passed: false,
        changes: tree::Changes::new(),
        dir: None,
        inner: Vec::new(),
        error: None,
    };
    let (guard, dir) = match branch_copy(base, leaf.dir).await {
        Ok(d) => d,
        Err(e) => {
            run.error = Some(e);
            return run;
        }
    };
    let mut outputs: BTreeMap<String, BTreeMap<String, Value>> = leaf.outputs.clone();
    let mut last_passed = true;
    for node in &b.nodes {
        let o = run_node(Leaf {
            ctx: leaf.ctx,
            node,
            dir: &dir,
            outputs: &outputs,
            feedback: None,
            attempt: 1,
            nth: 0,
        })
        .await;
        let state = NodeState {
            status: o.status,
            outputs: o.outputs.clone(),
            error: o.error.clone(),
            attempts: 1,
        };
        run.inner.push((node.id.clone(), state, o.trace.clone()));
        if o.status != NodeStatus::Completed {
            run.error = o.error.clone();
            last_passed = false;
            break;
        }
        last_passed = o
            .outputs
            .get("passed")
            .and_then(Value::as_bool)
            .unwrap_or(true);
        outputs.insert(node.id.clone(), o.outputs);
    }
    run.passed = last_passed;
    if run.passed {
        match snapshot(&dir, &leaf.ctx.build_dirs).await {
            Ok(after) => run.changes = tree::diff(base, &after),
            Err(e) => {
                run.passed = false;
                run.error = Some(format!("cannot record the branch's file changes: {e}"));
            }
        }
    }
    run.dir = Some((guard, dir));
    run
}
