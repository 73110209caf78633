//! `keel sessions` and `keel sessions show`.

use std::io::Write;
use std::path::Path;

use keel_config::Layer;
use keel_engine::EventSink;
use keel_protocol::EventKind;
use keel_store::{SessionRecord, Store, now_ms};

use crate::args::{SessionsArgs, SessionsCommand};
use crate::render::{Human, one_line, stdout_color, usage_line, when};
use crate::setup::sessions_in;
use crate::{exit, sessions_rm, setup};

pub fn execute(args: SessionsArgs) -> anyhow::Result<u8> {
    let cwd = setup::workspace_dir(None)?;
    let config = setup::load_config(&cwd, Layer::from_overrides(&[]))?;
    let store = setup::open_store(&config)?;
    match args.command {
        None => {
            let here = setup::workspace_dir(args.workspace.as_deref())?;
            let scope = (!args.all).then_some(here.as_path());
            list(store.as_ref(), scope, args.limit, args.json)
        }
        Some(SessionsCommand::Show { id, json }) => show(store.as_ref(), &id, json),
        Some(SessionsCommand::Rm { ids }) => sessions_rm::remove(store.as_ref(), &ids),
        Some(SessionsCommand::Prune {
            older_than,
            all,
            workspace,
            dry_run,
        }) => {
            let here = setup::workspace_dir(workspace.as_deref())?;
            let scope = (!all).then_some(here.as_path());
            sessions_rm::prune(store.as_ref(), scope, &older_than, dry_run)
        }
    }
}

fn list(
    store: &dyn Store,
    workspace: Option<&Path>,
    limit: usize,
    json: bool,
) -> anyhow::Result<u8> {
    let sessions = sessions_in(store, workspace, limit)?;
    let mut out = crate::out::stdout();
    if json {
        let rows: Vec<serde_json::Value> = sessions.iter().map(record_json).collect();
        writeln!(out, "{}", crate::out::json_pretty(&rows)?)?;
        return Ok(exit::COMPLETED);
    }
    if sessions.is_empty() {
        match workspace {
            Some(w) => writeln!(
                out,
                "No sessions in {} yet. Start one with `keel run \"task\"`; `keel sessions --all` lists every workspace's.",
                w.display()
            )?,
            None => writeln!(out, "No sessions yet. Start one with `keel run \"task\"`.")?,
        }
        return Ok(exit::COMPLETED);
    }
    out.write_all(table(&sessions, workspace.is_none(), now_ms()).as_bytes())?;
    if let Some(latest) = sessions.first() {
        writeln!(
            out,
            "\nlatest: {}  (continue: keel run --resume {} \"…\")",
            latest.id, latest.id
        )?;
    }
    Ok(exit::COMPLETED)
}

/// The session table: full ids, status, model, cost, age, the workspace when several are
/// listed, and the task's first line as the title.
fn table(sessions: &[SessionRecord], with_workspace: bool, now: u64) -> String {
    let mut out = format!(
        "{:<22}  {:<11}  {:<28}  {:>7}  {:>4}  ",
        "ID", "STATUS", "MODEL", "COST", "AGE"
    );
    if with_workspace {
        out.push_str(&format!("{:<28}  ", "WORKSPACE"));
    }
    out.push_str("TITLE\n");
    for s in sessions {
        let cost = if s.usage.cost_usd > 0.0 {
            format!("${:.2}", s.usage.cost_usd)
        } else {
            "—".to_string()
        };
        out.push_str(&format!(
            "{:<22}  {:<11}  {:<28}  {:>7}  {:>4}  ",
            s.id,
            s.display_status(),
            one_line(&format!("{}/{}", s.provider, s.model), 27),
            cost,
            age(now.saturating_sub(s.created_at)),
        ));
        if with_workspace {
            out.push_str(&format!("{:<28}  ", tail(&s.workspace, 28)));
        }
        let title = s.task.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
        out.push_str(&one_line(title, 50));
        out.push('\n');
    }
    out
}

/// `45s`, `12m`, `5h`, `3d`, `7w`.
fn age(ms: u64) -> String {
    let secs = ms / 1000;
    match secs {
        0..60 => format!("{secs}s"),
        60..3_600 => format!("{}m", secs / 60),
        3_600..86_400 => format!("{}h", secs / 3_600),
        86_400..1_209_600 => format!("{}d", secs / 86_400),
        _ => format!("{}w", secs / 604_800),
    }
}

/// The last `max` characters of a path, with `…` when cut.
fn tail(path: &str, max: usize) -> String {
    let n = path.chars().count();
    if n <= max {
        path.to_string()
    } else {
        let kept: String = path.chars().skip(n - (max - 1)).collect();
        format!("…{kept}")
    }
}

