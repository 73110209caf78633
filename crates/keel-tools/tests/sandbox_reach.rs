//! What a confined command reaches besides the files Landlock lets it write (red-team round of
//! issue 29): metadata of files outside the workspace (`chmod u+s`, `chown`, `touch -d` —
//! Landlock does not govern them), and descriptors Keel itself inherited open (a file
//! outside, a secret, a connected socket). Each test runs through the one command runner as
//! whoever runs the tests and, when that is root (CI), again as uid 65534 through the
//! user-namespace helper.

// Tests start programs of their own (setpriv): allowed explicitly.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

#[macro_use]
#[path = "shared/nobody.rs"]
mod nobody;

#[path = "shared/skip.rs"]
mod skip;

use std::ffi::OsString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use keel_tools::sandbox::{SandboxPolicy, WritableRoots};
use keel_tools::shell::exec::{self, ExecRequest};
use skip::namespaces_with_mount_setattr as namespaces;

async fn run(ws: &Path, policy: SandboxPolicy, script: &str) -> String {
    let mut req = ExecRequest::new(
        vec![
            OsString::from("bash"),
            OsString::from("-c"),
            OsString::from(script),
        ],
        ws,
    );
    req.policy = policy;
    req.roots = WritableRoots {
        workspace: Some(ws.to_path_buf()),
        ..WritableRoots::default()
    };
    req.timeout = Duration::from_secs(20);
    exec::run(req).await.unwrap().combined_text()
}

fn outside(ws: &Path) -> PathBuf {
    let o = ws.parent().unwrap().join("outside");
    std::fs::create_dir_all(&o).unwrap();
    o
}

// ---------------------------------------------------------------------------------------------
// Metadata outside the workspace.

async fn metadata(test: &str, ws: &Path) {
    if !namespaces(test) {
        return;
    }
    let o = outside(ws);
    let f = o.join("marker");
    std::fs::write(&f, "secret\n").unwrap();
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).unwrap();
    let exe = o.join("id-copy");
    std::fs::write(&exe, "#!/bin/sh\nid\n").unwrap();
    std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(ws.join("mine"), "x\n").unwrap();
    let before = std::fs::metadata(&f).unwrap();
    let script = format!(
        "chmod 4755 '{exe}'; chmod 0666 '{f}'; chown 65534:65534 '{f}'; \
         touch -h -d 2001-01-01 '{f}'; python3 -c 'import os,sys; os.setxattr(sys.argv[1], \"user.k\", b\"v\")' '{f}' 2>&1; \
         chmod 0700 mine; touch -d 2001-01-01 mine; true",
        exe = exe.display(),
        f = f.display()
    );
    for policy in [SandboxPolicy::WorkspaceWrite, SandboxPolicy::ReadOnly] {
        let out = run(ws, policy, &script).await;
        let after = std::fs::metadata(&f).unwrap();
        assert_eq!(
            after.mode() & 0o7777,
            0o600,
            "{test} {policy:?}: chmod outside: {out}"
        );
        assert_eq!(
            after.uid(),
            before.uid(),
            "{test} {policy:?}: chown outside: {out}"
        );
        assert_eq!(
            after.mtime(),
            before.mtime(),
            "{test} {policy:?}: utime outside: {out}"
        );
        assert_eq!(
            std::fs::metadata(&exe).unwrap().mode() & 0o7777,
            0o755,
            "{test} {policy:?}: setuid bit set outside: {out}"
        );
        assert!(
            xattr_absent(&f),
            "{test} {policy:?}: xattr set outside: {out}"
        );
    }
    // Inside the workspace, under workspace-write, metadata still changes as usual.
    let out = run(ws, SandboxPolicy::WorkspaceWrite, &script).await;
    let mine = std::fs::metadata(ws.join("mine")).unwrap();
    assert_eq!(
        mine.mode() & 0o777,
        0o700,
        "{test}: chmod in the workspace: {out}"
    );
    assert!(
        mine.mtime() < 1_000_000_000,
        "{test}: touch -d in the workspace: {out}"
    );
    // Unconfined the same line works: the test can see an escape.
    let _ = run(ws, SandboxPolicy::Off, &script).await;
    assert_eq!(std::fs::metadata(&f).unwrap().mode() & 0o777, 0o666);
    println!("{test}: chmod/chown/utime/xattr outside the workspace refused");
}

