//! Approvals: which tool calls wait for a person, and the waiting itself.
//!
//! [`ApprovalRules`] judge a call from `[approval]` and the command-safety class;
//! [`ApprovalGate`] is shared by a session's handle (which resolves `Approve`/`Deny` ops) and
//! its running turn (which asks and waits, recording `approval_requested` and
//! `approval_resolved` through the session's [`Events`]). No call waits forever: the
//! configured timeout denies it.
//!
//! The engine asks the gate from its approval hook (keel-engine's `guardrails/approval.rs`)
//! and before a verification gate's command; this crate knows no loop.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::Mutex;
use std::time::Duration;

use keel_protocol::{ApprovalScope, EventKind, ToolCall};
use keel_tools::shell::judged::JudgedRun;
use keel_tools::shell::{CommandSafety, RuleMatch, SafetyClass};
use keel_tools::{ToolEffect, ToolRegistry, Workspace};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

mod lane;
mod patch_plan;
mod shown;
mod test_code;

pub use shown::displayed;
use shown::{describe, describe_planned, fingerprint};

use keel_config::{ApprovalConfig, ApprovalPolicy, Config};
use keel_phase::CommandAccess;

/// Where the gate records what it asks a person and what it was told: the session's event
/// stream (keel-engine's `Emitter`: stored, then published).
pub trait Events: Sync {
    /// Why an event could not be recorded (the gate's check fails with it).
    type Error;

    fn emit(&self, kind: EventKind) -> impl Future<Output = Result<(), Self::Error>> + Send;
}

/// What the rules say about one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Allow,
    /// Runs without asking only because the analyser rated the command read-only (no rule,
    /// no approval and no policy lets it write): it runs in the read-only sandbox, so a
    /// command the analyser misjudged cannot change the workspace (the read-only lane).
    AllowReadOnly,
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
    /// The command runs a script of the workspace (`python3 gen.py`, `./fmt.py`, `sh x.sh`) or
    /// hands an interpreter inline code (`python3 -c "import gen"`, `node -e`, `python3 -m`):
    /// a session approval of it holds only while no workspace code changed since it last ran
    /// (whatever the script imports, by whatever path it builds).
    pub runs_workspace_script: bool,
    /// The shell line and the project files it was judged by: when the call is let run, the
    /// runner starts it only while they are as judged (R6-15).
    pub judged: Option<keel_tools::shell::judged::JudgedRun>,
}

/// The approval policy and rules of a session.
///
/// Rules name a tool (`"create_file"`) or a tool and a command prefix
/// (`"run_command:git push"`), matched against the *parsed* command line (see
/// [`keel_tools::shell`]'s rules): a deny or ask prefix matches when any simple command of the
/// line starts with its words (nested ones included; a word not known before the line runs
/// counts as a possible match, which asks); an allow prefix vouches for the simple commands it
/// matches, whole words, and the line is allowed only when everything else in it only reads.
/// A prefix rule naming `run_command` (or `*`) applies to every command a tool runs, the
/// command `run_tests` resolves to included.
#[derive(Debug, Clone)]
pub struct ApprovalRules {
    pub policy: ApprovalPolicy,
    allow: Vec<String>,
    ask: Vec<String>,
    deny: Vec<String>,
    /// The analyser with `[shell] allow` and the allow rules' command prefixes vouched for.
    safety: CommandSafety,
    /// `[shell] allow`: prefixes the user vouched for (a line they match is the user's
    /// choice, not the analyser's, and runs with writes).
    vouched: Vec<String>,
}

/// What the command analyser calls a workspace file it read because the line runs it as code:
/// a script (`sh x.sh`, `npm test`'s) or a program file an interpreter or a program runs
/// (`python3 gen.py`, `awk -f p.awk`, `source env.sh`: keel-tools' `record_program_file`). A
/// session approval of such a line holds only while no workspace code changed since it ran.
const WORKSPACE_CODE: &[&str] = &["the script", "a program file"];

/// `tool` or `tool:command prefix`.
fn split_rule(rule: &str) -> (&str, Option<&str>) {
    match rule.split_once(':') {
        Some((t, p)) => (t.trim(), Some(p.trim()).filter(|p| !p.is_empty())),
        None => (rule.trim(), None),
    }
}

