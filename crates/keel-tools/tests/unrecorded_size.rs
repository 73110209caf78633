//! Red-team pass 10, R10-20: a snapshot leaves out every file over `[snapshots] max_file_mb`
//! (default 100), ignored by the repository or not, but the "unrecorded" rule counted only
//! ignored files: `echo x > big.dat` over the user's untracked 101 MiB dataset ran unasked
//! and `keel undo` said "left alone big.dat (never recorded …)" — the data was gone. Now a
//! file over the bound the snapshots use is unrecorded whatever git thinks of it: a command
//! that writes over it is asked about, and the file tools do not replace or edit it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use std::path::Path;

use keel_tools::shell::{CommandSafety, SafetyClass};
use keel_tools::{PathError, Workspace};

const MIB: u64 = 1024 * 1024;

/// A git workspace holding the untracked, not ignored files `files` (path, apparent size):
/// sparse, so a 101 MiB file costs nothing.
fn workspace(files: &[(&str, u64)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    let out = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(ws)
        .output()
        .unwrap();
    assert!(out.status.success());
    std::fs::write(ws.join("README.md"), "readme\n").unwrap();
    for (rel, len) in files {
        let p = ws.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::File::create(&p).unwrap().set_len(*len).unwrap();
    }
    dir
}

fn class(ws: &Path, cmd: &str) -> (SafetyClass, Vec<String>) {
    let a = CommandSafety::new().classify_in_project(cmd, ws);
    (a.class, a.reasons)
}

#[test]
fn a_write_over_a_file_too_large_to_snapshot_is_asked_and_refused_to_file_tools() {
    let dir = workspace(&[("big.dat", 101 * MIB), ("data/model.bin", 150 * MIB)]);
    let ws = dir.path();
    for cmd in [
        "echo x > big.dat",
        "cp README.md big.dat",
        "mv README.md big.dat",
        "sed -i s/a/b/ big.dat",
        "cp -r README.md data/model.bin",
    ] {
        let (c, reasons) = class(ws, cmd);
        assert_eq!(c, SafetyClass::Destructive, "{cmd}: {reasons:?}");
        assert!(
            reasons.iter().any(|r| r.contains("no snapshot")),
            "{cmd}: {reasons:?}"
        );
    }
    // What keeps the content, and smaller files, are writes as before.
    for cmd in [
        "echo x >> big.dat",
        "echo x > README.md",
        "echo x > new.dat",
    ] {
        let (c, reasons) = class(ws, cmd);
        assert_eq!(c, SafetyClass::WritesWorkspace, "{cmd}: {reasons:?}");
    }
    let w = Workspace::new(ws).unwrap();
    for rel in ["big.dat", "data/model.bin"] {
        assert!(
            matches!(w.locate_writable(rel), Err(PathError::Unrecorded { .. })),
            "{rel}"
        );
    }
    assert!(w.locate_writable("README.md").is_ok());
}

/// The bound is the user's `[snapshots] max_file_mb`, which the engine gives the workspace
/// (and the snapshots from it): not a second default of the checks' own.
#[test]
fn the_configured_bound_is_the_one_the_checks_use() {
    let dir = workspace(&[("mid.dat", 2 * MIB), ("big.dat", 101 * MIB)]);
    let ws = dir.path();
    // 1 MiB: the 2 MiB file is left out of snapshots too.
    let small = Workspace::new(ws).unwrap().with_snapshot_max_file_mb(1);
    assert!(matches!(
        small.locate_writable("mid.dat"),
        Err(PathError::Unrecorded { .. })
    ));
    let a = CommandSafety::new().classify_in_project("echo x > mid.dat", &small);
    assert_eq!(a.class, SafetyClass::Destructive, "{:?}", a.reasons);
    assert!(
        a.reasons.iter().any(|r| r.contains("1 MiB")),
        "{:?}",
        a.reasons
    );
    // 0: no bound, every file is recorded.
    let unbounded = Workspace::new(ws).unwrap().with_snapshot_max_file_mb(0);
    assert!(unbounded.locate_writable("big.dat").is_ok());
    let a = CommandSafety::new().classify_in_project("echo x > big.dat", &unbounded);
    assert_eq!(a.class, SafetyClass::WritesWorkspace, "{:?}", a.reasons);
    // The default is the snapshots' own.
    assert_eq!(
        Workspace::new(ws).unwrap().snapshot_max_file_mb(),
        keel_tools::recorded::DEFAULT_MAX_FILE_MB
    );
}
