//! Live event notices across processes: every event appended to a PostgreSQL store sends
//! `seq:session id` on the channel `keel_events` when its transaction commits (LISTEN/NOTIFY),
//! so any process can follow any session live and read the events themselves with
//! [`Store::events`](crate::Store::events) from the last seq it has — exact on reconnect.

use sqlx::postgres::PgListener;

use super::{PgStore, db_err};
use crate::StoreError;

/// The channel appends notify on.
pub const EVENTS_CHANNEL: &str = "keel_events";

/// A subscription to the event notices of every session in the database.
pub struct EventNotices {
    listener: PgListener,
}

impl std::fmt::Debug for EventNotices {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventNotices").finish_non_exhaustive()
    }
}

impl EventNotices {
    /// The next appended event's `(session id, seq)`, in commit order. After a lost
    /// connection the listener reconnects by itself; notices sent meanwhile are not replayed,
    /// so a follower re-reads `events(session, last_seen)` after an error.
    pub async fn next(&mut self) -> Result<(String, u64), StoreError> {
        loop {
            let n = self
                .listener
                .recv()
                .await
                .map_err(db_err("waiting for event notices"))?;
            if let Some((seq, session)) = n.payload().split_once(':')
                && let Ok(seq) = seq.parse::<u64>()
            {
                return Ok((session.to_string(), seq));
            }
            // A payload some other program sent on the channel: not ours, skipped.
        }
    }
}

impl PgStore {
    /// Subscribes to the notices of events appended from now on, by any process.
    pub async fn listen_events(&self) -> Result<EventNotices, StoreError> {
        let mut listener = PgListener::connect_with(&self.pool)
            .await
            .map_err(db_err("connecting the event listener"))?;
        listener
            .listen(EVENTS_CHANNEL)
            .await
            .map_err(db_err("listening for event notices"))?;
        Ok(EventNotices { listener })
    }
}
