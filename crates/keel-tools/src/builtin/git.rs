//! `git_status` and `git_diff`: read-only views of the workspace's git repository.
//!
//! Git runs through [`crate::safe_git`], the one hardened invocation Keel uses (the engine's
//! snapshots too): no hooks, no fsmonitor, no pager, no external diff, and every filter, diff
//! and merge driver, credential helper and signing program the repository's config names
//! blanked before each command; no system or global config and an allowlisted environment.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;

use crate::safe_git::{config_env_supported, hardened_git, neutralisers, pinned_repository};
use crate::{ToolContext, ToolEffect, ToolError, ToolOutput, TypedTool};

/// Longest a read-only git command may run.
const GIT_TIMEOUT: Duration = Duration::from_secs(30);

/// Output settings of the tools (not hardening): paths as they are, no colour.
const DISPLAY: &[(&str, &str)] = &[("core.quotePath", "false"), ("color.ui", "false")];

/// The hardened git in `root` with `extra` overrides (started by [`output`]).
fn read_only_git(root: &Path, extra: &[(String, String)]) -> Result<Command, ToolError> {
    let mut all: Vec<(String, String)> = DISPLAY
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    all.extend(extra.iter().cloned());
    let mut c = hardened_git(&all, config_env_supported()).map_err(ToolError::model)?;
    c.current_dir(root);
    Ok(c)
}

/// Runs read-only git in the workspace and returns its stdout. `args` end before the
/// pathspecs: `paths` (default: the workspace) follow `--`, and every protected store beneath
/// the workspace is excluded (a home workspace whose dotfiles repository tracks
/// `.aws/credentials` shows no diff of it).
async fn run_git(root: &Path, args: &[&str], paths: &[&str]) -> Result<String, ToolError> {
    // The repository and its work tree are pinned: its config cannot point git at another
    // work tree (`core.worktree`) or repository (red-team pass 3, R3-1).
    let pinned = match pinned_repository(root) {
        Ok(Some(p)) => p,
        Ok(None) => {
            return Err(ToolError::model(
                "the workspace is not a git repository, so there is no git status or diff",
            ));
        }
        Err(why) => return Err(ToolError::model(format!("git is not run: {why}"))),
    };
    // Nor can its index name files outside the work tree (red-team pass 3, R3-11).
    let check = pinned.clone();
    crate::builtin::blocking(move || {
        crate::safe_git::check_index(&check, config_env_supported()).map_err(ToolError::model)
    })
    .await?;
    let git = |extra: &[(String, String)]| -> Result<Command, ToolError> {
        let mut c = read_only_git(root, extra)?;
        c.env("GIT_DIR", &pinned.git_dir)
            .env("GIT_WORK_TREE", &pinned.top);
        Ok(c)
    };
    // Reading config runs no code; it tells which programs to switch off.
    let drivers = match output(
        root,
        git(&[])?.args(["config", "--list", "--name-only", "-z"]),
    )
    .await?
    {
        Ok(names) => neutralisers(names.as_bytes()),
        Err(err) if err.contains("not a git repository") => Vec::new(),
        Err(err) => {
            return Err(ToolError::model(format!(
                "cannot read the repository's git configuration (so git is not run): {}",
                err.trim()
            )));
        }
    };
    let mut cmd = git(&drivers)?;
    cmd.args(args).arg("--");
    if paths.is_empty() {
        cmd.arg(".");
    } else {
        cmd.args(paths);
    }
    let stores = crate::stores::Pathspecs::beneath(root).map_err(|store| {
        ToolError::model(format!(
            "git is not run: the protected store `{}` lies in the workspace under a name that \
             is not UTF-8, so git could not leave it out",
            store.path.display()
        ))
    })?;
    cmd.args(stores.excluding());
    match output(root, &cmd).await? {
        Ok(out) => Ok(out),
        Err(err) if err.contains("not a git repository") => Err(ToolError::model(
            "the workspace is not a git repository, so there is no git status or diff",
        )),
        Err(err) => Err(ToolError::model(format!(
            "git {} failed: {}",
            args.first().unwrap_or(&""),
            err.trim()
        ))),
    }
}

