//! Riding out a database restart: which driver errors mean "the database is not reachable
//! now", and bounded retries of the store's writes while it comes back.
//!
//! sqlx's pool drops a broken connection (each one is pinged before it is handed out) and
//! opens new ones while the server refuses them, up to the pool's acquire timeout; a
//! statement cut off by a restart fails with an I/O error or `57P01 admin_shutdown`. The store
//! retries such failures with backoff for [`PgStore::retry_for`] (a worker rides out a short
//! restart mid-turn; a server answers 503 at once instead). An append whose outcome is unknown
//! (the connection broke after the statement was sent) is not repeated blindly: the retry
//! first looks whether the row was committed, so no event or message is stored twice and
//! `seq` stays gap-free.

use std::future::Future;
use std::time::Duration;

use super::PgStore;
use crate::StoreError;

/// `true` when `e` means the database cannot be reached now (refused, lost, shutting down or
/// starting up) rather than a problem with the statement.
pub(crate) fn is_unreachable(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::WorkerCrashed => true,
        // An unexpected end of the stream shows up as a protocol error in some paths.
        sqlx::Error::Protocol(m) => m.contains("closed") || m.contains("EOF"),
        sqlx::Error::Database(d) => d.code().is_some_and(|c| {
            // Class 08: connection exception; 57P01..57P03: admin/crash shutdown, cannot
            // connect now (starting up or shutting down).
            c.starts_with("08") || matches!(c.as_ref(), "57P01" | "57P02" | "57P03")
        }),
        _ => false,
    }
}

/// `true` when the failed statement may have been committed anyway: the connection broke
/// after it was sent (not while connecting or waiting for a connection, and not an error the
/// server reported, which rolls the statement back).
pub(crate) fn outcome_unknown(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Io(io) => io.kind() != std::io::ErrorKind::ConnectionRefused,
        sqlx::Error::Protocol(_) | sqlx::Error::WorkerCrashed => true,
        _ => false,
    }
}

/// The first pause between attempts; it doubles up to [`MAX_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_millis(100);
const MAX_PAUSE: Duration = Duration::from_secs(2);

/// Where a retried operation stands.
pub(crate) struct Backoff {
    deadline: tokio::time::Instant,
    pause: Duration,
}

impl Backoff {
    pub(crate) fn new(budget: Duration) -> Self {
        Self {
            deadline: tokio::time::Instant::now() + budget,
            pause: FIRST_PAUSE,
        }
    }

    /// Waits before the next attempt; `false` (without waiting) once the budget is spent.
    pub(crate) async fn wait(&mut self) -> bool {
        let now = tokio::time::Instant::now();
        if now + self.pause > self.deadline {
            return false;
        }
        tokio::time::sleep(self.pause).await;
        self.pause = (self.pause * 2).min(MAX_PAUSE);
        true
    }
}

impl PgStore {
    /// Runs `op` again while it fails because the database is unreachable, for up to
    /// [`PgStore::retry_for`]. For idempotent operations only.
    pub(crate) async fn retrying<T, F, Fut>(&self, mut op: F) -> Result<T, StoreError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, StoreError>>,
    {
        let mut backoff = Backoff::new(self.retry_for);
        loop {
            match op().await {
                Err(e) if e.is_unavailable() && backoff.wait().await => {}
                other => return other,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refused_and_broken_connections_are_unreachable_bad_sql_is_not() {
        let refused = sqlx::Error::Io(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        assert!(is_unreachable(&refused));
        assert!(!outcome_unknown(&refused), "nothing was sent");
        let reset = sqlx::Error::Io(std::io::Error::from(std::io::ErrorKind::ConnectionReset));
        assert!(is_unreachable(&reset));
        assert!(outcome_unknown(&reset));
        assert!(is_unreachable(&sqlx::Error::PoolTimedOut));
        assert!(!outcome_unknown(&sqlx::Error::PoolTimedOut));
        assert!(!is_unreachable(&sqlx::Error::RowNotFound));
        assert!(!is_unreachable(&sqlx::Error::Protocol(
            "bad message".into()
        )));
    }

    #[tokio::test]
    async fn the_backoff_stops_at_its_budget() {
        let mut b = Backoff::new(Duration::from_millis(800));
        let start = tokio::time::Instant::now();
        let mut waits = 0;
        while b.wait().await {
            waits += 1;
        }
        assert!(waits >= 2, "{waits}");
        assert!(start.elapsed() <= Duration::from_millis(800));
        let mut none = Backoff::new(Duration::ZERO);
        assert!(!none.wait().await);
    }
}
