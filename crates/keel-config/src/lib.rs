//! Typed, layered configuration: built-in defaults < user file < project file < `KEEL_*`
//! environment < command-line flags. Unknown keys and bad values are errors that name the key
//! and where it came from. The project file cannot widen security settings ([`project`]).

use std::path::{Path, PathBuf};

use keel_tools::project::{CONFIG_LIMIT, ProjectDir, read_user_file};
use serde::{Deserialize, Serialize};
use toml::{Table, Value};

/// The whole configuration. Every section has defaults, so an empty file is valid.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    pub agent: AgentConfig,
    pub llm: LlmConfig,
    pub store: StoreConfig,
    pub database: DatabaseConfig,
    pub fallback_chain: FallbackChainConfig,
    pub verify: VerifyConfig,
    pub shell: ShellConfig,
    pub plan_exec: PlanExecConfig,
    pub rollback: RollbackConfig,
    pub snapshots: SnapshotsConfig,
    pub server: ServerConfig,
    pub worker: WorkerConfig,
    pub index: IndexConfig,
    pub approval: ApprovalConfig,
    pub agents: AgentsConfig,
    /// `[mcp]`: MCP servers (user-only: a project's file may not define or change them).
    pub mcp: keel_mcp::McpConfig,
    /// Project settings that were not applied (see [`project`]), for the front end to show.
    #[serde(skip)]
    pub warnings: Vec<ConfigWarning>,
    /// Whether a layer (a file, `KEEL_APPROVAL__POLICY`, a flag) set `approval.policy`, rather
    /// than it being the built-in default: a headless run's own default (`never`) yields to it.
    #[serde(skip)]
    pub approval_policy_set: bool,
    /// Dotted keys whose value came from the project's `.keel/config.toml` (no later layer
    /// set them): what the repository chose, such as gates asked about before they run.
    #[serde(skip)]
    pub project_keys: std::collections::BTreeSet<String>,
}

mod agents;
mod approval;
pub mod project;
mod sections;

pub use agents::{AgentRoleConfig, AgentsConfig};
pub use approval::{ApprovalConfig, ApprovalPolicy};
pub use project::{
    ConfigWarning, LLM_SUBJECT, PROJECT_RULES, ProjectRule, Suggestion, WarningKind, llm_suggestion,
};
pub use sections::*;

/// A configuration problem, naming the key and its source.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("configuration error in {source_name}: {message}")]
pub struct ConfigError {
    /// Where the bad value came from (a file path, `environment`, `command line`).
    pub source_name: String,
    pub message: String,
}

/// One configuration layer before merging.
#[derive(Debug, Clone)]
pub struct Layer {
    /// Where it came from, for error messages.
    pub source: String,
    pub table: Table,
    /// Whose it is: a project's file may only tighten security settings.
    pub scope: LayerScope,
}

/// Who wrote a configuration layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LayerScope {
    /// The user: their config file, `KEEL_*` variables, flags.
    #[default]
    User,
    /// The workspace's `.keel/config.toml`, writable by the project and the agent.
    Project,
}

impl Layer {
    /// Reads a TOML file; a missing file is an empty layer.
    pub fn from_file(path: &Path) -> Result<Option<Self>, ConfigError> {
        // The user's file: a symlink is followed, but only a regular file is read, bounded.
        let text = match read_user_file(path, CONFIG_LIMIT) {
            Ok(Some(t)) => t,
            Ok(None) => return Ok(None),
            Err(e) => {
                return Err(ConfigError {
                    source_name: path.display().to_string(),
                    message: format!("not read: it {}", e.problem),
                });
            }
        };
        let table: Table = toml::from_str(&text).map_err(|e| ConfigError {
            source_name: path.display().to_string(),
            message: e.to_string().trim().to_string(),
        })?;
        Ok(Some(Self {
            source: path.display().to_string(),
            table,
            scope: LayerScope::User,
        }))
    }

