//! A command runs with the project files it was judged by (red-team pass 6, R6-15).
//!
//! `make test`, `npm test`, `sh build.sh` are judged by the files they run (the Makefile and
//! what it includes, package.json's script, the script's text: [`super::project`]), and a
//! person may approve them as they read. Between that judgement and the spawn — seconds while
//! the gate decides, minutes while a person reads — and while the command runs, another
//! command of the session (a subagent's, in parallel) could swap the Makefile, and the
//! approved line would run what nobody judged. Two rules close that, both in the one command
//! runner ([`super::exec::run`]), for every file any judgement reads:
//!
//! - **What was let run is checked again at the spawn.** When the approval gate lets a shell
//!   line run it records the files that line was judged by, with their content hash (and the
//!   files it looked for and did not find) — [`let_run`]. The runner, about to start that same
//!   line in the same place, reads those files again beneath the workspace handle and starts it
//!   only if they are exactly as judged (one recorded judgement per start); otherwise nothing
//!   runs and the result says which file changed.
//! - **Nothing else in the workspace runs or writes meanwhile.** A judged line holds the
//!   workspace's lock exclusively from that check until the command and the runner's
//!   post-command checks are done; every other command that may write, and every file tool's
//!   write, holds it shared. Processes a command leaves behind die with it (its PID
//!   namespace), so no writer of this Keel process is left running beside a judged command.
//!
//! What it does not cover: a line the gate never judged (a flow's command, `keel chat`'s `!`)
//! is only locked, not compared; a process outside this Keel (the user's editor, another
//! `keel` on the same tree, a command run with the sandbox off that left a process behind)
//! can still change the files. The command itself may change them: that is the approved code.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{OwnedRwLockReadGuard, OwnedRwLockWriteGuard, RwLock};

use super::Analysis;

/// A file a judgement read (its content hash, 64 bits of SHA-256) or looked for and did not find
/// (`None`), workspace-relative.
pub type JudgedFile = (PathBuf, Option<u64>);

/// A shell line a judgement let run: the workspace, where it runs, the line, and the project
/// files it was judged by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JudgedRun {
    root: PathBuf,
    cwd: PathBuf,
    line: String,
    files: Vec<JudgedFile>,
}

impl JudgedRun {
    /// The judgement `analysis` of `line`, run in `cwd` in the workspace `root`; `None` when
    /// it read no project file (nothing to hold it to).
    pub fn of(root: &Path, cwd: &Path, line: &str, analysis: &Analysis) -> Option<Self> {
        let mut files: Vec<JudgedFile> = analysis
            .sources
            .iter()
            .map(|s| (s.path.clone(), Some(s.hash)))
            .collect();
        files.extend(analysis.absent.iter().map(|p| (p.clone(), None)));
        if files.is_empty() {
            return None;
        }
        files.sort();
        files.dedup();
        Some(Self {
            root: canonical(root),
            cwd: canonical(cwd),
            line: line.trim().to_string(),
            files,
        })
    }
}

fn canonical(p: &Path) -> PathBuf {
    p.canonicalize().unwrap_or_else(|_| p.to_path_buf())
}

/// Judgements let run and not started yet, oldest first.
static LET_RUN: Mutex<Vec<(Instant, JudgedRun)>> = Mutex::new(Vec::new());
/// The most judgements kept; older ones are dropped first.
const MAX_KEPT: usize = 256;
/// How long a judgement waits for its start.
const KEPT_FOR: Duration = Duration::from_secs(3600);

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The approval gate let `run` go ahead: the runner starts that line (once) only while its
/// files are as judged.
pub fn let_run(run: JudgedRun) {
    let mut kept = lock(&LET_RUN);
    kept.retain(|(at, _)| at.elapsed() < KEPT_FOR);
    if kept.len() >= MAX_KEPT {
        kept.remove(0);
    }
    kept.push((Instant::now(), run));
}

/// The workspaces' locks.
static LOCKS: Mutex<Vec<(PathBuf, Arc<RwLock<()>>)>> = Mutex::new(Vec::new());

fn workspace_lock(root: &Path) -> Arc<RwLock<()>> {
    let root = canonical(root);
    let mut locks = lock(&LOCKS);
    if let Some((_, l)) = locks.iter().find(|(r, _)| *r == root) {
        return l.clone();
    }
    let l = Arc::new(RwLock::new(()));
    locks.push((root, l.clone()));
    l
}

