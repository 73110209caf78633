//! Writes over files no snapshot holds (red-team pass 7, R7-14, the overwrite form).
//!
//! A snapshot records tracked and untracked files, and of the files the repository ignores
//! only those git lists one by one (not inside an ignored directory — a cache, build output,
//! `data/`) of at most 1 MiB (`keel-snapshot`'s `small_ignored`). So `cp README.md
//! data/r.csv`, `echo x > data/r.csv`, `tee data/r.csv`, `sort -o big.bin …` over an existing
//! such file destroy the only copy: `keel undo` has nothing to bring back. Every write the
//! analysis logs by path ([`super::line_writes`]) is checked here, whatever program or
//! redirection made it — a new program's writes are covered by being logged, not by being
//! listed — and a write over an existing regular file that no snapshot would record is
//! `destructive`: a person is asked first. Writes that keep the content (`>>`, `tee -a`,
//! `touch`, `chmod`, `mkdir`) are logged as keeping it.
//!
//! Rating the write was chosen over copying the file aside before every command: the side
//! store would have to copy, before each command, every file a command might write (the
//! analysis names them only when literal, and ignored directories hold gigabytes of build
//! output), while the judgement already sees each named write; what it cannot name is
//! `unknown` and asked anyway.
//!
//! "Ignored" is the repository's own rules as Keel's snapshot git reads them: `.gitignore`
//! files from the workspace root down and `.git/info/exclude` (the snapshot's git reads no
//! global configuration, so no `core.excludesFile`). A force-added tracked file under an
//! ignored pattern is counted as not recorded: asked about, never lost.

use std::path::{Path, PathBuf};

use ignore::Match;
use ignore::gitignore::{Gitignore, GitignoreBuilder};

use super::project::Project;

/// The largest ignored file a snapshot records (`keel-snapshot`'s `IGNORED_MAX_BYTES`).
pub(crate) const IGNORED_MAX_BYTES: u64 = 1024 * 1024;
/// The longest ignore file read.
const IGNORE_FILE_LIMIT: u64 = 256 * 1024;

impl Project {
    /// Why no snapshot records the workspace file `rel` (a regular file of `len` bytes), or
    /// `None` when one does.
    pub(crate) fn unrecorded(&mut self, rel: &Path, len: u64) -> Option<String> {
        let parts: Vec<&std::ffi::OsStr> = rel.iter().collect();
        let mut prefix = PathBuf::new();
        for (i, part) in parts.iter().enumerate() {
            let parent = prefix.clone();
            prefix.push(part);
            let is_dir = i + 1 < parts.len();
            if !self.ignored(&parent, &prefix, is_dir) {
                continue;
            }
            if is_dir {
                return Some(format!(
                    "`{}`, in `{}/`, a directory the repository ignores",
                    rel.display(),
                    prefix.display()
                ));
            }
            return (len > IGNORED_MAX_BYTES).then(|| {
                format!(
                    "`{}`, ignored by the repository and larger than {} MiB",
                    rel.display(),
                    IGNORED_MAX_BYTES / (1024 * 1024)
                )
            });
        }
        None
    }

    /// Whether `path` (in the workspace directory `parent`) is ignored: the `.gitignore`
    /// files of `parent` and of each directory above it (the deepest decides), then
    /// `.git/info/exclude`.
    fn ignored(&mut self, parent: &Path, path: &Path, is_dir: bool) -> bool {
        let abs = self.root.join(path);
        let mut dirs: Vec<PathBuf> = parent.ancestors().map(Path::to_path_buf).collect();
        dirs.push(PathBuf::from(".git/info/exclude"));
        for dir in dirs {
            let Some(rules) = self.ignore_rules(&dir) else {
                continue;
            };
            match rules.matched(&abs, is_dir) {
                Match::Ignore(_) => return true,
                Match::Whitelist(_) => return false,
                Match::None => {}
            }
        }
        false
    }