/// How a rule list matches one call: a rule that matches, else one that may.
#[derive(Debug, Default)]
struct RuleHits {
    yes: Option<String>,
    maybe: Option<String>,
    /// A rule naming only the tool matched (every call of it).
    whole_tool: bool,
}

impl ApprovalRules {
    /// The rules of `config` under `policy` (a flag's choice, or `config.policy`).
    pub fn new(config: &ApprovalConfig, policy: ApprovalPolicy, shell_allow: &[String]) -> Self {
        let mut vouched: Vec<String> = shell_allow.to_vec();
        vouched.extend(
            config
                .allow
                .iter()
                .filter_map(|r| split_rule(r).1.map(str::to_string)),
        );
        Self {
            policy,
            allow: config.allow.clone(),
            ask: config.ask.clone(),
            deny: config.deny.clone(),
            safety: CommandSafety::with_allow(&vouched),
            vouched: shell_allow.to_vec(),
        }
    }

    /// Judges `call` of a tool in `tools` without a workspace: a tool's resolved command
    /// (`run_tests`) cannot be read, so it is judged by its effect alone. Prefer
    /// [`ApprovalRules::judge_in`].
    pub fn judge(&self, call: &ToolCall, tools: &ToolRegistry) -> (Verdict, CallSummary) {
        self.judge_in(call, tools, None)
    }

