//! Which git command a line's `git WORD` runs, for command rules (`git push` in a
//! constitution's forbidden_commands, an approval deny rule; red-team pass 8, R8-26's rest).
//!
//! A rule matched the subcommand word, so `git -c alias.p=push p`, `git -c alias.p='!git
//! push' p`, an alias from `GIT_CONFIG_COUNT`/`GIT_CONFIG_KEY_0` or from the repository's or
//! the user's configuration, and push's plumbing (`git send-pack`, `git http-push`, the
//! remote helpers) all pushed past `git push`. Now an alias the line itself defines (`-c
//! alias.NAME=VALUE`) is resolved; any other word that is not one of git's own commands may be
//! an alias of anything, so it *may* match (a possible match is refused by the constitution,
//! asked about by an approval rule); and a rule naming `push` or `fetch` covers their
//! plumbing.

use super::words::Word;

/// Git's own commands (`git --list-cmds=builtins,main`, git 2.4x): an alias cannot take
/// one of these names.
#[rustfmt::skip]
const GIT_COMMANDS: &[&str] = &[
    "add", "am", "annotate", "apply", "archimport", "archive", "bisect", "blame", "branch",
    "bugreport", "bundle", "cat-file", "check-attr", "check-ignore", "check-mailmap",
    "check-ref-format", "checkout", "checkout--worker", "checkout-index", "cherry", "cherry-pick",
    "clean", "clone", "column", "commit", "commit-graph", "commit-tree", "config",
    "count-objects", "credential", "credential-cache", "credential-cache--daemon",
    "credential-store", "cvsexportcommit", "cvsimport", "cvsserver", "daemon", "describe",
    "diagnose", "diff", "diff-files", "diff-index", "diff-tree", "difftool", "difftool--helper",
    "fast-export", "fast-import", "fetch", "fetch-pack", "filter-branch", "fmt-merge-msg",
    "for-each-ref", "for-each-repo", "format-patch", "fsck", "fsck-objects", "fsmonitor--daemon",
    "gc", "get-tar-commit-id", "grep", "hash-object", "help", "hook", "http-backend",
    "http-fetch", "http-push", "imap-send", "index-pack", "init", "init-db", "instaweb",
    "interpret-trailers", "log", "ls-files", "ls-remote", "ls-tree", "mailinfo", "mailsplit",
    "maintenance", "merge", "merge-base", "merge-file", "merge-index", "merge-octopus",
    "merge-one-file", "merge-ours", "merge-recursive", "merge-recursive-ours",
    "merge-recursive-theirs", "merge-resolve", "merge-subtree", "merge-tree", "mergetool",
    "mktag", "mktree", "multi-pack-index", "mv", "name-rev", "notes", "p4", "pack-objects",
    "pack-redundant", "pack-refs", "patch-id", "pickaxe", "prune", "prune-packed", "pull", "push",
    "quiltimport", "range-diff", "read-tree", "rebase", "receive-pack", "reflog", "refs",
    "remote", "remote-ext", "remote-fd", "remote-ftp", "remote-ftps", "remote-http",
    "remote-https", "repack", "replace", "replay", "request-pull", "rerere", "reset", "restore",
    "rev-list", "rev-parse", "revert", "rm", "send-email", "send-pack", "sh-i18n--envsubst",
    "shell", "shortlog", "show", "show-branch", "show-index", "show-ref", "sparse-checkout",
    "stage", "stash", "status", "stripspace", "submodule", "submodule--helper", "svn", "switch",
    "symbolic-ref", "tag", "unpack-file", "unpack-objects", "update-index", "update-ref",
    "update-server-info", "upload-archive", "upload-archive--writer", "upload-pack", "var",
    "verify-commit", "verify-pack", "verify-tag", "version", "web--browse", "whatchanged",
    "worktree", "write-tree", 
];

/// The plumbing that does what the porcelain `command` does (for rules naming it).
fn plumbing_of(command: &str) -> &'static [&'static str] {
    match command {
        "push" => &["send-pack", "http-push"],
        "fetch" | "pull" | "clone" => &["fetch-pack", "http-fetch"],
        _ => &[],
    }
}

/// What the git subcommand word `sub` stands for when a rule names `wanted`, given the
/// global options before it (`globals`): `Some(true)` it is `wanted` (directly, through an
/// alias the line defines, or as its plumbing), `Some(false)` it is another git command,
/// `None` it may be an alias of anything (or a remote helper, which can push and fetch).
pub(crate) fn stands_for(sub: &str, wanted: &str, globals: &[Word]) -> Option<bool> {
    let mut sub = sub.to_string();
    // `-c alias.p=push` on the line (the last one wins, as in git); followed a few times.
    for _ in 0..4 {
        let Some(value) = line_alias(&sub, globals) else {
            break;
        };
        let value = value?;
        // `!git push`, `!sh -c …`: a shell command; it may do anything.
        if value.trim_start().starts_with('!') {
            return None;
        }
        sub = value.split_whitespace().next()?.to_string();
    }
    if sub == wanted || plumbing_of(wanted).contains(&sub.as_str()) {
        return Some(true);
    }
    if sub.starts_with("remote-") && !plumbing_of(wanted).is_empty() {
        return None;
    }
    GIT_COMMANDS.contains(&sub.as_str()).then_some(false)
}

/// The value of `alias.NAME` set by the line's own `-c` options: `Some(None)` when an
/// option word is not known before the line runs (it may set it).
fn line_alias(name: &str, globals: &[Word]) -> Option<Option<String>> {
    let mut found = None;
    let mut i = 0;
    while i < globals.len() {
        let w = &globals[i];
        let pair = match w.value() {
            Some("-c") => {
                i += 1;
                globals.get(i).map(Word::value)
            }
            Some(v) if v.starts_with("-c") && v.len() > 2 => Some(Some(&v[2..])),
            _ => None,
        };
        match pair {
            Some(Some(p)) => {
                if let Some((key, value)) = p.split_once('=')
                    && key.eq_ignore_ascii_case(&format!("alias.{name}"))
                {
                    found = Some(Some(value.to_string()));
                }
            }
            Some(None) => found = Some(None),
            None => {}
        }
        i += 1;
    }
    found
}
