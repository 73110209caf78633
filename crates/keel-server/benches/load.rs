//! Load bench: many sessions at once over loopback, each driven by a WebSocket client with a
//! scripted model. Reports completed turns, errors and the event delivery latency (from the
//! moment the store committed an event to the moment its client received it), next to the
//! same figures for one session alone measured in the same run.
//!
//!     cargo bench -p keel-server --bench load [-- SESSIONS]     (default 50)

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{SinkExt, StreamExt};
use keel_protocol::Event;
use keel_server::{Server, ServerOptions, SessionBuilder};
use keel_store::{SqliteStore, Store, StoreFuture};
use tokio_tungstenite::tungstenite::Message as WsMessage;

const SCRIPT: &str = r#"
turns:
  - text: "Reading the library to see what it offers before answering."
    tool_calls:
      - name: read_file
        arguments: {path: "src/lib.rs"}
  - text: "The library has one function, add, which returns the sum of its two arguments."
  - text: "Nothing else uses it yet; it is safe to change."
"#;

/// Messages each session sends (each one a turn).
const TURNS_PER_SESSION: usize = 2;

/// The SQLite store, noting when each event was committed.
struct TimedStore {
    inner: SqliteStore,
    committed: Mutex<HashMap<(String, u64), Instant>>,
}

impl Store for TimedStore {
    keel_store::delegate_store!(inner;
        create_session update_session set_session_task set_session_model delete_session
        append_message list_sessions get_session events messages last_seq create_blocker
        list_blockers get_blocker answer_blocker mark_blockers_delivered memory_entries
        save_result stored_results acquire_lease renew_lease release_lease lease
        acquire_workspace_lease renew_workspace_lease release_workspace_lease workspace_lease
    );
    fn append_event<'a>(&'a self, event: &'a Event) -> StoreFuture<'a, Event> {
        Box::pin(async move {
            let event = self.inner.append_event(event).await?;
            let now = Instant::now();
            self.committed
                .lock()
                .unwrap()
                .insert((event.session_id.clone(), event.seq), now);
            Ok(event)
        })
    }
}

#[derive(Default)]
struct Report {
    turns: usize,
    errors: Vec<String>,
    events: usize,
    /// Commit-to-client latencies, microseconds.
    latencies: Vec<u64>,
    wall: Duration,
}

/// The server's API token (every server requires one).
const TOKEN: &str = "bench-token-0123456789abcdef";

async fn create(addr: std::net::SocketAddr) -> Result<String, String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let body = r#"{"provider": "scripted", "script": "script.yaml"}"#;
    let mut s = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| e.to_string())?;
    let req = format!(
        "POST /api/v1/sessions HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {TOKEN}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes())
        .await
        .map_err(|e| e.to_string())?;
    let mut raw = String::new();
    s.read_to_string(&mut raw)
        .await
        .map_err(|e| e.to_string())?;
    let json = raw.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
    let v: serde_json::Value = serde_json::from_str(json).map_err(|e| format!("{e}: {raw}"))?;
    v["id"].as_str().map(str::to_string).ok_or(raw)
}

/// One client: creates its session, sends its messages over a WebSocket, checks every event
/// arrives once and in order; returns (session id, turns, errors, receipts).
async fn client(addr: std::net::SocketAddr) -> (String, usize, Vec<String>, Vec<(u64, Instant)>) {
    let mut errors = Vec::new();
    let mut receipts = Vec::new();
    let id = match create(addr).await {
        Ok(id) => id,
        Err(e) => return (String::new(), 0, vec![format!("create: {e}")], receipts),
    };
    let url = format!("ws://{addr}/api/v1/sessions/{id}/ws?token={TOKEN}");
    let (mut ws, _) = match tokio_tungstenite::connect_async(url).await {
        Ok(ws) => ws,
        Err(e) => return (id, 0, vec![format!("connect: {e}")], receipts),
    };
    let mut turns = 0;
    let mut last = 0;
    for n in 0..TURNS_PER_SESSION {
        let msg = serde_json::json!({"type": "user_message", "content": format!("question {n}")});
        if let Err(e) = ws.send(WsMessage::text(msg.to_string())).await {
            errors.push(format!("send: {e}"));
            break;
        }
        loop {
            let Ok(Some(Ok(WsMessage::Text(text)))) =
                tokio::time::timeout(Duration::from_secs(60), ws.next()).await
            else {
                errors.push(format!("session {id}: the stream ended early"));
                return (id, turns, errors, receipts);
            };
            let now = Instant::now();
            let v: serde_json::Value = serde_json::from_str(text.as_str()).unwrap_or_default();
            let Some(seq) = v["seq"].as_u64() else {
                errors.push(format!("session {id}: {v}"));
                break;
            };
            if seq != last + 1 {
                errors.push(format!("session {id}: seq {seq} after {last}"));
            }
            last = seq;
            receipts.push((seq, now));
            if v["type"] == "turn_finished" {
                if v["status"] == "completed" {
                    turns += 1;
                } else {
                    errors.push(format!("session {id}: turn ended {}", v["status"]));
                }
                break;
            }
        }
    }
    let _ = ws.close(None).await;
    (id, turns, errors, receipts)
}

