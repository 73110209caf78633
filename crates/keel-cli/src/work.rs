//! `keel work start|batch|status`: running tasks in sessions of the session runtime, one at a
//! time in place (see `keel_work::runner` for why), with a proof per task.

use std::io::Write;
use std::sync::Arc;

use clap::{Args, Subcommand};
use keel_engine::EventSink;
use keel_store::work::TaskStatus;
use keel_work::{TaskRun, TaskRunner};

use crate::args::{CommonArgs, ModeArg, ProviderArgs};
use crate::render::{Human, JsonLines, stdout_color};
use crate::{exit, launch, prd, setup, task};

#[derive(Debug, Args)]
pub struct WorkArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    #[command(subcommand)]
    pub command: WorkCommand,
}

#[derive(Debug, Subcommand)]
pub enum WorkCommand {
    /// Show the context the agent would get for TASK (the intent preview); with --execute,
    /// run it in a new session (or resume its interrupted one).
    Start {
        task: u32,
        #[arg(long)]
        execute: bool,
        #[arg(long, value_enum, value_name = "MODE")]
        mode: Option<ModeArg>,
        #[command(flatten)]
        llm: ProviderArgs,
        /// Print the events as JSON lines, then the task's result as one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Run every ready task in dependency order, one at a time in this workspace; dependents
    /// of a failed or blocked task wait. After a crash, re-running continues where it stopped.
    Batch {
        /// Tasks at a time. Only 1 is supported: tasks run in place, in order (see the docs).
        #[arg(long, default_value_t = 1, value_name = "N")]
        parallel: usize,
        /// Stop once this task (and what it depends on) is done.
        #[arg(long, value_name = "TASK")]
        until: Option<u32>,
        #[arg(long, value_enum, value_name = "MODE")]
        mode: Option<ModeArg>,
        #[command(flatten)]
        llm: ProviderArgs,
        #[arg(long)]
        json: bool,
    },
    /// Where every task stands, and what runs next.
    Status {
        #[arg(long)]
        json: bool,
    },
}

fn runner(
    common: &CommonArgs,
    llm: &ProviderArgs,
    mode: Option<ModeArg>,
    json: bool,
) -> anyhow::Result<TaskRunner> {
    let (root, _, store) = prd::open(common)?;
    let overrides = launch::overrides(llm, mode, None);
    let builder = setup::session_builder(store.clone());
    let sink: Arc<dyn EventSink> = if json {
        Arc::new(JsonLines)
    } else {
        Arc::new(Human::new(stdout_color(), true))
    };
    // Engines are built per task: an interrupted task's session resumes with the provider it
    // was started with, so no flags need repeating.
    TaskRunner::with_builder(
        builder,
        &root,
        overrides,
        keel_store::work::WorkStores::of(store),
        vec![sink],
    )
    .map_err(setup::engine_usage_error)
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?)
}

fn code(status: TaskStatus) -> u8 {
    match status {
        TaskStatus::Done => exit::COMPLETED,
        TaskStatus::Blocked => exit::BLOCKED,
        TaskStatus::Ready => exit::CANCELLED,
        TaskStatus::Failed | TaskStatus::InProgress => exit::FAILED,
    }
}

fn summary(run: &TaskRun) -> String {
    let mut s = format!(
        "Task #{} \"{}\": {}",
        run.task,
        run.title,
        run.status.as_str()
    );
    if let Some(q) = &run.question {
        s.push_str(&format!(
            " — question: {q} (answer it: keel blocker list, keel blocker answer ID \"…\")"
        ));
    }
    if let Some(p) = &run.proof {
        let met = p.criteria.iter().filter(|c| c.status == "met").count();
        s.push_str(&format!(
            "; criteria met {met}/{}; {} changed; proof: keel task show {}",
            p.criteria.len(),
            keel_tools::text::count(p.files.len(), "file", "files"),
            run.task
        ));
    }
    s
}

