//! A line judged by a project file that an earlier part of the same line may change
//! (red-team pass 7, R7-30).
//!
//! `make test` is judged by the Makefile, `npm test` by package.json, `sh b.sh` by the script,
//! and the runner checks at the spawn that those files are still as judged
//! ([`super::judged`]). But in `cp .e Makefile && make test` the line itself replaces the
//! Makefile after that check and before make reads it: judged by the old text, it runs the
//! new. So every write the analysis sees is logged in the order the line runs, with the path
//! it names when it names one literally (a redirection, `cp`/`mv`/`tee` operands, an output
//! option) and as "anything" otherwise (a test runner, `tar -x`, `git checkout`). A project
//! file a judgement reads (or looks for and does not find) after a write that may be it —
//! the same path, a directory holding it, the same file through a link or a hard link, or a
//! write that names nothing — makes the line `unknown`: it is not judged by what it will run.
//!
//! "After" is the order bash runs things: the writes of earlier simple commands, and the
//! command's own redirections (bash opens them before it starts); inside a loop, or an
//! `xargs`/`find -exec` that runs its command again, every write of the loop comes before
//! every read of it; the parts of a pipeline or of `a & b` run at once, so each part's reads
//! come after the other parts' writes. A write by the judged command's own code (the recipe
//! it was judged by) comes after its read: that is the approved code.

use std::path::PathBuf;

use keel_fs::beneath::FileInfo;
use tree_sitter::Node;

use super::project::Project;
use super::safety::{Analyzer, Stdin};
use super::words::Word;

/// A write the line may do.
#[derive(Debug, Clone)]
enum Written {
    /// Writes files it does not name (or names them in a way not known before it runs).
    Anything,
    /// Writes the workspace path `rel` (and, for a directory, what lies beneath it); `real`
    /// and `id` are where it leads now and what is there, when something is.
    Path {
        rel: PathBuf,
        real: Option<PathBuf>,
        id: Option<FileInfo>,
    },
}

/// Where a path a line writes lies.
pub(crate) enum Target {
    /// In the workspace (relative to its root).
    Rel(PathBuf),
    /// Outside it (judged elsewhere).
    Outside,
    /// Not known before the line runs.
    Unknown,
}

/// A project file a judgement read or looked for.
#[derive(Debug, Clone)]
struct Read {
    /// Where it was found (links followed).
    rel: PathBuf,
    /// As the judgement named it.
    named: PathBuf,
    id: Option<FileInfo>,
}

/// The writes and judged reads of one line, in the order it runs them.
#[derive(Debug, Clone, Default)]
pub(crate) struct LineWrites {
    log: Vec<Written>,
    /// For each simple command being judged (innermost last): how many writes came before it.
    marks: Vec<usize>,
    reads: Vec<Read>,
    /// The files read after a write that may have changed them.
    pub(crate) stale: Vec<PathBuf>,
    /// Existing files the line writes over that no snapshot records, and why
    /// ([`super::unrecorded`]).
    pub(crate) lost: Vec<String>,
    /// The starting points of the `find` whose `-exec` command is being judged (`None`: one
    /// not known before it runs): where its `{}` may lead ([`super::unrecorded::FOUND`]).
    pub(crate) found_roots: Option<Vec<Option<String>>>,
    /// Names an earlier part of the line gives existing content — a link, a rename — and
    /// where that content is when the line is judged (workspace-relative both):
    /// [`super::unrecorded`], R11-1.
    pub(crate) aliases: Vec<(PathBuf, PathBuf)>,
}

impl LineWrites {
    fn may_change(w: &Written, r: &Read) -> bool {
        match w {
            Written::Anything => true,
            Written::Path { rel, real, id } => {
                [&r.rel, &r.named].iter().any(|read| {
                    read.starts_with(rel) || real.as_ref().is_some_and(|p| read.starts_with(p))
                }) || matches!((id, &r.id), (Some(a), Some(b)) if a.same_file(b))
            }
        }
    }

