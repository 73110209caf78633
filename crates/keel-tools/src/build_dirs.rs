//! Build output and dependency directories (`target/`, `node_modules/`, `.venv/`, …): what a
//! compiler or a package manager regenerates is not the user's work. Snapshots and undo, flow
//! traces and the workspace copies of flow branches and eval tasks leave such a directory out
//! when git tracks no file in it (a `build/` directory of sources that is committed stays in).
//!
//! This module only names the directories and finds the tracked exceptions; the callers decide
//! what leaving them out means (a git exclude file, a walker filter, a copy that skips them).

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::path::{Component, Path, PathBuf};
use std::process::Stdio;

/// The directories left out unless configured otherwise (`[snapshots] build_dirs`).
pub const DEFAULT_BUILD_DIRS: &[&str] = &[
    "target",
    "node_modules",
    ".venv",
    "venv",
    "__pycache__",
    "dist",
    "build",
    ".tox",
    ".nox",
    ".pytest_cache",
    ".mypy_cache",
    ".ruff_cache",
    ".gradle",
    ".next",
    ".nuxt",
    ".svelte-kit",
    ".parcel-cache",
    ".turbo",
    ".dart_tool",
    "zig-cache",
    ".zig-cache",
];

/// A set of directory names that hold regenerated files (matched at any depth).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildDirs {
    names: Vec<String>,
}

impl Default for BuildDirs {
    fn default() -> Self {
        Self {
            names: DEFAULT_BUILD_DIRS.iter().map(|s| s.to_string()).collect(),
        }
    }
}

impl BuildDirs {
    /// These names (each one directory name: no `/`, not `.`, `..`, `.git` or `.keel`).
    pub fn new(names: &[String]) -> Result<Self, String> {
        for n in names {
            check_name(n)?;
        }
        let mut names = names.to_vec();
        names.sort();
        names.dedup();
        Ok(Self { names })
    }

    /// Nothing is left out.
    pub fn none() -> Self {
        Self { names: Vec::new() }
    }

    /// The names, sorted.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// Whether a directory called `name` is a build directory (tracked or not).
    pub fn matches(&self, name: &OsStr) -> bool {
        name.to_str()
            .is_some_and(|n| self.names.iter().any(|b| b == n))
    }

    /// The names as `.gitignore` lines (`target/`: a directory of that name at any depth).
    /// Ignore rules apply only to untracked files, which is exactly the rule here.
    pub fn gitignore(&self) -> String {
        let mut out =
            String::from("# Keel: build and dependency directories ([snapshots] build_dirs)\n");
        for n in &self.names {
            out.push_str(n);
            out.push_str("/\n");
        }
        out
    }

    /// What to leave out of the workspace at `root`: every build directory except those in
    /// which git tracks a file (asked once, now; no repository means nothing is tracked).
    pub fn skipper(&self, root: &Path) -> BuildDirSkipper {
        BuildDirSkipper {
            names: self.names.clone(),
            tracked: if self.names.is_empty() {
                BTreeSet::new()
            } else {
                tracked_build_dirs(root, &self.names)
            },
        }
    }
}

/// Decides, for one workspace, which directories to leave out.
#[derive(Debug, Clone, Default)]
pub struct BuildDirSkipper {
    names: Vec<String>,
    /// Workspace-relative build directories that hold tracked files.
    tracked: BTreeSet<PathBuf>,
}

impl BuildDirSkipper {
    /// Whether the directory at `rel` (workspace-relative) is left out.
    pub fn skips(&self, rel: &Path) -> bool {
        rel.file_name()
            .and_then(OsStr::to_str)
            .is_some_and(|n| self.names.iter().any(|b| b == n))
            && !self.tracked.contains(rel)
    }

    /// The build directories kept because git tracks files in them.
    pub fn tracked(&self) -> impl Iterator<Item = &Path> {
        self.tracked.iter().map(PathBuf::as_path)
    }
}

