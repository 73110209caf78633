//! Final verification and self-correction (K1.2).
//!
//! When the model answers without tool calls it claims to be done. Before the run counts as
//! completed, the configured gates run (`[verify] commands`; unset means the detected ones:
//! the project's test command, plus lint), followed by the constitution's `required_gates`
//! (`.keel/constitution.json`), which run whatever `[verify] commands` says and are marked
//! `required` in their events. Every gate that fails is reported back to the
//! model, which gets up to `agent.self_correction_cap` more rounds to fix it; after that the
//! run fails with the gate output (`verification_failed`). Each gate run is a `verification`
//! event.
//!
//! This module says which gates run ([`GatePlan`]), whether one needs the approval policy's
//! word, and how failures read; the hook that runs them at the finish and owns the run's
//! rounds is `crate::guardrails::verify`.
//!
//! Gate detection is pluggable ([`GateDetector`]): the engine does not know how to find a
//! project's test command; keel-tools' detection is connected through
//! [`crate::EngineBuilder::gate_detector`].

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use keel_knowledge::constitution::{CONSTITUTION_FILE, Constitution};
use keel_tools::shell::{CommandSafety, SafetyClass};

/// Characters of a gate's output kept in its `verification` event.
pub(crate) const EVENT_OUTPUT_CHARS: usize = 8_000;
/// At least this many characters of a failing gate's output reach the model.
const MIN_FEEDBACK_CHARS: usize = 2_000;

/// One verification gate: a shell command that must exit 0.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gate {
    /// A short name for events and feedback (`tests`, `lint`, or the command itself).
    pub name: String,
    /// The shell command, run in the workspace root.
    pub command: String,
}

impl Gate {
    /// A gate named after its command.
    pub fn command(command: impl Into<String>) -> Self {
        let command = command.into();
        Self {
            name: command.clone(),
            command,
        }
    }
}

/// Finds a project's default gates (its test command, plus lint) when `[verify] commands` is
/// unset.
pub trait GateDetector: Send + Sync {
    /// The gates for the project at `workspace`, in the order they should run.
    fn detect(&self, workspace: &Path) -> Vec<Gate>;
}

impl<F: Fn(&Path) -> Vec<Gate> + Send + Sync> GateDetector for F {
    fn detect(&self, workspace: &Path) -> Vec<Gate> {
        self(workspace)
    }
}

/// A detector that finds nothing: with it and no `[verify] commands`, a run completes when the
/// model says it is done (the engine's default is [`crate::gates::ProjectGates`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoDetectedGates;

impl GateDetector for NoDetectedGates {
    fn detect(&self, _workspace: &Path) -> Vec<Gate> {
        Vec::new()
    }
}

/// A shared [`GateDetector`].
pub type SharedGateDetector = Arc<dyn GateDetector>;

/// The outcome of one gate run.
#[derive(Debug, Clone, PartialEq)]
pub struct GateResult {
    pub gate: Gate,
    /// Required by the repository constitution.
    pub required: bool,
    pub passed: bool,
    /// How it ended (`exit code 1`, `timed out after 600 s and was killed`).
    pub status: String,
    /// stdout and stderr.
    pub output: String,
    pub exit_code: Option<i32>,
    pub duration: Duration,
}

/// Lines of a failing gate's output quoted in an error message.
const ERROR_TAIL_LINES: usize = 3;

/// `gate `tests` (`cargo test`) failed with exit code 1: <last lines>`.
/// Why `gate` needs the approval policy's word, if it does: like `run_tests`, a gate is judged
/// by what its command runs in the workspace at `root` (the package.json script behind `npm
/// run lint`, the Makefile recipe, the shell script — files the model or the repository may
/// have written), and one that does more than build and check (deletes, reaches the network,
/// cannot be judged) is asked about like any such command. The tests gate is judged whole
/// (Keel detected its command); another gate only for what its line reads from the
/// repository. Test runners and checkers
/// (`cargo test`, `pytest`, `tsc`) running the project's code count as building: the kernel
/// sandbox confines them.
pub fn gate_does_more_than_check(gate: &Gate, root: &Path) -> Option<String> {
    let analysis = CommandSafety::new().classify_test_run(&gate.command, root, root);
    if matches!(
        analysis.class,
        SafetyClass::ReadOnly | SafetyClass::WritesWorkspace
    ) {
        return None;
    }
    // Another gate's command line is the user's own (`[verify] commands` in their config; a
    // project's are asked about anyway) or Keel's (`tsc --noEmit`): only what it reads from
    // the repository makes it ask.
    if gate.name != "tests" && analysis.sources.is_empty() {
        return None;
    }
    let files: Vec<String> = analysis
        .sources
        .iter()
        .map(|s| s.path.display().to_string())
        .collect();
    let what = if gate.name == "tests" {
        "the test command".to_string()
    } else {
        format!("the {} gate", gate.name)
    };
    Some(if files.is_empty() {
        format!("{what} is {}", analysis.class)
    } else {
        format!(
            "{what} runs {}, which is {}",
            files.join(", "),
            analysis.class
        )
    })
}

