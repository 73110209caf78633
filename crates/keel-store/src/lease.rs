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
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into());
    format!("{host}:{}:{run_id}", std::process::id())
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
            return Ok(None);
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
            Some(other) => Ok(Err(other)),
            // Released in between: try once more.
            None => Box::pin(self.claim_workspace(workspace)).await,
        }
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
async fn beat(
    store: Arc<dyn Store>,
    session_id: String,
    holder: String,
    ttl_ms: u64,
    workspace: Arc<Mutex<Option<String>>>,
    lost: CancellationToken,
) {
    let every = Duration::from_millis((ttl_ms / 3).max(20));
    loop {
        tokio::time::sleep(every).await;
        let ws = workspace.lock().ok().and_then(|w| w.clone());
        let kept = match store.renew_lease(&session_id, &holder, ttl_ms).await {
            Ok(true) => match &ws {
                Some(ws) => store.renew_workspace_lease(ws, &holder, ttl_ms).await,
                None => Ok(true),
            },
            other => other,
        };
        match kept {
            Ok(true) => {}
            Ok(false) => {
                lost.cancel();
                return;
            }
            // The store is unreachable for now: try again at the next beat; if it stays
            // away, the lease expires and the run's next write fails on its own.
            Err(_) => {}
        }
    }
}
