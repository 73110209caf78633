//! The `keel` command-line program: argument parsing, output rendering and exit codes. All
//! agent behaviour lives in the library crates; this binary wires them together.

// First: the output macros (`say!`, `tell!`) every module below uses.
#[macro_use]
mod out;
mod args;
mod backend;
mod blocker;
mod chat;
mod check;
mod completions;
mod context;
mod db;
mod doctor;
mod editor;
mod eval;
mod eval_report;
mod flow;
mod index;
mod init;
mod input;
mod launch;
mod mcp;
mod memory;
mod prd;
mod render;
mod run;
mod sandbox;
mod serve;
mod sessions;
mod sessions_rm;
mod setup;
mod skills;
mod task;
mod term_text;
mod trust;
mod undo;
mod work;
mod worker;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

use args::{
    BlockerArgs, ChatArgs, CommonArgs, CompletionsArgs, DoctorArgs, IndexArgs, MapArgs, RunArgs,
    SandboxArgs, SearchArgs, ServeArgs, SessionsArgs, SnapshotsArgs, UndoArgs, WorkerArgs,
};

/// Examples shown under `--help` (`after_help`).
mod help {
    pub const RUN: &str = "\
Examples:
  keel run \"fix the failing test in parser.rs\"
  echo \"add a --verbose flag\" | keel run -             # the task from standard input
  keel run \"explain @src/lib.rs and add doc comments\"  # @path attaches a workspace file
  keel run --json --max-iterations 50 -w ../other \"…\"  # JSON events, a cap, another repository
  keel run --mode plan_exec \"…\"                        # plan → build → verify → deliver
  keel run --resume 20261121-2158 \"use Postgres 16\"    # continue a session
  keel run --provider ollama --model qwen3-coder \"…\"   # a local model

Exit codes: 0 completed, 1 failed, 2 usage or configuration error, 3 blocked, 130 cancelled.";

    pub const SERVE: &str = "\
Examples:
  keel serve                                   # http://127.0.0.1:7700/ for this directory
  keel serve -w ~/src/app --port 8080          # another workspace and port
  keel serve --provider scripted --script examples/demo.yaml
  KEEL_SERVER__TOKEN=… keel serve --host 0.0.0.0   # other machines need the bearer token
  keel serve --database postgres://keel@127.0.0.1/keel --port 7701   # stateless: turns go to workers";

    pub const WORKER: &str = "\
Examples:
  keel worker --database postgres://keel@127.0.0.1/keel                  # one turn at a time
  keel worker --database postgres://keel@127.0.0.1/keel --concurrency 4 --health-port 7801";

    pub const UNDO: &str = "\
Examples:
  keel snapshots                               # what can be restored, per session and turn
  keel undo                                    # undo the latest session's last writing turn
  keel undo --session 20261121-2158 --to 0     # the workspace before that session
  keel undo --to 2 --json                      # the end of turn 2, report as JSON";

    pub const COMPLETIONS: &str = "\
Examples:
  keel completions bash --install      # writes ~/.local/share/bash-completion/completions/keel
  keel completions fish --install      # writes ~/.config/fish/completions/keel.fish
  keel completions zsh --install       # writes ~/.zfunc/_keel (add `fpath+=~/.zfunc` before compinit)
  keel completions powershell >> $PROFILE
By hand (a shell redirect does not create directories):
  mkdir -p ~/.local/share/bash-completion/completions && keel completions bash > ~/.local/share/bash-completion/completions/keel";

    pub const EVAL: &str = "\
Examples:
  keel eval examples/eval/suite.toml                   # each task's script drives the scripted model
  keel eval suite.toml --provider openai --model gpt-4.1 -j 4
  keel eval runs                                       # stored runs, newest first
  keel eval show 3                                     # one run's report, failures first
  keel eval compare 3 4                                # side by side, exact McNemar test
  keel eval promote 4 --task add-test --as rule        # a draft; --accept stores it

Exit codes: 0 every task passed, 1 some task failed, 2 usage or configuration error.";
}

/// Exit codes (documented in the README): 0 completed, 1 failed, 2 usage or configuration
/// error, 3 blocked, 4 incomplete (a refused write never redone), 5 busy (another session runs
/// in the workspace), 130 cancelled.
pub mod exit {
    pub const COMPLETED: u8 = 0;
    pub const FAILED: u8 = 1;
    pub const USAGE: u8 = 2;
    pub const BLOCKED: u8 = 3;
    /// The model said it was done, but a write it made was refused and never redone (a
    /// read-only workspace, a protected path, a denied approval): the work is not in the
    /// workspace, whatever the answer says.
    pub const INCOMPLETE: u8 = 4;
    /// Another session is running in the workspace (`--wait` waits for it).
    pub const BUSY: u8 = 5;
    pub const CANCELLED: u8 = 130;
}

