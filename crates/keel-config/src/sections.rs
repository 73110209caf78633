//! The configuration's sections, one struct each, with their defaults. How layers are read and
//! merged lives in the parent module.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// `[agent]`: the loop.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AgentConfig {
    /// Model requests per run before it stops with `max_steps`.
    pub max_iterations: u32,
    /// Character budget of one tool result shown to the model: a longer one is stored whole
    /// and shown as its head and tail plus a handle that `read_result` pages through. A small
    /// context window lowers it (at most a quarter of the window, not below 1,000).
    pub max_output_chars: usize,
    /// Execution mode: `react` or `plan_exec` (the phase machine, `[plan_exec]`).
    pub mode: String,
    /// Fraction of the model's context window at which the working context is compacted.
    pub compact_threshold: f64,
    /// The model's context window in tokens; unset means what the provider reports, else
    /// 128,000.
    pub context_window: Option<u64>,
    /// Rounds of self-correction after final verification fails, before the run fails.
    pub self_correction_cap: u32,
    /// Token budget of the user-memory block in a session's first message: when the saved
    /// facts do not all fit, the ones most relevant to the task do (the rest through the
    /// `memory_search` tool).
    pub memory_tokens: usize,
}

impl Default for AgentConfig {
    fn default() -> Self {
        Self {
            max_iterations: 30,
            max_output_chars: 4_000,
            mode: "react".into(),
            compact_threshold: 0.85,
            context_window: None,
            self_correction_cap: 3,
            memory_tokens: 300,
        }
    }
}

/// `[fallback_chain]`: what happens when a run fails (R16–R18): main → recovery → emergency.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FallbackChainConfig {
    /// `false` turns off both tiers: a failure surfaces as the original error.
    pub enabled: bool,
    pub recovery: RecoveryConfig,
    pub emergency: EmergencyConfig,
}

impl Default for FallbackChainConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            recovery: RecoveryConfig::default(),
            emergency: EmergencyConfig::default(),
        }
    }
}

/// `[fallback_chain.recovery]`: evaluate the failure, let the model reflect, retry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RecoveryConfig {
    pub enabled: bool,
    /// Recovery attempts per run, each with a fresh iteration budget.
    pub max_retries: u32,
}

impl Default for RecoveryConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            max_retries: 1,
        }
    }
}

/// `[fallback_chain.emergency]`: the structured, rule-classified error with suggestions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EmergencyConfig {
    pub enabled: bool,
}

impl Default for EmergencyConfig {
    fn default() -> Self {
        Self { enabled: true }
    }
}

/// `[verify]`: final verification gates run when the model says it is done.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct VerifyConfig {
    pub enabled: bool,
    /// Shell commands run in the workspace root, in order; each must exit 0. Unset means the
    /// detected gates (the project's test command, plus lint); `[]` means none.
    pub commands: Option<Vec<String>>,
    /// Seconds before a gate is killed (with its whole process group).
    pub timeout_secs: u64,
    /// Verify even when the run changed nothing (no file writes, no commands).
    pub always: bool,
}

impl Default for VerifyConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            commands: None,
            timeout_secs: 600,
            always: false,
        }
    }
}

/// `[llm]`: providers, models, aliases, roles, fallbacks, prices. Defined in `keel-llm`, beside
/// the code that resolves it ([`keel_llm::router::Router`]).
pub use keel_llm::config::{LlmConfig, ModelEntry, ProviderEntry};
/// `[plan_exec]`: the phase machine used when `agent.mode = "plan_exec"`. Defined in
/// `keel-phase`, beside the policy that resolves it ([`keel_phase::PhasePolicy::from_config`]).
pub use keel_phase::{PhaseConfig, PhasesConfig, PlanExecConfig};

/// `[rollback]`: how validation and rollback commands run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RollbackConfig {
    /// Seconds before a validation or rollback command is killed (with its process group).
    pub timeout_secs: u64,
}

