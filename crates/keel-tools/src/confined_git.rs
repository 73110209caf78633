//! Keel's own git, run inside the kernel sandbox whenever it reads the live work tree.
//!
//! A command of the same workspace may be running while Keel's git runs (one subagent's
//! command while another subagent's turn takes a snapshot, or a `git_diff`). Git `lstat`s a
//! work-tree file, then opens it by path without `O_NOFOLLOW`: a command that swaps the file
//! for a symlink to `~/.ssh/id_ed25519` in between (`renameat2(RENAME_EXCHANGE)` in a loop) had
//! Keel's unconfined git copy the key into the snapshot store or print it into a tool result
//! (red-team pass 4, R4-7). Checks by Keel before git runs cannot close that gap, so git gets
//! the commands' own view instead: the same sandbox ([`crate::sandbox::spawn_command`]) with
//! the secret stores and Keel's data covered, so whatever a link reaches is what a command
//! could read itself — nothing more. Writes go only where the caller says (the snapshot
//! repository's git directory); Landlock checks the resolved file, so a link cannot redirect
//! them either.
//!
//! The command is built as usual ([`crate::safe_git`]: allowlisted environment, every
//! program the repository names switched off); this module only decides where it runs.

use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::Duration;

use crate::sandbox::{self, SandboxPolicy, WritableRoots};

/// Where a confined git may write, besides reading what a command may read.
#[derive(Debug, Clone, Default)]
pub struct GitConfinement {
    /// The work tree git works in (kept visible even inside a covered directory).
    pub workspace: PathBuf,
    /// The only directories git may write (a staging directory of Keel's own; a repository's
    /// git directory keeps its hooks, config and info read-only); empty, and not
    /// [`Self::work_tree`]: git writes nothing (the read-only sandbox). The work tree is never
    /// among them unless [`Self::work_tree`] says so.
    pub writable: Vec<PathBuf>,
    /// The repository's git directory and common directory: their `info/attributes` reads as
    /// empty inside (see [`Self::policy_and_roots`]).
    pub repository: Vec<PathBuf>,
    /// Git writes the work tree (a restore's `checkout-index`): the workspace as a command
    /// under workspace-write sees it — all of `.git`, `.keel` and the files git's
    /// configuration includes read-only — and nothing else.
    pub work_tree: bool,
}

impl GitConfinement {
    /// Git that only reads the workspace (status, diff).
    pub fn read_only(workspace: &Path) -> Self {
        Self {
            workspace: workspace.to_path_buf(),
            ..Self::default()
        }
    }

    /// Git that reads the work tree and writes only `dirs` (directories of Keel's own: a
    /// staging index and object directory) — nothing of the repository's git directory,
    /// nothing of the work tree.
    pub fn writing_only(workspace: &Path, dirs: Vec<PathBuf>, repository: Vec<PathBuf>) -> Self {
        Self {
            workspace: workspace.to_path_buf(),
            writable: dirs,
            repository,
            work_tree: false,
        }
    }

    /// Git that writes the work tree (a restore), as a command could: `.git`, `.keel` and
    /// the files git's configuration includes stay read-only.
    pub fn writing_work_tree(workspace: &Path, repository: Vec<PathBuf>) -> Self {
        Self {
            workspace: workspace.to_path_buf(),
            writable: Vec::new(),
            repository,
            work_tree: true,
        }
    }

    fn policy_and_roots(&self) -> (SandboxPolicy, WritableRoots) {
        let mut hidden = sandbox::secret_stores();
        // The git directory's `info/attributes` is read as empty: it could name a filter
        // driver that some configuration git reads later defines (an include that appears
        // after Keel's probe, a name only git splits the same way: red-team pass 5, R5-1), and
        // Keel's git needs no attribute (work-tree ones are hidden by `GIT_ATTR_SOURCE`,
        // `core.attributesFile` is `/dev/null`). So no filter or diff driver can be named.
        let repositories = self
            .repository
            .iter()
            .chain(self.writable.iter().filter(|d| d.join("HEAD").is_file()));
        for dir in repositories {
            let attributes = dir.join("info").join("attributes");
            if attributes.symlink_metadata().is_ok() && !hidden.contains(&attributes) {
                hidden.push(attributes);
            }
        }
        let base = WritableRoots {
            hidden,
            ..WritableRoots::default()
        };
        if self.work_tree {
            let roots = WritableRoots {
                workspace: Some(self.workspace.clone()),
                git: sandbox::GitProtection::Whole,
                extra: self.writable.clone(),
                ..base
            };
            return (SandboxPolicy::WorkspaceWrite, roots);
        }
        if self.writable.is_empty() {
            let roots = WritableRoots {
                workspace: Some(self.workspace.clone()),
                ..base
            };
            return (SandboxPolicy::ReadOnly, roots);
        }
        // No `workspace` root: the work tree is not writable (git reads it), only the
        // directories named; it stays visible inside a covered directory.
        let roots = WritableRoots {
            extra: self.writable.clone(),
            visible: vec![self.workspace.clone()],
            protected: self.kept_read_only(),
            ..base
        };
        (SandboxPolicy::WorkspaceWrite, roots)
    }
}