    /// Judges `call` of a tool in `tools`, reading what it would run in `workspace` (the test
    /// command and scripts `run_tests` resolves to).
    pub fn judge_in(
        &self,
        call: &ToolCall,
        tools: &ToolRegistry,
        workspace: Option<&Workspace>,
    ) -> (Verdict, CallSummary) {
        let tool = tools.get(&call.name);
        let effect = tool.map(|t| t.effect());
        let command = call
            .arguments
            .get("command")
            .and_then(|c| c.as_str())
            .filter(|_| effect == Some(ToolEffect::RunsCommands));
        let planned = match (command, tool, workspace) {
            (None, Some(t), Some(ws)) => t.planned_command(&call.arguments, ws).zip(Some(ws)),
            _ => None,
        };
        let analysis = match (command, &planned) {
            (Some(c), _) => Some(match workspace {
                // Scripts the line runs (`npm test`, `make lint`) are read and judged.
                Some(ws) => self.safety.classify_in_project(c, ws),
                None => self.safety.classify(c),
            }),
            (None, Some((p, ws))) => Some(self.safety.classify_test_run(&p.command, &p.cwd, *ws)),
            (None, None) => None,
        };
        let patch = (call.name == "apply_patch")
            .then(|| patch_plan::plan(&call.arguments, workspace))
            .flatten();
        let deletes = patch.as_ref().is_some_and(|p| !p.deletes.is_empty());
        let class = match (&analysis, effect) {
            (Some(a), _) => a.class.as_str(),
            // A patch that deletes files is as destructive as `rm` (red-team pass 2, R22).
            (None, _) if deletes => "destructive",
            (None, Some(ToolEffect::ReadOnly | ToolEffect::Control)) => "read_only",
            // A tool that runs the project's own command (`run_tests` when its command cannot
            // be resolved) builds and writes in the workspace.
            (None, Some(ToolEffect::WritesFiles | ToolEffect::RunsCommands)) => "writes_workspace",
            // A tool we do not know (an MCP tool): it may do anything.
            (None, None | Some(ToolEffect::Unknown)) => "unknown",
        };
        let text = match (command, &planned, &analysis) {
            (Some(c), _, Some(a)) => describe_planned(c, a),
            (Some(c), _, None) => c.to_string(),
            (None, Some((p, _)), Some(a)) => describe_planned(&p.command, a),
            // Every file and operation of a patch, deletions first (not its first characters).
            _ => match &patch {
                Some(p) => format!(
                    "{}: {} [#{}]",
                    call.name,
                    p.text(),
                    fingerprint(&call.arguments)
                ),
                None => describe(call, effect, workspace),
            },
        };
        let reason = match (&analysis, effect) {
            // What the approval would let it change among installed dependencies is always
            // shown: only then does a yes lift their protections (red-team pass 9, R9-13).
            (Some(a), _) => with_installs(a.reasons.first().cloned().unwrap_or_default(), a),
            (None, _) if deletes => "deletes files in the workspace".into(),
            (None, Some(ToolEffect::WritesFiles)) => "writes files in the workspace".into(),
            (None, Some(ToolEffect::RunsCommands)) => {
                "runs the project's own commands in the workspace".into()
            }
            (None, None | Some(ToolEffect::Unknown)) => {
                "an external tool Keel cannot judge: it may do anything".into()
            }
            (None, Some(ToolEffect::ReadOnly | ToolEffect::Control)) => String::new(),
        };
        // Inline code (`python3 -c "import gen; gen.main()"`) runs workspace code it names
        // only by module name: approved for the session, it is pinned like a script (R6-5).
        let runs_workspace_script = analysis.as_ref().is_some_and(|a| {
            a.runs_inline_code
                || a.sources
                    .iter()
                    .any(|s| WORKSPACE_CODE.contains(&s.what.as_ref()))
        });
        let judged = match (command, &planned, &analysis, workspace) {
            (Some(c), _, Some(a), Some(ws)) => JudgedRun::of(ws.root(), ws.root(), c, a),
            (None, Some((p, ws)), Some(a), _) => JudgedRun::of(ws.root(), &p.cwd, &p.command, a),
            _ => None,
        };
        let summary = CallSummary {
            tool: call.name.clone(),
            summary: text,
            class: class.to_string(),
            reason,
            runs_workspace_script,
            judged,
        };
        let hits = |rules: &[String]| -> RuleHits {
            let mut hits = RuleHits::default();
            for rule in rules {
                let (name, prefix) = split_rule(rule);
                let applies = match prefix {
                    None => name == call.name || name == "*",
                    // A command prefix of `run_command` judges every command a tool runs.
                    Some(_) => {
                        name == call.name
                            || name == "*"
                            || (name == "run_command" && analysis.is_some())
                    }
                };
                if !applies {
                    continue;
                }
                let found = match (prefix, &analysis) {
                    (None, _) => RuleMatch::Yes,
                    (Some(p), Some(a)) => a.rule_match(p),
                    (Some(_), None) => RuleMatch::No,
                };
                match found {
                    RuleMatch::Yes => {
                        hits.whole_tool |= prefix.is_none();
                        hits.yes.get_or_insert_with(|| rule.clone());
                    }
                    RuleMatch::Maybe => {
                        hits.maybe.get_or_insert_with(|| rule.clone());
                    }
                    RuleMatch::No => {}
                }
            }
            hits
        };
        let deny = hits(&self.deny);
        if let Some(rule) = deny.yes {
            return (
                Verdict::Deny(format!("the approval rule deny = \"{rule}\" forbids it")),
                summary,
            );
        }
        // A deny rule that may match (`$cmd`, `git $sub`): a person decides, whatever the
        // policy.
        if deny.maybe.is_some() {
            return (Verdict::Ask, summary);
        }
        let allow = hits(&self.allow);
        let read_only = analysis.as_ref().is_some_and(|a| a.is_read_only());
        // Whether the line reads with no rule vouching for any of it (`git status`, not `npm
        // test` whose runner a rule vouched for): such a line runs in the read-only lane even
        // when a rule allows it — a repository's `core.fsmonitor` behind `git status` must
        // not write (red-team pass 7, R7-24) — unless the policy lets everything write.
        let reads_alone = || {
            command.is_some_and(|c| match workspace {
                Some(ws) => CommandSafety::new()
                    .classify_in_project(c, ws)
                    .is_read_only(),
                None => CommandSafety::new().classify(c).is_read_only(),
            })
        };
        // A prefix rule vouched for its commands; the rest of the line only reads.
        if allow.whole_tool || (allow.yes.is_some() && read_only) {
            let lane = !allow.whole_tool
                && read_only
                && self.policy != ApprovalPolicy::Never
                && reads_alone();
            let verdict = if lane {
                Verdict::AllowReadOnly
            } else {
                Verdict::Allow
            };
            return (verdict, summary);
        }
        if self.policy == ApprovalPolicy::Never {
            return (Verdict::Allow, summary);
        }
        let ask = hits(&self.ask);
        if ask.yes.is_some() || ask.maybe.is_some() {
            return (Verdict::Ask, summary);
        }
        // A command allowed because it reads runs read-only: the policy does not let it write,
        // and a `[shell] allow` entry vouches for a program, not for writing (a line that
        // reads only because the entry vouched for its test runner writes). `run_tests`
        // whose command only reads runs read-only too (its tool judges that: R7-25).
        let lane = read_only
            && (self.vouched.iter().all(|p| {
                analysis
                    .as_ref()
                    .is_none_or(|a| a.rule_match(p) != RuleMatch::Yes)
            }) || reads_alone());
        let lane = command.is_some() && lane;
        let risky = deletes
            || match analysis.map(|a| a.class) {
                Some(SafetyClass::ReadOnly) => false,
                Some(SafetyClass::WritesWorkspace) => self.policy == ApprovalPolicy::Untrusted,
                Some(SafetyClass::Network | SafetyClass::Unknown | SafetyClass::Destructive) => {
                    true
                }
                None => match effect {
                    Some(ToolEffect::ReadOnly | ToolEffect::Control) => false,
                    Some(ToolEffect::WritesFiles | ToolEffect::RunsCommands) => {
                        self.policy == ApprovalPolicy::Untrusted
                    }
                    None | Some(ToolEffect::Unknown) => true,
                },
            };
        let verdict = if risky {
            Verdict::Ask
        } else if lane {
            Verdict::AllowReadOnly
        } else {
            Verdict::Allow
        };
        (verdict, summary)
    }
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
    /// The read-only lane: calls running read-only now, and the calls that tried to write
    /// there (the next such call asks instead).
    lane: lane::Lane,
    /// Test code changed at or after this time makes `run_tests` ask (the session's start,
    /// then the last approved test run).
    tests_since: Mutex<std::time::SystemTime>,
    /// Remembered approvals of commands that run a workspace script, with when each last
    /// finished (`None`: not yet): the approval holds while no code file of the workspace
    /// changed since.
    pinned: Mutex<HashMap<String, Option<std::time::SystemTime>>>,
    /// Calls running now under a pinned approval (call id → its key).
    pinned_running: Mutex<HashMap<String, String>>,
}