impl Default for RollbackConfig {
    fn default() -> Self {
        Self { timeout_secs: 120 }
    }
}

/// `[snapshots]`: automatic workspace snapshots before the agent's writes (`keel undo`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SnapshotsConfig {
    pub enabled: bool,
    /// Build output and dependency directories (plain names, matched at any depth) left out of
    /// snapshots, undo, flow traces and the workspace copies of flow branches and eval tasks
    /// when git tracks no file in them.
    pub build_dirs: Vec<String>,
    /// Files larger than this many MiB are left out of snapshots (and never touched by undo):
    /// a sparse `truncate -s 1T` file costs nothing to make and would be read whole by every
    /// snapshot (red-team R18). 0: no limit. The user's own setting (a project cannot set it).
    pub max_file_mb: u64,
}

impl Default for SnapshotsConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            build_dirs: keel_tools::build_dirs::DEFAULT_BUILD_DIRS
                .iter()
                .map(|s| s.to_string())
                .collect(),
            max_file_mb: keel_tools::recorded::DEFAULT_MAX_FILE_MB,
        }
    }
}

impl SnapshotsConfig {
    /// The build directories as the tools' type (validated when the configuration loads).
    pub fn build_dirs(&self) -> keel_tools::build_dirs::BuildDirs {
        keel_tools::build_dirs::BuildDirs::new(&self.build_dirs).unwrap_or_default()
    }
}

/// `[store]`: where sessions are kept.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StoreConfig {
    /// Session database file (default: `$KEEL_HOME/keel.db`, else the user data directory).
    pub path: Option<PathBuf>,
    /// Seconds a run's lease lives without a heartbeat (renewed every third of it): a killed
    /// run's session shows `interrupted` and can be resumed after this long.
    pub lease_ttl_secs: u64,
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self {
            path: None,
            lease_ttl_secs: keel_store::LEASE_TTL_MS / 1000,
        }
    }
}

/// `[database]`: the shared PostgreSQL database (`keel db migrate`). User-only: a project's
/// file cannot point keel at a database.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DatabaseConfig {
    /// `postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE`; `KEEL_DATABASE_URL` and
    /// `--database` take precedence. Unset: the local SQLite store.
    pub url: Option<String>,
}

/// `[server]`: `keel serve`, the HTTP API and web UI.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    /// Address to bind. Anything but a loopback address requires a bearer token.
    pub host: String,
    /// TCP port (0 picks a free one).
    pub port: u16,
    /// Bearer token API clients must send. Unset: one is generated at each start-up, printed
    /// in the URL and stored in `$KEEL_HOME/server-token` (mode 0600).
    pub token: Option<String>,
    /// Extra browser origins (`https://keel.example.com`) allowed besides the server's own,
    /// e.g. behind a reverse proxy.
    pub allowed_origins: Vec<String>,
    /// Directories sessions may run in (and take scripts from), `~` expanded; empty means the
    /// `--workspace` the server was started in. `/` and system directories are refused.
    pub workspaces: Vec<String>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            host: "127.0.0.1".into(),
            port: 7700,
            token: None,
            allowed_origins: Vec::new(),
            workspaces: Vec::new(),
        }
    }
}

/// `[worker]`: `keel worker`, which runs queued turns (`keel serve --database`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WorkerConfig {
    /// Turns one worker process runs at once.
    pub concurrency: usize,
    /// Seconds between the worker's heartbeats; a worker silent for three of them is dead
    /// and its jobs go back to the queue.
    pub heartbeat_secs: u64,
    /// Attempts after a failed one, with exponential backoff.
    pub retries: usize,
    /// Port of the worker's `GET /health` (running turns, completed, failed) on 127.0.0.1;
    /// unset: no health endpoint.
    pub health_port: Option<u16>,
    /// Where sessions with a git source (`repo`) are checked out, one directory per session
    /// (`<checkout_dir>/<session id>`); unset: `checkouts` under Keel's data directory.
    pub checkout_dir: Option<std::path::PathBuf>,
    /// Seconds one git call of a checkout (clone, fetch, push) may take before the turn fails.
    pub git_timeout_secs: u64,
}

