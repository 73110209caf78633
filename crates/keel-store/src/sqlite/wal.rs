//! Turning on WAL when several processes open a fresh database at once.

use rusqlite::Connection;

use crate::StoreError;

/// Switches `conn`'s database to WAL. Switching needs a moment alone with the file, and SQLite
/// answers "busy" at once (without its busy handler) while another process opening the same
/// fresh database holds it, so a busy answer is retried for up to five seconds.
pub(super) fn enable(conn: &Connection) -> Result<(), StoreError> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let mut pause = std::time::Duration::from_millis(5);
    loop {
        match conn.pragma_update(None, "journal_mode", "WAL") {
            Ok(()) => return Ok(()),
            Err(rusqlite::Error::SqliteFailure(e, _))
                if e.code == rusqlite::ErrorCode::DatabaseBusy
                    && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(pause);
                pause = (pause * 2).min(std::time::Duration::from_millis(200));
            }
            Err(e) => return Err(super::sql("enabling WAL")(e)),
        }
    }
}
