//! Staging the workspace into Keel's index, after one step that sanitises the index first.
//!
//! Keel's index may come from elsewhere (a copy of the user's index, which a shipped or
//! command-written file can be) or from an older Keel, and the work tree may hold files a
//! snapshot must not read. Before `git add` runs, [`Git::sanitise_index`]:
//!
//! - drops the whole index when it names a path outside the work tree (`../../home/u/.ssh/…`:
//!   `git add` would read that file into the snapshot, where a command can read it back —
//!   red-team pass 3, R3-11; the next `git add` rebuilds it, hashing every file once);
//! - finds the files over the size limit (`[snapshots] max_file_mb`) among those `git add`
//!   would read — untracked or changed since Keel's index last saw them: a sparse
//!   `truncate -s 1T` file costs nothing to make and would be read whole by every snapshot
//!   (red-team R18);
//! - drops from the index whatever it holds in a protected store (seeded from the user's
//!   index, or staged before stores were left out: R3-2) and the oversized files.
//!
//! Staging then excludes the stores, the oversized files and untracked nested repositories
//! (a `git init sub` with no commit made every later `git add` fail, taking undo away for the
//! rest of the run: red-team pass 4; with a commit it was only a gitlink, which no restore
//! used), so the tree written names none of them; the oversized files are reported
//! ([`Staged::left_out`]) and a restore leaves them alone. Small files the repository
//! ignores one by one (`.env`, a local config: often the user's only copy) are added with
//! `--force`, bounded ([`IGNORED_MAX_FILES`] files of at most [`IGNORED_MAX_BYTES`]), so an
//! undo brings them back; ignored directories (caches, build output) stay out.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use super::ignored::IGNORED_MAX_BYTES;
use super::objects::StagingObjects;
use super::{Confined, Git, RepoKind, as_strs};
use crate::error::SnapshotError;
use crate::stores::StoresBeneath;

/// The most of the user's index copied as the seed of Keel's (larger: Keel's starts empty).
const MAX_SEED_INDEX: u64 = 512 * 1024 * 1024;

/// The workspace staged into Keel's index: its tree, and the files left out for their size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Staged {
    pub(crate) tree: String,
    /// Workspace-relative paths of files over the size limit, sorted: in no tree of this
    /// staging, and never touched by a restore from it.
    pub(crate) left_out: Vec<String>,
    /// The private files staging looked at, with their permission bits (noted in the
    /// snapshot's message: [`super::modes`]).
    pub(crate) modes: Vec<(Vec<u8>, u32)>,
}

impl Staged {
    /// Whether `path` (workspace-relative) is a left-out file or lies beneath one (a restore
    /// would have to replace the file to create it).
    pub(crate) fn leaves_alone(&self, path: &str) -> bool {
        self.left_out.iter().any(|lo| {
            path.strip_prefix(lo.as_str())
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
        })
    }
}

/// NUL-separated pathspecs for `--pathspec-from-file=- --pathspec-file-nul` (no argument list
/// to overflow, however many files are left out).
fn nul_list<'a>(specs: impl Iterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut out = Vec::new();
    for s in specs {
        out.extend_from_slice(s);
        out.push(0);
    }
    out
}

/// A pathspec naming exactly `path` (no glob), with `magic` added (`exclude`).
fn literal(magic: &str, path: &[u8]) -> Vec<u8> {
    let mut spec = format!(":({magic}literal)").into_bytes();
    spec.extend_from_slice(path);
    spec
}