impl Default for WorkerConfig {
    fn default() -> Self {
        Self {
            concurrency: 1,
            heartbeat_secs: 1,
            retries: 8,
            health_port: None,
            checkout_dir: None,
            git_timeout_secs: 300,
        }
    }
}

/// `[index]`: the codebase index behind `codebase_search` (`.keel/index.db`), and the codemap
/// given to the model in the first message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct IndexConfig {
    /// Offer `codebase_search` and the codemap (`grep` works either way).
    pub enabled: bool,
    /// Extra gitignore-style patterns left out of the index and of `grep`.
    pub ignore: Vec<String>,
    /// Files larger than this (KiB) are left out.
    pub max_file_kb: u64,
    /// Worker threads for index builds; 0 means one per core.
    pub threads: usize,
    /// Token budget of the codemap in the first message; 0 leaves it out.
    pub codemap_tokens: usize,
    /// How long a run may wait at start for a first index build to produce the codemap; a
    /// longer build goes on in the background and the run starts without it.
    pub codemap_wait_ms: u64,
}

impl Default for IndexConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            ignore: Vec::new(),
            max_file_kb: 1024,
            threads: 0,
            codemap_tokens: 600,
            codemap_wait_ms: 0,
        }
    }
}

impl IndexConfig {
    /// The settings the index is opened with.
    pub fn settings(&self) -> keel_index::IndexSettings {
        keel_index::IndexSettings {
            ignore: self.ignore.clone(),
            max_file_bytes: self.max_file_kb.saturating_mul(1024),
            threads: self.threads,
        }
    }
}

/// `[shell]`: running commands (`run_command`, `run_tests`) and the auto-check after edits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ShellConfig {
    /// Offer `run_command` and `run_tests` to the model.
    pub enabled: bool,
    /// Command prefixes refused outright (`"sudo"`, `"git push"`), wherever they appear.
    pub deny: Vec<String>,
    /// Command prefixes treated as read-only (`"make lint"`).
    pub allow: Vec<String>,
    /// Default `run_command` timeout.
    pub timeout_secs: u64,
    /// The largest timeout the model may ask for.
    pub max_timeout_secs: u64,
    /// Confine commands with the kernel sandbox (Landlock, seccomp, a mount namespace) when
    /// the kernel supports it.
    pub sandbox: bool,
    /// Allow network access inside the sandbox (off: no TCP, UDP or socket connections).
    pub network: bool,
    /// Extra directories commands may write in the workspace-write sandbox (`~` expands), e.g.
    /// `"~/.cargo/registry"`; `~/.cargo/bin` is never writable.
    pub writable: Vec<String>,
    /// Directories and files hidden from commands behind empty read-only ones (`~` expands):
    /// the user's secret stores by default. A project's config may only add entries.
    pub hide: Vec<String>,
    /// Environment variables passed to commands besides the allowlist (PATH, HOME, LANG,
    /// LC_*, TERM, TZ, USER, SHELL, tool locations such as CARGO_HOME).
    pub env_keep: Vec<String>,
    /// The test command for `run_tests` and verification (default: detected).
    pub test_command: Option<String>,
    /// `run_tests` timeout.
    pub test_timeout_secs: u64,
    /// Processes and threads one sandboxed command may run at once (0: no limit; at least
    /// 300 otherwise). A fork storm stops here instead of taking the machine's PIDs.
    pub max_processes: u32,
    /// Memory (MiB) each process of a sandboxed command may allocate (0: no limit). Unset:
    /// half of this machine's memory.
    pub max_memory_mb: Option<u64>,
    pub lint: LintConfig,
}

