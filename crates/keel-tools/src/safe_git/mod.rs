//! Running git so that it executes nothing the repository (or anyone but Keel) controls: the
//! one hardened git invocation, used by the engine's snapshots and by the read-only
//! `git_status`/`git_diff` tools.
//!
//! Both run outside the sandbox with Keel's own rights, in a repository the model may have
//! written to, so every way git has of running a program is switched off:
//! - the environment is an allowlist (`PATH`, `TMPDIR`), so no `GIT_*` variable, no secret and
//!   no `HOME` reaches git; system and global config are not read (`GIT_CONFIG_NOSYSTEM`,
//!   `GIT_CONFIG_GLOBAL=/dev/null`), so `safe.directory`, `trace2.*` and templates cannot come
//!   from there either;
//! - every config key that names a program is forced off at command-line precedence, which
//!   beats the repository's own config and anything it includes ([`FORCED`]);
//! - the repository's filter, diff and merge drivers, credential helpers and signing programs
//!   are read from its config (including `include.path`/`includeIf` files) before each
//!   command and blanked one by one ([`neutralisers`]), so attributes from
//!   `.git/info/attributes` or `.gitattributes` name drivers that do nothing;
//! - replace refs are ignored (a snapshot restores its own content) and the pager is off
//!   (`--no-pager`, `core.pager`, `GIT_PAGER`, `PAGER`).
//!
//! Aliases never apply: Keel runs only built-in commands, which aliases cannot shadow.

use std::ffi::OsString;
use std::path::Path;
use std::process::{Command, Stdio};

mod special;
use special::no_special_files;

/// Config keys forced at command-line precedence on every git Keel runs.
pub const FORCED: &[(&str, &str)] = &[
    ("core.fsmonitor", "false"),
    ("core.hooksPath", "/dev/null"),
    ("core.sshCommand", ""),
    ("core.gitProxy", ""),
    ("core.askPass", ""),
    ("core.editor", ":"),
    ("core.pager", "cat"),
    ("core.alternateRefsCommand", ""),
    ("core.useReplaceRefs", "false"),
    ("core.untrackedCache", "false"),
    ("core.attributesFile", "/dev/null"),
    ("sequence.editor", ":"),
    ("diff.external", ""),
    ("credential.helper", ""),
    ("gpg.program", ""),
    ("commit.gpgSign", "false"),
    ("tag.gpgSign", "false"),
    ("protocol.allow", "never"),
    // `ext::` runs a command line as a transport; nothing Keel does needs it.
    ("protocol.ext.allow", "never"),
    ("submodule.recurse", "false"),
    ("gc.auto", "0"),
    ("maintenance.auto", "false"),
    ("color.ui", "false"),
];

/// Keys of the repository's config that name a program: `(section, key, safe value)`, for any
/// subsection (driver name, URL, signing format).
const DRIVER_KEYS: &[(&str, &str, &str)] = &[
    ("filter", "clean", ""),
    ("filter", "smudge", ""),
    ("filter", "process", ""),
    ("filter", "required", "false"),
    ("diff", "command", ""),
    ("diff", "textconv", ""),
    ("merge", "driver", ""),
    ("credential", "helper", ""),
    ("gpg", "program", ""),
    ("pager", "", "false"),
    // A repository's `protocol.<name>.allow = always` beats the forced `protocol.allow=never`
    // (the more specific key wins): with `ext::` or a local `uploadpack`, any fetch git makes
    // on its own (a partial clone's lazy fetch of a missing object) runs its program
    // (red-team pass 6, R6-1).
    ("protocol", "allow", "never"),
    // Config-defined hooks (newer git): not run by today's 2.4x, blanked ahead of time.
    ("hook", "command", ""),
];

