//! Git repositories a command leaves behind: after each command that could write, the
//! workspace is searched for `.git` entries (at any depth, the top level included) that the
//! command created or changed, and any whose configuration or hooks would run a program is
//! quarantined — its `.git` renamed to `.git-quarantined-by-keel` — and reported in the
//! command's result.
//!
//! Why: the sandbox confines the command, but a repository it plants (`git init vendor/lib &&
//! git -C vendor/lib config core.fsmonitor '…'`) runs its program later, unconfined, when the
//! user's own git, shell prompt or editor looks inside. The file tools refuse every `.git`
//! path ([`crate::sandbox::is_protected`]); a command cannot be refused by name (Landlock
//! matches no names), so what it left is checked afterwards. A repository that runs nothing
//! (`cargo new`'s, `git init`'s) is left as it is.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// The most directory entries looked at per check (a bigger workspace is checked up to here).
const MAX_ENTRIES: usize = 300_000;
/// The most of a config file read.
const MAX_CONFIG: u64 = 1024 * 1024;
/// The name a quarantined `.git` gets (a number is added when taken).
pub const QUARANTINE_NAME: &str = ".git-quarantined-by-keel";

/// One repository moved out of git's sight.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quarantined {
    /// The directory holding the repository (workspace-relative, `.` for the root).
    pub dir: String,
    /// Where its `.git` went (workspace-relative).
    pub moved_to: String,
    /// What would have run: config keys, hook names.
    pub reasons: Vec<String>,
}

/// Config keys (lower case) that name a program, exactly.
const PROGRAM_KEYS: &[&str] = &[
    "core.fsmonitor",
    "core.hookspath",
    "core.sshcommand",
    "core.gitproxy",
    "core.askpass",
    "core.editor",
    "core.pager",
    "core.alternaterefscommand",
    "sequence.editor",
    "diff.external",
    "credential.helper",
    "gpg.program",
    "include.path",
    "uploadpack.packobjectshook",
    "core.worktree",
];

/// Whether the key (lower case, `section[.subsection].key`) names a program or pulls in
/// more configuration.
fn runs_a_program(key: &str) -> bool {
    if PROGRAM_KEYS.contains(&key) {
        return true;
    }
    let Some((section, rest)) = key.split_once('.') else {
        return false;
    };
    let last = rest.rsplit_once('.').map_or(rest, |(_, k)| k);
    let sub = rest.contains('.');
    match section {
        "pager" | "alias" | "includeif" | "hook" => true,
        "filter" => sub && matches!(last, "clean" | "smudge" | "process"),
        "diff" => sub && matches!(last, "command" | "textconv"),
        "merge" => sub && last == "driver",
        "credential" => last == "helper",
        "gpg" => last == "program",
        "remote" => sub && matches!(last, "uploadpack" | "receivepack" | "vcs"),
        _ => false,
    }
}

/// The program-running keys of a git config file's text (a small parser: sections, keys,
/// subsections; values and continuation lines are skipped).
fn dangerous_keys(text: &str) -> Vec<String> {
    let mut section = String::new();
    let mut out = Vec::new();
    let mut continued = false;
    for raw in text.lines() {
        let line = raw.trim();
        if continued {
            continued = line.ends_with('\\');
            continue;
        }
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        let mut rest = line;
        if let Some(after) = line.strip_prefix('[') {
            let Some((head, tail)) = after.split_once(']') else {
                continue;
            };
            section = match head.split_once(char::is_whitespace) {
                // `[section "sub"]`: the subsection keeps its case but only its presence matters.
                Some((name, sub)) => format!(
                    "{}.{}",
                    name.to_ascii_lowercase(),
                    sub.trim().trim_matches('"')
                ),
                // `[section.sub]` (old syntax) or `[section]`.
                None => head.to_ascii_lowercase(),
            };
            rest = tail.trim();
            if rest.is_empty() || rest.starts_with('#') || rest.starts_with(';') {
                continue;
            }
        }
        let name: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
            .collect();
        continued = rest.ends_with('\\');
        if name.is_empty() || section.is_empty() {
            continue;
        }
        let key = format!("{section}.{}", name.to_ascii_lowercase());
        let lower = key.to_ascii_lowercase();
        if runs_a_program(&lower) && !out.contains(&lower) {
            out.push(lower);
        }
    }
    out
}

