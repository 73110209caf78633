//! The one atomic writer every file-changing tool uses: a temp file in the same (open)
//! directory, fsync, then `renameat` over the target in that directory. A crash mid-write
//! leaves the old file or the new one, never half of either. [`atomic_write_all`] does the
//! same for a set of files (a patch): every new content is staged first, then all are renamed
//! into place, and a failure part-way puts back what was already changed.
//!
//! Paths come in resolved beneath the workspace handle ([`ResolvedPath`], see
//! [`crate::beneath`]): nothing here opens a path string, so nothing can be redirected out of
//! the workspace between the check and the write. Single files are written with
//! [`ResolvedPath::write_atomic`].

use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;
use std::sync::Arc;

use crate::beneath::ResolvedPath;
use crate::beneath::{Created, Staged};
pub use crate::beneath::{FileInfo, FileKind, WriteMode};

/// One file change in a set applied by [`atomic_write_all`].
#[derive(Debug, Clone)]
pub enum FileChange {
    /// Write `bytes` to `target`. With [`WriteMode::Replace`] an existing file keeps its mode;
    /// `mode_from` (a moved file's old place) supplies the mode instead when set.
    Write {
        target: ResolvedPath,
        bytes: Vec<u8>,
        mode: WriteMode,
        mode_from: Option<ResolvedPath>,
    },
    /// Delete the file at `target`.
    Delete { target: ResolvedPath },
}

impl FileChange {
    /// The place this change touches.
    pub fn target(&self) -> &ResolvedPath {
        match self {
            FileChange::Write { target, .. } | FileChange::Delete { target } => target,
        }
    }
}

/// Why a set of changes was not applied; nothing was changed (or everything was put back).
#[derive(Debug, thiserror::Error)]
#[error("{}: {source}", path.display())]
pub struct WriteAllError {
    /// The absolute path of the file that failed.
    pub path: PathBuf,
    #[source]
    pub source: std::io::Error,
}

/// A file as it was before the set touched it, to put it back on failure.
struct Backup {
    target: ResolvedPath,
    before: Option<(Vec<u8>, u32)>,
}

/// One staged write: the temp file and the directory it will be renamed in.
struct Stage {
    tmp: Staged,
    dir: Arc<OwnedFd>,
}

/// Applies `changes` all or nothing: stages every write as a synced temp file beside its
/// target (creating parent directories), checks `CreateNew` targets are still free, then
/// renames and deletes in order. If anything fails, the files already changed are restored
/// from memory and the staged temp files removed.
pub fn atomic_write_all(changes: &[FileChange]) -> Result<(), WriteAllError> {
    let fail = |target: &ResolvedPath, source: std::io::Error| WriteAllError {
        path: target.abs(),
        source,
    };
    // 1. Stage.
    let mut created = Created::default();
    let mut staged: Vec<Option<Stage>> = Vec::with_capacity(changes.len());
    let mut backups: Vec<Backup> = Vec::with_capacity(changes.len());
    if let Err(e) = stage_all(changes, &mut created, &mut staged, &mut backups) {
        drop(staged);
        created.remove();
        return Err(e);
    }
    // 2. Commit in order; on failure, undo what was done.
    let mut dirs: Vec<Arc<OwnedFd>> = Vec::new();
    let mut done = 0;
    let mut error = None;
    for (change, stage) in changes.iter().zip(staged.iter_mut()) {
        let result = match (change, stage.take()) {
            (FileChange::Write { target, mode, .. }, Some(stage)) => {
                dirs.push(stage.dir.clone());
                match target.name() {
                    Some(name) => stage.tmp.commit(name, *mode),
                    None => Err(std::io::Error::from(std::io::ErrorKind::InvalidInput)),
                }
            }
            (FileChange::Delete { target }, _) => target.remove_file(),
            (FileChange::Write { .. }, None) => Ok(()),
        };
        if let Err(e) = result {
            error = Some(fail(change.target(), e));
            break;
        }
        done += 1;
    }
    if let Some(error) = error {
        for backup in backups[..done].iter().rev() {
            restore(backup);
        }
        drop(staged);
        created.remove();
        return Err(error);
    }
    // Make the renames durable.
    for dir in dirs {
        let _ = rustix::fs::fsync(dir.as_fd());
    }
    Ok(())
}

