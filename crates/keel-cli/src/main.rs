//! The `keel` command-line program: argument parsing, output rendering and exit codes. All
//! agent behaviour lives in the library crates; this binary wires them together.

// First: the output macros (`say!`, `tell!`) every module below uses.
#[macro_use]
mod out;
mod backend;
mod blocker;
mod chat;
mod check;
mod cli;
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

use clap::{CommandFactory, Parser};

pub use cli::{
    ApprovalArg, BlockerArgs, BlockerCommand, ChatArgs, CommonArgs, CompletionsArgs, DoctorArgs,
    IndexArgs, MapArgs, ModeArg, ProviderArgs, RunArgs, SandboxArgs, SearchArgs, ServeArgs,
    SessionsArgs, SessionsCommand, SnapshotsArgs, UndoArgs, WorkerArgs,
};
use cli::{Cli, Command, suggest_subcommand};

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
            std::process::exit(EXIT_BROKEN_PIPE);
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
