//! The one atomic writer every file-changing tool uses: a temp file in the same directory,
//! fsync, then rename over the target. A crash mid-write leaves the old file or the new one,
//! never half of either. [`atomic_write_all`] does the same for a set of files (a patch):
//! every new content is staged first, then all are renamed into place, and a failure part-way
//! puts back what was already changed.

use std::io::Write;
use std::path::{Path, PathBuf};

/// Reads a regular file. FIFOs, sockets and devices are refused before anything blocks on
/// them: the type is checked first, the file is opened non-blocking, and the opened file's
/// type is checked again (it may have been swapped in between). The error names the type.
pub fn read_regular(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    check_regular(&std::fs::metadata(path)?)?;
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
        .open(path)?;
    let meta = file.metadata()?;
    check_regular(&meta)?;
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// `Ok` for regular files; an `InvalidInput` error naming the type otherwise.
pub fn check_regular(meta: &std::fs::Metadata) -> std::io::Result<()> {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    let kind = if t.is_file() {
        return Ok(());
    } else if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO (named pipe)"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_block_device() || t.is_char_device() {
        "a device"
    } else {
        "not a regular file"
    };
    Err(std::io::Error::new(
        std::io::ErrorKind::InvalidInput,
        format!("it is {kind}; the file tools read and write only regular files"),
    ))
}

/// How an atomic write treats an existing target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteMode {
    /// Fail if the target exists (creating new files).
    CreateNew,
    /// Replace the target, keeping its permission bits.
    Replace,
}

/// Writes `bytes` to `path` atomically, creating parent directories as needed.
pub fn atomic_write(path: &Path, bytes: &[u8], mode: WriteMode) -> std::io::Result<()> {
    let parent = path.parent().ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{} has no parent directory", path.display()),
        )
    })?;
    std::fs::create_dir_all(parent)?;
    let existing_perms = match mode {
        WriteMode::Replace => std::fs::metadata(path).ok().map(|m| m.permissions()),
        WriteMode::CreateNew => None,
    };
    let mut tmp = tempfile::Builder::new()
        .prefix(".keel-tmp-")
        .tempfile_in(parent)?;
    tmp.write_all(bytes)?;
    if let Some(perms) = existing_perms {
        tmp.as_file().set_permissions(perms)?;
    } else {
        set_default_new_file_perms(tmp.as_file())?;
    }
    tmp.as_file().sync_all()?;
    match mode {
        WriteMode::CreateNew => {
            tmp.persist_noclobber(path).map_err(|e| e.error)?;
        }
        WriteMode::Replace => {
            tmp.persist(path).map_err(|e| e.error)?;
        }
    }
    // Make the rename itself durable.
    if let Ok(dir) = std::fs::File::open(parent) {
        let _ = dir.sync_all();
    }
    Ok(())
}

/// Temp files are created 0600; a new source file should get the usual 0644 (less umask).
#[cfg(unix)]
fn set_default_new_file_perms(file: &std::fs::File) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    file.set_permissions(std::fs::Permissions::from_mode(0o644))
}

#[cfg(not(unix))]
fn set_default_new_file_perms(_file: &std::fs::File) -> std::io::Result<()> {
    Ok(())
}

/// One file change in a set applied by [`atomic_write_all`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileChange {
    /// Write `bytes` to `path`. With [`WriteMode::Replace`] an existing file keeps its mode;
    /// `mode_from` (a moved file's old path) supplies the mode instead when set.
    Write {
        path: PathBuf,
        bytes: Vec<u8>,
        mode: WriteMode,
        mode_from: Option<PathBuf>,
    },
    /// Delete the file at `path`.
    Delete { path: PathBuf },
}

impl FileChange {
    /// The path this change touches.
    pub fn path(&self) -> &Path {
        match self {
            FileChange::Write { path, .. } | FileChange::Delete { path } => path,
        }
    }
}

/// Why a set of changes was not applied; nothing was changed (or everything was put back).
#[derive(Debug, thiserror::Error)]
#[error("{path}: {source}")]
pub struct WriteAllError {
    pub path: PathBuf,
    #[source]
    pub source: std::io::Error,
}

/// A file as it was before the set touched it, to put it back on failure.
struct Backup {
    path: PathBuf,
    before: Option<(Vec<u8>, std::fs::Permissions)>,
}

