//! Flow run leases: a run holds `flow-run:<id>` while it runs and gives it up at the end;
//! "is the run alive" follows the lease (a holder on another machine by its expiry, one on
//! this machine by its pid), so `resume` refuses a run live elsewhere and takes over one
//! whose process here is gone at once.

// Tests start programs of their own (the keel binary, git fixtures, tmux, servers): allowed
// here, outside Keel's one spawn path (docs/SECURITY.md, "One way to start a process").
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use std::path::Path;
use std::sync::Arc;

use futures::future::BoxFuture;
use keel_flow::exec::{AgentRequest, AgentResult, AgentRunner};
use keel_flow::store::FlowStore;
use keel_flow::{Executor, FlowError, compile};
use keel_store::{SqliteStore, Store};
use tokio_util::sync::CancellationToken;

struct NoAgents;

impl AgentRunner for NoAgents {
    fn run(&self, _req: AgentRequest) -> BoxFuture<'_, AgentResult> {
        Box::pin(async { AgentResult::default() })
    }
}

const FLOW: &str = "name: two\nnodes:\n  - id: a\n    type: shell\n    command: echo a\n  - id: b\n    type: shell\n    needs: [a]\n    command: echo b\n";

fn executor(store: Arc<SqliteStore>) -> Executor {
    Executor {
        store: FlowStore::new(store),
        agents: Arc::new(NoAgents),
        shell: keel_tools::shell::ShellSettings::default(),
        build_dirs: Default::default(),
        events: None,
        cancel: CancellationToken::new(),
        approvals: None,
    }
}

/// A pid no process has now (a child that has exited).
fn dead_pid() -> u32 {
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    pid
}

/// This machine's host name as lease holders spell it.
fn host() -> String {
    let me = keel_store::lease_holder("x");
    me.split_once(':').unwrap().0.to_string()
}

/// A completed run, then marked `running` in process `pid` (as if that process had died).
async fn interrupted_run(exec: &Executor, dir: &Path, pid: u32) -> keel_flow::store::RunRecord {
    let flow = compile(FLOW, Path::new("flow.yaml")).unwrap();
    let inputs = flow.resolve_inputs(&[]).unwrap();
    let sum = exec.start(flow, FLOW, dir, inputs).await.unwrap();
    assert_eq!(sum.status, "completed", "{:?}", sum.error);
    let rec = exec.store.get(&sum.run_id).await.unwrap();
    exec.store
        .update(&rec.id, "running", &rec.state, &rec.trace, Some(pid))
        .await
        .unwrap();
    exec.store.get(&rec.id).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finished_run_gives_its_lease_up() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(SqliteStore::open_in_memory().unwrap());
    let exec = executor(store.clone());
    let rec = interrupted_run(&exec, dir.path(), std::process::id()).await;
    assert!(
        store
            .lease(&format!("flow-run:{}", rec.id))
            .await
            .unwrap()
            .is_none(),
        "released at the end of the run"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_live_on_another_machine_is_not_resumed_until_its_lease_expires() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(SqliteStore::open_in_memory().unwrap());
    let exec = executor(store.clone());
    // Its pid means nothing here: the lease of another host says it runs.
    let rec = interrupted_run(&exec, dir.path(), dead_pid()).await;
    let key = format!("flow-run:{}", rec.id);
    let remote = format!("another-host-{}:1:{}", host(), rec.id);
    assert!(store.acquire_lease(&key, &remote, 60_000).await.unwrap());
    assert!(exec.store.run_alive(&rec).await.unwrap());
    let err = exec.resume(&rec.id).await.unwrap_err();
    assert!(
        matches!(&err, FlowError::Usage(m) if m.contains("still running")),
        "{err}"
    );
    // The remote holder stopped renewing: once expired, the run is dead and resumes here.
    store.renew_lease(&key, &remote, 1).await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    assert!(!exec.store.run_alive(&rec).await.unwrap());
    let sum = exec.resume(&rec.id).await.unwrap();
    assert_eq!(sum.status, "completed", "{:?}", sum.error);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_lease_of_a_dead_process_here_is_taken_over_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(SqliteStore::open_in_memory().unwrap());
    let exec = executor(store.clone());
    let pid = dead_pid();
    let rec = interrupted_run(&exec, dir.path(), pid).await;
    let key = format!("flow-run:{}", rec.id);
    let killed = format!("{}:{pid}:{}", host(), rec.id);
    assert!(store.acquire_lease(&key, &killed, 60_000).await.unwrap());
    assert!(
        !exec.store.run_alive(&rec).await.unwrap(),
        "its process is gone"
    );
    let sum = exec.resume(&rec.id).await.unwrap();
    assert_eq!(sum.status, "completed", "{:?}", sum.error);
    assert!(store.lease(&key).await.unwrap().is_none());
}