/// Whether `path` changed at or after `since` (its inode: created, written, renamed, chmod).
fn changed_since(meta: &std::fs::Metadata, since: SystemTime) -> bool {
    let ctime = SystemTime::UNIX_EPOCH
        + Duration::new(
            u64::try_from(meta.ctime()).unwrap_or(0),
            u32::try_from(meta.ctime_nsec()).unwrap_or(0),
        );
    ctime >= since
}

/// What in the repository at `git` (a `.git` directory or file) would run a program, and
/// whether any of it changed since `since`. A `.git` that is a symlink, a file (naming a
/// repository elsewhere) or holds a FIFO where its config should be counts as a program.
fn inspect(git: &Path, since: SystemTime) -> (Vec<String>, bool) {
    let Ok(meta) = std::fs::symlink_metadata(git) else {
        return (Vec::new(), false);
    };
    let mut touched = changed_since(&meta, since) && !meta.is_dir();
    if !meta.is_dir() {
        let what = if meta.file_type().is_symlink() {
            "`.git` is a symlink (to a repository elsewhere)"
        } else {
            "`.git` is a file naming a repository elsewhere"
        };
        return (vec![what.to_string()], touched);
    }
    let mut reasons = Vec::new();
    let config = git.join("config");
    match std::fs::symlink_metadata(&config) {
        Ok(m) if m.is_file() => {
            touched |= changed_since(&m, since);
            let text = keel_fs::project::read_in_dir(&config, MAX_CONFIG)
                .ok()
                .flatten()
                .unwrap_or_default();
            reasons.extend(dangerous_keys(&text));
        }
        Ok(m) => {
            touched |= changed_since(&m, since);
            reasons.push("its config is not a regular file".to_string());
        }
        Err(_) => {}
    }
    for extra in ["commondir", "info/attributes"] {
        if let Ok(m) = std::fs::symlink_metadata(git.join(extra)) {
            touched |= changed_since(&m, since);
            if extra == "commondir" {
                reasons.push("it names another repository (commondir)".to_string());
            }
        }
    }
    if let Ok(hooks) = std::fs::read_dir(git.join("hooks")) {
        for hook in hooks.flatten() {
            let name = hook.file_name().to_string_lossy().into_owned();
            if let Ok(m) = hook.metadata() {
                touched |= changed_since(&m, since);
            }
            if !name.ends_with(".sample") {
                reasons.push(format!("hook `{name}`"));
            }
        }
    }
    if let Ok(m) = std::fs::symlink_metadata(git.join("hooks")) {
        touched |= changed_since(&m, since);
    }
    (reasons, touched)
}

/// Every `.git` entry under `root`, and every directory that is a git directory by what it
/// holds whatever its name ([`crate::sandbox::GIT_DIR_MARKERS`]: a `.git` file's `gitdir:
/// realgit`, `git --git-dir=fixtures/x.git`). Symlinks are not followed; git directories are
/// not entered; at most [`MAX_ENTRIES`] entries looked at.
fn find_git_entries(root: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    let mut budget = MAX_ENTRIES;
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let entries: Vec<_> = entries.flatten().collect();
        let holds = |name: &str| entries.iter().any(|e| e.file_name() == name);
        if dir != root && crate::sandbox::GIT_DIR_MARKERS.iter().all(|m| holds(m)) {
            found.push(dir);
            continue;
        }
        for entry in entries {
            budget = budget.saturating_sub(1);
            if budget == 0 {
                return found;
            }
            let name = entry.file_name();
            if name.eq_ignore_ascii_case(".git") {
                found.push(entry.path());
                continue;
            }
            if name == ".keel" && dir == root {
                continue;
            }
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(entry.path());
            }
        }
    }
    found
}