/// Applies `changes` all or nothing: stages every write as a synced temp file beside its
/// target (creating parent directories), checks `CreateNew` targets are still free, then
/// renames and deletes in order. If anything fails, the files already changed are restored
/// from memory and the staged temp files removed.
pub fn atomic_write_all(changes: &[FileChange]) -> Result<(), WriteAllError> {
    let fail = |path: &Path, source: std::io::Error| WriteAllError {
        path: path.to_path_buf(),
        source,
    };
    let cleanup_dirs = |dirs: &[PathBuf]| {
        for d in dirs.iter().rev() {
            let _ = std::fs::remove_dir(d);
        }
    };
    // 1. Stage.
    let mut created_dirs: Vec<PathBuf> = Vec::new();
    let mut staged: Vec<Option<tempfile::NamedTempFile>> = Vec::with_capacity(changes.len());
    let mut backups: Vec<Backup> = Vec::with_capacity(changes.len());
    if let Err(e) = stage_all(changes, &mut created_dirs, &mut staged, &mut backups) {
        drop(staged);
        cleanup_dirs(&created_dirs);
        return Err(e);
    }
    // 2. Commit in order; on failure, undo what was done.
    let mut done = 0;
    let mut error = None;
    for (change, tmp) in changes.iter().zip(staged.iter_mut()) {
        let result = match (change, tmp.take()) {
            (FileChange::Write { path, mode, .. }, Some(tmp)) => match mode {
                WriteMode::CreateNew => {
                    tmp.persist_noclobber(path).map(|_| ()).map_err(|e| e.error)
                }
                WriteMode::Replace => tmp.persist(path).map(|_| ()).map_err(|e| e.error),
            },
            (FileChange::Delete { path }, _) => std::fs::remove_file(path),
            (FileChange::Write { .. }, None) => Ok(()),
        };
        if let Err(e) = result {
            error = Some(fail(change.path(), e));
            break;
        }
        done += 1;
    }
    if let Some(error) = error {
        for backup in backups[..done].iter().rev() {
            restore(backup);
        }
        drop(staged);
        cleanup_dirs(&created_dirs);
        return Err(error);
    }
    let mut synced = std::collections::BTreeSet::new();
    for change in changes {
        if let Some(parent) = change.path().parent()
            && synced.insert(parent.to_path_buf())
            && let Ok(dir) = std::fs::File::open(parent)
        {
            let _ = dir.sync_all();
        }
    }
    Ok(())
}

fn stage_all(
    changes: &[FileChange],
    created_dirs: &mut Vec<PathBuf>,
    staged: &mut Vec<Option<tempfile::NamedTempFile>>,
    backups: &mut Vec<Backup>,
) -> Result<(), WriteAllError> {
    let fail = |path: &Path, source: std::io::Error| WriteAllError {
        path: path.to_path_buf(),
        source,
    };
    for change in changes {
        let path = change.path();
        let before = match std::fs::read(path) {
            Ok(bytes) => {
                let perms = std::fs::metadata(path)
                    .map_err(|e| fail(path, e))?
                    .permissions();
                Some((bytes, perms))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(fail(path, e)),
        };
        let tmp = match change {
            FileChange::Write {
                bytes,
                mode,
                mode_from,
                ..
            } => {
                if *mode == WriteMode::CreateNew && before.is_some() {
                    return Err(fail(
                        path,
                        std::io::Error::new(std::io::ErrorKind::AlreadyExists, "already exists"),
                    ));
                }
                let perms = match mode_from {
                    Some(from) => std::fs::metadata(from).ok().map(|m| m.permissions()),
                    None => before.as_ref().map(|(_, p)| p.clone()),
                };
                Some(stage(path, bytes, perms, created_dirs).map_err(|e| fail(path, e))?)
            }
            FileChange::Delete { .. } => {
                if before.is_none() {
                    return Err(fail(
                        path,
                        std::io::Error::new(std::io::ErrorKind::NotFound, "does not exist"),
                    ));
                }
                None
            }
        };
        staged.push(tmp);
        backups.push(Backup {
            path: path.to_path_buf(),
            before,
        });
    }
    Ok(())
}

fn stage(
    path: &Path,
    bytes: &[u8],
    perms: Option<std::fs::Permissions>,
    created_dirs: &mut Vec<PathBuf>,
) -> std::io::Result<tempfile::NamedTempFile> {
    let parent = path.parent().ok_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, "has no parent directory")
    })?;
    let mut missing = Vec::new();
    let mut dir = parent;
    while !dir.exists() {
        missing.push(dir.to_path_buf());
        match dir.parent() {
            Some(p) => dir = p,
            None => break,
        }
    }
    std::fs::create_dir_all(parent)?;
    created_dirs.extend(missing.into_iter().rev());
    let mut tmp = tempfile::Builder::new()
        .prefix(".keel-tmp-")
        .tempfile_in(parent)?;
    tmp.write_all(bytes)?;
    match perms {
        Some(p) => tmp.as_file().set_permissions(p)?,
        None => set_default_new_file_perms(tmp.as_file())?,
    }
    tmp.as_file().sync_all()?;
    Ok(tmp)
}

