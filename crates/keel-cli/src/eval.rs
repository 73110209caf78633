//! `keel eval SUITE | runs | show | compare | promote`: the evaluation loop's front end. The
//! logic lives in `keel_eval`; runs are stored by `keel_store::eval`.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use clap::{Args, Subcommand, ValueEnum};
use keel_config::Layer;
use keel_eval::promote::{self, Draft, PromoteKind, Provenance, Stored};
use keel_eval::{EvalOptions, Suite, compare, run_suite};
use keel_store::MemoryKind;
use keel_store::eval::{EvalRunRecord, NewEvalRun, parse_run_id};

use crate::args::{CommonArgs, ProviderArgs};
use crate::backend::Backend;
use crate::eval_report as report;
use crate::{exit, setup};

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct EvalArgs {
    #[command(subcommand)]
    pub command: Option<EvalCommand>,
    /// The suite file (TOML): tasks with a repo (or git + commit), a task text and a check.
    #[arg(value_name = "SUITE", required = true)]
    pub suite: Option<PathBuf>,
    #[command(flatten)]
    pub common: CommonArgs,
    #[command(flatten)]
    pub llm: ProviderArgs,
    /// Tasks to run at a time.
    #[arg(short = 'j', long, default_value_t = 1, value_name = "N")]
    pub jobs: usize,
    /// Model requests per task before its run stops (over the suite's `max_steps`).
    #[arg(long, value_name = "N")]
    pub max_steps: Option<u32>,
    /// Keep each task's workspace (its path is printed) instead of deleting it.
    #[arg(long)]
    pub keep: bool,
    /// Print the stored run as JSON instead of the report.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum KindArg {
    Rule,
    Skill,
    Memory,
}

