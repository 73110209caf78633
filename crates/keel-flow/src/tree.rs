//! The workspace's files as data: snapshots (for a run's starting tree, each node's diff, the
//! copies `parallel` branches work in) and their comparison. `.git` and `.keel` are never
//! part of a tree, and neither are `.gitignore`d files or untracked build and dependency
//! directories (`[snapshots] build_dirs`: `target/`, `node_modules/`, …): build output is not
//! the user's work. A file too large for a trace is recorded by its size and SHA-256.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

use keel_fs::walk::{Visit, WalkOptions};
use keel_tools::build_dirs::BuildDirs;
use keel_tools::fs::WriteMode;
use keel_tools::project::ProjectDir;
use keel_tools::{PathError, Workspace};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Files larger than this are recorded by their hash, not their bytes.
pub const MAX_FILE_BYTES: u64 = 4 * 1024 * 1024;
/// Once a tree's recorded bytes pass this, further files are recorded by their hash.
pub const MAX_TREE_BYTES: u64 = 64 * 1024 * 1024;

/// A file's bytes: text as is, anything else hex-encoded; a large file by its hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Blob {
    Text(String),
    Binary {
        hex: String,
    },
    /// Too large for a trace: its SHA-256 (hex) and size. Copied from the directory it was
    /// recorded in when it must be written again.
    Large {
        sha256: String,
        size: u64,
    },
}

impl Blob {
    pub fn from_bytes(bytes: Vec<u8>) -> Blob {
        match String::from_utf8(bytes) {
            Ok(s) => Blob::Text(s),
            Err(e) => Blob::Binary {
                hex: e.as_bytes().iter().map(|b| format!("{b:02x}")).collect(),
            },
        }
    }

    /// The bytes, when the blob holds them (not for [`Blob::Large`]).
    pub fn bytes(&self) -> Option<Vec<u8>> {
        match self {
            Blob::Text(s) => Some(s.as_bytes().to_vec()),
            Blob::Binary { hex } => Some(
                (0..hex.len() / 2)
                    .filter_map(|i| u8::from_str_radix(hex.get(i * 2..i * 2 + 2)?, 16).ok())
                    .collect(),
            ),
            Blob::Large { .. } => None,
        }
    }

