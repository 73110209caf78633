//! `keel task generate|add|list|show|edit|rm`: tasks with dependencies, generated from a PRD
//! by the model or written by hand.

use std::io::Write;

use clap::{Args, Subcommand};
use keel_store::work::{NewTask, TaskEdit, TaskRecord, TaskStatus};
use keel_work::{Proof, generate_request, generate_tasks};

use crate::args::{CommonArgs, ProviderArgs};
use crate::render::when;
use crate::{exit, prd, setup};

#[derive(Debug, Args)]
pub struct TaskArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    #[command(subcommand)]
    pub command: TaskCommand,
}

#[derive(Debug, Subcommand)]
pub enum TaskCommand {
    /// Ask the model to break a PRD (default: the latest) into tasks; they are checked (no
    /// cycles, no unknown dependencies, sizes xs…xl) and stored all together or not at all.
    Generate {
        #[arg(long, value_name = "ID")]
        prd: Option<u32>,
        #[command(flatten)]
        llm: ProviderArgs,
        #[arg(long)]
        json: bool,
    },
    /// Add a task by hand.
    Add {
        title: String,
        #[arg(long, default_value = "")]
        description: String,
        /// An acceptance criterion (repeat for more).
        #[arg(long = "criterion", value_name = "TEXT")]
        criteria: Vec<String>,
        /// xs, s, m, l or xl.
        #[arg(long, default_value = "m")]
        size: String,
        /// Tasks that must be done first (comma-separated ids).
        #[arg(long, value_delimiter = ',', value_name = "IDS")]
        deps: Vec<u32>,
        #[arg(long, value_name = "ID")]
        prd: Option<u32>,
    },
    /// List the workspace's tasks.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Show a task with its dependencies, sessions and proofs.
    Show {
        id: u32,
        #[arg(long)]
        json: bool,
    },
    /// Change a task (dependencies are checked: no cycle, no unknown task).
    Edit {
        id: u32,
        #[arg(long)]
        title: Option<String>,
        #[arg(long)]
        description: Option<String>,
        /// Replaces all acceptance criteria (repeat for more).
        #[arg(long = "criterion", value_name = "TEXT")]
        criteria: Vec<String>,
        #[arg(long)]
        size: Option<String>,
        /// Replaces the dependencies (comma-separated ids; `--deps ''` clears them).
        #[arg(long, value_delimiter = ',', value_name = "IDS")]
        deps: Option<Vec<String>>,
        /// ready, blocked, in_progress, done or failed.
        #[arg(long)]
        status: Option<String>,
    },
    /// Delete a task no other task depends on.
    Rm { id: u32 },
}

fn usage(msg: String) -> anyhow::Error {
    setup::UsageError(msg).into()
}

