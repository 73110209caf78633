//! The engine's [`CommandJudge`]: the shell's safety analysis ([`CommandSafety`], a real bash
//! grammar) decides what is read-only, and the project's test commands (`[shell]
//! test_command`, `[verify] commands` or the detected gates, and the detected test runner) are
//! recognised for the verification phase.

use std::path::PathBuf;

use keel_tools::PlannedCommand;
use keel_tools::shell::{Analysis, CommandSafety, SafetyClass, detect_test_command};

use crate::verify::SharedGateDetector;
use keel_phase::CommandJudge;

/// Characters that make a command line more than one plain command (operators, redirections,
/// substitutions, escapes): a test command may not contain them.
const SHELL_META: &[char] = &[
    ';', '&', '|', '<', '>', '$', '`', '(', ')', '\n', '\\', '{', '}',
];

/// Programs that run arbitrary code given as arguments: a test command starting with one
/// must match whole, not by its first word.
const INTERPRETERS: &[&str] = &[
    "python", "python3", "node", "deno", "bun", "sh", "bash", "zsh", "ruby", "perl", "php", "env",
    "npx", "uv", "poetry",
];

/// Judges commands with the shell's safety analysis and the project's test commands.
pub struct EngineJudge {
    pub(crate) workspace: PathBuf,
    /// `[verify] commands`, when configured.
    pub(crate) configured: Option<Vec<String>>,
    pub(crate) detector: SharedGateDetector,
    /// The analyser, with the user's `[shell] allow` list.
    pub(crate) safety: CommandSafety,
    /// `[shell] test_command`.
    pub(crate) test_command: Option<String>,
}

impl EngineJudge {
    /// The test commands of the project now (detection runs on each call: the project may
    /// have gained a manifest during the session).
    fn test_commands(&self) -> Vec<String> {
        let mut out: Vec<String> = self.test_command.iter().cloned().collect();
        match &self.configured {
            Some(c) => out.extend(c.iter().cloned()),
            None => out.extend(
                self.detector
                    .detect(&self.workspace)
                    .into_iter()
                    .map(|g| g.command),
            ),
        }
        if let Some(t) = detect_test_command(&self.workspace, self.test_command.as_deref()) {
            out.push(t.command);
        }
        out
    }
}

/// `Ok` when `analysis` is at most `limit`, else its class and reasons.
fn at_most(analysis: &Analysis, limit: SafetyClass) -> Result<(), String> {
    if analysis.class <= limit {
        Ok(())
    } else {
        Err(format!(
            "{}: {}",
            analysis.class,
            analysis.reasons.join("; ")
        ))
    }
}

impl CommandJudge for EngineJudge {
    fn read_only(&self, command: &str) -> Result<(), String> {
        at_most(&self.safety.classify(command), SafetyClass::ReadOnly)
    }

    fn is_test_command(&self, command: &str) -> bool {
        self.test_commands()
            .iter()
            .any(|t| matches_test_command(command, t))
            && self
                .test_run(&PlannedCommand {
                    command: command.to_string(),
                    cwd: self.workspace.clone(),
                })
                .is_ok()
    }

    fn test_run(&self, planned: &PlannedCommand) -> Result<(), String> {
        let analysis =
            self.safety
                .classify_test_run(&planned.command, &planned.cwd, &self.workspace);
        at_most(&analysis, SafetyClass::WritesWorkspace)
    }
}

/// Whether `command` runs the test command `test`: a single plain command (no operators,
/// redirections or substitutions) whose words start with the test command's program and
/// subcommand (`cargo test -p x` for `cargo test --workspace`), or with all of its words when
/// the program is an interpreter (`python -m pytest`).
pub fn matches_test_command(command: &str, test: &str) -> bool {
    if command.contains(SHELL_META) {
        return false;
    }
    let words: Vec<&str> = command.split_whitespace().collect();
    let test_words: Vec<&str> = test.split_whitespace().collect();
    let Some(program) = test_words.first() else {
        return false;
    };
    let program = program.rsplit('/').next().unwrap_or(program);
    let head: Vec<&str> = if INTERPRETERS.contains(&program)
        || program.starts_with("python")
        || test.contains(SHELL_META)
    {
        test_words.clone()
    } else {
        test_words
            .iter()
            .take(2)
            .take_while(|w| !w.starts_with('-'))
            .copied()
            .collect()
    };
    !head.is_empty() && words.len() >= head.len() && words[..head.len()] == head[..]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_commands_match_by_program_and_subcommand() {
        assert!(matches_test_command("cargo test", "cargo test --workspace"));
        assert!(matches_test_command(
            "cargo test -p keel -- --nocapture",
            "cargo test"
        ));
        assert!(matches_test_command("pytest -q tests/test_a.py", "pytest"));
        assert!(matches_test_command("npm test", "npm test"));
        assert!(!matches_test_command("cargo build", "cargo test"));
        assert!(!matches_test_command("cargo test; rm -rf /", "cargo test"));
        assert!(!matches_test_command("cargo test > /etc/x", "cargo test"));
        assert!(!matches_test_command("cargo test $(touch f)", "cargo test"));
        // Interpreters match whole: `python -c …` is not `python -m pytest`.
        assert!(matches_test_command(
            "python -m pytest -x",
            "python -m pytest"
        ));
        assert!(!matches_test_command(
            "python -c 'open(1)'",
            "python -m pytest"
        ));
        assert!(!matches_test_command("cargo test", ""));
    }
}
