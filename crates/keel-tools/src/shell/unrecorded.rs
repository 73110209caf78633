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
//! Writers that reach files they do not name count the same (red-team pass 8, R7-14's rest):
//! `sed -i` on its operands, a copy into a directory (`cp -r src data` writes `data/src/…`:
//! every file below it is checked), a `find DIR -exec cp … {}` writer (every file below each
//! starting point), `patch` and `git apply` (the files the patch names, read from it; a
//! patch Keel cannot read may write anything). A writer whose targets cannot be named —
//! the `find` starts somewhere not known, more files below than Keel looks at — is taken to
//! reach an unrecorded file when one might be there.
//!
//! "Ignored" is the repository's own rules as Keel's snapshot git reads them: `.gitignore`
//! files from the workspace root down and `.git/info/exclude` (the snapshot's git reads no
//! global configuration, so no `core.excludesFile`). A force-added tracked file under an
//! ignored pattern is counted as not recorded: asked about, never lost.

use std::path::{Path, PathBuf};

use ignore::Match;
use ignore::gitignore::{Gitignore, GitignoreBuilder};

use super::line_writes::Target;
use super::options::positionals;
use super::project::Project;
use super::safety::Stdin;
use super::words::Word;

use crate::recorded::IGNORED_MAX_BYTES;
/// The longest ignore file read.
const IGNORE_FILE_LIMIT: u64 = 256 * 1024;
/// The most entries looked at below a directory a writer reaches as a whole.
const MAX_BENEATH: usize = 20_000;
/// The longest patch read for the files it names.
const PATCH_LIMIT: u64 = 4 * 1024 * 1024;
/// The most files taken from one patch.
const MAX_PATCH_FILES: usize = 256;

/// What `find -exec`'s `{}` stands for while its command is judged: a file below one of the
/// starting points ([`super::line_writes::LineWrites::found_roots`]).
pub(crate) const FOUND: &str = "./\u{1}found-by-find";

/// Why the file tools do not replace or edit the existing workspace file `rel`: no snapshot
/// records it, so `keel undo` could not bring it back (red-team pass 10, R10-21: `create_file`
/// overwrote the user's ignored `data/r.csv` unasked, where `echo x > data/r.csv` is asked).
/// `None`: it may be written (new, or recorded).
pub(crate) fn refused_for_file_tools(ws: &crate::Workspace, rel: &Path) -> Option<String> {
    let root = ws.root();
    let meta = std::fs::symlink_metadata(root.join(rel)).ok()?;
    if !meta.is_file() {
        return None;
    }
    Project::new(root, root, false)
        .recording(ws.snapshot_max_file_mb())
        .unrecorded(rel, meta.len())
}

