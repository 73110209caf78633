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
//! The look-up is a walk beneath the workspace handle (no link followed), and no bound drops
//! a match silently (red-team pass 9: past 256 matches, `**/*.sql`'s other files stayed
//! writable). Each match is a mount, so more than [`MAX_PROTECTED_MATCHES`] are held as the
//! fewest directories that hold them all (the deepest lifted first: `seed/` for 300
//! `seed/s*.sql`), and a note names them. A walk cut at [`MAX_PROTECTED_WALK`] entries holds
//! each glob's literal directory (`config` for `config/*.yml`) whole, and for a glob with
//! none (`**/*.sql`) the whole workspace: commands cannot write it until the constitution
//! says what it protects more narrowly. The note says which.

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
        let mut cut = None;
        let walked = root.walk_sorted(Path::new(""), WalkOptions::default(), |e| {
            seen += 1;
            if seen > max_walk {
                cut = Some(format!("the workspace has more than {max_walk} entries"));
                return Visit::Stop;
            }
            if e.is_dir() {
                if NOT_ENTERED.iter().any(|n| e.name() == OsStr::new(n)) {
                    return Visit::Skip;
                }
                return Visit::Continue;
            }
            if e.is_file() && globs.is_match(&e.rel) {
                found.push(e.rel.clone());
            }
            Visit::Continue
        });
        if let Err(e) = walked {
            cut = Some(format!("the workspace could not be listed ({e})"));
        }
        let matched = found.len();
        let held = fewest_holding(found, max_matches);
        if held.len() < matched {
            let whole = if held.iter().any(|d| d.as_os_str().is_empty()) {
                "the whole workspace".to_string()
            } else {
                format!("every file in {}", listed(&held))
            };
            out.notes.push(format!(
                "constitution: the protected globs match {matched} files, more than the \
                 {max_matches} held one by one; {whole} is read-only to commands. Protect \
                 directories (`dir/**`) to say exactly what is protected"
            ));
        }
        add(&mut out.paths, held);
        // A protected path, or a glob's directory, reached through a link in the workspace
        // (`sql -> data/sql`) is held by its real name too: the file tools compare names, and
        // the look-up follows no link, so `sql/*.sql` matched nothing (red-team pass 10,
        // R10-13).
        let ws = root.path();
        let linked = |rel: &Path| -> Option<PathBuf> {
            let real = ws.join(rel).canonicalize().ok()?;
            let ws_real = ws.canonicalize().ok()?;
            let inside = real.strip_prefix(&ws_real).ok()?.to_path_buf();
            (inside != rel && !inside.as_os_str().is_empty()).then_some(inside)
        };
        let mut real_names: Vec<PathBuf> = out.paths.iter().filter_map(|p| linked(p)).collect();
        real_names.extend(self.file_glob_dirs.iter().filter_map(|d| linked(d)));
        add(&mut out.paths, real_names);
        if let Some(why) = cut {
            let mut whole = self.file_glob_dirs.clone();
            if self.file_glob_anywhere {
                // A glob for files anywhere could match any file not looked at.
                whole = vec![PathBuf::new()];
            }
            let held = if whole.iter().any(|d| d.as_os_str().is_empty()) {
                "the whole workspace is read-only to commands".to_string()
            } else {
                format!(
                    "{} {} read-only to commands as a whole",
                    listed(&whole),
                    if whole.len() == 1 { "is" } else { "are" }
                )
            };
            add(&mut out.paths, whole);
            out.notes.push(format!(
                "constitution: the protected globs were not looked up to the end ({why}); {held}. \
                 Protect directories (`dir/**`) or name the files to say exactly what is protected"
            ));
        }
        out
    }
}

/// Adds each of `more` not already held (by itself or a directory above it).
fn add(paths: &mut Vec<PathBuf>, more: Vec<PathBuf>) {
    for p in more {
        if !paths.iter().any(|h| p.starts_with(h)) {
            paths.push(p);
        }
    }
}

/// `paths` as a short list for a note.
fn listed(paths: &[PathBuf]) -> String {
    let mut names: Vec<String> = paths
        .iter()
        .take(5)
        .map(|d| format!("`{}`", d.display()))
        .collect();
    if paths.len() > 5 {
        names.push(format!("and {} more", paths.len() - 5));
    }
    names.join(", ")
}

