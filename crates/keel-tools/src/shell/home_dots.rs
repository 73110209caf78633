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
//! The same holds for what else the user's shell runs from the home: `~/bin` (put on `PATH`
//! by Debian's and Ubuntu's stock `~/.profile` once it exists) and every directory of Keel's
//! own `PATH` inside the home (`~/go/bin`), existing or not yet (red-team pass 10, R10-5), and
//! for the targets in the workspace of the links beneath the held entries
//! (`~/.config/bash -> ../dotfiles/bash`, a dotfile manager's usual layout: R10-4). No bound
//! drops an entry silently (R10-1: 60,000 plain files had pushed `~/.profile` past a listing
//! cut): past one, the command runs with the workspace read-only and is told why.
//!
//! A command the user approved (asked and allowed, `!` in `keel chat`) writes as before. The
//! rest of the home — projects, documents — is workspace content as ever.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::os::fd::AsFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The most dot entries mounted read-only for one command (each is a mount); a home with more
/// gets no unapproved writing command at all (red-team pass 9: 211 decoys left `~/.profile`
/// writable under a bound of 200).
const MAX_MOUNTS: usize = 1_000;
/// Where what a command created at the top of a home is moved: one directory, not a new dot
/// entry each (which would count towards [`MAX_MOUNTS`]).
const QUARANTINE_DIR: &str = "quarantined-by-keel";
/// Entries (of any name) of a home's top read at most, before and after a command; past it
/// the command runs read-only.
const MAX_LISTED: usize = 1_000_000;
/// Entries looked through beneath the held entries for links into the workspace; past it
/// the command runs read-only.
const MAX_LINK_WALK: usize = 100_000;
/// Beneath a home, directories not looked through for links: caches and package stores
/// (held read-only with their entry; a link in them is not the user's configuration).
const NOT_WALKED: &[&str] = &[
    ".cache",
    ".npm",
    ".cargo/registry",
    ".cargo/git",
    ".rustup",
    ".m2/repository",
    ".gradle/caches",
    ".local/share/Trash",
    ".vscode-server",
    ".vscode/extensions",
    ".pyenv/versions",
    ".nvm/versions",
];
/// Names of directories not looked through anywhere beneath a home's held entries.
const NOT_WALKED_NAMES: &[&str] = &[".git", "node_modules", "__pycache__", "site-packages"];
/// Names at the top of a home, other than dot entries, that the user's shell and tools run
/// or load code from without any setting: `~/bin` is on `PATH` by Debian's and Ubuntu's stock
/// `~/.profile` once it exists; `~/perl5` is local::lib's default, `~/go` Go's `GOPATH`
/// (its `bin`, and the module cache every `go build` compiles), `~/R` R's user library
/// (red-team pass 10, R10-18).
const CODE_NAMES: &[&str] = &["bin", "perl5", "go", "R"];
/// The environment variables (of Keel's own environment) that list directories the user's
/// tools run or load code from: each one inside a home is held like a dot entry (R10-18:
/// `PERL5LIB`'s `~/perl5/lib/perl5/strict.pm`).
const SEARCH_PATHS: &[&str] = &[
    "PATH",
    "PERL5LIB",
    "PERLLIB",
    "PYTHONPATH",
    "NODE_PATH",
    "GOPATH",
    "GOBIN",
    "GOMODCACHE",
    "R_LIBS",
    "R_LIBS_USER",
    "GEM_HOME",
    "GEM_PATH",
    "CLASSPATH",
    "LD_LIBRARY_PATH",
    "MANPATH",
];

/// The user's homes that `ws` holds: the workspace is the home or lies above it.
pub(crate) fn homes_in(ws: &Path) -> Vec<PathBuf> {
    keel_fs::stores::homes(&keel_fs::stores::process_env)
        .into_iter()
        .filter(|h| h.starts_with(ws))
        .collect()
}

/// A top-level entry of a home: its name, and where it points when it is a symlink.
type Entries = BTreeMap<OsString, Option<PathBuf>>;

