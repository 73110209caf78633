//! The built-in guardrails that are [`Hook`](crate::hooks::Hook)s: each owns its state for one
//! run and talks to the loop only through [`HookContext`](crate::hooks::HookContext) and
//! [`HookAction`](crate::hooks::HookAction). The engine creates one of each per run, in the
//! order `hooks::builtin::standard` registers them. None of them imports the loop.

pub(crate) mod approval;
pub(crate) mod blockers;
pub(crate) mod compaction;
pub(crate) mod constitution;
pub(crate) mod phase;
pub(crate) mod rules;
pub(crate) mod scope;
pub(crate) mod skills;
pub(crate) mod snapshot;
pub(crate) mod tracker;
pub(crate) mod verify;

/// Locks a guardrail's state (a poisoned lock still holds usable state: a panic inside a
/// guardrail ends the run anyway).
pub(crate) fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The files `task` names that exist in `workspace` as regular files (at most three, in the
/// task's order): where a weak model that does not find the way on is pointed.
pub(crate) fn files_named(task: &str, workspace: &keel_tools::Workspace) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    for word in task.split_whitespace() {
        let word = word.trim_matches(|c: char| {
            matches!(
                c,
                '`' | '\'' | '"' | ',' | ';' | ':' | '(' | ')' | '.' | '!' | '?'
            )
        });
        if !(word.contains('.') || word.contains('/')) || found.iter().any(|f| f == word) {
            continue;
        }
        let regular = workspace
            .locate(word)
            .is_ok_and(|p| matches!(p.info(), Ok(Some(i)) if i.check_regular().is_ok()));
        if regular {
            found.push(word.to_string());
        }
        if found.len() == 3 {
            break;
        }
    }
    found
}

/// The exact call that reads `file`, as the model should write it.
pub(crate) fn read_call(file: &str) -> String {
    format!("read_file {}", serde_json::json!({ "path": file }))
}
