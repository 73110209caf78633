//! A fresh workspace per eval task: a copy of a fixture directory, or a clone of a git
//! repository at a commit made with Keel's hardened git ([`keel_tools::safe_git`]), so the
//! repository being evaluated runs no hook, filter or helper of its own.

use std::path::Path;
use std::process::Command;

use keel_tools::build_dirs::{BuildDirSkipper, BuildDirs};
use keel_tools::fs::{FileKind, WriteMode};
use keel_tools::project::{ProjectDir, join_rel};
use keel_tools::{Workspace, safe_git};

use crate::suite::Source;

/// Largest file an eval fixture may hold.
const MAX_FIXTURE_FILE: u64 = 256 * 1024 * 1024;

/// Creates `dest` (which must not exist) from `source`. A directory is copied without its
/// untracked `build_dirs` (build output and dependencies are not the task's sources).
pub fn prepare(source: &Source, dest: &Path, build_dirs: &BuildDirs) -> Result<(), String> {
    match source {
        Source::Dir { base, rel } => {
            let shown = base.join(rel);
            let suite_dir = ProjectDir::open(base).map_err(|e| {
                format!("cannot open the suite's directory {}: {e}", base.display())
            })?;
            // Opened beneath the suite's directory: a fixture path through a symlink out of it
            // is refused.
            let fixture = suite_dir.subdir(rel).map_err(|e| {
                format!("the task's repo {e}; a suite copies only its own fixtures")
            })?;
            let skipper = build_dirs.skipper(&shown);
            copy_tree(&fixture, dest, &skipper)
                .map_err(|e| format!("cannot copy {} to {}: {e}", shown.display(), dest.display()))
        }
        Source::Git { url, commit } => clone(url, commit, dest),
        Source::LocalGit { base, rel, commit } => clone_local(base, rel, commit, dest),
    }
}

/// Files that send git to another repository's objects or git directory: a `.git` file
/// (`gitdir: …`), `commondir`, `objects/info/alternates` and `http-alternates`.
const REDIRECTS: [&str; 4] = [".git", "commondir", "alternates", "http-alternates"];

/// Clones the local repository `rel` beneath the suite's directory `base`: it is first copied
/// beneath open handles (as a fixture is: a symlink out, a FIFO or a device refused, and no
/// protected store beneath a home-directory suite is ever opened), with nothing in it that
/// points git at another repository, and git clones the copy — git itself never reads a path
/// the suite named.
fn clone_local(base: &Path, rel: &str, commit: &str, dest: &Path) -> Result<(), String> {
    let shown = base.join(rel);
    let suite_dir = ProjectDir::open(base)
        .map_err(|e| format!("cannot open the suite's directory {}: {e}", base.display()))?;
    let repo = suite_dir.subdir(rel).map_err(|e| {
        format!("the task's git {e}; a suite clones only its own local repositories")
    })?;
    if let Some(found) = redirect(&repo) {
        return Err(format!(
            "the task's git repository {} holds `{found}`, which points git at another \
             repository; a suite clones only its own local repositories",
            shown.display()
        ));
    }
    let (Some(parent), Some(name)) = (dest.parent(), dest.file_name()) else {
        return Err(format!("{} has no parent directory", dest.display()));
    };
    let copy = parent.join(format!(".{}.source", name.to_string_lossy()));
    let _ = std::fs::remove_dir_all(&copy);
    let result = copy_tree(&repo, &copy, &BuildDirs::none().skipper(&shown))
        .map_err(|e| format!("cannot copy {}: {e}", shown.display()))
        .and_then(|()| clone(&copy.display().to_string(), commit, dest));
    let _ = std::fs::remove_dir_all(&copy);
    result
}

/// The first entry of `dir` (walked beneath its handle) that is a git redirection
/// ([`REDIRECTS`]), if any.
fn redirect(dir: &ProjectDir) -> Option<String> {
    let mut stack = vec![String::new()];
    while let Some(at) = stack.pop() {
        for entry in dir.list(&at) {
            let rel = join_rel(&at, &entry.name);
            match entry.kind {
                FileKind::Dir => stack.push(rel),
                _ if REDIRECTS.contains(&entry.name.as_str()) => return Some(rel),
                _ => {}
            }
        }
    }
    None
}