fn xattr_absent(f: &Path) -> bool {
    let mut buf = [0u8; 16];
    rustix::fs::getxattr(f, "user.k", &mut buf).is_err()
}

#[tokio::test]
async fn metadata_outside_the_workspace_cannot_change() {
    as_both!("metadata_outside_the_workspace_cannot_change", metadata);
}

// ---------------------------------------------------------------------------------------------
// Inherited descriptors.

/// `fd` again at a number of at least 300, without `FD_CLOEXEC` (as a careless parent leaves
/// it).
fn leak(fd: OwnedFd) -> (i32, OwnedFd) {
    let raw = rustix::io::fcntl_dupfd_cloexec(&fd, 300).unwrap();
    rustix::io::fcntl_setfd(&raw, rustix::io::FdFlags::empty()).unwrap();
    (raw.as_raw_fd(), raw)
}

async fn descriptors(test: &str, ws: &Path) {
    let o = outside(ws);
    let sink = o.join("sink");
    std::fs::write(&sink, "").unwrap();
    let secret = o.join("secret");
    std::fs::write(&secret, "fd-secret-8\n").unwrap();
    let w = std::fs::OpenOptions::new()
        .append(true)
        .open(&sink)
        .unwrap();
    let r = std::fs::File::open(&secret).unwrap();
    let (ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
    let (wfd, _w) = leak(OwnedFd::from(w));
    let (rfd, _r) = leak(OwnedFd::from(r));
    let (sfd, _s) = leak(OwnedFd::from(theirs));
    ours.set_nonblocking(true).unwrap();
    let script = format!(
        "echo WRITTEN >&{wfd}; cat <&{rfd}; echo EXFIL >&{sfd}; \
         for f in /proc/self/fd/*; do echo \"fd ${{f##*/}}\"; done"
    );
    for policy in [
        SandboxPolicy::WorkspaceWrite,
        SandboxPolicy::ReadOnly,
        SandboxPolicy::Off,
    ] {
        let out = run(ws, policy, &script).await;
        assert!(
            !out.contains("fd-secret-8"),
            "{test} {policy:?}: read an inherited fd: {out}"
        );
        assert_eq!(
            std::fs::read_to_string(&sink).unwrap(),
            "",
            "{test} {policy:?}: wrote through an inherited fd: {out}"
        );
        let mut buf = [0u8; 16];
        let got = std::io::Read::read(&mut &ours, &mut buf);
        assert!(
            got.is_err(),
            "{test} {policy:?}: sent over an inherited socket: {out}"
        );
        for n in [wfd, rfd, sfd] {
            assert!(
                !out.lines().any(|l| l == format!("fd {n}")),
                "{test} {policy:?}: fd {n} is open in the command: {out}"
            );
        }
    }
    // The descriptors were really open here: writing through the same file works.
    let mut again = reopen_append(wfd);
    std::io::Write::write_all(&mut again, b"ok").unwrap();
    assert_eq!(std::fs::read_to_string(&sink).unwrap(), "ok");
    println!("{test}: inherited descriptors closed at exec (workspace-write, read-only, off)");
}

/// The file open at descriptor `fd` of this process, opened again for appending.
fn reopen_append(fd: i32) -> std::fs::File {
    std::fs::OpenOptions::new()
        .append(true)
        .open(format!("/proc/self/fd/{fd}"))
        .unwrap_or_else(|e| panic!("fd {fd} is not open: {e}"))
}

#[tokio::test]
async fn descriptors_keel_inherited_do_not_reach_commands() {
    as_both!(
        "descriptors_keel_inherited_do_not_reach_commands",
        descriptors
    );
}