    fn stale_read(&mut self, r: &Read) {
        if !self.stale.contains(&r.rel) {
            self.stale.push(r.rel.clone());
        }
    }

    /// Checks the reads `reads` against the writes `writes` (ranges of the logs).
    fn check(&mut self, reads: std::ops::Range<usize>, writes: std::ops::Range<usize>) {
        let found: Vec<Read> = self.reads[reads]
            .iter()
            .filter(|r| {
                self.log[writes.clone()]
                    .iter()
                    .any(|w| Self::may_change(w, r))
            })
            .cloned()
            .collect();
        for r in &found {
            self.stale_read(r);
        }
    }
}

impl Project {
    /// The line may write files it does not name.
    pub(crate) fn wrote_anything(&mut self) {
        self.line.log.push(Written::Anything);
    }

    /// The line may write `path` (as written, relative to where that part runs); `keeps`:
    /// the write keeps what the file holds (an append, a mode change).
    pub(crate) fn wrote_path(&mut self, path: &str, keeps: bool) {
        if path == super::unrecorded::FOUND {
            return self.wrote_found(keeps);
        }
        self.wrote(path, keeps, false);
    }

    /// Logs a write of `path`; `beneath`: it may overwrite any file below it too (a recursive
    /// copy into it, a `find DIR -exec` writer): [`super::unrecorded`].
    pub(crate) fn wrote(&mut self, path: &str, keeps: bool, beneath: bool) {
        if super::safety::is_sink(path) {
            return;
        }
        let rel = match self.target(path) {
            Target::Rel(rel) => rel,
            Target::Outside => return,
            Target::Unknown => return self.wrote_anything(),
        };
        let (real, id) = match self.resolve_existing(&rel) {
            Some((real, id)) => (Some(real), id),
            None => (None, None),
        };
        if let (false, Some(real), Some(info)) = (keeps, &real, &id) {
            let why = self.unrecorded_at(real, info, beneath);
            if let Some(why) = why.filter(|w| !self.line.lost.contains(w)) {
                self.line.lost.push(why);
            }
        }
        if !keeps {
            self.wrote_through_aliases(&rel, beneath);
        }
        self.line.log.push(Written::Path { rel, real, id });
    }

    /// The line may write what bash expands the unquoted pattern `pattern` to (`> data/f1.cs?`,
    /// `cp a data/f*`): each existing match is written (R11-6); with none, bash keeps the text.
    pub(crate) fn wrote_glob(&mut self, pattern: &str, keeps: bool) {
        if let Some(cwd) = self.cwd.clone() {
            let found = super::glob_targets::expand(&cwd, pattern);
            if !keeps && found.len() > super::glob_targets::MAX_MATCHES {
                self.lost(format!(
                    "the files `{pattern}` matches (more than {} of them)",
                    super::glob_targets::MAX_MATCHES
                ));
            }
            for m in found {
                self.wrote(&m.to_string_lossy(), keeps, false);
            }
        }
        self.wrote_anything();
    }

    /// Notes that the line loses `why` (a write it cannot name under an ignored directory).
    pub(crate) fn lost(&mut self, why: String) {
        if !self.line.lost.contains(&why) {
            self.line.lost.push(why);
        }
    }

    /// Where `path` (as written, relative to where that part runs) lies.
    pub(crate) fn target(&self, path: &str) -> Target {
        let Some(cwd) = self.cwd.clone() else {
            return Target::Unknown;
        };
        let mut abs = keel_fs::lexical_normalize(&cwd.join(path));
        if !abs.starts_with(&self.root) {
            // A temp path may lead back in through a link (`/tmp/l/Makefile`).
            match abs.parent().and_then(|p| p.canonicalize().ok()) {
                Some(parent) if parent.starts_with(&self.root) => {
                    abs = parent.join(abs.file_name().unwrap_or_default());
                }
                Some(_) => return Target::Outside,
                None if abs.starts_with("/tmp") || abs.starts_with("/var/tmp") => {
                    return Target::Outside;
                }
                None => return Target::Unknown,
            }
        }
        Target::Rel(
            abs.strip_prefix(&self.root)
                .map(PathBuf::from)
                .unwrap_or_default(),
        )
    }