/// What a run holds of its workspace's lock until it is done.
#[derive(Debug)]
pub(crate) enum Hold {
    None,
    #[allow(dead_code)]
    Shared(OwnedRwLockReadGuard<()>),
    #[allow(dead_code)]
    Exclusive(OwnedRwLockWriteGuard<()>),
}

/// [`hold`] for the one runner's request: a shell line (`bash -c LINE`) in its workspace.
pub(crate) async fn hold_for(req: &super::exec::ExecRequest) -> std::io::Result<Hold> {
    let Some(root) = &req.roots.workspace else {
        return Ok(Hold::None);
    };
    let line = match req.argv.as_slice() {
        [_, flag, line] if flag == "-c" => line.to_str(),
        _ => None,
    };
    let writes = req.policy != crate::sandbox::SandboxPolicy::ReadOnly;
    // A tree holding a link on the way to a protected store (a home workspace with dotfile
    // links): a writing command runs alone, so none notes a link another has re-pointed and
    // puts that back at its end (red-team pass 8, R8-2).
    // The links on the way to the program paths the user's git runs count too (R7-27).
    let alone = writes
        && !super::store_links::StoreLinks::note(
            &req.roots.for_policy(req.policy),
            &req.roots.hidden,
            &crate::sandbox::git_config_paths(root)
                .into_iter()
                .map(|p| root.join(p.path))
                .collect::<Vec<_>>(),
        )
        .is_empty();
    hold(
        root,
        &req.cwd,
        line,
        writes,
        alone,
        req.timeout,
        &req.cancel,
    )
    .await
}

/// The shared hold of a file tool's write in `root` (while the tool runs).
pub(crate) async fn hold_for_write(root: &Path) -> Hold {
    Hold::Shared(workspace_lock(root).read_owned().await)
}

/// Before the runner starts `line` in `cwd` (in `root`, which it may write when `writes`):
/// takes the workspace's lock — exclusively when a judgement let this line run (after which
/// its files are checked against that judgement) or when `alone` — waiting at most `wait`
/// (or until `cancel`). `Err`: why it must not start.
pub(crate) async fn hold(
    root: &Path,
    cwd: &Path,
    line: Option<&str>,
    writes: bool,
    alone: bool,
    wait: Duration,
    cancel: &tokio_util::sync::CancellationToken,
) -> std::io::Result<Hold> {
    let (root, cwd) = (canonical(root), canonical(cwd));
    let line = line.map(str::trim);
    let judged = line.is_some_and(|l| {
        lock(&LET_RUN)
            .iter()
            .any(|(_, r)| r.root == root && r.cwd == cwd && r.line == l)
    });
    if !judged && !writes {
        return Ok(Hold::None);
    }
    let l = workspace_lock(&root);
    let busy = || {
        std::io::Error::other(
            "another command in this workspace was still running when this one's time ran out; nothing ran",
        )
    };
    let hold = tokio::select! {
        h = async {
            if judged || alone {
                Hold::Exclusive(l.write_owned().await)
            } else {
                Hold::Shared(l.read_owned().await)
            }
        } => h,
        () = tokio::time::sleep(wait) => return Err(busy()),
        () = cancel.cancelled() => return Err(std::io::Error::other("cancelled before it started")),
    };
    if let (true, Some(line)) = (judged, line) {
        let root2 = root.clone();
        let line = line.to_string();
        tokio::task::spawn_blocking(move || start_as_judged(&root2, &cwd, &line))
            .await
            .map_err(std::io::Error::other)??;
    }
    Ok(hold)
}

/// Takes the first judgement of `line` whose files are as they are now; `Err` naming what
/// changed when none is.
fn start_as_judged(root: &Path, cwd: &Path, line: &str) -> std::io::Result<()> {
    let runs: Vec<(usize, JudgedRun)> = lock(&LET_RUN)
        .iter()
        .enumerate()
        .filter(|(_, (_, r))| r.root == root && r.cwd == cwd && r.line == line)
        .map(|(i, (_, r))| (i, r.clone()))
        .collect();
    let mut changed: Vec<String> = Vec::new();
    for (_, run) in &runs {
        let differ = differing(root, &run.files);
        if differ.is_empty() {
            let mut kept = lock(&LET_RUN);
            if let Some(at) = kept.iter().position(|(_, r)| r == run) {
                kept.remove(at);
            }
            return Ok(());
        }
        for f in differ {
            if !changed.contains(&f) {
                changed.push(f);
            }
        }
    }
    Err(std::io::Error::other(format!(
        "{} changed after this command was judged and approved; nothing ran. Run it again to have it judged as it is now",
        changed.join(", ")
    )))
}

