//! What the post-command checks could not check, and what the user hears of every check
//! (red-team pass 10, R10-22: past the loaded-code walk's bound the check stopped, and the
//! only trace was a line in the tool result — read by the model, which had planted the file;
//! the user's terminal showed "✓ exit code: 0").
//!
//! Two rules, in one place so a new check cannot forget them:
//!
//! - **A bound is a [`Cut`].** Every check that stops at a bound, or cannot run (git could not
//!   tell what it ignores, a file system cannot be watched), returns a `Cut` — never a line
//!   of its report. The runner's one post-command check ([`super::nested_git::Watch`])
//!   collects them.
//! - **A cut fails closed and is told to the user.** What could not be checked is treated as
//!   suspect: until a later check of the same workspace completes whole, every command nobody
//!   approved runs with the workspace read-only ([`held`], applied by [`super::exec::run`]):
//!   it cannot add to what nobody looked at, and it cannot be asked to "fix" it unseen. (Moving
//!   "what was not checked" aside is not possible — it is not known — and re-running the
//!   command read-only cannot undo what it wrote; checks that can fall back to a cheaper
//!   pass do so first, [`super::loaded_code::by_listing`].) Every report of the checks —
//!   what was moved aside, what was not checked — is also queued as a [`Notice`] for the
//!   workspace, which the engine turns into a `workspace_check` event after the tool call
//!   (the same stream `keel run --json`, `keel chat` and the server show), not only text in
//!   the result the model reads.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// A check stopped at a bound or could not run: what it left unchecked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Cut {
    /// The check, in a word or two (`loaded code`, `planted repositories`).
    pub(crate) check: &'static str,
    /// What was not checked, and why (one sentence, no trailing period).
    pub(crate) what: String,
    /// How a cheaper pass checked it instead, when one did (then nothing is held): said to
    /// the user all the same.
    pub(crate) covered: Option<String>,
}

impl Cut {
    pub(crate) fn new(check: &'static str, what: impl Into<String>) -> Self {
        Self {
            check,
            what: what.into(),
            covered: None,
        }
    }

    /// The same cut, checked instead as `how` says.
    pub(crate) fn covered(mut self, how: impl Into<String>) -> Self {
        self.covered = Some(how.into());
        self
    }
}

/// The report of `cuts`, for the command's result and the user.
pub(crate) fn report(cuts: &[Cut]) -> Option<String> {
    if cuts.is_empty() {
        return None;
    }
    let open = cuts.iter().any(|c| c.covered.is_none());
    let mut text = String::from(if open {
        "keel: NOT everything this command could have changed was checked; what Keel could not look at is treated as suspect — commands nobody approved run with the workspace read-only until a later check completes whole. Review `git status --ignored` before running the project's tools or tests:"
    } else {
        "keel: a check of what this command changed reached its bound; a second pass looked at the rest:"
    });
    for c in cuts {
        match &c.covered {
            None => text.push_str(&format!("\n- {}: {} (NOT checked)", c.check, c.what)),
            Some(how) => text.push_str(&format!("\n- {}: {}; {how}", c.check, c.what)),
        }
    }
    Some(text)
}

/// Something the post-command checks did or could not do, for the user to see.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    /// True when something was not checked ([`Cut`]).
    pub unchecked: bool,
    /// The report, as the command's result says it.
    pub text: String,
}

/// Notices not yet taken, per workspace root.
static NOTICES: Mutex<BTreeMap<PathBuf, Vec<Notice>>> = Mutex::new(BTreeMap::new());

/// The most notices kept per workspace before they are taken (older ones go first).
const MAX_NOTICES: usize = 64;

/// Queues `notice` for the user of the session working in `root`.
pub(crate) fn tell(root: &Path, notice: Notice) {
    let mut all = NOTICES.lock().unwrap_or_else(|e| e.into_inner());
    let mine = all.entry(root.to_path_buf()).or_default();
    if mine.len() >= MAX_NOTICES {
        mine.remove(0);
    }
    mine.push(notice);
}

/// The notices queued for `root` since the last call (the engine emits each as an event).
pub fn take_notices(root: &Path) -> Vec<Notice> {
    let mut all = NOTICES.lock().unwrap_or_else(|e| e.into_inner());
    all.remove(root).unwrap_or_default()
}

/// Workspaces whose last post-command check was cut, with what was not checked.
static HELD: Mutex<BTreeMap<PathBuf, Vec<Cut>>> = Mutex::new(BTreeMap::new());

/// After a post-command check of `root`: held read-only while `cuts` is not empty, released
/// when a check completed whole.
pub(crate) fn settle(root: &Path, cuts: &[Cut]) {
    let open: Vec<Cut> = cuts
        .iter()
        .filter(|c| c.covered.is_none())
        .cloned()
        .collect();
    let mut all = HELD.lock().unwrap_or_else(|e| e.into_inner());
    if open.is_empty() {
        all.remove(root);
    } else {
        all.insert(root.to_path_buf(), open);
    }
}

/// Why commands nobody approved run read-only in `root` (an earlier check was cut), or `None`.
pub(crate) fn held(root: &Path) -> Option<String> {
    let all = HELD.lock().unwrap_or_else(|e| e.into_inner());
    let cuts = all.get(root)?;
    let what: Vec<String> = cuts
        .iter()
        .map(|c| format!("{}: {}", c.check, c.what))
        .collect();
    Some(format!(
        "keel: an earlier command's check could not look at everything it could have changed ({}); until a check completes whole, commands nobody approved run with the workspace read-only. Ask the user to review `git status --ignored` and to approve a command that must write (or to remove the files that made the check too large)",
        what.join("; ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_holds_the_workspace_until_a_whole_check() {
        let root = Path::new("/nonexistent/bounds-test");
        assert!(held(root).is_none());
        settle(root, &[Cut::new("loaded code", "more than 3 files")]);
        let why = held(root).unwrap_or_default();
        assert!(why.contains("more than 3 files"), "{why}");
        settle(root, &[]);
        assert!(held(root).is_none());
        settle(root, &[Cut::new("loaded code", "x").covered("listed")]);
        assert!(held(root).is_none(), "a covered cut holds nothing");
        tell(
            root,
            Notice {
                unchecked: true,
                text: "x".into(),
            },
        );
        assert_eq!(take_notices(root).len(), 1);
        assert!(take_notices(root).is_empty());
    }
}