#[derive(Debug, Parser)]
#[command(
    name = "keel",
    version,
    about = "A coding-agent harness: the harness handles memory, search, routing, state and guardrails, so the model only has to think.",
    propagate_version = true,
    args_conflicts_with_subcommands = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// With no command on a terminal, `keel` opens `keel chat`: continue the latest session
    /// of this workspace.
    #[arg(short = 'c', long = "continue", conflicts_with = "resume")]
    cont: bool,
    /// With no command: open `keel chat` on this stored session (id or unique prefix).
    #[arg(long, value_name = "SESSION")]
    resume: Option<String>,
    /// With no command: the workspace `keel chat` works in.
    #[arg(long, short = 'w', value_name = "DIR")]
    workspace: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Work with the agent interactively in the terminal (plain `keel` on a terminal opens it).
    Chat(ChatArgs),
    /// Run a task in a workspace until the agent finishes.
    #[command(after_help = help::RUN)]
    Run(RunArgs),
    /// List this workspace's sessions (--all: every workspace's), show one, delete or prune.
    Sessions(SessionsArgs),
    /// List the questions blocked runs are waiting on, or answer one.
    Blocker(BlockerArgs),
    /// Check how a shell command is judged, or run one under the sandbox.
    Sandbox(SandboxArgs),
    /// Check the setup: configured providers and models, which API keys are present (never
    /// their values); with --ping, send each model a one-line test prompt.
    Doctor(DoctorArgs),
    /// Restore the workspace to a turn of a session (its automatic snapshots).
    #[command(after_help = help::UNDO)]
    Undo(UndoArgs),
    /// List the workspace snapshots sessions took (what `keel undo` can restore).
    Snapshots(SnapshotsArgs),
    /// Serve the HTTP API (REST, WebSocket, SSE) and the web UI.
    #[command(after_help = help::SERVE)]
    Serve(ServeArgs),
    /// Run queued turns from the PostgreSQL job queue that `keel serve --database` fills.
    #[command(after_help = help::WORKER)]
    Worker(WorkerArgs),
    /// Build or refresh the codebase index (.keel/index.db); --watch keeps it live.
    Index(IndexArgs),
    /// Search the codebase index (built first if needed).
    Search(SearchArgs),
    /// Print the codemap: directories, key files by import centrality, their definitions.
    Map(MapArgs),
    /// Print a shell completion script (bash, zsh, fish, powershell, elvish).
    #[command(after_help = help::COMPLETIONS)]
    Completions(CompletionsArgs),
    /// The user memory and promoted lessons: add, list, search, edit, rm, clear, promote,
    /// doctor.
    Memory(memory::MemoryArgs),
    /// Typed workflows: run, validate, status, runs, resume, replay and list flows.
    Flow(flow::FlowArgs),
    /// Skills found here: list, show one, create one.
    Skills(skills::SkillsArgs),
    /// MCP servers: list them, approve or add one, remove one, test one.
    Mcp(mcp::McpArgs),
    /// What this workspace's .keel/config.toml suggests that only you decide (its [llm]
    /// settings): show it, accept exactly that content, or withdraw.
    Trust(trust::TrustArgs),
    /// Every layer of what the model is told here: source, size, head or tail, how to clear.
    Context(context::ContextArgs),
    /// Prepare this directory for Keel: .keel/config.toml and the detected tech stack.
    Init(init::InitArgs),
    /// Product requirements documents: add, show, list, edit (every version is kept).
    Prd(prd::PrdArgs),
    /// Tasks from a PRD (generated by the model) or by hand, with dependencies and proofs.
    Task(task::TaskArgs),
    /// Run tasks: one (`start`), all ready ones in order (`batch`), or see where they stand.
    Work(work::WorkArgs),
    /// The store's database: `keel db migrate` applies its schema migrations (PostgreSQL with
    /// --database or KEEL_DATABASE_URL, else the local SQLite session database).
    Db(db::DbArgs),
    /// Evaluate: run a suite of tasks (each judged by a check command) and report; list,
    /// show and compare runs; promote a passing task's lesson (rule, skill or memory).
    #[command(after_help = help::EVAL)]
    Eval(eval::EvalArgs),
}

/// Exit status for output cut short by a closed pipe (`keel sessions | head`): 128 + SIGPIPE,
/// what a shell reports for any Unix tool that stops there.
const EXIT_BROKEN_PIPE: i32 = 141;

/// `say_part!` panics when stdout's reader has gone away. That is not a bug in Keel, and a
/// panic report would be noise: end quietly the way other Unix tools do. Every other panic
/// keeps the default report.
fn quiet_on_broken_pipe() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        if message.contains("failed printing to stdout") && message.contains("Broken pipe") {
            keel_tools::shell::pending::exit_after_checks(EXIT_BROKEN_PIPE);
        }
        default(info);
    }));
}

