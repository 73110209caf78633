//! The other names of a protected store's files (R11's hard-link gap): `cp -al ~/.ssh
//! ~/ssh-backup`, or a dotfile manager that links instead of symlinking, leaves
//! `~/ssh-backup/id_ed25519` as a second name of the key's inode. Covering `~/.ssh` hides one
//! name; the file is still readable at the other. No mount, Landlock rule or seccomp filter can
//! hide an inode, so the names are looked for instead and covered like symlink targets.
//!
//! A store's regular file with more than one link ([`Linked`], found by the store walk) is
//! looked for, by device and inode, in the homes, the directory holding the store and the one
//! holding the file: a bounded
//! breadth-first walk ([`MAX_SEARCH`] entries, [`SEARCH_DEPTH`] levels) that reads directories
//! only (inode numbers come with the entries; a candidate is confirmed with one `stat`), never
//! enters another file system (a hard link cannot cross one) and stops once every name is
//! found. A name it does not find stays readable: the file is listed as *unfound*, and `keel
//! doctor` says so. The search runs only when a store holds such a file — never in the usual
//! case — and its answer is kept while the link counts are the same.
//!
//! The file tools refuse a found name inside the workspace, by name and by device and inode
//! (as every store), so a hard link to a store's file is never read through them either.

use std::os::unix::fs::{DirEntryExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::StoreKind;

/// Directory entries the search for other names reads at most.
pub const MAX_SEARCH: usize = 200_000;
/// Directory levels below each search root it enters.
pub const SEARCH_DEPTH: usize = 12;

/// A regular file of a store with more than one name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Linked {
    pub dev: u64,
    pub ino: u64,
    pub nlink: u64,
    /// Its name in (or as) the store.
    pub path: PathBuf,
    pub kind: StoreKind,
}

/// What the search found: every other name of each file, and the files with a name it did
/// not find.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Names {
    /// (the store's name of the file, another name, kind).
    pub found: Vec<(PathBuf, PathBuf, StoreKind)>,
    /// The store's names of files with names not found.
    pub unfound: Vec<PathBuf>,
}

/// The last answer, for the files (device, inode, link count) and roots it was asked about.
#[allow(clippy::type_complexity)]
static LAST: Mutex<Option<(Vec<(u64, u64, u64)>, Vec<PathBuf>, Names)>> = Mutex::new(None);

/// The other names of `linked` beneath `roots` (and each file's own directory).
pub(super) fn other_names(linked: &[Linked], roots: &[PathBuf]) -> Names {
    if linked.is_empty() {
        return Names::default();
    }
    let mut key: Vec<(u64, u64, u64)> = linked.iter().map(|l| (l.dev, l.ino, l.nlink)).collect();
    key.sort_unstable();
    key.dedup();
    let mut roots: Vec<PathBuf> = roots
        .iter()
        .cloned()
        .chain(
            linked
                .iter()
                .filter_map(|l| l.path.parent().map(Path::to_path_buf)),
        )
        .collect();
    roots.sort();
    roots.dedup();
    let mut last = LAST.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((k, r, names)) = last.as_ref()
        && *k == key
        && *r == roots
    {
        return names.clone();
    }
    let names = search(linked, &roots);
    *last = Some((key, roots, names.clone()));
    names
}

