//! A workspace that holds the user's own configuration is read-only to the agent.
//!
//! A home directory's dot entries — `~/.bashrc`, `~/.gitconfig`, `~/.config`, `~/.local` (the
//! user site of Python), `~/bin`, `~/perl5` — and whatever they load are read by the user's
//! shell and tools in every directory, many of them as programs. Holding them one by one kept
//! missing something: every per-name list of red-team passes 8 to 10 was bypassed within the
//! hour (`~/.mavenrc`, `~/.terraformrc`, `~/bin`, `~/perl5`, links below the top, hard links,
//! dangling links, files `~/.bashrc` sources by path). So the rule is whole:
//!
//! - a workspace that **holds a home** (it is the home or lies above it) or lies inside its
//!   configuration (`~/.config/nvim`, `~/bin`; not Go's `~/go/src` projects), and
//! - a workspace the **home's configuration loads from** (a dotfiles directory: a link at or
//!   beneath the home's dot entries, `~/bin`, `~/perl5`, `~/go` or `~/R` leads into it; a file
//!   there has another name in the workspace; `~/.bashrc` and the other start-up files
//!   source a file there or put a directory there on a search path; `~/.gitconfig` includes
//!   one — R10-16, R10-26)
//!
//! is read-only to every command nobody approved ([`super::exec::ExecRequest::approved`]:
//! the kernel sandbox mounts the workspace read-only) and to the file tools ([`refused`]).
//! The user's own commands (`!` in `keel chat`) and commands they approved write as before.
//! Keel says so when the session starts in a home ([`holds_home`]), and the note names the
//! way out: start Keel in the project's own directory.
//!
//! The look at a home that the workspace does not hold is bounded ([`MAX_LINK_WALK`] entries,
//! [`MAX_DEPTH`] levels, caches and package stores skipped): the home lies outside the
//! workspace, so nothing the agent does can pad it.

use std::collections::HashSet;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Entries looked through beneath a home's held entries for links and other names into the
/// workspace.
const MAX_LINK_WALK: usize = 100_000;
/// Levels looked through beneath the home's top (`~/.config/nvim/lua/x.lua` is 4).
const MAX_DEPTH: usize = 5;
/// Entries of a workspace looked through for other names of the home's multiply-linked
/// files (only when the home has such files on the workspace's device); past it the
/// workspace counts as holding them.
const MAX_WORKSPACE_WALK: usize = 200_000;
/// Beneath a home, directories not looked through: caches and package stores.
const NOT_WALKED: &[&str] = &[
    ".cache",
    ".npm",
    ".cargo/registry",
    ".cargo/git",
    ".rustup",
    ".m2/repository",
    ".gradle/caches",
    ".local/share",
    ".vscode-server",
    ".vscode/extensions",
    ".pyenv/versions",
    ".nvm/versions",
    ".conda/pkgs",
    ".julia",
    "go/pkg",
];
/// Names of directories not looked through anywhere.
const NOT_WALKED_NAMES: &[&str] = &[".git", "node_modules", "__pycache__", "site-packages"];
/// Names at the top of a home, other than dot entries, that the user's shell and tools run
/// or load code from without any setting: `~/bin` (on `PATH` by Debian's and Ubuntu's stock
/// `~/.profile`), `~/perl5` (local::lib), `~/go` (`GOPATH`), `~/R` (R's user library).
const CODE_NAMES: &[&str] = &["bin", "perl5", "go", "R"];
/// The start-up files of the user's shells and tools read for what they load by path.
const START_FILES: &[&str] = &[
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".bash_aliases",
    ".profile",
    ".zshrc",
    ".zshenv",
    ".zprofile",
    ".zlogin",
    ".kshrc",
    ".mkshrc",
    ".config/fish/config.fish",
    ".gitconfig",
    ".config/git/config",
    ".vimrc",
    ".tmux.conf",
    ".inputrc",
];
/// The environment variables whose directories the user's tools run or load code from.
const SEARCH_PATHS: &[&str] = &[
    "PATH",
    "PERL5LIB",
    "PERLLIB",
    "PYTHONPATH",
    "NODE_PATH",
    "GOPATH",
    "GOBIN",
    "R_LIBS",
    "R_LIBS_USER",
    "GEM_HOME",
    "GEM_PATH",
    "CLASSPATH",
    "LD_LIBRARY_PATH",
    "LD_PRELOAD",
    "BASH_ENV",
    "ENV",
    "ZDOTDIR",
    "PYTHONSTARTUP",
];
/// Words after which a start-up file names a file it loads.
const LOADERS: &[&str] = &[".", "source", "source-file", "fish_add_path", "so"];
/// Keys of git's (and other tools') configuration whose values name programs or hook
/// directories: a path in the value is loaded.
const PROGRAM_KEYS: &[&str] = &[
    "hookspath",
    "fsmonitor",
    "sshcommand",
    "helper",
    "editor",
    "pager",
    "askpass",
    "textconv",
    "command",
    "clean",
    "smudge",
    "process",
];
/// Start-up files read at most (those they source included), and bytes of each.
const MAX_START_FILES: usize = 64;
const MAX_START_BYTES: u64 = 1 << 20;

