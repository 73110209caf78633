//! The phase policy: which tools and shell commands each phase allows, built from
//! `[plan_exec]`.
//!
//! Default whitelists (SPEC §4), by what a tool does ([`ToolEffect`]) so tools added later
//! fall in the right place without a list to maintain:
//! - planning: read-only and control tools (`update_plan`, `ask_user`, …) and `run_command`
//!   for read-only commands;
//! - building: every tool, any command;
//! - verification: read-only and control tools, `run_tests`, and `run_command` for read-only
//!   or test commands;
//! - delivery: every tool.
//!
//! A phase's `whitelist` in config replaces its default (`"*"`: every tool). `advance_phase`
//! is always allowed, or a phase could never be left. The shell rule of a phase (read-only in
//! planning and verification) holds whatever the whitelist says; `bash_deny` adds
//! restrictions on top.

use std::collections::BTreeSet;

use keel_tools::{PlannedCommand, ToolEffect};
use regex::Regex;

use crate::Phase;
use crate::advance::ADVANCE_PHASE;
use crate::config::PlanExecConfig;

/// Which tools a phase allows.
#[derive(Debug, Clone, PartialEq)]
pub enum Whitelist {
    /// `*`: every tool.
    All,
    /// Tools with one of these effects, plus the named ones.
    Rule {
        effects: Vec<ToolEffect>,
        names: BTreeSet<String>,
    },
}

impl Whitelist {
    fn names(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    /// The default whitelist of `phase`.
    pub fn default_for(phase: Phase) -> Self {
        use ToolEffect::*;
        match phase {
            Phase::Planning => Whitelist::Rule {
                effects: vec![ReadOnly, Control],
                names: Self::names(&["run_command"]),
            },
            Phase::Building => Whitelist::Rule {
                effects: vec![ReadOnly, Control, WritesFiles, RunsCommands, Unknown],
                names: BTreeSet::new(),
            },
            Phase::Verification => Whitelist::Rule {
                effects: vec![ReadOnly, Control],
                names: Self::names(&["run_command", "run_tests"]),
            },
            Phase::Delivery => Whitelist::All,
        }
    }

    /// A configured list: `*` anywhere means all tools.
    pub fn from_list(list: &[String]) -> Self {
        if list.iter().any(|n| n.trim() == "*") {
            Whitelist::All
        } else {
            Whitelist::Rule {
                effects: Vec::new(),
                names: list.iter().map(|n| n.trim().to_string()).collect(),
            }
        }
    }

    /// Whether a tool with this name and effect is allowed.
    pub fn allows(&self, name: &str, effect: ToolEffect) -> bool {
        match self {
            Whitelist::All => true,
            Whitelist::Rule { effects, names } => effects.contains(&effect) || names.contains(name),
        }
    }
}

/// How a phase treats shell commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ShellRule {
    /// Only commands the safety analysis judges read-only.
    ReadOnly,
    /// Read-only commands and the project's test commands.
    ReadOnlyOrTests,
    /// Any command (the shell tool's own checks still apply).
    Any,
}

impl ShellRule {
    fn of(phase: Phase) -> Self {
        match phase {
            Phase::Planning => ShellRule::ReadOnly,
            Phase::Verification => ShellRule::ReadOnlyOrTests,
            Phase::Building | Phase::Delivery => ShellRule::Any,
        }
    }
}

/// One phase's rules.
#[derive(Debug, Clone)]
pub struct PhaseRules {
    pub whitelist: Whitelist,
    /// Whether the whitelist came from config (names in it are checked against the tools).
    pub overridden: bool,
    /// A project's narrowing of the whitelist (`project_whitelist`): a tool must be in both.
    pub narrowed: Option<Whitelist>,
    pub bash_deny: Vec<Regex>,
    pub validation_command: Option<String>,
    pub rollback_command: Option<String>,
}