/// The overrides that blank every program-naming key in `names` (the NUL-separated output of
/// `git config --list --name-only -z`).
pub fn neutralisers(names: &[u8]) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for raw in names.split(|b| *b == 0).filter(|n| !n.is_empty()) {
        let name = String::from_utf8_lossy(raw).into_owned();
        let lower = name.to_ascii_lowercase();
        let Some((section, rest)) = lower.split_once('.') else {
            continue;
        };
        // The key is after the last dot; a subsection (which may hold dots) sits between.
        let key = rest.rsplit_once('.').map_or(rest, |(_, k)| k);
        let has_subsection = rest.contains('.');
        let safe = DRIVER_KEYS.iter().find_map(|(s, k, v)| {
            let key_matches = if k.is_empty() {
                // `pager.<command>`: any key directly under the section.
                !has_subsection
            } else {
                has_subsection && key == *k
            };
            (*s == section && key_matches).then_some(*v)
        });
        if let Some(value) = safe
            && !out.iter().any(|(n, _)| *n == name)
        {
            out.push((name, value.to_string()));
        }
    }
    out
}

/// The most of an attributes file read for driver names.
const MAX_ATTRIBUTES: u64 = 1024 * 1024;

/// Overrides blanking every driver an attributes file names (`filter=kx`, `diff=d`,
/// `merge=m`, in a pattern line or an `[attr]` macro), whether or not the configuration
/// defines it now: git reads its configuration — and the includes in it — again when it
/// runs, so a driver defined only in an include that appears after the probe (a file a
/// running command swaps in, or `include.path = /proc/1/cwd/…`, which resolves differently
/// inside the sandbox) would run (red-team pass 5, R5-1). Command-line overrides beat every
/// config file, so these hold whatever git reads later.
pub fn attribute_neutralisers(text: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    // Split exactly where git's attribute parser does (space, tab, CR, LF): Rust's
    // `split_whitespace` also splits at a vertical tab, which git keeps in a name (R5-1).
    for token in text
        .split([' ', '\t', '\r', '\n'])
        .filter(|t| !t.is_empty())
    {
        let Some((attr, name)) = token.split_once('=') else {
            continue;
        };
        let keys: &[(&str, &str)] = match attr {
            "filter" => &[
                ("clean", ""),
                ("smudge", ""),
                ("process", ""),
                ("required", "false"),
            ],
            "diff" => &[("command", ""), ("textconv", "")],
            "merge" => &[("driver", "")],
            _ => continue,
        };
        if name.is_empty() {
            continue;
        }
        for (key, value) in keys {
            let full = format!("{attr}.{name}.{key}");
            if !out.iter().any(|(n, _)| *n == full) {
                out.push((full, (*value).to_string()));
            }
        }
    }
    out
}

/// [`attribute_neutralisers`] for the attributes files of the git directory `git_dir`
/// (`info/attributes`), as git reads it (a link followed), regular files only, bounded.
pub fn info_attribute_neutralisers(git_dir: &Path) -> Vec<(String, String)> {
    match crate::project::read_user_file(&git_dir.join("info/attributes"), MAX_ATTRIBUTES) {
        Ok(Some(text)) => attribute_neutralisers(&text),
        _ => Vec::new(),
    }
}

/// The environment git runs with: only what it needs from Keel's, plus the settings that
/// keep system and global configuration out.
pub fn environment(
    inherited: impl IntoIterator<Item = (OsString, OsString)>,
) -> Vec<(OsString, OsString)> {
    let mut env: Vec<(OsString, OsString)> = inherited
        .into_iter()
        .filter(|(name, _)| name == "PATH" || name == "TMPDIR")
        // git runs in the workspace: a relative, empty or workspace PATH entry would find the
        // repository's own programs there (its helpers, hooks' interpreters).
        .map(|(name, value)| {
            let value = if name == "PATH" {
                crate::shell::lookup::trusted_path_value(&value, &[])
            } else {
                value
            };
            (name, value)
        })
        .filter(|(_, value)| !value.is_empty())
        .collect();
    if !env.iter().any(|(n, _)| n == "PATH") {
        env.push(("PATH".into(), "/usr/local/bin:/usr/bin:/bin".into()));
    }
    for (name, value) in [
        ("LC_ALL", "C"),
        ("GIT_CONFIG_NOSYSTEM", "1"),
        ("GIT_CONFIG_GLOBAL", "/dev/null"),
        ("GIT_TERMINAL_PROMPT", "0"),
        // A partial clone fetches a missing object on demand from its promisor remote — a
        // transport the repository's config chooses (`ext::<command>`): Keel's git reads
        // only what is there (git 2.44 or newer; older git still has the forced
        // `protocol.*.allow=never`) (red-team pass 6, R6-1).
        ("GIT_NO_LAZY_FETCH", "1"),
        ("GIT_NO_REPLACE_OBJECTS", "1"),
        ("GIT_OPTIONAL_LOCKS", "0"),
        ("GIT_PAGER", "cat"),
        ("PAGER", "cat"),
    ] {
        env.push((name.into(), value.into()));
    }
    env
}