/// The user's homes that `ws` holds: the workspace is the home or lies above it.
pub(crate) fn homes_in(ws: &Path) -> Vec<PathBuf> {
    keel_fs::stores::homes(&keel_fs::stores::process_env)
        .into_iter()
        .filter(|h| h.starts_with(ws))
        .collect()
}

/// The home `ws` holds, if any: what the session says at its start (cheap: no walk).
pub fn holds_home(ws: &Path) -> Option<PathBuf> {
    homes_in(ws).into_iter().next()
}

/// The line the session shows at its start in a workspace that holds a home.
pub fn home_warning(ws: &Path) -> Option<String> {
    holds_home(ws).map(|home| {
        format!(
            "the workspace `{}` holds your home directory `{}`: commands run read-only and the \
             file tools do not write here unless you approve them. Start keel in the project's \
             own directory to let it change files",
            ws.display(),
            home.display()
        )
    })
}

/// Why `ws` is read-only to the agent ([`crate::shell::user_config`]): it holds a home, or a
/// home's configuration loads from it. `None`: it does not.
pub(crate) fn holds(ws: &Path) -> Option<String> {
    if let Some(home) = homes_in(ws).first() {
        return Some(format!(
            "the workspace holds the user's home directory `{}`, whose configuration their \
             shell and tools read in every directory",
            home.display()
        ));
    }
    let ws = std::fs::canonicalize(ws).unwrap_or_else(|_| ws.to_path_buf());
    let homes = keel_fs::stores::homes(&keel_fs::stores::process_env);
    // A workspace inside the configuration itself (`~/.config/nvim`, `~/bin`); Go's old
    // `GOPATH` layout keeps the user's projects in `~/go/src`.
    for home in &homes {
        if let Ok(rel) = ws.strip_prefix(home)
            && let Some(std::path::Component::Normal(first)) = rel.components().next()
            && (is_dot(first) || CODE_NAMES.iter().any(|c| first == *c))
            && !ws.starts_with(home.join("go/src"))
        {
            return Some(format!(
                "the workspace lies in the user's own configuration `{}`, which their shell \
                 and tools read in every directory",
                home.join(first).display()
            ));
        }
    }
    let stamp = stamp(&homes);
    static SEEN: Mutex<Vec<(PathBuf, u64, Option<String>)>> = Mutex::new(Vec::new());
    if let Ok(seen) = SEEN.lock()
        && let Some((_, _, why)) = seen.iter().find(|(w, s, _)| *w == ws && *s == stamp)
    {
        return why.clone();
    }
    let why = homes.iter().find_map(|home| loads_from(home, &ws));
    if let Ok(mut seen) = SEEN.lock() {
        seen.retain(|(w, _, _)| *w != ws);
        seen.push((ws, stamp, why.clone()));
    }
    why
}