pub fn execute(args: WorkArgs) -> anyhow::Result<u8> {
    match args.command {
        WorkCommand::Start {
            task,
            execute,
            mode,
            llm,
            json,
        } => {
            if !execute {
                let (_, ws, store) = prd::open(&args.common)?;
                let record = store
                    .db()
                    .task(&ws, task)
                    .map_err(setup::store_usage_error)?;
                let preview = runtime()?.block_on(keel_work::runner::preview_for(
                    &*store, &*store, &ws, &record,
                ))?;
                let mut out = crate::out::stdout();
                if json {
                    let v = serde_json::json!({"task": record, "task_layer": preview});
                    writeln!(out, "{}", crate::out::json_pretty(&v)?)?;
                } else {
                    writeln!(
                        out,
                        "The agent would get this task layer (run it with --execute):\n"
                    )?;
                    writeln!(out, "{}", preview.trim_end())?;
                }
                return Ok(exit::COMPLETED);
            }
            let runner = runner(&args.common, &llm, mode, json)?;
            let run = runtime()?
                .block_on(runner.run_task(task))
                .map_err(setup::engine_usage_error)?;
            report_run(&run, json)?;
            Ok(code(run.status))
        }
        WorkCommand::Batch {
            parallel,
            until,
            mode,
            llm,
            json,
        } => {
            if parallel != 1 {
                return Err(setup::UsageError(format!(
                    "--parallel {parallel}: tasks run one at a time in this workspace, because each builds on the files the previous ones changed (separate worktrees would need a merge after every task); use --parallel 1"
                ))
                .into());
            }
            let runner = runner(&args.common, &llm, mode, json)?;
            let report = runtime()?
                .block_on(runner.run_batch(until))
                .map_err(setup::engine_usage_error)?;
            let mut out = crate::out::stdout();
            if json {
                writeln!(out, "{}", crate::out::json(&report)?)?;
            } else {
                if report.runs.is_empty() {
                    writeln!(out, "No task is ready to run (keel work status shows why).")?;
                }
                for run in &report.runs {
                    writeln!(out, "{}", summary(run))?;
                }
                for (t, d) in &report.stopped {
                    writeln!(
                        out,
                        "Task #{t} waits: it depends on #{d}, which did not finish"
                    )?;
                }
            }
            let worst = report
                .runs
                .iter()
                .map(|r| code(r.status))
                .max_by_key(|c| match *c {
                    exit::COMPLETED => 0,
                    exit::BLOCKED => 1,
                    _ => 2,
                })
                .unwrap_or(exit::COMPLETED);
            Ok(worst)
        }
        WorkCommand::Status { json } => {
            let (_, ws, store) = prd::open(&args.common)?;
            let tasks = store.db().list_tasks(&ws)?;
            let mut out = crate::out::stdout();
            if json {
                writeln!(out, "{}", crate::out::json_pretty(&tasks)?)?;
                return Ok(exit::COMPLETED);
            }
            if tasks.is_empty() {
                writeln!(
                    out,
                    "No tasks here yet: keel prd add prd.md && keel task generate"
                )?;
                return Ok(exit::COMPLETED);
            }
            let count = |s: &str| tasks.iter().filter(|t| t.shown_status(&tasks) == s).count();
            writeln!(
                out,
                "{} tasks: {} done, {} ready, {} waiting, {} in progress, {} blocked, {} failed",
                tasks.len(),
                count("done"),
                count("ready"),
                count("waiting"),
                count("in_progress") + count("interrupted"),
                count("blocked"),
                count("failed")
            )?;
            task::print_table(&mut out, &tasks)?;
            for t in tasks.iter().filter(|t| t.status == TaskStatus::Blocked) {
                writeln!(
                    out,
                    "#{} is blocked: {}",
                    t.id,
                    t.question.as_deref().unwrap_or("?")
                )?;
            }
            Ok(exit::COMPLETED)
        }
    }
}

fn report_run(run: &TaskRun, json: bool) -> anyhow::Result<()> {
    let mut out = crate::out::stdout();
    if json {
        writeln!(out, "{}", crate::out::json(run)?)?;
    } else {
        writeln!(out, "{}", summary(run))?;
    }
    Ok(())
}
