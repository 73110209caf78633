//! The workspace's files as data: snapshots (for a run's starting tree, each node's diff, the
//! copies `parallel` branches work in) and their comparison. `.git` and `.keel` are never
//! part of a tree, and `.gitignore`d files (build output) are left out.

use std::collections::BTreeMap;
use std::path::Path;

use keel_tools::Workspace;
use keel_tools::fs::WriteMode;
use keel_tools::project::ProjectDir;
use serde::{Deserialize, Serialize};

/// Files larger than this are not snapshotted (replay reports them as unavailable).
pub const MAX_FILE_BYTES: u64 = 4 * 1024 * 1024;
/// A tree larger than this in total is not snapshotted.
pub const MAX_TREE_BYTES: u64 = 64 * 1024 * 1024;

/// A file's bytes: text as is, anything else hex-encoded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Blob {
    Text(String),
    Binary { hex: String },
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

    pub fn bytes(&self) -> Vec<u8> {
        match self {
            Blob::Text(s) => s.as_bytes().to_vec(),
            Blob::Binary { hex } => (0..hex.len() / 2)
                .filter_map(|i| u8::from_str_radix(hex.get(i * 2..i * 2 + 2)?, 16).ok())
                .collect(),
        }
    }
}

/// Relative path → contents.
pub type Tree = BTreeMap<String, Blob>;

/// What changed between two trees: a path's new contents, or `None` when it was deleted.
pub type Changes = BTreeMap<String, Option<Blob>>;

/// Reads the workspace's files. Errors say which file could not be read or that the tree is
/// too large to snapshot.
pub fn snapshot(root: &Path) -> Result<Tree, String> {
    let mut tree = Tree::new();
    let mut total = 0u64;
    let project = ProjectDir::open(root).map_err(|e| format!("cannot open the workspace: {e}"))?;
    // `.gitignore` files are read as project files (a FIFO must not hang the snapshot).
    let rules = keel_index::ignore_rules::IgnoreRules::new(root);
    let base = root.to_path_buf();
    let walker = keel_index::ignore_rules::configure(&mut ignore::WalkBuilder::new(root))
        .hidden(false)
        .require_git(false)
        .filter_entry(move |e| {
            let name = e.file_name();
            if e.depth() > 0 && (name == ".git" || name == ".keel") {
                return false;
            }
            let is_dir = e.file_type().is_some_and(|t| t.is_dir());
            match e.path().strip_prefix(&base).ok().and_then(|r| r.to_str()) {
                Some(rel) if !rel.is_empty() => !rules.ignored(rel, is_dir),
                _ => true,
            }
        })
        .build();
    for entry in walker {
        let entry = entry.map_err(|e| format!("cannot read the workspace: {e}"))?;
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        let path = entry.path();
        let Ok(rel) = path.strip_prefix(root) else {
            continue;
        };
        let len = entry.metadata().map(|m| m.len()).unwrap_or(0);
        if len > MAX_FILE_BYTES {
            return Err(format!(
                "{} is larger than {} MB; a flow's trace snapshots the workspace and cannot hold it (add it to .gitignore)",
                rel.display(),
                MAX_FILE_BYTES / 1024 / 1024
            ));
        }
        total += len;
        if total > MAX_TREE_BYTES {
            return Err(format!(
                "the workspace holds more than {} MB of files outside .gitignore; too large to snapshot for a flow's trace",
                MAX_TREE_BYTES / 1024 / 1024
            ));
        }
        let rel = rel_string(rel);
        // Read beneath the open workspace: a file swapped for a symlink out, a FIFO or a
        // device after the walk listed it is refused, never followed or waited on.
        let bytes = project
            .read_bytes(&rel, MAX_FILE_BYTES)
            .map_err(|e| format!("cannot snapshot the workspace: {e}"))?
            .unwrap_or_default();
        tree.insert(rel, Blob::from_bytes(bytes));
    }
    Ok(tree)
}

fn rel_string(rel: &Path) -> String {
    rel.components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("/")
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
/// refused.
pub fn apply(root: &Path, changes: &Changes) -> Result<(), String> {
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
                let target = ws
                    .locate(path)
                    .map_err(|e| format!("refusing to write `{path}`: {e}"))?;
                target
                    .write_atomic(&b.bytes(), WriteMode::Replace, None)
                    .map_err(|e| format!("cannot write {}: {e}", shown.display()))?;
            }
            None => {
                let Ok(target) = ws.locate_entry(path) else {
                    continue; // through a link out or a file: nothing of ours to delete
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

/// Writes a whole tree into `root` (an empty directory).
pub fn materialize(root: &Path, tree: &Tree) -> Result<(), String> {
    let changes: Changes = tree
        .iter()
        .map(|(p, b)| (p.clone(), Some(b.clone())))
        .collect();
    apply(root, &changes)
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
        eat(&blob.bytes());
        eat(&[0xff]);
    }
    format!("{h:016x}")
}