    /// The rules of the workspace directory `dir`'s `.gitignore` (or of the exclude file
    /// `.git/info/exclude`), read beneath the open workspace once per line.
    fn ignore_rules(&mut self, dir: &Path) -> Option<&Gitignore> {
        if !self.ignores.contains_key(dir) {
            let (file, base) = if dir == Path::new(".git/info/exclude") {
                (dir.to_path_buf(), self.root.clone())
            } else {
                (dir.join(".gitignore"), self.root.join(dir))
            };
            let rules = self.read_quietly(&file, IGNORE_FILE_LIMIT).map(|bytes| {
                let mut b = GitignoreBuilder::new(&base);
                for line in String::from_utf8_lossy(&bytes).lines() {
                    let _ = b.add_line(None, line);
                }
                b.build().unwrap_or_else(|_| Gitignore::empty())
            });
            self.ignores.insert(dir.to_path_buf(), rules);
        }
        self.ignores.get(dir).and_then(Option::as_ref)
    }
}

#[cfg(test)]
mod tests {
    use crate::shell::{CommandSafety, SafetyClass};

    fn workspace() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let w = |p: &str, text: &[u8]| {
            let path = dir.path().join(p);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).unwrap_or_else(|e| panic!("{e}"));
            }
            std::fs::write(path, text).unwrap_or_else(|e| panic!("{e}"));
        };
        w(".gitignore", b"data/\n*.log\n/big.bin\nbuild/\n!keep.log\n");
        w("README.md", b"readme\n");
        w("data/r.csv", b"a,b\n1,2\n");
        w("data/sub/s.csv", b"x\n");
        w("build.log", b"log\n");
        w("keep.log", b"kept\n");
        w("big.bin", &vec![0u8; 2 * 1024 * 1024]);
        w("src/notes.txt", b"notes\n");
        w("src/.gitignore", b"local.txt\n");
        w("src/local.txt", b"local\n");
        w(".git/info/exclude", b"private/\n");
        w("private/p.txt", b"p\n");
        dir
    }

    fn class(ws: &std::path::Path, cmd: &str) -> SafetyClass {
        CommandSafety::new().classify_in_project(cmd, ws).class
    }

    #[test]
    fn an_overwrite_of_a_file_no_snapshot_holds_is_destructive() {
        // Red-team pass 7, R7-14: each ran unasked under on-request; undo could not restore.
        let ws = workspace();
        let ws = ws.path();
        for cmd in [
            "cp README.md data/r.csv",
            "echo x > data/r.csv",
            "echo x >| data/r.csv",
            "printf 'x\\n' | tee data/r.csv",
            "sort -o data/sub/s.csv README.md",
            "cp README.md big.bin",
            "cd data && echo x > r.csv",
            "echo x > private/p.txt",
            "install README.md data/r.csv",
        ] {
            let a = CommandSafety::new().classify_in_project(cmd, ws);
            assert_eq!(a.class, SafetyClass::Destructive, "{cmd}: {:?}", a.reasons);
            assert!(
                a.reasons.iter().any(|r| r.contains("no snapshot")),
                "{cmd}: {:?}",
                a.reasons
            );
        }
    }

    #[test]
    fn writes_a_snapshot_can_undo_or_that_keep_the_content_stay_writes() {
        let ws = workspace();
        let ws = ws.path();
        for cmd in [
            // Small ignored files outside ignored directories are recorded (R4-9).
            "echo x > build.log",
            "echo x > src/local.txt",
            // Tracked or untracked files are recorded; new files destroy nothing.
            "cp README.md src/notes.txt",
            "echo x > data/new.csv",
            "echo x > keep.log",
            // Appends and metadata keep the content.
            "echo x >> data/r.csv",
            "echo x | tee -a data/r.csv",
            "touch data/r.csv",
            "chmod 600 data/r.csv",
        ] {
            let a = CommandSafety::new().classify_in_project(cmd, ws);
            assert_eq!(
                a.class,
                SafetyClass::WritesWorkspace,
                "{cmd}: {:?}",
                a.reasons
            );
        }
        assert_eq!(class(ws, "cat data/r.csv"), SafetyClass::ReadOnly);
    }
}
