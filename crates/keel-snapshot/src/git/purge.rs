//! Purging copies of protected stores from snapshots taken before stores were left out
//! (red-team pass 3, R3-2). Until that fix, a workspace holding a store (the home directory as
//! workspace: `~/.ssh`, `~/.aws`) had it copied into every snapshot, where any command can
//! read the objects back (`git cat-file --batch-all-objects`). Staging leaves stores out now;
//! this step removes what older snapshots kept, once per list of stores:
//!
//! 1. the snapshot refs (`refs/keel/…`) whose history holds a store path are deleted — their
//!    undo is lost, the workspace is not touched;
//! 2. the objects only those refs reached (not any other ref, reflog or index: a store file
//!    the user committed stays theirs) are deleted: loose ones by name, packed ones after
//!    `git repack -A -d` made them loose (what `git gc` does to unreachable packed objects);
//! 3. Keel's index is dropped (it may name those objects; the next snapshot rebuilds it);
//! 4. a marker with the store list's hash is written, so this runs again only when the list
//!    of stores beneath the workspace changes.
//!
//! A repository with no store beneath its workspace is never looked at.

use std::path::Path;

use super::{Git, RepoKind, as_strs, text};
use crate::SNAPSHOT_REFS;
use crate::error::SnapshotError;
use crate::layout::{PROBE_DEADLINE, output_within};
use crate::stores::StoresBeneath;

/// The marker file in the snapshot repository's git directory: the hash of the store list
/// last checked.
const MARKER: &str = "keel-stores-purged";

/// Keel's ref namespace (snapshots, checkpoints, undo states).
fn keel_refs() -> &'static str {
    SNAPSHOT_REFS
        .strip_suffix("/snapshots")
        .unwrap_or("refs/keel")
}

impl Git {
    /// Removes copies of the stores beneath the workspace from Keel's snapshots (see the
    /// module); returns how many snapshot refs were deleted.
    pub(crate) fn purge_stores(&self) -> Result<usize, SnapshotError> {
        if !self.exists() {
            return Ok(0);
        }
        let stores = StoresBeneath::of(&self.workspace)?;
        if stores.is_empty() {
            return Ok(0);
        }
        let mut listed: Vec<String> = stores.selecting().collect();
        listed.sort();
        let mark = format!(
            "{}\n",
            keel_tools::trust::sha256_hex(listed.join("\0").as_bytes())
        );
        let marker = self.git_dir().join(MARKER);
        if keel_tools::project::read_in_dir(&marker, 1024)
            .is_ok_and(|have| have.as_deref() == Some(mark.as_str()))
        {
            return Ok(0);
        }
        let dropped = self.drop_store_refs(&listed)?;
        if !dropped.is_empty() {
            self.delete_store_objects(&dropped)?;
        }
        self.write_setting(MARKER, &mark)?;
        Ok(dropped.len())
    }

    /// Deletes every Keel ref whose history names a store path; returns the commits they
    /// pointed at.
    fn drop_store_refs(&self, stores: &[String]) -> Result<Vec<String>, SnapshotError> {
        let refs = self.refs(&format!("{}/", keel_refs()))?;
        if refs.is_empty() {
            return Ok(Vec::new());
        }
        // The commits that add, change or remove a store path (a history never naming one
        // lists none): read from stdin, so any number of refs fits.
        let mut args = vec!["rev-list", "--stdin", "--"];
        args.extend(stores.iter().map(String::as_str));
        let tips: String = refs.iter().map(|r| format!("{}\n", r.commit)).collect();
        let out = self.run(&args, Some(tips.as_bytes()))?;
        let touching: Vec<String> = text(&out.stdout).lines().map(str::to_string).collect();
        if touching.is_empty() {
            return Ok(Vec::new());
        }
        // The refs reaching any of them.
        let mut args: Vec<String> = vec!["for-each-ref".into(), "--format=%(refname)".into()];
        for c in &touching {
            args.push(format!("--contains={c}"));
        }
        args.push(format!("{}/", keel_refs()));
        let names: Vec<String> = text(&self.run(&as_strs(&args), None)?.stdout)
            .lines()
            .map(str::to_string)
            .collect();
        let commits: Vec<String> = refs
            .iter()
            .filter(|r| names.contains(&r.name))
            .map(|r| r.commit.clone())
            .collect();
        self.delete_refs(&names)?;
        Ok(commits)
    }

