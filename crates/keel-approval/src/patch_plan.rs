//! What an `apply_patch` call will do, for the person asked about it (red-team pass 2, R22):
//! every file and operation — deletions first — with its line counts, instead of the first
//! 200 characters of the patch text, where a `*** Delete File` at the end was never seen. A
//! patch that deletes a file (not re-added by the same patch) is destructive, as `rm` is.
//! Each path is named as the file it resolves to in the workspace — `update src/main.rs (via
//! notes.md)` when `notes.md` links there (R16, as for `edit_file`) — so the person sees, and
//! a session approval remembers, the files written rather than links' names.

use keel_tools::Workspace;
use keel_tools::patch::{FileOp, HunkLine, parse};

/// `path` as the file it resolves to in `workspace`: `real (via path)` through a link.
fn shown(path: &str, workspace: Option<&Workspace>) -> String {
    match workspace
        .and_then(|ws| ws.locate(path).ok())
        .map(|r| r.rel_string())
    {
        Some(real) if real != path.trim_start_matches("./") => format!("{real} (via {path})"),
        _ => path.to_string(),
    }
}

/// The plan of the patch in `call`'s arguments: one entry per operation, deletions first;
/// `None` when the arguments hold no patch that parses.
pub(super) fn plan(arguments: &serde_json::Value, workspace: Option<&Workspace>) -> Option<Plan> {
    let text = arguments.get("patch").and_then(|p| p.as_str())?;
    let patch = parse(text).ok()?;
    let added: Vec<&str> = patch
        .ops
        .iter()
        .filter_map(|op| match op {
            FileOp::Add { path, .. } => Some(path.as_str()),
            _ => None,
        })
        .collect();
    let mut deletes = Vec::new();
    let mut rest = Vec::new();
    for op in &patch.ops {
        match op {
            FileOp::Delete { path } if !added.contains(&path.as_str()) => {
                deletes.push(format!("delete {}", shown(path, workspace)));
            }
            FileOp::Delete { path } => rest.push(format!("replace {}", shown(path, workspace))),
            FileOp::Add { path, content } => {
                rest.push(format!(
                    "add {} (+{})",
                    shown(path, workspace),
                    content.lines().count()
                ));
            }
            FileOp::Update {
                path,
                move_to,
                hunks,
            } => {
                let (mut plus, mut minus) = (0, 0);
                for line in hunks.iter().flat_map(|h| &h.lines) {
                    match line {
                        HunkLine::Add(_) => plus += 1,
                        HunkLine::Remove(_) => minus += 1,
                        HunkLine::Context(_) => {}
                    }
                }
                let target = match move_to {
                    Some(to) => format!("{} → {}", shown(path, workspace), shown(to, workspace)),
                    None => shown(path, workspace),
                };
                rest.push(format!("update {target} (+{plus} -{minus})"));
            }
        }
    }
    Some(Plan { deletes, rest })
}

pub(super) struct Plan {
    /// `delete PATH` for each file the patch removes for good.
    pub deletes: Vec<String>,
    /// Every other operation, in the patch's order.
    pub rest: Vec<String>,
}

impl Plan {
    /// `delete a; update b (+1 -1); add c (+3)`.
    pub fn text(&self) -> String {
        self.deletes
            .iter()
            .chain(&self.rest)
            .cloned()
            .collect::<Vec<_>>()
            .join("; ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deletions_come_first_and_replacements_are_not_deletions() {
        let patch = "*** Begin Patch\n*** Update File: README.md\n@@\n-old\n+new\n+more\n*** Delete File: src/lib.rs\n*** Delete File: a.txt\n*** Add File: a.txt\n+x\n*** End Patch\n";
        let p =
            plan(&serde_json::json!({ "patch": patch }), None).unwrap_or_else(|| panic!("plan"));
        assert_eq!(p.deletes, vec!["delete src/lib.rs".to_string()]);
        assert_eq!(
            p.text(),
            "delete src/lib.rs; update README.md (+2 -1); replace a.txt; add a.txt (+1)"
        );
        assert!(plan(&serde_json::json!({ "patch": "not a patch" }), None).is_none());
    }
}
