//! The engine and its builder: everything a run needs, assembled once.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use keel_index::SharedIndex;
use keel_llm::retry::RetryPolicy;
use keel_llm::{Provider, ReliableProvider};
use keel_protocol::{ErrorInfo, SessionStatus, Usage};
use keel_store::Store;
use keel_tools::{ToolRegistry, Workspace, builtin};
use tokio_util::sync::CancellationToken;

use crate::blockers::{BlockerInfo, SharedUserPrompt};
use crate::gates::ProjectGates;
use crate::phase::EngineJudge;
use crate::verify::SharedGateDetector;
use crate::{Config, EngineError, EventSink};
use keel_config::ConfigError;
use keel_knowledge::prompt;
use keel_phase::{ADVANCE_PHASE, AdvancePhase, CommandJudge, ExecutionMode, PhasePolicy};
use keel_snapshot::{LazySnapshots, Snapshots};

/// A configured agent: provider, tools, store, workspace and policy. Cheap to share; each
/// [`Engine::run`] is an independent session.
pub struct Engine {
    pub(crate) provider: Arc<dyn Provider>,
    /// The `auxiliary` role: a cheap model for summaries (compaction), if configured.
    pub(crate) auxiliary: Option<Arc<dyn Provider>>,
    /// Finds the default verification gates when `[verify] commands` is unset.
    pub(crate) gate_detector: SharedGateDetector,
    pub(crate) tools: Arc<ToolRegistry>,
    pub(crate) store: Arc<dyn Store>,
    pub(crate) workspace: Workspace,
    pub(crate) config: Config,
    pub(crate) system_prompt: String,
    /// The phase policy: set exactly when the mode is `plan_exec`.
    pub(crate) phase_policy: Option<Arc<PhasePolicy>>,
    /// Judges shell commands for the phase policy.
    pub(crate) judge: Arc<dyn CommandJudge>,
    /// The workspace's snapshot store, opened on first use: `None` when `[snapshots] enabled =
    /// false`; an error (git missing) is reported at the first snapshot.
    pub(crate) snapshots: Option<LazySnapshots>,
    /// The workspace index, shared by `codebase_search` and the codemap.
    pub(crate) index: Arc<SharedIndex>,
    /// The repository constitution (`.keel/constitution.json`), validated at build.
    pub(crate) constitution: Arc<keel_knowledge::constitution::Constitution>,
    /// The skills found at build (`skills`).
    pub(crate) skills: Arc<keel_knowledge::skills::SkillSet>,
    /// The custom hooks, in the order they were added (a run asks them between the built-in
    /// guardrails: `hooks::builtin::standard`).
    pub(crate) hooks: Vec<Arc<dyn crate::hooks::Hook>>,
    /// Builds subagents' providers (`agents`); without it a child uses this engine's.
    pub(crate) child_providers: Option<crate::agents::ChildProviders>,
    /// How many subagent levels below the session this engine runs (0: the session itself).
    pub(crate) agent_depth: u32,
    /// A subagent's role and tools (none for the session itself).
    pub(crate) agent_scope: Option<Arc<crate::agents::AgentScope>>,
    /// The session's MCP servers, when any is defined.
    pub(crate) mcp: Option<crate::mcp::McpState>,
    /// Instruction files left out of the system prompt because they must not be read (a
    /// symlink out of the workspace, a FIFO or device, too large), one message each.
    pub(crate) project_notes: Vec<String>,
    /// What the user should know about how the project's settings are held (a bound the
    /// constitution's protected globs reached), one message each.
    pub(crate) setup_notes: Vec<String>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("provider", &self.provider.info())
            .field("tools", &self.tools)
            .field("workspace", &self.workspace)
            .finish_non_exhaustive()
    }
}