impl Git {
    /// Stages the workspace into Keel's index (sanitised first) and writes its tree.
    pub(crate) fn stage(&self) -> Result<Staged, SnapshotError> {
        self.ensure_repository()?;
        self.prepare_stage_dir()?;
        self.check_layout()?;
        self.write_settings()?;
        if let RepoKind::User { git_dir } = &self.kind {
            // Start from the user's index (copied, never written): its stat data lets `git
            // add` skip rehashing every unchanged file of a large repository.
            seed_index(git_dir, &self.index);
        }
        let stores = StoresBeneath::of(&self.workspace)?;
        let mut modes = Vec::new();
        let (oversized, nested, mut refused) = self.sanitise_index(&stores, &mut modes)?;
        let spec = self.pathspec(&stores);
        // The staging git writes new objects here, never into the repository (R5-1).
        let objects = StagingObjects::create(&self.stage_dir)
            .map_err(|e| self.fail(&["add"], format!("cannot make a staging directory: {e}")))?;
        // A name git refuses to record that the check below did not foresee is left out too,
        // a few times over, rather than failing the snapshot (R4-18).
        for round in 0..=MAX_REFUSAL_ROUNDS {
            let excluded: Vec<Vec<u8>> = oversized
                .iter()
                .chain(nested.iter())
                .chain(refused.iter())
                .map(|p| literal("exclude,", p))
                .collect();
            let list = nul_list(
                spec.iter()
                    .filter(|s| *s != "--")
                    .map(String::as_bytes)
                    .chain(excluded.iter().map(Vec::as_slice)),
            );
            let added = self.run_in_work_tree(
                &[
                    "add",
                    "--all",
                    "--pathspec-from-file=-",
                    "--pathspec-file-nul",
                ],
                Some(&list),
                Confined::Stage(objects.path()),
            );
            match added {
                Ok(_) => break,
                Err(SnapshotError::Git { message, .. })
                    if round < MAX_REFUSAL_ROUNDS
                        && invalid_path(&message).is_some_and(|p| !refused.contains(&p)) =>
                {
                    refused.extend(invalid_path(&message));
                }
                Err(e) => return Err(e),
            }
        }
        // Small files the repository ignores (`.env`, `config/*.local.*`) are the user's only
        // copy: recorded too, so an undo brings them back (red-team pass 4, R4-9).
        let ignored = self.small_ignored(&stores, &mut modes)?;
        if self.ignored_aside() {
            // In the user's repository their bytes stay out of git's objects, which a push of
            // the snapshot refs would send (R6-17): a side store and a manifest in the tree.
            let text = self.put_aside(&ignored)?;
            let id = self.write_manifest(&text)?;
            let full = format!("{}{}", self.prefix, super::ignored::MANIFEST);
            self.run_locked(
                &["update-index", "-z", "--index-info"],
                Some(format!("100644 {id}\t{full}\0").as_bytes()),
            )?;
        } else if !ignored.is_empty() {
            let specs: Vec<Vec<u8>> = ignored.iter().map(|p| literal("", p)).collect();
            self.run_in_work_tree(
                &[
                    "add",
                    "--force",
                    "--pathspec-from-file=-",
                    "--pathspec-file-nul",
                ],
                Some(&nul_list(specs.iter().map(Vec::as_slice))),
                Confined::Stage(objects.path()),
            )?;
        }
        let mut left_out: Vec<String> = oversized
            .iter()
            .chain(refused.iter())
            .map(|p| String::from_utf8_lossy(p).into_owned())
            .collect();
        left_out.sort();
        let private = self.private_blobs(&modes)?;
        let moved = self.absorb(&objects)?;
        drop(objects);
        if !private.is_empty() {
            let moved: std::collections::HashSet<&String> = moved.iter().collect();
            let new: Vec<String> = private
                .into_iter()
                .filter(|id| moved.contains(id))
                .collect();
            self.owner_only(&new);
        }
        let tree = self.stdout(&["write-tree"])?;
        modes.sort();
        modes.dedup();
        Ok(Staged {
            tree,
            left_out,
            modes,
        })
    }