/// At most `max` paths that hold every one of `paths` (themselves or a directory above): the
/// deepest are replaced by their directories until few enough remain; the empty path (the
/// workspace) when even the top level is too many.
fn fewest_holding(mut paths: Vec<PathBuf>, max: usize) -> Vec<PathBuf> {
    loop {
        paths.sort();
        paths.dedup();
        let mut outer: Vec<PathBuf> = Vec::with_capacity(paths.len());
        for p in paths {
            if !outer.last().is_some_and(|o| p.starts_with(o)) {
                outer.push(p);
            }
        }
        paths = outer;
        if paths.len() <= max {
            return paths;
        }
        let deepest = paths
            .iter()
            .map(|p| p.components().count())
            .max()
            .unwrap_or(0);
        if deepest <= 1 {
            return vec![PathBuf::new()];
        }
        for p in &mut paths {
            if p.components().count() == deepest {
                p.pop();
            }
        }
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

    /// Red-team pass 10, R10-13: `sql -> data/sql`; `data/sql/a.sql` is the protected file.
    #[test]
    fn a_protected_path_through_a_link_is_held_by_its_real_name_too() {
        let (d, h) = tree(&["data/sql/a.sql", "docs/x.md"]);
        std::os::unix::fs::symlink("data/sql", d.path().join("sql")).unwrap();
        std::os::unix::fs::symlink("docs/x.md", d.path().join("x.md")).unwrap();
        let c = Constitution::parse(r#"{"protected_paths": ["sql/*.sql", "x.md"]}"#).unwrap();
        let p = c.protected_files(&h);
        assert_eq!(paths(&p), ["x.md", "docs/x.md", "data/sql"]);
    }

    #[test]
    fn past_the_bounds_directories_are_held_whole_and_a_note_says_so() {
        let (_d, h) = tree(&[
            "config/a.yml",
            "config/b.yml",
            "config/c.yml",
            "seed/1.sql",
            "seed/2.sql",
            "seed/3.sql",
            "db/x.sql",
        ]);
        // More matches than held one by one: the fewest directories that hold them.
        let c = Constitution::parse(r#"{"protected_paths": ["config/*.yml"]}"#).unwrap();
        let p = c.protected_files_bounded(&h, 1_000, 2);
        assert_eq!(paths(&p), ["config"]);
        assert!(p.notes[0].contains("match 3 files"), "{:?}", p.notes);
        assert!(p.notes[0].contains("`config`"), "{:?}", p.notes);
        let c = Constitution::parse(r#"{"protected_paths": ["**/*.sql"]}"#).unwrap();
        let p = c.protected_files_bounded(&h, 1_000, 2);
        assert_eq!(paths(&p), ["db", "seed"]);
        let (_e, deep) = tree(&["top.sql", "a/b/c/1.sql", "a/b/c/2.sql"]);
        let p = c.protected_files_bounded(&deep, 1_000, 2);
        assert_eq!(
            paths(&p),
            ["a/b/c", "top.sql"],
            "the deepest are lifted first"
        );
        let p = c.protected_files_bounded(&h, 1_000, 1);
        assert_eq!(paths(&p), [""], "past the top level: the workspace");
        assert!(
            p.notes[0].contains("the whole workspace is"),
            "{:?}",
            p.notes
        );
        // A cut walk: the glob's literal directory whole; a glob for anywhere, everything.
        let c = Constitution::parse(r#"{"protected_paths": ["config/*.yml"]}"#).unwrap();
        let p = c.protected_files_bounded(&h, 3, 10);
        assert!(paths(&p).contains(&"config".to_string()), "{:?}", p.paths);
        assert!(p.notes[0].contains("more than 3 entries"), "{:?}", p.notes);
        assert!(
            p.notes[0].contains("`config` is read-only"),
            "{:?}",
            p.notes
        );
        let c = Constitution::parse(r#"{"protected_paths": ["**/*.sql"]}"#).unwrap();
        let p = c.protected_files_bounded(&h, 3, 10);
        assert_eq!(paths(&p), [""]);
        assert!(p.notes[0].contains("the whole workspace"), "{:?}", p.notes);
    }
}