/// Assembles an [`Engine`]. The one place every entry point builds engines, so the CLI and
/// the server cannot drift apart.
pub struct EngineBuilder {
    config: Config,
    workspace: PathBuf,
    provider: Option<Arc<dyn Provider>>,
    auxiliary: Option<Arc<dyn Provider>>,
    gate_detector: Option<SharedGateDetector>,
    fallbacks: Vec<Arc<dyn Provider>>,
    store: Option<Arc<dyn Store>>,
    tools: Option<ToolRegistry>,
    retry: Option<RetryPolicy>,
    judge: Option<Arc<dyn CommandJudge>>,
    hooks: Vec<Arc<dyn crate::hooks::Hook>>,
    child_providers: Option<crate::agents::ChildProviders>,
    /// A subagent's engine shares its parent's MCP servers instead of starting its own.
    inherited_mcp: Option<Option<crate::mcp::McpState>>,
}

impl EngineBuilder {
    /// Starts a builder for `workspace` with `config`.
    pub fn new(config: Config, workspace: impl AsRef<Path>) -> Self {
        Self {
            config,
            workspace: workspace.as_ref().to_path_buf(),
            provider: None,
            auxiliary: None,
            gate_detector: None,
            fallbacks: Vec::new(),
            store: None,
            tools: None,
            retry: None,
            judge: None,
            hooks: Vec::new(),
            child_providers: None,
            inherited_mcp: None,
        }
    }

    /// Shares `state` (a parent's MCP servers, whose tools are already in the registry given
    /// with [`Self::tools`]) instead of starting the configured servers again.
    pub(crate) fn inherit_mcp(mut self, state: Option<crate::mcp::McpState>) -> Self {
        self.inherited_mcp = Some(state);
        self
    }

    /// Adds a custom hook: it runs after the built-in guardrails and before final
    /// verification and approval, in the order hooks are added (see [`crate::hooks`]).
    pub fn hook(mut self, hook: Arc<dyn crate::hooks::Hook>) -> Self {
        self.hooks.push(hook);
        self
    }

    /// How subagents get their model: given the model `agent_open` (or the role) asked for,
    /// else `None` for the `child` model role, the bare provider. Without it a child shares
    /// this engine's provider.
    pub fn child_providers(mut self, providers: crate::agents::ChildProviders) -> Self {
        self.child_providers = Some(providers);
        self
    }

    /// The execution mode, overriding `agent.mode`: the one switch between the plain loop and
    /// the phase-enforced loop, so every surface (CLI, REST, WebSocket) gets the same engine
    /// for the same mode. `plan_exec` registers `advance_phase` and enforces `[plan_exec]`.
    pub fn mode(mut self, mode: ExecutionMode) -> Self {
        self.config.agent.mode = mode.as_str().to_string();
        self
    }

    /// Replaces how the phase policy judges shell commands (read-only? a test command?).
    pub fn command_judge(mut self, judge: Arc<dyn CommandJudge>) -> Self {
        self.judge = Some(judge);
        self
    }

    /// The model provider (required). Pass the bare provider: the engine adds retries and the
    /// fallback list ([`ReliableProvider`]) itself.
    pub fn provider(mut self, provider: Arc<dyn Provider>) -> Self {
        self.provider = Some(provider);
        self
    }

    /// The `auxiliary` role: the model that writes compaction summaries (R13–R15). Without
    /// one, summaries use the main model; either failing falls back to a rule-based summary.
    pub fn auxiliary_provider(mut self, provider: Arc<dyn Provider>) -> Self {
        self.auxiliary = Some(provider);
        self
    }

    /// How to find a project's default verification gates (its test command, plus lint) when
    /// `[verify] commands` is unset. The default is [`ProjectGates`]: the detected test
    /// command plus error-only project checks.
    pub fn gate_detector(mut self, detector: SharedGateDetector) -> Self {
        self.gate_detector = Some(detector);
        self
    }

    /// Models tried in order when the main one still fails after its retries (`llm.fallback`).
    pub fn fallback_providers(mut self, fallbacks: Vec<Arc<dyn Provider>>) -> Self {
        self.fallbacks = fallbacks;
        self
    }

    /// The session store (required).
    pub fn store(mut self, store: Arc<dyn Store>) -> Self {
        self.store = Some(store);
        self
    }

    /// Replaces the default tool set.
    pub fn tools(mut self, tools: ToolRegistry) -> Self {
        self.tools = Some(tools);
        self
    }