fn show(store: &dyn Store, id: &str, json: bool) -> anyhow::Result<u8> {
    let session = setup::wait(store.get_session(id)).map_err(setup::store_usage_error)?;
    let events = setup::wait(store.events(&session.id, 0))?;
    if json {
        let mut out = crate::out::stdout();
        for e in &events {
            writeln!(out, "{}", crate::out::json(e)?)?;
        }
        return Ok(exit::COMPLETED);
    }
    {
        let mut out = crate::out::stdout();
        writeln!(out, "session   {}", session.id)?;
        writeln!(out, "status    {}", session.display_status())?;
        writeln!(out, "task      {}", one_line(&session.task, 200))?;
        writeln!(out, "workspace {}", session.workspace)?;
        writeln!(
            out,
            "model     {}/{} · mode {}",
            session.provider, session.model, session.mode
        )?;
        writeln!(out, "started   {} UTC", when(session.created_at))?;
        writeln!(
            out,
            "usage     {} · {}",
            keel_tools::text::count(session.iterations as usize, "iteration", "iterations"),
            usage_line(&session.usage)
        )?;
        writeln!(out)?;
    }
    // What the user said is not an event of its own: the task and each follow-up message ride
    // on session_started / session_resumed, the answers to blockers in the store.
    let blockers = setup::wait(store.list_blockers(Some(&session.id), true)).unwrap_or_default();
    let renderer = Human::new(stdout_color(), false);
    for e in &events {
        renderer.publish(e);
        match &e.kind {
            EventKind::SessionStarted { task, .. } => user_lines("you", task),
            EventKind::SessionResumed {
                message,
                answered_blockers,
            } => {
                for id in answered_blockers {
                    if let Some(b) = blockers.iter().find(|b| &b.id == id) {
                        say!("  ? {} ({id})", one_line(&b.question, 200));
                        user_lines("you (answer)", b.answer.as_deref().unwrap_or(""));
                    }
                }
                user_lines("you", message);
            }
            _ => {}
        }
    }
    if session.is_interrupted() {
        say!(
            "[interrupted: the process running this session stopped after event {}]",
            events.last().map_or(0, |e| e.seq)
        );
    }
    Ok(exit::COMPLETED)
}

/// A user's message in a transcript: `> you: first line`, then the rest indented.
fn user_lines(who: &str, text: &str) {
    let text = text.trim();
    if text.is_empty() {
        return;
    }
    const SHOWN: usize = 20;
    let lines: Vec<&str> = text.lines().collect();
    for (i, l) in lines.iter().take(SHOWN).enumerate() {
        if i == 0 {
            say!("> {who}: {l}");
        } else {
            say!(">   {l}");
        }
    }
    if lines.len() > SHOWN {
        say!(
            ">   … {} more lines (keel sessions show ID --json has all)",
            lines.len() - SHOWN
        );
    }
}

fn record_json(s: &SessionRecord) -> serde_json::Value {
    let mut v = serde_json::to_value(s).unwrap_or_default();
    if let Some(obj) = v.as_object_mut() {
        obj.insert("status".into(), s.display_status().into());
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_protocol::{SessionStatus, Usage};

    fn record(id: &str, workspace: &str, cost: f64, created_at: u64) -> SessionRecord {
        SessionRecord {
            id: id.into(),
            workspace: workspace.into(),
            task: "\nadd tests for the demo library\n\nAttached files: …".into(),
            provider: "deepseek".into(),
            model: "deepseek-chat".into(),
            mode: "react".into(),
            status: SessionStatus::Completed,
            iterations: 3,
            usage: Usage {
                cost_usd: cost,
                ..Usage::default()
            },
            created_at,
            updated_at: created_at,
            lease: None,
            base_url: String::new(),
            script: String::new(),
            repo: None,
        }
    }

    #[test]
    fn the_table_shows_full_ids_model_cost_age_title_and_the_workspace_when_asked() {
        let now = 10 * 86_400_000;
        let rows = [
            record(
                "20261121-215800-abc123",
                "/home/u/src/app",
                0.0123,
                now - 90_000,
            ),
            record(
                "20261120-101010-def456",
                "/home/u/src/other",
                0.0,
                now - 3 * 86_400_000,
            ),
        ];
        let t = table(&rows, true, now);
        let lines: Vec<&str> = t.lines().collect();
        assert!(
            lines[0].contains("WORKSPACE") && lines[0].ends_with("TITLE"),
            "{t}"
        );
        assert!(
            lines[1].starts_with("20261121-215800-abc123  completed"),
            "{t}"
        );
        assert!(lines[1].contains("deepseek/deepseek-chat") && lines[1].contains("$0.01"));
        assert!(
            lines[1].contains(" 1m ") && lines[2].contains(" 3d "),
            "{t}"
        );
        assert!(lines[1].contains("/home/u/src/app"));
        assert!(lines[1].ends_with("add tests for the demo library"), "{t}");
        assert!(lines[2].contains("—"), "no cost reported: {t}");
        assert!(!table(&rows, false, now).contains("WORKSPACE"));
        assert_eq!(tail("/a/very/long/path/to/a/workspace", 10), "…workspace");
    }
}
