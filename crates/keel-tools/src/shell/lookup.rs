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
//! An earlier session could write elsewhere: its own workspace, another project whose venv is
//! still on `PATH`, the root of a monorepo whose sub-package is today's workspace (red-team
//! pass 3, R3-3). Every session leaves `.keel/` in its workspace (the index, snapshots of a
//! plain directory; read-only to commands, so the model cannot remove it), so a directory with
//! a `.keel` at or above it — an earlier session's workspace, or inside one — is never trusted
//! either, whichever process opened it. (`.git` alone does not count: pyenv, nvm, rbenv and
//! asdf are git clones in the home.)
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

/// Recorded directories ([`keep_record`]) marked as recorded but not canonicalised yet: that
/// is done when the list is first read ([`settle`]), by the first program lookup — not before
/// a session's first request, where the record (every workspace an earlier session used, one
/// `readlink` per component of each) was most of what `keel run` did (issue 33).
static UNSETTLED: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Marks the recorded directories not canonicalised yet ([`UNSETTLED`]) with their canonical
/// forms, before the untrusted list is read.
fn settle() {
    // Held while marking: a lookup on another thread waits until every form is in.
    let mut pending = UNSETTLED.lock().unwrap_or_else(|e| e.into_inner());
    for d in std::mem::take(&mut *pending) {
        mark(&d, None);
    }
}

/// Marks `dir` (and everything below it) as a place programs are never looked up in: a
/// workspace, or a directory commands may write. Cheap when already marked. Once
/// [`keep_record`] was called, a newly marked directory is also added to the record, so later
/// sessions never trust it either.
pub fn distrust(dir: &Path) {
    if let Some(real) = mark(dir, None) {
        record::append(&[real]);
    }
}

/// [`distrust`] of a directory the caller canonicalised just now (the CLI's workspace):
/// not canonicalised again, one `readlink` per component (issue 33).
pub fn distrust_canonical(dir: &Path) {
    if let Some(real) = mark(dir, Some(dir)) {
        record::append(&[real]);
    }
}

/// Marks `dir` (`canonical`: its canonical form when the caller has it) in this process;
/// `Some(canonical)` when it was not marked yet.
fn mark(dir: &Path, canonical: Option<&Path>) -> Option<PathBuf> {
    if !dir.is_absolute() {
        return None;
    }
    let real = canonical.map_or_else(|| lenient_canonical(dir), Path::to_path_buf);
    let mut guard = UNTRUSTED.lock().unwrap_or_else(|e| e.into_inner());
    let (generation, dirs) = &mut *guard;
    let mut added = false;
    for d in [dir.to_path_buf(), real.clone()] {
        if !dirs.contains(&d) {
            dirs.push(d);
            added = true;
        }
    }
    if added {
        *generation += 1;
    }
    added.then_some(real)
}

/// Keeps the untrusted directories across sessions (red-team pass 4, R4-5): every directory
/// an earlier session's commands could write — its workspace, its `shell.writable` trees —
/// is read from the record in Keel's data directory `data_dir` and never trusted in this
/// process, and what this process distrusts (before and after this call) is added to it. An
/// earlier session may have planted a program there: a monorepo root's `.venv/bin/git` while
/// today's workspace is a sub-package, `~/go/bin/git` through `shell.writable = ["~/go"]`.
/// Keel's data directory is hidden from commands, so the model cannot edit the record.
/// Called once per process by whoever knows the data directory (the CLI, the server).
pub fn keep_record(data_dir: &Path) {
    let Some(recorded) = record::open(data_dir) else {
        return;
    };
    // As recorded now (the record holds canonical forms); canonicalised again when the list
    // is first read ([`settle`]): a recorded directory reached through a new link still counts.
    UNSETTLED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .extend(recorded.iter().cloned());
    for d in &recorded {
        mark(d, Some(d));
    }
    let now: Vec<PathBuf> = UNTRUSTED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .1
        .iter()
        .filter(|d| !recorded.contains(d))
        .cloned()
        .collect();
    record::append(&now);
}

/// Whether `dir` is one Keel itself recorded as a directory commands could write (a
/// workspace, a `shell.writable` tree): marked in this process, or in the record of the data
/// directory `data_dir` — exactly, not anything below it. The journal of pending checks acts
/// only on such a root (red-team pass 8, R8-15: a forged entry named a directory outside every
/// workspace).
pub fn is_recorded(data_dir: &Path, dir: &Path) -> bool {
    if !dir.is_absolute() {
        return false;
    }
    settle();
    let real = lenient_canonical(dir);
    let marked = UNTRUSTED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .1
        .contains(&real);
    marked || record::read(&data_dir.join(record::FILE)).contains(&real)
}

