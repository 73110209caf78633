//! A measurement, not a check (ignored by default): launch (engine build) → first model request
//! with no MCP server and with one deferred server that sleeps 3 s before its handshake. Uses
//! only APIs older than background start, so the same file measures an older tree too:
//!
//!     cargo test -p keel-engine --test mcp_launch_measure -- --ignored --nocapture

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use keel_engine::{Config, EngineBuilder, RunOptions};
use keel_llm::scripted::ScriptedProvider;
use keel_llm::{ChatRequest, EventStream, LlmError, Provider, ProviderInfo};
use keel_store::SqliteStore;

struct Timed {
    inner: ScriptedProvider,
    first: Arc<Mutex<Option<Instant>>>,
}

impl Provider for Timed {
    fn info(&self) -> ProviderInfo {
        self.inner.info()
    }

    fn stream<'a>(
        &'a self,
        request: &'a ChatRequest,
    ) -> BoxFuture<'a, Result<EventStream, LlmError>> {
        self.first.lock().unwrap().get_or_insert_with(Instant::now);
        self.inner.stream(request)
    }
}

async fn launch_to_first_request(slow_server: bool) -> Duration {
    let dir = tempfile::tempdir().unwrap();
    let mut config = Config::default();
    config.verify.enabled = false;
    if slow_server {
        let script = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../keel-mcp/tests/servers/py_server.py"
        );
        config.mcp.servers.insert(
            "slow".into(),
            keel_mcp::ServerConfig {
                command: Some("python3".into()),
                args: vec![script.into(), "--slow-start=3".into()],
                ..keel_mcp::ServerConfig::default()
            },
        );
    }
    let first = Arc::new(Mutex::new(None));
    let provider = Timed {
        inner: ScriptedProvider::from_yaml("turns:\n  - text: ok\n").unwrap(),
        first: first.clone(),
    };
    let launch = Instant::now();
    let engine = EngineBuilder::new(config, dir.path())
        .provider(Arc::new(provider))
        .store(Arc::new(SqliteStore::open_in_memory().unwrap()))
        .build()
        .unwrap();
    engine.run("go", RunOptions::default()).await.unwrap();
    let at = first.lock().unwrap().expect("a request was made");
    at - launch
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement; run with --ignored --nocapture"]
async fn measure_launch_to_first_request_with_a_slow_mcp_server() {
    let mut none = Vec::new();
    let mut slow = Vec::new();
    for _ in 0..5 {
        none.push(launch_to_first_request(false).await);
        slow.push(launch_to_first_request(true).await);
    }
    none.sort();
    slow.sort();
    eprintln!(
        "launch -> first request (debug, median of 5): no MCP {:?}; one MCP server sleeping 3 s {:?} (min {:?}, max {:?})",
        none[2], slow[2], slow[0], slow[4]
    );
}