fn stage_all(
    changes: &[FileChange],
    created: &mut Created,
    staged: &mut Vec<Option<Stage>>,
    backups: &mut Vec<Backup>,
) -> Result<(), WriteAllError> {
    let fail = |target: &ResolvedPath, source: std::io::Error| WriteAllError {
        path: target.abs(),
        source,
    };
    for change in changes {
        let target = change.target();
        let before = match target.info().map_err(|e| fail(target, e))? {
            None => None,
            Some(info) => {
                info.check_regular().map_err(|e| fail(target, e))?;
                let bytes = target.read().map_err(|e| fail(target, e))?;
                Some((bytes, info.mode))
            }
        };
        let stage = match change {
            FileChange::Write {
                bytes,
                mode,
                mode_from,
                ..
            } => {
                if *mode == WriteMode::CreateNew && before.is_some() {
                    return Err(fail(
                        target,
                        std::io::Error::new(std::io::ErrorKind::AlreadyExists, "already exists"),
                    ));
                }
                let perms = match mode_from {
                    Some(from) => from.info().ok().flatten().map(|i| i.mode),
                    None => before.as_ref().map(|(_, m)| *m),
                };
                let (dir, made) = target.parent_dir(true).map_err(|e| fail(target, e))?;
                created.0.extend(made.0);
                let tmp = Staged::write(dir.clone(), bytes, perms).map_err(|e| fail(target, e))?;
                Some(Stage { tmp, dir })
            }
            FileChange::Delete { .. } => {
                if before.is_none() {
                    return Err(fail(
                        target,
                        std::io::Error::new(std::io::ErrorKind::NotFound, "does not exist"),
                    ));
                }
                None
            }
        };
        staged.push(stage);
        backups.push(Backup {
            target: target.clone(),
            before,
        });
    }
    Ok(())
}