/// Checks the workspace after a command that started at `since`: every `.git` the command
/// created or changed whose configuration or hooks run a program is renamed out of git's
/// sight. Returns what was moved (empty: nothing to report).
pub fn quarantine_new_repositories(workspace: &Path, since: SystemTime) -> Vec<Quarantined> {
    // A second of slack: file systems with coarse timestamps.
    let since = since.checked_sub(Duration::from_secs(1)).unwrap_or(since);
    let mut out = Vec::new();
    for git in find_git_entries(workspace) {
        let (reasons, touched) = inspect(&git, since);
        if reasons.is_empty() || !touched {
            continue;
        }
        let Some(parent) = git.parent() else {
            continue;
        };
        let rel = |p: &Path| match p.strip_prefix(workspace) {
            Ok(r) if r.as_os_str().is_empty() => ".".to_string(),
            Ok(r) => r.display().to_string(),
            Err(_) => p.display().to_string(),
        };
        let Some(moved) = quarantine(workspace, &git) else {
            continue;
        };
        out.push(Quarantined {
            dir: rel(parent),
            moved_to: rel(&moved),
            reasons,
        });
    }
    out
}

/// Renames `git` to a free quarantine name beside it, within the open parent directory.
fn quarantine(workspace: &Path, git: &Path) -> Option<PathBuf> {
    let parent = git.parent()?;
    let rel_parent = parent.strip_prefix(workspace).ok()?;
    let ws = keel_fs::beneath::DirHandle::open(workspace).ok()?;
    let dir = ws.subdir(rel_parent).ok()?;
    let from = git.file_name()?;
    for n in 0..100 {
        let name = if n == 0 {
            QUARANTINE_NAME.to_string()
        } else {
            format!("{QUARANTINE_NAME}-{n}")
        };
        if rustix::fs::statat(
            dir.fd(),
            name.as_str(),
            rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
        )
        .is_ok()
        {
            continue;
        }
        return rustix::fs::renameat(dir.fd(), from, dir.fd(), name.as_str())
            .ok()
            .map(|()| parent.join(name));
    }
    None
}

/// [`quarantine_new_repositories`] off the async runtime, after a command run under `policy`
/// (a read-only command cannot have left anything): the report to add to its result.
pub(crate) async fn after_command(
    workspace: &Path,
    since: SystemTime,
    policy: crate::sandbox::SandboxPolicy,
) -> Option<String> {
    if policy == crate::sandbox::SandboxPolicy::ReadOnly {
        return None;
    }
    let ws = workspace.to_path_buf();
    let moved = tokio::task::spawn_blocking(move || quarantine_new_repositories(&ws, since))
        .await
        .unwrap_or_default();
    report(&moved)
}

/// The report of what was quarantined, for the command's result (and so the user's view).
pub fn report(moved: &[Quarantined]) -> Option<String> {
    if moved.is_empty() {
        return None;
    }
    let mut text = String::from(
        "keel: the command left git repositories whose configuration runs programs; Keel moved them out of git's sight (any git, shell prompt or editor opening them would have run those programs):",
    );
    for q in moved {
        text.push_str(&format!(
            "\n- {} ({}): `.git` moved to `{}`",
            q.dir,
            q.reasons.join(", "),
            q.moved_to
        ));
    }
    text.push_str("\nDo not create repositories with hooks or program-running settings; the user may inspect and restore them.");
    Some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn program_keys_are_found_in_any_spelling() {
        let text = "[core]\n\trepositoryformatversion = 0\n\tfsMonitor = touch /x\n[filter \"lfs\"]\n\tclean = x\n[diff \"a\"]\n\tbinary = true\n[user]\n\tname = t\n[Alias]\n\tst = !sh\n[core] pager = less\n";
        assert_eq!(
            dangerous_keys(text),
            vec![
                "core.fsmonitor".to_string(),
                "filter.lfs.clean".to_string(),
                "alias.st".to_string(),
                "core.pager".to_string()
            ]
        );
        assert!(dangerous_keys("[core]\n\tbare = false\n[remote \"o\"]\n\turl = x\n").is_empty());
        assert_eq!(
            dangerous_keys("[include]\n\tpath = /tmp/fifo\n"),
            vec!["include.path".to_string()]
        );
    }
}