    /// The SHA-256 of the file's bytes (hex), whichever way it is recorded.
    pub fn sha256(&self) -> String {
        match self {
            Blob::Large { sha256, .. } => sha256.clone(),
            other => hex(&Sha256::digest(other.bytes().unwrap_or_default())),
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The SHA-256 (hex) and size of a regular file resolved beneath a workspace, read in pieces.
fn file_sha256(target: &keel_tools::beneath::ResolvedPath) -> std::io::Result<(String, u64)> {
    let (mut f, _) = target.open_regular()?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut size = 0u64;
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        size += n as u64;
        h.update(&buf[..n]);
    }
    Ok((hex(&h.finalize()), size))
}

/// Relative path → contents.
pub type Tree = BTreeMap<String, Blob>;

/// What changed between two trees: a path's new contents, or `None` when it was deleted.
pub type Changes = BTreeMap<String, Option<Blob>>;

/// Reads the workspace's files, leaving out `.git`, `.keel`, ignored files and the untracked
/// `build_dirs`. Errors say which file or directory could not be read.
pub fn snapshot(root: &Path, build_dirs: &BuildDirs) -> Result<Tree, String> {
    let mut tree = Tree::new();
    let mut total = 0u64;
    let project = ProjectDir::open(root).map_err(|e| format!("cannot open the workspace: {e}"))?;
    // Large files are hashed as they are read, opened beneath the same workspace.
    let ws = Workspace::new(root).map_err(|e| format!("cannot open the workspace: {e}"))?;
    // `.gitignore` files are read as project files (a FIFO must not hang the snapshot).
    let rules = keel_index::ignore_rules::IgnoreRules::new(root);
    let skipper = build_dirs.skipper(root);
    // Listed beneath the open workspace (`keel_fs::walk`): a directory swapped for a symlink
    // out mid-walk is never entered, so no file outside ends up in a tree.
    let mut listed = Vec::new();
    let mut failure = None;
    ws.handle()
        .walk_sorted(Path::new(""), WalkOptions::default(), |e| {
            let is_dir = e.is_dir();
            if e.depth == 1 && (e.name() == ".git" || e.name() == ".keel") {
                return Visit::Skip;
            }
            if is_dir && skipper.skips(&e.rel) {
                return Visit::Skip;
            }
            let Some(rel) = e.rel_str() else {
                failure = Some(format!(
                    "cannot snapshot the workspace: `{}` is not a UTF-8 name",
                    e.rel.display()
                ));
                return Visit::Stop;
            };
            if rules.ignored(rel, is_dir) {
                return Visit::Skip;
            }
            if e.is_file() {
                listed.push((rel.to_string(), e.len));
            }
            Visit::Continue
        })
        .map_err(|e| format!("cannot read the workspace: {e}"))?;
    if let Some(failure) = failure {
        return Err(failure);
    }
    for (rel, len) in listed {
        let blob = if len > MAX_FILE_BYTES || total + len > MAX_TREE_BYTES {
            // Hashed beneath the open workspace: a file swapped for a symlink out, a FIFO or
            // a device after the walk listed it is refused, never followed or waited on.
            let (sha256, size) = ws
                .locate(&rel)
                .map_err(|e| e.to_string())
                .and_then(|t| file_sha256(&t).map_err(|e| e.to_string()))
                .map_err(|e| format!("cannot snapshot the workspace: `{rel}`: {e}"))?;
            Blob::Large { sha256, size }
        } else {
            total += len;
            // Read beneath the open workspace, like the large files above.
            let bytes = project
                .read_bytes(&rel, MAX_FILE_BYTES)
                .map_err(|e| format!("cannot snapshot the workspace: {e}"))?
                .unwrap_or_default();
            Blob::from_bytes(bytes)
        };
        tree.insert(rel, blob);
    }
    Ok(tree)
}

/// What turns `before` into `after`.
pub fn diff(before: &Tree, after: &Tree) -> Changes {
    let mut out = Changes::new();
    for (path, blob) in after {
        if before.get(path) != Some(blob) {
            out.insert(path.clone(), Some(blob.clone()));
        }
    }
    for path in before.keys() {
        if !after.contains_key(path) {
            out.insert(path.clone(), None);
        }
    }
    out
}

/// Writes `changes` under `root`, each file atomically and beneath the open `root`
/// directory. Paths that would leave `root` — `..`, absolute, through a symlink out — are
/// refused. A file recorded by its hash is copied from `source` (the directory it was
/// recorded in, read beneath it) when it is still there with that hash; otherwise the error
/// says it cannot be recreated.
pub fn apply(root: &Path, changes: &Changes, source: Option<&Path>) -> Result<(), String> {
    let ws = Workspace::new(root).map_err(|e| e.to_string())?;
    for (path, blob) in changes {
        let rel = Path::new(path);
        if rel.is_absolute()
            || rel
                .components()
                .any(|c| !matches!(c, std::path::Component::Normal(_)))
        {
            return Err(format!(
                "refusing to write `{path}`: not a path inside the workspace"
            ));
        }
        let shown = root.join(rel);
        match blob {
            Some(b) => {
                // What the file tools may not write, a flow's copy may not bring in: the
                // branch worked in a copy without `.git`, where `.husky/pre-commit` (named by
                // the real workspace's `core.hooksPath`) was an ordinary file (red-team pass 6,
                // R6-10). A name with glob, control or quote characters or braces is fine here: it came from a
                // real file.
                let target = match ws.locate_writable(path) {
                    Err(
                        PathError::GlobPattern(_)
                        | PathError::ControlChar { .. }
                        | PathError::Placeholder { .. }
                        | PathError::StrayQuote(_),
                    ) => ws.locate(path),
                    other => other,
                }
                .map_err(|e| format!("refusing to write `{path}`: {e}"))?;
                match b.bytes() {
                    Some(bytes) => target
                        .write_atomic(&bytes, WriteMode::Replace, None)
                        .map_err(|e| format!("cannot write {}: {e}", shown.display()))?,
                    // Streamed from `source` into the temp file, checked on the way: a
                    // large file is never held in memory whole.
                    None => copy_large(path, b, source, &target, &shown)?,
                }
            }
            None => {
                let target = match ws.locate_entry_writable(path) {
                    Ok(t) => t,
                    Err(
                        e @ (PathError::Protected(_)
                        | PathError::GitRuns { .. }
                        | PathError::DependencyTree { .. }
                        | PathError::GitReachUnknown { .. }),
                    ) => {
                        return Err(format!("refusing to delete `{path}`: {e}"));
                    }
                    // Through a link out or a file: nothing of ours to delete.
                    Err(_) => continue,
                };
                match target.remove_file() {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(format!("cannot delete {}: {e}", shown.display())),
                }
            }
        }
    }
    Ok(())
}

/// Recreates a file recorded by its hash at `target`: copied from `source` (read beneath it,
/// never through a symlink out of it) in chunks into a temp file beside `target`, hashed on
/// the way, and renamed into place only when size and SHA-256 match the record.
fn copy_large(
    rel: &str,
    blob: &Blob,
    source: Option<&Path>,
    target: &keel_tools::beneath::ResolvedPath,
    shown_target: &Path,
) -> Result<(), String> {
    let Blob::Large { sha256, size } = blob else {
        return Err(format!("`{rel}` is not recorded by its hash"));
    };
    let unavailable = |why: &str| {
        format!(
            "`{rel}` ({} MB) was recorded by its hash only (files over {} MB are), and {why}; it cannot be recreated",
            size / 1024 / 1024,
            MAX_FILE_BYTES / 1024 / 1024
        )
    };
    let Some(source) = source else {
        return Err(unavailable("the trace holds no copy"));
    };
    let shown = source.join(rel);
    let gone = || unavailable(&format!("{} is gone", shown.display()));
    let from = Workspace::new(source)
        .map_err(|_| gone())?
        .locate(rel)
        .map_err(|_| gone())?;
    let (file, _) = from.open_regular().map_err(|_| gone())?;
    let mut checked = Checked {
        // One byte more than recorded: a longer file fails the size check, not a hang.
        inner: file.take(size.saturating_add(1)),
        hash: Sha256::new(),
        read: 0,
        sha256,
        size: *size,
    };
    match target.write_atomic_from(&mut checked, WriteMode::Replace, None) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::InvalidData && e.to_string() == CHANGED => Err(
            unavailable(&format!("{} has changed since", shown.display())),
        ),
        Err(e) => Err(format!("cannot write {}: {e}", shown_target.display())),
    }
}

/// What [`Checked`] says at the end of a file that is not the one recorded.
const CHANGED: &str = "the file does not match its recorded size and SHA-256";

/// A reader that hashes what passes through it and, at the end, fails unless the size and
/// SHA-256 are the recorded ones (so the write it feeds is not committed).
struct Checked<'a, R> {
    inner: R,
    hash: Sha256,
    read: u64,
    sha256: &'a str,
    size: u64,
}