impl KindArg {
    fn kind(self) -> PromoteKind {
        match self {
            KindArg::Rule => PromoteKind::Rule,
            KindArg::Skill => PromoteKind::Skill,
            KindArg::Memory => PromoteKind::Memory,
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum EvalCommand {
    /// The stored eval runs, newest first.
    Runs {
        #[arg(long, default_value_t = 20)]
        limit: usize,
        #[arg(long)]
        json: bool,
    },
    /// One run's report (failures first).
    Show {
        /// The run's number (`keel eval runs`).
        run: String,
        #[arg(long)]
        json: bool,
    },
    /// Two runs side by side: per task and totals, the exact McNemar test on the tasks
    /// whose outcome changed, and mean deltas of steps, tokens, cost and time.
    Compare {
        a: String,
        b: String,
        #[arg(long)]
        json: bool,
    },
    /// Have the model draft a rule, skill or memory lesson from a passing task's trace; it
    /// is stored (with provenance) only when you accept it.
    Promote {
        run: String,
        /// The task (default: the run's first passing task).
        #[arg(long, value_name = "ID")]
        task: Option<String>,
        /// What to draft.
        #[arg(long = "as", value_enum, value_name = "KIND")]
        kind: KindArg,
        /// Store the draft without asking (otherwise: asked on a terminal, never stored
        /// headless).
        #[arg(long)]
        accept: bool,
        /// The rule or skill name (default: the model's).
        #[arg(long, value_name = "NAME")]
        name: Option<String>,
        #[command(flatten)]
        common: CommonArgs,
        #[command(flatten)]
        llm: ProviderArgs,
    },
}

/// The workspace, the runtime the store's calls run on and the store: PostgreSQL when a
/// database URL is configured, else the local SQLite session database.
struct Opened {
    root: PathBuf,
    rt: tokio::runtime::Runtime,
    backend: Backend,
}

fn open_store(common: &CommonArgs) -> anyhow::Result<Opened> {
    let root = setup::workspace_dir(common.workspace.as_deref())?;
    let config = setup::load_config(&root, Layer::from_overrides(&[]))?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let backend = rt.block_on(Backend::open(&config))?;
    Ok(Opened { root, rt, backend })
}

fn load_run(store: &Opened, id: &str) -> anyhow::Result<EvalRunRecord> {
    let id = parse_run_id(id).map_err(setup::store_usage_error)?;
    store
        .rt
        .block_on(store.backend.evals().eval_run(id))
        .map_err(setup::store_usage_error)
}

pub fn execute(args: EvalArgs) -> anyhow::Result<u8> {
    let mut out = crate::out::stdout();
    let Some(command) = args.command else {
        return run(args);
    };
    match command {
        EvalCommand::Runs { limit, json } => {
            let store = open_store(&args.common)?;
            let runs = store
                .rt
                .block_on(store.backend.evals().list_eval_runs(limit))?;
            if json {
                writeln!(out, "{}", crate::out::json_pretty(&runs)?)?;
            } else {
                report::run_list(&mut out, &runs)?;
            }
        }
        EvalCommand::Show { run, json } => {
            let store = open_store(&args.common)?;
            let run = load_run(&store, &run)?;
            if json {
                writeln!(out, "{}", crate::out::json_pretty(&run)?)?;
            } else {
                report::run_report(&mut out, &run)?;
            }
        }
        EvalCommand::Compare { a, b, json } => {
            let store = open_store(&args.common)?;
            let (a, b) = (load_run(&store, &a)?, load_run(&store, &b)?);
            let c = compare(&a, &b);
            if json {
                writeln!(out, "{}", crate::out::json_pretty(&c)?)?;
            } else {
                report::comparison(&mut out, &a, &b, &c)?;
            }
        }
        EvalCommand::Promote {
            run,
            task,
            kind,
            accept,
            name,
            common,
            llm,
        } => {
            drop(out);
            return promote_cmd(
                &run,
                task.as_deref(),
                kind.kind(),
                accept,
                name,
                &common,
                &llm,
            );
        }
    }
    Ok(exit::COMPLETED)
}

/// `keel eval SUITE`.
fn run(args: EvalArgs) -> anyhow::Result<u8> {
    let Some(path) = args.suite else {
        return Err(setup::UsageError("name a suite file: keel eval SUITE.toml".into()).into());
    };
    if args.jobs == 0 {
        return Err(setup::UsageError("-j/--jobs must be at least 1".into()).into());
    }
    let suite = Suite::load(&path).map_err(setup::UsageError)?;
    let store = open_store(&args.common)?;
    let builder = setup::session_builder(store.backend.sessions());
    let overrides = crate::launch::overrides(&args.llm, None, args.max_steps);
    let work_root = std::env::temp_dir().join(format!(
        "keel-eval-{}-{}",
        std::process::id(),
        keel_store::now_ms()
    ));
    std::fs::create_dir_all(&work_root)
        .with_context(|| format!("cannot create {}", work_root.display()))?;
    let opts = EvalOptions {
        jobs: args.jobs,
        overrides,
        work_root: work_root.clone(),
    };
    let total = suite.tasks.len();
    tell!(
        "keel: running {total} task{} of suite {} ({} at a time)",
        if total == 1 { "" } else { "s" },
        suite.name,
        args.jobs
    );
    let done = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let progress: keel_eval::Progress = Arc::new(move |_, r| {
        let n = done.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
        tell!("{}", report::progress_line(n, total, r));
    });
    let started = Instant::now();
    let outcome = store
        .rt
        .block_on(run_suite(&builder, &suite, &opts, progress));
    let wall_ms = started.elapsed().as_millis() as u64;
    if args.keep {
        tell!("keel: task workspaces kept in {}", work_root.display());
    } else if let Err(e) = std::fs::remove_dir_all(&work_root) {
        tell!("keel: warning: cannot remove {}: {e}", work_root.display());
    }
    let evals = store.backend.evals();
    let record = store.rt.block_on(evals.add_eval_run(&NewEvalRun {
        suite: suite.name.clone(),
        suite_path: path.display().to_string(),
        provider: outcome.provider,
        model: outcome.model,
        results: outcome.results,
        wall_ms,
    }))?;
    let mut out = crate::out::stdout();
    if args.json {
        writeln!(out, "{}", crate::out::json_pretty(&record)?)?;
    } else {
        report::run_report(&mut out, &record)?;
    }
    Ok(if record.passed() == record.results.len() {
        exit::COMPLETED
    } else {
        exit::FAILED
    })
}

/// `keel eval promote`.
fn promote_cmd(
    run: &str,
    task: Option<&str>,
    kind: PromoteKind,
    accept: bool,
    name: Option<String>,
    common: &CommonArgs,
    llm: &ProviderArgs,
) -> anyhow::Result<u8> {
    let store = open_store(common)?;
    let root = store.root.clone();
    let record = load_run(&store, run)?;
    let result = match task {
        Some(id) => record.results.iter().find(|r| r.id == id).ok_or_else(|| {
            setup::UsageError(format!(
                "eval run #{} has no task `{id}`; `keel eval show {}` lists its tasks",
                record.id, record.id
            ))
        })?,
        None => record.results.iter().find(|r| r.success).ok_or_else(|| {
            setup::UsageError(format!(
                "no task of eval run #{} passed; only successful traces are promoted",
                record.id
            ))
        })?,
    };
    if !result.success {
        return Err(setup::UsageError(format!(
            "task `{}` of eval run #{} failed its check; only successful traces are promoted",
            result.id, record.id
        ))
        .into());
    }
    let sessions = store.backend.sessions();
    let events = store
        .rt
        .block_on(sessions.events(&result.session_id, 0))
        .map_err(setup::store_usage_error)?;
    let task_text = store
        .rt
        .block_on(sessions.get_session(&result.session_id))
        .map(|s| s.task)
        .unwrap_or_default();
    let builder = setup::session_builder(sessions);
    let config = builder
        .config(&root, &crate::launch::overrides(llm, None, None))
        .map_err(setup::engine_usage_error)?;
    let provider = builder
        .providers(&config, &root)
        .map_err(setup::engine_usage_error)?
        .main;
    let mut draft = store
        .rt
        .block_on(promote::draft(provider.as_ref(), kind, &task_text, &events))
        .map_err(|e| anyhow::anyhow!(e))?;
    if let Some(n) = name {
        draft.name = promote::slug(&n);
        if draft.name.is_empty() {
            return Err(setup::UsageError(format!("--name `{n}` has no letters or digits")).into());
        }
    }
    let from = Provenance {
        run: record.id,
        task: result.id.clone(),
        session_id: result.session_id.clone(),
    };
    show_draft(kind, &draft, &from);
    let interactive = std::io::stdin().is_terminal() && crate::out::stdout_is_terminal();
    if !accept {
        if !interactive {
            say!(
                "Nothing stored: this is a draft. Store it with --accept (on a terminal you are asked to accept, edit or reject it)."
            );
            return Ok(exit::COMPLETED);
        }
        loop {
            match ask("Store it? [y]es / [e]dit / [n]o: ")?.as_str() {
                "y" | "yes" => break,
                "e" | "edit" => {
                    draft.body = edit(&draft.body)?;
                    show_draft(kind, &draft, &from);
                }
                "n" | "no" | "" => {
                    say!("Nothing stored.");
                    return Ok(exit::COMPLETED);
                }
                _ => {}
            }
        }
    }
    let stored = match &store.backend {
        Backend::Sqlite(db) => promote::store_draft(kind, &draft, &from, &root, db.db()),
        Backend::Postgres(pg) => {
            promote::store_draft_with(kind, &draft, &from, &root, |text, source| {
                store
                    .rt
                    .block_on(pg.add_memory(MemoryKind::Lesson, text, source))
                    .map(|entry| entry.id)
                    .map_err(|e| e.to_string())
            })
        }
    }
    .map_err(setup::UsageError)?;
    match stored {
        Stored::File { path } => say!(
            "Stored the {} in {} (from {}).",
            kind.as_str(),
            path.display(),
            from.line()
        ),
        Stored::Memory { id } => say!(
            "Stored lesson m{id} (from {}); keel memory list --kind lesson shows it.",
            from.line()
        ),
    }
    Ok(exit::COMPLETED)
}

fn show_draft(kind: PromoteKind, draft: &Draft, from: &Provenance) {
    let target = match kind {
        PromoteKind::Rule => format!(".keel/rules/{}.md", draft.name),
        PromoteKind::Skill => format!(".keel/skills/{}/SKILL.md", draft.name),
        PromoteKind::Memory => "the memory overlay (promoted lessons)".into(),
    };
    say!(
        "Draft {} for {target}:\n----\n{}\n----",
        kind.as_str(),
        promote::rendered(kind, draft, from).trim_end()
    );
}

fn ask(prompt: &str) -> anyhow::Result<String> {
    say_part!("{prompt}");
    crate::out::stdout().flush()?;
    let mut line = String::new();
    std::io::stdin().read_line(&mut line)?;
    Ok(line.trim().to_ascii_lowercase())
}

/// Opens `text` in `$VISUAL`/`$EDITOR` (default `vi`) and returns what was saved.
fn edit(text: &str) -> anyhow::Result<String> {
    let editor = crate::editor::user_editor().unwrap_or_else(|| "vi".into());
    let (status, edited) = crate::editor::edit(&editor, "promote.md", text)?;
    if !status.success() {
        anyhow::bail!("the editor `{editor}` failed ({status}); nothing stored");
    }
    Ok(edited.trim().to_string())
}