impl Default for ShellConfig {
    fn default() -> Self {
        // The tools' defaults, without building `ShellSettings::default()`: that expands
        // the default hidden stores (the homes canonicalised), which this section keeps as
        // its own `hide` list (issue 33: ~25 `readlink`s before the first request).
        use keel_tools::shell as tools;
        Self {
            enabled: true,
            deny: tools::DEFAULT_DENY.iter().map(|s| s.to_string()).collect(),
            allow: Vec::new(),
            timeout_secs: tools::DEFAULT_TIMEOUT.as_secs(),
            max_timeout_secs: tools::MAX_TIMEOUT.as_secs(),
            sandbox: true,
            network: false,
            writable: keel_tools::shell::DEFAULT_WRITABLE
                .iter()
                .map(|s| s.to_string())
                .collect(),
            hide: keel_tools::sandbox::SECRET_STORES
                .iter()
                .map(|s| s.to_string())
                .collect(),
            env_keep: Vec::new(),
            test_command: None,
            test_timeout_secs: tools::TEST_TIMEOUT.as_secs(),
            max_processes: keel_tools::sandbox::DEFAULT_MAX_PROCESSES,
            max_memory_mb: None,
            lint: LintConfig::default(),
        }
    }
}

/// `[shell.lint]`: the fast check run after each edit, per language. Each list holds candidate
/// commands; the first whose program exists runs (`{files}`: the touched files, `{file}`: once
/// per file, `{dirs}`: their directories). An empty list turns the language off.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LintConfig {
    pub enabled: bool,
    pub timeout_secs: u64,
    pub rust: Vec<String>,
    pub python: Vec<String>,
    pub typescript: Vec<String>,
    pub javascript: Vec<String>,
    pub go: Vec<String>,
}

impl Default for LintConfig {
    fn default() -> Self {
        let tools = keel_tools::shell::LintSettings::default();
        let get = |lang: &str| tools.commands.get(lang).cloned().unwrap_or_default();
        Self {
            enabled: tools.enabled,
            timeout_secs: tools.timeout.as_secs(),
            rust: get("rust"),
            python: get("python"),
            typescript: get("typescript"),
            javascript: get("javascript"),
            go: get("go"),
        }
    }
}

impl ShellConfig {
    /// The settings the shell tools take.
    pub fn tool_settings(&self) -> keel_tools::shell::ShellSettings {
        use std::time::Duration;
        let writable: Vec<std::path::PathBuf> = self
            .writable
            .iter()
            .map(|p| keel_tools::sandbox::expand_home(p))
            .collect();
        // Commands may write there: no program Keel starts unconfined is looked up there from
        // now on — not only once the first command starts (Keel's git runs before it: red-team
        // pass 4, R4-5).
        for w in &writable {
            keel_tools::shell::lookup::distrust(w);
        }
        keel_tools::shell::ShellSettings {
            deny: self.deny.clone(),
            allow: self.allow.clone(),
            default_timeout: Duration::from_secs(self.timeout_secs),
            max_timeout: Duration::from_secs(self.max_timeout_secs),
            sandbox: self.sandbox,
            network: self.network,
            protected: Vec::new(),
            writable,
            hide: keel_tools::sandbox::expand_hidden_all(&self.hide),
            env_keep: self.env_keep.clone(),
            test_command: self.test_command.clone().filter(|c| !c.trim().is_empty()),
            test_timeout: Duration::from_secs(self.test_timeout_secs),
            limits: keel_tools::sandbox::Limits {
                processes: self.max_processes,
                memory_mb: self
                    .max_memory_mb
                    .unwrap_or_else(keel_tools::sandbox::default_memory_mb),
            },
        }
    }

    /// The auto-lint settings.
    pub fn lint_settings(&self) -> keel_tools::shell::LintSettings {
        let l = &self.lint;
        let commands = [
            ("rust", &l.rust),
            ("python", &l.python),
            ("typescript", &l.typescript),
            ("javascript", &l.javascript),
            ("go", &l.go),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
        keel_tools::shell::LintSettings {
            enabled: l.enabled,
            timeout: std::time::Duration::from_secs(l.timeout_secs),
            commands,
        }
    }
}
