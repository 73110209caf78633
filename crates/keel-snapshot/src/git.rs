//! The git plumbing behind snapshots: every command gets the snapshot repository, the
//! workspace as work tree and Keel's own index file through the environment, so nothing
//! reaches the user's index or HEAD, and runs hardened ([`keel_tools::safe_git`]): no program the
//! repository names (hooks, fsmonitor, filters, drivers, pagers) ever runs, and no
//! configuration choice changes bytes (line-ending conversion).

mod ignored;
mod modes;
mod objects;
mod purge;
mod restore;
pub(crate) mod staging;
mod unconfined;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use super::layout::{self, PROBE_DEADLINE, WORK_DEADLINE, output_within};
use crate::error::SnapshotError;
use crate::stores::StoresBeneath;
use keel_tools::build_dirs::BuildDirs;
use keel_tools::safe_git::{config_env_supported, git_version, hardened_git, neutralisers};
pub(crate) use staging::Staged;

/// Pathspec limiting every operation to the workspace, minus Keel's own directories (written
/// as a glob: a plain `.keel` pathspec is an error when `.keel/` is ignored).
const PATHSPEC: [&str; 3] = ["--", ".", ":(exclude,glob)**/.keel/**"];

/// What the private repository of a non-git workspace never records besides the build
/// directories (which every snapshot repository leaves out: [`BUILD_DIRS_FILE`]).
const PRIVATE_EXCLUDES: &str = "# Keel snapshots: regenerated files are not recorded\n\
/.keel/\n\
*.pyc\n\
.DS_Store\n";

/// The exclude file (in the snapshot repository's git directory) naming the build directories
/// snapshots leave out: `core.excludesFile` of every command, so they count only while
/// untracked. Written when a snapshot is taken, so an undo from any front end (which may not
/// know the configuration) leaves out what the snapshot left out.
const BUILD_DIRS_FILE: &str = "keel-build-dirs";
/// The most the build directories' exclude file is read of (it holds a few names).
const MAX_BUILD_DIRS_FILE: u64 = 64 * 1024;

/// The file (in the snapshot repository's git directory) holding the size limit, in MiB, of
/// the files snapshots record (`0`: none), written like [`BUILD_DIRS_FILE`] so an undo from
/// any front end leaves alone what the snapshot left out.
const MAX_FILE_FILE: &str = "keel-max-file-mb";
/// `[snapshots] max_file_mb` when neither the caller nor the repository says.
pub const DEFAULT_MAX_FILE_MB: u64 = keel_tools::recorded::DEFAULT_MAX_FILE_MB;

/// A recorded snapshot commit, its tree, and the files left out of it for their size.
pub(super) struct Recorded {
    pub(super) commit: String,
    pub(super) staged: Staged,
}

/// One ref of the snapshot namespace.
pub(super) struct RefEntry {
    pub(super) name: String,
    pub(super) commit: String,
    pub(super) tree: String,
    pub(super) created: u64,
}

/// One path that differs between two trees, with its side in the second tree.
struct Change {
    /// `A` (only in the second tree), `D` (only in the first), `M`, `T`.
    status: char,
    mode: String,
    sha: String,
    /// Workspace-relative.
    path: String,
}

/// Where snapshots are stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum RepoKind {
    /// The workspace's own repository (its per-worktree git directory).
    User { git_dir: PathBuf },
    /// Keel's private repository under `.keel/snapshots` (created on first use).
    Private { git_dir: PathBuf },
}