/// The empty tree of a repository's object format (`git rev-parse --show-object-format`):
/// what Keel's git reads attributes from (`GIT_ATTR_SOURCE`), so no work-tree
/// `.gitattributes` names a filter or diff driver for it (git 2.40 or newer).
pub fn empty_tree(object_format: &str) -> &'static str {
    if object_format.trim() == "sha256" {
        "6ef19b41225c5369f1c104d45d8d85efa9b057b53b14b4b9b939dd74decc5321"
    } else {
        "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
    }
}

/// Whether this git reads attributes from `GIT_ATTR_SOURCE` (2.40 or newer).
pub fn attr_source_supported() -> bool {
    git_version().is_some_and(|v| v >= (2, 40))
}

/// The installed git's (major, minor), probed once per process; `None` when git cannot run.
pub fn git_version() -> Option<(u32, u32)> {
    static VERSION: std::sync::OnceLock<Option<(u32, u32)>> = std::sync::OnceLock::new();
    *VERSION.get_or_init(|| {
        let out = bare().arg("--version").output().ok()?;
        if !out.status.success() {
            return None;
        }
        let text = String::from_utf8_lossy(&out.stdout);
        let version = text.split_whitespace().nth(2)?;
        let mut parts = version.split('.');
        let major = parts.next()?.parse().ok()?;
        let minor = parts
            .next()
            .and_then(|m| m.parse().ok())
            .unwrap_or_default();
        Some((major, minor))
    })
}

/// Whether this git takes configuration through `GIT_CONFIG_COUNT` (2.31 or newer).
pub fn config_env_supported() -> bool {
    git_version().is_some_and(|v| v >= (2, 31))
}

/// `git` with the allowlisted environment, no pager, no stdin, the [`FORCED`] settings and
/// `extra` overrides. With `config_env` (git 2.31 or newer) the settings go in as
/// `GIT_CONFIG_COUNT` pairs, which take any key verbatim; older git gets `-c key=value`, which
/// cannot carry a key holding `=`: such a key is refused (the error names it).
pub fn hardened_git(extra: &[(String, String)], config_env: bool) -> Result<Command, String> {
    let mut c = base();
    let pairs = FORCED
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .chain(extra.iter().cloned());
    let mut count = 0usize;
    for (key, value) in pairs {
        if config_env {
            c.env(format!("GIT_CONFIG_KEY_{count}"), key)
                .env(format!("GIT_CONFIG_VALUE_{count}"), value);
            count += 1;
        } else if key.contains('=') {
            return Err(format!(
                "the repository's configuration names a program under `{key}`, which this git cannot switch off; install git 2.31 or newer"
            ));
        } else {
            c.arg("-c").arg(format!("{key}={value}"));
        }
    }
    if config_env {
        c.env("GIT_CONFIG_COUNT", count.to_string());
    }
    Ok(c)
}

