//! `keel undo` and `keel snapshots`: the automatic workspace snapshots sessions take before
//! their writes, listed and restored.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use keel_config::Layer;
use keel_engine::runtime::{UndoError, undo_session};
use keel_protocol::SessionStatus;
use keel_snapshot::{RedoReport, SnapshotError, SnapshotInfo, Snapshots, UndoReport};
use keel_store::{SessionRecord, Store, StoreError};

use crate::args::{SnapshotsArgs, UndoArgs};
use crate::exit;
use crate::render::when;
use crate::setup::{self, UsageError};

/// The workspace, the store and the session record named by `--session` (if any).
fn locate(
    workspace: Option<&Path>,
    session: Option<&str>,
) -> anyhow::Result<(
    std::path::PathBuf,
    std::sync::Arc<keel_store::SqliteStore>,
    Option<SessionRecord>,
)> {
    let cwd = setup::workspace_dir(workspace)?;
    let config = setup::load_config(&cwd, Layer::from_overrides(&[]))?;
    let store = setup::open_store(&config)?;
    let Some(id) = session else {
        return Ok((cwd, store, None));
    };
    let record = setup::wait(store.get_session(id)).map_err(setup::store_usage_error)?;
    let ws = match workspace {
        Some(_) => cwd,
        // A session's snapshots live in the workspace it ran in.
        None => setup::session_workspace(&record)?,
    };
    Ok((ws, store, Some(record)))
}

fn open_snapshots(workspace: &Path) -> anyhow::Result<Snapshots> {
    Snapshots::open(workspace).map_err(|e| UsageError(e.to_string()).into())
}