async fn run(sessions: usize) -> Report {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("src")).unwrap();
    std::fs::write(
        dir.path().join("src/lib.rs"),
        "pub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("script.yaml"), SCRIPT).unwrap();
    // Verification and the auto-check would time the toolchain, not the server.
    std::fs::create_dir_all(dir.path().join(".keel")).unwrap();
    std::fs::write(
        dir.path().join(".keel/config.toml"),
        "[verify]\nenabled = false\n[shell.lint]\nenabled = false\n",
    )
    .unwrap();
    let store = Arc::new(TimedStore {
        inner: SqliteStore::open(&dir.path().join("keel.db")).unwrap(),
        committed: Mutex::new(HashMap::new()),
    });
    let options = ServerOptions {
        host: "127.0.0.1".into(),
        port: 0,
        token: Some(TOKEN.into()),
        allowed_origins: vec![],
        default_workspace: dir.path().to_path_buf(),
        workspace_roots: vec![],
    };
    let server = Server::bind(options, SessionBuilder::isolated(store.clone()))
        .await
        .unwrap();
    let addr = server.local_addr();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(server.run(async move {
        let _ = stopped.await;
    }));

    let started = Instant::now();
    let clients: Vec<_> = (0..sessions).map(|_| tokio::spawn(client(addr))).collect();
    let mut report = Report::default();
    let mut all = Vec::new();
    for c in clients {
        let (id, turns, errors, receipts) = c.await.unwrap();
        report.turns += turns;
        report.errors.extend(errors);
        all.push((id, receipts));
    }
    report.wall = started.elapsed();
    let committed = std::mem::take(&mut *store.committed.lock().unwrap());
    for (id, receipts) in all {
        for (seq, at) in receipts {
            report.events += 1;
            match committed.get(&(id.clone(), seq)) {
                Some(c) => report
                    .latencies
                    .push(at.saturating_duration_since(*c).as_micros() as u64),
                None => report.errors.push(format!(
                    "session {id}: event {seq} reached a client but not the store"
                )),
            }
        }
    }
    let _ = stop.send(());
    let _ = task.await;
    report
}

fn percentile(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i] as f64 / 1000.0
}

fn print(label: &str, r: &mut Report, sessions: usize) {
    r.latencies.sort_unstable();
    println!(
        "{label:<28} sessions {sessions:>3}  turns {:>4}/{:<4} errors {:>2}  events {:>5}  latency p50 {:>7.3} ms  p99 {:>7.3} ms  wall {:>6.0} ms  ({:.0} turns/s)",
        r.turns,
        sessions * TURNS_PER_SESSION,
        r.errors.len(),
        r.events,
        percentile(&r.latencies, 0.50),
        percentile(&r.latencies, 0.99),
        r.wall.as_secs_f64() * 1000.0,
        r.turns as f64 / r.wall.as_secs_f64().max(1e-9),
    );
    for e in r.errors.iter().take(5) {
        println!("    error: {e}");
    }
}

fn main() {
    let sessions: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(50);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        // Warm-up (page cache, lazy statics), not reported.
        let _ = run(2).await;
        let mut alone = run(1).await;
        print("baseline: one session", &mut alone, 1);
        let mut many = run(sessions).await;
        print("concurrent sessions", &mut many, sessions);
        let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { f64::NAN };
        println!(
            "ratio concurrent/baseline: p50 {:.1}x  p99 {:.1}x",
            ratio(
                percentile(&many.latencies, 0.5),
                percentile(&alone.latencies, 0.5)
            ),
            ratio(
                percentile(&many.latencies, 0.99),
                percentile(&alone.latencies, 0.99)
            ),
        );
        if !many.errors.is_empty() || many.turns != sessions * TURNS_PER_SESSION {
            eprintln!("load bench: {} errors", many.errors.len());
            std::process::exit(1);
        }
    });
}