/// `git` with the allowlisted environment, no pager and no stdin: what every hardened git
/// starts from.
fn base() -> Command {
    // The one place Keel's own git starts: the environment, the pager and (in the callers)
    // the forced settings are what make it safe to run outside the sandbox.
    // git itself is found in trusted PATH directories only, again after each newly opened
    // workspace: a relative or empty entry would be looked up after the child's chdir, and an
    // absolute one inside a workspace (an activated `.venv/bin`) holds whatever the model
    // wrote there — either would run a repository's `git` unconfined (red-team B25, R23).
    static GIT: std::sync::Mutex<Option<(u64, Option<std::path::PathBuf>)>> =
        std::sync::Mutex::new(None);
    // Not found: the bare name, looked up in the child's PATH of trusted entries only (so a
    // machine without git fails to start it, and says so).
    let program = crate::shell::lookup::cached(&GIT, "git").unwrap_or_else(|| "git".into());
    #[allow(clippy::disallowed_methods)]
    let mut c = Command::new(program);
    c.env_clear()
        .envs(environment(std::env::vars_os()))
        .stdin(Stdio::null())
        .arg("--no-pager");
    c
}

/// The repository Keel's own git may read for a directory, and its work tree — pinned, so the
/// repository's configuration cannot move either: git is run with `GIT_DIR` and
/// `GIT_WORK_TREE` set from here, which beat `core.worktree` (a shipped `.git/config` with
/// `core.worktree = ../../..` made `git_diff` read the home's `.ssh/id_ed25519` — red-team
/// pass 3, R3-1) and any `commondir`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pinned {
    /// The git directory: `<top>/.git`, a linked worktree's or a submodule's.
    pub git_dir: std::path::PathBuf,
    /// The work tree: the directory holding the `.git` entry.
    pub top: std::path::PathBuf,
}

impl Pinned {
    /// Sets the pinned repository on a git command (over its own discovery and config).
    pub fn apply(&self, c: &mut Command) {
        c.env("GIT_DIR", &self.git_dir)
            .env("GIT_WORK_TREE", &self.top);
    }
}

/// Finds the repository holding `dir` the way git's discovery does — the nearest `.git` at or
/// above it — but accepts only a work tree's own: `<top>/.git` a real directory without a
/// `commondir` file (which would send git into any repository it names), or a `.git` file
/// naming a linked worktree whose `gitdir` back-link names that same file, or a submodule's
/// directory under an enclosing repository's `.git/modules`. `Ok(None)`: no repository.
/// `Err`: a `.git` that is a link, or names another repository (the message says which).
pub fn pinned_repository(dir: &Path) -> Result<Option<Pinned>, String> {
    let start = dir
        .canonicalize()
        .map_err(|e| format!("cannot resolve {}: {e}", dir.display()))?;
    let mut cur: Option<&Path> = Some(&start);
    while let Some(top) = cur {
        let dot = top.join(".git");
        match std::fs::symlink_metadata(&dot) {
            Ok(m) if m.is_dir() => {
                if std::fs::symlink_metadata(dot.join("commondir")).is_ok() {
                    return Err(format!(
                        "{} holds a `commondir` file naming another repository; Keel's git reads only a work tree's own repository",
                        dot.display()
                    ));
                }
                no_special_files(&dot)?;
                return Ok(Some(Pinned {
                    git_dir: dot,
                    top: top.to_path_buf(),
                }));
            }
            Ok(m) if m.is_file() => {
                let pinned = linked(top, &dot)?;
                no_special_files(&pinned.git_dir)?;
                return Ok(Some(pinned));
            }
            Ok(_) => {
                return Err(format!(
                    "{} is a link or special file, not a repository; Keel's git does not follow it",
                    dot.display()
                ));
            }
            Err(_) => cur = top.parent(),
        }
    }
    Ok(None)
}

