//! A workspace's `.gitignore` / `.ignore` files (and `.git/info/exclude`), read as project
//! files. The `ignore` crate's walker opens these itself, by path and without a bound: a FIFO
//! named `.gitignore` hangs it, a link to `/dev/zero` makes it read forever. So every walk in
//! Keel turns that off (`WalkBuilder::git_ignore(false)`, `ignore(false)`,
//! `git_exclude(false)`, see [`configure`]) and asks [`IgnoreRules`] instead, which reads each
//! directory's files once through `keel_fs::project::ProjectDir` — beneath the workspace,
//! regular files only, never blocking, bounded — and applies them as git does: the deepest
//! directory with a matching rule decides.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};

use ignore::gitignore::{Gitignore, GitignoreBuilder};
use ignore::{Match, WalkBuilder};
use keel_fs::project::ProjectDir;

/// Largest ignore file read (bigger ones are left out).
const MAX_IGNORE_FILE: u64 = 1024 * 1024;

/// Rules one workspace's ignore files may add in all (git needs none of these bounds: its
/// wildmatch is cheap per rule; here every rule becomes part of a compiled glob set, and 32
/// files of 1 MB of `**/c*a*j*…*/**` lines made one `grep` call take 356 s and 1.3 GB —
/// red-team pass 5, R5-6). Past the budget, further rules are left out: a file that should be
/// ignored may then be walked, never the other way round for a path git would show.
const MAX_RULES: usize = 20_000;
/// Wildcards (`*`, `?`, `[`) all of a workspace's rules may hold together.
const MAX_WILDCARDS: usize = 40_000;
/// A rule with more wildcards than this, or longer than [`MAX_RULE_LEN`], is left out.
const MAX_RULE_WILDCARDS: usize = 16;
const MAX_RULE_LEN: usize = 1024;

/// Turns off the walker's own reading of ignore files (see the module docs); the caller
/// filters with [`IgnoreRules::ignored`].
pub fn configure(builder: &mut WalkBuilder) -> &mut WalkBuilder {
    builder
        .git_ignore(false)
        .git_exclude(false)
        .git_global(false)
        .ignore(false)
        .parents(false)
}

/// The ignore rules of one workspace, loaded per directory on first use. Cheap to share
/// between walker threads.
#[derive(Debug)]
pub struct IgnoreRules {
    root: PathBuf,
    project: Option<ProjectDir>,
    /// Workspace-relative directory ("" for the root) → its rules (`None`: it has none).
    dirs: RwLock<HashMap<String, Option<Arc<Gitignore>>>>,
    /// What is left of [`MAX_RULES`] and [`MAX_WILDCARDS`].
    rules_left: AtomicUsize,
    wildcards_left: AtomicUsize,
    /// Rules left out by the bounds (for a note).
    left_out: AtomicUsize,
}

impl IgnoreRules {
    /// The rules of the workspace at `root`.
    pub fn new(root: &Path) -> Self {
        Self {
            root: root.to_path_buf(),
            project: ProjectDir::open(root).ok(),
            dirs: RwLock::new(HashMap::new()),
            rules_left: AtomicUsize::new(MAX_RULES),
            wildcards_left: AtomicUsize::new(MAX_WILDCARDS),
            left_out: AtomicUsize::new(0),
        }
    }

    /// How many rules the bounds left out so far (too long, too many wildcards, or past the
    /// workspace's budget).
    pub fn rules_left_out(&self) -> usize {
        self.left_out.load(Ordering::Relaxed)
    }

