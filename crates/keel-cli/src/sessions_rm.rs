//! `keel sessions rm` and `keel sessions prune`: deleting stored sessions together with the
//! workspace snapshots they left (refs under `refs/keel/*/<session>/`), which nothing else
//! ever deletes.

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use keel_protocol::SessionStatus;
use keel_snapshot::Snapshots;
use keel_store::{SessionRecord, Store, now_ms};

use crate::exit;
use crate::render::one_line;
use crate::setup::sessions_in;
use crate::setup::{UsageError, store_usage_error};

/// Deletes the sessions named by `ids` (full ids or unique prefixes). Every id is checked
/// before anything is deleted.
pub fn remove(store: &dyn Store, ids: &[String]) -> anyhow::Result<u8> {
    let mut records: Vec<SessionRecord> = Vec::new();
    for id in ids {
        let record = crate::setup::wait(store.get_session(id)).map_err(store_usage_error)?;
        refuse_running(&record)?;
        if !records.iter().any(|r| r.id == record.id) {
            records.push(record);
        }
    }
    let mut out = crate::out::stdout();
    for record in &records {
        let note = delete(store, record)?;
        writeln!(out, "removed {}{note}", record.id)?;
    }
    Ok(exit::COMPLETED)
}

/// Deletes the sessions of `workspace` (every workspace's when `None`) not updated within
/// `older_than` (`30d`, `12h` …); running sessions are kept.
pub fn prune(
    store: &dyn Store,
    workspace: Option<&Path>,
    older_than: &str,
    dry_run: bool,
) -> anyhow::Result<u8> {
    let age = parse_age(older_than).map_err(UsageError)?;
    let cutoff = now_ms().saturating_sub(age.as_millis() as u64);
    let old: Vec<SessionRecord> = sessions_in(store, workspace, usize::MAX)?
        .into_iter()
        .filter(|s| s.updated_at < cutoff && !is_running(s))
        .collect();
    let mut out = crate::out::stdout();
    if old.is_empty() {
        writeln!(out, "No sessions older than {older_than} to prune.")?;
        return Ok(exit::COMPLETED);
    }
    for record in &old {
        if dry_run {
            writeln!(
                out,
                "would remove {}  {}",
                record.id,
                one_line(record.task.lines().next().unwrap_or(""), 50)
            )?;
        } else {
            let note = delete(store, record)?;
            writeln!(out, "removed {}{note}", record.id)?;
        }
    }
    let verb = if dry_run { "would remove" } else { "removed" };
    writeln!(
        out,
        "{verb} {} older than {older_than}",
        keel_tools::text::count(old.len(), "session", "sessions")
    )?;
    Ok(exit::COMPLETED)
}

fn is_running(s: &SessionRecord) -> bool {
    s.status == SessionStatus::Running && !s.is_interrupted()
}

fn refuse_running(s: &SessionRecord) -> anyhow::Result<()> {
    if is_running(s) {
        return Err(UsageError(format!(
            "session {} is running ({}); cancel it first (Ctrl-C, or POST …/cancel on the server)",
            s.id,
            s.lease
                .as_ref()
                .map_or_else(|| "?".to_string(), |l| l.holder.clone())
        ))
        .into());
    }
    Ok(())
}

/// Deletes the session's snapshot refs, then the session; returns a note for the line.
fn delete(store: &dyn Store, record: &SessionRecord) -> anyhow::Result<String> {
    // Snapshots first: a failure leaves the session listed, so the command can be repeated.
    let note = match forget_snapshots(record) {
        Ok(0) => String::new(),
        Ok(n) => format!(
            " and {}",
            keel_tools::text::count(n, "snapshot ref", "snapshot refs")
        ),
        Err(e) => format!(" (its snapshots were left in place: {e})"),
    };
    crate::setup::wait(store.delete_session(&record.id))?;
    Ok(note)
}

fn forget_snapshots(record: &SessionRecord) -> anyhow::Result<usize> {
    let workspace = Path::new(&record.workspace);
    if !workspace.is_dir() {
        // The workspace is gone, and its snapshots with it.
        return Ok(0);
    }
    Ok(Snapshots::open(workspace)?.forget(&record.id)?)
}

/// `30d`, `12h`, `90m`, `45s`, `2w`.
pub fn parse_age(text: &str) -> Result<Duration, String> {
    let bad = || {
        format!("`{text}` is not an age; use a number and a unit: s, m, h, d or w (e.g. 30d, 12h)")
    };
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
    let (number, unit) = text.split_at(split);
    let n: u64 = number.parse().map_err(|_| bad())?;
    let secs = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3_600,
        "d" => 86_400,
        "w" => 604_800,
        _ => return Err(bad()),
    };
    Ok(Duration::from_secs(n.saturating_mul(secs)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_parse_with_units_and_bad_ones_say_how() {
        assert_eq!(parse_age("30d"), Ok(Duration::from_secs(30 * 86_400)));
        assert_eq!(parse_age("12h"), Ok(Duration::from_secs(12 * 3_600)));
        assert_eq!(parse_age("2w"), Ok(Duration::from_secs(14 * 86_400)));
        for bad in ["30", "d", "30 days", "-1d", ""] {
            let e = parse_age(bad).err().unwrap_or_default();
            assert!(e.contains("e.g. 30d"), "{bad}: {e}");
        }
    }
}
