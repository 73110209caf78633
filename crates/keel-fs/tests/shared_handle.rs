//! A shared workspace handle (issue 33: one handle per session instead of a dozen fences).
//! In a process of their own: registering protected paths (as the first test does) ends any
//! sharing in the process, so the library's tests beside it would do that at random.

use std::os::fd::AsRawFd;
use std::path::Path;

use keel_fs::beneath::{DirHandle, ResolveError};
use keel_fs::stores::register_keel_path;

fn open(p: &Path) -> DirHandle {
    DirHandle::open(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn refused(h: &DirHandle, rel: &str) -> bool {
    matches!(h.resolve(Path::new(rel)), Err(ResolveError::Protected(_)))
}

#[test]
fn opens_reuse_the_shared_handle_only_while_its_fence_still_holds() {
    let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let root = tmp
        .path()
        .canonicalize()
        .unwrap_or_else(|e| panic!("{e}"))
        .join("ws");
    std::fs::create_dir_all(root.join("ssh")).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(root.join("ssh/id_ed25519"), "KEY").unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(root.join("netrc"), "PASSWORD").unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(root.join("README.md"), "hi").unwrap_or_else(|e| panic!("{e}"));
    std::os::unix::fs::symlink(&root, tmp.path().join("alias")).unwrap_or_else(|e| panic!("{e}"));
    register_keel_path(&root.join("ssh"));

    let first = open(&root);
    let guard = first.share();
    // Every open of the same directory — by any name — is the shared handle, and refuses the
    // store as the first did.
    for name in [root.clone(), tmp.path().join("alias"), root.join("ssh/..")] {
        let again = open(&name);
        assert_eq!(again.fd().as_raw_fd(), first.fd().as_raw_fd(), "{name:?}");
        assert!(refused(&again, "ssh/id_ed25519"), "{name:?}");
        assert!(again.resolve(Path::new("README.md")).is_ok());
    }
    // Another directory is opened on its own.
    let other = open(tmp.path());
    assert_ne!(other.fd().as_raw_fd(), first.fd().as_raw_fd());

    // A path of Keel's own registered after the share (a session database named by the
    // configuration read through the shared handle): the next open is the shared handle with
    // that path added to its fence.
    register_keel_path(&root.join("netrc"));
    let later = open(&root);
    assert_eq!(later.fd().as_raw_fd(), first.fd().as_raw_fd());
    assert!(refused(&later, "netrc"));
    assert!(refused(&later, "ssh/id_ed25519"));
    assert!(later.resolve(Path::new("README.md")).is_ok());
    // By identity too: a hard link to it elsewhere in the workspace is refused.
    std::fs::hard_link(root.join("netrc"), root.join("copy")).unwrap_or_else(|e| panic!("{e}"));
    assert!(refused(&open(&root), "copy"));
    std::fs::remove_file(root.join("copy")).unwrap_or_else(|e| panic!("{e}"));
    drop(guard);

    // A handle opened before a registration and shared after it: the path is added too.
    let early = open(&root);
    register_keel_path(&root.join("README.md"));
    let _early_guard = early.share();
    let via = open(&root);
    assert_eq!(via.fd().as_raw_fd(), early.fd().as_raw_fd());
    assert!(refused(&via, "README.md"));
    assert!(refused(&via, "netrc"));
    drop(_early_guard);

    // Shared again (with both stores), then the workspace is replaced by another directory
    // of the same name: that one is opened and fenced afresh.
    let second = open(&root);
    let _guard = second.share();
    assert_eq!(open(&root).fd().as_raw_fd(), second.fd().as_raw_fd());
    std::fs::rename(&root, tmp.path().join("old")).unwrap_or_else(|e| panic!("{e}"));
    std::fs::create_dir_all(root.join("ssh")).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(root.join("ssh/id_ed25519"), "KEY2").unwrap_or_else(|e| panic!("{e}"));
    let replaced = open(&root);
    assert_ne!(replaced.fd().as_raw_fd(), second.fd().as_raw_fd());
    assert!(refused(&replaced, "ssh/id_ed25519"));
    assert!(refused(&replaced, "README.md"));
}

#[test]
fn without_a_share_every_open_is_its_own() {
    let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let a = open(tmp.path());
    let b = open(tmp.path());
    assert_ne!(a.fd().as_raw_fd(), b.fd().as_raw_fd());
}
