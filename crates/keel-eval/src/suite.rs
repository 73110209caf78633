//! The eval suite file (TOML): tasks, each with where its repository comes from, what the
//! agent is asked, and the command that decides success.
//!
//! ```toml
//! name = "demo"            # optional; default: the file name without extension
//! timeout_secs = 600       # optional defaults for every task
//! max_steps = 30
//! check_timeout_secs = 120
//!
//! [[task]]
//! id = "add-test"
//! repo = "fixtures/lib"    # a directory beneath the suite's, copied into a fresh workspace per task
//! task = "Add a test for add()"
//! check = "test -f tests/add.rs"
//! script = "scripts/add-test.yaml"   # optional: the scripted provider's script
//!
//! [[task]]
//! id = "from-git"
//! git = "https://example.com/r.git"  # or a local (bare) repository beneath the suite's directory
//! commit = "3f2a…"                   # the full hash, checked out detached
//! task = "…"
//! check = "…"
//! ```
//!
//! Relative paths (`repo`, `git` when it is a local path, `script`) are relative to the suite
//! file's directory and must stay beneath it (no absolute path, no `..`, no symlink out: a
//! suite copies only its own fixtures and clones only its own local repositories, never
//! `~/.ssh` or `~/.password-store`). A local path is whatever git would take for one (a `/`
//! before the first `:`, or no `:`); `file://` URLs are refused.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// Default wall-clock limit of one task's agent run.
pub const DEFAULT_TIMEOUT_SECS: u64 = 600;
/// Default wall-clock limit of one check command.
pub const DEFAULT_CHECK_TIMEOUT_SECS: u64 = 120;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SuiteFile {
    name: Option<String>,
    timeout_secs: Option<u64>,
    max_steps: Option<u32>,
    check_timeout_secs: Option<u64>,
    #[serde(default)]
    task: Vec<TaskFile>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TaskFile {
    id: String,
    repo: Option<String>,
    git: Option<String>,
    commit: Option<String>,
    task: String,
    check: String,
    script: Option<String>,
    timeout_secs: Option<u64>,
    max_steps: Option<u32>,
    check_timeout_secs: Option<u64>,
}

/// Where a task's workspace comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A directory copied into the fresh workspace: `rel` beneath the suite file's directory
    /// `base` (an eval suite copies only its own fixtures).
    Dir { base: PathBuf, rel: String },
    /// A remote git repository (a URL or `host:path`) cloned with Keel's hardened git,
    /// `commit` checked out.
    Git { url: String, commit: String },
    /// A local git repository `rel` beneath the suite file's directory `base` (copied beneath
    /// open handles, then cloned from the copy), `commit` checked out.
    LocalGit {
        base: PathBuf,
        rel: String,
        commit: String,
    },
}

/// One task of a suite, paths resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvalTask {
    pub id: String,
    pub source: Source,
    pub task: String,
    pub check: String,
    /// The scripted provider's script for this task.
    pub script: Option<PathBuf>,
    pub timeout_secs: u64,
    pub max_steps: Option<u32>,
    pub check_timeout_secs: u64,
}

/// A parsed, validated suite.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Suite {
    pub name: String,
    /// The file it was read from.
    pub path: PathBuf,
    pub tasks: Vec<EvalTask>,
}

/// Whether `id` is usable as a task id (it names the task's workspace directory).
/// Whether `rel` names something beneath the suite's directory: relative, not empty, no `..`.
fn beneath(rel: &str) -> bool {
    let path = Path::new(rel);
    !rel.trim().is_empty()
        && !path.is_absolute()
        && path.components().all(|c| {
            matches!(
                c,
                std::path::Component::Normal(_) | std::path::Component::CurDir
            )
        })
}

fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 64
        && !id.starts_with('.')
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// Whether git takes `url` for a remote, as git decides it: `scheme://…` (a scheme of
/// letters, digits, `+`, `-`, `.`), or scp-like `host:path` (a `:` with no `/` before it).
/// Anything else — `a/b:c`, `x/y://z` — is a local path to git, whatever it looks like.
fn is_remote(url: &str) -> bool {
    if let Some((scheme, _)) = url.split_once("://")
        && !scheme.is_empty()
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
    {
        return true;
    }
    url.split_once(':')
        .is_some_and(|(host, _)| !host.contains('/'))
}

