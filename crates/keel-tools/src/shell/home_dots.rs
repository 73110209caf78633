//! The user's own configuration in a workspace that holds their home.
//!
//! A home directory's dot entries — `~/.bashrc`, `~/.gitconfig`, `~/.mavenrc`, `~/.config`,
//! `~/.local` (the user site of Python), `~/.cache` (pip's wheels), `~/.aws/config` — are
//! read by the user's shell and tools in every directory, and many of them name programs to
//! run. Listing them one by one kept missing tools (red-team passes 8 and 9: R8-5
//! `~/.gitconfig`, R9-5 a `.pth` in the user site, R9-6 `~/.aws/config`, then `~/.mavenrc`,
//! `~/.terraformrc`, docker's CLI plug-ins). So in a workspace that holds a home, for every
//! command nobody approved ([`super::exec::ExecRequest::approved`]):
//!
//! - each dot entry at the top of the home that exists is mounted read-only in the command's
//!   view (a mount point cannot be renamed or removed either), as installed dependencies are
//!   ([`super::dependency_trees`]); caches go to the command's private temporary directory
//!   (`XDG_CACHE_HOME`), so tools that keep one still work;
//! - after the command, a dot entry it created at the top of the home is moved aside, and a
//!   dot entry that was a symlink and changed is put back (a mount lands on a link's target,
//!   not on the link);
//! - the file tools refuse to write there ([`refused`]).
//!
//! A command the user approved (asked and allowed, `!` in `keel chat`) writes as before. The
//! rest of the home — projects, documents — is workspace content as ever.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};

/// The most dot entries mounted read-only for one command (each is a mount); a home with more
/// gets no unapproved writing command at all (red-team pass 9: 211 decoys left `~/.profile`
/// writable under a bound of 200).
const MAX_MOUNTS: usize = 1_000;
/// Where what a command created at the top of a home is moved: one directory, not a new dot
/// entry each (which would count towards [`MAX_MOUNTS`]).
const QUARANTINE_DIR: &str = "quarantined-by-keel";
/// Entries of a home read at most, before and after a command.
const MAX_ENTRIES: usize = 20_000;

/// The user's homes that `ws` holds: the workspace is the home or lies above it.
pub(crate) fn homes_in(ws: &Path) -> Vec<PathBuf> {
    keel_fs::stores::homes(&keel_fs::stores::process_env)
        .into_iter()
        .filter(|h| h.starts_with(ws))
        .collect()
}

/// A top-level entry of a home: its name, and where it points when it is a symlink.
type Entries = BTreeMap<OsString, Option<PathBuf>>;

/// The dot entries at the top of `home` (at most [`MAX_ENTRIES`] entries read): name → link
/// target for a symlink, `None` otherwise. `None` when the home cannot be listed. Listed by
/// name, not through a workspace handle: a handle's walk passes the secret stores over, and a
/// store created where there was none (`~/.terraformrc`) is a new dot entry like any other.
fn dot_entries(home: &Path) -> Option<(Entries, bool)> {
    let mut out = Entries::new();
    let mut complete = true;
    for (seen, e) in std::fs::read_dir(home).ok()?.enumerate() {
        if seen >= MAX_ENTRIES {
            complete = false;
            break;
        }
        let Ok(e) = e else { continue };
        let name = e.file_name();
        if is_dot(&name) {
            let link = e
                .file_type()
                .is_ok_and(|t| t.is_symlink())
                .then(|| std::fs::read_link(e.path()).ok())
                .flatten();
            out.insert(name, link);
        }
    }
    Some((out, complete))
}

/// A name the user's tools treat as their own configuration: it starts with a dot (but is
/// not `.` or `..`). `.git` and `.keel` at the workspace's top are held read-only anyway.
fn is_dot(name: &std::ffi::OsStr) -> bool {
    let b = std::os::unix::ffi::OsStrExt::as_bytes(name);
    b.first() == Some(&b'.') && b != b"." && b != b".."
}

