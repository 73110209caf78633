//! Shared helpers: a copy of the fixture repository in a temp dir, indexes over it.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use keel_index::{Hit, Index, IndexSettings, NoProgress, SearchKind, SearchQuery};

pub fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/repo")
}

pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let dest = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &dest);
        } else {
            std::fs::copy(entry.path(), dest).unwrap();
        }
    }
}

/// A temp copy of the fixture repository.
pub fn repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&fixture(), dir.path());
    dir
}

pub fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// A freshly built index of `root`, stored outside it.
pub fn fresh(root: &Path) -> (tempfile::TempDir, Index) {
    let db = tempfile::tempdir().unwrap();
    let mut idx =
        Index::open_at(root, &db.path().join("fresh.db"), IndexSettings::default()).unwrap();
    idx.refresh(&NoProgress).unwrap();
    (db, idx)
}

/// Lines of `a` missing from `b` and the reverse, for readable failures.
pub fn diff(a: &str, b: &str) -> String {
    let la: std::collections::BTreeSet<&str> = a.lines().collect();
    let lb: std::collections::BTreeSet<&str> = b.lines().collect();
    let mut out = String::new();
    for l in la.difference(&lb) {
        out.push_str(&format!("- {l}\n"));
    }
    for l in lb.difference(&la) {
        out.push_str(&format!("+ {l}\n"));
    }
    out
}

/// The first ten results of a search of `kind` for `text`, each printed with its reasons.
pub fn top_ten(idx: &Index, text: &str, kind: SearchKind) -> Vec<Hit> {
    let mut q = SearchQuery::new(text);
    q.kind = kind;
    q.limit = 10;
    let hits = idx.search(&q).unwrap();
    for h in &hits {
        println!("{} {:?} {:?}", h.path, h.symbol, h.why);
    }
    hits
}