/// What the look at the homes depends on: the times of their tops, their `~/.config` and
/// their start-up files. A change to any of them looks again.
fn stamp(homes: &[PathBuf]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for home in homes {
        let places = [Path::new(""), Path::new(".config")]
            .into_iter()
            .chain(START_FILES.iter().map(Path::new));
        for p in places {
            if let Ok(m) = std::fs::symlink_metadata(home.join(p)) {
                (
                    m.ino(),
                    m.mtime(),
                    m.mtime_nsec(),
                    m.ctime(),
                    m.ctime_nsec(),
                )
                    .hash(&mut h);
            } else {
                0u8.hash(&mut h);
            }
        }
    }
    h.finish()
}

/// Why the configuration of `home` (which `ws` does not hold) loads from `ws`, if it does.
fn loads_from(home: &Path, ws: &Path) -> Option<String> {
    if !home.is_dir() || ws.starts_with(home) && ws == home {
        return None;
    }
    if let Some(why) = start_files_reach(home, ws) {
        return Some(why);
    }
    let (link, names) = walk_links(home, ws);
    if let Some(link) = link {
        return Some(format!(
            "the user's configuration `{}` is a link into this workspace",
            link.display()
        ));
    }
    other_names_in(ws, &names).map(|(file, inside)| {
        format!(
            "the user's configuration `{}` is also `{}` in this workspace (a hard link)",
            file.display(),
            inside.display()
        )
    })
}

/// A name the user's tools treat as their own configuration: it starts with a dot (but is
/// not `.` or `..`).
fn is_dot(name: &std::ffi::OsStr) -> bool {
    let b = std::os::unix::ffi::OsStrExt::as_bytes(name);
    b.first() == Some(&b'.') && b != b"." && b != b".."
}

/// Whether `p` leads into `ws`, as written or once its existing part is resolved.
fn leads_into(p: &Path, ws: &Path) -> bool {
    p.starts_with(ws) || crate::sandbox::canonical_prefix(p).is_some_and(|c| c.starts_with(ws))
}

/// Walks the held entries of `home` (dot entries and [`CODE_NAMES`] at its top): the first
/// link found whose target (existing or not) lies in `ws`, and the (device, inode) of the
/// multiply-linked files on `ws`'s device.
fn walk_links(home: &Path, ws: &Path) -> (Option<PathBuf>, HashSet<(u64, u64)>) {
    let ws_dev = std::fs::metadata(ws).map(|m| m.dev()).ok();
    let mut names = HashSet::new();
    let Ok(top) = std::fs::read_dir(home) else {
        return (None, names);
    };
    let mut stack: Vec<(PathBuf, usize)> = top
        .flatten()
        .filter(|e| {
            let n = e.file_name();
            is_dot(&n) || CODE_NAMES.iter().any(|c| n == *c)
        })
        .map(|e| (e.path(), 1))
        .collect();
    let skipped = |p: &Path| {
        NOT_WALKED.iter().any(|n| p == home.join(n))
            || p.file_name()
                .is_some_and(|n| NOT_WALKED_NAMES.iter().any(|w| n == *w))
    };
    let mut seen = 0usize;
    while let Some((path, depth)) = stack.pop() {
        seen += 1;
        if seen > MAX_LINK_WALK {
            break;
        }
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        let kind = meta.file_type();
        if kind.is_symlink() {
            if let Ok(to) = std::fs::read_link(&path) {
                let target = path.parent().map_or(to.clone(), |p| p.join(&to));
                if leads_into(&target, ws) {
                    return (Some(path), names);
                }
            }
        } else if kind.is_file() {
            if meta.nlink() > 1 && Some(meta.dev()) == ws_dev {
                names.insert((meta.dev(), meta.ino()));
            }
        } else if kind.is_dir()
            && depth < MAX_DEPTH
            && !skipped(&path)
            && let Ok(list) = std::fs::read_dir(&path)
        {
            stack.extend(list.flatten().map(|e| (e.path(), depth + 1)));
        }
    }
    (None, names)
}