impl Project {
    /// Why no snapshot records the workspace file `rel` (a regular file of `len` bytes), or
    /// `None` when one does: the snapshots' own rule ([`crate::recorded`]) — over the size
    /// bound whatever git thinks of it (R10-20), a name git refuses, in an ignored directory,
    /// or ignored and over [`IGNORED_MAX_BYTES`].
    pub(crate) fn unrecorded(&mut self, rel: &Path, len: u64) -> Option<String> {
        if let Some(bound) = self.max_file_bytes
            && len > bound
        {
            return Some(format!(
                "`{}`, larger than the {} MiB snapshots record (`[snapshots] max_file_mb`)",
                rel.display(),
                bound / (1024 * 1024)
            ));
        }
        if crate::recorded::git_refuses(rel.as_os_str().as_encoded_bytes(), false) {
            return Some(format!("`{}`, a name git does not record", rel.display()));
        }
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

    /// Why what is at `real` (found as `info`) holds content no snapshot records: the file,
    /// or (`beneath`: a writer that reaches into a directory) any file below the directory.
    pub(crate) fn unrecorded_at(
        &mut self,
        real: &Path,
        info: &keel_fs::beneath::FileInfo,
        beneath: bool,
    ) -> Option<String> {
        match info.kind {
            keel_fs::beneath::FileKind::File => self.unrecorded(real, info.len),
            keel_fs::beneath::FileKind::Dir if beneath => self.unrecorded_beneath(real),
            _ => None,
        }
    }

    /// Notes that an earlier part of the line names existing content `source` (as written)
    /// `name` (as written): a link or a rename. Each is kept as where it leads when the line
    /// is judged, through the names noted before it (`ln -s data/r.csv a && ln -s a b`).
    pub(crate) fn alias(&mut self, name: &str, source: &str) {
        let (Target::Rel(name), Target::Rel(source)) = (self.target(name), self.target(source))
        else {
            return;
        };
        let source = self.through_aliases(&source).unwrap_or(source);
        if name != source && !self.line.aliases.contains(&(name.clone(), source.clone())) {
            self.line.aliases.push((name, source));
        }
    }

    /// Where the workspace path `rel` leads through a name the line gave existing content, if
    /// it lies below one (the latest first).
    fn through_aliases(&self, rel: &Path) -> Option<PathBuf> {
        self.line.aliases.iter().rev().find_map(|(name, source)| {
            let rest = rel.strip_prefix(name).ok()?;
            Some(if rest.as_os_str().is_empty() {
                source.clone()
            } else {
                source.join(rest)
            })
        })
    }

    /// A write of the workspace path `rel` through a name an earlier part of the line gave
    /// content no snapshot records (red-team pass 11, R11-1: `ln data/r.csv notes.csv && echo
    /// x > notes.csv` truncated the ignored `data/r.csv`; `notes.csv` did not exist when the
    /// line was judged).
    pub(crate) fn wrote_through_aliases(&mut self, rel: &Path, beneath: bool) {
        let Some(through) = self.through_aliases(rel) else {
            return;
        };
        let Some((real, Some(info))) = self.resolve_existing(&through) else {
            return;
        };
        if let Some(why) = self.unrecorded_at(&real, &info, beneath) {
            self.lost(format!(
                "{why}, reached through `{}`, which the line makes lead there",
                rel.display()
            ));
        }
    }

    /// Why some file below the workspace directory `rel` is one no snapshot records (the
    /// first met), or `None` when none is; looked at without following links, at most
    /// [`MAX_BENEATH`] entries (past that: "not known", which counts as lost).
    pub(crate) fn unrecorded_beneath(&mut self, rel: &Path) -> Option<String> {
        let mut stack = vec![rel.to_path_buf()];
        let mut seen = 0usize;
        while let Some(dir) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(self.root.join(&dir)) else {
                continue;
            };
            for e in entries.flatten() {
                seen += 1;
                if seen > MAX_BENEATH {
                    return Some(format!(
                        "the files below `{}/` (more than {MAX_BENEATH}: Keel did not look at them all, and ignored ones may be among them)",
                        rel.display()
                    ));
                }
                let name = e.file_name();
                if name == ".git" || name == ".keel" {
                    continue;
                }
                let Ok(kind) = e.file_type() else { continue };
                let child = dir.join(&name);
                if kind.is_dir() {
                    stack.push(child);
                } else if kind.is_file() {
                    let len = e.metadata().map_or(0, |m| m.len());
                    if let Some(why) = self.unrecorded(&child, len) {
                        return Some(format!("{why} (reached through `{}/`)", rel.display()));
                    }
                }
            }
        }
        None
    }

    /// `find -exec`'s `{}` written ([`FOUND`]): every file below each starting point.
    pub(crate) fn wrote_found(&mut self, keeps: bool) {
        let roots = self.line.found_roots.clone().unwrap_or_default();
        if keeps {
            return self.wrote_anything();
        }
        for root in roots {
            match root {
                Some(r) => self.wrote(&r, false, true),
                None => {
                    self.lost(
                        "the files a `find` starting somewhere not known before it runs finds"
                            .into(),
                    );
                    self.wrote_anything();
                }
            }
        }
    }