    /// The workspace's `.keel/config.toml` as a [`LayerScope::Project`] layer; a missing file
    /// is no layer. Read as a project file: beneath the workspace, regular, at most
    /// [`CONFIG_LIMIT`] — a symlink out, a FIFO or a device is an error saying so.
    pub fn from_project(workspace: &Path) -> Result<Option<Self>, ConfigError> {
        const FILE: &str = ".keel/config.toml";
        let source = workspace.join(FILE).display().to_string();
        let fail = |message: String| ConfigError {
            source_name: source.clone(),
            message,
        };
        let project = match ProjectDir::open(workspace) {
            Ok(p) => p,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(fail(format!("cannot open the workspace to read it: {e}"))),
        };
        let text = match project.read(FILE, CONFIG_LIMIT) {
            Ok(Some(text)) => text,
            Ok(None) => return Ok(None),
            Err(e) => return Err(fail(format!("not read: it {}", e.problem))),
        };
        let table: Table =
            toml::from_str(&text).map_err(|e| fail(e.to_string().trim().to_string()))?;
        Ok(Some(Self {
            source,
            table,
            scope: LayerScope::Project,
        }))
    }

    /// The `KEEL_<SECTION>__<KEY>=value` variables, e.g. `KEEL_AGENT__MAX_ITERATIONS=10`.
    /// Values are read as TOML scalars when they parse (numbers, booleans), else as strings.
    pub fn from_env(vars: impl IntoIterator<Item = (String, String)>) -> Self {
        let mut table = Table::new();
        for (name, raw) in vars {
            let Some(rest) = name.strip_prefix("KEEL_") else {
                continue;
            };
            if !rest.contains("__") {
                continue; // KEEL_HOME and friends are not config keys
            }
            let path: Vec<String> = rest.split("__").map(str::to_ascii_lowercase).collect();
            set_path(&mut table, &path, parse_scalar(&raw));
        }
        Self {
            source: "environment (KEEL_* variables)".into(),
            table,
            scope: LayerScope::User,
        }
    }

    /// Command-line overrides as `section.key = value` pairs.
    pub fn from_overrides(pairs: &[(&str, Value)]) -> Self {
        let mut table = Table::new();
        for (key, value) in pairs {
            let path: Vec<String> = key.split('.').map(str::to_string).collect();
            set_path(&mut table, &path, value.clone());
        }
        Self {
            source: "command line".into(),
            table,
            scope: LayerScope::User,
        }
    }
}

fn parse_scalar(raw: &str) -> Value {
    match toml::from_str::<Table>(&format!("v = {raw}")) {
        Ok(mut t) => match t.remove("v") {
            Some(
                v @ (Value::Integer(_) | Value::Float(_) | Value::Boolean(_) | Value::Array(_)),
            ) => v,
            _ => Value::String(raw.to_string()),
        },
        Err(_) => Value::String(raw.to_string()),
    }
}

fn set_path(table: &mut Table, path: &[String], value: Value) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut cur = table;
    for p in parents {
        let entry = cur
            .entry(p.clone())
            .or_insert_with(|| Value::Table(Table::new()));
        if !entry.is_table() {
            *entry = Value::Table(Table::new());
        }
        let Value::Table(t) = entry else { return };
        cur = t;
    }
    cur.insert(last.clone(), value);
}

/// The configuration `merged` gives with defaults filled in, as a table (what a project layer
/// is compared against). Falls back to `merged` itself if it does not deserialize yet.
fn effective(merged: &Table) -> Table {
    Value::Table(merged.clone())
        .try_into::<Config>()
        .ok()
        .and_then(|c| Table::try_from(&c).ok())
        .unwrap_or_else(|| merged.clone())
}

/// Dotted paths of every non-table value in `table` (arrays count as values).
fn leaf_keys(prefix: &str, table: &Table, out: &mut std::collections::BTreeSet<String>) {
    for (k, v) in table {
        let key = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        match v {
            Value::Table(t) => leaf_keys(&key, t, out),
            _ => {
                out.insert(key);
            }
        }
    }
}

/// Deep-merges `over` into `base`: tables merge key by key, anything else replaces.
fn merge(base: &mut Table, over: Table) {
    for (k, v) in over {
        match (base.get_mut(&k), v) {
            (Some(Value::Table(b)), Value::Table(o)) => merge(b, o),
            (_, v) => {
                base.insert(k, v);
            }
        }
    }
}

impl Config {
    /// The execution mode `agent.mode` names (validated on load; `react` if unrecognised).
    pub fn execution_mode(&self) -> keel_phase::ExecutionMode {
        keel_phase::ExecutionMode::parse(&self.agent.mode).unwrap_or_default()
    }