/// Puts a file back as it was (best effort: this runs only after another failure).
fn restore(backup: &Backup) {
    match &backup.before {
        Some((bytes, mode)) => {
            let _ = backup
                .target
                .write_atomic(bytes, WriteMode::Replace, Some(*mode));
        }
        None => {
            let _ = backup.target.remove_file();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::beneath::DirHandle;
    use std::path::Path;

    fn at(dir: &DirHandle, rel: &str) -> ResolvedPath {
        dir.resolve(Path::new(rel))
            .unwrap_or_else(|e| panic!("{e}"))
    }

    fn handle() -> (tempfile::TempDir, DirHandle) {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let h = DirHandle::open(dir.path()).unwrap_or_else(|e| panic!("{e}"));
        (dir, h)
    }

    #[test]
    fn creates_replaces_and_refuses_clobber() {
        let (dir, h) = handle();
        let p = dir.path().join("a/b/c.txt");
        let t = at(&h, "a/b/c.txt");
        t.write_atomic(b"one", WriteMode::CreateNew, None)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(std::fs::read(&p).unwrap_or_default(), b"one");
        let t = at(&h, "a/b/c.txt");
        assert!(t.write_atomic(b"two", WriteMode::CreateNew, None).is_err());
        assert_eq!(std::fs::read(&p).unwrap_or_default(), b"one");
        t.write_atomic(b"two", WriteMode::Replace, None)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(std::fs::read(&p).unwrap_or_default(), b"two");
        let leftovers = std::fs::read_dir(dir.path().join("a/b"))
            .map(|d| d.count())
            .unwrap_or(0);
        assert_eq!(leftovers, 1, "no temp files left behind");
    }

    #[test]
    fn replace_keeps_the_file_mode() {
        use std::os::unix::fs::PermissionsExt;
        let (dir, h) = handle();
        let p = dir.path().join("run.sh");
        std::fs::write(&p, "#!/bin/sh\n").unwrap_or_else(|e| panic!("{e}"));
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755))
            .unwrap_or_else(|e| panic!("{e}"));
        at(&h, "run.sh")
            .write_atomic(b"#!/bin/sh\necho hi\n", WriteMode::Replace, None)
            .unwrap_or_else(|e| panic!("{e}"));
        let mode = std::fs::metadata(&p)
            .map(|m| m.permissions().mode())
            .unwrap_or(0);
        assert_eq!(mode & 0o777, 0o755);
    }

    fn write(target: ResolvedPath, bytes: &str, mode: WriteMode) -> FileChange {
        FileChange::Write {
            target,
            bytes: bytes.as_bytes().to_vec(),
            mode,
            mode_from: None,
        }
    }

    #[test]
    fn a_set_applies_whole() {
        let (dir, h) = handle();
        std::fs::write(dir.path().join("a.txt"), "old a").unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(dir.path().join("b.txt"), "old b").unwrap_or_else(|e| panic!("{e}"));
        atomic_write_all(&[
            write(at(&h, "a.txt"), "new a", WriteMode::Replace),
            write(at(&h, "new/dir/c.txt"), "c", WriteMode::CreateNew),
            FileChange::Delete {
                target: at(&h, "b.txt"),
            },
        ])
        .unwrap_or_else(|e| panic!("{e}"));
        let read = |p: &str| std::fs::read_to_string(dir.path().join(p)).unwrap_or_default();
        assert_eq!(read("a.txt"), "new a");
        assert_eq!(read("new/dir/c.txt"), "c");
        assert!(!dir.path().join("b.txt").exists());
    }

    #[test]
    fn a_failing_set_changes_nothing() {
        let (dir, h) = handle();
        let a = dir.path().join("a.txt");
        let exists = dir.path().join("exists.txt");
        std::fs::write(&a, "old a").unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(&exists, "keep").unwrap_or_else(|e| panic!("{e}"));
        let r = atomic_write_all(&[
            write(at(&h, "a.txt"), "new a", WriteMode::Replace),
            write(at(&h, "fresh/x.txt"), "x", WriteMode::CreateNew),
            write(at(&h, "exists.txt"), "clobber", WriteMode::CreateNew),
        ]);
        assert!(r.is_err());
        assert_eq!(std::fs::read_to_string(&a).unwrap_or_default(), "old a");
        assert_eq!(std::fs::read_to_string(&exists).unwrap_or_default(), "keep");
        assert!(
            !dir.path().join("fresh").exists(),
            "created directories removed"
        );
        let names: Vec<String> = std::fs::read_dir(dir.path())
            .map(|d| {
                d.filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        assert!(
            names.iter().all(|n| !n.starts_with(".keel-tmp-")),
            "{names:?}"
        );

        let r = atomic_write_all(&[
            write(at(&h, "a.txt"), "new a", WriteMode::Replace),
            FileChange::Delete {
                target: at(&h, "missing.txt"),
            },
        ]);
        assert!(r.is_err());
        assert_eq!(std::fs::read_to_string(&a).unwrap_or_default(), "old a");
    }

    #[test]
    fn a_set_touching_a_directory_changes_nothing() {
        use std::os::unix::fs::PermissionsExt;
        let (dir, h) = handle();
        let a = dir.path().join("a.txt");
        std::fs::write(&a, "old a").unwrap_or_else(|e| panic!("{e}"));
        std::fs::set_permissions(&a, std::fs::Permissions::from_mode(0o750))
            .unwrap_or_else(|e| panic!("{e}"));
        let blocker = dir.path().join("blocker");
        std::fs::create_dir_all(blocker.join("inside")).unwrap_or_else(|e| panic!("{e}"));
        let changes = [
            write(at(&h, "a.txt"), "new a", WriteMode::Replace),
            write(
                at(&h, "blocker"),
                "cannot replace a directory",
                WriteMode::Replace,
            ),
        ];
        let r = atomic_write_all(&changes);
        assert!(r.is_err());
        assert_eq!(std::fs::read_to_string(&a).unwrap_or_default(), "old a");
        let mode = std::fs::metadata(&a)
            .map(|m| m.permissions().mode())
            .unwrap_or(0);
        assert_eq!(mode & 0o777, 0o750);
        assert!(blocker.join("inside").is_dir());
    }
}
