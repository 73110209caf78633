//! Live event notices across processes: every event appended to a PostgreSQL store sends
//! `seq:session id` on the channel `keel_events` when its transaction commits (LISTEN/NOTIFY),
//! so any process can follow any session live and read the events themselves with
//! [`Store::events`](crate::Store::events) from the last seq it has — exact on reconnect.

use sqlx::postgres::PgListener;

use super::{PgStore, db_err};
use crate::StoreError;

/// The channel appends notify on.
pub const EVENTS_CHANNEL: &str = "keel_events";

/// What [`EventNotices::next`] saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notice {
    /// Event `seq` of `session` was stored (notices come in commit order).
    Stored { session: String, seq: u64 },
    /// The connection was lost and is open again: notices sent meanwhile are gone, so a
    /// follower re-reads `events(session, last_seen)` of every session it follows.
    Reconnected,
}

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
    /// The next notice. An error means the connection is lost and could not be opened again
    /// yet ([`StoreError::Unavailable`] while the database is down); subscribe again with
    /// [`PgStore::listen_events`] later and re-read what was missed.
    pub async fn next(&mut self) -> Result<Notice, StoreError> {
        loop {
            let n = self
                .listener
                .try_recv()
                .await
                .map_err(db_err("waiting for event notices"))?;
            let Some(n) = n else {
                return Ok(Notice::Reconnected);
            };
            if let Some((seq, session)) = n.payload().split_once(':')
                && let Ok(seq) = seq.parse::<u64>()
            {
                return Ok(Notice::Stored {
                    session: session.to_string(),
                    seq,
                });
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