pub fn execute(args: TaskArgs) -> anyhow::Result<u8> {
    let (root, ws, store) = prd::open(&args.common)?;
    let mut out = crate::out::stdout();
    match args.command {
        TaskCommand::Generate { prd, llm, json } => {
            let prd = store
                .db()
                .prd(&ws, prd, None)
                .map_err(setup::store_usage_error)?;
            let builder = setup::session_builder(store.clone());
            let config = builder
                .config(&root, &crate::launch::overrides(&llm, None, None))
                .map_err(setup::engine_usage_error)?;
            let provider = builder
                .providers(&config, &root)
                .map_err(setup::engine_usage_error)?
                .main;
            let existing: Vec<String> = store
                .db()
                .list_tasks(&ws)?
                .into_iter()
                .filter(|t| t.prd == Some(prd.id))
                .map(|t| t.title)
                .collect();
            let request = generate_request(&prd.title, &prd.body, &existing);
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            let tasks = runtime.block_on(generate_tasks(provider.as_ref(), &request))?;
            let ids = store.db().add_tasks(&ws, Some(prd.id), &tasks)?;
            let stored: Vec<TaskRecord> = ids
                .iter()
                .map(|id| store.db().task(&ws, *id))
                .collect::<Result<_, _>>()?;
            if json {
                writeln!(out, "{}", crate::out::json_pretty(&stored)?)?;
            } else {
                writeln!(
                    out,
                    "Generated {} tasks from PRD #{}:",
                    stored.len(),
                    prd.id
                )?;
                print_table(&mut out, &stored)?;
                writeln!(out, "Next: keel work batch (or keel work start ID)")?;
            }
        }
        TaskCommand::Add {
            title,
            description,
            criteria,
            size,
            deps,
            prd,
        } => {
            if let Some(p) = prd {
                store
                    .db()
                    .prd(&ws, Some(p), None)
                    .map_err(setup::store_usage_error)?;
            }
            let task = NewTask {
                title,
                description,
                criteria,
                size,
                depends_on: deps,
                after: Vec::new(),
            };
            let ids = store
                .db()
                .add_tasks(&ws, prd, &[task])
                .map_err(setup::store_usage_error)?;
            writeln!(out, "Added task #{}.", ids.first().copied().unwrap_or(0))?;
        }
        TaskCommand::List { json } => {
            let tasks = store.db().list_tasks(&ws)?;
            if json {
                writeln!(out, "{}", crate::out::json_pretty(&tasks)?)?;
            } else if tasks.is_empty() {
                writeln!(
                    out,
                    "No tasks here yet: keel task generate (from a PRD) or keel task add TITLE"
                )?;
            } else {
                print_table(&mut out, &tasks)?;
            }
        }
        TaskCommand::Show { id, json } => {
            let task = store.db().task(&ws, id).map_err(setup::store_usage_error)?;
            let proofs = store.db().proofs(&ws, id)?;
            if json {
                let v = serde_json::json!({"task": task, "proofs": proofs});
                writeln!(out, "{}", crate::out::json_pretty(&v)?)?;
            } else {
                let all = store.db().list_tasks(&ws)?;
                show(&mut out, &task, &all, &proofs)?;
            }
        }
        TaskCommand::Edit {
            id,
            title,
            description,
            criteria,
            size,
            deps,
            status,
        } => {
            let status = match status {
                Some(s) => Some(TaskStatus::parse(&s).ok_or_else(|| {
                    usage(format!(
                        "unknown status `{s}`; use ready, blocked, in_progress, done or failed"
                    ))
                })?),
                None => None,
            };
            let depends_on = match deps {
                Some(list) => Some(
                    list.iter()
                        .filter(|d| !d.trim().is_empty())
                        .map(|d| {
                            d.trim()
                                .trim_start_matches('#')
                                .parse::<u32>()
                                .map_err(|_| usage(format!("`{d}` is not a task id")))
                        })
                        .collect::<Result<Vec<_>, _>>()?,
                ),
                None => None,
            };
            let edit = TaskEdit {
                title,
                description,
                criteria: (!criteria.is_empty()).then_some(criteria),
                size,
                depends_on,
                status,
            };
            let task = store
                .db()
                .edit_task(&ws, id, &edit)
                .map_err(setup::store_usage_error)?;
            writeln!(out, "Updated task #{} ({}).", task.id, task.status.as_str())?;
        }
        TaskCommand::Rm { id } => {
            store
                .db()
                .remove_task(&ws, id)
                .map_err(setup::store_usage_error)?;
            writeln!(out, "Removed task #{id}.")?;
        }
    }
    Ok(exit::COMPLETED)
}

pub fn print_table(out: &mut impl Write, tasks: &[TaskRecord]) -> std::io::Result<()> {
    writeln!(
        out,
        "{:<4}  {:<11}  {:<4}  {:<10}  TITLE",
        "ID", "STATUS", "SIZE", "DEPENDS ON"
    )?;
    for t in tasks {
        let deps: Vec<String> = t.depends_on.iter().map(|d| format!("#{d}")).collect();
        let deps = if deps.is_empty() {
            "-".to_string()
        } else {
            deps.join(",")
        };
        writeln!(
            out,
            "{:<4}  {:<11}  {:<4}  {:<10}  {}",
            t.id,
            t.shown_status(tasks),
            t.size,
            deps,
            t.title
        )?;
    }
    Ok(())
}