/// Judges shell commands for the phase policy (the shell's safety analysis behind it).
pub trait CommandJudge: Send + Sync {
    /// `Ok(())` when `command` only reads; otherwise why it may not be read-only.
    fn read_only(&self, command: &str) -> Result<(), String>;
    /// Whether `command` runs one of the project's test commands (and what that runs — the
    /// package.json script, the Makefile recipe — does no more than a test run does).
    fn is_test_command(&self, command: &str) -> bool;
    /// `Ok(())` when the command a tool resolved to (`run_tests`'s test command) does no more
    /// than run the project's tests; otherwise why not (`"test": "rm -rf src"`).
    fn test_run(&self, planned: &PlannedCommand) -> Result<(), String>;
}

/// What the policy needs to know about a call.
#[derive(Debug, Clone, Copy)]
pub struct CallFacts<'a> {
    pub name: &'a str,
    pub effect: ToolEffect,
    /// The shell command, for tools that run one (`run_command`'s `command`).
    pub command: Option<&'a str>,
    /// The command a tool resolved to (`run_tests`: the project's test command).
    pub planned: Option<&'a PlannedCommand>,
}

/// Where an allowed call's commands may write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommandAccess {
    /// Nowhere: the read-only sandbox (planning, verification).
    ReadOnly,
    /// The workspace (building, delivery, and test commands in verification).
    Write,
}

/// A refused call: what the model receives (as JSON) and the `phase_violation` event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub tool: String,
    pub phase: Phase,
    pub hint: String,
}

impl Violation {
    /// `{"error":"phase_violation","tool":…,"phase":…,"hint":…}`, the tool result the model
    /// gets.
    pub fn to_model_json(&self) -> String {
        serde_json::json!({
            "error": "phase_violation",
            "tool": self.tool,
            "phase": self.phase.as_str(),
            "hint": self.hint,
        })
        .to_string()
    }
}

/// The policy's decision on one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Allow(CommandAccess),
    Deny(Violation),
}

/// The shell command a call carries: the string `command` argument of a command-running tool.
pub fn command_argument(effect: ToolEffect, arguments: &serde_json::Value) -> Option<&str> {
    (effect == ToolEffect::RunsCommands)
        .then(|| arguments.get("command").and_then(|c| c.as_str()))
        .flatten()
}

/// The rules of all four phases.
#[derive(Debug, Clone)]
pub struct PhasePolicy {
    pub start: Phase,
    pub auto_advance_after_steps: Option<u32>,
    phases: [PhaseRules; 4],
}

impl Default for PhasePolicy {
    fn default() -> Self {
        Self {
            start: Phase::Planning,
            auto_advance_after_steps: None,
            phases: Phase::ALL.map(|p| PhaseRules {
                whitelist: Whitelist::default_for(p),
                overridden: false,
                narrowed: None,
                bash_deny: Vec::new(),
                validation_command: None,
                rollback_command: None,
            }),
        }
    }
}

impl PhasePolicy {
    /// The policy `[plan_exec]` describes. Errors name the key and the bad value.
    pub fn from_config(cfg: &PlanExecConfig) -> Result<Self, String> {
        let start = Phase::parse(cfg.start_phase.trim()).ok_or_else(|| {
            format!(
                "plan_exec.start_phase = \"{}\" is not a phase; accepted: planning, building, verification, delivery",
                cfg.start_phase
            )
        })?;
        if cfg.auto_advance_after_steps == Some(0) {
            return Err(
                "plan_exec.auto_advance_after_steps must be at least 1 (or unset to advance only on advance_phase)"
                    .into(),
            );
        }
        let mut policy = PhasePolicy {
            start,
            auto_advance_after_steps: cfg.auto_advance_after_steps,
            ..PhasePolicy::default()
        };
        for ((name, pc), rules) in cfg.phases.iter().into_iter().zip(policy.phases.iter_mut()) {
            let key = format!("plan_exec.phases.{name}");
            if let Some(list) = &pc.whitelist {
                if list.iter().all(|n| n.trim().is_empty()) {
                    return Err(format!(
                        "{key}.whitelist is empty: no tool could run in the {name} phase; list the tools it allows, or [\"*\"] for all"
                    ));
                }
                rules.whitelist = Whitelist::from_list(list);
                rules.overridden = true;
            }
            if let Some(list) = &pc.project_whitelist {
                if list.iter().all(|n| n.trim().is_empty()) {
                    return Err(format!(
                        "{key}.whitelist in the project's .keel/config.toml is empty: no tool could run in the {name} phase; list the tools it allows"
                    ));
                }
                rules.narrowed = Some(Whitelist::from_list(list));
            }
            for pattern in &pc.bash_deny {
                let re = Regex::new(pattern).map_err(|e| {
                    format!("{key}.bash_deny has an invalid regular expression \"{pattern}\": {e}")
                })?;
                rules.bash_deny.push(re);
            }
            for (field, value) in [
                ("validation_command", &pc.validation_command),
                ("rollback_command", &pc.rollback_command),
            ] {
                if value.as_deref().is_some_and(|v| v.trim().is_empty()) {
                    return Err(format!(
                        "{key}.{field} is empty; remove it or give a command"
                    ));
                }
            }
            if pc.rollback_command.is_some() && pc.validation_command.is_none() {
                return Err(format!(
                    "{key}.rollback_command needs a {key}.validation_command: the rollback runs only when validation fails after the phase fails"
                ));
            }
            rules.validation_command = pc.validation_command.clone();
            rules.rollback_command = pc.rollback_command.clone();
        }
        Ok(policy)
    }