    /// Replaces the retry policy derived from `llm.max_retries`.
    pub fn retry_policy(mut self, retry: RetryPolicy) -> Self {
        self.retry = Some(retry);
        self
    }

    /// Builds the engine, reading the project's instruction files once so the system prompt
    /// stays byte-identical for every turn of every run of this engine.
    pub fn build(self) -> Result<Engine, EngineError> {
        let provider = self
            .provider
            .ok_or_else(|| EngineError::Setup("no model provider configured".into()))?;
        let store = self
            .store
            .ok_or_else(|| EngineError::Setup("no session store configured".into()))?;
        // The constitution's protected paths, and the files its globs match now, feed the file
        // tools' and the kernel sandbox's read-only lists (globs are also checked before a
        // tool runs).
        let constitution = keel_knowledge::constitution::Constitution::load(&self.workspace)?;
        let workspace = Workspace::new(&self.workspace)?;
        let protected = constitution.protected_files(workspace.handle());
        // The snapshots' size bound reaches the checks that keep the agent from destroying a
        // file no snapshot records (R10-20) through the workspace, and the snapshots from it.
        let workspace = workspace
            .with_protected(protected.paths.clone())
            .with_snapshot_max_file_mb(self.config.snapshots.max_file_mb);
        let index = Arc::new(SharedIndex::new(self.config.index.settings()));
        let mut tools = self
            .tools
            .unwrap_or_else(|| default_tools(&self.config, &protected.paths, &index));
        let skills = keel_knowledge::skills::discover(
            workspace.root(),
            keel_knowledge::rules::user_config_dir().as_deref(),
        );
        engine_tools(&mut tools, &self.config, &skills, store.clone());
        // MCP servers start together, each within its startup timeout; their tools join the
        // registry (deferred unless the server is `active`).
        let mcp = match self.inherited_mcp {
            Some(state) => state,
            None => crate::mcp::start(&self.config, workspace.root(), &mut tools),
        };
        let config_error = |message: String| {
            EngineError::Config(ConfigError {
                source_name: "the merged configuration".into(),
                message,
            })
        };
        let phase_policy = match self.config.execution_mode() {
            ExecutionMode::PlanExec => {
                if !self.config.plan_exec.enabled {
                    return Err(config_error(
                        "plan_exec mode was requested but plan_exec.enabled = false".into(),
                    ));
                }
                let policy =
                    PhasePolicy::from_config(&self.config.plan_exec).map_err(config_error)?;
                tools.register(AdvancePhase);
                if let Some((phase, name)) =
                    policy.unknown_tools(|n| tools.get(n).is_some()).first()
                {
                    return Err(config_error(format!(
                        "plan_exec.phases.{phase}.whitelist names `{name}`, which is not a tool; available: {}",
                        tools.names().collect::<Vec<_>>().join(", ")
                    )));
                }
                Some(Arc::new(policy))
            }
            ExecutionMode::React => {
                tools.remove(ADVANCE_PHASE);
                None
            }
        };
        let retry = self.retry.unwrap_or_else(|| RetryPolicy {
            max_retries: self.config.llm.max_retries,
            ..RetryPolicy::default()
        });
        let (system_prompt, project_notes) =
            prompt::system_prompt_checked(workspace.root(), &constitution);
        // Retries and fallbacks live in the provider stream, announced as events there.
        let provider: Arc<dyn Provider> =
            Arc::new(ReliableProvider::new(provider, retry).with_fallbacks(self.fallbacks));
        let gate_detector = self.gate_detector.unwrap_or_else(|| {
            Arc::new(ProjectGates {
                test_command: self.config.shell.test_command.clone(),
            })
        });
        let judge = self.judge.unwrap_or_else(|| {
            Arc::new(EngineJudge {
                workspace: workspace.root().to_path_buf(),
                configured: self.config.verify.commands.clone(),
                detector: gate_detector.clone(),
                safety: keel_tools::shell::CommandSafety::with_allow(&self.config.shell.allow),
                test_command: self.config.shell.test_command.clone(),
            })
        });
        let snapshots = self.config.snapshots.enabled.then(|| {
            LazySnapshots::new(workspace.root(), self.config.snapshots.build_dirs())
                .with_max_file_mb(workspace.snapshot_max_file_mb())
        });
        Ok(Engine {
            provider,
            auxiliary: self.auxiliary,
            gate_detector,
            tools: Arc::new(tools),
            store,
            workspace,
            config: self.config,
            system_prompt,
            phase_policy,
            judge,
            snapshots,
            index,
            constitution: Arc::new(constitution),
            skills: Arc::new(skills),
            hooks: self.hooks,
            child_providers: self.child_providers,
            agent_depth: 0,
            agent_scope: None,
            mcp,
            project_notes,
            setup_notes: protected.notes,
        })
    }
}