/// Whether `commit` is a full object name (SHA-1 or SHA-256): a suite pins what it tests,
/// and a ref (`HEAD`, a branch) would follow whatever the repository holds today.
fn full_hash(commit: &str) -> bool {
    matches!(commit.len(), 40 | 64) && commit.chars().all(|c| c.is_ascii_hexdigit())
}

impl Suite {
    /// Reads and validates the suite at `path`.
    pub fn load(path: &Path) -> Result<Self, String> {
        let text = match keel_tools::project::read_user_file(
            path,
            keel_tools::project::DEFINITION_LIMIT,
        ) {
            Ok(Some(text)) => text,
            Ok(None) => {
                return Err(format!(
                    "cannot read the eval suite {}: it does not exist",
                    path.display()
                ));
            }
            Err(e) => {
                return Err(format!(
                    "cannot read the eval suite {}: it {}",
                    path.display(),
                    e.problem
                ));
            }
        };
        // Relative paths in the suite resolve against its directory wherever tasks run.
        let path = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
        Self::parse(&text, &path)
    }

    /// Parses suite `text` read from `path` (relative paths resolve against its directory).
    pub fn parse(text: &str, path: &Path) -> Result<Self, String> {
        let file: SuiteFile =
            toml::from_str(text).map_err(|e| format!("{}: {e}", path.display()))?;
        let base = path
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."));
        let resolve = |p: &str| {
            let p = Path::new(p);
            if p.is_absolute() {
                p.to_path_buf()
            } else {
                base.join(p)
            }
        };
        let name = file.name.clone().unwrap_or_else(|| {
            path.file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| "suite".into())
        });
        if file.task.is_empty() {
            return Err(format!(
                "{}: the suite has no tasks; add a [[task]] table with id, repo (or git and commit), task and check",
                path.display()
            ));
        }
        let mut seen = BTreeSet::new();
        let mut tasks = Vec::with_capacity(file.task.len());
        for t in file.task {
            let at = format!("{}: task `{}`", path.display(), t.id);
            if !valid_id(&t.id) {
                return Err(format!(
                    "{at}: an id is 1–64 letters, digits, `-`, `_` or `.` (not starting with `.`)"
                ));
            }
            if !seen.insert(t.id.clone()) {
                return Err(format!("{at}: the id is used twice; ids must be unique"));
            }
            if t.task.trim().is_empty() {
                return Err(format!("{at}: `task` (what the agent is asked) is empty"));
            }
            if t.check.trim().is_empty() {
                return Err(format!(
                    "{at}: `check` is empty; it is the command whose exit code 0 means success"
                ));
            }
            let source = match (t.repo, t.git, t.commit) {
                (Some(dir), None, None) => {
                    if !beneath(&dir) {
                        return Err(format!(
                            "{at}: `repo = \"{dir}\"` must be a directory beneath the suite's own \
                             directory ({}), without `..`: a suite copies only its own fixtures",
                            base.display()
                        ));
                    }
                    Source::Dir {
                        base: base.clone(),
                        rel: dir,
                    }
                }
                (None, Some(url), Some(commit)) => {
                    let commit = commit.trim().to_string();
                    if !full_hash(&commit) {
                        return Err(format!(
                            "{at}: `commit = \"{commit}\"` must be the full hash of a commit \
                             (40 hex digits, or 64 for SHA-256; `git rev-parse HEAD` prints it), \
                             not a ref or a short hash"
                        ));
                    }
                    if url.starts_with('-') {
                        return Err(format!("{at}: `git` must not start with `-`"));
                    }
                    if !is_remote(&url) {
                        if !beneath(&url) {
                            return Err(format!(
                                "{at}: `git = \"{url}\"` is a local path: it must be a repository \
                                 beneath the suite's own directory ({}), without `..`, as `repo` \
                                 is: a suite clones only its own local repositories (a remote one \
                                 is a URL: https://…, ssh://…, host:path)",
                                base.display()
                            ));
                        }
                        Source::LocalGit {
                            base: base.clone(),
                            rel: url,
                            commit,
                        }
                    } else if url
                        .get(..5)
                        .is_some_and(|s| s.eq_ignore_ascii_case("file:"))
                    {
                        return Err(format!(
                            "{at}: `git = \"{url}\"` names a local repository by a file:// URL; \
                             name it by its path beneath the suite's own directory ({}) instead",
                            base.display()
                        ));
                    } else {
                        Source::Git { url, commit }
                    }
                }
                (None, Some(_), None) => {
                    return Err(format!(
                        "{at}: `git` needs `commit` too (the commit to check out), so runs are reproducible"
                    ));
                }
                (None, None, _) => {
                    return Err(format!(
                        "{at}: say where the repository comes from: `repo = \"DIR\"` or `git = \"URL\"` with `commit = \"HASH\"`"
                    ));
                }
                _ => {
                    return Err(format!(
                        "{at}: give either `repo` or `git` (with `commit`), not both"
                    ));
                }
            };
            if let Some(script) = t.script.as_deref().filter(|s| !beneath(s)) {
                return Err(format!(
                    "{at}: `script = \"{script}\"` must be a file beneath the suite's own \
                     directory ({}), without `..`: a suite plays only its own scripts",
                    base.display()
                ));
            }
            tasks.push(EvalTask {
                id: t.id,
                source,
                task: t.task,
                check: t.check,
                script: t.script.as_deref().map(resolve),
                timeout_secs: t
                    .timeout_secs
                    .or(file.timeout_secs)
                    .unwrap_or(DEFAULT_TIMEOUT_SECS)
                    .max(1),
                max_steps: t.max_steps.or(file.max_steps),
                check_timeout_secs: t
                    .check_timeout_secs
                    .or(file.check_timeout_secs)
                    .unwrap_or(DEFAULT_CHECK_TIMEOUT_SECS)
                    .max(1),
            });
        }
        Ok(Self {
            name,
            path: path.to_path_buf(),
            tasks,
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn parse(text: &str) -> Result<Suite, String> {
        Suite::parse(text, Path::new("/s/suite.toml"))
    }

    #[test]
    fn tasks_resolve_paths_and_inherit_defaults() {
        let s = parse(
            r#"
max_steps = 7
[[task]]
id = "a"
repo = "fx/a"
task = "do it"
check = "true"
script = "a.yaml"
[[task]]
id = "b"
git = "fx/bare.git"
commit = "0123456789abcdef0123456789abcdef01234567"
task = "do it"
check = "true"
timeout_secs = 5
"#,
        )
        .unwrap();
        assert_eq!(s.name, "suite");
        assert_eq!(
            s.tasks[0].source,
            Source::Dir {
                base: PathBuf::from("/s"),
                rel: "fx/a".into()
            }
        );
        assert_eq!(s.tasks[0].script, Some(PathBuf::from("/s/a.yaml")));
        assert_eq!(s.tasks[0].max_steps, Some(7));
        assert_eq!(s.tasks[0].timeout_secs, DEFAULT_TIMEOUT_SECS);
        assert_eq!(
            s.tasks[1].source,
            Source::LocalGit {
                base: PathBuf::from("/s"),
                rel: "fx/bare.git".into(),
                commit: "0123456789abcdef0123456789abcdef01234567".into()
            }
        );
        assert_eq!(s.tasks[1].timeout_secs, 5);
    }

    #[test]
    fn a_script_outside_the_suites_directory_is_refused() {
        // Red-team pass 2 (R5's eval sibling): a shipped suite naming `~/.ssh/id_ed25519`.
        for script in [
            "/home/u/.ssh/id_ed25519",
            "../../.git-credentials",
            "s/../../x",
            "",
        ] {
            let e = parse(&format!(
                "[[task]]\nid = \"a\"\nrepo = \"fx\"\ntask = \"t\"\ncheck = \"true\"\nscript = \"{script}\"\n"
            ))
            .unwrap_err();
            assert!(e.contains("plays only its own scripts"), "{script}: {e}");
        }
    }

    #[test]
    fn a_repo_outside_the_suites_directory_is_refused() {
        for repo in ["/home/u/.ssh", "../../.ssh", "fx/../../x", ""] {
            let e = parse(&format!(
                "[[task]]\nid = \"a\"\nrepo = \"{repo}\"\ntask = \"t\"\ncheck = \"true\"\n"
            ))
            .unwrap_err();
            assert!(
                e.contains("beneath the suite's own directory") && e.contains("own fixtures"),
                "{repo}: {e}"
            );
        }
    }

    #[test]
    fn a_local_git_repository_outside_the_suites_directory_is_refused() {
        // Red-team pass 3, R3-5: `git = "../../../.password-store"` cloned a hidden store.
        let hash = "0123456789abcdef0123456789abcdef01234567";
        let task = |git: &str, commit: &str| {
            parse(&format!(
                "[[task]]\nid = \"a\"\ngit = \"{git}\"\ncommit = \"{commit}\"\ntask = \"t\"\ncheck = \"true\"\n"
            ))
        };
        // Local to git (no `:`, or a `/` before the first `:`), wherever they lead.
        for git in [
            "../../../.password-store",
            "/home/u/.password-store",
            "fx/../../x",
            "d/evil:x/../../../.password-store",
            "a/b://c/../../..",
            "",
        ] {
            let e = task(git, hash).unwrap_err();
            assert!(
                e.contains("is a local path") && e.contains("its own local repositories"),
                "{git}: {e}"
            );
        }
        for git in ["file:///home/u/.password-store", "FILE://localhost/x"] {
            let e = task(git, hash).unwrap_err();
            assert!(e.contains("file:// URL"), "{git}: {e}");
        }
        // A ref or a short hash follows whatever the repository holds.
        for commit in ["HEAD", "main", "abc", "-x", "", &"g".repeat(40)] {
            let e = task("https://h/r.git", commit).unwrap_err();
            assert!(e.contains("full hash"), "{commit}: {e}");
        }
        // Remotes (as git reads them) and local repositories beneath the suite's directory.
        for git in [
            "https://h/r.git",
            "git@github.com:o/r.git",
            "ssh://h/r",
            "host:r",
        ] {
            let s = task(git, hash).unwrap();
            assert_eq!(
                s.tasks[0].source,
                Source::Git {
                    url: git.into(),
                    commit: hash.into()
                }
            );
        }
        let s = task("repos/r.git", &"a".repeat(64)).unwrap();
        assert!(matches!(&s.tasks[0].source, Source::LocalGit { rel, .. } if rel == "repos/r.git"));
    }

    #[test]
    fn mistakes_are_named() {
        let base = "[[task]]\nid = \"a\"\ntask = \"t\"\ncheck = \"true\"\n";
        assert!(parse(base).unwrap_err().contains("`repo = \"DIR\"`"));
        assert!(
            parse(&format!("{base}git = \"https://h/r.git\"\n"))
                .unwrap_err()
                .contains("needs `commit`")
        );
        assert!(
            parse(&format!(
                "{base}repo = \"x\"\ngit = \"y\"\ncommit = \"c\"\n"
            ))
            .unwrap_err()
            .contains("not both")
        );
        assert!(
            parse(&format!("{base}repo = \"x\"\ncolour = 1\n"))
                .unwrap_err()
                .contains("colour")
        );
        let twice = format!("{base}repo = \"x\"\n{base}repo = \"x\"\n");
        assert!(parse(&twice).unwrap_err().contains("used twice"));
        assert!(
            parse("[[task]]\nid = \"../x\"\nrepo = \"x\"\ntask = \"t\"\ncheck = \"c\"\n")
                .unwrap_err()
                .contains("an id is")
        );
        assert!(parse("name = \"x\"\n").unwrap_err().contains("no tasks"));
    }
}