fn check_name(name: &str) -> Result<(), String> {
    let bad = name.is_empty()
        || name.contains('/')
        || name.contains('\\')
        || name.contains('\0')
        || matches!(name, "." | ".." | ".git" | ".keel")
        || name.contains(['*', '?', '[', '!']);
    if bad {
        Err(format!(
            "`{name}` is not a directory name (build_dirs takes plain names such as `target` or `node_modules`, matched at any depth)"
        ))
    } else {
        Ok(())
    }
}

/// The workspace-relative build directories in which the git repository holding `root` tracks
/// at least one file. Git runs hardened (no hooks, fsmonitor or configured programs).
fn tracked_build_dirs(root: &Path, names: &[String]) -> BTreeSet<PathBuf> {
    let mut out = BTreeSet::new();
    let Ok(mut cmd) = crate::safe_git::hardened_git(&[], crate::safe_git::config_env_supported())
    else {
        return out;
    };
    cmd.current_dir(root)
        .args(["ls-files", "--cached", "-z", "--"])
        .args(names.iter().map(|n| format!(":(glob)**/{n}/**")))
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let Ok(listed) = cmd.output() else {
        return out;
    };
    if !listed.status.success() {
        return out;
    }
    for raw in listed.stdout.split(|b| *b == 0).filter(|p| !p.is_empty()) {
        let path = PathBuf::from(String::from_utf8_lossy(raw).into_owned());
        let mut prefix = PathBuf::new();
        for c in path.components() {
            let Component::Normal(part) = c else { break };
            prefix.push(part);
            if names.iter().any(|n| OsStr::new(n) == part) && prefix != path {
                out.insert(prefix.clone());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::disallowed_methods)]

    use super::*;

    fn git(dir: &Path, args: &[&str]) -> bool {
        std::process::Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@t"])
            .args(args)
            .current_dir(dir)
            .output()
            .is_ok_and(|o| o.status.success())
    }

    #[test]
    fn names_are_plain_directory_names() {
        assert!(BuildDirs::new(&["target".into(), "node_modules".into()]).is_ok());
        for bad in ["", "a/b", "..", ".git", "*.o", ".keel"] {
            let err = BuildDirs::new(&[bad.to_string()]).unwrap_err();
            assert!(err.contains("build_dirs"), "{err}");
        }
        assert!(BuildDirs::default().matches(OsStr::new("node_modules")));
        assert!(!BuildDirs::default().matches(OsStr::new("src")));
        assert_eq!(BuildDirs::none().gitignore().lines().count(), 1);
        assert!(BuildDirs::default().gitignore().contains("\ntarget/\n"));
    }

    #[test]
    fn an_untracked_build_directory_is_skipped_and_a_tracked_one_kept() {
        if crate::safe_git::git_version().is_none() {
            eprintln!("SKIPPED an_untracked_build_directory_is_skipped: git is not installed");
            assert!(std::env::var("CI").is_err(), "CI needs git");
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        // Without a repository nothing is tracked: every build directory is skipped.
        let plain = BuildDirs::default().skipper(root);
        assert!(plain.skips(Path::new("target")));
        assert!(plain.skips(Path::new("web/node_modules")));
        assert!(!plain.skips(Path::new("src")));
        assert!(git(root, &["init", "-q"]));
        std::fs::create_dir_all(root.join("docs/build")).unwrap();
        std::fs::write(root.join("docs/build/conf.py"), "x").unwrap();
        std::fs::create_dir_all(root.join("target/debug")).unwrap();
        std::fs::write(root.join("target/debug/app"), "bin").unwrap();
        assert!(git(root, &["add", "docs/build/conf.py"]));
        let s = BuildDirs::default().skipper(root);
        assert!(!s.skips(Path::new("docs/build")), "tracked: kept");
        assert!(s.skips(Path::new("target")), "untracked: skipped");
        assert!(s.skips(Path::new("build")));
        assert_eq!(
            s.tracked().collect::<Vec<_>>(),
            vec![Path::new("docs/build")]
        );
    }
}