pub(crate) fn gate_line(r: &GateResult) -> String {
    let tail: Vec<&str> = r
        .output
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let start = tail.len().saturating_sub(ERROR_TAIL_LINES);
    let tail = keel_tools::text::truncate_middle(&tail[start..].join(" / "), 400);
    let mut what = if r.gate.name == r.gate.command {
        format!("verification gate `{}`", r.gate.command)
    } else {
        format!("verification gate `{}` (`{}`)", r.gate.name, r.gate.command)
    };
    if r.required {
        what.push_str(" (required by the constitution)");
    }
    if tail.is_empty() {
        format!("{what} failed ({})", r.status)
    } else {
        format!("{what} failed ({}): {tail}", r.status)
    }
}

/// When a gate's output shows the sandbox refusing a write outside the workspace (a tool's
/// home directory under a fresh or read-only `HOME`), says so.
pub(crate) fn sandbox_cause(output: &str, workspace: &Path) -> Option<String> {
    let line = output.lines().find(|l| {
        l.contains("Permission denied")
            || l.contains("Read-only file system")
            || l.contains("Operation not permitted")
    })?;
    // The path the command could not write: the first quoted or absolute one on the line.
    let path = line
        .split(['\'', '"', '`', ' ', '(', ')'])
        .map(|w| w.trim_end_matches([':', ',']))
        .find(|w| w.starts_with('/'))
        .map(str::to_string);
    match path {
        Some(p) if Path::new(&p).starts_with(workspace) => None,
        Some(p) => Some(format!(
            "the sandbox caused this: commands may write only inside the workspace, their temp directory and `[shell] writable`, and `{p}` is outside them"
        )),
        None => Some(
            "the sandbox may have caused this: a write was refused (commands may write only inside the workspace, their temp directory and `[shell] writable`)"
                .to_string(),
        ),
    }
}

/// The message that hands failing gates back to the model.
pub fn feedback(failed: &[&GateResult], round: u32, cap: u32, max_chars: usize) -> String {
    let budget = max_chars.max(MIN_FEEDBACK_CHARS);
    let mut out = format!(
        "Final verification failed (round {round}; {} more correction round(s) allowed). Fix what the gates report, check it, then reply with a short summary when done.\n",
        cap.saturating_sub(round)
    );
    for r in failed {
        out.push_str(&format!(
            "\n## Gate `{}`{} ({})\n$ {}\n{}\n",
            r.gate.name,
            if r.required {
                format!(" (required by {CONSTITUTION_FILE})")
            } else {
                String::new()
            },
            r.status,
            r.gate.command,
            keel_tools::text::truncate_middle(r.output.trim_end(), budget)
        ));
    }
    out
}

/// Which gates a run's final verification runs, and where each came from: `[verify]` and the
/// detected gates, then the constitution's `required_gates`.
pub(crate) struct GatePlan {
    verify: keel_config::VerifyConfig,
    /// `[verify] commands` came from the project's `.keel/config.toml`.
    project_commands: bool,
    /// `[shell] test_command` (behind the detected tests gate) came from it.
    project_test_command: bool,
    detector: SharedGateDetector,
    constitution: Arc<Constitution>,
    workspace: PathBuf,
}

impl GatePlan {
    pub(crate) fn new(
        config: &keel_config::Config,
        detector: SharedGateDetector,
        constitution: Arc<Constitution>,
        workspace: &Path,
    ) -> Self {
        Self {
            verify: config.verify.clone(),
            project_commands: config.set_by_project("verify.commands"),
            project_test_command: config.set_by_project("shell.test_command"),
            detector,
            constitution,
            workspace: workspace.to_path_buf(),
        }
    }

    /// Seconds before a gate is killed.
    pub(crate) fn timeout_secs(&self) -> u64 {
        self.verify.timeout_secs
    }