/// A file of `ws` that is one of `names` (other names of the home's configuration), with
/// that name in the home; a walk past its bound counts as finding one.
fn other_names_in(ws: &Path, names: &HashSet<(u64, u64)>) -> Option<(PathBuf, PathBuf)> {
    if names.is_empty() {
        return None;
    }
    let mut stack = vec![ws.to_path_buf()];
    let mut seen = 0usize;
    while let Some(dir) = stack.pop() {
        let Ok(list) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in list.flatten() {
            seen += 1;
            if seen > MAX_WORKSPACE_WALK {
                return Some((
                    PathBuf::from("(files with other names)"),
                    PathBuf::from(format!(
                        "(more than {MAX_WORKSPACE_WALK} entries to look through)"
                    )),
                ));
            }
            let Ok(t) = e.file_type() else { continue };
            if t.is_dir() {
                if !NOT_WALKED_NAMES.iter().any(|n| e.file_name() == *n) {
                    stack.push(e.path());
                }
            } else if t.is_file()
                && let Ok(m) = e.metadata()
                && m.nlink() > 1
                && names.contains(&(m.dev(), m.ino()))
            {
                return Some((PathBuf::from("a file of the home"), e.path()));
            }
        }
    }
    None
}

/// Why the start-up files of `home` load from `ws`: a file they source (followed, bounded)
/// or a directory they put on a search path lies there.
fn start_files_reach(home: &Path, ws: &Path) -> Option<String> {
    let mut queue: Vec<PathBuf> = START_FILES.iter().map(|f| home.join(f)).collect();
    let mut read = 0usize;
    let mut done: HashSet<PathBuf> = HashSet::new();
    while let Some(file) = queue.pop() {
        if read >= MAX_START_FILES || !done.insert(file.clone()) {
            continue;
        }
        let Some(text) = read_small(&file) else {
            continue;
        };
        read += 1;
        for named in loaded_paths(&text, home) {
            if leads_into(&named, ws) {
                return Some(format!(
                    "the user's start-up file `{}` loads `{}` from this workspace",
                    file.display(),
                    named.display()
                ));
            }
            if named.is_file() {
                queue.push(named);
            }
        }
    }
    None
}

/// A regular file's text, when it is at most [`MAX_START_BYTES`] (a FIFO or a device is not
/// read).
fn read_small(path: &Path) -> Option<String> {
    let meta = std::fs::metadata(path).ok()?;
    if !meta.is_file() || meta.len() > MAX_START_BYTES {
        return None;
    }
    std::fs::read(path)
        .ok()
        .map(|b| String::from_utf8_lossy(&b).into_owned())
}

/// The paths a start-up file's text loads or searches: the word after a loader (`.`,
/// `source`, tmux's `source-file`, fish's `fish_add_path`), git's `path = …` (includes), and
/// each directory of a search-path assignment (`export PATH="$HOME/dotfiles/bin:$PATH"`,
/// fish's `set -x PATH …`), with `~`, `$HOME` and `${HOME}` expanded and relative paths taken
/// from the home. A glob keeps the part before it.
fn loaded_paths(text: &str, home: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('#') || line.starts_with(';') || line.starts_with('"') {
            continue;
        }
        let words: Vec<&str> = line
            .split(|c: char| c.is_whitespace() || matches!(c, ';' | '&' | '|' | '(' | ')' | '`'))
            .filter(|w| !w.is_empty())
            .collect();
        for (i, w) in words.iter().enumerate() {
            if LOADERS.contains(w) {
                if let Some(next) = words.get(i + 1) {
                    out.extend(expand(next, home));
                }
            } else if *w == "path" && words.get(i + 1) == Some(&"=") {
                if let Some(next) = words.get(i + 2) {
                    out.extend(expand(next, home));
                }
            } else if let Some(rest) = w.strip_prefix("path=") {
                out.extend(expand(rest, home));
            } else if i == 0 && *w == "for" && words.get(2) == Some(&"in") {
                // A loop over files in a start-up file loads them (`for f in ~/rc.d/*.sh`).
                for part in words[3..].iter().take_while(|p| **p != "do") {
                    out.extend(expand(part, home));
                }
            } else if i == 0
                && words.get(1) == Some(&"=")
                && PROGRAM_KEYS
                    .iter()
                    .any(|k| w.to_ascii_lowercase().ends_with(k))
            {
                for part in words[2..].iter().filter(|p| looks_like_path(p)) {
                    out.extend(expand(part, home));
                }
            } else if let Some((var, value)) = w.split_once('=')
                && SEARCH_PATHS.contains(&var)
            {
                for part in value.split(':') {
                    out.extend(expand(part, home));
                }
            } else if SEARCH_PATHS.contains(w)
                && i > 0
                && matches!(words[i - 1], "-x" | "-gx" | "-Ux" | "set")
            {
                for part in &words[i + 1..] {
                    out.extend(expand(part, home));
                }
            }
        }
    }
    out
}