    /// Deletes the objects only `commits` reached, and Keel's index.
    fn delete_store_objects(&self, commits: &[String]) -> Result<(), SnapshotError> {
        // Keel's index may name the store's blobs (and would keep them "reachable" below).
        match std::fs::remove_file(&self.index) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(self.fail(&["rm", "index"], format!("cannot drop Keel's index: {e}")));
            }
        }
        let orphans = self.objects_only_reached_by(commits)?;
        if orphans.is_empty() {
            return Ok(());
        }
        let objects = self.common_dir.join("objects");
        let mut packed = false;
        for oid in &orphans {
            packed |= !remove_loose(&objects, oid);
        }
        if packed {
            // Unreachable packed objects become loose (as `git gc` makes them), then go.
            self.run(&["repack", "-A", "-d", "-q"], None)?;
            for oid in &orphans {
                remove_loose(&objects, oid);
            }
        }
        let left = self.still_present(&orphans)?;
        if left > 0 {
            return Err(self.fail(
                &["repack"],
                format!(
                    "{left} object(s) of old snapshots holding a protected store could not be deleted (a kept pack or an alternate object store?); delete them with `git gc --prune=now` in {}",
                    self.common_dir.display()
                ),
            ));
        }
        Ok(())
    }

    /// The objects reachable from `commits` and from no ref, reflog or index of the
    /// repository (the user's own index in their repository). Computed as a difference of
    /// two full lists: `rev-list --objects A --not --all` leaves out only what the walk from
    /// A meets, not every object the other refs reach.
    fn objects_only_reached_by(&self, commits: &[String]) -> Result<Vec<String>, SnapshotError> {
        let mut from = vec!["rev-list", "--objects", "--no-object-names"];
        from.extend(commits.iter().map(String::as_str));
        let candidates = self.object_list(&from)?;
        let kept: std::collections::HashSet<String> = self
            .object_list(&[
                "rev-list",
                "--objects",
                "--no-object-names",
                "--all",
                "--reflog",
                "--indexed-objects",
            ])?
            .into_iter()
            .collect();
        Ok(candidates
            .into_iter()
            .filter(|o| !kept.contains(o))
            .collect())
    }

    /// The object ids `args` (a `rev-list --objects`) prints, with the user's index as the
    /// index in their repository.
    fn object_list(&self, args: &[&str]) -> Result<Vec<String>, SnapshotError> {
        let mut c = self.command(args)?;
        if let RepoKind::User { git_dir } = &self.kind {
            c.env("GIT_INDEX_FILE", git_dir.join("index"));
        }
        let out = output_within(c, None, crate::layout::WORK_DEADLINE)
            .map_err(|e| self.fail(args, e.to_string()))?;
        if !out.status.success() {
            return Err(self.fail(args, text(&out.stderr)));
        }
        Ok(text(&out.stdout).lines().map(str::to_string).collect())
    }

    /// How many of `oids` the repository still has.
    fn still_present(&self, oids: &[String]) -> Result<usize, SnapshotError> {
        let input: String = oids.iter().map(|o| format!("{o}\n")).collect();
        let args = ["cat-file", "--batch-check=%(objectname)"];
        let c = self.command(&args)?;
        let out = output_within(c, Some(input.as_bytes()), PROBE_DEADLINE)
            .map_err(|e| self.fail(&args, e.to_string()))?;
        Ok(text(&out.stdout)
            .lines()
            .filter(|l| !l.ends_with(" missing"))
            .count())
    }
}

/// Deletes the loose object `oid`; `false` when there is none (it is packed).
fn remove_loose(objects: &Path, oid: &str) -> bool {
    let (Some(dir), Some(rest)) = (oid.get(..2), oid.get(2..)) else {
        return true;
    };
    std::fs::remove_file(objects.join(dir).join(rest)).is_ok()
}
