//! The command line's argument types that commands share or own without a module of their own
//! (`CommonArgs`, `ProviderArgs`, `RunArgs`, `ChatArgs` …). This file imports nothing from the
//! command modules: they import these, and `main.rs`'s `Command` names both — a module here
//! that imported a command back would make a file-level import cycle (issue 33's shape check).

use std::path::PathBuf;

use clap::{Args, Subcommand};

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
    /// Write the script where the shell loads it from for your user (creating the
    /// directories) instead of printing it: bash, zsh and fish.
    #[arg(long)]
    pub install: bool,
}

#[derive(Debug, Args)]
pub struct UndoArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// The session (id or unique prefix; default: the latest session with snapshots here).
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
    /// Restore snapshot TURN: the workspace as it was at the end of that turn, numbered as
    /// `keel snapshots` and `keel undo --list` show (0: before the session changed anything).
    /// Default: one step back from where the workspace is (repeat to go further back).
    #[arg(long, value_name = "TURN", conflicts_with_all = ["list", "redo"])]
    pub to: Option<u32>,
    /// List the session's snapshots, where the workspace is and what `keel undo` restores.
    #[arg(long, conflicts_with = "redo")]
    pub list: bool,
    /// Bring back what the last undo replaced (while the workspace is still as it left it).
    #[arg(long)]
    pub redo: bool,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct SnapshotsArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// Only this session's snapshots (id or unique prefix).
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Options shared by commands that need configuration.
#[derive(Debug, Clone, Default, Args)]
pub struct CommonArgs {
    /// The repository to work in (default: the current directory).
    #[arg(long, short = 'w', value_name = "DIR", global = true)]
    pub workspace: Option<PathBuf>,
}

/// Which model to use, overriding `[llm]` configuration.
#[derive(Debug, Clone, Default, Args)]
pub struct ProviderArgs {
    /// Model provider: anthropic, openai, deepseek, openrouter, ollama, vllm, llamacpp, a
    /// `[llm.providers]` name, or scripted.
    #[arg(long, value_name = "NAME")]
    pub provider: Option<String>,
    /// Model name for the provider, or an alias from `[llm.models]`.
    #[arg(long, value_name = "NAME")]
    pub model: Option<String>,
    /// API root of the provider: `…/v1` for OpenAI-compatible servers, the host for Anthropic.
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,
    /// Script file for the scripted provider (YAML or JSON).
    #[arg(long, value_name = "FILE")]
    pub script: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    #[command(flatten)]
    pub llm: ProviderArgs,
    /// Print one JSON event per line on stdout instead of human output.
    #[arg(long)]
    pub json: bool,
    /// Model requests before the run stops with `max_steps`.
    #[arg(long, value_name = "N")]
    pub max_iterations: Option<u32>,
    /// Continue a stored session (id or unique prefix); TASK becomes the next message and
    /// answered blockers are delivered with it.
    #[arg(long, value_name = "SESSION")]
    pub resume: Option<String>,
    /// Continue the latest session of this workspace (like --resume with its id). A resumed
    /// session runs with the provider, model, base URL, script and mode it started with;
    /// flags given again override them.
    #[arg(short = 'c', long = "continue", conflicts_with = "resume")]
    pub cont: bool,
    /// Execution mode: `react`, or `plan_exec` (planning → building → verification →
    /// delivery, enforced). Default: `agent.mode`; a resumed session keeps its own.
    #[arg(long, value_enum, value_name = "MODE")]
    pub mode: Option<ModeArg>,
    /// Which tool calls need approval. Nobody can answer a headless run, so a call that
    /// would ask is denied (the model is told why): `never` (nothing asks; the sandbox still
    /// applies), `on-request` (destructive, network and unknown commands are denied),
    /// `untrusted` (everything but reading is denied). Default: `[approval] policy` when your
    /// configuration sets it, else `never`. `[approval]` rules still apply.
    #[arg(long, value_enum, value_name = "POLICY")]
    pub approval: Option<ApprovalArg>,
    /// When another session is running in the workspace, wait for it to finish instead of
    /// refusing (exit 5) at once.
    #[arg(long)]
    pub wait: bool,
    /// The task for the agent (with --resume or --continue: an optional follow-up message).
    /// `-`, or no TASK with a pipe on standard input, reads it from standard input; `@path`
    /// attaches a workspace file.
    #[arg(value_name = "TASK")]
    pub task: Vec<String>,
}

