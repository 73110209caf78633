//! Run leases: "is this session's run alive" as a row in the store, renewed by a heartbeat.
//!
//! A run takes its session's lease before its first event, renews it every third of its
//! time-to-live while it runs and releases it at the end. A holder that dies (kill -9, crash,
//! power loss, a lost machine) stops renewing, so its lease expires and another run may take
//! the session over — in this process, another one, or on another machine sharing the store.
//! A run may also hold its workspace's lease ([`RunLease::claim_workspace`]): one running
//! session per workspace, renewed and released with the run's own.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::{Store, StoreError, WorkspaceLease};

/// How long a lease lives without a heartbeat: a killed run's session is free again after this.
pub const LEASE_TTL_MS: u64 = 15_000;

/// The holder name of run `run_id` in this process: `host:pid:run id`.
pub fn lease_holder(run_id: &str) -> String {
    format!("{}:{}:{run_id}", this_host(), std::process::id())
}

/// This machine's name, as lease holders give it.
fn this_host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

/// The holder (`host:pid:run id`) ran on this machine in a process that is gone — killed
/// with -9, crashed: its lease need not wait out its time-to-live before another run takes
/// the session or the workspace (red-team pass 8, R8-24: a killed `keel run` kept its
/// workspace busy for 15 s). Only where `/proc` answers for this process too; a holder on
/// another machine, in this process, or whose process may still be there is not gone.
pub fn holder_is_gone(holder: &str) -> bool {
    let mut parts = holder.splitn(3, ':');
    let (Some(host), Some(pid), Some(_)) = (parts.next(), parts.next(), parts.next()) else {
        return false;
    };
    let Ok(pid) = pid.parse::<u32>() else {
        return false;
    };
    cfg!(target_os = "linux")
        && pid != std::process::id()
        && std::path::Path::new("/proc/self").exists()
        && host == this_host()
        && !std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// Another holder's lease, watched by a run that waits for it before it is taken over: a
/// holder only cut off from the store (a database outage, a stalled machine) renews its lease
/// as soon as it can, so an expired lease still holds until this watcher has seen it unrenewed
/// — the same holder and expiry — for `grace`, counted from this watcher's first look at it
/// (not from the expiry: after an outage every lease has long expired, and a waiting run's
/// first look comes as soon as the store answers, before its holder's renewal may; CI: a turn
/// waiting for the workspace took the workspace lease of a live run the moment a restarted
/// PostgreSQL answered, and that run ended `cancelled`). A holder whose process is gone gives
/// way at once ([`holder_is_gone`]).
#[derive(Debug)]
pub struct ExpiryWatch {
    grace: Duration,
    seen: Option<(String, u64, tokio::time::Instant)>,
}

impl ExpiryWatch {
    /// A watch taking an expired lease once it stayed unrenewed for `grace`.
    pub fn new(grace: Duration) -> Self {
        Self { grace, seen: None }
    }

    /// Whether the lease of `holder` expiring at `expires_at` (Unix ms) still holds its key
    /// for this watcher: live, or expired and not yet seen unrenewed for the grace.
    pub fn holds(&mut self, holder: &str, expires_at: u64) -> bool {
        if holder_is_gone(holder) {
            return false;
        }
        if expires_at > crate::now_ms() {
            self.seen = None;
            return true;
        }
        match &self.seen {
            Some((h, at, since)) if h == holder && *at == expires_at => {
                since.elapsed() < self.grace
            }
            _ => {
                self.seen = Some((holder.to_string(), expires_at, tokio::time::Instant::now()));
                true
            }
        }
    }
}

/// A held run lease with its heartbeat. Release it with [`RunLease::release`]; dropping it
/// stops the heartbeat, so the lease expires after its time-to-live.
pub struct RunLease {
    store: Arc<dyn Store>,
    session_id: String,
    holder: String,
    ttl_ms: u64,
    /// The workspace whose lease this run also holds, renewed by the same heartbeat.
    workspace: Arc<Mutex<Option<String>>>,
    heartbeat: JoinHandle<()>,
}

impl std::fmt::Debug for RunLease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunLease")
            .field("session_id", &self.session_id)
            .field("holder", &self.holder)
            .finish_non_exhaustive()
    }
}

impl RunLease {
    /// Takes `session_id`'s lease for `holder` and starts its heartbeat (must run inside a
    /// tokio runtime). `None` when another holder's lease is live. Should the lease be lost
    /// anyway (the heartbeat stalled past the time-to-live and another run took over),
    /// `lost` is cancelled.
    pub async fn acquire(
        store: Arc<dyn Store>,
        session_id: &str,
        holder: String,
        ttl_ms: u64,
        lost: CancellationToken,
    ) -> Result<Option<Self>, StoreError> {
        if !store.acquire_lease(session_id, &holder, ttl_ms).await? {
            // A holder whose process is gone gives way at once.
            let gone = store
                .lease(session_id)
                .await?
                .filter(|l| holder_is_gone(&l.holder));
            let Some(gone) = gone else {
                return Ok(None);
            };
            store.release_lease(session_id, &gone.holder).await?;
            if !store.acquire_lease(session_id, &holder, ttl_ms).await? {
                return Ok(None);
            }
        }
        let workspace = Arc::new(Mutex::new(None));
        let heartbeat = tokio::spawn(beat(
            store.clone(),
            session_id.to_string(),
            holder.clone(),
            ttl_ms,
            workspace.clone(),
            lost,
        ));
        Ok(Some(Self {
            store,
            session_id: session_id.to_string(),
            holder,
            ttl_ms,
            workspace,
            heartbeat,
        }))
    }