impl GitConfinement {
    /// What stays read-only although it lies in a writable tree: in each writable git
    /// directory what makes the user's own git run programs (`hooks`, `config`,
    /// `config.worktree`, `info`, submodules' and worktrees' directories), and Keel's project
    /// files in the workspace's `.keel` (all but the snapshot repository). Git writes none of
    /// them for Keel (objects, its index and refs are what it writes), so a program git was
    /// led into running after all (red-team pass 5, R5-1: a filter defined by an include
    /// that appeared after the probe) cannot plant a hook for the user's next `git commit`.
    /// Only existing paths can be mounted read-only.
    fn kept_read_only(&self) -> Vec<PathBuf> {
        let mut out = Vec::new();
        for dir in &self.writable {
            if !dir.join("HEAD").is_file() {
                continue;
            }
            for name in [
                "hooks",
                "config",
                "config.worktree",
                "info",
                "modules",
                "worktrees",
                "commondir",
            ] {
                out.push(dir.join(name));
            }
        }
        if let Ok(entries) = std::fs::read_dir(self.workspace.join(".keel")) {
            for e in entries.flatten() {
                if e.file_name() != "snapshots" {
                    out.push(e.path());
                }
            }
        }
        // Never a directory holding a writable one (a linked worktree's git directory lies in
        // its repository's `worktrees`).
        out.retain(|p| {
            p.symlink_metadata().is_ok() && !self.writable.iter().any(|w| w.starts_with(p))
        });
        out
    }
}

/// Runs `cmd` (a hardened git from [`crate::safe_git`]: its program, arguments, environment
/// and working directory are taken over; its stdio is not) inside the sandbox `jail` gives,
/// with `input` on its stdin, and kills it after `deadline` (an error of kind `TimedOut`).
/// Call from within a Tokio runtime.
pub async fn output(
    cmd: &std::process::Command,
    jail: &GitConfinement,
    input: Option<Vec<u8>>,
    deadline: Duration,
) -> io::Result<Output> {
    // A git that writes (stages the work tree) reads attributes from a fixed tree, never the
    // work tree's `.gitattributes`: one could name a filter that a configuration git reads
    // after Keel's probe defines (an include that appears, `/proc/1/cwd/…`, which resolves
    // differently in here), and the filter would run with the git directory writable
    // (red-team pass 6, R6-4: a flow's `deliver` staged without it). Every caller, present
    // and future, gets this check rather than a rule to remember.
    if (!jail.writable.is_empty() || jail.work_tree)
        && crate::safe_git::attr_source_supported()
        && !cmd
            .get_envs()
            .any(|(k, v)| k == "GIT_ATTR_SOURCE" && v.is_some())
    {
        return Err(io::Error::other(
            "Keel's confined git was asked to write without a fixed attribute source (GIT_ATTR_SOURCE): refused (a bug in Keel; please report it)",
        ));
    }
    let mut argv: Vec<OsString> = vec![cmd.get_program().to_os_string()];
    argv.extend(cmd.get_args().map(|a| a.to_os_string()));
    let env: Vec<(OsString, OsString)> = cmd
        .get_envs()
        .filter_map(|(k, v)| Some((k.to_os_string(), v?.to_os_string())))
        .collect();
    let cwd = cmd
        .get_current_dir()
        .map_or_else(|| jail.workspace.clone(), Path::to_path_buf);
    let piped = input.is_some();
    let (policy, roots) = jail.policy_and_roots();
    let configure = move |c: &mut tokio::process::Command| {
        c.current_dir(cwd)
            .stdin(if piped { Stdio::piped() } else { Stdio::null() })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
    };
    let mut confined = sandbox::spawn_command(policy, &roots, &argv, env, configure).await?;
    let writer = match (input, confined.child.stdin.take()) {
        (Some(data), Some(mut stdin)) => Some(tokio::spawn(async move {
            use tokio::io::AsyncWriteExt;
            // git may stop reading (an error): a closed pipe is not the failure to report.
            let _ = stdin.write_all(&data).await;
        })),
        _ => None,
    };
    let child = confined.child;
    let out = match tokio::time::timeout(deadline, child.wait_with_output()).await {
        Ok(out) => out?,
        Err(_) => {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "git did not finish within {} s and was stopped",
                    deadline.as_secs()
                ),
            ));
        }
    };
    if let Some(w) = writer {
        let _ = w.await;
    }
    drop(confined.keeper);
    Ok(out)
}

