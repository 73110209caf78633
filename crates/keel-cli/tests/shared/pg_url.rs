//! The PostgreSQL test server, shared by the `common` and `cluster_common` test helpers.
#![allow(clippy::disallowed_macros)]

/// The test server's URL (`KEEL_TEST_DATABASE_URL`), or `None` after saying that `subject` is
/// not tested on PostgreSQL here (a failure in CI).
pub fn postgres_test_url(subject: &str) -> Option<String> {
    match std::env::var("KEEL_TEST_DATABASE_URL") {
        Ok(url) if !url.trim().is_empty() => Some(url),
        _ => {
            let what = "KEEL_TEST_DATABASE_URL is not set: start PostgreSQL and set it, e.g. \
                        `source .ci/postgres.sh` (as root) exports \
                        postgres://keelpg@127.0.0.1:55432/keel_test";
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "{subject} must be tested on PostgreSQL in CI: {what}"
            );
            eprintln!("SKIPPED: {subject} on PostgreSQL: {what}");
            None
        }
    }
}