    /// The writes the line names inside a dependency tree ([`super::installs`]).
    pub(crate) fn tree_writes(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for w in &self.line.log {
            if let Written::Path { rel, .. } = w
                && let Some(what) = super::installs::tree_write(&self.root, rel)
                && !out.contains(&what)
            {
                out.push(what);
            }
        }
        out
    }

    /// A simple command starts being judged: what it reads is judged after the writes so far.
    pub(crate) fn command_starts(&mut self) {
        self.line.marks.push(self.line.log.len());
    }

    pub(crate) fn command_ends(&mut self) {
        self.line.marks.pop();
    }

    /// A judgement read (or looked for) the workspace file `named`, found at `rel` (links
    /// followed), which is `id` now.
    pub(crate) fn judged_read(&mut self, named: PathBuf, rel: PathBuf, id: Option<FileInfo>) {
        let read = Read { rel, named, id };
        let before = self
            .line
            .marks
            .last()
            .copied()
            .unwrap_or(self.line.log.len());
        if self.line.log[..before]
            .iter()
            .any(|w| LineWrites::may_change(w, &read))
        {
            self.line.stale_read(&read);
        }
        self.line.reads.push(read);
    }

    /// Where the read and write logs stand.
    pub(crate) fn positions(&self) -> (usize, usize) {
        (self.line.reads.len(), self.line.log.len())
    }

    /// Checks the reads since `start` against every write since then: they may run again
    /// after them.
    pub(crate) fn check_since(&mut self, start: (usize, usize)) {
        let (reads, log) = self.positions();
        self.line.check(start.0..reads, start.1..log);
    }
}

impl Analyzer<'_> {
    /// Logs a write that names no path (called for every finding that is not read-only and
    /// not [`Self::flag_writes`]'s).
    pub(crate) fn log_unnamed_write(&mut self) {
        if let Some(p) = self.project.as_mut() {
            p.wrote_anything();
        }
    }

    /// Logs writes to `paths`, each literal one by its path.
    pub(crate) fn log_writes(&mut self, paths: &[Word]) {
        let Some(p) = self.project.as_mut() else {
            return;
        };
        for w in paths {
            match w.value() {
                Some(v) if !w.glob => p.wrote_path(v, self.keeps_content),
                Some(v) => p.wrote_glob(v, self.keeps_content),
                None => p.wrote_anything(),
            }
        }
    }

    /// A finding for a write of `paths` (`cp`'s operands, a redirection's target): logged by
    /// the paths it names.
    pub(crate) fn flag_writes(
        &mut self,
        class: super::SafetyClass,
        reason: String,
        paths: &[Word],
    ) {
        self.log_writes(paths);
        let naming = std::mem::replace(&mut self.naming, true);
        self.flag(class, reason);
        self.naming = naming;
    }

    /// Walks `node`, a pipeline or `a & b`, whose parts run at once: each part's reads are
    /// checked against the other parts' writes too.
    pub(crate) fn walk_parts(&mut self, node: Node, src: &str, stdin: &Stdin) {
        let pipeline = node.kind() == "pipeline";
        let mut ranges = Vec::new();
        let parts = named(node);
        for (i, part) in parts.iter().copied().enumerate() {
            let before = self.project.as_ref().map(Project::positions);
            let s = match i.checked_sub(1).map(|p| parts[p]) {
                // `cat /dev/null | tee f`: nothing comes down the pipe (R7-14).
                Some(prev)
                    if pipeline && super::removals::writes_nothing(&src[prev.byte_range()]) =>
                {
                    Stdin::Text(Some(String::new()))
                }
                Some(_) if pipeline => Stdin::Pipe,
                _ => stdin.clone(),
            };
            self.any(part, src, &s);
            let after = self.project.as_ref().map(Project::positions);
            if let (Some(b), Some(a)) = (before, after) {
                ranges.push((b, a));
            }
        }
        if let Some(p) = self.project.as_mut() {
            for (i, (rb, ra)) in ranges.iter().enumerate() {
                for (j, (wb, wa)) in ranges.iter().enumerate() {
                    if i != j {
                        p.line.check(rb.0..ra.0, wb.1..wa.1);
                    }
                }
            }
        }
    }
}