    /// The one step before staging (see the module's doc): drops an index naming paths
    /// outside the work tree, then the stores and the oversized files from it. Returns the
    /// oversized files and the untracked nested repositories (workspace-relative, as git
    /// names them).
    #[allow(clippy::type_complexity)]
    fn sanitise_index(
        &self,
        stores: &StoresBeneath,
        modes: &mut Vec<(Vec<u8>, u32)>,
    ) -> Result<(Vec<Vec<u8>>, Vec<Vec<u8>>, Vec<Vec<u8>>), SnapshotError> {
        if self.index.is_file() {
            let listed = self.run(&["ls-files", "-z", "--cached", "--full-name"], None)?;
            if keel_tools::safe_git::bad_index_path(&listed.stdout).is_some() {
                std::fs::remove_file(&self.index).map_err(|e| {
                    self.fail(
                        &["ls-files"],
                        format!("cannot drop an index naming files outside the work tree: {e}"),
                    )
                })?;
            }
        }
        let (left_out, nested, refused) = self.unstageable(stores, modes)?;
        // What git cannot record goes from the index too: a FIFO where a tracked file was is
        // then a deleted file, which an undo brings back (R11-10).
        if self.index.is_file() && !(stores.is_empty() && left_out.is_empty() && refused.is_empty())
        {
            let drop: Vec<Vec<u8>> = stores
                .selecting()
                .map(String::into_bytes)
                .chain(
                    left_out
                        .iter()
                        .chain(refused.iter())
                        .map(|p| literal("", p)),
                )
                .collect();
            self.run_locked(
                &[
                    "rm",
                    "--cached",
                    "-r",
                    "-f",
                    "-q",
                    "--ignore-unmatch",
                    "--pathspec-from-file=-",
                    "--pathspec-file-nul",
                ],
                Some(&nul_list(drop.iter().map(Vec::as_slice))),
            )?;
        }
        Ok((left_out, nested, refused))
    }

