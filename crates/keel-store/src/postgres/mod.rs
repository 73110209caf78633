//! [`PgStore`]: the [`Store`](crate::Store) on PostgreSQL (sqlx, tokio, a connection pool),
//! the shared store for several server and worker processes.
//!
//! Event `seq` and message indexes come from counters on the session's row, bumped by the
//! same statement that inserts (`WITH n AS (UPDATE sessions … RETURNING …) INSERT …`): the
//! row lock orders concurrent writers in any number of processes and a failed insert rolls
//! the counter back, so `seq` stays gap-free and unique per session.
//!
//! PRDs, tasks and proofs are async methods here too (`work/postgres.rs`), and both stores
//! implement [`WorkStore`](crate::work::WorkStore); memory editing is async methods here
//! (`memory.rs`) matching `SqliteDb`'s.

use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{Connection, PgConnection, PgPool};

use crate::{StoreError, redact_url};

mod leases;
mod memory;
mod migrations;
mod notify;
mod retry;
mod store;

pub use migrations::AppliedMigration;
pub use notify::{EVENTS_CHANNEL, EventNotices, Notice};

/// The PostgreSQL store: a pool of connections to one database, shared by every clone.
#[derive(Clone)]
pub struct PgStore {
    pub(crate) pool: PgPool,
    /// The URL without its password, for messages.
    shown: String,
    /// How long writes are retried while the database is unreachable.
    retry_for: Duration,
}

/// How long a [`PgStore`] retries its writes while the database is unreachable by default:
/// long enough to ride out a restart.
pub const DEFAULT_RETRY: Duration = Duration::from_secs(60);

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore")
            .field("database", &self.shown)
            .finish_non_exhaustive()
    }
}

/// Maps a driver error to a [`StoreError::Database`] naming the operation, or to
/// [`StoreError::Unavailable`] when the database could not be reached.
pub(crate) fn db_err(context: &str) -> impl FnOnce(sqlx::Error) -> StoreError + '_ {
    move |e| {
        let (context, reason) = (context.to_string(), e.to_string());
        if retry::is_unreachable(&e) {
            StoreError::Unavailable { context, reason }
        } else {
            StoreError::Database { context, reason }
        }
    }
}

impl PgStore {
    /// Connects to the database at `url` (`postgres://user[:password]@host[:port]/db`) without
    /// touching its schema. Most callers want [`PgStore::open`].
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        Self::connect_with(url, Duration::from_secs(10)).await
    }

    /// [`PgStore::connect`] with the time a call waits for a connection (while the database
    /// is unreachable too) before it fails as [`StoreError::Unavailable`].
    pub async fn connect_with(url: &str, acquire_timeout: Duration) -> Result<Self, StoreError> {
        let shown = redact_url(url);
        let open_err = |reason: String| StoreError::Open {
            path: shown.clone(),
            reason,
        };
        let options: PgConnectOptions = url.parse().map_err(|e| {
            open_err(format!(
                "not a PostgreSQL URL ({e}); write it as postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE"
            ))
        })?;
        let options = options.application_name("keel");
        // One direct connection first: its error is the real one (refused, unknown user, no
        // such database), where a pool would only report a timeout.
        let unreachable = |e: String| {
            open_err(format!(
                "{e}; check that PostgreSQL is running, the URL (or KEEL_DATABASE_URL) is right and the user may connect"
            ))
        };
        let first = tokio::time::timeout(
            Duration::from_secs(10),
            PgConnection::connect_with(&options),
        )
        .await
        .map_err(|_| unreachable("no answer within 10 s".into()))?
        .map_err(|e| unreachable(e.to_string()))?;
        let _ = first.close().await;
        let pool = PgPoolOptions::new()
            .max_connections(16)
            .acquire_timeout(acquire_timeout)
            .connect_lazy_with(options);
        Ok(Self {
            pool,
            shown,
            retry_for: DEFAULT_RETRY,
        })
    }

    /// Connects and checks that every migration is applied; when not, the error says to run
    /// `keel db migrate`.
    pub async fn open(url: &str) -> Result<Self, StoreError> {
        Self::open_with(url, Duration::from_secs(10)).await
    }

    /// [`PgStore::open`] with [`PgStore::connect_with`]'s acquire timeout.
    pub async fn open_with(url: &str, acquire_timeout: Duration) -> Result<Self, StoreError> {
        let store = Self::connect_with(url, acquire_timeout).await?;
        let mut conn = store
            .pool
            .acquire()
            .await
            .map_err(db_err("taking a connection"))?;
        if !migrations::is_current(&mut conn).await? {
            return Err(StoreError::Open {
                path: store.shown.clone(),
                reason: "the database schema is missing or older than this keel; run `keel db migrate --database URL` first".into(),
            });
        }
        drop(conn);
        Ok(store)
    }

    /// Applies the migrations the database has not recorded (each once, in its own
    /// transaction, under an advisory lock) and returns those applied now.
    pub async fn migrate(&self) -> Result<Vec<AppliedMigration>, StoreError> {
        let mut conn = self
            .pool
            .acquire()
            .await
            .map_err(db_err("taking a connection"))?;
        migrations::migrate(&mut conn).await
    }

    /// `true` when every migration this keel knows is applied (`keel doctor`).
    pub async fn is_current(&self) -> Result<bool, StoreError> {
        let mut conn = self
            .pool
            .acquire()
            .await
            .map_err(db_err("taking a connection"))?;
        migrations::is_current(&mut conn).await
    }

    /// Retries writes for up to `budget` while the database is unreachable (default
    /// [`DEFAULT_RETRY`]); `Duration::ZERO` fails them at once (an API server answering 503).
    pub fn retry_for(mut self, budget: Duration) -> Self {
        self.retry_for = budget;
        self
    }

    /// `true` when the database answers now (`SELECT 1` within `within`).
    pub async fn ping(&self, within: Duration) -> bool {
        let probe = sqlx::query_scalar::<_, i32>("SELECT 1").fetch_one(&self.pool);
        matches!(tokio::time::timeout(within, probe).await, Ok(Ok(1)))
    }

    /// The database URL without its password.
    pub fn display_url(&self) -> &str {
        &self.shown
    }

    /// The number of known schema migrations (the newest version).
    pub fn schema_version() -> i64 {
        migrations::MIGRATIONS.last().map_or(0, |m| m.version)
    }
}