impl Analyzer<'_> {
    /// Judges one simple command with `judge`: what it reads to be judged comes after the
    /// writes so far; a program that runs its command again runs it after the last run's
    /// writes.
    pub(crate) fn in_order(&mut self, words: &[Word], judge: impl FnOnce(&mut Self)) {
        let repeats = words
            .first()
            .and_then(Word::value)
            .is_some_and(|p| repeats_its_command(super::safety::program_name(p)));
        let start = self.project.as_mut().map(|p| {
            p.command_starts();
            p.positions()
        });
        judge(self);
        if let Some(p) = self.project.as_mut() {
            p.command_ends();
            if let Some(start) = start.filter(|_| repeats) {
                p.check_since(start);
            }
        }
    }

    /// The findings for the project files read after a write that may have changed them,
    /// and for the writes over files no snapshot records ([`super::unrecorded`]).
    pub(crate) fn stale_findings(&self) -> Vec<(super::SafetyClass, String)> {
        let Some(p) = self.project.as_ref() else {
            return Vec::new();
        };
        let stale = p.line.stale.iter().map(|f| {
            (
                super::SafetyClass::Unknown,
                format!(
                    "an earlier part of the line may change `{}`, which a later part is judged by",
                    f.display()
                ),
            )
        });
        let lost = p.line.lost.iter().map(|why| {
            (
                super::SafetyClass::Destructive,
                format!(
                    "writes over {why}: no snapshot holds it, so `keel undo` cannot bring it back"
                ),
            )
        });
        stale.chain(lost).collect()
    }
}

impl Analyzer<'_> {
    /// A file program's write to the workspace (`reason`), logged by its operands when those
    /// are what it writes (`mv`: all of them; `cp`: the last one).
    pub(crate) fn flag_operand_writes(&mut self, program: &str, ops: &[Word], reason: String) {
        let class = super::SafetyClass::WritesWorkspace;
        match program {
            // What they do to an existing file keeps its content.
            "mkdir" | "touch" | "chmod" | "chown" | "chgrp" | "setfacl" | "chattr" | "mkfifo" => {
                let keeps = std::mem::replace(&mut self.keeps_content, true);
                self.flag_writes(class, reason, ops);
                self.keeps_content = keeps;
            }
            "mv" | "sponge" | "dos2unix" | "unix2dos" => {
                self.copies_into(program, ops);
                self.flag_writes(class, reason, ops)
            }
            "cp" | "install" | "ln" | "rsync" if !ops.is_empty() => {
                self.copies_into(program, ops);
                self.flag_writes(class, reason, &ops[ops.len() - 1..])
            }
            _ => self.flag(class, reason),
        }
    }
}

fn named(node: Node) -> Vec<Node> {
    let mut cursor = node.walk();
    node.named_children(&mut cursor).collect()
}

/// The statement kinds whose body may run again after its own writes.
pub(crate) fn is_loop(kind: &str) -> bool {
    matches!(
        kind,
        "for_statement" | "while_statement" | "c_style_for_statement"
    )
}

/// `a & b`: a node with a background operator among its children (its parts run at once).
pub(crate) fn has_background(node: Node) -> bool {
    let mut cursor = node.walk();
    node.children(&mut cursor)
        .any(|c| !c.is_named() && c.kind() == "&")
}

/// Programs that run their command more than once (each run after the last one's writes).
pub(crate) fn repeats_its_command(program: &str) -> bool {
    matches!(program, "xargs" | "find" | "parallel" | "watch")
}

#[cfg(test)]
#[path = "line_writes_tests.rs"]
mod tests;