    /// Takes the lease of `workspace` for this run too (renewed and released with it).
    /// `Err(lease)` names the other session's live lease when another run works there.
    pub async fn claim_workspace(
        &self,
        workspace: &str,
    ) -> Result<Result<(), WorkspaceLease>, StoreError> {
        if self
            .store
            .acquire_workspace_lease(workspace, &self.session_id, &self.holder, self.ttl_ms)
            .await?
        {
            if let Ok(mut w) = self.workspace.lock() {
                *w = Some(workspace.to_string());
            }
            return Ok(Ok(()));
        }
        match self.store.workspace_lease(workspace).await? {
            // A holder whose process is gone gives way at once: drop its row, try again.
            Some(other) if holder_is_gone(&other.holder) => {
                self.store
                    .release_workspace_lease(workspace, &other.holder)
                    .await?;
                Box::pin(self.claim_workspace(workspace)).await
            }
            Some(other) => Ok(Err(other)),
            // Released in between: try once more.
            None => Box::pin(self.claim_workspace(workspace)).await,
        }
    }

    /// [`RunLease::claim_workspace`] for a run that waits for its workspace: another run's
    /// expired lease there is taken only once `watch` has seen it unrenewed for its grace
    /// ([`ExpiryWatch`]); until then it counts as held (`Err(lease)`).
    pub async fn claim_workspace_watching(
        &self,
        workspace: &str,
        watch: &mut ExpiryWatch,
    ) -> Result<Result<(), WorkspaceLease>, StoreError> {
        if let Some(other) = self.store.workspace_lease(workspace).await?
            && other.holder != self.holder
            && watch.holds(&other.holder, other.expires_at)
        {
            return Ok(Err(other));
        }
        self.claim_workspace(workspace).await
    }

    /// The holder name.
    pub fn holder(&self) -> &str {
        &self.holder
    }

    /// Stops the heartbeat and gives the lease up.
    pub async fn release(self) -> Result<(), StoreError> {
        self.heartbeat.abort();
        let workspace = self.workspace.lock().ok().and_then(|mut w| w.take());
        if let Some(ws) = workspace {
            self.store
                .release_workspace_lease(&ws, &self.holder)
                .await?;
        }
        self.store
            .release_lease(&self.session_id, &self.holder)
            .await
    }
}

impl Drop for RunLease {
    fn drop(&mut self) {
        self.heartbeat.abort();
    }
}

/// Renews the lease every third of its time-to-live until aborted or the lease is lost.
///
/// A renewal is not waited for beyond one interval: while the database is away a store call
/// waits for a connection and retries with growing pauses (a PostgreSQL store: up to 2 s
/// apart, for a minute), so a renewal sent during an outage may return seconds after the
/// database is back — and a worker that finds the lease expired takes the session over once
/// it has stayed unrenewed for its grace (CI: a turn ended `cancelled` after a PostgreSQL
/// restart at load ~15). So a renewal still running after one interval gets a fresh one
/// beside it (the older one goes on: a store that is only slow still answers it; at most
/// [`RENEWALS`] at once, the oldest dropped), and the lease is renewed within about one
/// interval of the database's return.
async fn beat(
    store: Arc<dyn Store>,
    session_id: String,
    holder: String,
    ttl_ms: u64,
    workspace: Arc<Mutex<Option<String>>>,
    lost: CancellationToken,
) {
    let every = Duration::from_millis((ttl_ms / 3).max(20));
    let mut renewals = tokio::task::JoinSet::new();
    let mut running = std::collections::VecDeque::new();
    let mut pause = every;
    loop {
        tokio::time::sleep(pause).await;
        while running.len() >= RENEWALS {
            if let Some(oldest) = running.pop_front() {
                tokio::task::AbortHandle::abort(&oldest);
            }
        }
        let ws = workspace.lock().ok().and_then(|w| w.clone());
        running.push_back(renewals.spawn(renew(
            store.clone(),
            session_id.clone(),
            holder.clone(),
            ttl_ms,
            ws,
        )));
        let Ok(done) = tokio::time::timeout(every, renewals.join_next_with_id()).await else {
            // Still waiting for the store: another renewal now.
            pause = Duration::ZERO;
            continue;
        };
        pause = every;
        let Some(done) = done else { continue };
        let id = match &done {
            Ok((id, _)) => *id,
            Err(e) => e.id(),
        };
        running.retain(|h| h.id() != id);
        match done {
            Ok((_, Ok(true))) => {
                renewals.abort_all();
                running.clear();
            }
            Ok((_, Ok(false))) => {
                lost.cancel();
                return;
            }
            // The store is unreachable for now (or the renewal was dropped): try again at the
            // next beat; if it stays away, the lease expires and the run's next write fails on
            // its own.
            Ok((_, Err(_))) | Err(_) => {}
        }
    }
}