    /// The gates for a run: none when verification is off or (unless `verify.always`) when
    /// the run changed nothing; else `[verify] commands` or the detected gates.
    pub(crate) fn gates(&self, changed: bool) -> Vec<Gate> {
        let cfg = &self.verify;
        if !cfg.enabled || (!cfg.always && !changed) {
            return Vec::new();
        }
        let mut gates = match &cfg.commands {
            Some(cmds) => cmds.iter().map(Gate::command).collect(),
            None => self.detector.detect(&self.workspace),
        };
        // The constitution's required gates, after the others, each once.
        for command in &self.constitution.required_gates {
            if !gates.iter().any(|g| g.command.trim() == command.trim()) {
                gates.push(Gate::command(command.trim()));
            }
        }
        gates
    }

    /// Which repository file chose `gate`, if one did: the project's `.keel/config.toml`
    /// (`[verify] commands`, or `[shell] test_command` behind the detected tests gate) or the
    /// constitution's `required_gates`. Such a gate is judged like any command before it runs.
    pub(crate) fn chosen_by_project(&self, gate: &Gate) -> Option<&'static str> {
        if self.is_required(gate) {
            return Some(CONSTITUTION_FILE);
        }
        match &self.verify.commands {
            Some(cmds)
                if self.project_commands
                    && cmds.iter().any(|c| c.trim() == gate.command.trim()) =>
            {
                Some("the project's .keel/config.toml ([verify] commands)")
            }
            None if gate.name == "tests" && self.project_test_command => {
                Some("the project's .keel/config.toml ([shell] test_command)")
            }
            _ => None,
        }
    }

    /// Whether the user's own configuration chose `gate` (`[verify] commands` in their
    /// config, not the project's): the user's exact command line, so it may have the network
    /// when `shell.network` is on. A detected gate is Keel's choice and never has it.
    pub(crate) fn chosen_by_user(&self, gate: &Gate) -> bool {
        self.chosen_by_project(gate).is_none()
            && self
                .verify
                .commands
                .as_ref()
                .is_some_and(|cmds| cmds.iter().any(|c| c.trim() == gate.command.trim()))
    }

    /// Whether the constitution requires `gate`.
    pub(crate) fn is_required(&self, gate: &Gate) -> bool {
        self.constitution
            .required_gates
            .iter()
            .any(|c| c.trim() == gate.command.trim())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn feedback_names_each_failing_gate_with_its_output() {
        let r = GateResult {
            gate: Gate::command("cargo test"),
            required: false,
            passed: false,
            status: "exit code 101".into(),
            output: "test parses ... FAILED\nassertion failed: left == right".into(),
            exit_code: Some(101),
            duration: Duration::from_millis(5),
        };
        let text = feedback(&[&r], 1, 3, 4_000);
        assert!(
            text.contains("round 1; 2 more correction round(s) allowed"),
            "{text}"
        );
        assert!(text.contains("## Gate `cargo test` (exit code 101)"));
        assert!(text.contains("assertion failed"));
        let required = GateResult {
            required: true,
            ..r.clone()
        };
        let text = feedback(&[&required], 1, 3, 4_000);
        assert!(
            text.contains(
                "## Gate `cargo test` (required by .keel/constitution.json) (exit code 101)"
            ),
            "{text}"
        );
        let last = feedback(&[&r], 3, 3, 4_000);
        assert!(last.contains("0 more"), "{last}");
    }

    #[test]
    fn a_refused_write_outside_the_workspace_is_blamed_on_the_sandbox() {
        let ws = Path::new("/work/repo");
        let home = "error: could not create home directory: '/tmp/h/.rustup': Permission denied (os error 13)";
        let why = sandbox_cause(home, ws).unwrap_or_default();
        assert!(why.contains("`/tmp/h/.rustup` is outside"), "{why}");
        // Inside the workspace it is the repository's own problem.
        assert_eq!(
            sandbox_cause("cannot open /work/repo/x: Permission denied", ws),
            None
        );
        assert!(sandbox_cause("touch: Read-only file system", ws).is_some());
        assert_eq!(sandbox_cause("test failed: 1 != 2", ws), None);
    }

    #[test]
    fn detectors_can_be_closures() {
        let d = |p: &Path| vec![Gate::command(format!("test -d {}", p.display()))];
        let gates = GateDetector::detect(&d, Path::new("/w"));
        assert_eq!(gates[0].command, "test -d /w");
        assert!(NoDetectedGates.detect(Path::new("/w")).is_empty());
    }
}