fn show(
    out: &mut impl Write,
    t: &TaskRecord,
    all: &[TaskRecord],
    proofs: &[keel_store::work::ProofRecord],
) -> anyhow::Result<()> {
    writeln!(out, "Task #{}: {}", t.id, t.title)?;
    writeln!(
        out,
        "Status: {}   Size: {}   PRD: {}",
        t.shown_status(all),
        t.size,
        t.prd.map_or("-".into(), |p| format!("#{p}"))
    )?;
    if !t.depends_on.is_empty() {
        let deps: Vec<String> = t.depends_on.iter().map(|d| format!("#{d}")).collect();
        let waiting: Vec<String> = t.waiting_for(all).iter().map(|d| format!("#{d}")).collect();
        if waiting.is_empty() || t.status != TaskStatus::Ready {
            writeln!(out, "Depends on: {}", deps.join(", "))?;
        } else {
            writeln!(
                out,
                "Depends on: {} (waiting for {} to be done)",
                deps.join(", "),
                waiting.join(", ")
            )?;
        }
    }
    if let Some(q) = &t.question {
        writeln!(out, "Blocked on: {q}")?;
    }
    if !t.description.is_empty() {
        writeln!(out, "\n{}", t.description)?;
    }
    writeln!(out, "\nAcceptance criteria:")?;
    for (i, c) in t.criteria.iter().enumerate() {
        writeln!(out, "  {}. {c}", i + 1)?;
    }
    if !t.sessions.is_empty() {
        writeln!(out, "\nSessions: {}", t.sessions.join(", "))?;
    }
    for p in proofs {
        let Ok(proof) = serde_json::from_value::<Proof>(p.body.clone()) else {
            writeln!(out, "\nProof ({} UTC): unreadable", when(p.created_at))?;
            continue;
        };
        print_proof(out, &proof, p.created_at)?;
    }
    Ok(())
}

fn print_proof(out: &mut impl Write, p: &Proof, at: u64) -> std::io::Result<()> {
    writeln!(
        out,
        "\nProof — session {}, run {} ({} UTC){}",
        p.session_id,
        p.run_status,
        when(at),
        if p.resumed {
            ", resumed after an interruption"
        } else {
            ""
        }
    )?;
    let gate = |g: &Option<keel_work::GateRun>| match g {
        Some(g) => format!(
            "{} `{}`",
            if g.passed { "passed" } else { "FAILED" },
            g.command
        ),
        None => "no test command".into(),
    };
    writeln!(out, "  Tests before: {}", gate(&p.tests_before))?;
    writeln!(out, "  Tests after:  {}", gate(&p.tests_after))?;
    for g in &p.gates {
        writeln!(
            out,
            "  Gate {}: {} (`{}`)",
            g.name,
            if g.passed { "passed" } else { "FAILED" },
            g.command
        )?;
    }
    if p.files.is_empty() {
        writeln!(out, "  Files changed: none")?;
    } else {
        writeln!(out, "  Files changed:")?;
        for f in &p.files {
            writeln!(
                out,
                "    {:<8} {} (+{} -{})",
                f.change, f.path, f.lines_added, f.lines_removed
            )?;
        }
    }
    writeln!(out, "  Acceptance criteria:")?;
    for c in &p.criteria {
        writeln!(out, "    {}. [{}] {}", c.index, c.status, c.criterion)?;
        writeln!(
            out,
            "       evidence: {} — {}",
            c.evidence.as_deref().unwrap_or("none"),
            c.check
        )?;
    }
    Ok(())
}