impl ApprovalGate {
    pub fn new(rules: ApprovalRules, interactive: bool, timeout: Duration) -> Self {
        Self {
            rules,
            interactive,
            timeout,
            pending: Mutex::new(HashMap::new()),
            remembered: Mutex::new(HashSet::new()),
            lane: lane::Lane::default(),
            tests_since: Mutex::new(std::time::SystemTime::now()),
            pinned: Mutex::new(HashMap::new()),
            pinned_running: Mutex::new(HashMap::new()),
        }
    }

    /// The gate for a session of `config`: `policy` overrides `[approval] policy` (a flag);
    /// `interactive` says whether anyone can answer.
    pub fn from_config(config: &Config, policy: Option<ApprovalPolicy>, interactive: bool) -> Self {
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
        let key = format!("{tool}\u{0}{summary}");
        // A script's approval covers the workspace's code as it is now (a new process: the
        // previous turn's changes are not known here).
        lock(&self.pinned).insert(key.clone(), Some(std::time::SystemTime::now()));
        lock(&self.remembered).insert(key);
    }

    /// Why the session approval of the script call `key` no longer holds: the workspace code
    /// files changed since it last ran (or it never finished), listed; `None` while it holds
    /// or the call is not a script's.
    fn pin_lapsed(&self, key: &str, workspace: &Workspace) -> Option<String> {
        let since = (*lock(&self.pinned).get(key)?)?;
        test_code::code_changed_since(workspace, since).map(|(files, _)| test_code::list(&files))
    }