/// How many renewals of one lease may wait for the store at once.
const RENEWALS: usize = 2;

/// One renewal of the run's lease and, with it, its workspace's.
async fn renew(
    store: Arc<dyn Store>,
    session_id: String,
    holder: String,
    ttl_ms: u64,
    workspace: Option<String>,
) -> Result<bool, StoreError> {
    match store.renew_lease(&session_id, &holder, ttl_ms).await {
        Ok(true) => match &workspace {
            Some(ws) => store.renew_workspace_lease(ws, &holder, ttl_ms).await,
            None => Ok(true),
        },
        other => other,
    }
}

/// One lease table of the stores: run leases (keyed by session) and workspace leases (keyed
/// by workspace, naming the session that runs there) differ only in these names, so both
/// backends build their statements from one description. `p` is the backend's parameter
/// sigil (`$` for PostgreSQL, `?` for SQLite); the statements' parameters are 1 the key,
/// 2 the holder, 3 the expiry, 4 now, 5 the session (workspace leases only).
pub(crate) struct LeaseTable {
    pub(crate) table: &'static str,
    pub(crate) key: &'static str,
    /// "run lease", "workspace lease": for error contexts.
    pub(crate) what: &'static str,
    /// The rows name the session holding the key (`session_id`, parameter 5).
    pub(crate) with_session: bool,
}

pub(crate) const RUN_LEASES: LeaseTable = LeaseTable {
    table: "run_leases",
    key: "session_id",
    what: "run lease",
    with_session: false,
};

pub(crate) const WORKSPACE_LEASES: LeaseTable = LeaseTable {
    table: "workspace_leases",
    key: "workspace",
    what: "workspace lease",
    with_session: true,
};

impl LeaseTable {
    /// One statement: a new row, or a takeover only when the row is the holder's own or
    /// expired (parameters 1–4, and 5).
    pub(crate) fn take_sql(&self, p: char) -> String {
        let Self { table, key, .. } = self;
        let (column, value, set) = if self.with_session {
            (
                "session_id, ",
                format!("{p}5, "),
                "session_id = EXCLUDED.session_id, ",
            )
        } else {
            ("", String::new(), "")
        };
        format!(
            "INSERT INTO {table} ({key}, {column}holder, expires_at) VALUES ({p}1, {value}{p}2, {p}3)
             ON CONFLICT ({key}) DO UPDATE SET {set}holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at
             WHERE {table}.holder = EXCLUDED.holder OR {table}.expires_at <= {p}4"
        )
    }

    /// Moves the holder's expiry (parameters 1–3).
    pub(crate) fn renew_sql(&self, p: char) -> String {
        let Self { table, key, .. } = self;
        format!("UPDATE {table} SET expires_at = {p}3 WHERE {key} = {p}1 AND holder = {p}2")
    }

    /// Drops the holder's row (parameters 1–2).
    pub(crate) fn release_sql(&self, p: char) -> String {
        let Self { table, key, .. } = self;
        format!("DELETE FROM {table} WHERE {key} = {p}1 AND holder = {p}2")
    }

    /// `holder, expires_at` and, with a session, `session_id` of the key (parameter 1).
    pub(crate) fn read_sql(&self, p: char) -> String {
        let Self { table, key, .. } = self;
        let session = if self.with_session {
            ", session_id"
        } else {
            ""
        };
        format!("SELECT holder, expires_at{session} FROM {table} WHERE {key} = {p}1")
    }

    /// "taking a run lease", for errors.
    pub(crate) fn doing(&self, verb: &str) -> String {
        format!("{verb} a {}", self.what)
    }
}

/// A lease row as read: holder, expiry (Unix ms), and the session for workspace leases.
pub(crate) struct LeaseRow {
    pub(crate) holder: String,
    pub(crate) expires_at: u64,
    pub(crate) session_id: Option<String>,
}

impl LeaseRow {
    pub(crate) fn into_lease(self) -> crate::Lease {
        crate::Lease {
            holder: self.holder,
            expires_at: self.expires_at,
        }
    }

    pub(crate) fn into_workspace_lease(self, workspace: &str) -> WorkspaceLease {
        WorkspaceLease {
            workspace: workspace.to_string(),
            session_id: self.session_id.unwrap_or_default(),
            holder: self.holder,
            expires_at: self.expires_at,
        }
    }
}

/// `now + ttl_ms` in the stores' signed milliseconds, saturating.
pub(crate) fn expiry(now: i64, ttl_ms: u64) -> i64 {
    now.saturating_add(i64::try_from(ttl_ms).unwrap_or(i64::MAX))
}
