//! The shell: a command-safety analyser built on a real bash grammar ([`CommandSafety`]), the
//! process runner every shell tool shares ([`exec`]), the tools `run_command` ([`RunCommand`])
//! and `run_tests` ([`RunTests`]), and the auto-check that runs after edits ([`AutoLint`]).
//!
//! Analysis decides (read-only, writes, network, destructive, unknown) and explains; the kernel
//! sandbox ([`crate::sandbox`]) confines, so a misjudged command still cannot write where it
//! must not. This module does not decide phase policy: callers choose the sandbox policy on
//! the [`crate::ToolContext`].

mod arith;
pub mod bounds;
mod dependency_trees;
pub mod disk;
pub mod exec;
mod file_clock;
mod git_aliases;
pub mod git_programs;
mod git_view;
mod glob_targets;
pub mod harness;
mod hidden;
mod installs;
pub mod judged;
mod line_writes;
mod lint;
mod listing;
mod loaded_code;
pub mod lookup;
mod makefile;
mod missing;
pub mod nested_git;
mod options;
mod outputs;
pub mod pending;
mod programs;
mod project;
mod redirects;
mod removals;
mod rule_options;
mod rules;
mod run_command;
mod run_tests;
mod runners;
mod safety;
mod scripts;
pub mod session_hidden;
mod store_links;
pub mod testing;
mod toolchain_homes;
mod toolchains;
mod unrecorded;
pub mod user_config;
mod venv_startup;
mod verdict;
mod words;
mod wrappers;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

pub(crate) use dependency_trees::tree_of as dependency_tree_of;
pub use lint::{AutoLint, LintSettings};
pub(crate) use loaded_code::refused_for_file_tools;
pub use run_command::{RunCommand, RunCommandArgs};
pub use run_tests::{RunTests, RunTestsArgs};
pub use safety::{Analysis, CommandSafety, RuleMatch, SafetyClass, Source, classify};
pub use testing::{TestCommand, TestRunner, TestSummary, detect_test_command};
pub(crate) use unrecorded::refused_for_file_tools as unrecorded_for_file_tools;
pub(crate) use user_config::holds as refused_in_home;

use crate::ToolRegistry;

/// Programs refused by default (`[shell] deny`): privilege changes and machine shutdown.
pub const DEFAULT_DENY: &[&str] = &[
    "sudo", "su", "doas", "shutdown", "reboot", "halt", "poweroff",
];

/// A command's timeout unless it asks for another (`[shell] timeout_secs`).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
/// The longest timeout a command may ask for (`[shell] max_timeout_secs`).
pub const MAX_TIMEOUT: Duration = Duration::from_secs(300);
/// The test command's timeout (`[shell] test_timeout_secs`).
pub const TEST_TIMEOUT: Duration = Duration::from_secs(300);

/// Directories writable in the workspace-write sandbox besides the workspace and the command's
/// private temp dir: none unless configured (`[shell] writable`, e.g. `~/.cargo/registry`).
pub const DEFAULT_WRITABLE: &[&str] = &[];

/// How the shell tools behave (from the `[shell]` configuration section).
#[derive(Debug, Clone)]
pub struct ShellSettings {
    /// Command prefixes `run_command` refuses (`"sudo"`, `"git push"`).
    pub deny: Vec<String>,
    /// Command prefixes treated as read-only (`"make lint"`).
    pub allow: Vec<String>,
    pub default_timeout: Duration,
    pub max_timeout: Duration,
    /// Use the kernel sandbox when available.
    pub sandbox: bool,
    /// Allow network access inside the sandbox (`[shell] network`, default off).
    pub network: bool,
    /// Paths read-only to commands and file tools besides `.git` and `.keel` (relative to the
    /// workspace).
    pub protected: Vec<PathBuf>,
    /// Extra writable directories for the workspace-write sandbox (`~` expanded).
    pub writable: Vec<PathBuf>,
    /// Directories and files hidden from commands behind empty read-only ones (`shell.hide`,
    /// `~` expanded; by default [`crate::sandbox::SECRET_STORES`]).
    pub hide: Vec<PathBuf>,
    /// Environment variables passed to commands besides the allowlist
    /// ([`exec::ENV_ALLOWLIST`]).
    pub env_keep: Vec<String>,
    /// The test command, overriding detection.
    pub test_command: Option<String>,
    pub test_timeout: Duration,
    /// Processes and memory per command (`shell.max_processes`, `shell.max_memory_mb`).
    pub limits: crate::sandbox::Limits,
}

impl Default for ShellSettings {
    fn default() -> Self {
        Self {
            deny: DEFAULT_DENY.iter().map(|s| s.to_string()).collect(),
            allow: Vec::new(),
            default_timeout: DEFAULT_TIMEOUT,
            max_timeout: MAX_TIMEOUT,
            sandbox: true,
            network: false,
            protected: Vec::new(),
            writable: DEFAULT_WRITABLE
                .iter()
                .map(|p| crate::sandbox::expand_home(p))
                .collect(),
            hide: crate::sandbox::secret_stores(),
            env_keep: Vec::new(),
            test_command: None,
            test_timeout: TEST_TIMEOUT,
            limits: crate::sandbox::Limits::default(),
        }
    }
}

/// Registers `run_command` and `run_tests`, and auto-lint after edits when `lint.enabled`.
pub fn register(registry: &mut ToolRegistry, settings: ShellSettings, lint: LintSettings) {
    let settings = Arc::new(settings);
    registry
        .register(RunCommand::new(settings.clone()))
        .register(RunTests::new(settings.clone()));
    if lint.enabled {
        registry.set_post_write_hook(Arc::new(AutoLint::new(lint, settings)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_tool_schemas_stay_small() {
        let mut r = ToolRegistry::new();
        register(&mut r, ShellSettings::default(), LintSettings::default());
        let specs = serde_json::to_string(&r.specs()).unwrap_or_default();
        // About 4 characters per token: the two tools cost well under 300 tokens of the
        // 4,000-token first request.
        assert!(specs.len() < 1_200, "{} chars: {specs}", specs.len());
        assert_eq!(r.names().collect::<Vec<_>>(), ["run_command", "run_tests"]);
    }
}