/// The record behind [`keep_record`]: one canonical directory per line in
/// `<data dir>/command-writable-dirs` (0600), appended to; past [`record::COMPACT_AT`] bytes the
/// directories that no longer exist are dropped (nothing can be planted in a directory that
/// is gone; one made again is a workspace again, and recorded again).
mod record {
    use std::io::Write;
    use std::os::unix::ffi::{OsStrExt, OsStringExt};
    use std::path::{Path, PathBuf};
    use std::sync::Mutex;

    /// The record's name in Keel's data directory.
    pub const FILE: &str = "command-writable-dirs";
    /// The size past which the record is compacted when opened.
    pub const COMPACT_AT: u64 = 1024 * 1024;
    /// The most of it read.
    const MAX_READ: u64 = 16 * 1024 * 1024;
    /// A link in the record's place is not followed.
    const NOFOLLOW: i32 = rustix::fs::OFlags::NOFOLLOW.bits() as i32;

    /// The record this process appends to ([`open`]).
    static FILE_PATH: Mutex<Option<PathBuf>> = Mutex::new(None);

    /// Opens the record in `data_dir` for this process (once: a second call returns `None`)
    /// and returns the directories it holds.
    pub fn open(data_dir: &Path) -> Option<Vec<PathBuf>> {
        let mut slot = FILE_PATH.lock().unwrap_or_else(|e| e.into_inner());
        if slot.is_some() || !data_dir.is_absolute() {
            return None;
        }
        let file = data_dir.join(FILE);
        let mut dirs = read(&file);
        if std::fs::metadata(&file).is_ok_and(|m| m.len() > COMPACT_AT) {
            dirs.retain(|d| d.symlink_metadata().is_ok());
            dirs.sort();
            dirs.dedup();
            rewrite(&file, &dirs);
        }
        *slot = Some(file);
        Some(dirs)
    }

    /// Adds `dirs` to the record, when one is open.
    pub fn append(dirs: &[PathBuf]) {
        let slot = FILE_PATH.lock().unwrap_or_else(|e| e.into_inner());
        let Some(file) = slot.as_ref() else {
            return;
        };
        let text = lines(dirs);
        if text.is_empty() {
            return;
        }
        if let Some(parent) = file.parent() {
            let mut b = std::fs::DirBuilder::new();
            b.recursive(true);
            std::os::unix::fs::DirBuilderExt::mode(&mut b, 0o700);
            let _ = b.create(parent);
        }
        let mut o = std::fs::OpenOptions::new();
        o.create(true).append(true);
        std::os::unix::fs::OpenOptionsExt::mode(&mut o, 0o600);
        std::os::unix::fs::OpenOptionsExt::custom_flags(&mut o, NOFOLLOW);
        // Keel's own record in its data directory (hidden from commands), no link followed.
        #[allow(clippy::disallowed_methods)]
        let opened = o.open(file);
        if let Ok(mut f) = opened {
            let _ = f.write_all(&text);
        }
    }

    /// One line per absolute directory (a name holding a newline cannot be recorded).
    fn lines(dirs: &[PathBuf]) -> Vec<u8> {
        let mut out = Vec::new();
        for d in dirs {
            let bytes = d.as_os_str().as_bytes();
            // `/` is never recorded: nothing could be found anywhere again (a session with
            // the whole disk as its workspace is the user's explicit choice).
            if d.is_absolute() && d.parent().is_some() && !bytes.contains(&b'\n') {
                out.extend_from_slice(bytes);
                out.push(b'\n');
            }
        }
        out
    }

    pub(super) fn read(file: &Path) -> Vec<PathBuf> {
        use std::io::Read;
        let mut o = std::fs::OpenOptions::new();
        o.read(true);
        std::os::unix::fs::OpenOptionsExt::custom_flags(
            &mut o,
            (rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::NONBLOCK).bits() as i32,
        );
        // Keel's own record in its data directory (hidden from commands): no link followed,
        // non-blocking, checked regular once open, bounded.
        #[allow(clippy::disallowed_methods)]
        let opened = o.open(file);
        let Ok(f) = opened else {
            return Vec::new();
        };
        if !f.metadata().is_ok_and(|m| m.is_file()) {
            return Vec::new();
        }
        let mut bytes = Vec::new();
        let _ = f.take(MAX_READ).read_to_end(&mut bytes);
        bytes
            .split(|b| *b == b'\n')
            .map(|l| PathBuf::from(std::ffi::OsString::from_vec(l.to_vec())))
            .filter(|p| p.is_absolute() && p.parent().is_some())
            .collect()
    }

