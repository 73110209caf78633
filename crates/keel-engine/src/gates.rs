//! The default verification gates: the project's detected test command, plus a project-level
//! check for languages whose check finds real errors (types, undefined names), never style.
//!
//! Style linters are deliberately not defaults: a repository with pre-existing style warnings
//! would fail verification for reasons the agent did not cause, and it would "fix" unrelated
//! code. Per-file checks already run after every edit (auto-lint); users who want stricter gates
//! list them in `[verify] commands`.

use std::path::Path;

use keel_tools::shell::{detect_test_command, exec::on_path};

use crate::verify::{Gate, GateDetector};

/// Detects gates from the files in the workspace root and the programs on `PATH`.
#[derive(Debug, Clone, Default)]
pub struct ProjectGates {
    /// `[shell] test_command`, when configured.
    pub test_command: Option<String>,
}

impl GateDetector for ProjectGates {
    fn detect(&self, workspace: &Path) -> Vec<Gate> {
        let mut gates = Vec::new();
        if let Some(tests) = detect_test_command(workspace, self.test_command.as_deref()) {
            let command = if tests.cwd == workspace {
                tests.command
            } else {
                format!("cd {} && {}", shell_quote(&tests.cwd), tests.command)
            };
            gates.push(Gate {
                name: "tests".into(),
                command,
            });
        }
        for (marker, program, command) in PROJECT_CHECKS {
            if workspace.join(marker).exists() && on_path(program) {
                gates.push(Gate {
                    name: "lint".into(),
                    command: (*command).into(),
                });
            }
        }
        gates
    }
}

/// (marker file in the root, program, command): checks that report errors, not style.
const PROJECT_CHECKS: &[(&str, &str, &str)] = &[
    ("tsconfig.json", "tsc", "tsc --noEmit --pretty false"),
    ("go.mod", "go", "go vet ./..."),
    // Syntax errors and undefined names only: the checks flake8/ruff users run as "fatal".
    (
        "pyproject.toml",
        "ruff",
        "ruff check --quiet --select E9,F63,F7,F82 .",
    ),
];

fn shell_quote(path: &Path) -> String {
    format!("'{}'", path.display().to_string().replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_the_project_test_command() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("Cargo.toml"),
            "[package]\nname = \"x\"\nversion = \"0.1.0\"\n",
        )
        .unwrap();
        let gates = ProjectGates::default().detect(dir.path());
        assert_eq!(gates[0].name, "tests");
        assert!(gates[0].command.starts_with("cargo test"), "{gates:?}");
    }

    #[test]
    fn configured_test_command_wins_and_nothing_is_guessed_for_unknown_projects() {
        let dir = tempfile::tempdir().unwrap();
        assert!(ProjectGates::default().detect(dir.path()).is_empty());
        let gates = ProjectGates {
            test_command: Some("make check".into()),
        }
        .detect(dir.path());
        assert_eq!(gates.len(), 1);
        assert_eq!(gates[0].command, "make check");
    }

    #[test]
    fn quoting_survives_odd_paths() {
        assert_eq!(shell_quote(Path::new("/a b/it's")), r"'/a b/it'\''s'");
    }
}