/// A git runner bound to one workspace's snapshot repository.
#[derive(Debug, Clone)]
pub(super) struct Git {
    pub(super) workspace: PathBuf,
    pub(super) kind: RepoKind,
    /// Where refs and objects live: the git directory, or a linked worktree's common one.
    common_dir: PathBuf,
    /// The work tree git sees: the repository's top level (user) or the workspace (private).
    work_tree: PathBuf,
    /// Keel's own directory in the git directory ([`STAGE_DIR`]): its index file and the
    /// object directories the staging git writes into — the only place that git may write.
    stage_dir: PathBuf,
    /// Keel's index file (in [`Self::stage_dir`]), never the user's.
    index: PathBuf,
    /// The workspace's path inside the work tree (`sub/dir/`; empty at the top).
    prefix: String,
    /// The empty tree of the repository's hash, used as the attribute source so no
    /// `.gitattributes` conversion applies (git ≥ 2.40).
    attr_source: Option<&'static str>,
    /// The build directories to leave out (`None`: as the last snapshot did, else the
    /// defaults).
    build_dirs: Option<BuildDirs>,
    /// The size limit of recorded files in MiB, 0 for none (`None`: as the last snapshot
    /// did, else [`DEFAULT_MAX_FILE_MB`]).
    max_file_mb: Option<u64>,
    /// Settings given to the staging git after every other one: a program the hardening
    /// missed, for the tests that check what such a program can reach.
    #[cfg(test)]
    pub(super) stage_settings: Vec<String>,
}

/// Keel's own directory in the snapshot repository's git directory: its index and the
/// staging git's object directories. Nothing else of the git directory (and nothing of the
/// work tree) is writable to that git (red-team pass 5, R5-1).
const STAGE_DIR: &str = "keel";

/// True when a usable `git` is on PATH.
pub fn git_available() -> bool {
    git_version().is_some()
}

/// `git` hardened, without repository-specific overrides (for `--version`, discovery, init:
/// commands that read no attributes).
fn bare_command() -> Command {
    keel_tools::safe_git::bare()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).trim().to_string()
}

impl Git {
    /// Finds the repository for `workspace`: a private one already in `.keel/snapshots`, else
    /// the enclosing git repository, else a private one to be created.
    pub(super) fn detect(workspace: &Path) -> Result<Self, SnapshotError> {
        let Some((major, minor)) = git_version() else {
            return Err(SnapshotError::GitMissing);
        };
        let workspace = workspace.to_path_buf();
        let private = private_repository(&workspace);
        let attr_ok = (major, minor) >= (2, 40);
        if !private.join("HEAD").exists() {
            let mut probe = bare_command();
            probe
                .args([
                    "rev-parse",
                    "--absolute-git-dir",
                    "--show-toplevel",
                    "--show-object-format",
                    "--show-prefix",
                    "--git-common-dir",
                ])
                .current_dir(&workspace);
            let out =
                output_within(probe, None, PROBE_DEADLINE).map_err(|source| SnapshotError::Io {
                    action: "run git in",
                    path: workspace.display().to_string(),
                    source,
                })?;
            let stdout = String::from_utf8_lossy(&out.stdout);
            let lines: Vec<&str> = stdout.lines().collect();
            if out.status.success() && lines.len() >= 2 {
                let git_dir = PathBuf::from(lines[0]);
                let work_tree = PathBuf::from(lines[1]);
                // Relative to the directory git ran in.
                let common_dir = lines
                    .get(4)
                    .map_or_else(|| git_dir.clone(), |c| workspace.join(c));
                let empty = keel_tools::safe_git::empty_tree(lines.get(2).unwrap_or(&"sha1"));
                let user = Self {
                    stage_dir: git_dir.join(STAGE_DIR),
                    index: git_dir.join(STAGE_DIR).join("index"),
                    kind: RepoKind::User {
                        git_dir: git_dir.clone(),
                    },
                    common_dir,
                    prefix: lines.get(3).copied().unwrap_or_default().to_string(),
                    work_tree,
                    workspace: workspace.clone(),
                    attr_source: attr_ok.then_some(empty),
                    build_dirs: None,
                    max_file_mb: None,
                    #[cfg(test)]
                    stage_settings: Vec::new(),
                };
                // A workspace inside another repository's ignored or untracked directory is
                // not that repository's business: nothing is written into it. Nor is a
                // repository a `.git` file (or link) names that is not this work tree's own.
                if layout::own_git_dir(&user.work_tree, &git_dir, &user.common_dir)
                    && (user.prefix.is_empty() || user.tracks_workspace())
                {
                    return Ok(user);
                }
            }
        }
        Ok(Self {
            stage_dir: private.join(STAGE_DIR),
            index: private.join(STAGE_DIR).join("index"),
            common_dir: private.clone(),
            kind: RepoKind::Private { git_dir: private },
            prefix: String::new(),
            work_tree: workspace.clone(),
            workspace,
            attr_source: attr_ok.then_some(keel_tools::safe_git::empty_tree("sha1")),
            build_dirs: None,
            max_file_mb: None,
            #[cfg(test)]
            stage_settings: Vec::new(),
        })
    }

