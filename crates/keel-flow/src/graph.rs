//! Graph helpers over compiled nodes: cycle search, ancestors, the references a node makes.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::ir::{Node, NodeKind, Ref};

pub(crate) fn visit<'a>(
    id: &'a str,
    index: &HashMap<&'a str, &'a Node>,
    mark: &mut HashMap<&'a str, u8>,
    stack: &mut Vec<&'a str>,
) -> Option<Vec<String>> {
    match mark.get(id) {
        Some(2) => return None,
        Some(1) => {
            let from = stack.iter().position(|s| *s == id).unwrap_or(0);
            let mut cycle: Vec<String> = stack[from..].iter().map(|s| s.to_string()).collect();
            cycle.push(id.to_string());
            return Some(cycle);
        }
        _ => {}
    }
    mark.insert(id, 1);
    stack.push(id);
    if let Some(n) = index.get(id) {
        for d in &n.deps {
            if let Some((k, _)) = index.get_key_value(d.as_str())
                && let Some(c) = visit(k, index, mark, stack)
            {
                return Some(c);
            }
        }
    }
    stack.pop();
    mark.insert(id, 2);
    None
}

/// Every node `id` depends on, directly or not.
pub fn ancestors(nodes: &[Node], id: &str) -> BTreeSet<String> {
    let index: BTreeMap<&str, &Node> = nodes.iter().map(|n| (n.id.as_str(), n)).collect();
    let mut out = BTreeSet::new();
    let mut todo = vec![id.to_string()];
    while let Some(cur) = todo.pop() {
        if let Some(n) = index.get(cur.as_str()) {
            for d in &n.deps {
                if out.insert(d.clone()) {
                    todo.push(d.clone());
                }
            }
        }
    }
    out
}

/// The references a node's own fields make.
pub fn kind_refs(kind: &NodeKind) -> Vec<Ref> {
    let mut out: Vec<Ref> = Vec::new();
    match kind {
        NodeKind::Agent(a) | NodeKind::Review { agent: a, .. } => {
            out.extend(a.task.refs().cloned())
        }
        NodeKind::Shell { command } | NodeKind::Test { command } | NodeKind::Verify { command } => {
            out.extend(command.refs().cloned())
        }
        NodeKind::Branch { condition, .. } => out.push(condition.clone()),
        NodeKind::Parallel { .. } => {}
        NodeKind::Deliver {
            branch, message, ..
        } => {
            out.extend(branch.refs().cloned());
            out.extend(message.refs().cloned());
        }
    }
    out
}
