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
//!   there has another name in the workspace; `~/.bashrc`, the other start-up files and the
//!   user site's `.pth` files name a path there in any syntax but as a `cd` target —
//!   R10-16, R10-26, R11-14)
//!
//! is read-only to every command nobody approved ([`super::exec::ExecRequest::approved`]:
//! the kernel sandbox mounts the workspace read-only) and to the file tools ([`holds`]).
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
    ".ssh/config",
    ".vim/vimrc",
    ".config/nvim/init.vim",
    ".config/nvim/init.lua",
    ".config/tmux/tmux.conf",
    ".pam_environment",
    ".xprofile",
    ".xinitrc",
    ".config/starship.toml",
];
/// Words after which a path is only a place to go, not something loaded.
const GOES_TO: &[&str] = &["cd", "pushd", "z", "j"];
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

/// Why the start-up files of `home` load from `ws`: one of them — or a file they name, or a
/// Python user-site `.pth` file — names a path there. Any mention counts, whatever the
/// syntax around it (`source`, `eval "$(cat …)"`, `source <(…)`, a variable, an alias, a
/// `PROMPT_COMMAND`, ssh's `Include`, vim's `runtimepath`, `XDG_CONFIG_HOME=…`): following
/// each syntax kept missing one (red-team pass 11, R11-14). Only the target of `cd` (an
/// alias that goes to a project) does not.
fn start_files_reach(home: &Path, ws: &Path) -> Option<String> {
    let mut queue: Vec<PathBuf> = START_FILES.iter().map(|f| home.join(f)).collect();
    queue.extend(user_site_pth(home));
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
                    "the user's start-up file `{}` names `{}` in this workspace",
                    file.display(),
                    named.display()
                ));
            }
            // A file of the home it names is read in turn (what `.bashrc` sources).
            if named.starts_with(home) && named.is_file() {
                queue.push(named);
            }
        }
    }
    None
}

/// The `.pth` files of the home's Python user sites: each line is a directory Python adds to
/// its path, and a line starting with `import` runs.
fn user_site_pth(home: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(libs) = std::fs::read_dir(home.join(".local/lib")) else {
        return out;
    };
    for lib in libs.flatten().take(16) {
        let Ok(files) = std::fs::read_dir(lib.path().join("site-packages")) else {
            continue;
        };
        out.extend(
            files
                .flatten()
                .take(4096)
                .map(|f| f.path())
                .filter(|p| p.extension().is_some_and(|e| e == "pth"))
                .take(16),
        );
    }
    out
}

/// A regular file's text, when it is at most [`MAX_START_BYTES`] (a FIFO or a device is not
/// read).
fn read_small(path: &Path) -> Option<String> {
    keel_fs::project::read_user_file(path, MAX_START_BYTES)
        .ok()
        .flatten()
}

/// Every path a start-up file's text names: each word written as a path (`~/…`, `$HOME/…`,
/// `${HOME}/…`, absolute, or through a variable the file set to one), between any shell or
/// configuration punctuation — except the word after `cd` and its kin. A glob keeps the part
/// before it.
fn loaded_paths(text: &str, home: &Path) -> Vec<PathBuf> {
    let mut vars: Vec<(String, String)> = Vec::new();
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('#') || line.starts_with(';') || line.starts_with("--") {
            continue;
        }
        for part in line.split(';') {
            statement(part.trim(), home, &mut vars, &mut out);
        }
    }
    out
}

/// One statement of a start-up file: the paths it names go to `out`, a variable it sets to
/// a path to `vars`.
fn statement(line: &str, home: &Path, vars: &mut Vec<(String, String)>, out: &mut Vec<PathBuf>) {
    // Variables the file sets to a path (`DOT="$HOME/d"`), used later as `$DOT/x`.
    let mut line = line.to_string();
    for (name, value) in vars.iter() {
        line = line
            .replace(&format!("${{{name}}}"), value)
            .replace(&format!("${name}"), value);
    }
    let words: Vec<&str> = line
        .split(|c: char| {
            c.is_whitespace()
                || matches!(
                    c,
                    ';' | '&'
                        | '|'
                        | '('
                        | ')'
                        | '`'
                        | '"'
                        | '\''
                        | '<'
                        | '>'
                        | '='
                        | ':'
                        | ','
                        | '+'
                        | '['
                        | ']'
                        | '{'
                        | '}'
                )
        })
        .filter(|w| !w.is_empty())
        .collect();
    for (i, w) in words.iter().enumerate() {
        if i > 0 && GOES_TO.contains(&words[i - 1]) {
            continue;
        }
        if looks_like_path(w) || w.starts_with('$') {
            out.extend(expand(w, home));
        }
    }
    // `NAME=path` (also `export NAME=path`) sets a variable later lines may use.
    let assignment = line.strip_prefix("export ").unwrap_or(&line);
    if let Some((name, value)) = assignment.split_once('=')
        && !name.is_empty()
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    {
        let value = value.trim().trim_matches(|c| c == '"' || c == '\'');
        if let Some(p) = expand(value, home) {
            vars.push((name.to_string(), p.to_string_lossy().into_owned()));
        }
    }
}

/// Whether a word is written as a path (not a program looked up on `PATH`).
fn looks_like_path(word: &str) -> bool {
    ["~", "/", "$HOME", "${HOME}"]
        .iter()
        .any(|p| word.starts_with(p))
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
    if cut.is_empty() || cut.starts_with('-') || !cut.starts_with('/') {
        return None;
    }
    Some(PathBuf::from(cut))
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
                    \thooksPath = ~/dotfiles/hooks\n\
                    DOT=\"$HOME/d1\"; . \"$DOT/bashrc.local\"\n\
                    eval \"$(cat ~/d2/aliases)\"\n\
                    source <(cat ~/d3/x.sh)\n\
                    Include ~/d5/*.conf\n\
                    set runtimepath+=~/d6/vim\n\
                    export XDG_CONFIG_HOME=\"$HOME/d10/config\"\n\
                    alias gs='~/d11/bin/gs'\n\
                    PROMPT_COMMAND='~/d12/prompt'\n\
                    eval \"$(~/d13/bin/init bash)\"\n\
                    /h/d7\n";
        let got = loaded_paths(text, home);
        for want in [
            "/h/dotfiles/bashrc",
            "/h/scripts/aliases.sh",
            "/h/dot/bin",
            "/h/dotfiles/gitconfig",
            "/h/fishbin",
            "/h/rc.d/",
            "/h/dotfiles/hooks",
            "/h/d1/bashrc.local",
            "/h/d2/aliases",
            "/h/d3/x.sh",
            "/h/d5/",
            "/h/d6/vim",
            "/h/d7",
            "/h/d10/config",
            "/h/d11/bin/gs",
            "/h/d12/prompt",
            "/h/d13/bin/init",
        ] {
            assert!(got.contains(&PathBuf::from(want)), "{want}: {got:?}");
        }
        // Where an alias only goes, and what is commented out, load nothing.
        assert!(!got.iter().any(|p| p.starts_with("/h/projects")), "{got:?}");
        assert!(
            !got.iter().any(|p| p.starts_with("/h/commented")),
            "{got:?}"
        );
    }
}