    /// Leaves `dirs` out of the snapshots taken from now on (and of the restores after them).
    pub(super) fn set_build_dirs(&mut self, dirs: BuildDirs) {
        self.build_dirs = Some(dirs);
    }

    /// Leaves files over `mb` MiB out of the snapshots taken from now on (0: no limit).
    pub(super) fn set_max_file_mb(&mut self, mb: u64) {
        self.max_file_mb = Some(mb);
    }

    fn build_dirs_file(&self) -> PathBuf {
        self.git_dir().join(BUILD_DIRS_FILE)
    }

    /// The size limit of recorded files in bytes (`None`: no limit): the caller's, else the
    /// one the last snapshot wrote, else the default.
    fn max_file_bytes(&self) -> Option<u64> {
        let mb = self.max_file_mb.unwrap_or_else(|| {
            keel_tools::project::read_in_dir(&self.git_dir().join(MAX_FILE_FILE), 64)
                .ok()
                .flatten()
                .and_then(|t| t.trim().parse().ok())
                .unwrap_or(DEFAULT_MAX_FILE_MB)
        });
        keel_tools::recorded::max_file_bytes(mb)
    }

    /// Writes the settings files an undo from any front end follows — the build directories'
    /// exclude file and the size limit — when missing or different.
    fn write_settings(&self) -> Result<(), SnapshotError> {
        let dirs = match &self.build_dirs {
            Some(d) => Some(d.gitignore()),
            None if self.build_dirs_file().is_file() => None,
            None => Some(BuildDirs::default().gitignore()),
        };
        if let Some(wanted) = dirs {
            self.write_setting(BUILD_DIRS_FILE, &wanted)?;
        }
        if let Some(mb) = self.max_file_mb {
            self.write_setting(MAX_FILE_FILE, &format!("{mb}\n"))?;
        }
        Ok(())
    }

    /// Writes `wanted` as the git directory's file `name` unless it already holds it.
    fn write_setting(&self, name: &str, wanted: &str) -> Result<(), SnapshotError> {
        let path = self.git_dir().join(name);
        // Read and written beneath the open git directory (regular files only, never
        // blocking): a repository's `.git` or `.keel/snapshots` may hold a FIFO or a symlink
        // out under that name.
        if keel_tools::project::read_in_dir(&path, MAX_BUILD_DIRS_FILE)
            .is_ok_and(|have| have.as_deref() == Some(wanted))
        {
            return Ok(());
        }
        let io = |source: std::io::Error| SnapshotError::Io {
            action: "write",
            path: path.display().to_string(),
            source,
        };
        let target = keel_tools::beneath::DirHandle::open(self.git_dir())
            .map_err(io)?
            .resolve(Path::new(name))
            .map_err(|e| io(std::io::Error::other(e.to_string())))?;
        target
            .write_atomic(wanted.as_bytes(), keel_tools::fs::WriteMode::Replace, None)
            .map_err(io)
    }