    /// What `git add` must not be given: the files it would read (untracked and not ignored,
    /// or changed since Keel's index saw them) that are larger than the limit, the
    /// untracked nested repositories (listed by git as `dir/`), and the names git refuses to
    /// record ([`git_refuses`]), each sorted. Sizes are read
    /// with `lstat` (a link is never followed); the apparent size counts, so a sparse file is
    /// as large as it claims (git would read every zero of it).
    #[allow(clippy::type_complexity)]
    fn unstageable(
        &self,
        stores: &StoresBeneath,
        modes: &mut Vec<(Vec<u8>, u32)>,
    ) -> Result<(Vec<Vec<u8>>, Vec<Vec<u8>>, Vec<Vec<u8>>), SnapshotError> {
        let limit = self.max_file_bytes();
        let mut args: Vec<String> = [
            "ls-files",
            "-z",
            "-t",
            "--cached",
            "--others",
            "--modified",
            "--exclude-standard",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.extend(self.pathspec(stores));
        let out = self.run_in_work_tree(&as_strs(&args), None, Confined::Read)?;
        let mut big: Vec<Vec<u8>> = Vec::new();
        let mut nested: Vec<Vec<u8>> = Vec::new();
        let mut refused: Vec<Vec<u8>> = Vec::new();
        // What `git add` would read, by size (for the snapshot's total budget).
        let mut read: Vec<(u64, Vec<u8>)> = Vec::new();
        for entry in out.stdout.split(|b| *b == 0).filter(|p| !p.is_empty()) {
            // `-t`: a status letter and a space before each path. Tracked files are listed
            // (`H`, `S`) only for their mode (red-team pass 7, R7-8: a tracked 0600 file the
            // model deleted came back 0644, as no snapshot had noted it).
            let (tag, rel) = match entry {
                [tag, b' ', rel @ ..] if !rel.is_empty() => (*tag, rel),
                _ => continue,
            };
            if matches!(tag, b'H' | b'S') {
                if let Ok(m) =
                    std::fs::symlink_metadata(self.workspace.join(OsStr::from_bytes(rel)))
                    && m.file_type().is_file()
                    && super::modes::is_private(m.permissions().mode())
                {
                    modes.push((rel.to_vec(), m.permissions().mode() & 0o7777));
                }
                continue;
            }
            if let Some(dir) = rel.strip_suffix(b"/") {
                nested.push(dir.to_vec());
                continue;
            }
            let meta = std::fs::symlink_metadata(self.workspace.join(OsStr::from_bytes(rel)));
            let symlink = meta.as_ref().is_ok_and(|m| m.file_type().is_symlink());
            // A FIFO, socket or device where a file was: git records none of them, and its
            // `add` failed the whole snapshot — every `keel undo` of the session with it
            // (red-team pass 11, R11-10). Left out and named, like a name git refuses.
            let special = meta.as_ref().is_ok_and(|m| {
                let t = m.file_type();
                !(t.is_file() || t.is_symlink() || t.is_dir())
            });
            if special || git_refuses(rel, symlink) {
                refused.push(rel.to_vec());
                continue;
            }
            if let Ok(m) = &meta
                && m.file_type().is_file()
                && super::modes::is_private(m.permissions().mode())
            {
                modes.push((rel.to_vec(), m.permissions().mode() & 0o7777));
            }
            let Some(limit) = limit else {
                continue;
            };
            match meta {
                Ok(m) if m.file_type().is_file() && m.len() > limit => big.push(rel.to_vec()),
                Ok(m) if m.file_type().is_file() => read.push((m.len(), rel.to_vec())),
                _ => {}
            }
        }
        if let Some(limit) = limit {
            big.extend(self.over_budget(limit, read));
        }
        for list in [&mut big, &mut nested, &mut refused] {
            list.sort();
            list.dedup();
        }
        Ok((big, nested, refused))
    }
}

impl Git {
    /// The blob ids Keel's index holds for the private files `modes` names (see
    /// [`Git::owner_only`]).
    fn private_blobs(&self, modes: &[(Vec<u8>, u32)]) -> Result<Vec<String>, SnapshotError> {
        if modes.is_empty() || !self.index.is_file() {
            return Ok(Vec::new());
        }
        let private: std::collections::HashSet<&[u8]> =
            modes.iter().map(|(p, _)| p.as_slice()).collect();
        // `--format` needs git 2.38; an older git leaves the objects as it wrote them.
        let Ok(out) = self.run(
            &[
                "ls-files",
                "--cached",
                "-z",
                "--format=%(objectname) %(path)",
            ],
            None,
        ) else {
            return Ok(Vec::new());
        };
        Ok(out
            .stdout
            .split(|b| *b == 0)
            .filter_map(|e| {
                let (id, path) = e.split_at_checked(e.iter().position(|b| *b == b' ')?)?;
                let id = std::str::from_utf8(id).ok()?;
                (private.contains(path.get(1..)?)
                    && id.len() >= 40
                    && id.bytes().all(|b| b.is_ascii_hexdigit()))
                .then(|| id.to_string())
            })
            .collect())
    }
}

/// How many times the per-file limit one snapshot may read of new or changed files.
const STAGE_BUDGET_FILES: u64 = 20;

impl Git {
    /// The files of `read` (size, path) left out so that one snapshot reads at most
    /// [`STAGE_BUDGET_FILES`] times the per-file `limit` of new or changed files, and at most a
    /// quarter of the space left where its objects go (red-team pass 5, R5-11, and pass 6,
    /// R6-8: a command making thousands of files just under the per-file limit had each
    /// snapshot copy all of them into the repository until the disk was full). The largest
    /// go first; they are left out and left alone like oversized files.
    fn over_budget(&self, limit: u64, mut read: Vec<(u64, Vec<u8>)>) -> Vec<Vec<u8>> {
        let free = keel_tools::shell::disk::free_bytes(self.git_dir()).unwrap_or(u64::MAX);
        let budget = limit.saturating_mul(STAGE_BUDGET_FILES).min(free / 4);
        let mut total: u64 = read.iter().map(|(n, _)| *n).sum();
        if total <= budget {
            return Vec::new();
        }
        read.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
        let mut out = Vec::new();
        for (n, rel) in read {
            if total <= budget {
                break;
            }
            total -= n;
            out.push(rel);
        }
        out
    }