/// Whether a word of a value is written as a path (not a program looked up on `PATH`).
fn looks_like_path(word: &str) -> bool {
    let w = word.trim_matches(|c| matches!(c, '"' | '\''));
    ["~", "/", "$HOME", "${HOME}", "./", "../"]
        .iter()
        .any(|p| w.starts_with(p))
}

/// A word of a start-up file as the path it names: quotes stripped, `~`, `$HOME` and
/// `${HOME}` expanded, relative to the home, cut before any glob or other variable.
fn expand(word: &str, home: &Path) -> Option<PathBuf> {
    let w: String = word.chars().filter(|c| !matches!(c, '"' | '\'')).collect();
    let home_text = home.to_string_lossy();
    let w = if let Some(rest) = w.strip_prefix("~/") {
        format!("{home_text}/{rest}")
    } else if w == "~" {
        home_text.to_string()
    } else {
        w.replace("${HOME}", &home_text)
            .replace("$HOME", &home_text)
    };
    let cut = w
        .find(['*', '?', '[', '$', '{'])
        .map_or(w.as_str(), |at| &w[..at]);
    if cut.is_empty() || cut.starts_with('-') {
        return None;
    }
    let p = Path::new(cut);
    Some(if p.is_absolute() {
        p.to_path_buf()
    } else {
        home.join(p)
    })
}

/// Why the file tools do not write in the workspace `root`: it holds the user's own
/// configuration ([`holds`]). `None`: they may write (other rules still apply).
pub(crate) fn refused(root: &Path) -> Option<String> {
    holds(root)
}

/// The note a command nobody approved gets in such a workspace.
pub(crate) fn read_only_note(why: &str) -> String {
    format!(
        "keel: commands nobody approved run read-only here: {why}. Do not try to change files \
         here; tell the user what should change and why, or ask them to start keel in the \
         project's own directory."
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_files_name_what_they_load() {
        let home = Path::new("/h");
        let text = "[ -f ~/dotfiles/bashrc ] && . ~/dotfiles/bashrc\n\
                    source \"$HOME/scripts/aliases.sh\"\n\
                    export PATH=\"${HOME}/dot/bin:$PATH\"\n\
                    for f in ~/rc.d/*.sh; do . $f; done\n\
                    alias p='cd ~/projects/p'\n\
                    # . ~/commented\n\
                    [include]\n\tpath = ~/dotfiles/gitconfig\n\
                    set -gx PATH ~/fishbin $PATH\n\
                    for f in ~/rc.d/*.sh; do\n\
                    \thooksPath = ~/dotfiles/hooks\n\
                    \teditor = vim\n";
        let got = loaded_paths(text, home);
        for want in [
            "/h/dotfiles/bashrc",
            "/h/scripts/aliases.sh",
            "/h/dot/bin",
            "/h/dotfiles/gitconfig",
            "/h/fishbin",
            "/h/rc.d/",
            "/h/dotfiles/hooks",
        ] {
            assert!(got.contains(&PathBuf::from(want)), "{want}: {got:?}");
        }
        assert!(!got.iter().any(|p| p.starts_with("/h/projects")), "{got:?}");
        assert!(
            !got.iter().any(|p| p.starts_with("/h/commented")),
            "{got:?}"
        );
        assert!(!got.iter().any(|p| p.ends_with("vim")), "{got:?}");
    }
}
