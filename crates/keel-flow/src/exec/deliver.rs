//! `deliver`: commits the workspace's current files on a new branch without touching the
//! user's branch, index or working tree — a temporary index, `write-tree`, `commit-tree` and
//! `update-ref` — and writes a PR description file. Every git call goes through Keel's
//! hardened git (`keel_tools::safe_git`): no hooks, filters, pagers or helpers run.

use std::path::Path;
use std::process::Output;

use keel_tools::safe_git::{config_env_supported, hardened_git, neutralisers};

/// What a delivery made.
#[derive(Debug, Clone, PartialEq)]
pub struct Delivered {
    pub branch: String,
    pub commit: String,
}

fn git(
    repo: &Path,
    extra: &[(String, String)],
    env: &[(&str, String)],
    args: &[&str],
) -> Result<Output, String> {
    let mut c = hardened_git(extra, config_env_supported())?;
    c.current_dir(repo).args(args);
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c
        .output()
        .map_err(|e| format!("cannot run git {}: {e}", args.join(" ")))?;
    if !out.status.success() {
        return Err(format!(
            "git {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(out)
}

fn text(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Commits everything in `repo` (minus `.keel` and ignored files) on the new `branch` with
/// `message`, parented on the current `HEAD`.
pub fn commit_on_branch(repo: &Path, branch: &str, message: &str) -> Result<Delivered, String> {
    if branch.is_empty()
        || branch.starts_with('-')
        || branch.contains("..")
        || branch
            .chars()
            .any(|c| c.is_whitespace() || "~^:?*[\\".contains(c))
    {
        return Err(format!("`{branch}` is not a valid branch name for deliver"));
    }
    let names = git(repo, &[], &[], &["config", "--list", "--name-only", "-z"])
        .map(|o| o.stdout)
        .unwrap_or_default();
    let extra = neutralisers(&names);
    let exists = git(
        repo,
        &extra,
        &[],
        &[
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("refs/heads/{branch}"),
        ],
    );
    if exists.is_ok() {
        return Err(format!(
            "branch `{branch}` already exists; deliver only creates new branches"
        ));
    }
    let head = git(repo, &extra, &[], &["rev-parse", "--verify", "HEAD"]).map(|o| text(&o))?;
    let dir = tempfile::tempdir().map_err(|e| format!("cannot create a temporary index: {e}"))?;
    let index = dir.path().join("index").display().to_string();
    let env = [
        ("GIT_INDEX_FILE", index),
        ("GIT_AUTHOR_NAME", "Keel".to_string()),
        ("GIT_AUTHOR_EMAIL", "keel@localhost".to_string()),
        ("GIT_COMMITTER_NAME", "Keel".to_string()),
        ("GIT_COMMITTER_EMAIL", "keel@localhost".to_string()),
    ];
    git(repo, &extra, &env, &["read-tree", "HEAD"])?;
    git(
        repo,
        &extra,
        &env,
        &["add", "-A", "--", ".", ":(exclude).keel"],
    )?;
    let tree = text(&git(repo, &extra, &env, &["write-tree"])?);
    let commit = text(&git(
        repo,
        &extra,
        &env,
        &["commit-tree", &tree, "-p", &head, "-m", message],
    )?);
    git(
        repo,
        &extra,
        &env,
        &["update-ref", &format!("refs/heads/{branch}"), &commit, ""],
    )?;
    Ok(Delivered {
        branch: branch.to_string(),
        commit,
    })
}