/// Copies a fixture directory tree, read beneath the open fixture directory and written
/// beneath the open destination: regular files (with their permission bits), directories,
/// and symlinks that stay inside the fixture (recreated, not followed). A symlink leading out
/// of the fixture, a FIFO, socket or device is an error naming it — a fixture cannot carry
/// `~/.ssh` (or anything else outside it) into a task's workspace. Directories the skipper
/// leaves out (untracked build output) are not copied.
fn copy_tree(source: &ProjectDir, to: &Path, skip: &BuildDirSkipper) -> Result<(), String> {
    std::fs::create_dir_all(to).map_err(|e| e.to_string())?;
    let dest = Workspace::new(to).map_err(|e| e.to_string())?;
    let mut stack = vec![String::new()];
    while let Some(dir) = stack.pop() {
        for entry in source.list(&dir) {
            let rel = join_rel(&dir, &entry.name);
            let target = dest.locate(&rel).map_err(|e| e.to_string())?;
            match entry.kind {
                FileKind::Dir => {
                    if skip.skips(Path::new(&rel)) {
                        continue;
                    }
                    target.create_dir_all().map_err(|e| format!("{rel}: {e}"))?;
                    stack.push(rel);
                }
                FileKind::File => {
                    let mode = source.entry_info(&rel).map(|i| i.mode);
                    let bytes = source
                        .read_bytes(&rel, MAX_FIXTURE_FILE)
                        .map_err(|e| e.to_string())?
                        .unwrap_or_default();
                    target
                        .write_atomic(&bytes, WriteMode::CreateNew, mode)
                        .map_err(|e| format!("{rel}: {e}"))?;
                }
                FileKind::Symlink => {
                    source.check_inside(&rel).map_err(|e| {
                        format!("{e} (an eval fixture may only link inside itself)")
                    })?;
                    let link = source
                        .read_link(&rel)
                        .ok_or_else(|| format!("{rel}: cannot read the symlink"))?;
                    let at = dest.locate_entry(&rel).map_err(|e| e.to_string())?;
                    at.symlink(&link).map_err(|e| format!("{rel}: {e}"))?;
                }
                other => {
                    return Err(format!(
                        "`{rel}` is {}; an eval fixture holds only files, directories and \
                         symlinks inside it",
                        other.describe()
                    ));
                }
            }
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

    fn dir(base: &Path, rel: &str) -> Source {
        Source::Dir {
            base: base.to_path_buf(),
            rel: rel.into(),
        }
    }

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
        std::os::unix::fs::symlink("b/f.txt", src.join("a/link")).unwrap();
        let dest = tmp.path().join("dest");
        prepare(&dir(tmp.path(), "src"), &dest, &BuildDirs::default()).unwrap();
        assert_eq!(
            std::fs::read_to_string(dest.join("a/b/f.txt")).unwrap(),
            "x"
        );
        // Build output and dependencies are not copied.
        assert!(!dest.join("target").exists());
        assert!(!dest.join("a/node_modules").exists());
        let all = tmp.path().join("all");
        prepare(&dir(tmp.path(), "src"), &all, &BuildDirs::none()).unwrap();
        assert!(all.join("target/debug/app").exists());
        assert_eq!(
            std::fs::read_link(dest.join("a/link")).unwrap(),
            Path::new("b/f.txt")
        );
        let missing = prepare(
            &dir(tmp.path(), "nope"),
            &tmp.path().join("d2"),
            &BuildDirs::default(),
        );
        assert!(missing.unwrap_err().contains("not a directory"));
    }

    #[test]
    fn a_fixture_cannot_carry_anything_from_outside_it() {
        let tmp = tempfile::tempdir().unwrap();
        let secrets = tmp.path().join("home/.ssh");
        std::fs::create_dir_all(&secrets).unwrap();
        std::fs::write(secrets.join("id_ed25519"), "PRIVATE KEY").unwrap();
        let suite = tmp.path().join("suite");
        std::fs::create_dir_all(suite.join("fx")).unwrap();
        std::fs::write(suite.join("fx/ok.txt"), "ok").unwrap();
        // A fixture that is a link out, a link out inside a fixture, a FIFO in a fixture.
        std::os::unix::fs::symlink(&secrets, suite.join("ssh")).unwrap();
        std::os::unix::fs::symlink(secrets.join("id_ed25519"), suite.join("fx/key")).unwrap();
        for (rel, want) in [("ssh", "outside"), ("fx", "outside")] {
            let dest = tmp.path().join(format!("dest-{rel}"));
            let e = prepare(&dir(&suite, rel), &dest, &BuildDirs::default()).unwrap_err();
            assert!(e.contains(want), "{rel}: {e}");
            let copied = walk_contents(&dest);
            assert!(!copied.contains("PRIVATE KEY"), "{rel}: {copied}");
        }
        std::fs::remove_file(suite.join("fx/key")).unwrap();
        rustix::fs::mknodat(
            rustix::fs::CWD,
            suite.join("fx/pipe").as_path(),
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        let e = prepare(
            &dir(&suite, "fx"),
            &tmp.path().join("dest-fifo"),
            &BuildDirs::default(),
        )
        .unwrap_err();
        assert!(e.contains("FIFO"), "{e}");
    }

    fn walk_contents(dir: &Path) -> String {
        let mut out = String::new();
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                out.push_str(&walk_contents(&p));
            } else {
                out.push_str(&std::fs::read_to_string(&p).unwrap_or_default());
            }
        }
        out
    }

    fn plain_git(dir: &Path, args: &[&str]) -> String {
        #[allow(clippy::disallowed_methods)] // a fixture made with plain git
        let out = Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@t"])
            .args(args)
            .current_dir(dir)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// A git repository at `dir` with one commit holding `file` = `text`; its hash.
    fn repository(dir: &Path, file: &str, text: &str) -> String {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join(file), text).unwrap();
        plain_git(dir, &["init", "-q"]);
        plain_git(dir, &["add", "."]);
        plain_git(dir, &["commit", "-qm", "one"]);
        plain_git(dir, &["rev-parse", "HEAD"])
    }

    #[test]
    fn a_local_repository_cannot_lead_git_to_another_one() {
        // Red-team pass 3, R3-5: the suite's own repository may not borrow another's git
        // directory or objects (a password store outside the suite).
        if safe_git::git_version().is_none() {
            assert!(
                std::env::var_os("CI").is_none(),
                "git is needed (apt-get install git)"
            );
            println!("SKIPPED a_local_repository_cannot_lead_git_to_another_one: no git");
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let store = tmp.path().join("home/.password-store");
        let secret = repository(&store, "github.gpg", "FAKE-PASS-ENTRY");
        let suite = tmp.path().join("suite");
        let own = repository(&suite.join("repos/own"), "README", "mine");
        let local = |rel: &str, commit: &str| Source::LocalGit {
            base: suite.clone(),
            rel: rel.into(),
            commit: commit.into(),
        };
        // Its own repository clones.
        let dest = tmp.path().join("ok");
        prepare(&local("repos/own", &own), &dest, &BuildDirs::default()).unwrap();
        assert_eq!(
            std::fs::read_to_string(dest.join("README")).unwrap(),
            "mine"
        );
        // A `.git` file naming the store, alternates into its objects, a link to it.
        std::fs::create_dir_all(suite.join("gitfile")).unwrap();
        std::fs::write(
            suite.join("gitfile/.git"),
            format!("gitdir: {}\n", store.join(".git").display()),
        )
        .unwrap();
        let alt = suite.join("alt");
        repository(&alt, "x", "x");
        std::fs::write(
            alt.join(".git/objects/info/alternates"),
            format!("{}\n", store.join(".git/objects").display()),
        )
        .unwrap();
        std::os::unix::fs::symlink(&store, suite.join("link")).unwrap();
        for (rel, want) in [
            ("gitfile", "`.git`"),
            ("alt", "alternates"),
            ("link", "outside"),
        ] {
            let dest = tmp.path().join(format!("dest-{rel}"));
            let e = prepare(&local(rel, &secret), &dest, &BuildDirs::default()).unwrap_err();
            assert!(e.contains(want), "{rel}: {e}");
            assert!(!walk_contents(&dest).contains("FAKE-PASS"), "{rel}");
        }
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
