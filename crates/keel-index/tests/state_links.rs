//! A repository shipping `.keel/index.db`, its SQLite companions, `.keel/.gitignore` or `.keel`
//! itself as symlinks: opening the index must neither create files where they point nor
//! rewrite a database they name (red-team B4).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use std::os::unix::fs::symlink;
use std::path::Path;

use keel_index::{Index, IndexSettings};

fn workspace() -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    let outside = dir.path().join("outside");
    std::fs::create_dir_all(ws.join(".keel")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(ws.join("lib.rs"), "fn main() {}\n").unwrap();
    (dir, ws, outside)
}

/// A database outside the workspace with a `meta` table holding a row (as browsers' have).
fn victim(path: &Path) {
    let c = rusqlite::Connection::open(path).unwrap();
    c.execute_batch(
        "CREATE TABLE meta(key TEXT, value TEXT); INSERT INTO meta VALUES('user', 'precious');",
    )
    .unwrap();
}

fn precious(path: &Path) -> Option<String> {
    let c = rusqlite::Connection::open(path).ok()?;
    c.query_row("SELECT value FROM meta WHERE key = 'user'", [], |r| {
        r.get(0)
    })
    .ok()
}

#[test]
fn a_linked_index_db_is_refused_and_the_database_it_names_is_untouched() {
    let (_d, ws, outside) = workspace();
    let db = outside.join("victim.db");
    victim(&db);
    symlink(&db, ws.join(".keel/index.db")).unwrap();
    let err = Index::open(&ws, IndexSettings::default()).expect_err("a linked index.db");
    assert!(err.to_string().contains("symlink"), "{err}");
    assert_eq!(precious(&db).as_deref(), Some("precious"));
    assert!(!outside.join("victim.db-wal").exists());
}

#[test]
fn dangling_links_for_the_database_and_gitignore_create_nothing_outside() {
    let (_d, ws, outside) = workspace();
    symlink(outside.join("created.db"), ws.join(".keel/index.db")).unwrap();
    symlink(
        outside.join("gitignore-created"),
        ws.join(".keel/.gitignore"),
    )
    .unwrap();
    assert!(Index::open(&ws, IndexSettings::default()).is_err());
    let (_d2, ws2, outside2) = workspace();
    symlink(outside2.join("wal"), ws2.join(".keel/index.db-wal")).unwrap();
    assert!(Index::open(&ws2, IndexSettings::default()).is_err());
    for dir in [&outside, &outside2] {
        let left: Vec<_> = std::fs::read_dir(dir).unwrap().flatten().collect();
        assert!(left.is_empty(), "created outside: {left:?}");
    }
}

#[test]
fn a_linked_gitignore_alone_is_left_alone_and_the_index_opens() {
    let (_d, ws, outside) = workspace();
    symlink(
        outside.join("gitignore-created"),
        ws.join(".keel/.gitignore"),
    )
    .unwrap();
    Index::open(&ws, IndexSettings::default()).unwrap();
    assert!(!outside.join("gitignore-created").exists());
    assert!(ws.join(".keel/index.db").is_file());
}

#[test]
fn a_linked_state_directory_is_refused() {
    let (_d, ws, outside) = workspace();
    std::fs::remove_dir(ws.join(".keel")).unwrap();
    symlink(&outside, ws.join(".keel")).unwrap();
    assert!(Index::open(&ws, IndexSettings::default()).is_err());
    let left: Vec<_> = std::fs::read_dir(&outside).unwrap().flatten().collect();
    assert!(left.is_empty(), "created outside: {left:?}");
}

#[test]
fn a_fresh_workspace_gets_its_state_directory_and_gitignore() {
    let (_d, ws, _outside) = workspace();
    std::fs::remove_dir(ws.join(".keel")).unwrap();
    Index::open(&ws, IndexSettings::default()).unwrap();
    let ignore = std::fs::read_to_string(ws.join(".keel/.gitignore")).unwrap();
    assert!(ignore.contains("!config.toml"));
    assert!(ws.join(".keel/index.db").is_file());
}

/// Red-team pass 5, R5-9: `.keel/index.db` was 0644, and another local user (uid 65534) read a
/// private file's secret out of its chunks. The database and its companions are owner-only,
/// also when an older Keel left them readable.
#[test]
fn the_index_database_is_private() {
    use std::os::unix::fs::PermissionsExt;
    let (_d, ws, _outside) = workspace();
    std::fs::write(ws.join("secrets.py"), "API_TOKEN = \"S\"\n").unwrap();
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let mut index = Index::open(&ws, IndexSettings::default()).unwrap();
    index.refresh(&keel_index::NoProgress).unwrap();
    for name in ["index.db", "index.db-wal", "index.db-shm"] {
        let p = ws.join(".keel").join(name);
        if p.exists() {
            assert_eq!(mode(&p), 0o600, "{name}");
        }
    }
    drop(index);
    // Left readable by an older Keel: tightened when opened.
    let db = ws.join(".keel/index.db");
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o644)).unwrap();
    let _index = Index::open(&ws, IndexSettings::default()).unwrap();
    assert_eq!(mode(&db), 0o600);
}

/// Red-team pass 6, R6-3: a repository shipped `.keel/index.db` — a valid Keel index plus a
/// trigger on `files` joining a large table with itself — and the first `codebase_search`
/// hung for good. A database holding anything Keel's schema does not is rebuilt.
#[test]
fn a_shipped_index_with_its_own_triggers_is_rebuilt() {
    let (_d, ws, _outside) = workspace();
    {
        let mut index = Index::open(&ws, IndexSettings::default()).unwrap();
        index.refresh(&keel_index::NoProgress).unwrap();
    }
    let db = ws.join(".keel/index.db");
    let c = rusqlite::Connection::open(&db).unwrap();
    c.execute_batch(
        "CREATE TABLE big(x); WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 3000) INSERT INTO big SELECT i FROM n;
         CREATE TRIGGER slow AFTER INSERT ON files BEGIN SELECT count(*) FROM big a, big b, big c; END;
         CREATE TRIGGER slow2 AFTER UPDATE ON files BEGIN SELECT count(*) FROM big a, big b, big c; END;
         CREATE VIEW v AS SELECT * FROM big;",
    )
    .unwrap();
    drop(c);
    std::fs::write(ws.join("new.rs"), "fn g() {}\n").unwrap();
    let started = std::time::Instant::now();
    let mut index = Index::open(&ws, IndexSettings::default()).unwrap();
    index.refresh(&keel_index::NoProgress).unwrap();
    assert!(
        started.elapsed() < std::time::Duration::from_secs(20),
        "took {:?}",
        started.elapsed()
    );
    drop(index);
    let c = rusqlite::Connection::open(&db).unwrap();
    let foreign: i64 = c
        .query_row(
            "SELECT count(*) FROM sqlite_schema WHERE name IN ('big', 'slow', 'slow2', 'v')",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(foreign, 0);
}