/// The git directory a `.git` file at `dot` names, if it is a linked worktree's (back-link
/// checked) or a submodule's (under an enclosing repository's `.git/modules`).
fn linked(top: &Path, dot: &Path) -> Result<Pinned, String> {
    let refuse = || {
        format!(
            "{} names a git directory that is neither a linked worktree of its own nor a submodule's; Keel's git reads only a work tree's own repository",
            dot.display()
        )
    };
    let text = crate::project::read_in_dir(dot, 4096)
        .map_err(|e| e.to_string())?
        .ok_or_else(refuse)?;
    let named = text
        .lines()
        .find_map(|l| l.strip_prefix("gitdir:"))
        .map(str::trim)
        .filter(|g| !g.is_empty())
        .ok_or_else(refuse)?;
    let git_dir = top.join(named).canonicalize().map_err(|_| refuse())?;
    // A work tree's git directory never lies inside the work tree itself (a shipped
    // `.gd/worktrees/x` posing as one: red-team pass 3, R3-12).
    if git_dir.starts_with(top) {
        return Err(refuse());
    }
    let read = |name: &str| {
        crate::project::read_in_dir(&git_dir.join(name), 4096)
            .ok()
            .flatten()
            .map(|t| t.trim().to_string())
    };
    // A linked worktree: `<common>/worktrees/<name>`, whose `commondir` names that `<common>`
    // and whose `gitdir` names this file by its absolute path (as git writes both).
    let registered = git_dir
        .parent()
        .filter(|p| p.file_name().is_some_and(|n| n == "worktrees"))
        .and_then(Path::parent)
        .is_some_and(|common| {
            let common_named = read("commondir")
                .and_then(|c| git_dir.join(c).canonicalize().ok())
                .is_some_and(|c| c == common);
            let back = read("gitdir").is_some_and(|b| {
                Path::new(&b).is_absolute()
                    && Path::new(&b)
                        .canonicalize()
                        .is_ok_and(|b| dot.canonicalize().is_ok_and(|d| d == b))
            });
            common_named && back
        });
    // A submodule: `<ancestor>/.git/modules/…`, for an ancestor of the work tree, which
    // names no other repository.
    let submodule = read("commondir").is_none()
        && top
            .ancestors()
            .skip(1)
            .any(|a| beneath_modules(a, &git_dir));
    // Never a protected store's repository, whatever the route (`~/.password-store/.git`).
    let stores = keel_fs::stores::protected(&keel_fs::stores::process_env);
    if stores.iter().any(|s| {
        git_dir.starts_with(&s.path) || s.path.canonicalize().is_ok_and(|c| git_dir.starts_with(c))
    }) {
        return Err(refuse());
    }
    if registered || submodule {
        Ok(Pinned {
            git_dir,
            top: top.to_path_buf(),
        })
    } else {
        Err(refuse())
    }
}

/// Whether `git_dir` (canonical) lies in `<ancestor>/.git/modules` (`ancestor` canonical)
/// through real directories only: a `.git`, `modules` or directory below it that is a symlink
/// would make any repository on disk pass for a submodule — a shipped `.git/modules ->
/// ~` showed the hidden `~/.password-store` through `git_diff` (red-team pass 4, R4-4).
fn beneath_modules(ancestor: &Path, git_dir: &Path) -> bool {
    let modules = ancestor.join(".git").join("modules");
    let Ok(rel) = git_dir.strip_prefix(&modules) else {
        return false;
    };
    let mut cur = ancestor.to_path_buf();
    let steps = [".git", "modules"]
        .into_iter()
        .map(std::ffi::OsStr::new)
        .chain(rel.components().map(|c| c.as_os_str()));
    for step in steps {
        cur.push(step);
        // `symlink_metadata` of a link is never a directory.
        if !std::fs::symlink_metadata(&cur).is_ok_and(|m| m.is_dir()) {
            return false;
        }
    }
    true
}

/// The first path of an index listing (`git ls-files -z --cached`) that does not name a file
/// inside the work tree: absolute, empty, or with a `.`, `..` or `.git` component. Git checks
/// paths when it adds them, not when it loads an index, so a shipped (or command-written)
/// index can hold `../../home/u/.ssh/id_ed25519`, and Keel's unconfined git then reads that
/// file for a diff or a snapshot (red-team pass 3, R3-11). Shown escaped.
pub fn bad_index_path(listing: &[u8]) -> Option<String> {
    listing
        .split(|b| *b == 0)
        .filter(|p| !p.is_empty())
        .find(|path| {
            path.starts_with(b"/")
                || path.split(|b| *b == b'/').any(|c| {
                    c.is_empty() || c == b"." || c == b".." || c.eq_ignore_ascii_case(b".git")
                })
        })
        .map(|p| String::from_utf8_lossy(p).escape_debug().to_string())
}