    /// Whether the repository tracks files in the workspace (a subdirectory of its work
    /// tree): committed in `HEAD`, or at least in the user's index.
    fn tracks_workspace(&self) -> bool {
        let dir = self.prefix.trim_end_matches('/');
        let committed = format!("HEAD:{dir}");
        if self
            .run(&["rev-parse", "--verify", "--quiet", &committed], None)
            .is_ok()
        {
            return true;
        }
        let Ok(mut c) = self.command(&["ls-files", "--cached", "-z", "--", "."]) else {
            return false;
        };
        c.env("GIT_INDEX_FILE", self.git_dir().join("index"));
        output_within(c, None, PROBE_DEADLINE)
            .is_ok_and(|out| out.status.success() && !out.stdout.is_empty())
    }

    pub(super) fn git_dir(&self) -> &Path {
        match &self.kind {
            RepoKind::User { git_dir } | RepoKind::Private { git_dir } => git_dir,
        }
    }

    fn exists(&self) -> bool {
        self.git_dir().join("HEAD").exists()
    }

    /// The repository's variables: its git directory, work tree and Keel's index.
    fn repository_env(&self, c: &mut Command) {
        c.env("GIT_DIR", self.git_dir())
            .env("GIT_WORK_TREE", &self.work_tree)
            .env("GIT_INDEX_FILE", &self.index);
    }

    /// Overrides blanking every program the repository's configuration (with its includes)
    /// names: filter, diff and merge drivers, credential helpers, signing programs, pagers.
    /// Read before each command, since the model may change the configuration at any time.
    pub(crate) fn driver_overrides(&self) -> Result<Vec<(String, String)>, SnapshotError> {
        if !self.exists() {
            return Ok(Vec::new());
        }
        let args = ["config", "--list", "--name-only", "-z"];
        let mut c = hardened_git(&[], config_env_supported()).map_err(|m| self.fail(&args, m))?;
        self.repository_env(&mut c);
        c.args(args).current_dir(&self.workspace);
        let out =
            output_within(c, None, PROBE_DEADLINE).map_err(|e| self.fail(&args, e.to_string()))?;
        if !out.status.success() {
            // An unreadable configuration: git would fail the real command the same way, but
            // never run it without knowing what to switch off.
            return Err(self.fail(&args, text(&out.stderr)));
        }
        let mut all = neutralisers(&out.stdout);
        // Objects Keel writes hold the content of files the user may keep private (a 0600
        // `secrets.env`, a force-added ignored `.env`): written owner-only (0400 files, 0700
        // new directories), unless the repository sets its own sharing (red-team pass 5, R5-9);
        // then the new objects of private files are made owner-only after they are written
        // (`Git::owner_only`, R7-17).
        let shared = out
            .stdout
            .split(|b| *b == 0)
            .any(|n| n.eq_ignore_ascii_case(b"core.sharedrepository"));
        if !shared {
            all.push(("core.sharedRepository".to_string(), "0600".to_string()));
        }
        // Drivers `info/attributes` names are blanked whether or not the configuration the
        // probe read defines them: git reads it (and its includes) again (R5-1).
        all.extend(keel_tools::safe_git::info_attribute_neutralisers(
            self.git_dir(),
        ));
        if self.common_dir != self.git_dir() {
            all.extend(keel_tools::safe_git::info_attribute_neutralisers(
                &self.common_dir,
            ));
        }
        Ok(all)
    }

    /// A hardened git command against the snapshot repository, run in the workspace.
    fn command(&self, args: &[&str]) -> Result<Command, SnapshotError> {
        self.command_from(self.driver_overrides()?, &[], args)
    }