    /// Takes one rule from the budget: false (and counted as left out) when it is too costly
    /// or the budget is spent.
    fn admit(&self, line: &str) -> bool {
        let rule = line.trim();
        if rule.is_empty() || rule.starts_with('#') {
            return true;
        }
        let wild = rule
            .bytes()
            .filter(|b| matches!(b, b'*' | b'?' | b'['))
            .count();
        let take = |left: &AtomicUsize, n: usize| {
            left.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |l| l.checked_sub(n))
                .is_ok()
        };
        let ok = rule.len() <= MAX_RULE_LEN
            && wild <= MAX_RULE_WILDCARDS
            && take(&self.rules_left, 1)
            && take(&self.wildcards_left, wild);
        if !ok {
            self.left_out.fetch_add(1, Ordering::Relaxed);
        }
        ok
    }

    /// Whether `rel` (workspace-relative, `/`-separated) is ignored by the rules of the
    /// directories above it, its parent directories being already admitted (a walk that
    /// skips ignored directories): the deepest directory with a matching rule decides.
    pub fn ignored(&self, rel: &str, is_dir: bool) -> bool {
        let parts: Vec<&str> = rel.split('/').filter(|p| !p.is_empty()).collect();
        let abs = self.root.join(rel);
        for j in (0..parts.len()).rev() {
            let dir = parts[..j].join("/");
            if let Some(rules) = self.rules(&dir) {
                match rules.matched(&abs, is_dir) {
                    Match::None => continue,
                    Match::Ignore(_) => return true,
                    Match::Whitelist(_) => return false,
                }
            }
        }
        false
    }

    /// Whether `rel` or any directory above it is ignored (for a single path, with no walk
    /// having filtered its parents).
    pub fn ignored_or_parent(&self, rel: &str, is_dir: bool) -> bool {
        let parts: Vec<&str> = rel.split('/').filter(|p| !p.is_empty()).collect();
        (0..parts.len())
            .any(|i| self.ignored(&parts[..=i].join("/"), i + 1 < parts.len() || is_dir))
    }

    /// The rules of the directory `dir` (workspace-relative), loading them on first use.
    fn rules(&self, dir: &str) -> Option<Arc<Gitignore>> {
        if let Ok(dirs) = self.dirs.read()
            && let Some(found) = dirs.get(dir)
        {
            return found.clone();
        }
        let loaded = self.load(dir).map(Arc::new);
        if let Ok(mut dirs) = self.dirs.write() {
            dirs.insert(dir.to_string(), loaded.clone());
        }
        loaded
    }

    fn load(&self, dir: &str) -> Option<Gitignore> {
        let project = self.project.as_ref()?;
        let base = if dir.is_empty() {
            self.root.clone()
        } else {
            self.root.join(dir)
        };
        let mut files = vec![".gitignore", ".ignore"];
        if dir.is_empty() {
            files.insert(0, ".git/info/exclude");
        }
        let mut builder = GitignoreBuilder::new(&base);
        let mut any = false;
        for file in files {
            let rel = keel_fs::project::join_rel(dir, file);
            // Not there, or one that must not be read (a FIFO, a link out, too large): no
            // rules from it.
            let Ok(Some(text)) = project.read(&rel, MAX_IGNORE_FILE) else {
                continue;
            };
            any = true;
            let from = Some(base.join(file));
            for line in text.lines() {
                if self.admit(line) {
                    let _ = builder.add_line(from.clone(), line);
                }
            }
        }
        if !any {
            return None;
        }
        builder.build().ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_deepest_rule_decides_and_hostile_files_are_skipped() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let w = |rel: &str, text: &str| {
            let p = dir.path().join(rel);
            std::fs::create_dir_all(p.parent().unwrap_or(dir.path()))
                .unwrap_or_else(|e| panic!("{e}"));
            std::fs::write(p, text).unwrap_or_else(|e| panic!("{e}"));
        };
        w(".gitignore", "*.log\nbuild/\n");
        w("src/.gitignore", "!keep.log\n");
        std::fs::create_dir_all(dir.path().join("web")).unwrap_or_else(|e| panic!("{e}"));
        rustix::fs::mknodat(
            rustix::fs::CWD,
            dir.path().join("web/.gitignore").as_path(),
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        std::os::unix::fs::symlink("/dev/zero", dir.path().join("web/.ignore"))
            .unwrap_or_else(|e| panic!("{e}"));
        let rules = IgnoreRules::new(dir.path());
        let started = std::time::Instant::now();
        assert!(rules.ignored("a.log", false));
        assert!(rules.ignored("build", true));
        assert!(!rules.ignored("build", false));
        assert!(!rules.ignored("src/keep.log", false));
        assert!(rules.ignored("src/other.log", false));
        assert!(
            rules.ignored("web/x.log", false),
            "the root's rules still apply"
        );
        assert!(!rules.ignored("web/x.ts", false));
        assert!(rules.ignored_or_parent("build/out/a.o", false));
        assert!(started.elapsed() < std::time::Duration::from_secs(2));
    }

    /// R5-6: ignore files full of costly glob rules (40 wildcards a line, 1 MB a file, one in
    /// each of 32 directories) cost a walk minutes and over a gigabyte; the budget keeps a walk
    /// of such a tree to a moment, and ordinary rules still apply.
    #[test]
    fn costly_ignore_files_are_bounded() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let letters: Vec<String> = (0..40)
            .map(|i| ((b'a' + (i % 26) as u8) as char).to_string())
            .collect();
        let costly = format!("**/{}/**\n", letters.join("*"));
        let mut text = String::from("*.log\n");
        while text.len() + costly.len() < 1024 * 1024 - 4096 {
            text.push_str(&costly);
        }
        // Many cheap rules with a few wildcards each, past the budget too.
        let mut cheap = String::new();
        for i in 0..2000 {
            cheap.push_str(&format!("gen{i}/*.t?p\n"));
        }
        let mut paths = Vec::new();
        for d in 0..32 {
            let sub = dir.path().join(format!("d{d}"));
            std::fs::create_dir_all(&sub).unwrap_or_else(|e| panic!("{e}"));
            std::fs::write(
                sub.join(".gitignore"),
                if d % 2 == 0 { &text } else { &cheap },
            )
            .unwrap_or_else(|e| panic!("{e}"));
            for f in 0..60 {
                paths.push(format!("d{d}/f{f}.py"));
            }
        }
        std::fs::write(dir.path().join(".gitignore"), "*.log\n").unwrap_or_else(|e| panic!("{e}"));
        let started = std::time::Instant::now();
        let rules = IgnoreRules::new(dir.path());
        let ignored = paths.iter().filter(|p| rules.ignored(p, false)).count();
        let took = started.elapsed();
        assert_eq!(ignored, 0, "no .py file matches any rule");
        assert!(
            rules.ignored("d3/x.log", false),
            "the root's rules still apply"
        );
        assert!(
            rules.ignored("d1/gen7/a.tmp", false),
            "cheap rules within budget apply"
        );
        assert!(rules.rules_left_out() > 0);
        assert!(
            took < std::time::Duration::from_secs(20),
            "matching 1,920 paths under 32 costly ignore files took {took:?}"
        );
    }
}
