//! Which stores of a list are certainly missing, told by listing the directories that hold
//! many of them (issue 33). Each use of the store list looks at every store (`lstat`, so a
//! store that appeared or became a link is seen at once): ~190 stores, most of them missing,
//! ~170 failed `statx` before `keel run`'s first request. A home directory holds ~50 of them
//! and `~/.config` ~25: one listing of each answers for all of those names.
//!
//! A listing only ever says "missing": a name in it (or one it cannot rule out) is still
//! looked at with `lstat`, as before. It rules a name out only when the listing is complete
//! and every entry in it is ASCII and differs from the name even without regard to case — a
//! case-insensitive directory (ext4 `casefold`) finds `.SSH` or `.ſsh` under `.ssh`, so such
//! a directory is not trusted to rule anything out. A directory that cannot be listed
//! (unreadable but searchable, too large) rules nothing out.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::Store;

/// Stores that share a directory before that directory is listed rather than each `lstat`ed.
const LIST_FROM: usize = 4;
/// Entries read from one directory at most; a larger one rules nothing out.
const MAX_LISTED: usize = 4096;

/// What is known of one directory.
#[derive(Debug)]
enum Dir {
    /// It does not exist (or is not a directory): nothing is beneath it.
    Missing,
    /// Its entries, all ASCII (lowercased), complete.
    Listed(Vec<OsString>),
    /// Not known (not listed, or the listing cannot rule names out).
    Unknown,
}

/// The directories worth listing for one store list, listed on first use.
pub(crate) struct Absent {
    /// The directories that hold at least [`LIST_FROM`] of the stores.
    worth: Vec<PathBuf>,
    dirs: HashMap<PathBuf, Dir>,
}

impl Absent {
    pub(crate) fn for_stores(stores: &[Store]) -> Self {
        let mut count: HashMap<&Path, usize> = HashMap::new();
        for s in stores {
            if let Some(parent) = s.path.parent() {
                *count.entry(parent).or_default() += 1;
            }
        }
        let worth = count
            .into_iter()
            .filter(|(_, n)| *n >= LIST_FROM)
            .map(|(p, _)| p.to_path_buf())
            .collect();
        Self {
            worth,
            dirs: HashMap::new(),
        }
    }

    /// Whether `path` certainly does not exist (false: it may; look at it).
    pub(crate) fn missing(&mut self, path: &Path) -> bool {
        let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
            return false;
        };
        if !path.is_absolute() || parent.as_os_str().is_empty() {
            return false;
        }
        match self.dir(parent) {
            Dir::Missing => true,
            Dir::Listed(names) => {
                let Some(name) = name.to_str() else {
                    return false;
                };
                let name = name.to_ascii_lowercase();
                !names.iter().any(|n| n.as_os_str() == name.as_str())
            }
            Dir::Unknown => false,
        }
    }

    fn dir(&mut self, dir: &Path) -> &Dir {
        if !self.dirs.contains_key(dir) {
            let state = if self.missing(dir) {
                Dir::Missing
            } else if self.worth.iter().any(|w| w == dir) {
                list(dir)
            } else {
                Dir::Unknown
            };
            self.dirs.insert(dir.to_path_buf(), state);
        }
        self.dirs.get(dir).unwrap_or(&Dir::Unknown)
    }
}

/// `dir`'s entries (following links, as the `lstat` of a path beneath it would).
fn list(dir: &Path) -> Dir {
    let read = match std::fs::read_dir(dir) {
        Ok(r) => r,
        Err(e)
            if e.kind() == std::io::ErrorKind::NotFound
                || e.kind() == std::io::ErrorKind::NotADirectory =>
        {
            return Dir::Missing;
        }
        Err(_) => return Dir::Unknown,
    };
    let mut names = Vec::new();
    for entry in read {
        let Ok(entry) = entry else {
            return Dir::Unknown;
        };
        let name = entry.file_name();
        let Some(text) = name.to_str().filter(|t| t.is_ascii()) else {
            return Dir::Unknown;
        };
        if names.len() >= MAX_LISTED {
            return Dir::Unknown;
        }
        names.push(OsString::from(text.to_ascii_lowercase()));
    }
    Dir::Listed(names)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stores::StoreKind;

    fn stores(base: &Path, names: &[&str]) -> Vec<Store> {
        names
            .iter()
            .map(|n| Store {
                path: base.join(n),
                kind: StoreKind::Secret,
            })
            .collect()
    }

    #[test]
    fn only_names_a_complete_ascii_listing_lacks_are_missing() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let home = dir.path().canonicalize().unwrap_or_else(|e| panic!("{e}"));
        std::fs::create_dir(home.join(".SSH")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(home.join(".netrc"), "x").unwrap_or_else(|e| panic!("{e}"));
        std::os::unix::fs::symlink("nowhere", home.join(".aws")).unwrap_or_else(|e| panic!("{e}"));
        let list = stores(
            &home,
            &[
                ".ssh",
                ".netrc",
                ".aws",
                ".kube",
                ".config/gh",
                ".config/hub",
            ],
        );
        let mut absent = Absent::for_stores(&list);
        // Present, present in another case (a case-insensitive directory would find it), a
        // dangling link (lstat finds it): all looked at.
        assert!(!absent.missing(&home.join(".ssh")));
        assert!(!absent.missing(&home.join(".netrc")));
        assert!(!absent.missing(&home.join(".aws")));
        // Not there, and beneath a directory that is not there.
        assert!(absent.missing(&home.join(".kube")));
        assert!(absent.missing(&home.join(".config/gh")));
        // A directory holding too few stores is not listed: its names are looked at.
        assert!(!absent.missing(&home.join(".ssh/id_ed25519")));
        assert!(!absent.missing(Path::new("relative/x")));
    }

    #[test]
    fn a_listing_with_other_than_ascii_names_rules_nothing_out() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let home = dir.path().canonicalize().unwrap_or_else(|e| panic!("{e}"));
        // `.ſsh` is `.ssh` in a case-folding directory.
        std::fs::write(home.join(".\u{17f}sh"), "x").unwrap_or_else(|e| panic!("{e}"));
        let list = stores(&home, &[".ssh", ".aws", ".kube", ".netrc"]);
        let mut absent = Absent::for_stores(&list);
        assert!(!absent.missing(&home.join(".ssh")));
        assert!(!absent.missing(&home.join(".kube")));
    }
}