    /// Merges layers (lowest precedence first) over the defaults. Each layer is validated on
    /// its own first, so an error names the file or variable that holds the bad key. A
    /// [`LayerScope::Project`] layer's security settings apply only where they tighten what
    /// the layers below it give ([`project::restrict`]); what it could not change is listed
    /// in [`Config::warnings`].
    pub fn from_layers(layers: Vec<Layer>) -> Result<Self, ConfigError> {
        Self::from_layers_accepting(layers, &|_, _| false)
    }

    /// [`Config::from_layers`] where `accepted(subject, sha256)` says which of a project's
    /// suggestions (its `[llm]` section) the user accepted for this workspace.
    pub fn from_layers_accepting(
        layers: Vec<Layer>,
        accepted: project::Accepted<'_>,
    ) -> Result<Self, ConfigError> {
        let mut merged = Table::new();
        let mut warnings = Vec::new();
        let mut project_keys = std::collections::BTreeSet::new();
        for layer in layers {
            Value::Table(layer.table.clone())
                .try_into::<Config>()
                .map_err(|e| ConfigError {
                    source_name: layer.source.clone(),
                    message: e.to_string().trim().to_string(),
                })?;
            let mut table = layer.table;
            let mut keys = std::collections::BTreeSet::new();
            leaf_keys("", &table, &mut keys);
            if layer.scope == LayerScope::Project {
                let lower = effective(&merged);
                warnings.extend(project::restrict(
                    &lower,
                    &mut table,
                    &layer.source,
                    accepted,
                ));
                keys.clear();
                leaf_keys("", &table, &mut keys);
                project_keys.extend(keys);
            } else {
                // A later layer's value replaces the project's.
                project_keys.retain(|p: &String| {
                    !keys.iter().any(|k| {
                        k == p || p.starts_with(&format!("{k}.")) || k.starts_with(&format!("{p}."))
                    })
                });
            }
            merge(&mut merged, table);
        }
        let approval_policy_set = merged
            .get("approval")
            .and_then(Value::as_table)
            .is_some_and(|t| t.contains_key("policy"));
        let mut config: Config =
            Value::Table(merged)
                .try_into()
                .map_err(|e: toml::de::Error| ConfigError {
                    source_name: "the merged configuration".into(),
                    message: e.to_string().trim().to_string(),
                })?;
        config.validate()?;
        config.warnings = warnings;
        config.approval_policy_set = approval_policy_set;
        config.project_keys = project_keys;
        Ok(config)
    }

    /// True when the project's `.keel/config.toml` chose `key`'s value (a dotted key such as
    /// `verify.commands`).
    pub fn set_by_project(&self, key: &str) -> bool {
        self.project_keys.contains(key)
    }

    /// Loads the standard layers: the user file, the project's `.keel/config.toml`, the
    /// environment, then `overrides` (command-line flags).
    pub fn load(
        user_file: Option<&Path>,
        workspace: &Path,
        env: impl IntoIterator<Item = (String, String)>,
        overrides: Layer,
    ) -> Result<Self, ConfigError> {
        let env: Vec<(String, String)> = env.into_iter().collect();
        let lookup = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        // What the user accepted of the project's suggestions, by content (`keel trust`).
        let trust = keel_tools::trust::TrustStore::load(&data_dir(&lookup));
        let accepted = |subject: &str, sha256: &str| trust.accepts(workspace, subject, sha256);
        let mut layers = Vec::new();
        if let Some(path) = user_file
            && let Some(layer) = Layer::from_file(path)?
        {
            layers.push(layer);
        }
        if let Some(layer) = Layer::from_project(workspace)? {
            layers.push(layer);
        }
        layers.push(Layer::from_env(env.clone()));
        layers.push(overrides);
        Self::from_layers_accepting(layers, &accepted)
    }

