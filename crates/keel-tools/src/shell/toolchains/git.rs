//! `git`: which subcommands and options only read, which write the repository or the work
//! tree, which reach the network and which run a program (a pager, an editor, a diff tool).

use super::super::options::{self, has_option, positionals};
use super::super::safety::{Analyzer, SafetyClass};
use super::super::words::Word;

use SafetyClass::{Destructive, Network, Unknown, WritesWorkspace};

pub(super) fn git(a: &mut Analyzer, args: &[Word]) {
    // Global options before the subcommand.
    let mut i = 0;
    while let Some(w) = args.get(i) {
        let Some(v) = w.value() else {
            return a.flag(
                Unknown,
                format!("`git {}` is not known before it runs", w.source),
            );
        };
        match v {
            "--namespace" => i += 2,
            "-C" => {
                if let Some(dir) = args.get(i + 1) {
                    a.cd(dir);
                }
                i += 2;
            }
            _ if v.starts_with("--git-dir") || v.starts_with("--work-tree") => {
                return a.flag(
                    Unknown,
                    format!(
                        "`git {v}` uses another repository, whose configuration can run programs"
                    ),
                );
            }
            "-c" | "--config-env" | "--exec-path" => {
                return a.flag(
                    Unknown,
                    format!("`git {v}` overrides configuration, which can run programs"),
                );
            }
            "--version" | "--help" | "-h" => return a.read_only("git"),
            _ if v.starts_with("-c")
                || v.starts_with("--config-env")
                || v.starts_with("--exec-path") =>
            {
                return a.flag(
                    Unknown,
                    format!("`git {v}` overrides configuration, which can run programs"),
                );
            }
            _ if v.starts_with('-') => i += 1,
            _ => break,
        }
    }
    let Some(sub) = args.get(i).and_then(Word::value) else {
        return a.read_only("git");
    };
    let rest = &args[i + 1..];
    let has = |short: &[char], long: &[&str]| has_option(rest, short, long);
    let name = format!("git {sub}");
    let ops = positionals(rest, &[]);
    match sub {
        "status" | "log" | "show" | "diff" | "blame" | "annotate" | "shortlog" | "describe"
        | "rev-parse" | "rev-list" | "ls-files" | "ls-tree" | "cat-file" | "grep"
        | "merge-base" | "name-rev" | "for-each-ref" | "show-ref" | "show-branch"
        | "count-objects" | "check-ignore" | "check-attr" | "check-ref-format" | "whatchanged"
        | "var" | "help" | "version" | "cherry" | "range-diff" | "diff-tree" | "diff-files"
        | "diff-index" | "verify-commit" | "verify-tag" | "fsck" | "format-patch"
        | "request-pull" => {
            if sub == "format-patch" && !has(&[], &["--stdout"]) {
                return a.flag(
                    WritesWorkspace,
                    "`git format-patch` writes patch files".into(),
                );
            }
            git_read(a, &name, rest);
        }
        "branch" => {
            if has(&['D'], &[]) || has(&['d'], &["--delete"]) && has(&['f'], &["--force"]) {
                a.flag(Destructive, "`git branch -D` deletes a branch".into());
            } else if has(&['d'], &["--delete"]) {
                a.flag(Destructive, "`git branch -d` deletes a branch".into());
            } else if has(
                &['m', 'M', 'c', 'C', 'u', 'f'],
                &[
                    "--move",
                    "--copy",
                    "--set-upstream-to",
                    "--unset-upstream",
                    "--edit-description",
                    "--force",
                    "--track",
                ],
            ) {
                a.flag(WritesWorkspace, format!("`{name}` changes branches"));
            } else if !ops.is_empty()
                && !has(
                    &['l', 'a', 'r'],
                    &[
                        "--list",
                        "--all",
                        "--remotes",
                        "--contains",
                        "--no-contains",
                        "--merged",
                        "--no-merged",
                        "--points-at",
                    ],
                )
            {
                a.flag(WritesWorkspace, "`git branch NAME` creates a branch".into());
            } else {
                git_read(a, &name, rest);
            }
        }
        "tag" => {
            if has(&['d'], &["--delete"]) {
                a.flag(Destructive, "`git tag -d` deletes a tag".into());
            } else if ops.is_empty()
                || has(&['l'], &["--list", "--contains", "--points-at", "--merged"])
            {
                git_read(a, &name, rest);
            } else {
                a.flag(WritesWorkspace, "`git tag NAME` creates a tag".into());
            }
        }
        "remote" => match ops.first().and_then(|w| w.value()) {
            None | Some("get-url") => a.read_only("git remote"),
            Some("show") | Some("update") | Some("prune") => {
                a.flag(
                    Network,
                    format!("`git remote {}` contacts the remote", ops[0].text),
                );
            }
            Some(other) => a.flag(
                WritesWorkspace,
                format!("`git remote {other}` changes remotes"),
            ),
        },
        "config" => {
            let reading = has(
                &['l'],
                &[
                    "--get",
                    "--get-all",
                    "--get-regexp",
                    "--list",
                    "--get-urlmatch",
                    "--get-color",
                    "--get-colorbool",
                ],
            ) || ops.first().is_some_and(|w| w.is("get") || w.is("list"));
            let writing = has(
                &['e'],
                &[
                    "--unset",
                    "--unset-all",
                    "--add",
                    "--replace-all",
                    "--edit",
                    "--rename-section",
                    "--remove-section",
                ],
            ) || ops.first().is_some_and(|w| {
                ["set", "unset", "edit", "rename-section", "remove-section"]
                    .iter()
                    .any(|s| w.is(s))
            });
            if writing || (!reading && ops.len() >= 2) {
                a.flag(WritesWorkspace, "`git config` changes configuration".into());
            } else {
                a.read_only("git config");
            }
        }
        "stash" => match ops.first().and_then(|w| w.value()) {
            Some("list") | Some("show") => git_read(a, "git stash", rest),
            Some("drop") | Some("clear") => {
                a.flag(
                    Destructive,
                    format!("`git stash {}` discards stashed changes", ops[0].text),
                );
            }
            // Stashing (`git stash`, `push`, `save`, `-u`) takes the uncommitted changes
            // out of the working tree, and `pop`/`apply` merge them back over it.
            _ => a.flag(
                Destructive,
                "`git stash` takes the uncommitted changes out of the working tree".into(),
            ),
        },
        "reflog" => match ops.first().and_then(|w| w.value()) {
            None | Some("show") | Some("exists") => git_read(a, "git reflog", rest),
            Some(_) => a.flag(
                Destructive,
                "`git reflog expire/delete` drops history".into(),
            ),
        },
        "worktree" => match ops.first().and_then(|w| w.value()) {
            Some("list") => a.read_only("git worktree"),
            Some("remove") | Some("prune") => a.flag(
                Destructive,
                "`git worktree remove` deletes a worktree".into(),
            ),
            _ => a.flag(WritesWorkspace, "`git worktree` changes worktrees".into()),
        },
        "notes" => match ops.first().and_then(|w| w.value()) {
            None | Some("list") | Some("show") => a.read_only("git notes"),
            _ => a.flag(WritesWorkspace, "`git notes` changes notes".into()),
        },
        "submodule" => match ops.first().and_then(|w| w.value()) {
            None | Some("status") | Some("summary") => a.read_only("git submodule"),
            Some("foreach") => a.flag(Unknown, "`git submodule foreach` runs a command".into()),
            _ => {
                a.flag(Network, "`git submodule` fetches submodules".into());
                a.flag(
                    WritesWorkspace,
                    "`git submodule` changes the working tree".into(),
                );
            }
        },
        "clean" => {
            if has(&['n'], &["--dry-run"]) {
                a.read_only("git clean -n");
            } else {
                a.flag(Destructive, "`git clean` deletes untracked files".into());
            }
        }
        "reset" => {
            if has(&[], &["--hard", "--merge", "--keep"]) {
                a.flag(Destructive, "`git reset --hard` discards changes".into());
            } else {
                a.flag(
                    WritesWorkspace,
                    "`git reset` moves HEAD and the index".into(),
                );
            }
        }
        "checkout" => {
            let paths = rest.iter().any(|w| w.is("--") || w.is("."))
                || has(&['f'], &["--force", "--ours", "--theirs"]);
            if paths {
                a.flag(
                    Destructive,
                    "`git checkout` of paths discards changes to files".into(),
                );
            } else {
                a.flag(
                    WritesWorkspace,
                    "`git checkout` switches the working tree".into(),
                );
            }
        }
        "restore" => {
            let staged_only = has(&['S'], &["--staged"]) && !has(&['W'], &["--worktree"]);
            if staged_only {
                a.flag(
                    WritesWorkspace,
                    "`git restore --staged` changes the index".into(),
                );
            } else {
                a.flag(
                    Destructive,
                    "`git restore` discards changes to files".into(),
                );
            }
        }
        "switch" => {
            if has(&['f'], &["--discard-changes", "--force"]) {
                a.flag(
                    Destructive,
                    "`git switch --discard-changes` discards changes".into(),
                );
            } else {
                a.flag(
                    WritesWorkspace,
                    "`git switch` switches the working tree".into(),
                );
            }
        }
        "rm" => {
            if has(&[], &["--cached"]) {
                a.flag(
                    WritesWorkspace,
                    "`git rm --cached` changes the index".into(),
                );
            } else {
                a.flag(Destructive, "`git rm` deletes files".into());
            }
        }
        "push" => {
            a.flag(Network, "`git push` sends commits to a remote".into());
            let forced = has(
                &['f', 'd'],
                &[
                    "--force",
                    "--force-with-lease",
                    "--force-if-includes",
                    "--delete",
                    "--mirror",
                    "--prune",
                ],
            ) || ops
                .iter()
                .any(|w| w.text.starts_with('+') || w.text.starts_with(':'));
            if forced {
                a.flag(
                    Destructive,
                    "`git push --force/--delete` rewrites or deletes remote history".into(),
                );
            }
        }
        "fetch" | "clone" | "ls-remote" => {
            a.flag(Network, format!("`{name}` contacts a remote"));
            if sub == "clone" {
                a.flag(WritesWorkspace, "`git clone` writes a repository".into());
            }
        }
        "pull" => {
            a.flag(Network, "`git pull` fetches from a remote".into());
            a.flag(
                WritesWorkspace,
                "`git pull` merges into the working tree".into(),
            );
        }
        "apply" => {
            if has(&[], &["--check", "--stat", "--numstat", "--summary"])
                && !has(&[], &["--apply", "--index", "--cached"])
            {
                a.read_only("git apply --check");
            } else if has(&['R'], &["--reverse"]) {
                // A reversed patch (`git diff | git apply -R`) discards the changes it names.
                a.flag(
                    Destructive,
                    "`git apply -R` reverts changes in the working tree".into(),
                );
            } else {
                a.flag(WritesWorkspace, "`git apply` changes files".into());
            }
        }
        "read-tree" if has(&['u'], &[]) && has(&[], &["--reset"]) => {
            a.flag(
                Destructive,
                "`git read-tree -u --reset` discards uncommitted changes".into(),
            );
        }
        "checkout-index" if has(&['f'], &["--force"]) => {
            a.flag(
                Destructive,
                "`git checkout-index -f` overwrites uncommitted changes".into(),
            );
        }
        "archive" => {
            if has(&['o'], &["--output"]) {
                a.flag(WritesWorkspace, "`git archive -o` writes a file".into());
            } else if has(&[], &["--remote"]) {
                a.flag(Network, "`git archive --remote` contacts a remote".into());
            } else {
                a.read_only("git archive");
            }
        }
        "add" | "commit" | "mv" | "merge" | "rebase" | "cherry-pick" | "revert" | "am" | "init"
        | "update-index" | "symbolic-ref" | "bisect" | "sparse-checkout" | "repack"
        | "maintenance" | "bundle" | "replace" | "commit-tree" | "mktag" | "mktree"
        | "read-tree" | "write-tree" | "hash-object" | "checkout-index" | "merge-file"
        | "fast-import" | "pack-refs" | "rerere" | "restore-mtime" | "citool" => {
            a.flag(WritesWorkspace, format!("`{name}` changes the repository"));
        }
        "update-ref" | "gc" | "prune" | "filter-branch" | "filter-repo" => {
            a.flag(Destructive, format!("`{name}` rewrites or drops history"));
        }
        "send-email" => a.flag(Network, "`git send-email` sends mail".into()),
        "mergetool" | "difftool" | "instaweb" | "daemon" | "web--browse" => {
            a.flag(Unknown, format!("`{name}` runs external programs"));
        }
        _ => a.flag(
            Unknown,
            format!("`{name}` is not a git command Keel knows (it may be an alias)"),
        ),
    }
}