/// How to run one task.
#[derive(Clone, Default)]
pub struct RunOptions {
    /// Where events go after they are stored.
    pub sinks: Vec<Arc<dyn EventSink>>,
    /// Cancels the run (Ctrl-C, API cancel). The session ends `cancelled`.
    pub cancel: CancellationToken,
    /// Extra task-layer context (answered questions, PRD excerpts).
    pub context: Vec<String>,
    /// Answers the model's `ask_user` questions interactively; without it a question raises a
    /// blocker and the run ends `blocked`.
    pub ask_user: Option<SharedUserPrompt>,
    /// Asks a person before risky tool calls (`[approval]`); without it every call the
    /// sandbox allows runs.
    pub approvals: Option<Arc<keel_approval::ApprovalGate>>,
    /// The id this run's events carry (a fresh one when unset).
    pub run_id: Option<String>,
    /// The run that started this one (a subagent's parent turn).
    pub parent_run_id: Option<String>,
    /// Run without the workspace's lease: the caller coordinates the runs in it (a flow's
    /// nodes). Otherwise a run holds its workspace's lease, and another session's live run
    /// there makes it [`crate::EngineError::WorkspaceBusy`]…
    pub shared_workspace: bool,
    /// …or, with this, waits (until cancelled) for that run to end.
    pub wait_for_workspace: bool,
}

/// The built-in tools a session gets from `config` (file, search and shell tools).
fn default_tools(
    config: &Config,
    protected: &[std::path::PathBuf],
    index: &Arc<SharedIndex>,
) -> ToolRegistry {
    let mut r = ToolRegistry::new();
    builtin::register_defaults(&mut r);
    // The index tools with the configured settings (same names as the defaults).
    r.register(builtin::Grep::new(config.index.settings()));
    if config.index.enabled {
        r.register(builtin::CodebaseSearch::new(index.clone()));
    } else {
        r.remove("codebase_search");
    }
    if config.shell.enabled {
        let mut settings = config.shell.tool_settings();
        settings.protected.extend(protected.iter().cloned());
        keel_tools::shell::register(&mut r, settings, config.shell.lint_settings());
    }
    r
}

/// The tools the engine answers itself: `read_result` and `memory_search` (deferred: the
/// head only names them in `tool_search`'s description), `skill` when there are skills
/// (active when the first message lists them "to load with the `skill` tool"; the
/// workspace's skills are fixed, so the head stays stable), the subagent tools (deferred).
fn engine_tools(
    tools: &mut ToolRegistry,
    config: &Config,
    skills: &keel_knowledge::skills::SkillSet,
    store: Arc<dyn keel_store::Store>,
) {
    // Session working memory: the loop answers it.
    tools.register(keel_results::ReadResult);
    // Saved memory the first message did not show: found by exact name.
    tools.register(keel_knowledge::memory::MemorySearch::new(store));
    if skills.listing().is_some() {
        tools.register_with_state(
            Arc::new(keel_knowledge::skills::SkillTool),
            keel_tools::ToolState::Active,
        );
    } else if !skills.skills.is_empty() {
        tools.register(keel_knowledge::skills::SkillTool);
    }
    if config.agents.enabled && config.agents.max_depth > 0 {
        tools.register(crate::agents::AgentOpen);
        tools.register(crate::agents::AgentEval);
        tools.register(crate::agents::AgentClose);
    }
}

