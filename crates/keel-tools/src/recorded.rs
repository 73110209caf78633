//! What a snapshot records — the one rule the snapshots (`keel-snapshot`) and the checks that
//! must not let the agent destroy a file no snapshot holds ([`crate::shell`]'s unrecorded
//! rule for commands, the file tools' [`crate::PathError::Unrecorded`]) share, so the two
//! cannot drift apart (red-team pass 10, R10-20: the snapshots left out an untracked 101 MiB
//! `big.dat` over `[snapshots] max_file_mb`, while the overwrite check counted it recorded
//! because git did not ignore it; `echo x > big.dat` ran unasked and undo could not bring it
//! back).
//!
//! A snapshot records tracked and untracked files up to the size bound
//! ([`DEFAULT_MAX_FILE_MB`] unless the user's `[snapshots] max_file_mb` says otherwise; the
//! engine hands the configured bound to both through the [`crate::Workspace`]), and of the
//! files the repository ignores only those listed one by one (not inside an ignored
//! directory) of at most [`IGNORED_MAX_BYTES`]; never a name git refuses ([`git_refuses`]).

/// `[snapshots] max_file_mb` when the user's configuration does not say: files larger than
/// this many MiB are left out of snapshots.
pub const DEFAULT_MAX_FILE_MB: u64 = 100;

/// The largest ignored file a snapshot records (in its side store).
pub const IGNORED_MAX_BYTES: u64 = 1024 * 1024;

/// The size bound in bytes of `max_file_mb` MiB (`None`: 0, no bound).
pub fn max_file_bytes(max_file_mb: u64) -> Option<u64> {
    (max_file_mb > 0).then(|| max_file_mb.saturating_mul(1024 * 1024))
}

/// Whether git may refuse to record the work-tree path `rel` (`git add` then fails as a
/// whole: "invalid path"): a component that is `.git` in any case, possibly with trailing
/// dots or spaces or an NTFS stream (`.git::$INDEX_ALLOCATION`), an 8.3 short name (`GIT~1`),
/// a backslash (`core.protectNTFS`, on by default), or a symlink named like git's own files
/// (`.gitattributes`, `.gitignore`, `.gitmodules`, `.mailmap`, their short names). A
/// superset of git's rule: such a path is left out of the snapshot (and named) instead of
/// taking every later snapshot and `keel undo` away (red-team pass 4, R4-18).
pub fn git_refuses(rel: &[u8], symlink: bool) -> bool {
    if rel.contains(&b'\\') {
        return true;
    }
    let components: Vec<&[u8]> = rel.split(|b| *b == b'/').collect();
    let dotgit = |c: &[u8]| {
        let lower = c.to_ascii_lowercase();
        let head = lower.split(|b| *b == b':').next().unwrap_or(&[]);
        let mut end = head.len();
        while end > 0 && matches!(head[end - 1], b' ' | b'.') {
            end -= 1;
        }
        &head[..end] == b".git" || lower.starts_with(b"git~")
    };
    if components.iter().any(|c| dotgit(c)) {
        return true;
    }
    symlink
        && components.last().is_some_and(|c| {
            let lower = c.to_ascii_lowercase();
            lower.starts_with(b".git") || lower.starts_with(b".mailmap") || lower.contains(&b'~')
        })
}
