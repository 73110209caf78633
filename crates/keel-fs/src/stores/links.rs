//! Where the protected stores' symlinks lead (red-team pass 2, R11): a dotfile manager keeps
//! `~/.ssh/id_ed25519` as a link to `~/dotfiles/ssh/id_ed25519`, `~/.aws` as a link to a
//! directory elsewhere. Covering the store at its own path hides the link, not the file it
//! leads to: the sandbox covers every target found here too, and the file tools refuse them.
//!
//! The walk is bounded ([`MAX_DEPTH`] directory levels and link hops, [`MAX_ENTRIES`] entries
//! in all) and reads directories only: it never opens a file, so a FIFO or a device in a store
//! costs nothing. Its result is kept per process and reused while every directory it read is
//! unchanged (a link added, removed or replaced changes its directory's mtime).

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::absent::Absent;
use super::hardlinks::{self, Linked};
use super::{Store, StoreKind};

/// Directory levels below a store (and link hops) the walk follows.
pub const MAX_DEPTH: usize = 8;
/// Directory entries the walk reads in all, across every store.
pub const MAX_ENTRIES: usize = 20_000;

/// Where a link in (or the path of) a protected store leads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkTarget {
    /// The link as found (`~/.ssh/id_ed25519`, or the store itself).
    pub link: PathBuf,
    /// Its target, canonical (no link left in it).
    pub target: PathBuf,
    /// The target is a directory (else a regular file: other kinds are not listed).
    pub dir: bool,
    pub kind: StoreKind,
}

/// What a walk found, and whether it stopped at a bound.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LinkTargets {
    /// Symlink targets, and the other names of stores' files with hard links
    /// ([`super::hardlinks`]: `link` is the store's name, `target` the other).
    pub targets: Vec<LinkTarget>,
    /// The walk stopped at [`MAX_ENTRIES`] or [`MAX_DEPTH`]: some links may be missed.
    pub truncated: bool,
    /// Stores' files with a hard link the search did not find: readable there.
    pub unfound: Vec<PathBuf>,
}

/// Device, inode and mtime (seconds, nanoseconds) of a path.
type Stamp = (u64, u64, i64, i64);

/// One directory the walk read: its path, identity and mtime (to tell whether it changed).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Seen {
    path: PathBuf,
    stamp: Option<Stamp>,
}

/// The stamp of `path` itself (a link is not followed).
fn stamp(path: &Path) -> Option<Stamp> {
    std::fs::symlink_metadata(path).ok().map(|m| stamp_of(&m))
}

fn stamp_of(m: &std::fs::Metadata) -> Stamp {
    (m.dev(), m.ino(), m.mtime(), m.mtime_nsec())
}

/// One store's walk, kept while the store and every directory it read are unchanged.
struct Cached {
    /// The store path's own stamp (not followed) when it was walked.
    stamp: Option<Stamp>,
    /// The entry budget it was walked with (a truncated walk is reused only with the same).
    budget: usize,
    seen: Vec<Seen>,
    checked: Instant,
    walked: Walked,
}

/// What one store's walk found.
#[derive(Debug, Clone, Default)]
struct Walked {
    targets: Vec<LinkTarget>,
    /// Its regular files (and those its links lead to) with more than one name.
    linked: Vec<Linked>,
    truncated: bool,
    /// Directory entries it read.
    entries: usize,
}

/// Per store, not per list: the sandbox (the stores it hides) and every workspace handle (all
/// protected stores) ask with different lists, and a cache of the last list alone made each
/// of them walk again every time. Found by hash: every workspace handle asks about all ~190
/// stores, and a search through a list of them was ~35,000 path comparisons per handle — with
/// a dozen handles opened before the first request, most of its launch time (issue 33).
static CACHE: Mutex<Option<HashMap<Store, Cached>>> = Mutex::new(None);

/// How long a result is trusted without looking at the directories again.
const FRESH: Duration = Duration::from_millis(500);

/// The most stores kept in the cache (a process asks with a few dozen).
const MAX_CACHED: usize = 1024;

