//! Forgetting a session's snapshots: `keel sessions rm` and `keel sessions prune` delete its
//! turn snapshots, phase checkpoints and the states its undos replaced, so the refs (and the
//! objects only they kept) do not pile up in the repository forever.

use super::{CHECKPOINT_REFS, SNAPSHOT_REFS, SnapshotError, Snapshots, UNDO_REFS, check_name};

impl Snapshots {
    /// Deletes every ref `session` left here; returns how many there were.
    pub fn forget(&self, session: &str) -> Result<usize, SnapshotError> {
        check_name(session)?;
        let mut names = Vec::new();
        for space in [SNAPSHOT_REFS, CHECKPOINT_REFS, UNDO_REFS] {
            names.extend(
                self.git
                    .refs(&format!("{space}/{session}/"))?
                    .into_iter()
                    .map(|r| r.name),
            );
        }
        self.git.delete_refs(&names)?;
        // And the ignored files' copies only those snapshots kept (R8-19).
        self.git.sweep_ignored()?;
        Ok(names.len())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::super::git_available;
    use super::*;

    #[test]
    fn forgetting_a_session_deletes_its_refs_and_keeps_the_others() {
        assert!(
            git_available(),
            "this test needs git on PATH (CI installs it: apt-get install git)"
        );
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "one").unwrap();
        let snaps = Snapshots::open(dir.path()).unwrap();
        let first = snaps.take("s1", 0, None).unwrap();
        std::fs::write(dir.path().join("a.txt"), "two").unwrap();
        snaps.take("s1", 1, Some(&first)).unwrap();
        snaps.checkpoint("s1", "planning").unwrap();
        snaps.take("s2", 0, None).unwrap();
        snaps.undo("s1", Some(0)).unwrap();

        assert_eq!(
            snaps.forget("s1").unwrap(),
            4,
            "2 turns, 1 checkpoint, 1 undo"
        );
        assert!(snaps.list("s1").unwrap().is_empty());
        assert_eq!(snaps.sessions().unwrap(), vec!["s2".to_string()]);
        assert_eq!(snaps.forget("s1").unwrap(), 0, "idempotent");
        assert!(snaps.forget("../x").is_err());
    }
}