    /// The rules of `phase`.
    pub fn rules(&self, phase: Phase) -> &PhaseRules {
        &self.phases[phase.index()]
    }

    /// Names in configured whitelists that are not tools (per `is_tool`), as
    /// `(phase, name)`.
    pub fn unknown_tools(&self, is_tool: impl Fn(&str) -> bool) -> Vec<(Phase, String)> {
        let mut out = Vec::new();
        for p in Phase::ALL {
            let rules = self.rules(p);
            let configured = [
                rules.overridden.then_some(&rules.whitelist),
                rules.narrowed.as_ref(),
            ];
            for list in configured.into_iter().flatten() {
                if let Whitelist::Rule { names, .. } = list {
                    out.extend(
                        names
                            .iter()
                            .filter(|n| n.as_str() != ADVANCE_PHASE && !is_tool(n))
                            .map(|n| (p, n.clone())),
                    );
                }
            }
        }
        out
    }

    /// Whether `phase` allows the tool at all (commands are judged separately).
    pub fn allows_tool(&self, phase: Phase, name: &str, effect: ToolEffect) -> bool {
        let rules = self.rules(phase);
        name == ADVANCE_PHASE
            || (rules.whitelist.allows(name, effect)
                && rules
                    .narrowed
                    .as_ref()
                    .is_none_or(|n| n.allows(name, effect)))
    }

    /// Why `phase` refuses `command`, if it does.
    fn command_refusal(
        &self,
        phase: Phase,
        command: &str,
        judge: &dyn CommandJudge,
    ) -> Result<CommandAccess, String> {
        if let Some(re) = self
            .rules(phase)
            .bash_deny
            .iter()
            .find(|re| re.is_match(command))
        {
            return Err(format!(
                "the command matches `{}`, which plan_exec.phases.{phase}.bash_deny forbids",
                re.as_str()
            ));
        }
        match ShellRule::of(phase) {
            ShellRule::Any => Ok(CommandAccess::Write),
            ShellRule::ReadOnly => judge.read_only(command).map(|()| CommandAccess::ReadOnly).map_err(|why| {
                format!("in the {phase} phase only read-only shell commands run, and this one is not ({why})")
            }),
            ShellRule::ReadOnlyOrTests => match judge.read_only(command) {
                Ok(()) => Ok(CommandAccess::ReadOnly),
                Err(_) if judge.is_test_command(command) => Ok(CommandAccess::Write),
                Err(why) => Err(format!(
                    "in the {phase} phase only read-only shell commands and the project's test commands run (run_tests runs the tests), and this one is neither ({why})"
                )),
            },
        }
    }