#[derive(Debug, Default, Args)]
pub struct ChatArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    #[command(flatten)]
    pub llm: ProviderArgs,
    /// Continue a stored session (id or unique prefix).
    #[arg(long, value_name = "SESSION")]
    pub resume: Option<String>,
    /// Continue the latest session of this workspace.
    #[arg(short = 'c', long = "continue", conflicts_with = "resume")]
    pub cont: bool,
    /// Execution mode of a new session: `react` or `plan_exec` (default: `agent.mode`).
    #[arg(long, value_enum, value_name = "MODE")]
    pub mode: Option<ModeArg>,
    /// Which tool calls ask you first (default: `[approval] policy`, on-request): `never`,
    /// `on-request` (destructive, network and unknown commands), `untrusted` (all but reading).
    #[arg(long, value_enum, value_name = "POLICY")]
    pub approval: Option<ApprovalArg>,
    /// A first message, sent as soon as the screen opens.
    #[arg(value_name = "PROMPT")]
    pub prompt: Vec<String>,
}

impl ChatArgs {
    /// The first message, if one was given.
    pub fn prompt(&self) -> Option<String> {
        let p = self.prompt.join(" ");
        (!p.trim().is_empty()).then_some(p)
    }
}

/// `--approval` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ApprovalArg {
    Never,
    #[value(name = "on-request")]
    OnRequest,
    Untrusted,
}

impl ApprovalArg {
    /// The engine's policy this flag value names.
    pub fn policy(self) -> keel_config::ApprovalPolicy {
        use keel_config::ApprovalPolicy;
        match self {
            ApprovalArg::Never => ApprovalPolicy::Never,
            ApprovalArg::OnRequest => ApprovalPolicy::OnRequest,
            ApprovalArg::Untrusted => ApprovalPolicy::Untrusted,
        }
    }
}

/// `--mode` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ModeArg {
    React,
    #[value(name = "plan_exec")]
    PlanExec,
}

impl ModeArg {
    /// The engine's execution mode this flag value names.
    pub fn mode(self) -> keel_phase::ExecutionMode {
        match self {
            ModeArg::React => keel_phase::ExecutionMode::React,
            ModeArg::PlanExec => keel_phase::ExecutionMode::PlanExec,
        }
    }
}

#[derive(Debug, Args)]
pub struct BlockerArgs {
    #[command(subcommand)]
    pub command: BlockerCommand,
}

#[derive(Debug, Subcommand)]
pub enum BlockerCommand {
    /// Blockers waiting for an answer (all of them with --all), oldest first.
    List {
        /// Include answered and delivered blockers.
        #[arg(long)]
        all: bool,
        /// Only this session's blockers (id or unique prefix).
        #[arg(long, value_name = "SESSION")]
        session: Option<String>,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Answer a blocker; `keel run --resume SESSION` then continues with the answer.
    Answer {
        /// Blocker id or a unique prefix of it.
        id: String,
        /// The answer.
        #[arg(required = true)]
        answer: Vec<String>,
    },
}

#[derive(Debug, Args)]
pub struct SandboxArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// Print the safety analysis of CMD as one JSON object ({"class", "reasons"}); runs nothing.
    #[arg(long, value_name = "CMD", conflicts_with_all = ["read_only", "command"])]
    pub check: Option<String>,
    /// Run under the read-only sandbox (default: workspace-write).
    #[arg(long)]
    pub read_only: bool,
    /// The program and its arguments, after `--`.
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

#[derive(Debug, Args)]
pub struct DoctorArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    #[command(flatten)]
    pub llm: ProviderArgs,
    /// Send each configured model a one-line test prompt.
    #[arg(long)]
    pub ping: bool,
    /// Print the checks as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Default workspace for sessions that name none (default: the current directory).
    #[command(flatten)]
    pub common: CommonArgs,
    /// Defaults for sessions whose request names no provider, model or script.
    #[command(flatten)]
    pub llm: ProviderArgs,
    /// Address to bind (default 127.0.0.1; any other address requires a token).
    #[arg(long, value_name = "HOST")]
    pub host: Option<String>,
    /// Port (default 7700; 0 picks a free one).
    #[arg(long, value_name = "PORT")]
    pub port: Option<u16>,
    /// Bearer token API clients must send (generated when binding a non-loopback address
    /// without one). Prefer KEEL_SERVER__TOKEN: flags show up in process lists.
    #[arg(long, value_name = "TOKEN")]
    pub token: Option<String>,
    /// Stateless mode: sessions in this PostgreSQL database
    /// (postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE), turns queued for `keel worker`s,
    /// every session's events streamed from the database. Unset: the local SQLite store, turns
    /// run in this process.
    #[arg(
        long,
        value_name = "URL",
        env = "KEEL_DATABASE_URL",
        hide_env_values = true
    )]
    pub database: Option<String>,
}

