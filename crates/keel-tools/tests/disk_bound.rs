//! A command cannot fill the disk (red-team pass 6, R6-8): the runner stops a command once a
//! file system it writes falls below its reserve, and the result says why. The test gives the
//! command a 32 MiB allowance (the reserve rule itself would need a nearly full disk) and has
//! it write 4 GiB; likewise for inodes and for the machine's memory. As root and as uid 65534.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

#[path = "shared/nobody.rs"]
mod nobody;

use std::path::Path;

use keel_tools::shell;

fn scenario(ws: &Path) {
    let mut req = shell::exec::ExecRequest::new(
        vec![
            "sh".into(),
            "-c".into(),
            "head -c 4G /dev/zero > big && echo finished".into(),
        ],
        ws,
    );
    req.disk_allowance = Some(32 * 1024 * 1024);
    req.timeout = std::time::Duration::from_secs(120);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let out = runtime.block_on(shell::exec::run(req)).unwrap();
    assert!(!out.success(), "{}", out.combined_text());
    assert!(!out.stdout.text().contains("finished"));
    let note = out.limit_note.clone().unwrap_or_default();
    assert!(note.contains("filled the file system"), "{note:?}");
    let written = std::fs::metadata(ws.join("big"))
        .map(|m| m.len())
        .unwrap_or(0);
    assert!(written < 4 << 30, "the command wrote all {written} bytes");
    let _ = std::fs::remove_file(ws.join("big"));

    // An ordinary command is not touched.
    let mut req = shell::exec::ExecRequest::new(
        vec![
            "sh".into(),
            "-c".into(),
            "head -c 1M /dev/zero > small && echo ok".into(),
        ],
        ws,
    );
    req.disk_allowance = Some(32 * 1024 * 1024);
    let out = runtime.block_on(shell::exec::run(req)).unwrap();
    assert!(out.success(), "{}", out.combined_text());
    assert!(out.limit_note.is_none());

    // Memory too (red-team pass 8, R8-14): one command holding 1 GiB of the machine's memory
    // with a 256 MiB allowance is stopped (the whole tree is counted, not one process).
    let mut req = shell::exec::ExecRequest::new(
        vec![
            "sh".into(),
            "-c".into(),
            "dd if=/dev/zero of=/dev/null bs=1G count=200 2>/dev/null; echo finished".into(),
        ],
        ws,
    );
    req.memory_allowance = Some(256 * 1024 * 1024);
    req.timeout = std::time::Duration::from_secs(120);
    let out = runtime.block_on(shell::exec::run(req)).unwrap();
    assert!(!out.success(), "{}", out.combined_text());
    assert!(!out.stdout.text().contains("finished"));
    let note = out.limit_note.clone().unwrap_or_default();
    assert!(note.contains("memory available"), "{note:?}");

    // Inodes too (red-team pass 10, R10-8): empty files, no bytes to speak of.
    let mut req = shell::exec::ExecRequest::new(
        vec![
            "sh".into(),
            "-c".into(),
            "mkdir -p many && cd many && seq 1 300000 | xargs touch && echo finished".into(),
        ],
        ws,
    );
    req.inode_allowance = Some(2_000);
    req.timeout = std::time::Duration::from_secs(120);
    let out = runtime.block_on(shell::exec::run(req)).unwrap();
    let note = out.limit_note.clone().unwrap_or_default();
    if note.is_empty() && out.success() {
        // A file system that does not count inodes (then none are watched).
        let counted = rustix::fs::statvfs(ws).is_ok_and(|s| s.f_files > 0);
        assert!(!counted, "300,000 files were made unstopped");
        println!("SKIPPED (inode part): the file system does not count inodes");
        return;
    }
    assert!(!out.success(), "{}", out.combined_text());
    assert!(!out.stdout.text().contains("finished"));
    assert!(note.contains("inodes"), "{note:?}");
    let made = std::fs::read_dir(ws.join("many")).map_or(0, |d| d.count());
    assert!(made < 300_000, "all {made} files were made");
}

#[test]
fn a_command_that_fills_the_disk_is_stopped() {
    let dir = tempfile::tempdir().unwrap();
    scenario(dir.path());
}

#[test]
fn a_command_that_fills_the_disk_is_stopped_as_nobody() {
    let Some(dir) = nobody::child_dir() else {
        nobody::run_child("a_command_that_fills_the_disk_is_stopped_as_nobody", false);
        return;
    };
    let ws = dir.join("ws");
    std::fs::create_dir(&ws).unwrap();
    scenario(&ws);
}