/// The dot entries to mount read-only for a command nobody approved in `ws`: every existing
/// real directory or file at the top of each home `ws` holds (not symlinks — a mount would
/// land on the target — and not `hidden`, the stores already covered), at most
/// [`MAX_MOUNTS`] (past it, why the command must not run).
pub(crate) fn read_only(ws: &Path, hidden: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    let mut out = Vec::new();
    for home in homes_in(ws) {
        let Some((entries, _)) = dot_entries(&home) else {
            continue;
        };
        for (name, link) in entries {
            let path = home.join(&name);
            if hidden.iter().any(|h| path.starts_with(h)) {
                continue;
            }
            // A dotfile manager's link (`~/.bashrc -> dotfiles/bashrc`): the mount lands on
            // its target, which is what the user's shell reads; one leading out of the
            // workspace is not writable anyway.
            if link.is_some()
                && !std::fs::canonicalize(&path).is_ok_and(|t| t.starts_with(ws) && t != ws)
            {
                continue;
            }
            if home == ws && (name == ".git" || name == ".keel") {
                continue;
            }
            if out.len() == MAX_MOUNTS {
                return Err(format!(
                    "the home `{}` holds more than {MAX_MOUNTS} dot entries, more than Keel can \
                     hold read-only for a command nobody approved; it was not run. Ask the user to \
                     approve it, or work in a project directory instead of the home",
                    home.display()
                ));
            }
            out.push(path);
        }
    }
    Ok(out)
}

/// What the tops of the homes in a workspace held before a command.
#[derive(Debug)]
pub(crate) struct Before {
    ws: PathBuf,
    homes: Vec<(PathBuf, Entries)>,
}

impl Before {
    /// Notes the dot entries of every home `ws` holds; `None` when it holds none.
    pub(crate) fn note(ws: &Path) -> Option<Self> {
        let homes: Vec<(PathBuf, Entries)> = homes_in(ws)
            .into_iter()
            .filter_map(|h| dot_entries(&h).map(|(e, _)| (h, e)))
            .collect();
        (!homes.is_empty()).then(|| Self {
            ws: ws.to_path_buf(),
            homes,
        })
    }

    /// After the command: moves aside every dot entry it created at a home's top and puts
    /// back every symlink there it changed or removed. The report for the command's result.
    pub(crate) fn check(self) -> Option<String> {
        let mut lines = Vec::new();
        for (home, before) in &self.homes {
            let Some((after, complete)) = dot_entries(home) else {
                continue;
            };
            let Ok(dir) = keel_fs::beneath::DirHandle::open(&self.ws).and_then(|ws| {
                let rel = home.strip_prefix(&self.ws).unwrap_or(Path::new(""));
                if rel.as_os_str().is_empty() {
                    Ok(ws)
                } else {
                    ws.subdir(rel)
                        .map_err(|e| std::io::Error::other(e.to_string()))
                }
            }) else {
                continue;
            };
            let fd = dir.fd();
            for (name, now) in &after {
                let was = before.get(name);
                let show = home.join(name);
                // Unchanged (a real entry that stayed one is held read-only); else new, a link
                // re-pointed, or a link replaced by something else.
                if was == Some(now) {
                    continue;
                }
                // What Keel itself made so the sandbox can cover it (`~/.ssh`, `~/.config/keel`
                // when missing), and the workspace's own `.git` / `.keel`.
                if was.is_none()
                    && now.is_none()
                    && ((*home == self.ws && (name == ".git" || name == ".keel"))
                        || only_keel_made(&show, &keel_made(), 0))
                {
                    continue;
                }
                {
                    {
                        let aside = to_quarantine(fd.as_fd(), name).or_else(|| {
                            let mut base = name.clone();
                            base.push(super::git_programs::SUFFIX);
                            super::git_programs::rename_aside(fd.as_fd(), name, &base)
                        });
                        let restored = match (was, &aside) {
                            (Some(Some(target)), Some(_)) => {
                                rustix::fs::symlinkat(target.as_path(), fd, name.as_os_str())
                                    .is_ok()
                            }
                            _ => false,
                        };
                        lines.push(match (aside, restored) {
                            (Some(to), true) => format!(
                                "- `{}`: the link was changed; put back (what the command left is at `{}`)",
                                show.display(),
                                home.join(to).display()
                            ),
                            (Some(to), false) => format!(
                                "- `{}` moved to `{}`",
                                show.display(),
                                home.join(to).display()
                            ),
                            (None, _) => format!(
                                "- `{}` COULD NOT be moved: the user must remove it",
                                show.display()
                            ),
                        });
                    }
                }
            }
            // A link the command removed comes back.
            if complete {
                for (name, was) in before {
                    if let (Some(target), false) = (was, after.contains_key(name))
                        && rustix::fs::symlinkat(target.as_path(), fd, name.as_os_str()).is_ok()
                    {
                        lines.push(format!(
                            "- `{}`: the link was removed; put back",
                            home.join(name).display()
                        ));
                    }
                }
            }
        }
        (!lines.is_empty()).then(|| {
            format!(
                "keel: the command changed the user's own configuration at the top of their home, which their shell and tools read in every directory; Keel undid it:\n{}\nDo not create or change these; tell the user what should change and why.",
                lines.join("\n")
            )
        })
    }
}

