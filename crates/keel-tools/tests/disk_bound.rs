//! A command cannot fill the disk (red-team pass 6, R6-8): the runner stops a command once a
//! file system it writes falls below its reserve, and the result says why. The test gives the
//! command a 32 MiB allowance (the reserve rule itself would need a nearly full disk) and has
//! it write 4 GiB. As root and as uid 65534.

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