    /// Decides a call in `phase`.
    pub fn check(&self, phase: Phase, call: &CallFacts<'_>, judge: &dyn CommandJudge) -> Verdict {
        let default_access = if phase.is_read_only() {
            CommandAccess::ReadOnly
        } else {
            CommandAccess::Write
        };
        if call.name == ADVANCE_PHASE {
            return Verdict::Allow(default_access);
        }
        let problem = if !self.allows_tool(phase, call.name, call.effect) {
            format!("`{}` is not available in the {phase} phase", call.name)
        } else if let Some(command) = call.command {
            match self.command_refusal(phase, command, judge) {
                Ok(access) => return Verdict::Allow(access),
                Err(why) => why,
            }
        } else if let Some(planned) = call.planned
            && ShellRule::of(phase) != ShellRule::Any
            && let Err(why) = judge.test_run(planned)
        {
            format!(
                "in the {phase} phase the tests may run, but `{}` does more than run them ({why})",
                planned.command
            )
        } else {
            return Verdict::Allow(default_access);
        };
        let next = Phase::ALL.into_iter().filter(|p| *p > phase).find(|p| {
            self.allows_tool(*p, call.name, call.effect)
                && call
                    .command
                    .is_none_or(|c| self.command_refusal(*p, c, judge).is_ok())
        });
        let hint = match next {
            Some(p) => format!(
                "{problem}. It is allowed from the {p} phase on: finish the {phase} work first, then call advance_phase."
            ),
            None => format!(
                "{problem}, nor in any later phase. Do this phase's work with the tools it allows."
            ),
        };
        Verdict::Deny(Violation {
            tool: call.name.to_string(),
            phase,
            hint,
        })
    }

