//! Finding the programs Keel starts outside the sandbox (its hardened git, the command shell,
//! the user's own MCP servers and editor) on `PATH` — never in a directory a command can
//! write.
//!
//! A `PATH` entry may point into the workspace: an empty or relative entry (resolved against
//! the working directory, for Keel usually the workspace: red-team B25) or an absolute one —
//! an activated `<ws>/.venv/bin`, direnv's `PATH_add bin`, `$PWD/node_modules/.bin`
//! (red-team R23). A command (or the model's file tools) can plant `git` there, and Keel's
//! next snapshot would run it unconfined, as the user. So the one lookup here keeps only
//! absolute entries that lie (canonically, through any symlink) outside every *untrusted*
//! directory: each workspace this process opened ([`distrust`]: `Workspace::new`, the CLI's
//! workspace resolution), each directory a command was given write access to (`shell.writable`
//! trees, registered before the command starts), commands' private temp directories
//! (`$TMPDIR/keel-cmd-*`), and any directory the caller names.
//!
//! Lookups are cached per process, keyed on the set of untrusted directories: a resolution
//! made before a workspace was opened is redone once it is, so no cached `git` can come from
//! a directory distrusted later.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The untrusted directories registered so far (canonical and as given), and a generation
/// counter bumped whenever one is added.
static UNTRUSTED: Mutex<(u64, Vec<PathBuf>)> = Mutex::new((0, Vec::new()));

/// Marks `dir` (and everything below it) as a place programs are never looked up in: a
/// workspace, or a directory commands may write. Cheap when already marked.
pub fn distrust(dir: &Path) {
    if !dir.is_absolute() {
        return;
    }
    let real = lenient_canonical(dir);
    let mut guard = UNTRUSTED.lock().unwrap_or_else(|e| e.into_inner());
    let (generation, dirs) = &mut *guard;
    let mut added = false;
    for d in [dir.to_path_buf(), real] {
        if !dirs.contains(&d) {
            dirs.push(d);
            added = true;
        }
    }
    if added {
        *generation += 1;
    }
}

fn generation() -> u64 {
    UNTRUSTED.lock().unwrap_or_else(|e| e.into_inner()).0
}

/// `path` with symlinks resolved as far as it exists: the deepest existing ancestor is
/// canonicalised and the rest appended (so a directory created later is judged by where it
/// will be).
fn lenient_canonical(path: &Path) -> PathBuf {
    let mut rest = Vec::new();
    let mut cur = path;
    loop {
        if let Ok(real) = std::fs::canonicalize(cur) {
            return rest.iter().rev().fold(real, |acc, c| acc.join(c));
        }
        match (cur.parent(), cur.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_os_string());
                cur = parent;
            }
            _ => return path.to_path_buf(),
        }
    }
}

/// Whether `path` lies in an untrusted directory: one registered with [`distrust`], one of
/// `also`, or a command's private temp directory.
pub fn is_untrusted(path: &Path, also: &[&Path]) -> bool {
    let real = lenient_canonical(path);
    let within = |root: &Path| {
        path.starts_with(root) || real.starts_with(root) || {
            let root_real = lenient_canonical(root);
            real.starts_with(&root_real)
        }
    };
    if also.iter().any(|a| a.is_absolute() && within(a)) {
        return true;
    }
    let tmp = lenient_canonical(&std::env::temp_dir());
    if real
        .strip_prefix(&tmp)
        .ok()
        .and_then(|r| r.components().next())
        .is_some_and(|c| c.as_os_str().to_string_lossy().starts_with("keel-cmd-"))
    {
        return true;
    }
    let guard = UNTRUSTED.lock().unwrap_or_else(|e| e.into_inner());
    guard
        .1
        .iter()
        .any(|root| path.starts_with(root) || real.starts_with(root))
}

/// The directories of a `PATH`-like value programs may be looked up in: absolute, and not in
/// an untrusted directory ([`is_untrusted`], with `also`). An empty entry means "the current
/// directory" and a relative one is resolved against it; both are dropped.
pub fn trusted_dirs(path: &OsStr, also: &[&Path]) -> Vec<PathBuf> {
    std::env::split_paths(path)
        .filter(|dir| dir.is_absolute() && !is_untrusted(dir, also))
        .collect()
}

/// [`trusted_dirs`] joined back into a `PATH` value: what Keel passes to the programs it
/// starts outside the sandbox, whose own lookups would otherwise reach the workspace.
pub fn trusted_path_value(path: &OsStr, also: &[&Path]) -> OsString {
    std::env::join_paths(trusted_dirs(path, also)).unwrap_or_default()
}

/// `name` in `dirs`: the first executable file that is not itself (through a symlink) in an
/// untrusted directory.
pub fn find_in(dirs: &[PathBuf], name: &str, also: &[&Path]) -> Option<PathBuf> {
    dirs.iter()
        .map(|dir| dir.join(name))
        .find(|p| is_executable(p) && !is_untrusted(p, also))
}

/// Finds `name` on Keel's `PATH` in trusted directories only ([`trusted_dirs`]); a name with a
/// `/` is checked as given.
pub fn find_program(name: &str) -> Option<PathBuf> {
    if name.contains('/') {
        let p = PathBuf::from(name);
        return is_executable(&p).then_some(p);
    }
    let path = std::env::var_os("PATH")?;
    find_in(&trusted_dirs(&path, &[]), name, &[])
}

/// Whether `name` is on `PATH` for commands, which run confined and may use the workspace's
/// own programs (an activated `.venv/bin`): for choosing what a command line says (`pytest`
/// or `python3 -m pytest`), never for starting a program outside the sandbox.
pub fn on_path(name: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path)
            .filter(|d| d.is_absolute())
            .any(|d| is_executable(&d.join(name)))
    })
}

/// A program found by [`find_program`] once per set of untrusted directories: `cache` holds
/// the generation it was resolved at; a later [`distrust`] makes the next call resolve again.
pub fn cached(cache: &Mutex<Option<(u64, Option<PathBuf>)>>, name: &str) -> Option<PathBuf> {
    let now = generation();
    let mut slot = cache.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((generation, found)) = &*slot
        && *generation == now
    {
        return found.clone();
    }
    let found = find_program(name);
    *slot = Some((now, found.clone()));
    found
}

pub(crate) fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_inside_an_untrusted_directory_are_dropped_through_symlinks() {
        let root = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let ws = root.path().join("ws");
        let bin = root.path().join("bin");
        for d in [&ws.join(".venv/bin"), &bin] {
            std::fs::create_dir_all(d).unwrap_or_else(|e| panic!("{e}"));
        }
        let link = root.path().join("link");
        std::os::unix::fs::symlink(&ws, &link).unwrap_or_else(|e| panic!("{e}"));
        let path = std::env::join_paths([
            ws.join(".venv/bin"),
            link.join(".venv/bin"),
            ws.join("not-yet/bin"),
            PathBuf::from("rel"),
            bin.clone(),
        ])
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(trusted_dirs(&path, &[&ws]), vec![bin]);
    }
}