    fn rewrite(file: &Path, dirs: &[PathBuf]) {
        let tmp = file.with_extension("tmp");
        let mut o = std::fs::OpenOptions::new();
        o.write(true).create(true).truncate(true);
        std::os::unix::fs::OpenOptionsExt::mode(&mut o, 0o600);
        std::os::unix::fs::OpenOptionsExt::custom_flags(&mut o, NOFOLLOW);
        // Keel's own record in its data directory (hidden from commands), no link followed.
        #[allow(clippy::disallowed_methods)]
        let opened = o.open(&tmp);
        let written = opened.and_then(|mut f| f.write_all(&lines(dirs)));
        if written.is_ok() {
            let _ = std::fs::rename(&tmp, file);
        } else {
            let _ = std::fs::remove_file(&tmp);
        }
    }
}

fn generation() -> u64 {
    settle();
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
    settle();
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
    let distrusted = {
        let guard = UNTRUSTED.lock().unwrap_or_else(|e| e.into_inner());
        guard
            .1
            .iter()
            .any(|root| path.starts_with(root) || real.starts_with(root))
    };
    distrusted || inside_a_project(&real)
}

/// Whether `dir` (canonical) lies in an earlier session's workspace: a directory at or above
/// it (not `/`) holds `.keel`. Answers are kept per process: a directory outside every
/// workspace cannot gain a `.keel` above it through this process's commands.
fn inside_a_project(dir: &Path) -> bool {
    static SEEN: Mutex<Vec<(PathBuf, bool)>> = Mutex::new(Vec::new());
    if let Some(known) = SEEN
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .find(|(d, _)| d == dir)
        .map(|(_, b)| *b)
    {
        return known;
    }
    let found = dir
        .ancestors()
        .filter(|a| a.parent().is_some())
        .any(|a| std::fs::symlink_metadata(a.join(".keel")).is_ok());
    let mut seen = SEEN.lock().unwrap_or_else(|e| e.into_inner());
    if seen.len() < 4096 {
        seen.push((dir.to_path_buf(), found));
    }
    found
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

    #[test]
    fn a_recorded_directory_reached_through_a_new_link_is_still_untrusted() {
        // The record is read at start but canonicalised only at the first lookup (issue 33):
        // an earlier session's workspace moved and linked from where it was still counts.
        let root = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let root = root.path().canonicalize().unwrap_or_else(|e| panic!("{e}"));
        let moved = root.join("moved");
        std::fs::create_dir_all(moved.join(".venv/bin")).unwrap_or_else(|e| panic!("{e}"));
        let old = root.join("old");
        std::os::unix::fs::symlink(&moved, &old).unwrap_or_else(|e| panic!("{e}"));
        let data = root.join("data");
        std::fs::create_dir_all(&data).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(data.join(record::FILE), format!("{}\n", old.display()))
            .unwrap_or_else(|e| panic!("{e}"));
        keep_record(&data);
        assert!(is_untrusted(&moved.join(".venv/bin"), &[]));
        let bin = root.join("bin");
        std::fs::create_dir_all(&bin).unwrap_or_else(|e| panic!("{e}"));
        assert!(!is_untrusted(&bin, &[]));
    }

    #[test]
    fn a_venv_or_bin_inside_any_project_is_never_trusted() {
        // Red-team pass 3, R3-3: `git` planted in another project's `.venv/bin` (still on
        // PATH) or in a monorepo root's venv while Keel works in a sub-package.
        let root = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let other = root.path().join("other");
        let mono = root.path().join("mono");
        // A tool installed as a git clone (pyenv, nvm) stays trusted.
        let tools = root.path().join("tools/bin");
        std::fs::create_dir_all(root.path().join("tools/.git")).unwrap_or_else(|e| panic!("{e}"));
        for d in [
            other.join(".keel"),
            other.join(".venv/bin"),
            mono.join(".keel"),
            mono.join(".venv/bin"),
            mono.join("backend"),
            tools.clone(),
        ] {
            std::fs::create_dir_all(d).unwrap_or_else(|e| panic!("{e}"));
        }
        let path = std::env::join_paths([
            other.join(".venv/bin"),
            mono.join(".venv/bin"),
            tools.clone(),
        ])
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(trusted_dirs(&path, &[&mono.join("backend")]), vec![tools]);
    }
}
