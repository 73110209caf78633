//! Snapshots inside the loop: the turn's snapshot before its first write (`turn.rs`). The
//! snapshot store itself — shadow refs, restores, undo — is the `keel-snapshot` crate.

mod turn;
