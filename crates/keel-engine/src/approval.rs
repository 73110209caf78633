//! Approvals: which tool calls wait for a person, and the waiting itself.
//!
//! [`ApprovalRules`] judge a call from `[approval]` and the command-safety class;
//! [`ApprovalGate`] is shared by a session's handle (which resolves `Approve`/`Deny` ops) and
//! its running turn (which asks and waits, emitting `approval_requested` and
//! `approval_resolved`). No call waits forever: the configured timeout denies it.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::Duration;

use keel_protocol::{ApprovalScope, EventKind, ToolCall};
use keel_tools::shell::{CommandSafety, SafetyClass};
use keel_tools::{ToolEffect, ToolRegistry};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use crate::config::{ApprovalConfig, ApprovalPolicy};
use crate::{Emitter, EngineError};

/// What the rules say about one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Allow,
    Ask,
    /// Never runs (a `deny` rule); the text says which.
    Deny(String),
}

/// A call as a person is shown it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallSummary {
    pub tool: String,
    /// The command line, or the tool's main argument.
    pub summary: String,
    /// The command-safety class (`destructive`, `network`, …), or the tool's effect.
    pub class: String,
    /// Why that class: the command analyser's first reason (`` `rm` deletes files ``), or what
    /// the tool's effect means; empty for a call that needs no explaining (a read).
    pub reason: String,
}

/// The approval policy and rules of a session.
#[derive(Debug, Clone)]
pub struct ApprovalRules {
    pub policy: ApprovalPolicy,
    allow: Vec<String>,
    ask: Vec<String>,
    deny: Vec<String>,
    safety: CommandSafety,
}

impl ApprovalRules {
    /// The rules of `config` under `policy` (a flag's choice, or `config.policy`).
    pub fn new(config: &ApprovalConfig, policy: ApprovalPolicy, shell_allow: &[String]) -> Self {
        Self {
            policy,
            allow: config.allow.clone(),
            ask: config.ask.clone(),
            deny: config.deny.clone(),
            safety: CommandSafety::with_allow(shell_allow),
        }
    }

    /// Judges `call` of a tool in `tools`.
    pub fn judge(&self, call: &ToolCall, tools: &ToolRegistry) -> (Verdict, CallSummary) {
        let effect = tools.get(&call.name).map(|t| t.effect());
        let command = call
            .arguments
            .get("command")
            .and_then(|c| c.as_str())
            .filter(|_| effect == Some(ToolEffect::RunsCommands));
        let analysis = command.map(|c| self.safety.classify(c));
        let class = match (&analysis, effect) {
            (Some(a), _) => a.class.as_str(),
            (None, Some(ToolEffect::ReadOnly | ToolEffect::Control)) => "read_only",
            // A tool that runs the project's own command (`run_tests`: the configured or
            // detected test command) builds and writes in the workspace.
            (None, Some(ToolEffect::WritesFiles | ToolEffect::RunsCommands)) => "writes_workspace",
            // A tool we do not know (an MCP tool): it may do anything.
            (None, None | Some(ToolEffect::Unknown)) => "unknown",
        };
        let reason = match (&analysis, effect) {
            (Some(a), _) => a.reasons.first().cloned().unwrap_or_default(),
            (None, Some(ToolEffect::WritesFiles)) => "writes files in the workspace".into(),
            (None, Some(ToolEffect::RunsCommands)) => {
                "runs the project's own commands in the workspace".into()
            }
            (None, None | Some(ToolEffect::Unknown)) => {
                "an external tool Keel cannot judge: it may do anything".into()
            }
            (None, Some(ToolEffect::ReadOnly | ToolEffect::Control)) => String::new(),
        };
        let summary = CallSummary {
            tool: call.name.clone(),
            summary: command.map_or_else(|| describe(call), str::to_string),
            class: class.to_string(),
            reason,
        };
        let matches = |rules: &[String]| -> Option<String> {
            rules.iter().find_map(|rule| {
                let (tool, prefix) = match rule.split_once(':') {
                    Some((t, p)) => (t.trim(), Some(p.trim())),
                    None => (rule.trim(), None),
                };
                if tool != call.name && tool != "*" {
                    return None;
                }
                match (prefix, &analysis) {
                    (None, _) => Some(rule.clone()),
                    (Some(p), Some(a)) => a.denied_by(&[p.to_string()]).map(|_| rule.clone()),
                    (Some(_), None) => None,
                }
            })
        };
        if let Some(rule) = matches(&self.deny) {
            return (
                Verdict::Deny(format!("the approval rule deny = \"{rule}\" forbids it")),
                summary,
            );
        }
        if matches(&self.allow).is_some() {
            return (Verdict::Allow, summary);
        }
        if self.policy == ApprovalPolicy::Never {
            return (Verdict::Allow, summary);
        }
        if matches(&self.ask).is_some() {
            return (Verdict::Ask, summary);
        }
        let risky = match analysis.map(|a| a.class) {
            Some(SafetyClass::ReadOnly) => false,
            Some(SafetyClass::WritesWorkspace) => self.policy == ApprovalPolicy::Untrusted,
            Some(SafetyClass::Network | SafetyClass::Unknown | SafetyClass::Destructive) => true,
            None => match effect {
                Some(ToolEffect::ReadOnly | ToolEffect::Control) => false,
                Some(ToolEffect::WritesFiles | ToolEffect::RunsCommands) => {
                    self.policy == ApprovalPolicy::Untrusted
                }
                None | Some(ToolEffect::Unknown) => true,
            },
        };
        (if risky { Verdict::Ask } else { Verdict::Allow }, summary)
    }
}