/// Stdout on success, stderr on a non-zero exit; a missing git or a timeout is an error.
/// Git runs inside the read-only sandbox ([`crate::confined_git`]): a command of the
/// workspace running meanwhile may swap a file for a symlink to a secret between git's `lstat`
/// and its `open`, and there the link reaches only what that command could read itself
/// (red-team pass 4, R4-7).
async fn output(root: &Path, cmd: &Command) -> Result<Result<String, String>, ToolError> {
    let jail = crate::confined_git::GitConfinement::read_only(root);
    let out = crate::confined_git::output(cmd, &jail, None, GIT_TIMEOUT)
        .await
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => ToolError::model(
                "git is not installed (or not on PATH); install it (Debian/Ubuntu: `apt-get install git`) to use git_status and git_diff",
            ),
            std::io::ErrorKind::TimedOut => ToolError::model(format!(
                "git did not finish within {}s",
                GIT_TIMEOUT.as_secs()
            )),
            _ => ToolError::model(format!("cannot start git: {e}")),
        })?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if out.status.success() {
        Ok(Ok(stdout))
    } else {
        Ok(Err(String::from_utf8_lossy(&out.stderr).into_owned()))
    }
}

/// Arguments of `git_status` (none).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GitStatusArgs {}

/// `git status --short --branch`.
#[derive(Debug, Clone, Copy, Default)]
pub struct GitStatus;

impl TypedTool for GitStatus {
    type Args = GitStatusArgs;
    const NAME: &'static str = "git_status";

    fn description(&self) -> &str {
        "Show the git branch and changed, staged and untracked files (read-only)."
    }

    fn effect(&self) -> ToolEffect {
        ToolEffect::ReadOnly
    }

    async fn run(&self, _args: GitStatusArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let out = run_git(
            ctx.workspace.root(),
            &[
                "status",
                "--short",
                "--branch",
                "--untracked-files=normal",
                "--ignore-submodules=all",
            ],
            &[],
        )
        .await?;
        let clean = out.lines().all(|l| l.starts_with("##"));
        let mut text = crate::text::truncate_middle(out.trim_end(), crate::text::OUTPUT_CAP_CHARS);
        if clean {
            text.push_str("\n(working tree clean)");
        }
        Ok(ToolOutput::text(text))
    }
}

/// Arguments of `git_diff`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GitDiffArgs {
    /// Only this file or directory.
    #[serde(default)]
    pub path: Option<String>,
    /// The staged changes instead of the unstaged ones.
    #[serde(default)]
    pub staged: Option<bool>,
}

/// `git diff` of the working tree (or the index).
#[derive(Debug, Clone, Copy, Default)]
pub struct GitDiff;

impl TypedTool for GitDiff {
    type Args = GitDiffArgs;
    const NAME: &'static str = "git_diff";

    fn description(&self) -> &str {
        "Show the unified diff of uncommitted changes (or the staged ones), optionally for one path (read-only)."
    }

    fn effect(&self) -> ToolEffect {
        ToolEffect::ReadOnly
    }