    /// Whether `path` (as written) is an existing directory of the workspace.
    fn is_dir(&self, path: &str) -> bool {
        match self.target(path) {
            super::line_writes::Target::Rel(rel) => self
                .resolve_existing(&rel)
                .and_then(|(_, info)| info)
                .is_some_and(|i| i.kind == keel_fs::beneath::FileKind::Dir),
            _ => false,
        }
    }

    /// Reads the patch `path` (as written; in the workspace or the user's own file).
    fn read_patch(&self, path: &str) -> Option<String> {
        match self.target(path) {
            super::line_writes::Target::Rel(rel) => self
                .read_quietly(&rel, PATCH_LIMIT)
                .map(|b| String::from_utf8_lossy(&b).into_owned()),
            super::line_writes::Target::Outside => {
                let abs = self.cwd.as_ref()?.join(path);
                keel_fs::project::read_user_file(&abs, PATCH_LIMIT)
                    .ok()
                    .flatten()
            }
            super::line_writes::Target::Unknown => None,
        }
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

impl super::safety::Analyzer<'_> {
    /// The names `ln`, `cp -l`/`cp -s` and `mv` (`program args`, operands `ops`, the last
    /// one where they go) give existing content: a later write of the line through one
    /// reaches that content ([`Project::alias`], R11-1). A copy is content of its own.
    pub(crate) fn names_content(&mut self, program: &str, args: &[Word], ops: &[Word]) {
        let has = |short: char, long: &str| {
            args.iter().filter_map(Word::value).any(|v| {
                v == long || (v.starts_with('-') && !v.starts_with("--") && v[1..].contains(short))
            })
        };
        let symbolic = match program {
            "ln" => has('s', "--symbolic"),
            "cp" if has('l', "--link") => false,
            "cp" if has('s', "--symbolic-link") => true,
            "mv" => false,
            _ => return,
        };
        let Some(p) = self.project.as_mut() else {
            return;
        };
        let Some((last, rest)) = ops.split_last() else {
            return;
        };
        // `ln SRC`: the link is made where the command runs, under the source's name.
        let (dest, sources) = if rest.is_empty() && program == "ln" {
            (Some("."), ops)
        } else {
            (last.value(), rest)
        };
        let Some(dest) = dest else {
            // Where the new names go is not known: a write may reach any of the sources.
            for src in sources.iter().filter_map(Word::value) {
                p.lost(format!(
                    "`{src}`, which the line links or moves to a name not known before it runs"
                ))
            }
            return;
        };
        let into = sources.len() > 1 || p.is_dir(dest) || dest == ".";
        for src in sources.iter().filter_map(Word::value) {
            let base = Path::new(src.trim_end_matches('/')).file_name();
            let name = match (into, base) {
                (true, Some(b)) => {
                    format!("{}/{}", dest.trim_end_matches('/'), b.to_string_lossy())
                }
                (true, None) => continue,
                (false, _) => dest.to_string(),
            };
            p.alias(&name, src);
            // A symbolic link's text is read from the link's own directory.
            if symbolic && !src.starts_with('/') {
                let dir = Path::new(&name).parent().unwrap_or(Path::new(""));
                p.alias(&name, &dir.join(src).to_string_lossy());
            }
        }
    }

    /// A copy or move of `ops` (the last one the destination) into an existing directory
    /// writes `DEST/<name of each source>`, and a recursive copy everything below it
    /// (`cp -r src data` over an ignored `data/src/app.py`): those are checked too.
    pub(crate) fn copies_into(&mut self, program: &str, ops: &[Word]) {
        let Some(p) = self.project.as_mut() else {
            return;
        };
        let Some((dest, sources)) = ops.split_last() else {
            return;
        };
        let Some(dest) = dest.value().filter(|d| p.is_dir(d)) else {
            return;
        };
        for src in sources {
            let Some(v) = src.value() else { continue };
            // `rsync src/ dst`: the source's contents go into the destination itself.
            let into = if program == "rsync" && v.ends_with('/') {
                dest.to_string()
            } else {
                let name = Path::new(v.trim_end_matches('/'))
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned());
                let Some(name) = name else { continue };
                format!("{}/{name}", dest.trim_end_matches('/'))
            };
            p.wrote(&into, false, true);
        }
    }