/// The directories Keel creates (empty, 0700) so the sandbox can cover them.
fn keel_made() -> Vec<PathBuf> {
    keel_fs::stores::dirs_worth_creating(&keel_fs::stores::process_env)
}

/// Whether the directory `path` holds nothing but the way to directories of `made`, which
/// are empty (what Keel made, not what a command put there).
fn only_keel_made(path: &Path, made: &[PathBuf], depth: usize) -> bool {
    if depth > 8 || !made.iter().any(|m| m.starts_with(path)) {
        return false;
    }
    if !std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir()) {
        return false;
    }
    let Ok(entries) = std::fs::read_dir(path) else {
        return false;
    };
    let entries: Vec<_> = entries.flatten().collect();
    if made.iter().any(|m| m == path) {
        return entries.is_empty();
    }
    entries
        .iter()
        .all(|e| only_keel_made(&e.path(), made, depth + 1))
}

/// Moves the entry `name` of the home open as `home` into its [`QUARANTINE_DIR`] (made 0700
/// when missing; never through a link), under a free name; the path it got, relative to the
/// home. `None` when that cannot be done (the caller renames it in place instead).
fn to_quarantine(home: std::os::fd::BorrowedFd<'_>, name: &std::ffi::OsStr) -> Option<OsString> {
    use rustix::fs::{AtFlags, Mode, OFlags};
    let _ = rustix::fs::mkdirat(home, QUARANTINE_DIR, Mode::from_raw_mode(0o700));
    let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let q = rustix::fs::openat(home, QUARANTINE_DIR, flags, Mode::empty()).ok()?;
    for n in 0..1000 {
        let mut to = name.to_os_string();
        to.push(format!("-{n}"));
        if rustix::fs::statat(&q, to.as_os_str(), AtFlags::SYMLINK_NOFOLLOW).is_ok() {
            continue;
        }
        rustix::fs::renameat(home, name, &q, to.as_os_str()).ok()?;
        let mut shown = OsString::from(QUARANTINE_DIR);
        shown.push("/");
        shown.push(&to);
        return Some(shown);
    }
    None
}

/// Why the file tools do not write `rel` (relative to the workspace `root`): it lies in a dot
/// entry at the top of a home the workspace holds. `None`: it may be written.
pub(crate) fn refused(root: &Path, rel: &Path) -> Option<String> {
    for home in homes_in(root) {
        let Ok(in_home) = root.join(rel).strip_prefix(&home).map(Path::to_path_buf) else {
            continue;
        };
        if let Some(std::path::Component::Normal(first)) = in_home.components().next()
            && is_dot(first)
        {
            return Some(home.display().to_string());
        }
    }
    // Where a dot entry's link leads (`~/.bashrc -> dotfiles/bashrc`) is what the user's
    // shell reads.
    let path = root.join(rel);
    for home in homes_in(root) {
        let Some((entries, _)) = dot_entries(&home) else {
            continue;
        };
        for (name, link) in entries {
            if link.is_some()
                && std::fs::canonicalize(home.join(&name))
                    .is_ok_and(|t| t.starts_with(root) && path.starts_with(&t))
            {
                return Some(home.display().to_string());
            }
        }
    }
    None
}