    fn validate(&self) -> Result<(), ConfigError> {
        let bad = |message: String| ConfigError {
            source_name: "the merged configuration".into(),
            message,
        };
        if self.agent.max_iterations == 0 {
            return Err(bad("agent.max_iterations must be at least 1".into()));
        }
        if self.agent.max_output_chars < 200 {
            return Err(bad(format!(
                "agent.max_output_chars = {} is too small; use 200 or more",
                self.agent.max_output_chars
            )));
        }
        let t = self.agent.compact_threshold;
        if !(t > 0.1 && t <= 1.0) {
            return Err(bad(format!(
                "agent.compact_threshold = {t} is out of range; use a fraction above 0.1 and at most 1.0 (default 0.85)"
            )));
        }
        if self.agent.context_window.is_some_and(|w| w < 1_000) {
            return Err(bad(
                "agent.context_window must be at least 1000 tokens (or unset to use the model's)"
                    .into(),
            ));
        }
        if self.agent.self_correction_cap > 20 {
            return Err(bad(format!(
                "agent.self_correction_cap = {} is too large; use 0 to 20",
                self.agent.self_correction_cap
            )));
        }
        if self.fallback_chain.recovery.max_retries > 5 {
            return Err(bad(format!(
                "fallback_chain.recovery.max_retries = {} is too large; use 0 to 5",
                self.fallback_chain.recovery.max_retries
            )));
        }
        let agents = &self.agents;
        if agents.max_concurrent == 0 || agents.max_steps == 0 || agents.timeout_secs == 0 {
            return Err(bad(
                "agents.max_concurrent, agents.max_steps and agents.timeout_secs must be at least 1"
                    .into(),
            ));
        }
        if agents.max_depth > 4 {
            return Err(bad(format!(
                "agents.max_depth = {} is too deep; use 0 (no subagents) to 4",
                agents.max_depth
            )));
        }
        if self.verify.timeout_secs == 0 {
            return Err(bad("verify.timeout_secs must be at least 1".into()));
        }
        if let Some(cmds) = &self.verify.commands
            && cmds.iter().any(|c| c.trim().is_empty())
        {
            return Err(bad(
                "verify.commands contains an empty command; remove it".into()
            ));
        }
        let shell = &self.shell;
        if shell.max_timeout_secs == 0 || shell.max_timeout_secs > 3_600 {
            return Err(bad(format!(
                "shell.max_timeout_secs = {} must be between 1 and 3600",
                shell.max_timeout_secs
            )));
        }
        let min = keel_tools::sandbox::MIN_MAX_PROCESSES;
        if shell.max_processes != 0 && shell.max_processes < min {
            return Err(bad(format!(
                "shell.max_processes = {} must be 0 (no limit) or at least {min} (the smallest \
                 process limit the kernel takes)",
                shell.max_processes
            )));
        }
        if shell.timeout_secs == 0 || shell.timeout_secs > shell.max_timeout_secs {
            return Err(bad(format!(
                "shell.timeout_secs = {} must be between 1 and shell.max_timeout_secs ({})",
                shell.timeout_secs, shell.max_timeout_secs
            )));
        }
        if let Some(p) = shell
            .hide
            .iter()
            .find(|p| !(p.starts_with('/') || p.starts_with("~/")))
        {
            return Err(bad(format!(
                "shell.hide entry \"{p}\" must be an absolute path or start with ~/ (e.g. \"~/.ssh\")"
            )));
        }
        if shell.test_timeout_secs == 0 || shell.lint.timeout_secs == 0 {
            return Err(bad(
                "shell.test_timeout_secs and shell.lint.timeout_secs must be at least 1".into(),
            ));
        }
        if let Err(e) = keel_tools::build_dirs::BuildDirs::new(&self.snapshots.build_dirs) {
            return Err(bad(format!("snapshots.build_dirs: {e}")));
        }
        self.llm.validate().map_err(bad)?;
        let Some(mode) = keel_phase::ExecutionMode::parse(&self.agent.mode) else {
            return Err(bad(format!(
                "agent.mode = \"{}\" is not a mode; accepted: react, plan_exec",
                self.agent.mode
            )));
        };
        if mode == keel_phase::ExecutionMode::PlanExec && !self.plan_exec.enabled {
            return Err(bad(
                "agent.mode = \"plan_exec\" but plan_exec.enabled = false; enable it or use mode react"
                    .into(),
            ));
        }
        if self.rollback.timeout_secs == 0 {
            return Err(bad("rollback.timeout_secs must be at least 1".into()));
        }
        keel_phase::PhasePolicy::from_config(&self.plan_exec).map_err(bad)?;
        if self.index.max_file_kb == 0 {
            return Err(bad("index.max_file_kb must be at least 1".into()));
        }
        if self.index.codemap_tokens > 3_000 {
            return Err(bad(format!(
                "index.codemap_tokens = {} is too large: the first request must stay small; use 3000 or less (0 turns the codemap off)",
                self.index.codemap_tokens
            )));
        }
        let bad_patterns = keel_index::walk::Walker::pattern_errors(&self.index.settings());
        if let Some(first) = bad_patterns.first() {
            return Err(bad(format!("index.ignore has an invalid pattern {first}")));
        }
        Ok(())
    }
}