/// Whether an error is stdout's reader going away (see [`quiet_on_broken_pipe`]).
fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// Plain `keel`: the chat on a terminal; elsewhere the usage, as before there was a chat.
fn no_command(cont: bool, resume: Option<String>, workspace: Option<PathBuf>) -> ExitCode {
    use std::io::IsTerminal;
    if std::io::stdin().is_terminal() && crate::out::stdout_is_terminal() {
        let args = ChatArgs {
            common: CommonArgs { workspace },
            cont,
            resume,
            ..ChatArgs::default()
        };
        return finish(chat::execute(args));
    }
    let mut cmd = <Cli as clap::CommandFactory>::command();
    tell!("{}", cmd.render_usage());
    tell!(
        "keel needs a command when it is not on a terminal (keel chat opens the interactive UI there); keel --help lists them"
    );
    ExitCode::from(exit::USAGE)
}

fn main() -> ExitCode {
    // The sandbox helper (see keel_tools::sandbox): Keel re-executes itself as
    // `keel __keel-sandbox-exec -- CMD…` to confine a command as a normal user.
    if std::env::args_os()
        .nth(1)
        .is_some_and(|a| a == keel_tools::sandbox::HELPER_ARG)
    {
        return keel_tools::sandbox::helper_main();
    }
    keel_tools::sandbox::use_current_exe_as_helper();
    quiet_on_broken_pipe();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => suggest_subcommand(e).exit(),
    };
    let Some(command) = cli.command else {
        return no_command(cli.cont, cli.resume, cli.workspace);
    };
    let result = match command {
        Command::Chat(args) => chat::execute(args),
        Command::Run(args) => run::execute(args),
        Command::Sessions(args) => sessions::execute(args),
        Command::Memory(args) => memory::execute(args),
        Command::Flow(args) => flow::execute(args),
        Command::Skills(args) => skills::execute(args),
        Command::Mcp(args) => mcp::execute(args),
        Command::Trust(args) => trust::execute(args),
        Command::Context(args) => context::execute(args),
        Command::Blocker(args) => blocker::execute(args),
        Command::Sandbox(args) => sandbox::execute(args),
        Command::Doctor(args) => doctor::execute(args),
        Command::Undo(args) => undo::undo(args),
        Command::Snapshots(args) => undo::snapshots(args),
        Command::Serve(args) => serve::execute(args),
        Command::Worker(args) => worker::execute(args),
        Command::Index(args) => index::execute_index(args),
        Command::Search(args) => index::execute_search(args),
        Command::Map(args) => index::execute_map(args),
        Command::Completions(args) => completions::execute(args, Cli::command()),
        Command::Init(args) => init::execute(args),
        Command::Prd(args) => prd::execute(args),
        Command::Task(args) => task::execute(args),
        Command::Work(args) => work::execute(args),
        Command::Db(args) => db::execute(args),
        Command::Eval(args) => eval::execute(args),
    };
    finish(result)
}

/// clap suggests a subcommand only above a similarity that short swaps miss (`rnu`): when it
/// has none, suggest the subcommand one edit away (a swap, a missing, extra or wrong letter).
fn suggest_subcommand(mut e: clap::Error) -> clap::Error {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if e.kind() != ErrorKind::InvalidSubcommand || e.get(ContextKind::SuggestedSubcommand).is_some()
    {
        return e;
    }
    let Some(ContextValue::String(typed)) = e.get(ContextKind::InvalidSubcommand) else {
        return e;
    };
    let typed = typed.clone();
    let command = Cli::command();
    let near: Vec<String> = command
        .get_subcommands()
        .map(|c| c.get_name().to_string())
        .filter(|name| edit_distance(&typed, name) == 1)
        .collect();
    if !near.is_empty() {
        e.insert(
            ContextKind::SuggestedSubcommand,
            ContextValue::Strings(near),
        );
    }
    e
}

/// Optimal string alignment distance: insertions, deletions, substitutions and swaps of two
/// neighbouring letters each count one.
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut v = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                v = v.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = v;
        }
    }
    d[a.len()][b.len()]
}

/// The exit code of a command's result, the error printed.
fn finish(result: anyhow::Result<u8>) -> ExitCode {
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) if is_broken_pipe(&e) => ExitCode::from(EXIT_BROKEN_PIPE as u8),
        Err(e) => {
            let code = if e.downcast_ref::<setup::UsageError>().is_some() {
                exit::USAGE
            } else {
                exit::FAILED
            };
            tell!("keel: {e:#}");
            ExitCode::from(code)
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// clap checks a subcommand's definition only when it is used; this checks all of them
    /// (a flag clashing with the global `--version`, duplicate short options …).
    #[test]
    fn every_command_is_well_formed() {
        super::Cli::command().debug_assert();
    }

    #[test]
    fn a_swapped_or_missing_letter_gets_a_suggestion() {
        assert_eq!(super::edit_distance("rnu", "run"), 1);
        assert_eq!(super::edit_distance("rn", "run"), 1);
        assert_eq!(super::edit_distance("run", "run"), 0);
        assert_eq!(super::edit_distance("xyz", "run"), 3);
        let e = <super::Cli as clap::Parser>::try_parse_from(["keel", "rnu"]).unwrap_err();
        let text = super::suggest_subcommand(e).to_string();
        assert!(
            text.contains("a similar subcommand exists: 'run'"),
            "{text}"
        );
    }
}
