//! Restoring a snapshot: the differences between two trees, applied to the workspace path
//! by path (removals beneath the open workspace directory, writes through Keel's index), then
//! checked. Files left out of the workspace's staging for their size are never touched.

use super::{Change, Confined, Git, Staged, as_strs};
use crate::error::SnapshotError;
use crate::report::RestoreReport;
use crate::stores::StoresBeneath;

impl Git {
    /// The differences between the workspace's trees `from` and `to`.
    fn diff(&self, from: &str, to: &str) -> Result<Vec<Change>, SnapshotError> {
        let mut args = vec![
            "diff",
            "--raw",
            "-z",
            "--no-renames",
            "--no-abbrev",
            "--no-ext-diff",
            "--relative",
            from,
            to,
        ];
        // Never a store: a restore writes, recreates and removes only what this lists.
        let spec = self.pathspec(&StoresBeneath::of(&self.workspace)?);
        args.extend(as_strs(&spec));
        let out = self.run(&args, None)?;
        let mut fields = out.stdout.split(|b| *b == 0).filter(|f| !f.is_empty());
        let mut changes = Vec::new();
        // Each change: ":oldmode newmode oldsha newsha status" then the path.
        while let (Some(meta), Some(path)) = (fields.next(), fields.next()) {
            let meta = String::from_utf8_lossy(meta);
            let parts: Vec<&str> = meta.trim_start_matches(':').split(' ').collect();
            let (Some(mode), Some(sha), Some(status)) = (parts.get(1), parts.get(3), parts.get(4))
            else {
                continue;
            };
            changes.push(Change {
                status: status.chars().next().unwrap_or('M'),
                mode: mode.to_string(),
                sha: sha.to_string(),
                path: String::from_utf8_lossy(path).into_owned(),
            });
        }
        Ok(changes)
    }

    /// Whether the tree `from` differs from the staged workspace in a path other than the
    /// files left out of it for their size.
    pub(crate) fn differs_outside_left_out(
        &self,
        from: &str,
        staged: &Staged,
    ) -> Result<bool, SnapshotError> {
        Ok(self
            .diff(from, &staged.tree)?
            .iter()
            .any(|c| !staged.leaves_alone(&c.path)))
    }

