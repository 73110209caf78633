//! `run_worker`: the process's apalis workers, kept running through database outages.
//!
//! apalis stops a worker at the first failed poll, heartbeat or acknowledgement (the backend
//! marks itself dead). While PostgreSQL restarts, that is every worker: each one is started
//! again here under a new name once the database answers, with backoff while it does not, and
//! a probe keeps `/health`'s `database` current. The turns those workers were running go on
//! (see [`crate::worker`]); the jobs they held are re-enqueued by apalis when the stopped
//! worker's heartbeats are missed, and find their turns finished.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use apalis::layers::retry::backoff::{self, ExponentialBackoffMaker, MakeBackoff};
use apalis::layers::retry::{BackoffRetryPolicy, HasherRng, RetryPolicy};
use apalis::prelude::{WorkerBuilder, WorkerBuilderExt, WorkerError};
use apalis_postgres::{PgPool, PostgresStorage};
use keel_engine::runtime::SessionBuilder;
use tokio_util::sync::CancellationToken;

use crate::checkout::Checkouts;
use crate::worker::{State, WorkerOptions, WorkerStats, run_turn};
use crate::{QueueError, TurnJob, config};

/// The longest pause between two looks at a database that does not answer.
const MAX_PAUSE: Duration = Duration::from_secs(10);

/// Says once when the database goes away and once when it is back (not a line per failure).
pub(crate) struct Outage {
    down: AtomicBool,
    stats: Arc<WorkerStats>,
    /// Whether this one says so (one queue's workers do; the others' would repeat it).
    announce: bool,
}

impl Outage {
    /// An outage record for `stats`; `announce`: log its start and end.
    pub(crate) fn new(stats: Arc<WorkerStats>, announce: bool) -> Arc<Self> {
        Arc::new(Self {
            down: AtomicBool::new(false),
            stats,
            announce,
        })
    }

    fn down(&self, why: &str) {
        self.stats.database_down.store(true, Ordering::Relaxed);
        if !self.down.swap(true, Ordering::Relaxed) && self.announce {
            crate::notice::tell!(
                "keel worker: the database is unreachable ({why}); waiting for it with backoff, running turns go on"
            );
        }
    }

    fn up(&self) {
        self.stats.database_down.store(false, Ordering::Relaxed);
        if self.down.swap(false, Ordering::Relaxed) && self.announce {
            crate::notice::tell!("keel worker: the database is back; taking turns again");
        }
    }
}

/// `Ok` when the database answers within two seconds.
async fn answers(pool: &PgPool) -> Result<(), String> {
    let probe = sqlx::query_scalar::<_, i32>("SELECT 1").fetch_one(pool);
    match tokio::time::timeout(Duration::from_secs(2), probe).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("no answer within 2 s".into()),
    }
}

/// Runs `options.concurrency` apalis workers on the turn queue of `pool`'s database until
/// `stop` is cancelled; running turns then finish before this returns. A worker stopped by a
/// database failure is started again once the database answers.
pub async fn run_worker(
    pool: PgPool,
    builder: SessionBuilder,
    options: WorkerOptions,
    stats: Arc<WorkerStats>,
    stop: CancellationToken,
) -> Result<(), QueueError> {
    let concurrency = options.concurrency.max(1);
    // Cancels and approval answers from the servers reach the turns through the control
    // channel; its listener re-connects by itself after an outage.
    let controls = crate::control::Controls::new(pool.clone());
    let listening = CancellationToken::new();
    let listener = tokio::spawn(controls.clone().run(listening.clone()));
    let _stop_listening = listening.clone().drop_guard();
    // A turn's run lease is renewed every heartbeat and lives three of them, like the worker
    // itself; expired, it is taken once it stayed unrenewed for three more, as this worker
    // sees it: a holder cut off by a database outage renews it within about a heartbeat of
    // the database's return, on a loaded machine later (CI, load ~15: a grace of 1.5 s took
    // a live turn's session, which ended `cancelled`). A worker killed with -9 on this machine
    // gives its session up at once (its process is gone); elsewhere in about six seconds.
    let ttl = 3 * options.heartbeat.max(Duration::from_secs(1));
    let builder = builder.lease_ttl_secs(ttl.as_secs());
    let state = State::new(builder, stats.clone(), concurrency, controls)
        .with_lease_grace(ttl)
        .with_checkouts(Checkouts::new(&options.checkout_dir, options.git_timeout));
    let outage = Outage::new(stats, true);
    // Checks the backoff settings once, before anything runs.
    retry_policy(options.retries)?;
    let probe = tokio::spawn(watch_database(
        pool.clone(),
        options.heartbeat,
        outage.clone(),
        stop.clone(),
    ));
    let mut workers = tokio::task::JoinSet::new();
    for slot in 0..concurrency {
        workers.spawn(supervise(
            slot,
            pool.clone(),
            options.clone(),
            state.clone(),
            outage.clone(),
            stop.clone(),
        ));
    }
    while workers.join_next().await.is_some() {}
    probe.abort();
    // Turns whose apalis worker stopped during an outage still run: let them finish.
    let _ = state.slots.acquire_many(concurrency as u32).await;
    listening.cancel();
    let _ = listener.await;
    Ok(())
}

