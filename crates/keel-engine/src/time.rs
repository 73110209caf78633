//! Clock helpers and session ids, without a date-time dependency.

/// Unix time in milliseconds (the one clock helper, shared with the store's timestamps).
pub use keel_store::now_ms;
use keel_store::time::civil_from_days;
/// Calendar dates of those timestamps (`keel_store::time`).
pub use keel_store::time::{utc_date, utc_datetime};

/// A new session id: `YYYYMMDD-HHMMSS-xxxxxx` (UTC time, then 24 random bits). Sorts by
/// creation time, reads at a glance, and any unique prefix names the session.
pub fn new_session_id() -> String {
    let ms = now_ms();
    let secs = ms / 1000;
    let (y, m, d) = civil_from_days((secs / 86_400) as i64);
    let (h, mi, s) = ((secs / 3600) % 24, (secs / 60) % 60, secs % 60);
    let random = uuid::Uuid::now_v7().as_u128() as u32 & 0x00ff_ffff;
    format!("{y:04}{m:02}{d:02}-{h:02}{mi:02}{s:02}-{random:06x}")
}

/// A new run id: `r-` and 16 hex digits, time-ordered.
pub fn new_run_id() -> String {
    let id = uuid::Uuid::now_v7().as_u128();
    format!("r-{:016x}", (id >> 64) as u64 ^ (id as u64).rotate_left(17))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_ids_are_distinct_and_shaped() {
        let a = new_session_id();
        let b = new_session_id();
        assert_ne!(a, b);
        assert_eq!(a.len(), 22, "{a}");
        assert_eq!(a.as_bytes()[8], b'-');
    }
}