    /// The files `patch` or `git apply` (`program args`, input `stdin`) changes, from the
    /// patch when it can be read: each existing one is a write over it. A patch that cannot
    /// be read may name any file.
    pub(crate) fn patch_writes(&mut self, program: &str, args: &[Word], stdin: &Stdin) {
        if self.project.is_none() {
            return;
        }
        let values = |w: &Word| w.value().map(str::to_string);
        let words: Vec<Option<String>> = args.iter().map(values).collect();
        let has = |names: &[&str]| words.iter().flatten().any(|w| names.contains(&w.as_str()));
        if has(&[
            "--check",
            "--stat",
            "--numstat",
            "--summary",
            "--dry-run",
            "--help",
            "--cached",
        ]) {
            return;
        }
        let (args, git) = if program == "git" {
            match words.iter().position(|w| w.as_deref() == Some("apply")) {
                Some(i) => (&args[i + 1..], true),
                None => return,
            }
        } else if program == "patch" {
            (args, false)
        } else {
            return;
        };
        let with_value: &[&str] = if git {
            &["-C", "--exclude", "--include", "--directory", "-p"]
        } else {
            &[
                "-i",
                "--input",
                "-o",
                "--output",
                "-p",
                "--strip",
                "-d",
                "--directory",
                "-D",
                "--ifdef",
                "-r",
                "--reject-file",
                "-B",
                "--prefix",
                "-Y",
                "--basename-prefix",
                "-z",
                "--suffix",
                "-F",
                "--fuzz",
                "-V",
                "--version-control",
                "-g",
                "--get",
            ]
        };
        let ops = positionals(args, with_value);
        let option = |short: &str, long: &str| -> Option<Option<String>> {
            for (i, w) in args.iter().enumerate() {
                let Some(v) = w.value() else { continue };
                if v == short || v == long {
                    return Some(args.get(i + 1).and_then(Word::value).map(str::to_string));
                }
                if let Some(rest) = v.strip_prefix(&format!("{long}=")) {
                    return Some(Some(rest.to_string()));
                }
                if !short.is_empty()
                    && v.len() > short.len()
                    && v.starts_with(short)
                    && !v.starts_with("--")
                {
                    return Some(Some(v[short.len()..].to_string()));
                }
            }
            None
        };
        if !git && option("-o", "--output").is_some() {
            // The output file is written instead (judged as a write target elsewhere).
            return;
        }
        let strip: Option<usize> = match option("-p", if git { "" } else { "--strip" }) {
            Some(Some(n)) => n.parse().ok(),
            Some(None) => None,
            None => git.then_some(1),
        };
        let dir = option(if git { "" } else { "-d" }, "--directory").flatten();
        let mut patches: Vec<PatchFrom> = Vec::new();
        if !git && let Some(first) = ops.first() {
            // `patch FILE [PATCH]`: FILE is what it changes.
            let keeps = std::mem::replace(&mut self.keeps_content, false);
            self.log_writes(std::slice::from_ref(*first));
            self.keeps_content = keeps;
            return;
        }
        if git {
            patches.extend(ops.iter().map(|w| PatchFrom::file(w.value())));
        } else if let Some(i) = option("-i", "--input") {
            patches.push(PatchFrom::file(i.as_deref()));
        }
        if patches.is_empty() {
            patches.push(match stdin {
                Stdin::File(f) => PatchFrom::file(f.as_deref()),
                Stdin::Text(Some(t)) => PatchFrom::Text(t.clone()),
                _ => PatchFrom::Unknown,
            });
        }
        let Some(p) = self.project.as_mut() else {
            return;
        };
        for patch in patches {
            let text = match &patch {
                PatchFrom::Text(t) => Some(t.clone()),
                PatchFrom::Path(path) => p.read_patch(path),
                PatchFrom::Unknown => None,
            };
            let Some(text) = text else {
                p.lost(format!(
                    "the files the patch {} names (Keel could not read it)",
                    match &patch {
                        PatchFrom::Path(f) => format!("`{f}`"),
                        _ => "on its input".to_string(),
                    }
                ));
                p.wrote_anything();
                continue;
            };
            for name in patched_files(&text) {
                let parts: Vec<&str> = name.split('/').filter(|c| !c.is_empty()).collect();
                let mut candidates: Vec<String> = match strip {
                    Some(n) => vec![parts.get(n..).unwrap_or(&[]).join("/")],
                    // GNU patch without `-p`: the name as given, or its last component.
                    None => vec![
                        parts.join("/"),
                        parts.get(1..).unwrap_or(&[]).join("/"),
                        parts.last().map_or(String::new(), |l| l.to_string()),
                    ],
                };
                candidates.retain(|c| !c.is_empty());
                candidates.dedup();
                for c in candidates {
                    let c = match &dir {
                        Some(d) => format!("{}/{c}", d.trim_end_matches('/')),
                        None => c,
                    };
                    p.wrote(&c, false, false);
                }
            }
        }
    }
}

