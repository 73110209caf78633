//! `/diff`: the workspace's uncommitted changes against `HEAD`, computed with Keel's hardened
//! git ([`keel_tools::safe_git`]). The workspace's `.git` may have been created or changed by
//! a command the model ran (a workspace without git gets one from `git init`), so nothing its
//! configuration names runs here: no fsmonitor, hooks, pager, external diff or textconv,
//! filters or aliases, and no system or global configuration.

use std::path::Path;
use std::time::Duration;

/// The longest `/diff`'s git may run.
const DIFF_DEADLINE: Duration = Duration::from_secs(60);

/// `git diff HEAD` of `workspace` (empty when nothing changed), or what went wrong, for the
/// user.
pub fn workspace_diff(workspace: &Path) -> Result<String, String> {
    let mut git = keel_tools::safe_git::in_repository(workspace, &[])?;
    git.args([
        "diff",
        "--no-color",
        "--no-ext-diff",
        "--no-textconv",
        "--ignore-submodules=all",
        "HEAD",
    ]);
    // Inside the read-only sandbox: a command still running (a subagent's, a `setsid` child)
    // may swap a file for a symlink to a secret while git reads the work tree (R4-7).
    let jail = keel_tools::confined_git::GitConfinement::read_only(workspace);
    let out = keel_tools::confined_git::output_blocking(&git, &jail, None, DIFF_DEADLINE)
        .map_err(|e| format!("cannot run git: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "git diff failed: {} (is the workspace a git repository with a commit?)",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

#[cfg(test)]
mod tests {
    // The repository a hostile command would have created is made with plain git.
    use super::*;
    use keel_tools::fixtures::{have_git, plain_git as git};

    /// A workspace without git, where a command then ran `git init`, committed and set
    /// `core.fsmonitor` (and the other program-naming keys) to a script: `/diff` shows the
    /// change and runs none of them.
    #[test]
    fn diff_runs_no_program_a_command_configured_in_a_new_git_dir() {
        if !have_git() {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        let canary = dir.path().join("canary");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::create_dir_all(&canary).unwrap();
        std::fs::write(ws.join("a.txt"), "one\n").unwrap();
        let hit = canary.join("ran");
        let evil = canary.join("evil.sh");
        std::fs::write(
            &evil,
            format!("#!/bin/sh\necho \"$0 $*\" >> {}\ncat\n", hit.display()),
        )
        .unwrap();
        std::fs::set_permissions(&evil, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let evil = evil.display().to_string();
        // What the command did.
        git(&ws, &["init", "-q", "-b", "main"]);
        git(&ws, &["config", "user.email", "t@example.com"]);
        git(&ws, &["config", "user.name", "t"]);
        git(&ws, &["add", "."]);
        git(&ws, &["commit", "-qm", "init"]);
        std::fs::write(ws.join(".gitattributes"), "*.txt diff=evil filter=evil\n").unwrap();
        for (k, v) in [
            ("core.fsmonitor", evil.as_str()),
            ("core.pager", evil.as_str()),
            ("pager.diff", evil.as_str()),
            ("diff.external", evil.as_str()),
            ("diff.evil.textconv", evil.as_str()),
            ("diff.evil.command", evil.as_str()),
            ("filter.evil.clean", evil.as_str()),
            ("filter.evil.required", "true"),
            ("alias.diff", "!sh -c 'touch /nonexistent'"),
        ] {
            git(&ws, &["config", k, v]);
        }
        std::fs::write(ws.join("a.txt"), "one\ntwo\n").unwrap();
        let diff = workspace_diff(&ws);
        assert!(
            !hit.exists(),
            "/diff ran a program the repository named: {}",
            std::fs::read_to_string(&hit).unwrap_or_default()
        );
        let diff = diff.unwrap();
        assert!(diff.contains("+two"), "{diff}");
    }

    #[test]
    fn outside_a_repository_diff_says_so() {
        if !have_git() {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        // A temp dir may sit inside some repository; stop discovery at the dir itself.
        std::fs::create_dir_all(dir.path().join(".git")).unwrap();
        let e = workspace_diff(dir.path()).unwrap_err();
        assert!(
            e.contains("git diff failed") || e.contains("not a git"),
            "{e}"
        );
    }
}