/// The targets of the symlinks in `stores` (and of stores that are links themselves) that
/// lie outside the store they were found in, each listed once.
pub fn link_targets(stores: &[Store]) -> LinkTargets {
    let mut out = LinkTargets::default();
    let mut used = 0usize;
    let mut guard = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    let cache = guard.get_or_insert_with(HashMap::new);
    let mut linked: Vec<Linked> = Vec::new();
    // Where other names are looked for: the homes (added below, only when a file has other
    // names), and the directory holding each store with such a file (`~` for `~/.ssh`,
    // `/srv/keys` for `$GOOGLE_APPLICATION_CREDENTIALS`).
    let mut roots: Vec<PathBuf> = Vec::new();
    let mut absent = Absent::for_stores(stores);
    let mut parents = Parents::default();
    for s in stores {
        let budget = MAX_ENTRIES.saturating_sub(used);
        let walked = cached_walk(cache, s, budget, &mut absent, &mut parents);
        used += walked.entries;
        out.truncated |= walked.truncated;
        out.targets.extend(walked.targets);
        if !walked.linked.is_empty()
            && let Some(parent) = s.path.parent()
        {
            roots.push(parent.to_path_buf());
        }
        for l in walked.linked {
            if !linked.iter().any(|k| k.dev == l.dev && k.ino == l.ino) {
                linked.push(l);
            }
        }
    }
    drop(guard);
    if !linked.is_empty() {
        roots.splice(0..0, super::homes(&super::process_env));
        let names = hardlinks::other_names(&linked, &roots);
        for (link, other, kind) in names.found {
            // Covers land on the real place.
            let target = other.canonicalize().unwrap_or(other);
            out.targets.push(LinkTarget {
                link,
                target,
                dir: false,
                kind,
            });
        }
        out.unfound = names.unfound;
    }
    out.targets.sort_by(|a, b| a.target.cmp(&b.target));
    out.targets.dedup_by(|a, b| a.target == b.target);
    out
}

/// `store`'s walk from `cache` while it is still good, else walked now (and kept).
fn cached_walk(
    cache: &mut HashMap<Store, Cached>,
    store: &Store,
    budget: usize,
    absent: &mut Absent,
    parents: &mut Parents,
) -> Walked {
    // One `lstat` per store and use: it tells the cache whether the store changed, and a
    // walk starts from it — unless a listing of the directory holding it (with many other
    // stores) already showed it missing.
    let lmeta = if absent.missing(&store.path) {
        None
    } else {
        store.path.symlink_metadata().ok()
    };
    let now = lmeta.as_ref().map(stamp_of);
    if let Some(c) = cache.get_mut(store)
        && c.stamp == now
        && (!c.walked.truncated || c.budget == budget)
        && (c.checked.elapsed() < FRESH
            || (c.seen.iter().all(|s| stamp(&s.path) == s.stamp)
                && c.walked.linked.iter().all(still_linked)))
    {
        c.checked = Instant::now();
        return c.walked.clone();
    }
    let (walked, seen) = match &lmeta {
        Some(lmeta) => walk_one(store, lmeta, budget, parents),
        None => (Walked::default(), Vec::new()),
    };
    if cache.len() >= MAX_CACHED && !cache.contains_key(store) {
        cache.clear();
    }
    cache.insert(
        store.clone(),
        Cached {
            stamp: now,
            budget,
            seen,
            checked: Instant::now(),
            walked: walked.clone(),
        },
    );
    walked
}

/// Whether a file with other names still has as many (a name added or removed elsewhere
/// changes no directory of the store).
fn still_linked(l: &Linked) -> bool {
    std::fs::symlink_metadata(&l.path)
        .is_ok_and(|m| m.dev() == l.dev && m.ino() == l.ino && m.nlink() == l.nlink)
}

/// A regular file's entry when it has more than one name.
fn linked_file(path: &Path, m: &std::fs::Metadata, kind: StoreKind) -> Option<Linked> {
    (m.is_file() && m.nlink() > 1).then(|| Linked {
        dev: m.dev(),
        ino: m.ino(),
        nlink: m.nlink(),
        path: path.to_path_buf(),
        kind,
    })
}

/// Every store walked afresh (no cache), within one [`MAX_ENTRIES`] budget.
#[cfg(test)]
fn walk(stores: &[Store]) -> (LinkTargets, Vec<Seen>) {
    let mut out = LinkTargets::default();
    let mut all_seen = Vec::new();
    let mut used = 0usize;
    for s in stores {
        let Ok(lmeta) = s.path.symlink_metadata() else {
            continue;
        };
        let (walked, seen) = walk_one(
            s,
            &lmeta,
            MAX_ENTRIES.saturating_sub(used),
            &mut Parents::default(),
        );
        used += walked.entries;
        out.truncated |= walked.truncated;
        out.targets.extend(walked.targets);
        all_seen.extend(seen);
    }
    out.targets.sort_by(|a, b| a.target.cmp(&b.target));
    out.targets.dedup_by(|a, b| a.target == b.target);
    (out, all_seen)
}

