//! The intent verbs of SPEC §11: a tiny vocabulary a weak model can use instead of tool names,
//! routed onto the canonical tools by the verb and the argument keys only (deterministic).

use super::alias::{
    Args, PATH_KEYS, ask, codex_shell, grep_like, has_any, list, patch, read_one_based,
    rename_path, search, take, tests,
};
use super::edits::{edit_one, write};

/// An intent verb (SPEC §11): a tiny vocabulary a weak model can use instead of tool names.
#[derive(Debug, Clone, Copy)]
pub struct Intent {
    pub verb: &'static str,
    /// How the verb routes, for the documentation.
    pub rule: &'static str,
}

/// The intent verbs and how each routes.
pub const INTENTS: &[Intent] = &[
    Intent {
        verb: "search",
        rule: "`pattern` or `regex` given → grep; otherwise → codebase_search (`query`)",
    },
    Intent {
        verb: "inspect",
        rule: "a `path` (or `file`) given → read_file; otherwise → list_files",
    },
    Intent {
        verb: "edit",
        rule: "`patch` → apply_patch; `edits` or `search`/`old_str`/`oldString` → edit_file (this also serves opencode's `edit`); `content` → create_file",
    },
    Intent {
        verb: "test",
        rule: "→ run_tests",
    },
    Intent {
        verb: "shell",
        rule: "→ run_command (Codex's `shell` arguments — an argv list, `workdir`, `timeout_ms` — are mapped)",
    },
    Intent {
        verb: "ask",
        rule: "→ ask_user",
    },
    Intent {
        verb: "delegate",
        rule: "no subagent tool in this build: an error saying to do the work with the listed tools",
    },
    Intent {
        verb: "workflow",
        rule: "flows run with `keel flow run`, not from a tool call: an error saying so",
    },
];

/// Routes an intent verb; `None` when `verb` is not one.
pub fn route_intent(verb: &str, args: &mut Args) -> Option<Result<&'static str, String>> {
    Some(match verb {
        "search" | "find" => {
            if let Some(p) = take(args, &["regex"]) {
                args.insert("pattern".into(), p);
            }
            if args.contains_key("pattern") {
                grep_like(args)
            } else {
                search(args)
            }
        }
        "inspect" | "view" | "look" => {
            if has_any(args, PATH_KEYS) {
                read_one_based(args)
            } else {
                list(args)
            }
        }
        "edit" | "modify" | "change" => {
            if has_any(args, &["patch", "diff", "input"]) {
                patch(args)
            } else if has_any(args, &["edits", "search", "old_str", "old_string", "oldString"]) {
                if args.contains_key("edits") {
                    rename_path(args);
                    Ok("edit_file")
                } else {
                    edit_one(args)
                }
            } else if has_any(args, &["content", "file_text", "contents"]) {
                write(args)
            } else {
                Err("the `edit` intent needs `patch` (apply_patch), `edits` or `search`/`replace` (edit_file), or `content` for a new file (create_file)".into())
            }
        }
        "test" | "tests" => tests(args),
        "shell" | "run_shell" | "sh" => codex_shell(args),
        "ask" => ask(args),
        "delegate" | "subagent" | "task" => Err(
            "there is no subagent tool in this session: do the work yourself with the listed tools".into(),
        ),
        "workflow" | "flow" => Err(
            "workflows are run by the user with `keel flow run`, not by a tool call: do the steps with the listed tools".into(),
        ),
        _ => return None,
    })
}