    /// The tools of `tools` (name, effect) that `phase` allows, for telling the model.
    pub fn allowed_names<'a>(
        &self,
        phase: Phase,
        tools: impl IntoIterator<Item = (&'a str, ToolEffect)>,
    ) -> Vec<&'a str> {
        tools
            .into_iter()
            .filter(|(n, e)| self.allows_tool(phase, n, *e))
            .map(|(n, _)| n)
            .collect()
    }

    /// A short note on the phase's shell rule, for the model.
    pub fn shell_note(&self, phase: Phase) -> &'static str {
        match ShellRule::of(phase) {
            ShellRule::ReadOnly => "shell commands must be read-only",
            ShellRule::ReadOnlyOrTests => {
                "shell commands must be read-only, or the project's test commands"
            }
            ShellRule::Any => "any shell command",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{PhaseConfig, PlanExecConfig};
    use ToolEffect::*;

    /// A judge for tests: `ls`/`cat`/`grep` read; `cargo test` is the test command.
    struct Judge;

    impl CommandJudge for Judge {
        fn read_only(&self, command: &str) -> Result<(), String> {
            let first = command.split_whitespace().next().unwrap_or("");
            if ["ls", "cat", "grep"].contains(&first) && !command.contains('>') {
                Ok(())
            } else {
                Err(format!("`{first}` may write"))
            }
        }
        fn is_test_command(&self, command: &str) -> bool {
            command.starts_with("cargo test")
        }
        fn test_run(&self, planned: &PlannedCommand) -> Result<(), String> {
            if planned.command.contains("rm ") {
                Err("`rm` deletes files".into())
            } else {
                Ok(())
            }
        }
    }

    fn call<'a>(name: &'a str, effect: ToolEffect, command: Option<&'a str>) -> CallFacts<'a> {
        CallFacts {
            name,
            effect,
            command,
            planned: None,
        }
    }

    fn allowed(p: &PhasePolicy, phase: Phase, c: CallFacts<'_>) -> bool {
        matches!(p.check(phase, &c, &Judge), Verdict::Allow(_))
    }

    fn policy(edit: impl FnOnce(&mut PlanExecConfig)) -> Result<PhasePolicy, String> {
        let mut cfg = PlanExecConfig::default();
        edit(&mut cfg);
        PhasePolicy::from_config(&cfg)
    }

    #[test]
    fn defaults_follow_the_spec() {
        let p = PhasePolicy::from_config(&PlanExecConfig::default()).unwrap();
        assert_eq!(p.start, Phase::Planning);
        assert_eq!(p.auto_advance_after_steps, None);
        let read = call("read_file", ReadOnly, None);
        let write = call("create_file", WritesFiles, None);
        let plan = call("update_plan", Control, None);
        let tests = call("run_tests", RunsCommands, None);
        let other_cmd = call("deploy", RunsCommands, None);
        // planning: read/search/list, update_plan, ask_user, read-only shell
        assert!(allowed(&p, Phase::Planning, read));
        assert!(allowed(&p, Phase::Planning, plan));
        assert!(allowed(
            &p,
            Phase::Planning,
            call("ask_user", Control, None)
        ));
        assert!(!allowed(&p, Phase::Planning, write));
        assert!(!allowed(&p, Phase::Planning, tests));
        assert!(allowed(
            &p,
            Phase::Planning,
            call("run_command", RunsCommands, Some("ls -la"))
        ));
        assert!(!allowed(
            &p,
            Phase::Planning,
            call("run_command", RunsCommands, Some(":>f"))
        ));
        // building: everything
        for c in [read, write, plan, tests, other_cmd] {
            assert!(allowed(&p, Phase::Building, c), "{}", c.name);
        }
        assert!(allowed(
            &p,
            Phase::Building,
            call("run_command", RunsCommands, Some("rm -f x"))
        ));
        // verification: read/search, run_tests, read-only or test commands
        assert!(allowed(&p, Phase::Verification, read));
        assert!(allowed(&p, Phase::Verification, tests));
        // run_tests is judged by the command it resolves to.
        let planned = |command: &str| PlannedCommand {
            command: command.into(),
            cwd: std::path::PathBuf::from("/ws"),
        };
        fn with(p: &PlannedCommand) -> CallFacts<'_> {
            CallFacts {
                planned: Some(p),
                ..call("run_tests", RunsCommands, None)
            }
        }
        let (npm, wipe) = (planned("npm test"), planned("rm -rf src"));
        assert!(allowed(&p, Phase::Verification, with(&npm)));
        match p.check(Phase::Verification, &with(&wipe), &Judge) {
            Verdict::Deny(v) => assert!(v.hint.contains("rm -rf src"), "{v:?}"),
            other => panic!("{other:?}"),
        }
        assert!(
            allowed(&p, Phase::Building, with(&wipe)),
            "approval judges it there"
        );
        assert!(!allowed(&p, Phase::Verification, write));
        assert!(!allowed(&p, Phase::Verification, other_cmd));
        assert_eq!(
            p.check(
                Phase::Verification,
                &call("run_command", RunsCommands, Some("cargo test -p x")),
                &Judge
            ),
            Verdict::Allow(CommandAccess::Write),
            "test commands may write (build output)"
        );
        assert_eq!(
            p.check(
                Phase::Verification,
                &call("run_command", RunsCommands, Some("cat a")),
                &Judge
            ),
            Verdict::Allow(CommandAccess::ReadOnly)
        );
        assert!(!allowed(
            &p,
            Phase::Verification,
            call("run_command", RunsCommands, Some("touch f"))
        ));
        assert!(!allowed(
            &p,
            Phase::Planning,
            call("run_command", RunsCommands, Some("cargo test"))
        ));
        // delivery: all
        for c in [read, write, plan, tests, other_cmd] {
            assert!(allowed(&p, Phase::Delivery, c));
        }
        // advance_phase is always allowed.
        for phase in Phase::ALL {
            assert!(allowed(&p, phase, call(ADVANCE_PHASE, Control, None)));
        }
    }

    #[test]
    fn violations_name_the_phase_that_allows_the_tool() {
        let p = PhasePolicy::default();
        let Verdict::Deny(v) = p.check(
            Phase::Planning,
            &call("create_file", WritesFiles, None),
            &Judge,
        ) else {
            panic!("create_file must be refused in planning");
        };
        assert_eq!(v.phase, Phase::Planning);
        assert!(
            v.hint.contains("allowed from the building phase"),
            "{}",
            v.hint
        );
        let json: serde_json::Value = serde_json::from_str(&v.to_model_json()).unwrap();
        assert_eq!(json["error"], "phase_violation");
        assert_eq!(json["tool"], "create_file");
        assert_eq!(json["phase"], "planning");
        assert!(json["hint"].as_str().unwrap().contains("advance_phase"));

        let Verdict::Deny(v) = p.check(
            Phase::Verification,
            &call("run_command", RunsCommands, Some("echo x > f")),
            &Judge,
        ) else {
            panic!("a writing command must be refused in verification");
        };
        assert!(v.hint.contains("test commands"), "{}", v.hint);
        assert!(v.hint.contains("delivery"), "{}", v.hint);
    }

    #[test]
    fn overrides_win_and_star_means_all() {
        let p = policy(|c| {
            c.phases.planning.whitelist = Some(vec!["read_file".into()]);
            c.phases.verification.whitelist = Some(vec!["*".into()]);
        })
        .unwrap();
        assert!(allowed(
            &p,
            Phase::Planning,
            call("read_file", ReadOnly, None)
        ));
        assert!(
            !allowed(&p, Phase::Planning, call("list_files", ReadOnly, None)),
            "the override replaces the default"
        );
        assert!(allowed(
            &p,
            Phase::Planning,
            call(ADVANCE_PHASE, Control, None)
        ));
        assert!(allowed(
            &p,
            Phase::Verification,
            call("create_file", WritesFiles, None)
        ));
        // The shell rule holds whatever the whitelist says.
        assert!(!allowed(
            &p,
            Phase::Verification,
            call("run_command", RunsCommands, Some("touch f"))
        ));
        assert_eq!(
            p.unknown_tools(|n| n == "read_file"),
            Vec::<(Phase, String)>::new()
        );
        let q = policy(|c| c.phases.building.whitelist = Some(vec!["raed_file".into()])).unwrap();
        assert_eq!(
            q.unknown_tools(|n| n == "read_file"),
            [(Phase::Building, "raed_file".to_string())]
        );
    }

    #[test]
    fn bash_deny_adds_restrictions_per_phase() {
        let p = policy(|c| {
            c.phases.building = PhaseConfig {
                bash_deny: vec![r"\bgit\s+push\b".into()],
                ..PhaseConfig::default()
            }
        })
        .unwrap();
        let push = call("run_command", RunsCommands, Some("git push origin main"));
        let Verdict::Deny(v) = p.check(Phase::Building, &push, &Judge) else {
            panic!("git push is denied in building");
        };
        assert!(v.hint.contains("bash_deny"), "{}", v.hint);
        assert!(allowed(&p, Phase::Delivery, push), "only in building");
        assert!(allowed(
            &p,
            Phase::Building,
            call("run_command", RunsCommands, Some("git status"))
        ));
    }

    #[test]
    fn bad_configuration_is_an_error_naming_the_value() {
        let e = policy(|c| c.phases.verification.whitelist = Some(vec![])).unwrap_err();
        assert!(
            e.contains("plan_exec.phases.verification.whitelist is empty"),
            "{e}"
        );
        let e = policy(|c| c.start_phase = "plan".into()).unwrap_err();
        assert!(e.contains("\"plan\" is not a phase"), "{e}");
        let e = policy(|c| c.phases.planning.bash_deny = vec!["(unclosed".into()]).unwrap_err();
        assert!(e.contains("plan_exec.phases.planning.bash_deny"), "{e}");
        assert!(e.contains("(unclosed"), "{e}");
        let e = policy(|c| c.auto_advance_after_steps = Some(0)).unwrap_err();
        assert!(e.contains("auto_advance_after_steps"), "{e}");
        let e = policy(|c| c.phases.building.rollback_command = Some(" ".into())).unwrap_err();
        assert!(
            e.contains("plan_exec.phases.building.rollback_command is empty"),
            "{e}"
        );
        let e = policy(|c| c.phases.building.rollback_command = Some("git checkout .".into()))
            .unwrap_err();
        assert!(
            e.contains("needs a plan_exec.phases.building.validation_command"),
            "{e}"
        );
        let p = policy(|c| {
            c.start_phase = "building".into();
            c.auto_advance_after_steps = Some(4);
        })
        .unwrap();
        assert_eq!(p.start, Phase::Building);
        assert_eq!(p.auto_advance_after_steps, Some(4));
    }
}