pub(crate) fn retry_policy(
    retries: usize,
) -> Result<BackoffRetryPolicy<backoff::ExponentialBackoff>, QueueError> {
    let backoff = ExponentialBackoffMaker::new(
        Duration::from_millis(500),
        Duration::from_secs(10),
        0.5,
        HasherRng::default(),
    )
    .map_err(|e| QueueError::Worker(format!("bad backoff: {e}")))?
    .make_backoff();
    Ok(RetryPolicy::retries(retries).with_backoff(backoff))
}

/// Probes the database every heartbeat so `/health` says whether it answers.
async fn watch_database(
    pool: PgPool,
    every: Duration,
    outage: Arc<Outage>,
    stop: CancellationToken,
) {
    loop {
        match answers(&pool).await {
            Ok(()) => outage.up(),
            Err(e) => outage.down(&e),
        }
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(every) => {}
        }
    }
}

/// One apalis worker (slot `slot`), started again after each database failure until `stop`.
async fn supervise(
    slot: usize,
    pool: PgPool,
    options: WorkerOptions,
    state: State,
    outage: Arc<Outage>,
    stop: CancellationToken,
) {
    let base = format!("{}-{slot}", options.name);
    keep_running(&base, &pool, &outage, &stop, |name| {
        let (pool, options, state, stop) =
            (pool.clone(), options.clone(), state.clone(), stop.clone());
        async move { run_once(&name, &pool, &options, &state, &stop).await }
    })
    .await;
}

/// Runs the apalis worker `run(name)` makes, and again under a new name after each failure
/// once the database answers (backoff up to [`MAX_PAUSE`]), until `stop` is cancelled.
pub(crate) async fn keep_running<F, Fut>(
    base: &str,
    pool: &PgPool,
    outage: &Outage,
    stop: &CancellationToken,
    run: F,
) where
    F: Fn(String) -> Fut,
    Fut: std::future::Future<Output = Result<(), QueueError>>,
{
    let mut generation = 0u32;
    loop {
        // A new name per start: the stopped worker's jobs are re-enqueued once its
        // heartbeats are missed (a worker registered under the same name would keep them).
        let name = match generation {
            0 => base.to_string(),
            g => format!("{base}.{g}"),
        };
        let result = run(name).await;
        if stop.is_cancelled() {
            return;
        }
        let why = match result {
            Ok(()) => "the worker stopped".to_string(),
            Err(e) => e.to_string(),
        };
        outage.down(&why);
        let mut pause = Duration::from_millis(500);
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(pause) => {}
            }
            if answers(pool).await.is_ok() {
                break;
            }
            pause = (pause * 2).min(MAX_PAUSE);
        }
        outage.up();
        generation += 1;
    }
}

async fn run_once(
    name: &str,
    pool: &PgPool,
    options: &WorkerOptions,
    state: &State,
    stop: &CancellationToken,
) -> Result<(), QueueError> {
    let storage = PostgresStorage::<TurnJob>::new(pool)
        .with_config(config(options.heartbeat, 1))
        .with_pubsub();
    let worker = WorkerBuilder::new(name)
        .backend(storage)
        // The slot is outside the retries: a retrying turn keeps its slot (the other way
        // round, the worker readying its next fetch takes the only permit and the retry
        // waits for it forever).
        .concurrency(1)
        .retry(retry_policy(options.retries)?)
        .data(state.clone())
        .build(run_turn);
    let stop = stop.clone();
    worker
        .run_until(async move {
            stop.cancelled().await;
            Ok::<(), WorkerError>(())
        })
        .await
        .map_err(|e| QueueError::Worker(e.to_string()))
}

/// The body of a `run_*_worker`: one apalis worker of `$job`s from queue `$queue` (handler
/// `$handler`, data `$state`, which has `stats`), named `NAME-$suffix`, started again after
/// each database failure once the database answers, until `$stop`. Evaluates to
/// `Result<(), QueueError>`.
macro_rules! supervised_queue {
    ($job:ty, $queue:expr, $suffix:literal, $handler:expr,
     $pool:expr, $options:expr, $state:expr, $stop:expr) => {{
        use apalis::prelude::WorkerBuilderExt as _;
        let (pool, options, state, stop) = ($pool, $options, $state, $stop);
        match $crate::supervise::retry_policy(options.retries) {
            Err(e) => Err(e),
            Ok(_) => {
                let outage = $crate::supervise::Outage::new(state.stats.clone(), false);
                let base = format!("{}-{}", options.name, $suffix);
                $crate::supervise::keep_running(&base, &pool, &outage, &stop, |name| {
                    let (pool, options, state, stop) =
                        (pool.clone(), options.clone(), state.clone(), stop.clone());
                    async move {
                        let storage = apalis_postgres::PostgresStorage::<$job>::new(&pool)
                            .with_config($crate::config_for($queue, options.heartbeat, 1))
                            .with_pubsub();
                        apalis::prelude::WorkerBuilder::new(name)
                            .backend(storage)
                            .concurrency(1)
                            .retry($crate::supervise::retry_policy(options.retries)?)
                            .data(state)
                            .build($handler)
                            .run_until(async move {
                                stop.cancelled().await;
                                Ok::<(), apalis::prelude::WorkerError>(())
                            })
                            .await
                            .map_err(|e| $crate::QueueError::Worker(e.to_string()))
                    }
                })
                .await;
                Ok(())
            }
        }
    }};
}
pub(crate) use supervised_queue;