/// The held entries at the top of `home` (dot entries and [`CODE_NAMES`]; at most
/// [`MAX_LISTED`] entries of any name read): name → link target for a symlink, `None`
/// otherwise; and whether the listing was whole. `None` when the home cannot be listed.
/// Listed by name, not through a workspace handle: a handle's walk passes the secret stores
/// over, and a store created where there was none (`~/.terraformrc`) is a new dot entry like
/// any other.
fn dot_entries(home: &Path) -> Option<(Entries, bool)> {
    let mut out = Entries::new();
    let mut complete = true;
    for (seen, e) in std::fs::read_dir(home).ok()?.enumerate() {
        if seen >= MAX_LISTED {
            complete = false;
            break;
        }
        let Ok(e) = e else { continue };
        let name = e.file_name();
        if is_dot(&name) || CODE_NAMES.iter().any(|c| name == *c) {
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

/// The directories of Keel's own `PATH` and other search paths ([`SEARCH_PATHS`]) inside
/// `home`, other than beneath a held entry (those are held with it): the user's shell and
/// tools run or load code from them, and one that does not exist yet is on the way as soon
/// as a command makes it.
fn path_dirs(home: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = SEARCH_PATHS
        .iter()
        .filter_map(|v| keel_fs::stores::process_env(v))
        .flat_map(|list| std::env::split_paths(&list).collect::<Vec<_>>())
        .filter(|d| d.is_absolute() && d.starts_with(home) && d != home)
        .filter(|d| {
            d.strip_prefix(home)
                .ok()
                .and_then(|r| r.components().next())
                .is_some_and(|c| {
                    let n = c.as_os_str();
                    !is_dot(n) && !CODE_NAMES.iter().any(|c| n == *c)
                })
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The shallowest directory on the way to `dir` (beneath `home`) that does not exist;
/// `None` when `dir` exists.
fn first_missing(home: &Path, dir: &Path) -> Option<PathBuf> {
    let rel = dir.strip_prefix(home).ok()?;
    let mut at = home.to_path_buf();
    for c in rel.components() {
        at.push(c);
        if at.symlink_metadata().is_err() {
            return Some(at);
        }
    }
    None
}

/// The targets inside `ws` of links at and beneath the held entries of `home` (a dotfile
/// manager's `~/.bashrc -> dotfiles/bashrc`, `~/.config/bash -> ../dotfiles/bash`): the
/// user's tools read them through the links. Links are not followed while looking; a target
/// is looked through too. `Err`: why the look was cut.
fn link_targets(
    home: &Path,
    ws: &Path,
    entries: &Entries,
    hidden: &[PathBuf],
) -> Result<(Vec<PathBuf>, Vec<PathBuf>), String> {
    let mut out: Vec<PathBuf> = Vec::new();
    // Where a dangling link leads: the shallowest missing directory or file on the way, which
    // a command must not make (the user's tools read it as soon as it exists: R10-17).
    let mut dangling: Vec<PathBuf> = Vec::new();
    let mut stack: Vec<PathBuf> = Vec::new();
    let mut seen = 0usize;
    let skipped = |p: &Path| {
        hidden.iter().any(|h| p.starts_with(h))
            || NOT_WALKED.iter().any(|n| p == home.join(n))
            || p.file_name()
                .is_some_and(|n| NOT_WALKED_NAMES.iter().any(|w| n == *w))
    };
    // A link's target in the workspace is held, and looked through in turn.
    let mut target_of = |link: &Path, out: &mut Vec<PathBuf>, stack: &mut Vec<PathBuf>| {
        match std::fs::canonicalize(link) {
            Ok(t) => {
                if t.starts_with(ws) && t != ws && !out.iter().any(|o| t.starts_with(o)) {
                    if t.is_dir() {
                        stack.push(t.clone());
                    }
                    out.push(t);
                }
            }
            Err(_) => {
                if let Some(missing) = lexical_target(link)
                    .filter(|t| t.starts_with(ws))
                    .and_then(|t| first_missing(ws, &t))
                    && !dangling.contains(&missing)
                {
                    dangling.push(missing);
                }
            }
        }
    };
    for (name, link) in entries {
        let path = home.join(name);
        if link.is_some() {
            target_of(&path, &mut out, &mut stack);
        } else if !skipped(&path) {
            stack.push(path);
        }
    }
    while let Some(dir) = stack.pop() {
        let Ok(list) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in list.flatten() {
            seen += 1;
            if seen > MAX_LINK_WALK {
                return Err(format!(
                    "the configuration in the home `{}` holds more than {MAX_LINK_WALK} entries to look through for links into the workspace",
                    home.display()
                ));
            }
            let Ok(t) = e.file_type() else { continue };
            let path = e.path();
            if t.is_symlink() {
                target_of(&path, &mut out, &mut stack);
            } else if t.is_dir() && !skipped(&path) {
                stack.push(path);
            } else if t.is_file() && e.metadata().is_ok_and(|m| m.nlink() > 1) {
                // Another name of it may be workspace content (R10-29).
                return Err(format!(
                    "`{}` has other names (hard links) that cannot be held read-only",
                    path.display()
                ));
            }
        }
    }
    Ok((out, dangling))
}

/// Where the link `link` leads, whether or not that exists: the longest existing part of
/// the way resolved, the rest as written. `None` when the rest holds `..`.
fn lexical_target(link: &Path) -> Option<PathBuf> {
    let to = std::fs::read_link(link).ok()?;
    let joined = if to.is_absolute() {
        to
    } else {
        link.parent()?.join(to)
    };
    crate::sandbox::canonical_prefix(&joined)
}

/// A name the user's tools treat as their own configuration: it starts with a dot (but is
/// not `.` or `..`). `.git` and `.keel` at the workspace's top are held read-only anyway.
fn is_dot(name: &std::ffi::OsStr) -> bool {
    let b = std::os::unix::ffi::OsStrExt::as_bytes(name);
    b.first() == Some(&b'.') && b != b"." && b != b".."
}

/// What a command nobody approved in `ws` finds read-only: every existing real dot entry (and
/// [`CODE_NAMES`] entry) at the top of each home `ws` holds (not symlinks — a mount would
/// land on the target — and not `hidden`, the stores already covered), the existing
/// [`path_dirs`], and the targets in the workspace of the links at and beneath them; and,
/// when a bound cut the look, why the command must run read-only.
#[derive(Debug, Default)]
pub(crate) struct Held {
    pub(crate) paths: Vec<PathBuf>,
    /// What does not exist yet but is read as soon as it does (where dangling links lead).
    pub(crate) pending: Vec<PathBuf>,
    pub(crate) cut: Option<String>,
}

/// [`Held`] for `ws`. `Err`: more than [`MAX_MOUNTS`] entries, why the command must not run.
pub(crate) fn read_only(ws: &Path, hidden: &[PathBuf]) -> Result<Held, String> {
    let mut out = Held::default();
    for home in homes_in(ws) {
        let Some((entries, complete)) = dot_entries(&home) else {
            continue;
        };
        if !complete {
            out.cut = Some(format!(
                "the home `{}` holds more than {MAX_LISTED} entries at its top",
                home.display()
            ));
        }
        for (name, link) in &entries {
            let path = home.join(name);
            if link.is_some() || hidden.iter().any(|h| path.starts_with(h)) {
                continue;
            }
            if home == ws && (name == ".git" || name == ".keel") {
                continue;
            }
            // A mount holds one name of a file; another name of it (a hard link, `~/.bashrc`
            // = `~/dotfiles/bashrc`) would stay writable (R10-17).
            if std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_file() && m.nlink() > 1) {
                out.cut = Some(format!(
                    "`{}` has other names (hard links) that cannot be held read-only",
                    path.display()
                ));
            }
            out.paths.push(path);
        }
        out.paths
            .extend(path_dirs(&home).into_iter().filter(|d| d.is_dir()));
        match link_targets(&home, ws, &entries, hidden) {
            Ok((targets, dangling)) => {
                out.paths.extend(targets);
                out.pending.extend(dangling);
            }
            Err(why) => out.cut = Some(why),
        }
        if out.paths.len() > MAX_MOUNTS {
            return Err(format!(
                "the home `{}` holds more than {MAX_MOUNTS} dot entries, more than Keel can \
                 hold read-only for a command nobody approved; it was not run. Ask the user to \
                 approve it, or work in a project directory instead of the home",
                home.display()
            ));
        }
    }
    out.paths.sort();
    out.paths.dedup();
    Ok(out)
}

/// What the command is told when a bound cut the look at the home ([`Held::cut`]).
pub(crate) fn cut_note(why: &str) -> String {
    format!(
        "keel: {why}, more than Keel can hold read-only piece by piece for a command nobody approved; so this command ran with the workspace read-only. Ask the user to approve commands that must write, or to work in a project directory instead of the home."
    )
}

/// What the tops of the homes in a workspace held before a command.
#[derive(Debug)]
pub(crate) struct Before {
    ws: PathBuf,
    homes: Vec<(PathBuf, Entries)>,
    /// The shallowest missing directory on the way to each [`path_dirs`] entry that did not
    /// exist.
    missing: Vec<PathBuf>,
}

impl Before {
    /// Notes the dot entries of every home `ws` holds; `None` when it holds none.
    pub(crate) fn note(ws: &Path) -> Option<Self> {
        let homes: Vec<(PathBuf, Entries)> = homes_in(ws)
            .into_iter()
            .filter_map(|h| dot_entries(&h).map(|(e, _)| (h, e)))
            .collect();
        let mut missing: Vec<PathBuf> = homes
            .iter()
            .flat_map(|(h, _)| {
                path_dirs(h)
                    .into_iter()
                    .filter_map(|d| first_missing(h, &d))
            })
            .collect();
        // Where the dangling links lead (R10-17).
        for (h, entries) in &homes {
            if let Ok((_, dangling)) = link_targets(h, ws, entries, &[]) {
                missing.extend(dangling);
            }
        }
        missing.sort();
        missing.dedup();
        (!homes.is_empty()).then(|| Self {
            ws: ws.to_path_buf(),
            homes,
            missing,
        })
    }

    /// Moves aside each directory on the way to a `PATH` directory that the command made
    /// (`~/go` or `~/go/bin` where Keel's `PATH` names `~/go/bin`); report lines.
    fn check_path_dirs(&self, lines: &mut Vec<String>) {
        for made in &self.missing {
            if made.symlink_metadata().is_err() {
                continue;
            }
            let (Some(parent), Some(name)) = (made.parent(), made.file_name()) else {
                continue;
            };
            let moved = keel_fs::beneath::DirHandle::open(&self.ws)
                .ok()
                .and_then(|ws| {
                    let rel = parent.strip_prefix(&self.ws).ok()?;
                    if rel.as_os_str().is_empty() {
                        Some(ws)
                    } else {
                        ws.subdir(rel).ok()
                    }
                })
                .and_then(|dir| {
                    let mut base = name.to_os_string();
                    base.push(super::git_programs::SUFFIX);
                    super::git_programs::rename_aside(dir.fd(), name, &base)
                });
            lines.push(match moved {
                Some(to) => format!(
                    "- `{}` (on the user's PATH, or where their configuration's link leads) moved to `{}`",
                    made.display(),
                    parent.join(to).display()
                ),
                None => format!(
                    "- `{}` (on the user's PATH, or where their configuration's link leads) COULD NOT be moved: the user must remove it",
                    made.display()
                ),
            });
        }
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
        self.check_path_dirs(&mut lines);
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

/// Why the file tools do not write `rels` (each relative to the workspace `root`: the name
/// given and where it leads): one lies in what a command nobody approved finds read-only in
/// a home the workspace holds ([`read_only`]: the dot entries, `~/bin`, the `PATH`
/// directories, the targets of the links beneath them), or that could not be looked up to the
/// end. `None`: they may be written.
pub(crate) fn refused(root: &Path, rels: &[&Path]) -> Option<String> {
    let homes = homes_in(root);
    if homes.is_empty() {
        return None;
    }
    let paths: Vec<PathBuf> = rels.iter().map(|r| root.join(r)).collect();
    // A file with other names (a hard link of `~/.bashrc`) may be one of them (R10-17).
    if paths
        .iter()
        .any(|p| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_file() && m.nlink() > 1))
    {
        return homes.first().map(|h| h.display().to_string());
    }
    for home in &homes {
        for path in &paths {
            let Ok(in_home) = path.strip_prefix(home) else {
                continue;
            };
            if let Some(std::path::Component::Normal(first)) = in_home.components().next()
                && (is_dot(first) || CODE_NAMES.iter().any(|c| first == *c))
            {
                return Some(home.display().to_string());
            }
            if path_dirs(home).iter().any(|d| path.starts_with(d)) {
                return Some(home.display().to_string());
            }
        }
    }
    let held = match read_only(root, &[]) {
        Ok(held) if held.cut.is_none() => [held.paths, held.pending].concat(),
        // Past a bound, nothing in the home is written by the file tools either.
        _ => return homes.first().map(|h| h.display().to_string()),
    };
    for path in &paths {
        if held.iter().any(|h| path.starts_with(h))
            && let Some(home) = homes.iter().find(|h| path.starts_with(h))
        {
            return Some(home.display().to_string());
        }
    }
    None
}
