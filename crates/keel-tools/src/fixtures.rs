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

/// A repository in `container/w/r` whose index names `../../s/secret.txt` (written as git
/// never would: a same-length path's bytes replaced in an index without a checksum), and
/// that file outside holding `RT-SECRET`.
pub fn index_naming_a_file_outside(container: &Path) -> std::path::PathBuf {
    let ws = container.join("w/r");
    std::fs::create_dir_all(&ws).unwrap_or_else(|e| panic!("{e}"));
    std::fs::create_dir_all(container.join("s")).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(container.join("s/secret.txt"), "RT-SECRET\n").unwrap_or_else(|e| panic!("{e}"));
    plain_git(&ws, &["init", "-q", "-b", "main"]);
    plain_git(&ws, &["config", "index.skipHash", "true"]);
    plain_git(&ws, &["hash-object", "-w", "/dev/null"]);
    plain_git(
        &ws,
        &[
            "update-index",
            "--add",
            "--cacheinfo",
            "100644,e69de29bb2d1d6434b8b29ae775ad8c2e48c5391,zz/zz/s/secret.txt",
        ],
    );
    let index = ws.join(".git/index");
    let bytes = std::fs::read(&index).unwrap_or_else(|e| panic!("{e}"));
    let at = bytes
        .windows(6)
        .position(|w| w == b"zz/zz/")
        .unwrap_or_else(|| panic!("the placeholder path is in the index"));
    let mut bytes = bytes;
    bytes[at..at + 6].copy_from_slice(b"../../");
    std::fs::write(&index, bytes).unwrap_or_else(|e| panic!("{e}"));
    ws
}