/// The files of `files` that are not as judged now, named (`Makefile`, `local.mk (new)`).
fn differing(root: &Path, files: &[JudgedFile]) -> Vec<String> {
    let mut project = super::project::Project::new(root, root, false);
    let mut out = Vec::new();
    for (rel, hash) in files {
        let now = match project.read_at(&root.join(rel), "judged") {
            Ok(Some(_)) => project.sources.last().map(|s| s.hash),
            Ok(None) => None,
            Err(_) => Some(0),
        };
        if now != *hash {
            out.push(match (hash, now) {
                (None, _) => format!("`{}` (new)", rel.display()),
                (_, None) => format!("`{}` (gone)", rel.display()),
                _ => format!("`{}`", rel.display()),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_judged_line_starts_only_with_the_files_it_was_judged_by() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let root = dir.path();
        std::fs::write(root.join("Makefile"), "test:\n\tpytest\n")
            .unwrap_or_else(|e| panic!("{e}"));
        let judge = || {
            let a = super::super::CommandSafety::new().classify_in_project("make test", root);
            JudgedRun::of(root, root, "make test", &a)
        };
        let run = judge().unwrap_or_else(|| panic!("make test reads the Makefile"));
        let cancel = tokio_util::sync::CancellationToken::new();
        let start = || {
            hold(
                root,
                root,
                Some("make test"),
                true,
                false,
                Duration::from_secs(5),
                &cancel,
            )
        };
        // Judged and let run: starts once.
        let_run(run.clone());
        assert!(matches!(start().await, Ok(Hold::Exclusive(_))));
        // The judgement is used up: another start of the same line is not compared.
        assert!(matches!(start().await, Ok(Hold::Shared(_))));
        // Swapped after the judgement: nothing starts, and the result names the file.
        let_run(run.clone());
        std::fs::write(root.join("Makefile"), "test:\n\trm -rf src\n")
            .unwrap_or_else(|e| panic!("{e}"));
        let e = start()
            .await
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains("`Makefile` changed"), "{e}");
        // A makefile make would read first appearing is a change too.
        std::fs::write(root.join("Makefile"), "test:\n\tpytest\n")
            .unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(root.join("GNUmakefile"), "test:\n\trm -rf src\n")
            .unwrap_or_else(|e| panic!("{e}"));
        let e = start()
            .await
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains("`GNUmakefile` (new)"), "{e}");
        std::fs::remove_file(root.join("GNUmakefile")).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            matches!(start().await, Ok(Hold::Exclusive(_))),
            "as judged again"
        );
    }

    #[tokio::test]
    async fn a_judged_line_waits_for_the_workspaces_writers_and_they_for_it() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let root = dir.path().to_path_buf();
        std::fs::write(root.join("build.sh"), "echo hi\n").unwrap_or_else(|e| panic!("{e}"));
        let a = super::super::CommandSafety::new().classify_in_project("sh build.sh", &root);
        let run = JudgedRun::of(&root, &root, "sh build.sh", &a).unwrap_or_else(|| panic!());
        let cancel = tokio_util::sync::CancellationToken::new();
        // A write in progress (a subagent's file tool): the judged line waits for it.
        let writer = hold_for_write(&root).await;
        let_run(run);
        let short = Duration::from_millis(200);
        let e = hold(
            &root,
            &root,
            Some("sh build.sh"),
            true,
            false,
            short,
            &cancel,
        )
        .await;
        assert!(e.is_err(), "started beside a writer");
        drop(writer);
        let held = hold(
            &root,
            &root,
            Some("sh build.sh"),
            true,
            false,
            short,
            &cancel,
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(held, Hold::Exclusive(_)));
        // While it runs, another command that may write waits.
        let other = hold(&root, &root, Some("touch x"), true, false, short, &cancel).await;
        assert!(other.is_err(), "ran beside a judged command");
        drop(held);
        assert!(
            hold(&root, &root, Some("touch x"), true, false, short, &cancel)
                .await
                .is_ok()
        );
    }
}
