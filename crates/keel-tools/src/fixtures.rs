//! Test fixtures shared by the tests of this and other crates (feature `test-fixtures`, never
//! in a build of Keel): repositories made with *plain* git — what a hostile command would have
//! run — to check that Keel's own hardened git ([`crate::safe_git`]) runs none of their
//! programs.

// Plain git on purpose: the fixture is the untrusted repository, not Keel's access to it.
#![allow(clippy::disallowed_methods)]

use std::path::Path;

/// Runs plain `git ARGS` in `dir` without the system's or the user's git configuration;
/// panics when it fails (a broken fixture).
pub fn plain_git(dir: &Path, args: &[&str]) {
    let ok = std::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "git {args:?} failed");
}

/// Whether git is installed; in CI (`CI=true`) a missing git fails, elsewhere the caller
/// skips, and this prints `SKIPPED`.
pub fn have_git() -> bool {
    let found = crate::shell::exec::find_program("git").is_some();
    if !found {
        assert!(
            std::env::var("CI").map_or(true, |v| v != "true"),
            "CI must install git"
        );
        eprintln!("SKIPPED: git is not installed");
    }
    found
}
