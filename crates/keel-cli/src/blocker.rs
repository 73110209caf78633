//! `keel blocker list` and `keel blocker answer`.

use std::io::Write;

use keel_config::Layer;
use keel_store::{BlockerRecord, Store};

use crate::args::{BlockerArgs, BlockerCommand};
use crate::render::when;
use crate::{exit, setup};

pub fn execute(args: BlockerArgs) -> anyhow::Result<u8> {
    let cwd = setup::workspace_dir(None)?;
    let config = setup::load_config(&cwd, Layer::from_overrides(&[]))?;
    let store = setup::open_store(&config)?;
    match args.command {
        BlockerCommand::List { all, session, json } => {
            list(store.as_ref(), all, session.as_deref(), json)
        }
        BlockerCommand::Answer { id, answer } => {
            let answer = answer.join(" ");
            if answer.trim().is_empty() {
                return Err(setup::UsageError(
                    "the answer is empty; say what the agent should know or do".into(),
                )
                .into());
            }
            let b = store
                .db()
                .answer_blocker(&id, answer.trim())
                .map_err(setup::store_usage_error)?;
            // A task blocked on this question is ready again; its next run gets the answer.
            let tasks = store.db().ready_tasks_of_session(&b.session_id)?;
            match tasks.first() {
                Some(id) => say!(
                    "Answered {}. Task #{id} is ready again; its next run gets the answer: keel work start {id} --execute",
                    b.id
                ),
                None => say!(
                    "Answered {}. Continue the session with: keel run --resume {}",
                    b.id,
                    b.session_id
                ),
            }
            Ok(exit::COMPLETED)
        }
    }
}

fn list(store: &dyn Store, all: bool, session: Option<&str>, json: bool) -> anyhow::Result<u8> {
    let session_id = match session {
        Some(s) => Some(
            setup::wait(store.get_session(s))
                .map_err(setup::store_usage_error)?
                .id,
        ),
        None => None,
    };
    let blockers = setup::wait(store.list_blockers(session_id.as_deref(), all))?;
    let mut out = crate::out::stdout();
    if json {
        writeln!(out, "{}", crate::out::json_pretty(&blockers)?)?;
        return Ok(exit::COMPLETED);
    }
    if blockers.is_empty() {
        let what = if all {
            "No blockers."
        } else {
            "No open blockers."
        };
        writeln!(out, "{what}")?;
        return Ok(exit::COMPLETED);
    }
    writeln!(
        out,
        "{:<12}  {:<9}  {:<11}  {:<22}  {:<19}  QUESTION",
        "ID", "STATUS", "SOURCE", "SESSION", "RAISED (UTC)"
    )?;
    for b in &blockers {
        writeln!(out, "{}", row(b))?;
    }
    Ok(exit::COMPLETED)
}

fn row(b: &BlockerRecord) -> String {
    let question = b.question.split_whitespace().collect::<Vec<_>>().join(" ");
    let question = if question.chars().count() > 80 {
        format!("{}…", question.chars().take(80).collect::<String>())
    } else {
        question
    };
    format!(
        "{:<12}  {:<9}  {:<11}  {:<22}  {:<19}  {question}",
        b.id,
        b.status.as_str(),
        b.source,
        b.session_id,
        when(b.created_at)
    )
}
