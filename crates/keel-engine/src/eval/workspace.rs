//! A fresh workspace per eval task: a copy of a fixture directory, or a clone of a git
//! repository at a commit made with Keel's hardened git ([`keel_tools::safe_git`]), so the
//! repository being evaluated runs no hook, filter or helper of its own.

use std::path::Path;
use std::process::Command;

use keel_tools::build_dirs::{BuildDirSkipper, BuildDirs};
use keel_tools::safe_git;

use super::suite::Source;

/// Creates `dest` (which must not exist) from `source`. A directory is copied without its
/// untracked `build_dirs` (build output and dependencies are not the task's sources).
pub fn prepare(source: &Source, dest: &Path, build_dirs: &BuildDirs) -> Result<(), String> {
    match source {
        Source::Dir(dir) => {
            if !dir.is_dir() {
                return Err(format!(
                    "the task's repo `{}` is not a directory",
                    dir.display()
                ));
            }
            let skipper = build_dirs.skipper(dir);
            copy_tree(dir, dest, Path::new(""), &skipper)
                .map_err(|e| format!("cannot copy {} to {}: {e}", dir.display(), dest.display()))
        }
        Source::Git { url, commit } => clone(url, commit, dest),
    }
}

/// Copies a directory tree; symbolic links are recreated, not followed; directories the
/// skipper leaves out are not copied.
fn copy_tree(from: &Path, to: &Path, rel: &Path, skip: &BuildDirSkipper) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        let target = to.join(entry.file_name());
        if kind.is_dir() {
            let sub = rel.join(entry.file_name());
            if skip.skips(&sub) {
                continue;
            }
            copy_tree(&entry.path(), &target, &sub, skip)?;
        } else if kind.is_symlink() {
            #[cfg(unix)]
            std::os::unix::fs::symlink(std::fs::read_link(entry.path())?, &target)?;
        } else {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}

/// Hardened git allowing the transports a suite may name (local paths and file://, https,
/// ssh, git), which [`safe_git::FORCED`] switches off by default.
fn git() -> Result<Command, String> {
    let allow: Vec<(String, String)> = ["file", "https", "http", "ssh", "git"]
        .iter()
        .map(|p| (format!("protocol.{p}.allow"), "always".to_string()))
        .collect();
    safe_git::hardened_git(&allow, safe_git::config_env_supported())
}

fn run(mut cmd: Command, what: &str) -> Result<(), String> {
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run git to {what}: {e} (is git installed?)"))?;
    if out.status.success() {
        return Ok(());
    }
    let err = String::from_utf8_lossy(&out.stderr);
    Err(format!("git could not {what}: {}", err.trim()))
}

fn clone(url: &str, commit: &str, dest: &Path) -> Result<(), String> {
    let mut c = git()?;
    c.args(["clone", "--quiet", "--no-checkout", "--"])
        .arg(url)
        .arg(dest);
    run(c, &format!("clone {url}"))?;
    let mut c = git()?;
    c.arg("-C")
        .arg(dest)
        .args(["checkout", "--quiet", "--detach"])
        .arg(commit)
        .arg("--");
    run(c, &format!("check out {commit} of {url}"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_directory_is_copied_without_its_build_output() {
        let tmp = tempfile::tempdir().unwrap();
        let src = tmp.path().join("src");
        std::fs::create_dir_all(src.join("a/b")).unwrap();
        std::fs::write(src.join("a/b/f.txt"), "x").unwrap();
        std::fs::create_dir_all(src.join("a/node_modules/p")).unwrap();
        std::fs::write(src.join("a/node_modules/p/i.js"), "x").unwrap();
        std::fs::create_dir_all(src.join("target/debug")).unwrap();
        std::fs::write(src.join("target/debug/app"), "x").unwrap();
        let dest = tmp.path().join("dest");
        prepare(&Source::Dir(src.clone()), &dest, &BuildDirs::default()).unwrap();
        assert_eq!(
            std::fs::read_to_string(dest.join("a/b/f.txt")).unwrap(),
            "x"
        );
        // Build output and dependencies are not copied.
        assert!(!dest.join("target").exists());
        assert!(!dest.join("a/node_modules").exists());
        let all = tmp.path().join("all");
        prepare(&Source::Dir(src), &all, &BuildDirs::none()).unwrap();
        assert!(all.join("target/debug/app").exists());
        let missing = prepare(
            &Source::Dir(tmp.path().join("nope")),
            &tmp.path().join("d2"),
            &BuildDirs::default(),
        );
        assert!(missing.unwrap_err().contains("not a directory"));
    }

    #[test]
    fn a_bad_clone_says_what_failed() {
        let tmp = tempfile::tempdir().unwrap();
        let err = prepare(
            &Source::Git {
                url: tmp.path().join("none.git").display().to_string(),
                commit: "abc".into(),
            },
            &tmp.path().join("d"),
            &BuildDirs::default(),
        )
        .unwrap_err();
        assert!(err.contains("clone"), "{err}");
    }
}
