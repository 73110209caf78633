//! Which git commands of the snapshots' own Keel may run outside the sandbox: those that
//! read and write only the repository (objects, refs, configuration, Keel's index) and open
//! no work-tree file.

/// Whether `args` name a git command that opens no work-tree file, so Keel may run it
/// unconfined ([`super::Git::run`]): it reads and writes only objects, refs, the configuration and
/// Keel's index (`diff` here only ever compares two trees). Anything else — `add`, `status`,
/// a `diff` against the work tree, `checkout-index` (it reads the work tree's `.gitattributes`
/// — a FIFO there, encodings, filters — and writes through its directories, which a command
/// may swap for links) — runs inside the sandbox ([`super::Git::run_in_work_tree`]), where a symlink
/// swapped in by a command reaches no more than that command could (red-team pass 4, R4-7).
pub(super) fn repository_only(args: &[&str]) -> bool {
    let has = |flag: &str| args.contains(&flag);
    match args.first().copied() {
        Some(
            "rev-parse" | "config" | "write-tree" | "commit-tree" | "update-ref" | "for-each-ref"
            | "rev-list" | "repack",
        ) => true,
        Some("ls-files") => {
            has("--cached")
                && ![
                    "-m",
                    "-o",
                    "-d",
                    "-s",
                    "--modified",
                    "--others",
                    "--deleted",
                    "--stage",
                ]
                .iter()
                .any(|f| has(f))
        }
        Some("update-index") => has("--index-info") && !has("--refresh") && !has("--add"),
        Some("rm") => has("--cached"),
        // Keel's own bytes (a manifest), never a work-tree file nor its attributes.
        Some("hash-object") => has("--stdin") && has("--no-filters") && !has("--path"),
        // Tree to tree: a revision on each side, so git opens nothing in the work tree.
        Some("diff") => !has("--cached") && !has("--no-index") && diff_revisions(args) == 2,
        _ => false,
    }
}

/// How many non-option arguments `git diff` gets before `--`.
fn diff_revisions(args: &[&str]) -> usize {
    args.iter()
        .skip(1)
        .take_while(|a| **a != "--")
        .filter(|a| !a.starts_with('-'))
        .count()
}