pub fn undo(args: UndoArgs) -> anyhow::Result<u8> {
    let (workspace, store, record) =
        locate(args.common.workspace.as_deref(), args.session.as_deref())?;
    let snaps = open_snapshots(&workspace)?;
    let session = match &record {
        Some(r) => {
            if r.workspace != workspace.display().to_string() {
                return Err(UsageError(format!(
                    "session {} ran in {}, not {}; undo it there (omit --workspace)",
                    r.id,
                    r.workspace,
                    workspace.display()
                ))
                .into());
            }
            if r.status == SessionStatus::Running && !r.is_interrupted() {
                return Err(UsageError(format!(
                    "session {} is still running; cancel it before undoing its changes",
                    r.id
                ))
                .into());
            }
            r.id.clone()
        }
        None => latest_session(&snaps, store.as_ref(), &workspace)?,
    };
    if args.list {
        return list(&snaps, &session, args.json);
    }
    if args.redo {
        let report = snaps.redo(&session).map_err(refusal)?;
        let mut out = crate::out::stdout();
        if args.json {
            writeln!(out, "{}", crate::out::json_pretty(&report)?)?;
        } else {
            print_redo(&mut out, &report)?;
        }
        return Ok(exit::COMPLETED);
    }
    // Undo exists once: the engine's `undo_session` restores and records the `undo` event.
    let record = match record {
        Some(r) => r,
        None => store
            .db()
            .get_session(&session)
            .unwrap_or_else(|_| orphan(&session, &workspace)),
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let store: Arc<dyn Store> = store;
    let report = runtime
        .block_on(undo_session(&store, &record, args.to, Vec::new()))
        .map_err(|e| match e {
            UndoError::NothingToUndo(m) | UndoError::Busy(m) => UsageError(m).into(),
            UndoError::Snapshot(s) => refusal(s),
            other => anyhow::Error::new(other).context("the undo failed"),
        })?;
    let mut out = crate::out::stdout();
    if args.json {
        writeln!(out, "{}", crate::out::json_pretty(&report)?)?;
        return Ok(exit::COMPLETED);
    }
    print_report(&mut out, &report)?;
    Ok(exit::COMPLETED)
}

/// Snapshot errors caused by what the user asked (nothing to undo or redo) are usage errors.
fn refusal(e: SnapshotError) -> anyhow::Error {
    match e {
        SnapshotError::NoSnapshots(_)
        | SnapshotError::NothingAfter { .. }
        | SnapshotError::AtOldest { .. }
        | SnapshotError::NothingToRedo(_)
        | SnapshotError::RedoStale { .. } => UsageError(e.to_string()).into(),
        other => anyhow::Error::new(other).context("the undo failed"),
    }
}

/// `keel undo --list`: the session's snapshots, where the workspace is, what undo restores.
fn list(snaps: &Snapshots, session: &str, json: bool) -> anyhow::Result<u8> {
    let history = snaps.history(session).map_err(refusal)?;
    let mut out = crate::out::stdout();
    if json {
        writeln!(out, "{}", crate::out::json_pretty(&history)?)?;
        return Ok(exit::COMPLETED);
    }
    if history.is_empty() {
        writeln!(out, "Session {session} has no snapshots here.")?;
        return Ok(exit::COMPLETED);
    }
    writeln!(
        out,
        "Snapshots of session {session} (restore one with `keel undo --to TURN`):"
    )?;
    writeln!(
        out,
        "{:>5}  {:<10}  {:<16}  NOTE",
        "TURN", "COMMIT", "TAKEN (UTC)"
    )?;
    for h in &history {
        let s = &h.snapshot;
        let mut notes = Vec::new();
        if h.current {
            notes.push("← the workspace now");
        }
        if h.next_undo {
            notes.push("← `keel undo` restores this");
        }
        if h.unchanged {
            notes.push("(same as the one before)");
        }
        writeln!(
            out,
            "{:>5}  {:<10}  {:<16}  {}",
            s.turn,
            &s.commit[..s.commit.len().min(10)],
            when(s.created * 1000),
            notes.join(" ")
        )?;
    }
    if !history.iter().any(|h| h.current) {
        writeln!(out, "The workspace has changes after the last snapshot.")?;
    }
    Ok(exit::COMPLETED)
}

fn print_redo(out: &mut impl Write, report: &RedoReport) -> std::io::Result<()> {
    writeln!(
        out,
        "Redid the last undo of session {}: the workspace is back to the state it replaced ({}); {} changed:",
        report.session,
        &report.commit[..report.commit.len().min(10)],
        keel_tools::text::count(report.changes.len(), "file", "files")
    )?;
    let c = &report.changes;
    for (label, files) in [
        ("modified ", &c.modified),
        ("recreated", &c.recreated),
        ("removed  ", &c.removed),
    ] {
        for f in files {
            writeln!(out, "  {label}  {f}")?;
        }
    }
    print_left_alone(out, c)?;
    Ok(())
}

/// The files a restore did not touch because no snapshot records them (over `[snapshots]
/// max_file_mb`, or named so git refuses them).
fn print_left_alone(out: &mut impl Write, c: &keel_snapshot::RestoreReport) -> std::io::Result<()> {
    for f in &c.left_alone {
        writeln!(
            out,
            "  left alone {f} (never recorded: larger than [snapshots] max_file_mb, or a name git refuses; not restored)"
        )?;
    }
    if let Some(checked) = &c.checked {
        writeln!(out, "{checked}")?;
    }
    Ok(())
}

/// The newest session of this workspace, as Keel's store records it, with snapshots here.
/// Snapshot refs of a session the store does not know are passed over: a repository can ship
/// `refs/keel/snapshots/<future-dated session>/0` in its `.git`, and a plain `keel undo` then
/// restored the shipped tree — a planted `.husky/pre-commit` — instead of the user's own
/// session (red-team pass 6, R6-18).
fn latest_session(
    snaps: &Snapshots,
    store: &dyn Store,
    workspace: &Path,
) -> anyhow::Result<String> {
    let here = workspace.display().to_string();
    let mut unknown = 0usize;
    for id in snaps.sessions()? {
        match setup::wait(store.get_session(&id)) {
            // A repository shared by several workspaces holds their sessions' snapshots too.
            Ok(r) if r.workspace != here => continue,
            Ok(_) => return Ok(id),
            Err(StoreError::NotFound(_)) => unknown += 1,
            Err(e) => return Err(e.into()),
        }
    }
    let also = if unknown > 0 {
        format!(
            " ({} of sessions Keel has no record of — shipped with the repository, or of a deleted session — are never undone)",
            keel_tools::text::count(unknown, "snapshot set", "snapshot sets")
        )
    } else {
        String::new()
    };
    Err(UsageError(format!(
        "no session has snapshots in {here}{also}; snapshots are taken before a session's first change of each turn"
    ))
    .into())
}

/// The record of a session whose snapshots outlived its stored history (deleted): its undo is
/// not logged.
fn orphan(id: &str, workspace: &Path) -> SessionRecord {
    SessionRecord {
        id: id.to_string(),
        workspace: workspace.display().to_string(),
        task: String::new(),
        provider: String::new(),
        model: String::new(),
        mode: String::new(),
        status: SessionStatus::Completed,
        iterations: 0,
        usage: keel_protocol::Usage::default(),
        created_at: 0,
        updated_at: 0,
        lease: None,
        base_url: String::new(),
        script: String::new(),
        repo: None,
    }
}

fn print_report(out: &mut impl Write, report: &UndoReport) -> std::io::Result<()> {
    let short = &report.commit[..report.commit.len().min(10)];
    let c = &report.changes;
    if c.is_empty() {
        writeln!(
            out,
            "The workspace already matches the end of turn {} of session {} (snapshot {short}); nothing changed.",
            report.turn, report.session
        )?;
    } else {
        writeln!(
            out,
            "Restored the workspace to the end of turn {} of session {} (snapshot {short}); {} changed:",
            report.turn,
            report.session,
            keel_tools::text::count(c.len(), "file", "files")
        )?;
        for (label, files) in [
            ("modified ", &c.modified),
            ("recreated", &c.recreated),
            ("removed  ", &c.removed),
        ] {
            for f in files {
                writeln!(out, "  {label}  {f}")?;
            }
        }
    }
    print_left_alone(out, c)?;
    if let Some(replaced) = &report.replaced {
        writeln!(
            out,
            "The state before this undo is kept as commit {}: `keel undo --redo` brings it back; `keel undo` again steps further back.",
            &replaced[..replaced.len().min(10)]
        )?;
    }
    Ok(())
}

pub fn snapshots(args: SnapshotsArgs) -> anyhow::Result<u8> {
    let (workspace, _store, record) =
        locate(args.common.workspace.as_deref(), args.session.as_deref())?;
    let snaps = open_snapshots(&workspace)?;
    let sessions = match &record {
        Some(r) => vec![r.id.clone()],
        None => snaps.sessions()?,
    };
    let mut all: Vec<SnapshotInfo> = Vec::new();
    for s in &sessions {
        all.extend(snaps.list(s)?);
    }
    let mut out = crate::out::stdout();
    if args.json {
        writeln!(out, "{}", crate::out::json_pretty(&all)?)?;
        return Ok(exit::COMPLETED);
    }
    if all.is_empty() {
        writeln!(
            out,
            "No snapshots in {}. Sessions take one before their first change of each turn.",
            workspace.display()
        )?;
        return Ok(exit::COMPLETED);
    }
    writeln!(
        out,
        "{:<22}  {:>4}  {:<10}  TAKEN (UTC)",
        "SESSION", "TURN", "COMMIT"
    )?;
    for s in &all {
        writeln!(
            out,
            "{:<22}  {:>4}  {:<10}  {}",
            s.session,
            s.turn,
            &s.commit[..s.commit.len().min(10)],
            when(s.created * 1000)
        )?;
    }
    writeln!(
        out,
        "Restore one with: keel undo --session SESSION --to TURN (the workspace as it was at the end of that turn); `keel undo` steps back one at a time, `keel undo --list` shows where you are"
    )?;
    Ok(exit::COMPLETED)
}

#[cfg(test)]
mod tests {
    #![allow(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::disallowed_methods,
        clippy::disallowed_macros
    )]
    use super::*;

    /// Red-team pass 6, R6-18: a repository shipped `refs/keel/snapshots/<future-dated
    /// session>/0`; the user's plain `keel undo` after an ordinary session restored the shipped
    /// snapshot. Only sessions Keel's store records are undone.
    #[test]
    fn a_shipped_snapshot_ref_is_never_the_session_undone() {
        if !keel_snapshot::git_available() {
            assert!(std::env::var_os("CI").is_none(), "CI needs git");
            println!("SKIPPED: no git");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir(&ws).unwrap();
        std::fs::write(ws.join("a.txt"), "a\n").unwrap();
        let git = |args: &[&str]| {
            let ok = std::process::Command::new("git")
                .args(["-c", "user.name=t", "-c", "user.email=t@t"])
                .args(args)
                .current_dir(&ws)
                .output()
                .unwrap()
                .status
                .success();
            assert!(ok, "git {args:?}");
        };
        git(&["init", "-q"]);
        git(&["add", "."]);
        git(&["commit", "-qm", "init"]);
        let snaps = Snapshots::open(&ws).unwrap();
        // The user's own session, recorded by the store.
        let store = keel_store::SqliteStore::open(&dir.path().join("keel.db")).unwrap();
        let here = ws.display().to_string();
        setup::wait(keel_store::Store::create_session(
            &store,
            &keel_store::NewSession {
                id: "20261129-010000-user01".into(),
                workspace: here.clone(),
                task: "t".into(),
                provider: "scripted".into(),
                model: "m".into(),
                mode: "default".into(),
                base_url: String::new(),
                script: String::new(),
                repo: None,
            },
        ))
        .unwrap();
        snaps.take("20261129-010000-user01", 0, None).unwrap();
        // The shipped one: a session nobody ran here, newer than anything.
        std::fs::write(ws.join("a.txt"), "shipped\n").unwrap();
        snaps.take("20301231-000000-aaaaaa", 0, None).unwrap();
        std::fs::write(ws.join("a.txt"), "a\n").unwrap();
        assert_eq!(
            snaps.sessions().unwrap().first().map(String::as_str),
            Some("20301231-000000-aaaaaa"),
            "the shipped session looks newest"
        );
        let chosen = latest_session(&snaps, &store, &ws).unwrap();
        assert_eq!(chosen, "20261129-010000-user01");
        // With no session of its own, undo refuses rather than restore the shipped one.
        let other = tempfile::tempdir().unwrap();
        let empty = keel_store::SqliteStore::open(&other.path().join("keel.db")).unwrap();
        let err = latest_session(&snaps, &empty, &ws).unwrap_err().to_string();
        assert!(err.contains("no record of"), "{err}");
    }
}