/// The user's config file: `$KEEL_CONFIG`, else `$XDG_CONFIG_HOME/keel/config.toml`, else
/// `~/.config/keel/config.toml`.
pub fn user_config_path(env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    if let Some(p) = env("KEEL_CONFIG") {
        return Some(PathBuf::from(p));
    }
    if let Some(x) = env("XDG_CONFIG_HOME").filter(|s| !s.is_empty()) {
        return Some(PathBuf::from(x).join("keel").join("config.toml"));
    }
    env("HOME").map(|h| {
        PathBuf::from(h)
            .join(".config")
            .join("keel")
            .join("config.toml")
    })
}

/// The user's Keel data directory when the environment names one (`KEEL_HOME`,
/// `XDG_DATA_HOME` or `HOME`); `None` rather than [`data_dir`]'s fallback, for what is only
/// kept where the user set things up (learned server facts).
pub fn user_data_dir(env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    ["KEEL_HOME", "XDG_DATA_HOME", "HOME"]
        .iter()
        .any(|k| env(k).is_some_and(|v| !v.is_empty()))
        .then(|| data_dir(env))
}

/// Keel's data directory: `$KEEL_HOME`, else `$XDG_DATA_HOME/keel`, else
/// `~/.local/share/keel` — with `HOME` unset, the account's home from the password database,
/// else a private `keel-<uid>` in the temporary directory ([`private_temp_dir`]). Never the
/// current directory (red-team pass 8,
/// R8-23: with `HOME` unset it was `./.keel` in the workspace, where the model read the live
/// server token and a repository could ship the session database).
pub fn data_dir(env: &dyn Fn(&str) -> Option<String>) -> PathBuf {
    if let Some(p) = env("KEEL_HOME").filter(|s| !s.is_empty()) {
        return PathBuf::from(p);
    }
    if let Some(x) = env("XDG_DATA_HOME").filter(|s| !s.is_empty()) {
        return PathBuf::from(x).join("keel");
    }
    let home = env("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .or_else(keel_tools::stores::passwd_home)
        .filter(|h| h.is_absolute() && h != std::path::Path::new("/"));
    match home {
        Some(h) => h.join(".local").join("share").join("keel"),
        None => private_temp_dir(),
    }
}

/// `keel-<uid>` in the temporary directory when it is a directory of this user's that no one
/// else may enter (made so when missing), else a fresh private one for this process (red-team
/// pass 8, R8-25: another local user planted `/tmp/keel-<uid>` as a link to a 0777 directory
/// and Keel created its database there). Once per process.
fn private_temp_dir() -> PathBuf {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let uid = std::fs::metadata("/proc/self").map_or(u32::MAX, |m| m.uid());
        let tmp = std::env::temp_dir();
        let private = |p: &std::path::Path| {
            std::fs::symlink_metadata(p)
                .is_ok_and(|m| m.is_dir() && m.uid() == uid && m.mode() & 0o077 == 0)
        };
        let shared = tmp.join(format!("keel-{uid}"));
        let _ = std::fs::DirBuilder::new().mode(0o700).create(&shared);
        if private(&shared) {
            return shared;
        }
        for n in 0..64u32 {
            let fresh = tmp.join(format!("keel-{uid}-{}-{n}", std::process::id()));
            if std::fs::DirBuilder::new()
                .mode(0o700)
                .create(&fresh)
                .is_ok()
                && private(&fresh)
            {
                return fresh;
            }
        }
        // Nowhere private: a path that cannot be created, so storing fails with its name.
        PathBuf::from("/proc/keel-no-private-data-dir")
    })
    .clone()
}

#[cfg(test)]
mod tests;