    /// [`Git::command`] with the overrides already read ([`Git::driver_overrides`]) and
    /// `settings` (`key=value`) after Keel's own.
    fn command_from(
        &self,
        mut extra: Vec<(String, String)>,
        settings: &[&str],
        args: &[&str],
    ) -> Result<Command, SnapshotError> {
        let excludes = self.build_dirs_file();
        if excludes.is_file() {
            extra.push((
                "core.excludesFile".to_string(),
                excludes.display().to_string(),
            ));
        }
        let mut c = hardened_git(&extra, config_env_supported()).map_err(|m| self.fail(args, m))?;
        self.repository_env(&mut c);
        c.env("GIT_AUTHOR_NAME", "Keel")
            .env("GIT_AUTHOR_EMAIL", "keel@localhost")
            .env("GIT_COMMITTER_NAME", "Keel")
            .env("GIT_COMMITTER_EMAIL", "keel@localhost");
        if let Some(tree) = self.attr_source {
            c.env("GIT_ATTR_SOURCE", tree);
        }
        for setting in [
            "core.autocrlf=false",
            "core.safecrlf=false",
            "core.fileMode=true",
            "core.symlinks=true",
            "core.quotePath=false",
            "advice.addEmbeddedRepo=false",
            // No reflog of Keel's refs: one more file git would write.
            "core.logAllRefUpdates=false",
            // A split index keeps its shared part in the git directory, which the staging git
            // may not write.
            "core.splitIndex=false",
        ] {
            c.args(["-c", setting]);
        }
        for setting in settings {
            c.args(["-c", setting]);
        }
        c.args(args).current_dir(&self.workspace);
        Ok(c)
    }

    fn fail(&self, args: &[&str], message: String) -> SnapshotError {
        SnapshotError::Git {
            command: args.join(" "),
            dir: self.workspace.display().to_string(),
            message,
        }
    }

    /// Runs a git command that reads and writes only the repository (objects, refs, Keel's
    /// index) and returns its output, or an error with its stderr. Unconfined, so it must never
    /// open a work-tree file: [`unconfined::repository_only`] refuses anything else (those run confined:
    /// [`Git::run_in_work_tree`]).
    fn run(&self, args: &[&str], input: Option<&[u8]>) -> Result<Output, SnapshotError> {
        if !unconfined::repository_only(args) {
            return Err(self.fail(
                args,
                "reads the work tree, so it runs only inside the sandbox (a bug in Keel)".into(),
            ));
        }
        let cmd = self.command(args)?;
        let out = output_within(cmd, input, WORK_DEADLINE);
        self.finish(args, out)
    }

    /// Runs a git command that reads the live work tree inside the kernel sandbox: a command
    /// running meanwhile may swap a file for a symlink to a secret between git's `lstat` and
    /// its `open` (red-team pass 4, R4-7), and inside the sandbox that link reaches only what
    /// the command could read itself. What it may write depends on `how` ([`Confined`]):
    /// nothing of the repository's git directory in any case — a program git was led into
    /// running after all (a filter defined by an include that appeared after Keel's probe:
    /// red-team pass 5, R5-1) wrote `.git/commondir` and the user's next `git status` ran what
    /// it named. Retries a few times while another git holds the index lock.
    fn run_in_work_tree(
        &self,
        args: &[&str],
        input: Option<&[u8]>,
        how: Confined<'_>,
    ) -> Result<Output, SnapshotError> {
        use keel_tools::confined_git::GitConfinement;
        let mut repository = vec![self.git_dir().to_path_buf()];
        if self.common_dir != self.git_dir() {
            repository.push(self.common_dir.clone());
        }
        let jail = match how {
            Confined::Read => GitConfinement {
                repository,
                ..GitConfinement::read_only(&self.work_tree)
            },
            Confined::Stage(_) => GitConfinement::writing_only(
                &self.work_tree,
                vec![self.stage_dir.clone()],
                repository,
            ),
            Confined::Checkout => GitConfinement::writing_work_tree(&self.work_tree, repository),
        };
        retry_locked(|| {
            let cmd = match how {
                Confined::Stage(objects) => {
                    // The staging object directory is read once more and then removed: no
                    // point compressing it.
                    #[allow(unused_mut)]
                    let mut settings = vec!["core.looseCompression=0"];
                    #[cfg(test)]
                    settings.extend(self.stage_settings.iter().map(String::as_str));
                    let mut c = self.command_from(self.driver_overrides()?, &settings, args)?;
                    c.env("GIT_OBJECT_DIRECTORY", objects).env(
                        "GIT_ALTERNATE_OBJECT_DIRECTORIES",
                        objects::alternate_entry(&self.common_dir.join("objects")),
                    );
                    c
                }
                _ => self.command(args)?,
            };
            let out = keel_tools::confined_git::output_blocking(
                &cmd,
                &jail,
                input.map(<[u8]>::to_vec),
                WORK_DEADLINE,
            );
            self.finish(args, out)
        })
    }