/// The canonical forms of the directories holding the stores, found once per list: most
/// stores that exist share a few (`~`, `~/.config`, `~/.local/share`), and canonicalising
/// each store whole read every component again (issue 33).
#[derive(Default)]
struct Parents(HashMap<PathBuf, Option<PathBuf>>);

impl Parents {
    /// `path` canonical, given its own metadata `lmeta` (a link not followed): a store that is
    /// not a link is its canonical parent and its name; a link is resolved whole.
    fn canonical(&mut self, path: &Path, lmeta: &std::fs::Metadata) -> Option<PathBuf> {
        let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
            return path.canonicalize().ok();
        };
        if lmeta.file_type().is_symlink() || !path.is_absolute() {
            return path.canonicalize().ok();
        }
        let c = self
            .0
            .entry(parent.to_path_buf())
            .or_insert_with(|| parent.canonicalize().ok());
        c.as_ref().map(|c| c.join(name))
    }
}

/// One store's walk (`lmeta`: the store path's own metadata, a link not followed), reading
/// at most `budget` directory entries.
fn walk_one(
    s: &Store,
    lmeta: &std::fs::Metadata,
    budget: usize,
    parents: &mut Parents,
) -> (Walked, Vec<Seen>) {
    let mut out = Walked::default();
    let mut seen: Vec<Seen> = Vec::new();
    let mut visited: Vec<(u64, u64)> = Vec::new();
    // (directory to read, its depth, the store root it counts under)
    let mut queue: Vec<(PathBuf, usize, PathBuf)> = Vec::new();
    let kind = s.kind;
    let Some(canonical) = parents.canonical(&s.path, lmeta) else {
        return (out, seen);
    };
    // A store that is not a link is what `lmeta` describes already.
    let meta = if lmeta.file_type().is_symlink() {
        match std::fs::metadata(&canonical) {
            Ok(m) => m,
            Err(_) => return (out, seen),
        }
    } else {
        lmeta.clone()
    };
    if lmeta.file_type().is_symlink() && (meta.is_dir() || meta.is_file()) {
        out.targets.push(LinkTarget {
            link: s.path.clone(),
            target: canonical.clone(),
            dir: meta.is_dir(),
            kind,
        });
    }
    out.linked.extend(linked_file(&canonical, &meta, kind));
    if meta.is_dir() {
        queue.push((canonical.clone(), 0, canonical));
    }
    let mut i = 0;
    while i < queue.len() {
        let (dir, depth, root) = queue[i].clone();
        i += 1;
        // The store's own directory was looked at just now (not a link: `meta`).
        let dmeta = if i == 1 && !lmeta.file_type().is_symlink() {
            meta.clone()
        } else {
            match std::fs::symlink_metadata(&dir) {
                Ok(m) => m,
                Err(_) => continue,
            }
        };
        if visited.contains(&(dmeta.dev(), dmeta.ino())) {
            continue;
        }
        visited.push((dmeta.dev(), dmeta.ino()));
        seen.push(Seen {
            stamp: Some((dmeta.dev(), dmeta.ino(), dmeta.mtime(), dmeta.mtime_nsec())),
            path: dir.clone(),
        });
        let Ok(read) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in read.flatten() {
            if out.entries >= budget {
                out.truncated = true;
                break;
            }
            out.entries += 1;
            let Ok(t) = entry.file_type() else {
                continue;
            };
            let path = entry.path();
            if t.is_file() {
                // One `stat` per regular file, only when the store is walked (not per use).
                if let Ok(m) = entry.metadata() {
                    out.linked.extend(linked_file(&path, &m, kind));
                }
            } else if t.is_dir() {
                if depth < MAX_DEPTH {
                    queue.push((path, depth + 1, root.clone()));
                } else {
                    out.truncated = true;
                }
            } else if t.is_symlink() {
                // Dangling links, loops and links to devices, FIFOs, sockets lead nowhere
                // a cover could go (and read nothing secret).
                let Ok(target) = path.canonicalize() else {
                    continue;
                };
                let Ok(meta) = std::fs::metadata(&target) else {
                    continue;
                };
                if !(meta.is_dir() || meta.is_file()) || target.starts_with(&root) {
                    continue;
                }
                out.linked.extend(linked_file(&target, &meta, kind));
                out.targets.push(LinkTarget {
                    link: path,
                    target: target.clone(),
                    dir: meta.is_dir(),
                    kind,
                });
                if meta.is_dir() {
                    if depth < MAX_DEPTH {
                        queue.push((target.clone(), depth + 1, target));
                    } else {
                        out.truncated = true;
                    }
                }
            }
        }
        if out.truncated && out.entries >= budget {
            break;
        }
    }
    (out, seen)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn store(path: PathBuf) -> Store {
        Store {
            path,
            kind: StoreKind::Secret,
        }
    }

    #[test]
    fn links_in_and_of_stores_lead_to_their_targets() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let base = dir.path().canonicalize().unwrap_or_else(|e| panic!("{e}"));
        let dot = base.join("dotfiles");
        for d in ["ssh", "aws", "deep/a/b"] {
            std::fs::create_dir_all(dot.join(d)).unwrap_or_else(|e| panic!("{e}"));
        }
        std::fs::write(dot.join("ssh/id"), "KEY").unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(dot.join("aws-creds"), "AWS").unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(dot.join("deep/a/b/tok"), "T").unwrap_or_else(|e| panic!("{e}"));
        let ssh = base.join(".ssh");
        std::fs::create_dir_all(ssh.join("sub")).unwrap_or_else(|e| panic!("{e}"));
        symlink(dot.join("ssh/id"), ssh.join("id_ed25519")).unwrap_or_else(|e| panic!("{e}"));
        // A link inside the store to the store itself, a dangling link, a loop, a device.
        symlink(ssh.join("sub"), ssh.join("again")).unwrap_or_else(|e| panic!("{e}"));
        symlink(base.join("gone"), ssh.join("dangling")).unwrap_or_else(|e| panic!("{e}"));
        symlink(ssh.join("loop"), ssh.join("loop")).unwrap_or_else(|e| panic!("{e}"));
        symlink("/dev/zero", ssh.join("zero")).unwrap_or_else(|e| panic!("{e}"));
        // A directory link whose target holds a link again.
        symlink(dot.join("deep"), ssh.join("sub/deep")).unwrap_or_else(|e| panic!("{e}"));
        symlink(dot.join("aws-creds"), dot.join("deep/a/creds")).unwrap_or_else(|e| panic!("{e}"));
        // The store itself a link.
        symlink(dot.join("aws"), base.join(".aws")).unwrap_or_else(|e| panic!("{e}"));
        let found = walk(&[
            store(ssh.clone()),
            store(base.join(".aws")),
            store(base.join("none")),
        ])
        .0;
        let targets: Vec<(PathBuf, bool)> = found
            .targets
            .iter()
            .map(|t| (t.target.clone(), t.dir))
            .collect();
        assert_eq!(
            targets,
            vec![
                (dot.join("aws"), true),
                (dot.join("aws-creds"), false),
                (dot.join("deep"), true),
                (dot.join("ssh/id"), false),
            ],
            "{found:?}"
        );
        assert!(!found.truncated);
        // The cache sees a new link (its directory's mtime changes).
        let first = link_targets(&[store(ssh.clone())]);
        assert_eq!(first.targets.len(), 3, "{first:?}");
        std::thread::sleep(FRESH + Duration::from_millis(50));
        std::fs::write(dot.join("new"), "N").unwrap_or_else(|e| panic!("{e}"));
        symlink(dot.join("new"), ssh.join("sub/new")).unwrap_or_else(|e| panic!("{e}"));
        let again = link_targets(&[store(ssh)]);
        assert!(
            again.targets.iter().any(|t| t.target == dot.join("new")),
            "{again:?}"
        );
    }

    #[test]
    fn the_walk_is_bounded() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let base = dir.path().canonicalize().unwrap_or_else(|e| panic!("{e}"));
        let mut deep = base.join("s");
        for i in 0..(MAX_DEPTH + 3) {
            deep = deep.join(format!("d{i}"));
        }
        std::fs::create_dir_all(&deep).unwrap_or_else(|e| panic!("{e}"));
        let found = walk(&[store(base.join("s"))]).0;
        assert!(found.truncated);
    }
}
