//! Skipping a test loudly when the machine lacks what it needs (shared by the sandbox tests).

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