    /// A finished git's output, or the error saying why it failed.
    fn finish(&self, args: &[&str], out: std::io::Result<Output>) -> Result<Output, SnapshotError> {
        let out = out.map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => SnapshotError::GitMissing,
            _ => self.fail(args, e.to_string()),
        })?;
        if out.status.success() {
            Ok(out)
        } else {
            let err = text(&out.stderr);
            Err(self.fail(
                args,
                if err.is_empty() {
                    format!("exit status {}", out.status)
                } else {
                    err
                },
            ))
        }
    }

    /// [`Git::run`], retrying a few times while another git holds the index lock.
    fn run_locked(&self, args: &[&str], input: Option<&[u8]>) -> Result<Output, SnapshotError> {
        retry_locked(|| self.run(args, input))
    }

    fn stdout(&self, args: &[&str]) -> Result<String, SnapshotError> {
        Ok(text(&self.run(args, None)?.stdout))
    }

    /// Creates the private repository on first use.
    fn ensure_repository(&self) -> Result<(), SnapshotError> {
        let RepoKind::Private { git_dir } = &self.kind else {
            return Ok(());
        };
        self.check_private_dir(git_dir)?;
        let io = |action: &'static str, source: std::io::Error| SnapshotError::Io {
            action,
            path: git_dir.display().to_string(),
            source,
        };
        if self.exists() {
            // Shipped with a `commondir` naming another repository (red-team pass 2, R1).
            if std::fs::symlink_metadata(git_dir.join("commondir")).is_ok() {
                layout::check_no_links(git_dir).map_err(|m| io("use", std::io::Error::other(m)))?;
            }
            return Ok(());
        }
        // A directory the workspace shipped there: git init would follow its links.
        layout::check_no_links(git_dir).map_err(|m| io("use", std::io::Error::other(m)))?;
        let (Some(parent), Some(name)) = (git_dir.parent(), git_dir.file_name()) else {
            return Err(io("create", std::io::Error::other("no parent directory")));
        };
        // Created beneath the open workspace (never through a link on the way).
        let ws =
            keel_tools::beneath::DirHandle::open(&self.workspace).map_err(|e| io("open", e))?;
        let rel = parent
            .strip_prefix(&self.workspace)
            .unwrap_or(Path::new(""))
            .join(name);
        ws.resolve_entry(&rel)
            .map_err(|e| io("create", std::io::Error::other(e.to_string())))?
            .create_dir_all()
            .or_else(|e| match e.kind() {
                std::io::ErrorKind::AlreadyExists => Ok(()),
                _ => Err(e),
            })
            .map_err(|e| io("create", e))?;
        let dir = git_dir.display().to_string();
        let mut init = bare_command();
        init.args(["init", "--quiet", "--bare", "--template=", &dir]);
        let out = output_within(init, None, PROBE_DEADLINE)
            .map_err(|e| self.fail(&["init", "--bare", &dir], e.to_string()))?;
        if !out.status.success() {
            return Err(self.fail(&["init", "--bare", &dir], text(&out.stderr)));
        }
        self.check_layout()?;
        let repo = keel_tools::beneath::DirHandle::open(git_dir).map_err(|e| io("open", e))?;
        let write = |rel: &str, bytes: &str| {
            repo.resolve_entry(Path::new(rel))
                .map_err(|e| std::io::Error::other(e.to_string()))?
                .write_atomic(bytes.as_bytes(), keel_tools::fs::WriteMode::Replace, None)
        };
        let _ = write(
            "description",
            "Keel's workspace snapshots (`keel snapshots`, `keel undo`). Safe to delete.\n",
        );
        // Without a repository there is usually no .gitignore either: leave out what builds
        // and package managers regenerate (the workspace's own .gitignore files still apply).
        write("info/exclude", PRIVATE_EXCLUDES).map_err(|e| io("write info/exclude in", e))?;
        Ok(())
    }

    /// Refuses to write through the git directory when its layout would lead git's writes
    /// elsewhere (links, special files: [`layout::check_writable`]).
    fn check_layout(&self) -> Result<(), SnapshotError> {
        layout::check_writable(self.git_dir(), &self.common_dir).map_err(|m| SnapshotError::Io {
            action: "take snapshots in",
            path: self.git_dir().display().to_string(),
            source: std::io::Error::other(m),
        })
    }

    /// The private repository must be a real directory inside the workspace: a repository
    /// that ships `.keel/snapshots` (or `.keel`) as a symlink would have Keel write its
    /// snapshots wherever that points.
    fn check_private_dir(&self, git_dir: &Path) -> Result<(), SnapshotError> {
        let refuse = |reason: String| SnapshotError::Io {
            action: "use",
            path: git_dir.display().to_string(),
            source: std::io::Error::other(reason),
        };
        let rel = git_dir
            .strip_prefix(&self.workspace)
            .map_err(|_| refuse("it is not inside the workspace".into()))?
            .to_string_lossy()
            .into_owned();
        let ws = keel_tools::Workspace::new(&self.workspace).map_err(|e| refuse(e.to_string()))?;
        let entry = ws.locate_entry(&rel).map_err(|e| refuse(e.to_string()))?;
        match entry.info() {
            Ok(Some(info)) if info.kind == keel_tools::fs::FileKind::Symlink => {
                Err(refuse(format!(
                    "`{rel}` is a symlink; Keel keeps its snapshots only in a real directory inside the workspace — remove the link"
                )))
            }
            Ok(Some(info)) if info.kind != keel_tools::fs::FileKind::Dir => Err(refuse(format!(
                "`{rel}` is {}, not a directory; remove it",
                info.kind.describe()
            ))),
            _ => Ok(()),
        }
    }

    /// The workspace's tree now (staged into Keel's index).
    pub(super) fn current_tree(&self) -> Result<String, SnapshotError> {
        Ok(self.stage()?.tree)
    }

    /// The workspace now, staged: its tree and the files left out for their size.
    pub(super) fn current(&self) -> Result<Staged, SnapshotError> {
        self.stage()
    }

    /// The tree of `commit`'s first parent, if it has one.
    pub(super) fn parent_tree(&self, commit: &str) -> Option<String> {
        let spec = format!("{commit}^1^{{tree}}");
        self.stdout(&["rev-parse", "--verify", "--quiet", &spec])
            .ok()
    }

    /// Deletes a ref (a redone undo).
    pub(super) fn delete_ref(&self, reference: &str) -> Result<(), SnapshotError> {
        self.check_layout()?;
        self.run(&["update-ref", "-d", reference], None).map(|_| ())
    }

    /// Records the workspace as a commit under `reference`. `parent` (commit, tree) chains it;
    /// an unchanged tree reuses the parent commit.
    pub(super) fn snapshot(
        &self,
        reference: &str,
        message: &str,
        parent: Option<(&str, &str)>,
    ) -> Result<Recorded, SnapshotError> {
        let staged = self.stage()?;
        let tree = staged.tree.as_str();
        let message = &modes::with_notes(message, &staged.modes, &staged.left_out);
        let commit = match parent {
            Some((commit, parent_tree)) if parent_tree == tree => commit.to_string(),
            // The message on standard input: its notes can be long (no argument list limit).
            Some((commit, _)) => self.commit_tree(&[tree, "-p", commit], message)?,
            None => self.commit_tree(&[tree], message)?,
        };
        self.run(&["update-ref", reference, &commit], None)?;
        Ok(Recorded { commit, staged })
    }

    /// `git commit-tree ARGS` with `message` on standard input; the new commit's id.
    fn commit_tree(&self, args: &[&str], message: &str) -> Result<String, SnapshotError> {
        let mut all = vec!["commit-tree", "--no-gpg-sign"];
        all.extend_from_slice(args);
        let out = self.run(&all, Some(message.as_bytes()))?;
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    }

    /// Refs under `prefix`, with their commit's tree and creation time (Unix seconds).
    pub(super) fn refs(&self, prefix: &str) -> Result<Vec<RefEntry>, SnapshotError> {
        if !self.exists() {
            return Ok(Vec::new());
        }
        let out = self.stdout(&[
            "for-each-ref",
            "--format=%(refname)%09%(objectname)%09%(tree)%09%(creatordate:unix)",
            prefix,
        ])?;
        Ok(out
            .lines()
            .filter_map(|l| {
                let mut f = l.split('\t');
                Some(RefEntry {
                    name: f.next()?.to_string(),
                    commit: f.next()?.to_string(),
                    tree: f.next()?.to_string(),
                    created: f.next().and_then(|t| t.parse().ok()).unwrap_or(0),
                })
            })
            .collect())
    }

    /// A unified diff from the commit or tree `from` to the tree `to`, paths relative to the
    /// workspace (no colour, no external diff or text conversion, no renames).
    pub(super) fn patch(&self, from: &str, to: &str) -> Result<String, SnapshotError> {
        let mut args = vec![
            "diff",
            "--no-color",
            "--no-ext-diff",
            "--no-textconv",
            "--no-renames",
            "--relative",
            from,
            to,
        ];
        let spec = self.pathspec(&StoresBeneath::of(&self.workspace)?);
        args.extend(as_strs(&spec));
        let out = self.run(&args, None)?;
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }
}