    async fn run(&self, args: GitDiffArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let rel = match args.path.as_deref() {
            Some(p) => {
                let resolved = ctx.workspace.locate_named(p)?.abs();
                Some(ctx.workspace.relative(&resolved))
            }
            None => None,
        };
        let mut argv = vec![
            "diff",
            "--no-ext-diff",
            "--no-textconv",
            "--no-color",
            "--ignore-submodules=all",
        ];
        if args.staged == Some(true) {
            argv.push("--cached");
        }
        let paths: Vec<String> = rel
            .as_deref()
            .map(|r| if r.is_empty() { "." } else { r })
            // The model's path is a file name, never pathspec magic (`:(top)`).
            .map(|r| format!(":(literal){r}"))
            .into_iter()
            .collect();
        let paths: Vec<&str> = paths.iter().map(String::as_str).collect();
        let out = run_git(ctx.workspace.root(), &argv, &paths).await?;
        if out.trim().is_empty() {
            let what = if args.staged == Some(true) {
                "staged"
            } else {
                "unstaged"
            };
            return Ok(ToolOutput::text(format!("no {what} changes")));
        }
        Ok(ToolOutput::text(crate::text::truncate_middle(
            &out,
            crate::text::OUTPUT_CAP_CHARS,
        ))
        .with_diff(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builtin::testutil::Fixture;
    use serde_json::json;

    use crate::fixtures::{have_git, plain_git as git};

    #[tokio::test]
    async fn status_and_diff_run_no_repository_code() {
        if !have_git() {
            return;
        }
        let f = Fixture::new();
        let root = f.dir.path();
        let canary = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let hit = canary.path().join("ran");
        let script = format!("#!/bin/sh\ntouch {}\ncat\n", hit.display());
        let evil = canary.path().join("evil.sh");
        std::fs::write(&evil, script).unwrap_or_else(|e| panic!("{e}"));
        std::fs::set_permissions(&evil, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap_or_else(|e| panic!("{e}"));
        let evil = evil.display().to_string();
        git(root, &["init", "-q", "-b", "main"]);
        git(root, &["config", "user.email", "t@example.com"]);
        git(root, &["config", "user.name", "t"]);
        f.write("a.txt", "one\n");
        f.write(".gitattributes", "*.txt filter=evil diff=evil\n");
        git(root, &["add", "."]);
        git(root, &["commit", "-qm", "init"]);
        // Every hook point a repository controls, pointing at the canary.
        for (k, v) in [
            ("filter.evil.clean", evil.as_str()),
            ("filter.evil.smudge", evil.as_str()),
            ("filter.evil.required", "true"),
            ("diff.evil.textconv", evil.as_str()),
            ("diff.evil.command", evil.as_str()),
            ("pager.diff", evil.as_str()),
            ("pager.status", evil.as_str()),
            ("diff.external", evil.as_str()),
            ("core.fsmonitor", evil.as_str()),
            ("core.pager", evil.as_str()),
            ("core.hooksPath", canary.path().to_str().unwrap_or("/")),
        ] {
            git(root, &["config", k, v]);
        }
        f.write("a.txt", "one\ntwo\n");
        f.write("new.txt", "x\n");
        let status = f.ok(&GitStatus, json!({})).await;
        assert!(status.contains("## main"), "{status}");
        assert!(
            status.contains(" M a.txt") && status.contains("?? new.txt"),
            "{status}"
        );
        let diff = f.ok(&GitDiff, json!({"path": "a.txt"})).await;
        assert!(diff.contains("+two"), "{diff}");
        assert!(
            f.ok(&GitDiff, json!({"staged": true}))
                .await
                .contains("no staged changes")
        );
        assert!(!hit.exists(), "git ran repository-controlled code");
        let outside = f.err(&GitDiff, json!({"path": "../etc"})).await;
        assert!(!outside.is_empty());
    }

    #[tokio::test]
    async fn outside_a_repository_says_so() {
        if !have_git() {
            return;
        }
        let f = Fixture::new();
        // A temp dir may sit inside some repository; point discovery at the dir itself.
        std::fs::create_dir_all(f.dir.path().join(".git")).unwrap_or_else(|e| panic!("{e}"));
        let e = f.err(&GitStatus, json!({})).await;
        assert!(
            e.contains("not a git repository") || e.contains("git status failed"),
            "{e}"
        );
    }

    #[tokio::test]
    async fn a_shipped_work_tree_or_repository_elsewhere_is_never_read() {
        // Red-team pass 3, R3-1: `core.worktree` pointed at the home and an index listing
        // `.ssh/id_ed25519` put the key into git_diff's result (unconfined git, no question).
        if !have_git() {
            return;
        }
        let home = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        std::fs::create_dir_all(home.path().join(".ssh")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(home.path().join(".ssh/id_ed25519"), "RT-SECRET-KEY\n")
            .unwrap_or_else(|e| panic!("{e}"));
        let f = Fixture::new();
        let root = f.dir.path();
        git(root, &["init", "-q", "-b", "main"]);
        git(root, &["config", "user.email", "t@example.com"]);
        git(root, &["config", "user.name", "t"]);
        f.write("README.md", "hi\n");
        git(root, &["add", "."]);
        git(root, &["commit", "-qm", "init"]);
        let empty = "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391";
        git(root, &["hash-object", "-w", "/dev/null"]);
        git(
            root,
            &[
                "update-index",
                "--add",
                "--cacheinfo",
                &format!("100644,{empty},.ssh/id_ed25519"),
            ],
        );
        for worktree in [home.path().display().to_string(), "../..".to_string()] {
            git(root, &["config", "core.worktree", &worktree]);
            let diff = f.ok(&GitDiff, json!({})).await;
            assert!(!diff.contains("RT-SECRET"), "{worktree}: {diff}");
            let status = f.ok(&GitStatus, json!({})).await;
            assert!(!status.contains("RT-SECRET"), "{status}");
            assert!(status.contains("## main"), "{status}");
        }

        // A `.git` file naming another repository (the user's other project) is refused.
        let other = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        git(other.path(), &["init", "-q"]);
        let g = Fixture::new();
        std::fs::write(
            g.dir.path().join(".git"),
            format!("gitdir: {}\n", other.path().join(".git").display()),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let e = g.err(&GitStatus, json!({})).await;
        assert!(e.contains("neither a linked worktree"), "{e}");

        // A fake linked worktree shipped inside the workspace, its `commondir` naming another
        // repository with a commit (red-team pass 3, R3-12: `git_diff --staged` showed it).
        std::fs::write(other.path().join("private.txt"), "RT-OTHER-REPO\n")
            .unwrap_or_else(|e| panic!("{e}"));
        git(other.path(), &["add", "."]);
        git(
            other.path(),
            &[
                "-c",
                "user.email=t@e",
                "-c",
                "user.name=t",
                "commit",
                "-qm",
                "x",
            ],
        );
        let fake = Fixture::new();
        let wt = fake.dir.path().join(".gd/worktrees/x");
        std::fs::create_dir_all(&wt).unwrap_or_else(|e| panic!("{e}"));
        let dot = fake.dir.path().join(".git");
        std::fs::write(&dot, "gitdir: .gd/worktrees/x\n").unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(wt.join("gitdir"), format!("{}\n", dot.display()))
            .unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(wt.join("HEAD"), "ref: refs/heads/main\n").unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(
            wt.join("commondir"),
            format!("{}\n", other.path().join(".git").display()),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        for staged in [true, false] {
            let e = fake.err(&GitDiff, json!({"staged": staged})).await;
            assert!(!e.contains("RT-OTHER"), "{e}");
            assert!(e.contains("neither a linked worktree"), "{e}");
        }

        // A real linked worktree (`git worktree add`) is the user's own: it works.
        let container = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let main = container.path().join("main");
        std::fs::create_dir_all(&main).unwrap_or_else(|e| panic!("{e}"));
        git(&main, &["init", "-q", "-b", "main"]);
        git(&main, &["config", "user.email", "t@example.com"]);
        git(&main, &["config", "user.name", "t"]);
        std::fs::write(main.join("a.txt"), "a\n").unwrap_or_else(|e| panic!("{e}"));
        git(&main, &["add", "."]);
        git(&main, &["commit", "-qm", "init"]);
        let wt = container.path().join("wt");
        git(
            &main,
            &[
                "worktree",
                "add",
                "-q",
                "-b",
                "side",
                &wt.display().to_string(),
            ],
        );
        std::fs::write(wt.join("a.txt"), "changed\n").unwrap_or_else(|e| panic!("{e}"));
        let ctx = ToolContext::new(crate::Workspace::new(&wt).unwrap_or_else(|e| panic!("{e}")));
        let status = crate::Tool::execute(&GitStatus, json!({}), &ctx)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .content;
        assert!(
            status.contains("## side") && status.contains(" M a.txt"),
            "{status}"
        );
    }

    #[tokio::test]
    async fn an_index_naming_files_outside_the_work_tree_is_never_read() {
        // Red-team pass 3, R3-11: a model's one command planted such an index (or a repository
        // ships one) and git_diff returned `~/.ssh/id_ed25519`.
        if !have_git() {
            return;
        }
        let container = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let ws = crate::fixtures::index_naming_a_file_outside(container.path());
        let ctx = ToolContext::new(crate::Workspace::new(&ws).unwrap_or_else(|e| panic!("{e}")));
        for tool in [&GitDiff as &dyn crate::Tool, &GitStatus] {
            match tool.execute(json!({}), &ctx).await {
                Ok(out) => panic!("{} read the index: {}", tool.name(), out.content),
                Err(ToolError::Model(m)) => {
                    assert!(!m.contains("RT-SECRET"), "{m}");
                    assert!(m.contains("not a file inside the work tree"), "{m}");
                }
                Err(e) => panic!("{e}"),
            }
        }
        let e = crate::safe_git::in_repository(&ws, &[]).unwrap_err();
        assert!(e.contains("../../s/secret.txt"), "{e}");
        assert_eq!(
            crate::safe_git::bad_index_path(b"a/b.rs\0src/.GIT/config\0"),
            Some("src/.GIT/config".into())
        );
        assert_eq!(crate::safe_git::bad_index_path(b"a/b.rs\0c\0"), None);
    }
}