/// Puts a file back as it was (best effort: this runs only after another failure).
fn restore(backup: &Backup) {
    match &backup.before {
        Some((bytes, perms)) => {
            if atomic_write(&backup.path, bytes, WriteMode::Replace).is_ok() {
                let _ = std::fs::set_permissions(&backup.path, perms.clone());
            }
        }
        None => {
            let _ = std::fs::remove_file(&backup.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn creates_replaces_and_refuses_clobber() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let p = dir.path().join("a/b/c.txt");
        atomic_write(&p, b"one", WriteMode::CreateNew).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(std::fs::read(&p).unwrap_or_default(), b"one");
        assert!(atomic_write(&p, b"two", WriteMode::CreateNew).is_err());
        assert_eq!(std::fs::read(&p).unwrap_or_default(), b"one");
        atomic_write(&p, b"two", WriteMode::Replace).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(std::fs::read(&p).unwrap_or_default(), b"two");
        let leftovers = std::fs::read_dir(p.parent().unwrap_or(dir.path()))
            .map(|d| d.count())
            .unwrap_or(0);
        assert_eq!(leftovers, 1, "no temp files left behind");
    }

    #[cfg(unix)]
    #[test]
    fn replace_keeps_the_file_mode() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let p = dir.path().join("run.sh");
        std::fs::write(&p, "#!/bin/sh\n").unwrap_or_else(|e| panic!("{e}"));
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755))
            .unwrap_or_else(|e| panic!("{e}"));
        atomic_write(&p, b"#!/bin/sh\necho hi\n", WriteMode::Replace)
            .unwrap_or_else(|e| panic!("{e}"));
        let mode = std::fs::metadata(&p)
            .map(|m| m.permissions().mode())
            .unwrap_or(0);
        assert_eq!(mode & 0o777, 0o755);
    }

    fn write(path: &Path, bytes: &str, mode: WriteMode) -> FileChange {
        FileChange::Write {
            path: path.to_path_buf(),
            bytes: bytes.as_bytes().to_vec(),
            mode,
            mode_from: None,
        }
    }

    #[test]
    fn a_set_applies_whole() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let a = dir.path().join("a.txt");
        let b = dir.path().join("b.txt");
        std::fs::write(&a, "old a").unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(&b, "old b").unwrap_or_else(|e| panic!("{e}"));
        let c = dir.path().join("new/dir/c.txt");
        atomic_write_all(&[
            write(&a, "new a", WriteMode::Replace),
            write(&c, "c", WriteMode::CreateNew),
            FileChange::Delete { path: b.clone() },
        ])
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(std::fs::read_to_string(&a).unwrap_or_default(), "new a");
        assert_eq!(std::fs::read_to_string(&c).unwrap_or_default(), "c");
        assert!(!b.exists());
    }

    #[test]
    fn a_failing_set_changes_nothing() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let a = dir.path().join("a.txt");
        let exists = dir.path().join("exists.txt");
        std::fs::write(&a, "old a").unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(&exists, "keep").unwrap_or_else(|e| panic!("{e}"));
        let r = atomic_write_all(&[
            write(&a, "new a", WriteMode::Replace),
            write(&dir.path().join("fresh/x.txt"), "x", WriteMode::CreateNew),
            write(&exists, "clobber", WriteMode::CreateNew),
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
            write(&a, "new a", WriteMode::Replace),
            FileChange::Delete {
                path: dir.path().join("missing.txt"),
            },
        ]);
        assert!(r.is_err());
        assert_eq!(std::fs::read_to_string(&a).unwrap_or_default(), "old a");
    }

    #[cfg(unix)]
    #[test]
    fn a_failed_commit_is_rolled_back() {
        use std::os::unix::fs::PermissionsExt;
        // The second target's directory becomes read-only after staging would succeed for
        // the first: simulate by making the rename fail (target is a non-empty directory).
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let a = dir.path().join("a.txt");
        std::fs::write(&a, "old a").unwrap_or_else(|e| panic!("{e}"));
        std::fs::set_permissions(&a, std::fs::Permissions::from_mode(0o750))
            .unwrap_or_else(|e| panic!("{e}"));
        let blocker = dir.path().join("blocker");
        std::fs::create_dir_all(blocker.join("inside")).unwrap_or_else(|e| panic!("{e}"));
        let r = atomic_write_all(&[
            write(&a, "new a", WriteMode::Replace),
            write(&blocker, "cannot replace a directory", WriteMode::Replace),
        ]);
        assert!(r.is_err());
        assert_eq!(std::fs::read_to_string(&a).unwrap_or_default(), "old a");
        let mode = std::fs::metadata(&a)
            .map(|m| m.permissions().mode())
            .unwrap_or(0);
        assert_eq!(mode & 0o777, 0o750);
        assert!(blocker.join("inside").is_dir());
    }
}