impl Git {
    /// Every operation's pathspec: the workspace, minus Keel's own `.keel/` and every
    /// protected store beneath the workspace ([`crate::stores`]).
    fn pathspec(&self, stores: &StoresBeneath) -> Vec<String> {
        let mut spec: Vec<String> = PATHSPEC.iter().map(|s| s.to_string()).collect();
        spec.extend(stores.excluding());
        spec
    }

    /// Deletes the refs named (one `git update-ref --stdin` transaction); the objects they
    /// kept become garbage git collects later.
    pub(super) fn delete_refs(&self, names: &[String]) -> Result<(), SnapshotError> {
        if names.is_empty() || !self.exists() {
            return Ok(());
        }
        self.check_layout()?;
        let input: String = names.iter().map(|n| format!("delete {n}\n")).collect();
        self.run(&["update-ref", "--stdin"], Some(input.as_bytes()))?;
        Ok(())
    }
}

/// What a git command run inside the sandbox may write ([`Git::run_in_work_tree`]).
#[derive(Clone, Copy)]
pub(super) enum Confined<'a> {
    /// Nothing (`ls-files`).
    Read,
    /// Keel's staging directory only (`git add`): its index, and new objects in the given
    /// object directory of Keel's own, which [`Git::absorb`] checks and moves into the
    /// repository.
    Stage(&'a Path),
    /// The work tree (`checkout-index`), as a command could: `.git`, `.keel` and the files
    /// git's configuration includes stay read-only.
    Checkout,
}

/// Runs `run`, retrying a few times while another git holds the index lock.
fn retry_locked(run: impl Fn() -> Result<Output, SnapshotError>) -> Result<Output, SnapshotError> {
    let mut attempt = 0;
    loop {
        match run() {
            Err(SnapshotError::Git { message, .. })
                if message.contains("index.lock") && attempt < 20 =>
            {
                attempt += 1;
                std::thread::sleep(Duration::from_millis(50));
            }
            other => return other,
        }
    }
}

fn as_strs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

/// Where the private snapshot repository of a non-git workspace lives.
pub fn private_repository(workspace: &Path) -> PathBuf {
    workspace.join(".keel").join("snapshots")
}