/// The tool catalog a session's first request here sends (`keel context`'s tool-schemas
/// layer), built as [`EngineBuilder::build`] builds it; MCP servers' tools are left out (they
/// are deferred unless `active`).
pub fn first_request_tools(
    config: &Config,
    workspace: &Path,
) -> Result<Vec<keel_protocol::ToolSpec>, EngineError> {
    let constitution = keel_knowledge::constitution::Constitution::load(workspace)?;
    let index = Arc::new(SharedIndex::new(config.index.settings()));
    // Which paths are read-only does not change the schemas: the plain ones are enough here.
    let mut tools = default_tools(config, &constitution.plain_protected(), &index);
    let skills = keel_knowledge::skills::discover(
        workspace,
        keel_knowledge::rules::user_config_dir().as_deref(),
    );
    // `memory_search` is only named here (its store is never asked).
    let store: Arc<dyn keel_store::Store> = Arc::new(keel_store::SqliteStore::open_in_memory()?);
    engine_tools(&mut tools, config, &skills, store);
    match config.execution_mode() {
        ExecutionMode::PlanExec => {
            tools.register(AdvancePhase);
        }
        ExecutionMode::React => {
            tools.remove(ADVANCE_PHASE);
        }
    }
    Ok(tools.specs())
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq)]
pub struct RunOutcome {
    pub session_id: String,
    pub status: SessionStatus,
    /// Model requests made in the session so far (all runs).
    pub iterations: u32,
    /// Usage of the session so far (all runs, summaries included).
    pub usage: Usage,
    /// The model's final answer (empty unless completed).
    pub final_text: String,
    /// The structured error, when the run failed or was cancelled.
    pub error: Option<ErrorInfo>,
    /// The blocker, when the run ended `blocked`.
    pub blocker: Option<BlockerInfo>,
}

impl Engine {
    /// The workspace this engine works in.
    pub fn workspace(&self) -> &Workspace {
        &self.workspace
    }

    /// The system prompt (the cached head's text part).
    pub fn system_prompt(&self) -> &str {
        &self.system_prompt
    }

    /// The skills this engine found.
    pub fn skills(&self) -> &keel_knowledge::skills::SkillSet {
        &self.skills
    }

    /// The repository constitution this engine enforces.
    pub fn constitution(&self) -> &keel_knowledge::constitution::Constitution {
        &self.constitution
    }

    /// Instruction files (AGENTS.md, CLAUDE.md, `.keel/rules/*.md`) left out of the system
    /// prompt because they must not be read — a symlink out of the workspace, a FIFO or
    /// device, over the size limit — one message each, naming the file and what to do.
    pub fn project_notes(&self) -> &[String] {
        &self.project_notes
    }

    /// What the user should know about how the project's settings are held (a bound the
    /// constitution's protected globs reached), one message each.
    pub fn setup_notes(&self) -> &[String] {
        &self.setup_notes
    }

    /// The session's MCP servers (`None` when none is defined).
    pub fn mcp(&self) -> Option<&crate::mcp::McpState> {
        self.mcp.as_ref()
    }

    /// The tool registry.
    pub fn tools(&self) -> &ToolRegistry {
        &self.tools
    }

    /// The execution mode this engine runs sessions in.
    pub fn mode(&self) -> ExecutionMode {
        if self.phase_policy.is_some() {
            ExecutionMode::PlanExec
        } else {
            ExecutionMode::React
        }
    }

    /// The phase policy (plan_exec engines only).
    pub fn phase_policy(&self) -> Option<&PhasePolicy> {
        self.phase_policy.as_deref()
    }

    /// The workspace's snapshot store (for undo), when snapshots are on and git is available.
    /// Opens it on the first call, which runs git: call it off the async runtime.
    pub fn snapshots(&self) -> Option<Arc<Snapshots>> {
        self.snapshots.as_ref().and_then(|s| s.get().ok())
    }

    /// The workspace index shared by `codebase_search` and the codemap.
    pub fn index(&self) -> &Arc<SharedIndex> {
        &self.index
    }

    /// The effective configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The main model's provider, name and context window (for a front end's status line).
    pub fn provider_info(&self) -> keel_llm::ProviderInfo {
        self.provider.info()
    }

    /// The store sessions are written to.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }
}