/// The call's main argument, for a person to read.
fn describe(call: &ToolCall) -> String {
    for key in ["path", "file", "query", "pattern"] {
        if let Some(v) = call.arguments.get(key).and_then(|v| v.as_str()) {
            return format!("{} {v}", call.name);
        }
    }
    let args = call.arguments.to_string();
    let short: String = args.chars().take(200).collect();
    format!("{} {short}", call.name)
}

/// A person's answer to one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Approve(ApprovalScope),
    Deny(Option<String>),
}

/// The approvals of one live session: the rules, who can answer, the calls waiting, and the
/// answers remembered for the session.
#[derive(Debug)]
pub struct ApprovalGate {
    rules: ApprovalRules,
    /// Whether anyone can answer (a headless run cannot: an ask becomes a denial).
    interactive: bool,
    timeout: Duration,
    pending: Mutex<HashMap<String, oneshot::Sender<Decision>>>,
    /// Calls approved for the rest of the session (`tool` + summary).
    remembered: Mutex<HashSet<String>>,
}

impl ApprovalGate {
    pub fn new(rules: ApprovalRules, interactive: bool, timeout: Duration) -> Self {
        Self {
            rules,
            interactive,
            timeout,
            pending: Mutex::new(HashMap::new()),
            remembered: Mutex::new(HashSet::new()),
        }
    }

    /// The gate for a session of `config`: `policy` overrides `[approval] policy` (a flag);
    /// `interactive` says whether anyone can answer.
    pub fn from_config(
        config: &crate::Config,
        policy: Option<ApprovalPolicy>,
        interactive: bool,
    ) -> Self {
        let rules = ApprovalRules::new(
            &config.approval,
            policy.unwrap_or(config.approval.policy),
            &config.shell.allow,
        );
        Self::new(
            rules,
            interactive,
            Duration::from_secs(config.approval.timeout_secs.max(1)),
        )
    }

    /// The policy in force.
    pub fn policy(&self) -> ApprovalPolicy {
        self.rules.policy
    }

    /// Answers the waiting call `call_id`; `false` when no such call waits.
    pub fn resolve(&self, call_id: &str, decision: Decision) -> bool {
        let sender = self
            .pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(call_id);
        match sender {
            Some(tx) => tx.send(decision).is_ok(),
            None => false,
        }
    }

    /// Lets the call `tool` with `summary` run without asking for the rest of the session, as
    /// an approval with scope `session` does (a handle rebuilt for a session whose earlier
    /// answers are stored: a worker's next turn).
    pub fn remember(&self, tool: &str, summary: &str) {
        self.remembered
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(format!("{tool}\u{0}{summary}"));
    }

    /// The calls waiting for an answer.
    pub fn waiting(&self) -> Vec<String> {
        let mut ids: Vec<String> = self
            .pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .keys()
            .cloned()
            .collect();
        ids.sort();
        ids
    }