    /// Whether `call` is a test run (a tool that runs the project's own command, not a
    /// command line) whose test code is looked at: not under `never`, nor when the user allows
    /// the tool outright (`allow = ["run_tests"]`).
    fn judges_test_code(&self, call: &ToolCall, tools: &ToolRegistry) -> bool {
        call.arguments.get("command").is_none()
            && tools
                .get(&call.name)
                .is_some_and(|t| t.effect() == ToolEffect::RunsCommands)
            && self.judges_test_code_of(&call.name)
    }

    /// Whether a test run by `tool` has its test code looked at: not under `never`, nor when
    /// the user allows `tool` outright.
    fn judges_test_code_of(&self, tool_name: &str) -> bool {
        self.rules.policy != ApprovalPolicy::Never
            && !self.rules.allow.iter().any(|r| {
                let (tool, prefix) = split_rule(r);
                prefix.is_none() && (tool == tool_name || tool == "*")
            })
    }

    /// The call `call_id` finished with `output`: when it ran in the read-only lane and tried
    /// to write, the note appended to its result (and the same call asks next time).
    pub fn finished(&self, call_id: &str, output: &str) -> Option<String> {
        if let Some(key) = lock(&self.pinned_running).remove(call_id)
            && let Some(since) = lock(&self.pinned).get_mut(&key)
        {
            // What the script itself wrote while it ran is covered by the approval.
            *since = Some(std::time::SystemTime::now());
        }
        self.lane.finished(call_id, output)
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

    /// Decides whether `call` may run, asking and waiting when the rules say so: `Ok` is how
    /// its commands run ([`CommandAccess::ReadOnly`] for a call allowed only because it was
    /// rated read-only), `Err` the text the model reads instead of the call's result.
    pub async fn check<E: Events>(
        &self,
        call: &ToolCall,
        tools: &ToolRegistry,
        workspace: &Workspace,
        emitter: &E,
        cancel: &CancellationToken,
    ) -> Result<Result<CommandAccess, String>, E::Error> {
        let test_run = self.judges_test_code(call, tools);
        self.check_judged(call, tools, workspace, emitter, cancel, test_run)
            .await
    }

    /// Whether a verification gate is a test run whose test code is looked at (it runs the
    /// project's tests or build, which load test code by convention): as
    /// [`Self::judges_test_code`] for `run_tests` — not under `never`, nor when the user allows
    /// `run_tests` outright.
    fn judges_gate_test_code(&self) -> bool {
        self.judges_test_code_of("run_tests")
    }

    /// The test code the session changed since the last approved test run, listed (`a.py,
    /// b.py and 3 more`), when a verification gate must ask because of it (red-team pass 2,
    /// R21: the final gate runs the model's `conftest.py` as `run_tests` would).
    pub fn gate_test_code_changed(&self, workspace: &Workspace) -> Option<String> {
        if !self.judges_gate_test_code() {
            return None;
        }
        let since = *self
            .tests_since
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        test_code::changed_since(workspace, since).map(|(files, _)| test_code::list(&files))
    }

    /// [`Self::check`] for a verification gate's command (a `run_command` call): judged like
    /// the model's, and like `run_tests` by the test code the session changed.
    pub async fn check_gate<E: Events>(
        &self,
        call: &ToolCall,
        tools: &ToolRegistry,
        workspace: &Workspace,
        emitter: &E,
        cancel: &CancellationToken,
    ) -> Result<Result<CommandAccess, String>, E::Error> {
        let test_run = self.judges_gate_test_code();
        self.check_judged(call, tools, workspace, emitter, cancel, test_run)
            .await
    }

    async fn check_judged<E: Events>(
        &self,
        call: &ToolCall,
        tools: &ToolRegistry,
        workspace: &Workspace,
        emitter: &E,
        cancel: &CancellationToken,
        test_run: bool,
    ) -> Result<Result<CommandAccess, String>, E::Error> {
        let started = std::time::SystemTime::now();
        let (mut verdict, mut what) = self.rules.judge_in(call, tools, Some(workspace));
        // A test run after the session changed the test code it loads asks (R21).
        if test_run && !matches!(verdict, Verdict::Deny(_)) {
            let since = *self
                .tests_since
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if let Some((files, fp)) = test_code::changed_since(workspace, since) {
                let files = test_code::list(&files);
                what.class = "unknown".into();
                what.reason = format!(
                    "it runs test code changed in this session ({files}), which Keel cannot judge"
                );
                what.summary = format!("{} [test code changed: {files}; #{fp}]", what.summary);
                verdict = Verdict::Ask;
            }
        }
        let key = format!("{}\u{0}{}", what.tool, what.summary);
        let known = lock(&self.remembered).contains(&key);
        // A remembered script approval covers the code as it was (R12): a changed code file
        // anywhere in the workspace (what the script may import) makes it ask again.
        let lapsed = (known && what.runs_workspace_script)
            .then(|| self.pin_lapsed(&key, workspace))
            .flatten();
        if let Some(files) = &lapsed {
            what.reason = format!(
                "it runs a workspace script, and workspace code changed since it last ran ({files}); the earlier approval covered the code as it was"
            );
        }
        let remembered = || known && lapsed.is_none();
        // The call runs: when it is a script's, its end moves the pin forward.
        let runs = |access: CommandAccess| {
            if let Some(j) = &what.judged {
                keel_tools::shell::judged::let_run(j.clone());
            }
            if what.runs_workspace_script {
                lock(&self.pinned_running).insert(call.id.clone(), key.clone());
            }
            Ok(Ok(access))
        };
        match verdict {
            Verdict::Allow => return runs(CommandAccess::Write),
            Verdict::AllowReadOnly if remembered() => return runs(CommandAccess::Write),
            // It tried to write when it last ran read-only: a person decides whether it may.
            Verdict::AllowReadOnly if self.lane.tried_to_write(&key) => {
                what.class = "writes_workspace".into();
                what.reason = lane::ESCALATION_REASON.into();
            }
            Verdict::AllowReadOnly => {
                self.lane.started(&call.id, key.clone());
                return runs(CommandAccess::ReadOnly);
            }
            Verdict::Deny(why) => {
                return Ok(Err(format!(
                    "not run: {why}. Do not retry it; find another way or ask the user."
                )));
            }
            Verdict::Ask => {}
        }
        if remembered() {
            return runs(CommandAccess::Write);
        }
        if !self.interactive {
            let reason = format!(
                "this run has nobody to approve it: the approval policy is {}; `{}` ({}) needs approval. Rerun with --approval never to allow it, or do without it",
                self.rules.policy,
                displayed(&what.summary),
                what.class
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
                summary: displayed(&what.summary),
                class: what.class.clone(),
                reason: displayed(&what.reason),
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
        match decision {
            Decision::Approve(scope) => {
                if test_run {
                    *self
                        .tests_since
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner) = started;
                }
                if scope != ApprovalScope::Session {
                    // Once: this run only; a lapsed session approval stays lapsed.
                    if let Some(j) = &what.judged {
                        keel_tools::shell::judged::let_run(j.clone());
                    }
                    return Ok(Ok(CommandAccess::Write));
                }
                if what.runs_workspace_script {
                    lock(&self.pinned).insert(key.clone(), None);
                }
                lock(&self.remembered).insert(key.clone());
                runs(CommandAccess::Write)
            }
            Decision::Deny(reason) => Ok(Err(format!(
                "not run: the user denied this call{}. Do not retry it; find another way or ask the user.",
                reason.map(|r| format!(" ({r})")).unwrap_or_default()
            ))),
        }
    }
}

/// A mutex's guard, whatever a panicking holder left.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// `reason` with what the line changes among installed dependencies
/// ([`keel_tools::shell::Analysis::changes_installed`]) added, at most three named.
fn with_installs(reason: String, a: &keel_tools::shell::Analysis) -> String {
    let list = &a.changes_installed;
    if list.is_empty() {
        return reason;
    }
    let mut shown: Vec<String> = list.iter().take(3).cloned().collect();
    if list.len() > 3 {
        shown.push(format!("and {} more", list.len() - 3));
    }
    let what = format!(
        "changes installed dependencies or the user's own configuration: {}",
        shown.join(", ")
    );
    if reason.is_empty() {
        what
    } else {
        format!("{reason}; {what}")
    }
}

#[cfg(test)]
mod tests;