/// Where a patch comes from.
enum PatchFrom {
    /// A file (as written).
    Path(String),
    /// A here-document or here-string.
    Text(String),
    /// Not known before the line runs.
    Unknown,
}

impl PatchFrom {
    fn file(path: Option<&str>) -> Self {
        path.map_or(Self::Unknown, |p| Self::Path(p.to_string()))
    }
}

/// The file names a unified or git patch names (`--- a/x`, `+++ b/x`, `diff --git a/x b/x`),
/// at most [`MAX_PATCH_FILES`].
fn patched_files(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in text.lines() {
        let names: Vec<&str> = if let Some(rest) = line.strip_prefix("diff --git ") {
            rest.split_whitespace().collect()
        } else if let Some(rest) = line
            .strip_prefix("--- ")
            .or_else(|| line.strip_prefix("+++ "))
            .or_else(|| line.strip_prefix("*** "))
        {
            rest.split('\t').next().into_iter().map(str::trim).collect()
        } else {
            continue;
        };
        for n in names {
            let n = n.trim_matches('"');
            if n != "/dev/null" && !n.is_empty() && !out.iter().any(|o| o == n) {
                out.push(n.to_string());
            }
        }
        if out.len() >= MAX_PATCH_FILES {
            break;
        }
    }
    out
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

    /// Red-team pass 8/9, R7-14's rest: writers that reach an unrecorded file without naming
    /// it as their last operand ran unasked and overwrote the only copy.
    #[test]
    fn every_writer_that_reaches_an_unrecorded_file_is_asked_about() {
        let ws = workspace();
        let ws = ws.path();
        let w = |p: &str, text: &str| {
            let path = ws.join(p);
            std::fs::create_dir_all(path.parent().unwrap_or(ws)).unwrap_or_else(|e| panic!("{e}"));
            std::fs::write(path, text).unwrap_or_else(|e| panic!("{e}"));
        };
        w("src/app.py", "print(1)\n");
        w("data/src/app.py", "model\n");
        w("data/README.md", "old\n");
        w(
            "p.diff",
            "--- a/data/r.csv\n+++ b/data/r.csv\n@@ -1,2 +1,2 @@\n-a,b\n+x,y\n 1,2\n",
        );
        w(
            "q.diff",
            "diff --git a/src/notes.txt b/src/notes.txt\n--- a/src/notes.txt\n+++ b/src/notes.txt\n@@ -1 +1 @@\n-notes\n+n\n",
        );
        let mut wrong = Vec::new();
        for cmd in [
            "sed -i 's/.*/x/' data/r.csv",
            "sed -i -e s/a/b/ data/r.csv",
            "sed --in-place=.bak -e s/a/b/ src/notes.txt data/sub/s.csv",
            "cp -r src data",
            "cp README.md data",
            "rsync -a src/ data/src",
            "find data -type f -exec cp README.md {} \\;",
            "find . -name '*.csv' -exec sed -i s/a/b/ {} +",
            "find $D -type f -exec cp README.md {} \\;",
            "patch data/r.csv < p.diff",
            "patch -p1 < p.diff",
            "patch -p1 -i p.diff",
            "git apply --unsafe-paths p.diff",
            "git apply p.diff",
            "git apply < /nonexistent/x.diff",
        ] {
            let a = CommandSafety::new().classify_in_project(cmd, ws);
            if a.class != SafetyClass::Destructive
                || !a.reasons.iter().any(|r| r.contains("no snapshot"))
            {
                wrong.push(format!("{cmd}: {:?} {:?}", a.class, a.reasons));
            }
        }
        assert!(wrong.is_empty(), "not asked:\n{}", wrong.join("\n"));
        // Writers that reach only recorded files stay writes.
        for cmd in [
            "sed -i s/a/b/ src/notes.txt",
            "cp -r src lib",
            "find src -type f -exec sed -i s/a/b/ {} +",
            "find data -type f -exec chmod 600 {} +",
            "git apply q.diff",
            "patch -p1 < q.diff",
            "git apply --check p.diff",
        ] {
            let a = CommandSafety::new().classify_in_project(cmd, ws);
            assert_ne!(a.class, SafetyClass::Destructive, "{cmd}: {:?}", a.reasons);
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

    /// Red-team pass 11, R11-1: a name the line itself makes lead to unrecorded content —
    /// a hard or symbolic link, a rename — and then writes through: at judge time the name
    /// did not exist, so `ln data/r.csv notes.csv && echo x > notes.csv` ran unasked and the
    /// ignored `data/r.csv` was gone (undo removed `notes.csv` only).
    #[test]
    fn a_write_through_a_name_the_line_gives_unrecorded_content_is_asked_about() {
        let ws = workspace();
        let ws = ws.path();
        let mut wrong = Vec::new();
        for cmd in [
            "ln data/r.csv notes.csv && echo x > notes.csv",
            "ln -s data/r.csv o2.csv && echo y > o2.csv",
            "ln -sf ../data/r.csv src/l.csv && echo y > src/l.csv",
            "cd src && ln -s ../data/r.csv l && echo x > l",
            "ln -s data d2 && sed -i s/a/b/ d2/r.csv",
            "cp -al data d2 && echo x > d2/r.csv",
            "ln -s data/r.csv a && ln -s a b && echo x > b",
            "ln data/r.csv && echo x > r.csv",
            "mv data d2 && echo x > d2/r.csv",
            "ln -t src data/r.csv && cp README.md src/r.csv",
        ] {
            let a = CommandSafety::new().classify_in_project(cmd, ws);
            if a.class != SafetyClass::Destructive
                || !a.reasons.iter().any(|r| r.contains("no snapshot"))
            {
                wrong.push(format!("{cmd}: {:?} {:?}", a.class, a.reasons));
            }
        }
        assert!(wrong.is_empty(), "not asked:\n{}", wrong.join("\n"));
        // A copy is content of its own; a link to a recorded file, an append, a link alone.
        for cmd in [
            "cp data/r.csv notes.csv && echo x > notes.csv",
            "ln -s README.md r && echo x > r",
            "ln data/r.csv notes.csv && echo x >> notes.csv",
            "ln -s data/r.csv o2.csv",
        ] {
            let a = CommandSafety::new().classify_in_project(cmd, ws);
            assert_eq!(
                a.class,
                SafetyClass::WritesWorkspace,
                "{cmd}: {:?}",
                a.reasons
            );
        }
    }
}