#[derive(Debug, Args)]
pub struct WorkerArgs {
    /// The PostgreSQL database the servers queue turns in. Default: `[database] url`.
    #[arg(
        long,
        value_name = "URL",
        env = "KEEL_DATABASE_URL",
        hide_env_values = true
    )]
    pub database: Option<String>,
    /// Turns run at once (default: `[worker] concurrency`, 1).
    #[arg(long, value_name = "N")]
    pub concurrency: Option<usize>,
    /// Serve `GET /health` (running turns, completed, failed) on 127.0.0.1:PORT (0 picks a
    /// free port; printed at start-up). Default: `[worker] health_port`, none.
    #[arg(long, value_name = "PORT")]
    pub health_port: Option<u16>,
}

#[derive(Debug, Args)]
pub struct IndexArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// After the refresh, keep the index live: re-index files as they change (Ctrl-C stops).
    #[arg(long)]
    pub watch: bool,
    /// Print what the index holds (files, chunks, symbols, imports, size).
    #[arg(long)]
    pub stats: bool,
}

#[derive(Debug, Args)]
pub struct SearchArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// What to find: words, a description, an identifier or a file name.
    #[arg(required = true, value_name = "QUERY")]
    pub query: Vec<String>,
    /// any, symbol or file.
    #[arg(long, default_value = "any", value_name = "KIND")]
    pub kind: String,
    /// One hit per file, files ranked by all their evidence (same as `--kind file`).
    #[arg(long, conflicts_with = "kind")]
    pub files: bool,
    /// Definitions (functions, methods, classes) ranked with their file's evidence, each with
    /// why (same as `--kind symbol`).
    #[arg(long, conflicts_with_all = ["kind", "files"])]
    pub symbols: bool,
    /// Only paths matching this glob (`*.py`, `src/**/*.rs`).
    #[arg(long, value_name = "GLOB")]
    pub glob: Option<String>,
    /// Most hits to show.
    #[arg(long, default_value_t = 10, value_name = "N")]
    pub limit: usize,
    /// Print the hits as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct MapArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// Token budget of the map (default: `index.codemap_tokens`, or 1000 when that is 0).
    #[arg(long, value_name = "N")]
    pub tokens: Option<usize>,
}

#[derive(Debug, Args)]
pub struct SessionsArgs {
    #[command(subcommand)]
    pub command: Option<SessionsCommand>,
    /// The workspace whose sessions to list (default: the current directory).
    #[arg(long, short = 'w', value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// List the sessions of every workspace, with a WORKSPACE column.
    #[arg(long)]
    pub all: bool,
    /// How many sessions to list.
    #[arg(long, default_value_t = 20)]
    pub limit: usize,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum SessionsCommand {
    /// Print a session's transcript.
    Show {
        /// Session id or a unique prefix of it.
        id: String,
        /// Print the stored events as JSON lines.
        #[arg(long)]
        json: bool,
    },
    /// Delete sessions (events, messages, blockers) and their workspace snapshots.
    Rm {
        /// Session ids or unique prefixes of them.
        #[arg(required = true, value_name = "ID")]
        ids: Vec<String>,
    },
    /// Delete sessions not updated for a while, and their workspace snapshots.
    #[command(
        after_help = "Examples:\n  keel sessions prune --older-than 30d\n  keel sessions prune --older-than 12h --all --dry-run"
    )]
    Prune {
        /// Age: a number and a unit, s, m, h, d or w (`30d`, `12h`).
        #[arg(long, value_name = "AGE", required = true)]
        older_than: String,
        /// Every workspace's sessions, not only this workspace's.
        #[arg(long)]
        all: bool,
        /// The workspace whose sessions to prune (default: the current directory).
        #[arg(long, short = 'w', value_name = "DIR")]
        workspace: Option<PathBuf>,
        /// List what would be deleted, delete nothing.
        #[arg(long)]
        dry_run: bool,
    },
}