/// [`output`] for callers outside a runtime (or on a runtime's blocking thread): runs it on a
/// fresh thread with a runtime of its own.
pub fn output_blocking(
    cmd: &std::process::Command,
    jail: &GitConfinement,
    input: Option<Vec<u8>>,
    deadline: Duration,
) -> io::Result<Output> {
    std::thread::scope(|s| {
        s.spawn(|| {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?
                .block_on(output(cmd, jail, input, deadline))
        })
        .join()
        .map_err(|_| io::Error::other("the confined git thread panicked"))?
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Red-team pass 5, R5-1: a filter that ran inside the snapshot's confined `git add`
    /// (defined by an include that appeared after the probe) wrote `.git/hooks/pre-commit`,
    /// which the user's next `git commit` ran unconfined. The git directory's hooks, config and
    /// info stay read-only there; objects and Keel's index stay writable.
    #[test]
    #[allow(clippy::disallowed_methods)]
    fn a_program_in_the_confined_git_cannot_plant_a_hook() {
        let s = sandbox::support();
        if !(s.mount_namespace.is_ok() && s.isolation.processes) {
            assert!(std::env::var_os("CI").is_none(), "CI needs namespaces");
            println!("SKIPPED: no namespaces for commands");
            return;
        }
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let ws = dir.path();
        let git = ws.join(".git");
        for d in ["hooks", "info", "objects"] {
            std::fs::create_dir_all(git.join(d)).unwrap_or_else(|e| panic!("{e}"));
        }
        std::fs::write(git.join("HEAD"), "ref: refs/heads/main\n")
            .unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(git.join("config"), "[core]\n").unwrap_or_else(|e| panic!("{e}"));
        let jail = GitConfinement {
            workspace: ws.to_path_buf(),
            writable: vec![git.clone()],
            ..Default::default()
        };
        let mut cmd = std::process::Command::new("/bin/sh");
        cmd.args([
            "-c",
            "echo evil > .git/hooks/pre-commit; echo x >> .git/config; echo ok > .git/objects/probe; echo ok > .git/keel-snapshot.index",
        ])
        .current_dir(ws)
        .env("GIT_ATTR_SOURCE", crate::safe_git::empty_tree("sha1"));
        let out = output_blocking(&cmd, &jail, None, Duration::from_secs(30))
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(!git.join("hooks/pre-commit").exists(), "{out:?}");
        assert_eq!(
            std::fs::read_to_string(git.join("config")).unwrap_or_default(),
            "[core]\n"
        );
        assert!(
            git.join("objects/probe").exists(),
            "objects stay writable: {out:?}"
        );
        assert!(git.join("keel-snapshot.index").exists(), "{out:?}");
    }

    /// R5-1's remaining surface: the snapshot's staging git wrote the whole git directory
    /// (a filter that slipped through wrote `.git/commondir`) and the work tree. A jail
    /// writing only Keel's staging directory leaves both alone.
    #[test]
    #[allow(clippy::disallowed_methods)]
    fn a_jail_writing_only_keels_directory_writes_nothing_else() {
        let s = sandbox::support();
        if !(s.mount_namespace.is_ok() && s.isolation.processes) {
            assert!(std::env::var_os("CI").is_none(), "CI needs namespaces");
            println!("SKIPPED: no namespaces for commands");
            return;
        }
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let ws = dir.path();
        let git = ws.join(".git");
        for d in ["hooks", "info", "objects/ab", "refs/heads", "keel"] {
            std::fs::create_dir_all(git.join(d)).unwrap_or_else(|e| panic!("{e}"));
        }
        std::fs::write(git.join("HEAD"), "ref: refs/heads/main\n")
            .unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(ws.join("README.md"), "mine\n").unwrap_or_else(|e| panic!("{e}"));
        let jail = GitConfinement::writing_only(ws, vec![git.join("keel")], vec![git.clone()]);
        let mut cmd = std::process::Command::new("/bin/sh");
        cmd.args([
            "-c",
            "echo ../evil > .git/commondir; echo x > .git/refs/heads/p; echo x > .git/objects/ab/cd; \
             echo x > .git/hooks/pre-commit; echo evil > README.md; echo x > new.txt; \
             echo ok > .git/keel/index",
        ])
        .current_dir(ws)
        .env("GIT_ATTR_SOURCE", crate::safe_git::empty_tree("sha1"));
        let out = output_blocking(&cmd, &jail, None, Duration::from_secs(30))
            .unwrap_or_else(|e| panic!("{e}"));
        for planted in [
            "commondir",
            "refs/heads/p",
            "objects/ab/cd",
            "hooks/pre-commit",
        ] {
            assert!(!git.join(planted).exists(), "{planted}: {out:?}");
        }
        assert!(!ws.join("new.txt").exists(), "{out:?}");
        assert_eq!(
            std::fs::read_to_string(ws.join("README.md")).unwrap_or_default(),
            "mine\n"
        );
        assert!(
            git.join("keel/index").exists(),
            "its own directory: {out:?}"
        );
    }

    /// The bypass of R5-1's first fix: a driver name holding a vertical tab (`filter=k\vx`)
    /// was split differently by Keel and git, so its blanking missed it. Inside the confined
    /// git, `info/attributes` reads as empty: whatever the configuration defines, no
    /// attribute names a filter there.
    #[test]
    #[allow(clippy::disallowed_methods)]
    fn no_filter_named_by_info_attributes_runs_in_the_confined_git() {
        let s = sandbox::support();
        if !(s.mount_namespace.is_ok() && s.isolation.processes && crate::fixtures::have_git()) {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI needs namespaces and git"
            );
            println!("SKIPPED: no namespaces for commands, or no git");
            return;
        }
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let ws = dir.path().join("ws");
        // Inside the git directory: a place the confined git may write.
        let canary = ws.join(".git").join("canary");
        std::fs::create_dir_all(&ws).unwrap_or_else(|e| panic!("{e}"));
        let git = |args: &[&str]| {
            std::process::Command::new("git")
                .args(args)
                .current_dir(&ws)
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .env("GIT_CONFIG_GLOBAL", "/dev/null")
                .output()
                .unwrap_or_else(|e| panic!("{e}"))
        };
        assert!(git(&["init", "-q"]).status.success());
        let name = "k\u{b}x";
        let clean = format!("sh -c 'touch {}; cat'", canary.display());
        assert!(
            git(&["config", &format!("filter.{name}.clean"), &clean])
                .status
                .success()
        );
        std::fs::create_dir_all(ws.join(".git/info")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(
            ws.join(".git/info/attributes"),
            format!("*.txt filter={name}\n"),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(ws.join("a.txt"), "a\n").unwrap_or_else(|e| panic!("{e}"));
        // The control, unconfined: git runs the filter.
        assert!(git(&["add", "a.txt"]).status.success());
        assert!(canary.exists(), "the control's filter did not run");
        std::fs::remove_file(&canary).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(ws.join("a.txt"), "b\n").unwrap_or_else(|e| panic!("{e}"));
        let jail = GitConfinement {
            workspace: ws.clone(),
            writable: vec![ws.join(".git")],
            ..Default::default()
        };
        let mut cmd = std::process::Command::new("git");
        cmd.args(["add", "a.txt"])
            .current_dir(&ws)
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_ATTR_SOURCE", crate::safe_git::empty_tree("sha1"));
        let out = output_blocking(&cmd, &jail, None, Duration::from_secs(30))
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(out.status.success(), "{out:?}");
        assert!(
            !canary.exists(),
            "the filter ran in the confined git: {out:?}"
        );
    }
}
