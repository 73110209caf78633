//! A restore is checked as a writer nobody approved (red-team pass 8, R8-3): a snapshot taken
//! while a command ran captured what the post-command checks then removed — a sourceless
//! `pytest.pyc` (ignored: kept in the side store), a planted `src/HEAD` + `src/commondir`
//! naming a git directory whose config runs a program — and `keel undo --to` wrote them back
//! for the user's next `python3 -m pytest` or `git log`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use super::hostile_tests::git;
use super::*;

#[test]
fn undo_does_not_bring_back_what_the_checks_removed() {
    if !git_available() {
        assert!(std::env::var_os("CI").is_none(), "CI needs git");
        println!("SKIPPED: git is not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    git(&ws, &["init", "-q"]);
    std::fs::write(ws.join(".gitignore"), "*.py[cod]\n").unwrap();
    std::fs::create_dir_all(ws.join("src")).unwrap();
    std::fs::write(ws.join("src/app.py"), "x = 1\n").unwrap();
    git(&ws, &["add", "."]);
    git(&ws, &["commit", "-qm", "init"]);
    let snaps = Snapshots::open(&ws).unwrap();
    let s0 = snaps.take("sess-1", 0, None).unwrap();
    // What a command planted while another turn's snapshot was taken.
    std::fs::write(ws.join("pytest.pyc"), b"\x6f\x0d\x0d\x0a planted").unwrap();
    std::fs::create_dir_all(ws.join(".cache/g/refs/heads")).unwrap();
    std::fs::create_dir_all(ws.join(".cache/g/objects")).unwrap();
    std::fs::write(
        ws.join(".cache/g/config"),
        "[core]\n\tfsmonitor = \"touch pwned; false #\"\n",
    )
    .unwrap();
    std::fs::write(ws.join("src/HEAD"), "ref: refs/heads/main\n").unwrap();
    std::fs::write(ws.join("src/commondir"), "../.cache/g\n").unwrap();
    let s1 = snaps.take("sess-1", 1, Some(&s0)).unwrap();
    // The checks after the command removed them; a later turn.
    std::fs::remove_file(ws.join("pytest.pyc")).unwrap();
    std::fs::remove_file(ws.join("src/HEAD")).unwrap();
    std::fs::write(ws.join("notes.txt"), "n\n").unwrap();
    snaps.take("sess-1", 2, Some(&s1)).unwrap();
    // The undo comes later: the unchanged `commondir` is older than it.
    std::thread::sleep(std::time::Duration::from_millis(1_200));

    let report = snaps.undo("sess-1", Some(1)).unwrap();
    let checked = report.changes.checked.clone().unwrap_or_default();
    assert!(
        std::fs::symlink_metadata(ws.join("pytest.pyc")).is_err(),
        "the bytecode came back: {report:?}"
    );
    assert!(
        std::fs::symlink_metadata(ws.join("src/HEAD")).is_err(),
        "the planted git directory came back: {report:?}"
    );
    assert!(checked.contains("pytest.pyc"), "{checked}");
    assert!(checked.contains("src"), "{checked}");
    // The rest of the undo happened.
    assert!(!ws.join("notes.txt").exists());
    assert!(ws.join("src/app.py").exists());
}
