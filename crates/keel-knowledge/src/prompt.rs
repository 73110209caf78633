//! The layered prompt.
//!
//! The system prompt is the **byte-stable head**: the base layer (Keel's identity and rules)
//! and the project layer (AGENTS.md / CLAUDE.md). It depends only on Keel's version and the
//! repository's instruction files — never on the date, the directory, git state or the task —
//! so providers can cache it across turns, runs and days. The task layer and everything
//! volatile (date, working directory) travel in the first user message, at the tail.

use std::path::Path;

use keel_tools::project::{INSTRUCTIONS_LIMIT, ProjectDir};

/// Keel's base layer.
pub const BASE_PROMPT: &str = include_str!("prompts/base.md");

/// Project instruction files read into the project layer, in this order (defined beside the
/// nested-rule lookup that also reads them).
pub use crate::rules::PROJECT_FILES;

/// Longest project instruction file taken whole; longer ones are cut with a note.
const MAX_PROJECT_FILE_CHARS: usize = 20_000;

/// The system prompt for a workspace: base layer, then the project layer if the repository
/// has instruction files, then its constitution (an invalid one is left out here; the
/// engine refuses to start with it).
pub fn system_prompt(workspace: &Path) -> String {
    let constitution = crate::constitution::Constitution::load(workspace).unwrap_or_default();
    system_prompt_with(workspace, &constitution)
}

/// The system prompt with an already validated constitution.
pub fn system_prompt_with(
    workspace: &Path,
    constitution: &crate::constitution::Constitution,
) -> String {
    system_prompt_checked(workspace, constitution).0
}

/// The system prompt, and a message for each instruction file left out of it because it must
/// not be read (see [`project_layer_checked`]).
pub fn system_prompt_checked(
    workspace: &Path,
    constitution: &crate::constitution::Constitution,
) -> (String, Vec<String>) {
    let (project, problems) = project_layer_checked(workspace);
    let mut out = BASE_PROMPT.trim_end().to_string();
    for layer in [project, constitution.head_text()].into_iter().flatten() {
        out.push_str("\n\n");
        out.push_str(&layer);
    }
    out.push('\n');
    (out, problems)
}

/// The project layer: the repository's root AGENTS.md and CLAUDE.md, then its
/// `.keel/rules/*.md` without `globs`, if present.
pub fn project_layer(workspace: &Path) -> Option<String> {
    project_layer_checked(workspace).0
}

/// The project layer and the instruction files left out of it because they must not be
/// read (a symlink out of the workspace, a FIFO or device, over the size limit), one
/// message each naming the file and what to do.
pub fn project_layer_checked(workspace: &Path) -> (Option<String>, Vec<String>) {
    let Ok(project) = ProjectDir::open(workspace) else {
        return (None, Vec::new());
    };
    let mut sections = Vec::new();
    let mut problems = Vec::new();
    for name in PROJECT_FILES {
        let text = match project.read(name, INSTRUCTIONS_LIMIT) {
            Ok(Some(text)) => text,
            Ok(None) => continue,
            Err(e) => {
                problems.push(e.to_string());
                continue;
            }
        };
        let text = text.trim();
        if text.is_empty() {
            continue;
        }
        let body = if text.chars().count() > MAX_PROJECT_FILE_CHARS {
            let cut: String = text.chars().take(MAX_PROJECT_FILE_CHARS).collect();
            format!("{cut}\n[… {name} cut at {MAX_PROJECT_FILE_CHARS} characters]")
        } else {
            text.to_string()
        };
        sections.push(format!("## From {name}\n{body}"));
    }
    let (rules, rule_problems) = crate::rules::head_rules_checked(&project);
    sections.extend(rules);
    problems.extend(rule_problems);
    if sections.is_empty() {
        return (None, problems);
    }
    (
        Some(format!(
            "# Project instructions\nThe repository's own instructions. Follow them unless the user's task says otherwise.\n\n{}",
            sections.join("\n\n")
        )),
        problems,
    )
}

/// Volatile facts about where and when the run happens; they go at the tail.
#[derive(Debug, Clone, PartialEq)]
pub struct Environment {
    pub workspace: String,
    pub date: String,
    pub platform: String,
}

impl Environment {
    /// The environment of a run in `workspace` now.
    pub fn current(workspace: &Path) -> Self {
        Self {
            workspace: workspace.display().to_string(),
            date: keel_store::time::utc_date(keel_store::now_ms()),
            platform: format!("{}-{}", std::env::consts::OS, std::env::consts::ARCH),
        }
    }
}

/// The task layer: the user's task, extra context (answered questions, PRD excerpts) and the
/// environment. This is the first user message of a session.
pub fn task_message(task: &str, context: &[String], env: &Environment) -> String {
    let mut out = String::new();
    out.push_str(task.trim());
    out.push('\n');
    for c in context {
        out.push('\n');
        out.push_str(c.trim());
        out.push('\n');
    }
    out.push_str(&format!(
        "\n<environment>\nworkspace: {}\ndate: {}\nplatform: {}\n</environment>\n",
        env.workspace, env.date, env.platform
    ));
    out
}

/// The codemap as task-layer context: it changes with the code, so it never goes in the
/// cached system prompt.
pub fn codemap_block(map: &str) -> String {
    format!(
        "<codemap>\nAn overview of this repository (codebase_search finds anything in it):\n{}\n</codemap>",
        map.trim_end()
    )
}

/// The user message that continues a stored session: the user's message, then the answers
/// to the session's blockers, if any.
pub fn continuation_message(message: &str, answers: Option<&str>) -> String {
    let message = message.trim();
    let mut out = if message.is_empty() {
        "Continue the task from where you stopped.".to_string()
    } else {
        message.to_string()
    };
    if let Some(a) = answers {
        out.push_str("\n\n");
        out.push_str(a.trim());
    }
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_prompt_depends_only_on_instruction_files() {
        let a = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let b = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(system_prompt(a.path()), system_prompt(b.path()));
        assert!(!system_prompt(a.path()).contains(&a.path().display().to_string()));
        std::fs::write(a.path().join("AGENTS.md"), "Use tabs.\n").unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(a.path().join("CLAUDE.md"), "Run make test.\n")
            .unwrap_or_else(|e| panic!("{e}"));
        let p = system_prompt(a.path());
        assert!(p.starts_with(BASE_PROMPT.trim_end()));
        let agents = p.find("Use tabs.").unwrap_or(usize::MAX);
        let claude = p.find("Run make test.").unwrap_or(0);
        assert!(agents < claude, "AGENTS.md comes before CLAUDE.md");
    }

    #[test]
    fn task_message_carries_the_volatile_tail() {
        let env = Environment {
            workspace: "/w".into(),
            date: "2026-11-21".into(),
            platform: "linux-x86_64".into(),
        };
        let m = task_message("  fix it ", &["Q: which file?\nA: a.rs".into()], &env);
        assert!(m.starts_with("fix it\n"));
        assert!(m.contains("A: a.rs"));
        assert!(m.contains("date: 2026-11-21"));
    }
}