    /// The files the repository ignores, one by one (an ignored directory — a cache, build
    /// output — is not looked into), that are regular files or links of at most
    /// [`IGNORED_MAX_BYTES`] (and the size limit): at most [`IGNORED_MAX_FILES`] of them and
    /// [`IGNORED_MAX_TOTAL`] bytes, in path order.
    fn small_ignored(
        &self,
        stores: &StoresBeneath,
        modes: &mut Vec<(Vec<u8>, u32)>,
    ) -> Result<Vec<Vec<u8>>, SnapshotError> {
        let limit = self
            .max_file_bytes()
            .map_or(IGNORED_MAX_BYTES, |l| l.min(IGNORED_MAX_BYTES));
        let mut args: Vec<String> = [
            "ls-files",
            "-z",
            "--others",
            "--ignored",
            "--exclude-standard",
            "--directory",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.extend(self.pathspec(stores));
        let out = self.run_in_work_tree(&as_strs(&args), None, Confined::Read)?;
        let mut listed: Vec<&[u8]> = out
            .stdout
            .split(|b| *b == 0)
            .filter(|p| !p.is_empty() && !p.ends_with(b"/"))
            .collect();
        listed.sort();
        let mut picked = Vec::new();
        let mut total = 0u64;
        for rel in listed {
            let Ok(meta) = std::fs::symlink_metadata(self.workspace.join(OsStr::from_bytes(rel)))
            else {
                continue;
            };
            let kind = meta.file_type();
            if !(kind.is_file() || kind.is_symlink())
                || meta.len() > limit
                || git_refuses(rel, kind.is_symlink())
            {
                continue;
            }
            if picked.len() >= IGNORED_MAX_FILES || total + meta.len() > IGNORED_MAX_TOTAL {
                break;
            }
            total += meta.len();
            if kind.is_file() && super::modes::is_private(meta.permissions().mode()) {
                modes.push((rel.to_vec(), meta.permissions().mode() & 0o7777));
            }
            picked.push(rel.to_vec());
        }
        Ok(picked)
    }
}

/// How many times a snapshot leaves out a name git refused that [`git_refuses`] did not
/// foresee, and stages again.
const MAX_REFUSAL_ROUNDS: usize = 8;

/// Whether git may refuse to record the work-tree path `rel`: the rule the overwrite checks
/// share ([`keel_tools::recorded::git_refuses`]).
pub(crate) use keel_tools::recorded::git_refuses;

/// The path of one file `git add` could not take, from its error: a name it refuses
/// ("invalid path 'X'"), a file it cannot read ("unable to index file 'X'": `chmod 000` as a
/// normal user) or one that vanished while it ran ("unable to stat 'X'": a command creating
/// and deleting it). Such a file is left out so the rest is recorded.
pub(crate) fn invalid_path(message: &str) -> Option<Vec<u8>> {
    [
        "invalid path '",
        "unable to index file '",
        "unable to stat '",
        "unable to add '",
    ]
    .iter()
    .find_map(|marker| {
        let rest = message.split(marker).nth(1)?;
        let end = rest.find('\'')?;
        let path = &rest[..end];
        (!path.is_empty()).then(|| path.as_bytes().to_vec())
    })
}

/// The most ignored files one snapshot records.
const IGNORED_MAX_FILES: usize = 1_000;
/// The most bytes of ignored files one snapshot records.
const IGNORED_MAX_TOTAL: u64 = 64 * 1024 * 1024;

/// Copies the user's index as Keel's first one, when Keel has none yet: both opened beneath
/// the open git directory, the source only as a regular file (no link, no FIFO), the copy
/// created new (never through a link, never over anything). Best effort: without the seed
/// git hashes every file once.
fn seed_index(git_dir: &Path, index: &Path) {
    let Ok(dir) = keel_tools::beneath::DirHandle::open(git_dir) else {
        return;
    };
    let Ok(name) = index.strip_prefix(git_dir) else {
        return;
    };
    let Ok(target) = dir.resolve_entry(name) else {
        return;
    };
    if !matches!(target.info(), Ok(None)) {
        return; // already there (or unreadable): nothing to seed
    }
    let Ok(bytes) = dir
        .resolve_entry(Path::new("index"))
        .map_err(|e| std::io::Error::other(e.to_string()))
        .and_then(|source| source.read_bounded(MAX_SEED_INDEX))
    else {
        return;
    };
    let _ = target.write_atomic(&bytes, keel_tools::fs::WriteMode::CreateNew, Some(0o600));
}
