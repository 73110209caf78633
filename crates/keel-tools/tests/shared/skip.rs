//! Skipping a test loudly when the machine lacks what it needs (shared by the sandbox tests).

#![allow(dead_code)]

use keel_tools::sandbox;
use keel_tools::shell::exec;

/// True when `ok`; otherwise prints why the caller skips, and fails in CI.
pub fn have(ok: bool, test: &str, why: &str) -> bool {
    if ok {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "{test}: {why} — CI machines must have it"
    );
    println!("SKIPPED {test}: {why}");
    false
}

/// The namespaces are there (root, or unprivileged user namespaces), or the test skips.
pub fn namespaces(test: &str) -> bool {
    let s = sandbox::support();
    have(
        s.mount_namespace.is_ok() && s.isolation.processes,
        test,
        &format!("no namespaces for commands: {:?}", s.mount_namespace),
    )
}

/// The namespaces and `mount_setattr` (nodev, nosuid mounts) are there, or the test skips.
pub fn namespaces_with_mount_setattr(test: &str) -> bool {
    let s = sandbox::support();
    have(
        s.mount_namespace.is_ok() && s.isolation.nodev,
        test,
        &format!(
            "no namespaces with mount_setattr for commands: {:?}",
            s.mount_namespace
        ),
    )
}

/// python3 is on the trusted PATH, or the test skips.
pub fn python(test: &str) -> bool {
    have(
        exec::find_program("python3").is_some(),
        test,
        "python3 not found",
    )
}