    /// Makes the workspace match `commit` (within the workspace, outside `.keel/` and ignored
    /// files) and verifies the result. Only the changed paths are touched, in the work tree
    /// and in Keel's index, so unchanged files keep their stat data (no rehash of the tree).
    /// A file over the size limit now is not removed: its content was not recorded now, so
    /// removing it could not be undone (it is reported as left alone); one the target
    /// recorded is put back (R5-4). A file the target left out for its size is not removed
    /// either (it was there, unrecorded).
    /// `current`: the workspace as the caller just staged it.
    pub(crate) fn restore(
        &self,
        commit: &str,
        current: Option<&Staged>,
    ) -> Result<RestoreReport, SnapshotError> {
        if !self.exists() {
            return Err(self.fail(&["rev-parse", commit], "no snapshot repository yet".into()));
        }
        self.check_layout()?;
        // A restore is a writer nobody approved: what it writes back is checked as a
        // command's writes are (red-team pass 8, R8-3).
        let watch = keel_tools::shell::nested_git::RestoreWatch::before(&self.workspace);
        let target = self.stdout(&["rev-parse", "--verify", &format!("{commit}^{{commit}}")])?;
        let current = match current {
            Some(staged) => staged.clone(),
            None => self.stage()?,
        };
        let mut report = RestoreReport {
            left_alone: current.left_out.clone(),
            ..RestoreReport::default()
        };
        let changes = self.diff(&current.tree, &target)?;
        let mut index_info: Vec<u8> = Vec::new();
        let mut write: Vec<u8> = Vec::new();
        // Each rewritten file's mode (R5-9): the one the snapshot noted, else the one it has.
        let (noted, target_left_out) = self.noted(&target);
        let mut modes: Vec<(String, u32)> = Vec::new();
        // A file the target recorded that grew past the size limit since (red-team pass 5,
        // R5-4: `truncate -s 1T src/main.rs` made undo leave the file as it was) is put back:
        // the snapshot's version is what the user asked for; the oversized content now could
        // not be recorded, so it is gone for a redo (said in `left_alone`'s place).
        let regrown = |c: &Change| c.status == 'A' && current.left_out.contains(&c.path);
        // Never a program the user's git runs (red-team pass 7, R7-19: a hook planted while
        // a subagent's command ran was captured by another turn's snapshot, quarantined after
        // the command, and `keel undo --to` brought it back): a restore leaves every path on
        // the one list of git's work-tree programs as it is, and says so.
        let programs: Vec<String> = keel_tools::sandbox::git_config_paths(&self.workspace)
            .into_iter()
            .filter_map(|p| p.path.to_str().map(str::to_string))
            .collect();
        let is_program = |path: &str| {
            programs.iter().any(|p| {
                path.strip_prefix(p.as_str())
                    .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
            })
        };
        for c in changes.iter().filter(|c| is_program(&c.path)) {
            report.left_alone.push(c.path.clone());
        }
        for c in changes
            .iter()
            .filter(|c| !is_program(&c.path))
            .filter(|c| !current.leaves_alone(&c.path) || regrown(c))
        {
            if regrown(c) {
                report.left_alone.retain(|p| *p != c.path);
                report.modified.push(c.path.clone());
                let mode = noted.get(&c.path).copied().or_else(|| {
                    self.mode_now(&c.path)
                        .map(|before| super::modes::kept(before, &c.mode))
                });
                if let Some(mode) = mode.filter(|_| c.mode.starts_with("100")) {
                    modes.push((c.path.clone(), mode));
                }
                index_info.extend_from_slice(
                    format!("{} {}\t{}{}", c.mode, c.sha, self.prefix, c.path).as_bytes(),
                );
                index_info.push(0);
                write.extend_from_slice(c.path.as_bytes());
                write.push(0);
                continue;
            }
            let full = format!("{}{}", self.prefix, c.path);
            match c.status {
                // Left out of the target for its size: it was there, only unrecorded.
                'D' if target_left_out.contains(&c.path) => {
                    report.left_alone.push(c.path.clone());
                    continue;
                }
                'D' => {
                    report.removed.push(c.path.clone());
                    index_info.extend_from_slice(
                        format!("0 {}\t{full}", "0".repeat(c.sha.len())).as_bytes(),
                    );
                }
                status => {
                    if status == 'A' {
                        report.recreated.push(c.path.clone());
                    } else {
                        report.modified.push(c.path.clone());
                    }
                    let mode = noted.get(&c.path).copied().or_else(|| {
                        self.mode_now(&c.path)
                            .map(|before| super::modes::kept(before, &c.mode))
                    });
                    if let Some(mode) = mode.filter(|_| c.mode.starts_with("100")) {
                        modes.push((c.path.clone(), mode));
                    }
                    index_info
                        .extend_from_slice(format!("{} {}\t{full}", c.mode, c.sha).as_bytes());
                    write.extend_from_slice(c.path.as_bytes());
                    write.push(0);
                }
            }
            index_info.push(0);
        }
        // Removals first, so a directory that becomes a file again has room.
        for path in &report.removed {
            self.remove(path)?;
        }
        if !index_info.is_empty() {
            self.run(&["update-index", "-z", "--index-info"], Some(&index_info))?;
        }
        if !write.is_empty() {
            // Confined: it reads `.gitattributes` from the work tree and writes through
            // directories a running command may swap for links (the writes land only where a
            // command could write). Without `-u` it leaves Keel's index alone (the staging
            // below records the restored files' stat data), so it needs no write to the git
            // directory.
            self.run_in_work_tree(
                &["checkout-index", "--force", "-z", "--stdin"],
                Some(&write),
                Confined::Checkout,
            )?;
            for (path, mode) in &modes {
                self.set_mode(path, *mode);
            }
        }
        // Ignored files kept beside the repository's objects (R6-17).
        self.restore_ignored(&current.tree, &target, &mut report)?;
        let after = self.stage()?;
        let left: Vec<Change> = self
            .diff(&after.tree, &target)?
            .into_iter()
            .filter(|c| {
                !after.leaves_alone(&c.path)
                    && !target_left_out.contains(&c.path)
                    && !is_program(&c.path)
            })
            .collect();
        if !left.is_empty() {
            let detail = left
                .iter()
                .take(10)
                .map(|c| format!("{} {}", c.status, c.path))
                .collect::<Vec<_>>()
                .join(", ");
            return Err(SnapshotError::Mismatch {
                commit: target,
                detail: format!("still different: {detail}"),
            });
        }
        report.modified.sort();
        report.left_alone.sort();
        report.left_alone.dedup();
        report.recreated.sort();
        report.removed.sort();
        report.checked = watch
            .check_and_report()
            .map(|r| format!("After the restore, checked as a command nobody approved:\n{r}"));
        Ok(report)
    }

    /// Deletes a workspace file the snapshot does not have, then its parent directories that
    /// became empty — beneath the open workspace directory, so a directory on the way that
    /// was swapped for a symlink leads nowhere outside.
    fn remove(&self, rel: &str) -> Result<(), SnapshotError> {
        let path = self.workspace.join(rel);
        let io = |source| SnapshotError::Io {
            action: "remove",
            path: path.display().to_string(),
            source,
        };
        let ws = keel_tools::Workspace::new(&self.workspace)
            .map_err(|e| io(std::io::Error::other(e.to_string())))?;
        // A path through a link out, or already gone: nothing of the workspace to delete.
        let Ok(target) = ws.locate_entry(rel) else {
            return Ok(());
        };
        match target.info() {
            // A nested repository (gitlink): not Keel's to delete.
            Ok(Some(info)) if info.kind == keel_tools::fs::FileKind::Dir => return Ok(()),
            Ok(Some(_)) => {}
            _ => return Ok(()), // already gone
        }
        target.remove_file().map_err(io)?;
        let mut dir = std::path::Path::new(rel).parent();
        while let Some(d) = dir.filter(|d| !d.as_os_str().is_empty()) {
            let removed = d
                .to_str()
                .and_then(|d| ws.locate(d).ok())
                .is_some_and(|t| t.remove_empty_dir().is_ok());
            if !removed {
                break; // not empty (or not ours): stop climbing
            }
            dir = d.parent();
        }
        Ok(())
    }
}
