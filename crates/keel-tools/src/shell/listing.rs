//! The second pass of the post-command checks when the walk stopped keeping entries, or
//! stopped walking (red-team pass 10, R10-22): git's listing of every untracked file, judged by
//! name and place as the walk judges what it meets.

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::git_view::nearest_repo;
use super::loaded_code::{Found, Kind, MAX_KEPT, Moved, check, check_links, ignored, move_aside};

/// The cut when the walk kept fewer entries than it met ([`MAX_KEPT`]).
pub(crate) fn kept_cut(found: &Found) -> Option<super::bounds::Cut> {
    found.truncated.then(|| {
        super::bounds::Cut::new(
            "loaded code",
            format!("the walk met more than {MAX_KEPT} bytecode, native-module, test and configuration files"),
        )
    })
}

/// How many untracked paths [`by_listing`] judges at a time.
const LISTING_BATCH: usize = 20_000;

/// The second pass when the walk stopped keeping entries (or stopped walking): every file git
/// does not track, as `git ls-files --others` lists it (streamed; ignored files included, no
/// bound on how many are judged, only on how many are held at a time), judged by name and place
/// as the walk judges them — the loaders' files ([`check`], [`check_links`]) and, where git
/// ignores them, the files the session check takes ([`super::session_hidden::kind`]) — and
/// what a writer nobody approved created or changed since `since` is moved aside. `Err` when
/// git could not list them (no repository, git failed): nothing was judged.
pub(crate) fn by_listing(
    workspace: &Path,
    skip: &[PathBuf],
    since: std::time::SystemTime,
) -> Result<Vec<Moved>, String> {
    use std::io::BufRead;
    let mut git = crate::safe_git::in_repository(workspace, &[])?;
    git.args(["ls-files", "-z", "--others"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
    let mut child = git.spawn().map_err(|e| format!("git ls-files: {e}"))?;
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| "git ls-files: no output".to_string())?;
    let fresh = || Found::changed_in(workspace, since);
    let mut batch = fresh();
    let mut listed = 0usize;
    let mut out = Vec::new();
    for rec in std::io::BufReader::new(stdout).split(0) {
        let rec = rec.map_err(|e| format!("git ls-files: {e}"))?;
        let rel = PathBuf::from(std::ffi::OsStr::from_bytes(&rec));
        let (Some(name), Some(dir)) = (rel.file_name(), rel.parent()) else {
            continue;
        };
        let path = workspace.join(&rel);
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if !super::venv_startup::changed_since(&meta, since) {
            continue;
        }
        batch.note_path(
            &workspace.join(dir),
            path,
            name,
            meta.file_type(),
            Some(&meta),
        );
        listed += 1;
        if listed >= LISTING_BATCH {
            out.extend(judge_batch(workspace, &batch, skip, since));
            batch = fresh();
            listed = 0;
        }
    }
    out.extend(judge_batch(workspace, &batch, skip, since));
    let status = child.wait().map_err(|e| format!("git ls-files: {e}"))?;
    if !status.success() {
        return Err(format!("git ls-files failed ({status})"));
    }
    Ok(out)
}

/// One batch of [`by_listing`].
fn judge_batch(
    workspace: &Path,
    batch: &Found,
    skip: &[PathBuf],
    since: std::time::SystemTime,
) -> Vec<Moved> {
    let mut out = check(workspace, batch, skip, since);
    out.extend(check_links(workspace, batch, since));
    let root_governed = super::session_hidden::governed(workspace);
    let mut repos = std::collections::HashMap::new();
    let mut governed =
        |rel: &Path| root_governed || nearest_repo(workspace, rel, &mut repos).is_some();
    let done: std::collections::BTreeSet<PathBuf> =
        out.iter().map(|m| PathBuf::from(&m.path)).collect();
    // What the session check takes, and every other changed file (its default-deny).
    let session: Vec<(PathBuf, Kind)> = batch
        .changed_files()
        .iter()
        .filter(|p| !skip.iter().any(|s| p.starts_with(s)))
        .filter_map(|p| p.strip_prefix(workspace).ok())
        .filter(|rel| !done.contains(*rel))
        .filter_map(|rel| {
            super::session_hidden::kind(rel)
                .or_else(|| {
                    (governed(rel) && !super::session_hidden::own_output(workspace, rel))
                        .then_some(Kind::Unreviewed)
                })
                .map(|k| (rel.to_path_buf(), k))
        })
        .collect();
    let rels: Vec<PathBuf> = session.iter().map(|(r, _)| r.clone()).collect();
    let hidden = ignored(workspace, &rels);
    for (rel, kind) in session.into_iter().filter(|(r, _)| hidden.contains(r)) {
        out.push(move_aside(workspace, &rel, kind));
    }
    out
}

/// When the walk of `found` stopped keeping entries, or stopped walking (`walk_cut`): the
/// second pass ([`by_listing`]) from `since`, outside `skip`; what it moved, and the cut —
/// covered when the listing judged everything, open when git could not list.
pub(crate) fn past_the_bounds(
    root: &Path,
    found: &Found,
    walk_cut: bool,
    skip: &[PathBuf],
    since: std::time::SystemTime,
) -> Option<(Vec<Moved>, super::bounds::Cut)> {
    let cut = kept_cut(found).or_else(|| {
        walk_cut.then(|| {
            super::bounds::Cut::new("loaded code", "the walk stopped before the end of the tree")
        })
    })?;
    Some(match by_listing(root, skip, since) {
        Ok(moved) => (
            moved,
            cut.covered(
                "every file git does not track was listed by git and judged by its name instead",
            ),
        ),
        Err(why) => (
            Vec::new(),
            super::bounds::Cut {
                what: format!("{} ({why})", cut.what),
                ..cut
            },
        ),
    })
}