/// A reading git subcommand, unless an option writes a file or runs a program.
fn git_read(a: &mut Analyzer, name: &str, rest: &[Word]) {
    for w in rest {
        let Some(v) = w.value() else {
            if w.could_be_option() {
                a.flag(
                    Unknown,
                    format!("`{}` could expand to an option of `{name}`", w.source),
                );
            }
            continue;
        };
        if v == "--" {
            break;
        }
        if v == "--output" || v.starts_with("--output=") {
            let target = v.split_once('=').map(|(_, t)| Word::lit(t)).or_else(|| {
                rest.iter()
                    .skip_while(|x| !x.is("--output"))
                    .nth(1)
                    .cloned()
            });
            match target {
                Some(t) => a.write_target(&t, &format!("`{name} --output`")),
                None => a.flag(WritesWorkspace, format!("`{name} --output` writes a file")),
            }
        }
        if runs_external_program(name, v) {
            a.flag(Unknown, format!("`{name} {v}` runs an external program"));
        }
        if name == "git fsck"
            && v.len() >= 4
            && options::abbreviates(v.trim_start_matches('-'), "lost-found")
        {
            a.flag(
                WritesWorkspace,
                "`git fsck --lost-found` writes .git/lost-found".into(),
            );
        }
    }
    a.read_only(name);
}