impl<R: Read> Read for Checked<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        if n == 0 {
            let digest = hex(&std::mem::take(&mut self.hash).finalize());
            if self.read != self.size || digest != self.sha256 {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    CHANGED,
                ));
            }
            return Ok(0);
        }
        self.hash.update(&buf[..n]);
        self.read += n as u64;
        Ok(n)
    }
}

/// Writes a whole tree into `root` (an empty directory); large files come from `source`.
pub fn materialize(root: &Path, tree: &Tree, source: Option<&Path>) -> Result<(), String> {
    let changes: Changes = tree
        .iter()
        .map(|(p, b)| (p.clone(), Some(b.clone())))
        .collect();
    apply(root, &changes, source)
}

/// A stable fingerprint of a tree (FNV-1a over paths and bytes), to compare runs.
pub fn fingerprint(tree: &Tree) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for b in bytes {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    };
    for (path, blob) in tree {
        eat(path.as_bytes());
        eat(&[0]);
        match blob.bytes() {
            Some(bytes) => eat(&bytes),
            // Recorded by its hash: the same tree always records the same files that way.
            None => eat(format!("sha256:{}", blob.sha256()).as_bytes()),
        }
        eat(&[0xff]);
    }
    format!("{h:016x}")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn build_output_is_left_out_and_large_files_are_kept_by_hash() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        std::fs::create_dir_all(root.join("src")).unwrap();
        std::fs::write(root.join("src/lib.rs"), "fn a() {}\n").unwrap();
        std::fs::create_dir_all(root.join("target/debug")).unwrap();
        std::fs::write(root.join("target/debug/app"), vec![1u8; 10]).unwrap();
        std::fs::create_dir_all(root.join("web/node_modules/x")).unwrap();
        std::fs::write(root.join("web/node_modules/x/i.js"), "x").unwrap();
        let big = vec![b'a'; (MAX_FILE_BYTES + 1) as usize];
        std::fs::write(root.join("data.bin"), &big).unwrap();

        let tree = snapshot(root, &BuildDirs::default()).unwrap();
        let paths: Vec<&str> = tree.keys().map(String::as_str).collect();
        assert_eq!(paths, ["data.bin", "src/lib.rs"]);
        let Some(Blob::Large { sha256, size }) = tree.get("data.bin") else {
            panic!("{:?}", tree.get("data.bin").map(|_| "not large"));
        };
        assert_eq!(*size, MAX_FILE_BYTES + 1);
        assert_eq!(sha256, &hex(&Sha256::digest(&big)));
        // Configured away, build directories are recorded like any other.
        let all = snapshot(root, &BuildDirs::none()).unwrap();
        assert!(all.contains_key("target/debug/app"));
        assert!(all.contains_key("web/node_modules/x/i.js"));

        // A copy gets the large file from the source, checked by its hash.
        let copy = tempfile::tempdir().unwrap();
        materialize(copy.path(), &tree, Some(root)).unwrap();
        assert_eq!(std::fs::read(copy.path().join("data.bin")).unwrap(), big);
        assert_eq!(
            fingerprint(&snapshot(copy.path(), &BuildDirs::default()).unwrap()),
            fingerprint(&tree)
        );
        // Without the source, or after it changed, it says it cannot recreate the file.
        let none = tempfile::tempdir().unwrap();
        let err = materialize(none.path(), &tree, None).unwrap_err();
        assert!(err.contains("`data.bin`") && err.contains("hash"), "{err}");
        std::fs::write(root.join("data.bin"), b"changed").unwrap();
        let err = materialize(none.path(), &tree, Some(root)).unwrap_err();
        assert!(err.contains("has changed since"), "{err}");
        // Same size, other bytes: found by the hash computed while streaming, and the file
        // already in the copy stays as it was, with no temp file left beside it.
        let mut other = big.clone();
        other[7] = b'b';
        std::fs::write(root.join("data.bin"), &other).unwrap();
        std::fs::write(copy.path().join("data.bin"), b"kept").unwrap();
        let err = materialize(copy.path(), &tree, Some(root)).unwrap_err();
        assert!(err.contains("has changed since"), "{err}");
        assert_eq!(
            std::fs::read(copy.path().join("data.bin")).unwrap(),
            b"kept"
        );
        let left: Vec<String> = std::fs::read_dir(copy.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(".keel-tmp"))
            .collect();
        assert!(left.is_empty(), "{left:?}");
    }

    #[test]
    fn a_large_blob_round_trips_through_json() {
        let t: Tree = [
            ("a".to_string(), Blob::Text("x".into())),
            ("b".to_string(), Blob::from_bytes(vec![0xff, 0])),
            (
                "c".to_string(),
                Blob::Large {
                    sha256: "ab".into(),
                    size: 9,
                },
            ),
        ]
        .into_iter()
        .collect();
        let json = serde_json::to_string(&t).unwrap();
        let back: Tree = serde_json::from_str(&json).unwrap();
        assert_eq!(back, t);
    }
}
