//! What git shows of a workspace, path by path: each path is asked of the repository nearest
//! to it ([`nearest_repo`]), so a workspace that is no repository (a folder of clones) and
//! the repositories below one are judged by their own rules.

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// The repository nearest to the workspace-relative `rel`: the deepest directory on its way
/// (the workspace itself excluded) holding a `.git`, workspace-relative; `None` when there is
/// none below the workspace. `cache` keeps the answer per directory.
pub(crate) fn nearest_repo(
    workspace: &Path,
    rel: &Path,
    cache: &mut std::collections::HashMap<PathBuf, Option<PathBuf>>,
) -> Option<PathBuf> {
    let dir = rel.parent()?;
    if dir.as_os_str().is_empty() {
        return None;
    }
    if let Some(hit) = cache.get(dir) {
        return hit.clone();
    }
    let found = if std::fs::symlink_metadata(workspace.join(dir).join(".git")).is_ok() {
        Some(dir.to_path_buf())
    } else {
        nearest_repo(workspace, dir, cache)
    };
    cache.insert(dir.to_path_buf(), found.clone());
    found
}

/// The workspace-relative paths of `rels` git does not show in `workspace`: those the
/// repository nearest to each ignores — the workspace's own (or the one it lies in), or a
/// repository below it (a folder of clones, a vendored clone: red-team pass 11, R11-4 — a
/// workspace that is no repository asked git at its root, which failed, and nothing counted
/// as ignored) — and every path of a repository below whose directory the repository above it
/// ignores. None outside any repository, or when git cannot tell.
pub(crate) fn ignored(workspace: &Path, rels: &[PathBuf]) -> std::collections::BTreeSet<PathBuf> {
    let mut out = std::collections::BTreeSet::new();
    if rels.is_empty() {
        return out;
    }
    let mut cache = std::collections::HashMap::new();
    let mut groups: std::collections::BTreeMap<Option<PathBuf>, Vec<PathBuf>> =
        std::collections::BTreeMap::new();
    for rel in rels {
        let repo = nearest_repo(workspace, rel, &mut cache);
        groups.entry(repo).or_default().push(rel.clone());
    }
    for (repo, paths) in groups {
        let Some(repo) = repo else {
            out.extend(check_ignore(workspace, &paths).unwrap_or_default());
            continue;
        };
        // The repository's directory hidden from the one above: all of it is.
        if !ignored(workspace, std::slice::from_ref(&repo)).is_empty() {
            out.extend(paths);
            continue;
        }
        let inner: Vec<PathBuf> = paths
            .iter()
            .filter_map(|p| p.strip_prefix(&repo).ok().map(Path::to_path_buf))
            .collect();
        // A repository below that git cannot read (a planted `.git`, a broken one): nothing
        // in it counts as shown.
        match check_ignore(&workspace.join(&repo), &inner) {
            Some(hidden) => out.extend(hidden.into_iter().map(|p| repo.join(p))),
            None => out.extend(paths),
        }
    }
    out
}

/// `git check-ignore` of `rels` (relative to `dir`) in the repository of `dir`; `None` when
/// git could not answer (no repository, git failed).
fn check_ignore(dir: &Path, rels: &[PathBuf]) -> Option<std::collections::BTreeSet<PathBuf>> {
    use std::io::Write;
    if rels.is_empty() {
        return Some(std::collections::BTreeSet::new());
    }
    let mut git = crate::safe_git::in_repository(dir, &[]).ok()?;
    git.args(["check-ignore", "-z", "--stdin"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
    let mut child = git.spawn().ok()?;
    // Written from another thread: git answers while it reads, and a long list would fill
    // both pipes.
    let mut input = Vec::new();
    for r in rels {
        input.extend_from_slice(r.as_os_str().as_encoded_bytes());
        input.push(0);
    }
    let writer = child.stdin.take().map(|mut stdin| {
        std::thread::spawn(move || {
            let _ = stdin.write_all(&input);
        })
    });
    let out = child.wait_with_output().ok()?;
    if let Some(w) = writer {
        let _ = w.join();
    }
    // 0: some ignored; 1: none; anything else: git could not tell.
    if !matches!(out.status.code(), Some(0 | 1)) {
        return None;
    }
    let asked: std::collections::BTreeSet<&Path> = rels.iter().map(PathBuf::as_path).collect();
    let hidden = out
        .stdout
        .split(|b| *b == 0)
        .filter(|s| !s.is_empty())
        // Byte for byte: a name that is not UTF-8 is still found (R10-7).
        .map(|s| PathBuf::from(std::ffi::OsStr::from_bytes(s)))
        .filter(|p| asked.contains(p.as_path()))
        .collect();
    Some(hidden)
}
