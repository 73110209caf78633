//! The constitution's protected files, as the kernel sandbox holds them.
//!
//! A plain protected path and a glob for a whole directory are protected as that path: a
//! read-only mount in every command's view with the directories on the way pinned, so
//! `mv docs x; mkdir docs` cannot free it. A glob for files (`config/*.yml`, `**/*.sql`)
//! names no one path, and was left to the file tools and the command-text check: a command
//! that renamed the directory, or reached the file under another name (`cd config && …`),
//! rewrote a protected file (red-team pass 8, R8-16). So the files such globs match are
//! looked up once, when the session is built, and each is protected as a plain path.
//!
//! The look-up is a walk beneath the workspace handle (no link followed) with two bounds;
//! past either, the globs' literal directories (`config` for `config/*.yml`) are protected
//! whole instead, and a note says what is held and how to say it better. A glob with no
//! literal directory (`**/*.sql`) past the bounds keeps only what was found: the note names
//! it.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use keel_fs::beneath::DirHandle;
use keel_fs::walk::{Visit, WalkOptions};

use super::Constitution;

/// The most entries the look-up visits.
pub const MAX_PROTECTED_WALK: usize = 200_000;
/// The most files protected one by one (each is a mount in every command's view).
pub const MAX_PROTECTED_MATCHES: usize = 256;
/// Directories the look-up does not enter: the repository's own data and installed
/// dependencies are not the project's protected content.
const NOT_ENTERED: &[&str] = &[
    ".git",
    "node_modules",
    ".venv",
    "venv",
    "target",
    "__pycache__",
];

/// What the kernel sandbox and the file tools hold read-only for a constitution.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Protected {
    /// Workspace-relative paths, each protected whole.
    pub paths: Vec<PathBuf>,
    /// What the user should know (a bound reached), one line each.
    pub notes: Vec<String>,
}

impl Constitution {
    /// The protected paths, with the files that the protected globs match in the workspace
    /// now (see the module documentation). Without file globs this reads nothing.
    pub fn protected_files(&self, root: &DirHandle) -> Protected {
        self.protected_files_bounded(root, MAX_PROTECTED_WALK, MAX_PROTECTED_MATCHES)
    }

    fn protected_files_bounded(
        &self,
        root: &DirHandle,
        max_walk: usize,
        max_matches: usize,
    ) -> Protected {
        let mut out = Protected {
            paths: self.plain_protected(),
            notes: Vec::new(),
        };
        let Some(globs) = &self.file_globs else {
            return out;
        };
        let mut seen = 0usize;
        let mut found = Vec::new();
        let mut bound = None;
        let walked = root.walk_sorted(Path::new(""), WalkOptions::default(), |e| {
            seen += 1;
            if seen > max_walk {
                bound = Some(format!("the workspace has more than {max_walk} entries"));
                return Visit::Stop;
            }
            if e.is_dir() {
                if NOT_ENTERED.iter().any(|n| e.name() == OsStr::new(n)) {
                    return Visit::Skip;
                }
                return Visit::Continue;
            }
            if e.is_file() && globs.is_match(&e.rel) {
                if found.len() == max_matches {
                    bound = Some(format!("they match more than {max_matches} files"));
                    return Visit::Stop;
                }
                found.push(e.rel.clone());
            }
            Visit::Continue
        });
        if let Err(e) = walked {
            bound = Some(format!("the workspace could not be listed ({e})"));
        }
        for f in found {
            if !out.paths.iter().any(|p| f.starts_with(p)) {
                out.paths.push(f);
            }
        }
        if let Some(why) = bound {
            let dirs = &self.file_glob_dirs;
            for d in dirs {
                if !out.paths.iter().any(|p| d.starts_with(p)) {
                    out.paths.push(d.clone());
                }
            }
            let held = if dirs.is_empty() {
                "only the files found so far are read-only to commands".to_string()
            } else {
                format!(
                    "{} {} read-only to commands as a whole",
                    dirs.iter()
                        .map(|d| format!("`{}`", d.display()))
                        .collect::<Vec<_>>()
                        .join(", "),
                    if dirs.len() == 1 { "is" } else { "are" }
                )
            };
            out.notes.push(format!(
                "constitution: the protected globs were not looked up to the end ({why}); {held}. \
                 Protect a directory (`dir/**`) or fewer files to say exactly what is protected"
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(files: &[&str]) -> (tempfile::TempDir, DirHandle) {
        let dir = tempfile::tempdir().unwrap();
        for f in files {
            let p = dir.path().join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, "x").unwrap();
        }
        let h = DirHandle::open(dir.path()).unwrap();
        (dir, h)
    }

    fn paths(p: &Protected) -> Vec<String> {
        p.paths.iter().map(|p| p.display().to_string()).collect()
    }

    #[test]
    fn the_files_a_protected_glob_matches_are_protected_one_by_one() {
        let (_d, h) = tree(&[
            "config/a.yml",
            "config/b.txt",
            "db/x/001.sql",
            "node_modules/m/z.sql",
            "docs/api.md",
        ]);
        let c = Constitution::parse(
            r#"{"protected_paths": ["config/*.yml", "**/*.sql", "docs/", "db/**"]}"#,
        )
        .unwrap();
        let p = c.protected_files(&h);
        assert_eq!(paths(&p), ["docs", "db", "config/a.yml"]);
        assert!(p.notes.is_empty(), "{:?}", p.notes);
        // Without file globs nothing is read.
        let plain = Constitution::parse(r#"{"protected_paths": ["docs/"]}"#).unwrap();
        assert_eq!(paths(&plain.protected_files(&h)), ["docs"]);
    }

    #[test]
    fn past_the_bounds_the_globs_directories_are_protected_whole_and_a_note_says_so() {
        let (_d, h) = tree(&["config/a.yml", "config/b.yml", "config/c.yml", "s/1.sql"]);
        let c = Constitution::parse(r#"{"protected_paths": ["config/*.yml"]}"#).unwrap();
        let p = c.protected_files_bounded(&h, 1_000, 2);
        assert_eq!(paths(&p), ["config/a.yml", "config/b.yml", "config"]);
        assert!(p.notes[0].contains("more than 2 files"), "{:?}", p.notes);
        assert!(
            p.notes[0].contains("`config` is read-only"),
            "{:?}",
            p.notes
        );
        let c = Constitution::parse(r#"{"protected_paths": ["**/*.sql"]}"#).unwrap();
        let p = c.protected_files_bounded(&h, 3, 10);
        assert!(p.notes[0].contains("more than 3 entries"), "{:?}", p.notes);
        assert!(
            p.notes[0].contains("only the files found so far"),
            "{:?}",
            p.notes
        );
    }
}