    /// Decides whether `call` may run, asking and waiting when the rules say so. `Err` is the
    /// text the model reads instead of the call's result.
    pub(crate) async fn check(
        &self,
        call: &ToolCall,
        tools: &ToolRegistry,
        emitter: &Emitter,
        cancel: &CancellationToken,
    ) -> Result<Result<(), String>, EngineError> {
        let (verdict, what) = self.rules.judge(call, tools);
        let key = format!("{}\u{0}{}", what.tool, what.summary);
        match verdict {
            Verdict::Allow => return Ok(Ok(())),
            Verdict::Deny(why) => {
                return Ok(Err(format!(
                    "not run: {why}. Do not retry it; find another way or ask the user."
                )));
            }
            Verdict::Ask => {}
        }
        if self
            .remembered
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .contains(&key)
        {
            return Ok(Ok(()));
        }
        if !self.interactive {
            let reason = format!(
                "this run has nobody to approve it: the approval policy is {}; `{}` ({}) needs approval. Rerun with --approval never to allow it, or do without it",
                self.rules.policy, what.summary, what.class
            );
            emitter
                .emit(EventKind::ApprovalResolved {
                    call_id: call.id.clone(),
                    approved: false,
                    scope: None,
                    reason: Some(reason.clone()),
                })
                .await?;
            return Ok(Err(format!("not run: {reason}.")));
        }
        let (tx, rx) = oneshot::channel();
        self.pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(call.id.clone(), tx);
        emitter
            .emit(EventKind::ApprovalRequested {
                call_id: call.id.clone(),
                tool: what.tool.clone(),
                summary: what.summary.clone(),
                class: what.class.clone(),
                reason: what.reason.clone(),
            })
            .await?;
        let decision = tokio::select! {
            biased;
            _ = cancel.cancelled() => Decision::Deny(Some("the turn was cancelled".into())),
            d = tokio::time::timeout(self.timeout, rx) => match d {
                Ok(Ok(d)) => d,
                Ok(Err(_)) => Decision::Deny(Some("the session stopped before anyone answered".into())),
                Err(_) => Decision::Deny(Some(format!(
                    "nobody answered within {} s (approval.timeout_secs)",
                    self.timeout.as_secs()
                ))),
            },
        };
        self.pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(&call.id);
        let (approved, scope, reason) = match &decision {
            Decision::Approve(scope) => (true, Some(*scope), None),
            Decision::Deny(reason) => (false, None, reason.clone()),
        };
        emitter
            .emit(EventKind::ApprovalResolved {
                call_id: call.id.clone(),
                approved,
                scope,
                reason: reason.clone(),
            })
            .await?;
        Ok(match decision {
            Decision::Approve(scope) => {
                if scope == ApprovalScope::Session {
                    self.remembered
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .insert(key);
                }
                Ok(())
            }
            Decision::Deny(reason) => Err(format!(
                "not run: the user denied this call{}. Do not retry it; find another way or ask the user.",
                reason.map(|r| format!(" ({r})")).unwrap_or_default()
            )),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(name: &str, args: serde_json::Value) -> ToolCall {
        ToolCall {
            id: "c".into(),
            name: name.into(),
            arguments: args,
        }
    }

    fn registry() -> ToolRegistry {
        let mut r = ToolRegistry::new();
        keel_tools::builtin::register_defaults(&mut r);
        keel_tools::shell::register(&mut r, Default::default(), Default::default());
        r
    }

    fn rules(policy: ApprovalPolicy, allow: &[&str], ask: &[&str], deny: &[&str]) -> ApprovalRules {
        let list = |l: &[&str]| l.iter().map(|s| s.to_string()).collect();
        let config = ApprovalConfig {
            policy,
            allow: list(allow),
            ask: list(ask),
            deny: list(deny),
            timeout_secs: 60,
        };
        ApprovalRules::new(&config, policy, &[])
    }

    fn verdict(r: &ApprovalRules, c: &ToolCall) -> Verdict {
        r.judge(c, &registry()).0
    }

    #[test]
    fn policies_ask_by_safety_class() {
        let tools = registry();
        let rm = call("run_command", json!({"command": "rm -rf build"}));
        let ls = call("run_command", json!({"command": "ls -la"}));
        let touch = call("run_command", json!({"command": "touch a.txt"}));
        let write = call("create_file", json!({"path": "a.txt", "content": "x"}));
        let read = call("read_file", json!({"path": "a.txt"}));
        let unknown = call("mcp__github__create_issue", json!({}));
        let on = rules(ApprovalPolicy::OnRequest, &[], &[], &[]);
        assert_eq!(verdict(&on, &rm), Verdict::Ask);
        assert_eq!(verdict(&on, &ls), Verdict::Allow);
        assert_eq!(verdict(&on, &touch), Verdict::Allow);
        assert_eq!(verdict(&on, &write), Verdict::Allow);
        assert_eq!(
            verdict(&on, &unknown),
            Verdict::Ask,
            "tools we do not know ask"
        );
        let (_, what) = on.judge(&rm, &tools);
        assert_eq!(
            (what.summary.as_str(), what.class.as_str()),
            ("rm -rf build", "destructive")
        );
        assert_eq!(
            what.reason, "`rm` deletes files",
            "the person is told why, in the classifier's words"
        );
        assert_eq!(
            on.judge(&unknown, &tools).1.reason,
            "an external tool Keel cannot judge: it may do anything"
        );
        let strict = rules(ApprovalPolicy::Untrusted, &[], &[], &[]);
        assert_eq!(verdict(&strict, &touch), Verdict::Ask);
        assert_eq!(verdict(&strict, &write), Verdict::Ask);
        assert_eq!(verdict(&strict, &read), Verdict::Allow);
        assert_eq!(verdict(&strict, &ls), Verdict::Allow);
        let never = rules(ApprovalPolicy::Never, &[], &[], &[]);
        assert_eq!(verdict(&never, &rm), Verdict::Allow);
    }

    /// A registered external tool (an MCP tool) of unknown effect.
    struct External;

    impl keel_tools::Tool for External {
        fn name(&self) -> &str {
            "mcp__files__write"
        }
        fn description(&self) -> &str {
            "writes"
        }
        fn input_schema(&self) -> serde_json::Value {
            json!({"type": "object"})
        }
        fn effect(&self) -> ToolEffect {
            ToolEffect::Unknown
        }
        fn execute<'a>(
            &'a self,
            _args: serde_json::Value,
            _ctx: &'a keel_tools::ToolContext,
        ) -> futures::future::BoxFuture<'a, Result<keel_tools::ToolOutput, keel_tools::ToolError>>
        {
            Box::pin(async { Ok(keel_tools::ToolOutput::text("ok")) })
        }
    }

    #[test]
    fn a_registered_tool_of_unknown_effect_asks_unless_allowed() {
        let mut tools = registry();
        tools.register(External);
        let c = call("mcp__files__write", json!({}));
        let on = rules(ApprovalPolicy::OnRequest, &[], &[], &[]);
        let (v, what) = on.judge(&c, &tools);
        assert_eq!((v, what.class.as_str()), (Verdict::Ask, "unknown"));
        let allowed = rules(ApprovalPolicy::OnRequest, &["mcp__files__write"], &[], &[]);
        assert_eq!(allowed.judge(&c, &tools).0, Verdict::Allow);
    }

    #[test]
    fn rules_name_tools_and_command_prefixes() {
        let push = call("run_command", json!({"command": "git push origin main"}));
        let status = call("run_command", json!({"command": "git status"}));
        let r = rules(ApprovalPolicy::Never, &[], &[], &["run_command:git push"]);
        assert!(matches!(verdict(&r, &push), Verdict::Deny(m) if m.contains("git push")));
        assert_eq!(verdict(&r, &status), Verdict::Allow);
        let r = rules(
            ApprovalPolicy::OnRequest,
            &["run_command:rm"],
            &["create_file"],
            &[],
        );
        assert_eq!(
            verdict(&r, &call("run_command", json!({"command": "rm x"}))),
            Verdict::Allow
        );
        assert_eq!(
            verdict(
                &r,
                &call("create_file", json!({"path": "a", "content": ""}))
            ),
            Verdict::Ask
        );
        // Deny wins over allow.
        let r = rules(
            ApprovalPolicy::Never,
            &["run_command"],
            &[],
            &["run_command:git push"],
        );
        assert!(matches!(verdict(&r, &push), Verdict::Deny(_)));
    }
}
