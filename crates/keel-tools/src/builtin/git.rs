//! `git_status` and `git_diff`: read-only views of the workspace's git repository.
//!
//! Git runs through [`crate::safe_git`], the one hardened invocation Keel uses (the engine's
//! snapshots too): no hooks, no fsmonitor, no pager, no external diff, and every filter, diff
//! and merge driver, credential helper and signing program the repository's config names
//! blanked before each command; no system or global config and an allowlisted environment.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use tokio::process::Command;

use crate::safe_git::{config_env_supported, hardened_git, neutralisers};
use crate::{ToolContext, ToolEffect, ToolError, ToolOutput, TypedTool};

/// Longest a read-only git command may run.
const GIT_TIMEOUT: Duration = Duration::from_secs(30);

/// Output settings of the tools (not hardening): paths as they are, no colour.
const DISPLAY: &[(&str, &str)] = &[("core.quotePath", "false"), ("color.ui", "false")];

/// The hardened git in `root` with `extra` overrides, output captured.
fn read_only_git(root: &Path, extra: &[(String, String)]) -> Result<Command, ToolError> {
    let mut all: Vec<(String, String)> = DISPLAY
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    all.extend(extra.iter().cloned());
    let mut c =
        Command::from(hardened_git(&all, config_env_supported()).map_err(ToolError::model)?);
    c.current_dir(root)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    Ok(c)
}

/// Runs read-only git in the workspace and returns its stdout.
async fn run_git(root: &Path, args: &[&str]) -> Result<String, ToolError> {
    // Reading config runs no code; it tells which programs to switch off.
    let drivers =
        match output(read_only_git(root, &[])?.args(["config", "--list", "--name-only", "-z"]))
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
    let mut cmd = read_only_git(root, &drivers)?;
    cmd.args(args);
    match output(&mut cmd).await? {
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
async fn output(cmd: &mut Command) -> Result<Result<String, String>, ToolError> {
    let child = cmd.spawn().map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => ToolError::model(
            "git is not installed (or not on PATH); install it (Debian/Ubuntu: `apt-get install git`) to use git_status and git_diff",
        ),
        _ => ToolError::model(format!("cannot start git: {e}")),
    })?;
    let out = tokio::time::timeout(GIT_TIMEOUT, child.wait_with_output())
        .await
        .map_err(|_| {
            ToolError::model(format!(
                "git did not finish within {}s",
                GIT_TIMEOUT.as_secs()
            ))
        })?
        .map_err(|e| ToolError::model(format!("git failed: {e}")))?;
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
                let resolved = ctx.workspace.resolve(p)?;
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
        argv.push("--");
        if let Some(r) = rel.as_deref() {
            argv.push(if r.is_empty() { "." } else { r });
        }
        let out = run_git(ctx.workspace.root(), &argv).await?;
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
}