fn search(linked: &[Linked], roots: &[PathBuf]) -> Names {
    // Every name of each (device, inode), its own included once seen.
    let mut names: Vec<Vec<PathBuf>> = vec![Vec::new(); linked.len()];
    let wanted = |dev: u64, ino: u64| linked.iter().position(|l| l.dev == dev && l.ino == ino);
    let devices: Vec<u64> = linked.iter().map(|l| l.dev).collect();
    let all_found = |names: &[Vec<PathBuf>]| {
        linked
            .iter()
            .zip(names)
            .all(|(l, n)| u64::try_from(n.len()).unwrap_or(u64::MAX) >= l.nlink)
    };
    let mut visited: Vec<(u64, u64)> = Vec::new();
    let mut queue: Vec<(PathBuf, usize)> = Vec::new();
    for r in roots {
        queue.push((r.clone(), 0));
    }
    let mut entries = 0usize;
    let mut i = 0;
    'walk: while i < queue.len() {
        let (dir, depth) = queue[i].clone();
        i += 1;
        let Ok(meta) = std::fs::symlink_metadata(&dir) else {
            continue;
        };
        if !meta.is_dir()
            || !devices.contains(&meta.dev())
            || visited.contains(&(meta.dev(), meta.ino()))
        {
            continue;
        }
        visited.push((meta.dev(), meta.ino()));
        let dev = meta.dev();
        let Ok(read) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in read.flatten() {
            entries += 1;
            if entries > MAX_SEARCH {
                break 'walk;
            }
            let Ok(t) = entry.file_type() else {
                continue;
            };
            if t.is_dir() {
                if depth < SEARCH_DEPTH {
                    queue.push((entry.path(), depth + 1));
                }
            } else if t.is_file() && wanted(dev, entry.ino()).is_some() {
                // The inode number comes with the entry; the device is confirmed (a mount
                // point's entry carries the inode of the directory below it).
                let path = entry.path();
                if let Ok(m) = std::fs::symlink_metadata(&path)
                    && let Some(at) = wanted(m.dev(), m.ino())
                    && !names[at].contains(&path)
                {
                    names[at].push(path);
                    if all_found(&names) {
                        break 'walk;
                    }
                }
            }
        }
    }
    let mut out = Names::default();
    for (l, n) in linked.iter().zip(&names) {
        for p in n {
            if *p != l.path {
                out.found.push((l.path.clone(), p.clone(), l.kind));
            }
        }
        // Its own name counts even where no root reached it.
        let seen = n.len() + usize::from(!n.contains(&l.path));
        if u64::try_from(seen).unwrap_or(u64::MAX) < l.nlink {
            out.unfound.push(l.path.clone());
        }
    }
    out.unfound.sort();
    out.unfound.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_other_name_is_found_and_a_missing_one_is_named() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let base = dir.path().canonicalize().unwrap_or_else(|e| panic!("{e}"));
        let store = base.join("home/.ssh");
        std::fs::create_dir_all(&store).unwrap_or_else(|e| panic!("{e}"));
        std::fs::create_dir_all(base.join("home/backup/deep")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::create_dir_all(base.join("elsewhere")).unwrap_or_else(|e| panic!("{e}"));
        let key = store.join("id_ed25519");
        std::fs::write(&key, "KEY").unwrap_or_else(|e| panic!("{e}"));
        std::fs::hard_link(&key, base.join("home/backup/deep/id"))
            .unwrap_or_else(|e| panic!("{e}"));
        let m = std::fs::metadata(&key).unwrap_or_else(|e| panic!("{e}"));
        let linked = |nlink: u64| Linked {
            dev: m.dev(),
            ino: m.ino(),
            nlink,
            path: key.clone(),
            kind: StoreKind::Secret,
        };
        let names = search(&[linked(2)], &[base.join("home")]);
        assert_eq!(
            names.found,
            vec![(
                key.clone(),
                base.join("home/backup/deep/id"),
                StoreKind::Secret
            )]
        );
        assert!(names.unfound.is_empty(), "{names:?}");
        // A third name outside the roots: listed as not found.
        std::fs::hard_link(&key, base.join("elsewhere/id")).unwrap_or_else(|e| panic!("{e}"));
        let names = search(&[linked(3)], &[base.join("home")]);
        assert_eq!(names.found.len(), 1, "{names:?}");
        assert_eq!(names.unfound, vec![key.clone()]);
        // Searched from the file's own directory and the other root, all are found.
        let names = search(&[linked(3)], &[base.join("home"), base.join("elsewhere")]);
        assert_eq!(names.found.len(), 2, "{names:?}");
        assert!(names.unfound.is_empty(), "{names:?}");
    }
}
