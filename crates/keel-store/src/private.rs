//! Files only the user may read: the session database holds every transcript, tool output and
//! approval, so `keel.db` (with its `-wal`, `-shm` and `-journal` companions) is created 0600
//! and its directory, when Keel creates it, 0700.
//!
//! An existing directory is tightened only when the caller says it is Keel's own (the default
//! data directory): a directory named in `store.path` may be shared with other programs (a
//! home directory), and changing its mode could break them. The database files are Keel's
//! alone and are always tightened.

use std::io;
use std::path::{Path, PathBuf};

/// Creates `dir` and any missing parents with mode 0700 (parents that exist are left alone).
pub fn create_private_dir(dir: &Path) -> io::Result<()> {
    if dir.as_os_str().is_empty() || dir.is_dir() {
        return Ok(());
    }
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

/// Creates `dir` 0700 if missing, else removes group and other access from it. Only for a
/// directory that holds nothing but Keel's data. A directory owned by someone else is left
/// as it is (changing it is not ours to do; the files in it are still 0600).
pub fn tighten_private_dir(dir: &Path) -> io::Result<()> {
    create_private_dir(dir)?;
    tighten(dir, 0o700)
}

/// Makes the database file at `path` private before SQLite opens it: created empty with mode
/// 0600 when missing (SQLite then gives its `-wal`, `-shm` and `-journal` files the same
/// mode), tightened to 0600 when it exists, with any companions already there. The file and
/// its companions become protected stores of this process ([`keel_fs::stores`]): hidden from
/// every command, refused by the file tools — wherever `store.path` puts them.
pub(crate) fn prepare_database_file(path: &Path) -> io::Result<()> {
    let files: Vec<PathBuf> = std::iter::once(path.to_path_buf())
        .chain(companions(path))
        .collect();
    keel_fs::stores::register_keel_paths(&files);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true).mode(0o600);
        match options.open(path) {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
        for file in std::iter::once(path.to_path_buf()).chain(companions(path)) {
            if file.exists() {
                tighten(&file, 0o600)?;
            }
        }
    }
    #[cfg(not(unix))]
    let _ = path;
    Ok(())
}

/// `keel.db-wal`, `keel.db-shm`, `keel.db-journal`.
fn companions(path: &Path) -> impl Iterator<Item = PathBuf> + '_ {
    ["-wal", "-shm", "-journal"].into_iter().map(move |suffix| {
        let mut name = path.as_os_str().to_os_string();
        name.push(suffix);
        PathBuf::from(name)
    })
}

/// Clears the mode bits outside `max` (never adds any). Not being the owner is not an error.
fn tighten(path: &Path, max: u32) -> io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let meta = std::fs::metadata(path)?;
        let mode = meta.permissions().mode() & 0o7777;
        if mode & !max == 0 {
            return Ok(());
        }
        match std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode & max)) {
            Err(e) if e.kind() == io::ErrorKind::PermissionDenied => Ok(()),
            other => other,
        }
    }
    #[cfg(not(unix))]
    {
        let _ = (path, max);
        Ok(())
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn mode(p: &Path) -> u32 {
        std::fs::metadata(p)
            .map(|m| m.permissions().mode() & 0o777)
            .unwrap_or(0)
    }

    #[test]
    fn a_new_database_and_its_directory_are_private() {
        let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let dir = tmp.path().join("data/keel");
        let db = dir.join("keel.db");
        let store = crate::SqliteDb::open(&db).unwrap_or_else(|e| panic!("{e}"));
        store
            .with_connection(|c| c.execute_batch("CREATE TABLE t(x); INSERT INTO t VALUES (1);"))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(mode(&dir), 0o700, "the directory Keel created");
        assert_eq!(mode(&db), 0o600);
        for c in companions(&db) {
            if c.exists() {
                assert_eq!(mode(&c), 0o600, "{}", c.display());
            }
        }
        assert!(companions(&db).any(|c| c.exists()), "WAL files exist");
    }

    #[test]
    fn existing_loose_files_are_tightened_and_a_named_directory_is_left_alone() {
        let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let dir = tmp.path().join("shared");
        std::fs::create_dir(&dir).unwrap_or_else(|e| panic!("{e}"));
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755))
            .unwrap_or_else(|e| panic!("{e}"));
        let db = dir.join("keel.db");
        drop(crate::SqliteDb::open(&db).unwrap_or_else(|e| panic!("{e}")));
        for f in std::iter::once(db.clone()).chain(companions(&db)) {
            if f.exists() {
                std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644))
                    .unwrap_or_else(|e| panic!("{e}"));
            }
        }
        drop(crate::SqliteDb::open(&db).unwrap_or_else(|e| panic!("{e}")));
        assert_eq!(mode(&db), 0o600, "an existing database is tightened");
        for c in companions(&db) {
            if c.exists() {
                assert_eq!(mode(&c), 0o600, "{}", c.display());
            }
        }
        assert_eq!(
            mode(&dir),
            0o755,
            "a directory the user chose keeps its mode"
        );
        tighten_private_dir(&dir).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(mode(&dir), 0o700, "Keel's own data directory is tightened");
    }
}