/// Long options of reading git commands that run a program (git accepts any unambiguous
/// prefix of a long option: `--open` is `--open-files-in-pager`).
const GIT_RUNS: &[&str] = &[
    "ext-diff",
    "textconv",
    "open-files-in-pager",
    "filters",
    "exec",
    "upload-pack",
    "receive-pack",
];

/// Whether option `v` of git subcommand `name` runs a program: one of [`GIT_RUNS`] (or a
/// prefix of at least two letters), or git grep's `-O[pager]` in any cluster of short flags.
fn runs_external_program(name: &str, v: &str) -> bool {
    if let Some(long) = v.strip_prefix("--") {
        let opt = long.split('=').next().unwrap_or(long);
        // Options of their own that are prefixes of one above.
        if matches!(opt, "text" | "filter" | "ex") {
            return false;
        }
        return opt.len() >= 2 && GIT_RUNS.iter().any(|o| options::abbreviates(opt, o));
    }
    if name == "git grep"
        && let Some(cluster) = v.strip_prefix('-')
    {
        // Short options that take a value end the cluster (`-e PATTERN`, `-A 3`, `-m 1`).
        for c in cluster.chars() {
            if c == 'O' {
                return true;
            }
            if matches!(c, 'e' | 'f' | 'A' | 'B' | 'C' | 'm') {
                return false;
            }
        }
    }
    false
}
