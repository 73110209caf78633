//! Running one node: leaves (agent, shell, test, verify, review, deliver), `branch` and
//! `parallel` (each branch in its own copy of the workspace), live or from a trace.

use std::time::Instant;

use futures::future::BoxFuture;
use keel_tools::shell::harness::{CommandSpec, run_command_with_timeout};
use tokio_util::sync::CancellationToken;

use super::agent::AgentRequest;
use super::ctx::Mode;
use super::leaf::{Leaf, Outcome, snapshot};
use crate::ir::{NodeKind, Value};
use crate::state::{NodeStatus, NodeTrace};
use crate::template::Scope;
use crate::tree;

/// Characters of command output kept in a node's outputs.
const OUTPUT_CHARS: usize = 8_000;

/// Runs a node (timeout included) and records its trace and workspace changes.
pub(crate) fn run_node(leaf: Leaf<'_>) -> BoxFuture<'_, Outcome> {
    Box::pin(async move {
        let started_ms = keel_store::now_ms();
        let clock = Instant::now();
        let before = match snapshot(leaf.dir, &leaf.ctx.build_dirs).await {
            Ok(t) => t,
            Err(e) => {
                return Outcome::failed(format!(
                    "cannot record the workspace before node `{}`: {e}",
                    leaf.node.id
                ));
            }
        };
        let cancel = leaf.ctx.cancel.child_token();
        let timeout = leaf.node.timeout;
        let mut out = match tokio::time::timeout(timeout, dispatch(&leaf, &cancel)).await {
            Ok(o) => o,
            Err(_) => {
                cancel.cancel();
                Outcome::failed(format!(
                    "node `{}` timed out after {} s (timeout_secs)",
                    leaf.node.id,
                    timeout.as_secs()
                ))
            }
        };
        let after = match snapshot(leaf.dir, &leaf.ctx.build_dirs).await {
            Ok(t) => t,
            Err(e) => {
                // Never "no changes": what the node did to the files is unknown, so it failed.
                out.status = NodeStatus::Failed;
                out.error = Some(format!(
                    "cannot record the file changes of node `{}`: {e}{}",
                    leaf.node.id,
                    out.error
                        .as_deref()
                        .map(|prev| format!(" (and: {prev})"))
                        .unwrap_or_default()
                ));
                before.clone()
            }
        };
        let t = &mut out.trace;
        t.node = leaf.node.id.clone();
        t.kind = leaf.node.kind.name().to_string();
        t.attempt = leaf.attempt;
        t.status = out.status;
        t.outputs = out.outputs.clone();
        t.error = out.error.clone();
        t.started_ms = started_ms;
        t.duration_ms = clock.elapsed().as_millis() as u64;
        // A parallel node's changes are the chosen branch's, applied by it; a replayed
        // leaf's are the recorded ones: either way the snapshot tells what happened.
        t.changes = tree::diff(&before, &after);
        out
    })
}

fn scope<'a>(leaf: &'a Leaf<'_>) -> Scope<'a> {
    Scope {
        run_id: &leaf.ctx.run_id,
        inputs: &leaf.ctx.inputs,
        outputs: leaf.outputs,
    }
}

async fn dispatch(leaf: &Leaf<'_>, cancel: &CancellationToken) -> Outcome {
    let scope = scope(leaf);
    if let Mode::Replay(trace) = &leaf.ctx.mode
        && matches!(
            leaf.node.kind,
            NodeKind::Agent(_) | NodeKind::Review { .. } | NodeKind::Deliver { .. }
        )
    {
        return match trace.find(&leaf.node.id, leaf.nth) {
            Some(rec) => {
                if let Err(e) = tree::apply(leaf.dir, &rec.changes, None) {
                    return Outcome::failed(e);
                }
                Outcome {
                    status: rec.status,
                    outputs: rec.outputs.clone(),
                    error: rec.error.clone(),
                    trace: NodeTrace {
                        input: rec.input.clone(),
                        session_id: rec.session_id.clone(),
                        ..NodeTrace::default()
                    },
                    inner: Vec::new(),
                }
            }
            None => Outcome::failed(format!(
                "the trace has no recorded execution #{} of node `{}`",
                leaf.nth + 1,
                leaf.node.id
            )),
        };
    }
    match &leaf.node.kind {
        NodeKind::Agent(spec) | NodeKind::Review { agent: spec, .. } => {
            let review = matches!(leaf.node.kind, NodeKind::Review { .. });
            let mut task = scope.render(&spec.task);
            if let Some(f) = leaf.feedback {
                task.push_str("\n\nA reviewer asked for changes to your previous attempt:\n");
                task.push_str(f);
            }
            if review {
                task.push_str("\n\nEnd your answer with a line that says APPROVE or REQUEST_CHANGES, then your comments.");
            }
            let res = leaf
                .ctx
                .agents
                .run(AgentRequest {
                    node: leaf.node.id.clone(),
                    spec: spec.clone(),
                    task: task.clone(),
                    workspace: leaf.dir.to_path_buf(),
                    max_steps: leaf.node.max_steps,
                    timeout: leaf.node.timeout,
                    cancel: cancel.clone(),
                })
                .await;
            let mut out = Outcome {
                trace: NodeTrace {
                    input: task,
                    session_id: res.session_id.clone(),
                    usage: res.usage,
                    events: res.events.clone(),
                    ..NodeTrace::default()
                },
                ..Outcome::default()
            };
            if !res.completed {
                out.status = NodeStatus::Failed;
                out.error = Some(
                    res.error
                        .unwrap_or_else(|| "the agent did not finish".into()),
                );
                return out;
            }
            if review {
                let upper = res.text.to_ascii_uppercase();
                let verdict =
                    if upper.contains("REQUEST_CHANGES") || upper.contains("REQUEST CHANGES") {
                        "request_changes"
                    } else if upper.contains("APPROVE") {
                        "approve"
                    } else {
                        out.status = NodeStatus::Failed;
                        out.error = Some(
                            "the reviewer's answer says neither APPROVE nor REQUEST_CHANGES".into(),
                        );
                        return out;
                    };
                out.outputs.insert("output".into(), Value::String(res.text));
                out.outputs
                    .insert("approved".into(), Value::Bool(verdict == "approve"));
                out.outputs
                    .insert("verdict".into(), Value::String(verdict.into()));
                out.status = NodeStatus::Completed;
                return out;
            }
            match Value::parse_as(&res.text, spec.output) {
                Some(v) => {
                    out.outputs.insert("output".into(), v);
                    out.status = NodeStatus::Completed;
                }
                None => {
                    out.status = NodeStatus::Failed;
                    out.error = Some(format!(
                        "type mismatch: node `{}` declares output {}, and the model answered `{}`",
                        leaf.node.id,
                        spec.output,
                        crate::short(&res.text, 80)
                    ));
                }
            }
            out
        }
        NodeKind::Shell { command } | NodeKind::Test { command } | NodeKind::Verify { command } => {
            let (cmd, env) = scope.render_command(command);
            let policy = match leaf.ctx.check_command(&cmd, leaf.dir) {
                Ok(policy) => policy,
                Err(why) => {
                    return Outcome {
                        trace: NodeTrace {
                            input: cmd,
                            ..NodeTrace::default()
                        },
                        ..Outcome::failed(why)
                    };
                }
            };
            command_node(leaf, &cmd, env, policy, cancel).await
        }
        NodeKind::Branch {
            negate, condition, ..
        } => match scope.lookup(condition).and_then(|v| v.as_bool()) {
            Some(b) => {
                let taken = b != *negate;
                let mut out = Outcome {
                    status: NodeStatus::Completed,
                    ..Outcome::default()
                };
                out.outputs.insert(
                    "output".into(),
                    Value::String(if taken { "then" } else { "else" }.into()),
                );
                out.trace.input = condition.to_string();
                out
            }
            None => Outcome::failed(format!(
                "the condition `{condition}` has no bool value (the node it names did not complete)"
            )),
        },
        NodeKind::Parallel { branches, .. } => {
            super::parallel::run(leaf, branches, cancel, run_node).await
        }
        NodeKind::Deliver {
            branch,
            message,
            pr_file,
        } => {
            let branch = scope.render(branch);
            let mut msg = scope.render(message);
            if msg.trim().is_empty() {
                msg = format!(
                    "{}: changes from flow run {}",
                    leaf.ctx.flow.name, leaf.ctx.run_id
                );
            }
            let pr = super::deliver::pr_description(leaf.ctx, leaf.outputs, &branch, &msg);
            let dir = leaf.dir.to_path_buf();
            let (b, m) = (branch.clone(), msg.clone());
            let done =
                tokio::task::spawn_blocking(move || super::deliver::commit_on_branch(&dir, &b, &m))
                    .await
                    .map_err(|e| e.to_string())
                    .and_then(|r| r);
            let delivered = match done {
                Ok(d) => d,
                Err(e) => return Outcome::failed(format!("deliver: {e}")),
            };
            // Beneath the open workspace: a flow's `pr_file` (project content) with `..`, an
            // absolute path or any symlink is refused, never written through.
            let pr_rel = match pr_file {
                Some(p) => format!(".keel/flows/{p}"),
                None => format!(".keel/flows/runs/{}/PR.md", leaf.ctx.run_id),
            };
            let pr_path = leaf.ctx.workspace.join(&pr_rel);
            let written = keel_tools::Workspace::new(&leaf.ctx.workspace)
                // Literally: a symlink inside `.keel/flows` is repository content, not a
                // place to write through (red-team pass 6, R6-11: `hk -> ../../.husky`).
                .and_then(|ws| ws.locate_literal(&pr_rel))
                .map_err(|e| e.to_string())
                .and_then(|target| {
                    target
                        .write_atomic(pr.as_bytes(), keel_tools::fs::WriteMode::Replace, None)
                        .map_err(|e| e.to_string())
                });
            if let Err(e) = written {
                return Outcome::failed(format!("cannot write {}: {e}", pr_path.display()));
            }
            let mut out = Outcome {
                status: NodeStatus::Completed,
                ..Outcome::default()
            };
            out.outputs
                .insert("output".into(), Value::String(delivered.branch));
            out.outputs
                .insert("commit".into(), Value::String(delivered.commit));
            out.outputs.insert(
                "pr_file".into(),
                Value::String(pr_path.display().to_string()),
            );
            out.trace.input = msg;
            out
        }
    }
}

async fn command_node(
    leaf: &Leaf<'_>,
    cmd: &str,
    env: Vec<(String, String)>,
    policy: keel_tools::sandbox::SandboxPolicy,
    cancel: &CancellationToken,
) -> Outcome {
    let mut spec = CommandSpec::shell(cmd, leaf.dir, leaf.node.timeout).with_shell(&leaf.ctx.shell);
    spec.policy = policy;
    // The values of the line's `${…}` references (model text, inputs): data, never syntax.
    spec.env = env;
    let mut out = Outcome {
        trace: NodeTrace {
            input: cmd.to_string(),
            ..NodeTrace::default()
        },
        ..Outcome::default()
    };
    let ran = match run_command_with_timeout(&spec, cancel).await {
        Ok(r) => r,
        Err(e) => {
            out.status = NodeStatus::Failed;
            out.error = Some(e.to_string());
            return out;
        }
    };
    let passed = ran.success();
    let text = keel_tools::text::truncate_middle(&ran.combined(), OUTPUT_CHARS);
    let code = ran.exit_code.map_or(-1.0, f64::from);
    match &leaf.node.kind {
        NodeKind::Test { .. } => {
            // A failing test is a result, not a failure of the node: later nodes branch on it.
            out.status = if ran.timed_out || ran.cancelled {
                NodeStatus::Failed
            } else {
                NodeStatus::Completed
            };
            out.outputs
                .insert("output".into(), Value::String(text.clone()));
            out.outputs.insert("passed".into(), Value::Bool(passed));
            out.outputs.insert("exit_code".into(), Value::Number(code));
        }
        NodeKind::Verify { .. } => {
            out.outputs
                .insert("output".into(), Value::String(text.clone()));
            out.outputs.insert("passed".into(), Value::Bool(passed));
            out.status = if passed {
                NodeStatus::Completed
            } else {
                NodeStatus::Failed
            };
        }
        _ => {
            out.outputs.insert(
                "output".into(),
                Value::String(keel_tools::text::truncate_middle(
                    ran.stdout.trim_end(),
                    OUTPUT_CHARS,
                )),
            );
            out.outputs.insert("exit_code".into(), Value::Number(code));
            out.status = if passed {
                NodeStatus::Completed
            } else {
                NodeStatus::Failed
            };
        }
    }
    if out.status == NodeStatus::Failed {
        out.error = Some(format!(
            "`{cmd}` failed ({}){}",
            ran.status_line(leaf.node.timeout),
            if text.is_empty() {
                String::new()
            } else {
                format!(": {}", crate::short(&text, 400))
            }
        ));
    }
    out
}