/// Refuses a repository whose index names files outside its work tree ([`bad_index_path`]),
/// by listing it with the hardened git, `pinned` as given. Blocking.
pub fn check_index(pinned: &Pinned, config_env: bool) -> Result<(), String> {
    let mut c = hardened_git(&[], config_env)?;
    pinned.apply(&mut c);
    let out = c
        .current_dir(&pinned.top)
        .args(["ls-files", "-z", "--cached", "--full-name"])
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| format!("cannot run git: {e}"))?;
    match bad_index_path(&out.stdout) {
        Some(path) => Err(format!(
            "the repository's index names `{path}`, which is not a file inside the work tree (an index git itself never writes); Keel's git does not read it. Rebuild the index with `git read-tree HEAD` if this is your repository"
        )),
        None => Ok(()),
    }
}

/// [`hardened_git`] with the [`FORCED`] settings only (as `-c` arguments, which any git takes),
/// for commands that read no attributes (`--version`, discovery, `init`). Cannot fail: no
/// forced key holds `=`.
pub fn bare() -> Command {
    let mut c = base();
    for (key, value) in FORCED {
        c.arg("-c").arg(format!("{key}={value}"));
    }
    c
}

/// A hardened `git` to run in the repository at `dir` (which may not be one): [`hardened_git`]
/// with `extra` and the [`neutralisers`] of every program-naming key the repository's
/// configuration holds, working directory `dir`. Blocking: the configuration is read first
/// (`git config --list --name-only -z`, which runs no program). For Keel's own views of a
/// workspace outside the agent's turn, such as `keel chat`'s `/diff`.
pub fn in_repository(dir: &Path, extra: &[(String, String)]) -> Result<Command, String> {
    // git runs here, unconfined: no program is looked up in it.
    crate::shell::lookup::distrust(dir);
    let pinned = pinned_repository(dir)?;
    let config_env = config_env_supported();
    if let Some(p) = &pinned {
        check_index(p, config_env)?;
    }
    let pin = |c: &mut Command| match &pinned {
        Some(p) => p.apply(c),
        // No repository: none may be discovered through a work tree elsewhere either.
        None => {
            c.env("GIT_DIR", dir.join(".git"));
        }
    };
    let mut probe = hardened_git(extra, config_env)?;
    pin(&mut probe);
    let names = probe
        .current_dir(dir)
        .args(["config", "--list", "--name-only", "-z"])
        .output()
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => {
                "git is not installed (or not on PATH); install it to see diffs".to_string()
            }
            _ => format!("cannot run git: {e}"),
        })?;
    let mut all = extra.to_vec();
    if let Some(p) = &pinned {
        all.extend(info_attribute_neutralisers(&p.git_dir));
    }
    if names.status.success() {
        all.extend(neutralisers(&names.stdout));
    } else {
        let err = String::from_utf8_lossy(&names.stderr);
        // Outside a repository there is no repository configuration to switch off.
        if !err.contains("not a git repository") {
            return Err(format!(
                "cannot read the repository's git configuration (so git is not run): {}",
                err.trim()
            ));
        }
    }
    let mut c = hardened_git(&all, config_env)?;
    pin(&mut c);
    c.current_dir(dir);
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_driver_an_attributes_file_names_is_blanked() {
        let got = attribute_neutralisers(
            "*.txt filter=kx\n[attr]m diff=d merge=mm -text\n*.c m eol=lf filter=\n",
        );
        let keys: Vec<&str> = got.iter().map(|(k, _)| k.as_str()).collect();
        let vt = attribute_neutralisers("*.txt filter=k\u{b}x\n");
        assert!(
            vt.iter().any(|(k, _)| k == "filter.k\u{b}x.clean"),
            "{vt:?}"
        );
        assert_eq!(
            keys,
            [
                "filter.kx.clean",
                "filter.kx.smudge",
                "filter.kx.process",
                "filter.kx.required",
                "diff.d.command",
                "diff.d.textconv",
                "merge.mm.driver",
            ]
        );
    }

    #[test]
    fn program_naming_keys_are_found_in_any_subsection() {
        let names = b"core.bare\0filter.evil.clean\0Filter.A.b=c.smudge\0filter.x.required\0diff.tc.textconv\0diff.renames\0credential.https://h.helper\0gpg.ssh.program\0pager.diff\0pager.x.y\0merge.m.driver\0filter.evil.clean\0hook.h.command\0protocol.ext.allow\0protocol.allow\0";
        let got = neutralisers(names);
        let keys: Vec<&str> = got.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            keys,
            [
                "filter.evil.clean",
                "Filter.A.b=c.smudge",
                "filter.x.required",
                "diff.tc.textconv",
                "credential.https://h.helper",
                "gpg.ssh.program",
                "pager.diff",
                "merge.m.driver",
                "hook.h.command",
                "protocol.ext.allow"
            ]
        );
        assert_eq!(got[2].1, "false", "a required filter is made optional");
        assert_eq!(got[0].1, "", "a command is blanked");
    }

    #[test]
    fn git_never_looks_programs_up_in_the_workspace() {
        // Red-team B25: `PATH=./node_modules/.bin:$PATH` (or an empty entry) made Keel's
        // unconfined git resolve to the repository's own `git` after its chdir.
        let env = environment([(
            "PATH".into(),
            "./node_modules/.bin::bin:/usr/local/bin:/usr/bin".into(),
        )]);
        let path = env
            .iter()
            .find(|(n, _)| n == "PATH")
            .map(|(_, v)| v.to_string_lossy().into_owned());
        assert_eq!(path.as_deref(), Some("/usr/local/bin:/usr/bin"));
        let only_relative = environment([("PATH".into(), ".:bin".into())]);
        let path = only_relative
            .iter()
            .find(|(n, _)| n == "PATH")
            .map(|(_, v)| v.to_string_lossy().into_owned());
        assert_eq!(path.as_deref(), Some("/usr/local/bin:/usr/bin:/bin"));
        let dirs = crate::shell::lookup::trusted_dirs(std::ffi::OsStr::new(":./x:/opt/bin:y"), &[]);
        assert_eq!(dirs, vec![std::path::PathBuf::from("/opt/bin")]);
    }

    #[test]
    fn the_environment_is_an_allowlist() {
        let env = environment([
            ("PATH".into(), "/bin".into()),
            ("HOME".into(), "/home/u".into()),
            ("OPENAI_API_KEY".into(), "sk-secret".into()),
            (
                "GIT_CONFIG_PARAMETERS".into(),
                "'core.fsmonitor=evil'".into(),
            ),
            ("GIT_DIR".into(), "/elsewhere".into()),
            ("GIT_EXEC_PATH".into(), "/tmp/evil".into()),
            ("TMPDIR".into(), "/tmp".into()),
        ]);
        let names: Vec<String> = env
            .iter()
            .map(|(n, _)| n.to_string_lossy().into_owned())
            .collect();
        assert!(names.contains(&"PATH".to_string()));
        assert!(names.contains(&"TMPDIR".to_string()));
        for gone in [
            "HOME",
            "OPENAI_API_KEY",
            "GIT_CONFIG_PARAMETERS",
            "GIT_DIR",
            "GIT_EXEC_PATH",
        ] {
            assert!(!names.contains(&gone.to_string()), "{gone} reached git");
        }
        let global = env
            .iter()
            .find(|(n, _)| n == "GIT_CONFIG_GLOBAL")
            .map(|(_, v)| v.clone());
        assert_eq!(global, Some("/dev/null".into()));
    }

    #[test]
    fn a_repositorys_own_config_cannot_move_its_work_tree_or_repository() {
        // Red-team pass 3, R3-1: `/diff` (in_repository) and the git tools read the work tree
        // the repository's config named.
        use crate::fixtures::{have_git, plain_git as git};
        if !have_git() {
            return;
        }
        let home = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(home.path().join("secret.txt"), "RT-SECRET\n")
            .unwrap_or_else(|e| panic!("{e}"));
        let ws = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let root = ws.path();
        git(root, &["init", "-q", "-b", "main"]);
        git(root, &["config", "user.email", "t@example.com"]);
        git(root, &["config", "user.name", "t"]);
        std::fs::write(root.join("secret.txt"), "").unwrap_or_else(|e| panic!("{e}"));
        git(root, &["add", "."]);
        git(root, &["commit", "-qm", "init"]);
        git(
            root,
            &[
                "config",
                "core.worktree",
                &home.path().display().to_string(),
            ],
        );
        let out = in_repository(root, &[])
            .unwrap_or_else(|e| panic!("{e}"))
            .args(["diff", "HEAD"])
            .output()
            .unwrap_or_else(|e| panic!("{e}"));
        let diff = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{out:?}");
        assert!(!diff.contains("RT-SECRET"), "{diff}");
        let pinned = pinned_repository(root)
            .unwrap_or_else(|e| panic!("{e}"))
            .unwrap_or_else(|| panic!("a repository"));
        assert_eq!(
            pinned.top,
            root.canonicalize().unwrap_or_else(|e| panic!("{e}"))
        );

        // `commondir` in a real .git sends git elsewhere: refused.
        std::fs::write(
            root.join(".git/commondir"),
            home.path().display().to_string(),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let e = pinned_repository(root).unwrap_err();
        assert!(e.contains("commondir"), "{e}");
        assert!(in_repository(root, &[]).is_err());
    }

    #[test]
    fn a_submodule_is_reached_through_real_directories_only() {
        // Red-team pass 4, R4-4: a shipped `.git/modules -> ~` made `sub/.git`'s
        // `gitdir: ../.git/modules/.password-store/.git` pass for a submodule.
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let base = dir.path().canonicalize().unwrap_or_else(|e| panic!("{e}"));
        let mkdir = |p: &Path| std::fs::create_dir_all(p).unwrap_or_else(|e| panic!("{e}"));
        let write = |p: &Path, t: &str| std::fs::write(p, t).unwrap_or_else(|e| panic!("{e}"));
        let other = base.join("home/.password-store/.git");
        mkdir(&other);
        // A real submodule of a real enclosing repository: pinned.
        let ws = base.join("ws");
        mkdir(&ws.join(".git/modules/lib"));
        mkdir(&ws.join("lib"));
        write(&ws.join("lib/.git"), "gitdir: ../.git/modules/lib\n");
        let p = pinned_repository(&ws.join("lib"))
            .unwrap_or_else(|e| panic!("{e}"))
            .unwrap_or_else(|| panic!("a repository"));
        assert_eq!(p.git_dir, ws.join(".git/modules/lib"));
        // `modules` a link out: refused.
        let bad = base.join("bad");
        mkdir(&bad.join(".git"));
        std::os::unix::fs::symlink(base.join("home"), bad.join(".git/modules"))
            .unwrap_or_else(|e| panic!("{e}"));
        mkdir(&bad.join("sub"));
        write(
            &bad.join("sub/.git"),
            "gitdir: ../.git/modules/.password-store/.git\n",
        );
        let e = pinned_repository(&bad.join("sub")).unwrap_err();
        assert!(e.contains("neither a linked worktree"), "{e}");
        // A link further down (`modules/x -> ~/.password-store`): refused too.
        let deep = base.join("deep");
        mkdir(&deep.join(".git/modules"));
        std::os::unix::fs::symlink(
            base.join("home/.password-store"),
            deep.join(".git/modules/x"),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        mkdir(&deep.join("sub"));
        write(&deep.join("sub/.git"), "gitdir: ../.git/modules/x/.git\n");
        assert!(pinned_repository(&deep.join("sub")).is_err());
    }
}
