//! Stateless `keel serve --database` and `keel worker` end to end, as real processes on
//! loopback ports sharing one PostgreSQL database (a fresh one per test; needs
//! `KEEL_TEST_DATABASE_URL`, e.g. what `.ci/run` exports — skipped visibly without it, a
//! failure in CI):
//! - two servers and three workers: scripted sessions created and sent through both servers
//!   all complete, and a WebSocket client attached to the *other* server receives every event
//!   of each session exactly once, in seq order;
//! - a worker killed with SIGKILL mid-turn: another worker takes the job over once the dead
//!   one's heartbeats stop, resumes the session from its last stored event, and the session
//!   completes with no event lost or duplicated.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::{Value, json};
use sqlx::Connection;

const TOKEN: &str = "cluster-test-token-0123456789";

/// The test server's URL, or `None` after saying why this is skipped (a failure in CI).
fn test_database_url() -> Option<String> {
    match std::env::var("KEEL_TEST_DATABASE_URL") {
        Ok(url) if !url.trim().is_empty() => Some(url),
        _ => {
            let what = "KEEL_TEST_DATABASE_URL is not set: start PostgreSQL and set it, e.g. \
                        `source .ci/postgres.sh` exports \
                        postgres://keelpg@127.0.0.1:55432/keel_test";
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "servers and workers must be tested on PostgreSQL in CI: {what}"
            );
            eprintln!("SKIPPED: keel serve --database and keel worker: {what}");
            None
        }
    }
}

/// A new, empty database on the test server, migrated with `keel db migrate`.
async fn fresh_database(base_url: &str, tag: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let name = format!("keel_cluster_{tag}_{}_{nanos}", std::process::id());
    let mut conn = sqlx::PgConnection::connect(base_url).await.unwrap();
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .execute(&mut conn)
        .await
        .unwrap();
    let (prefix, _) = base_url.rsplit_once('/').unwrap();
    format!("{prefix}/{name}")
}

/// A temp workspace (shared by every process: the "shared storage") and home.
struct Cluster {
    _tmp: tempfile::TempDir,
    workspace: PathBuf,
    home: PathBuf,
    url: String,
    servers: Vec<Proc>,
    workers: Vec<Proc>,
}

/// A running `keel` process and the address it printed.
struct Proc {
    child: Child,
    addr: String,
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Cluster {
    fn new(url: String, script: &str) -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let workspace = tmp.path().join("repo");
        let home = tmp.path().join("home");
        std::fs::create_dir_all(workspace.join("src")).unwrap();
        std::fs::create_dir_all(&home).unwrap();
        std::fs::write(workspace.join("src/lib.rs"), "pub fn one() -> u8 { 1 }\n").unwrap();
        std::fs::write(workspace.join("script.yaml"), script).unwrap();
        let c = Self {
            _tmp: tmp,
            workspace,
            home,
            url,
            servers: Vec::new(),
            workers: Vec::new(),
        };
        let out = c
            .keel()
            .args(["db", "migrate", "--database", &c.url])
            .output();
        let out = out.unwrap();
        assert!(
            out.status.success(),
            "keel db migrate: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        c
    }

    fn keel(&self) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_keel"));
        cmd.current_dir(&self.workspace)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &self.home)
            .env("KEEL_HOME", self.home.join("data"))
            .env("KEEL_SHELL__LINT__ENABLED", "false")
            .env("KEEL_VERIFY__ENABLED", "false")
            .env("KEEL_WORKER__HEARTBEAT_SECS", "1")
            .env("NO_COLOR", "1");
        cmd
    }

    /// Starts a process and waits for the line that starts with `ready` (its address is the
    /// first `http://` word of the line that starts with `addr`).
    fn spawn(&self, args: &[&str], addr_line: &str, ready_line: &str) -> Proc {
        let mut child = self
            .keel()
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut addr = String::new();
        loop {
            let mut line = String::new();
            assert!(
                out.read_line(&mut line).unwrap() > 0,
                "`keel {}` exited before it was ready",
                args.join(" ")
            );
            if line.starts_with(addr_line)
                && let Some(w) = line.split_whitespace().find(|w| w.starts_with("http://"))
            {
                addr = w
                    .trim_start_matches("http://")
                    .split(['/', '#'])
                    .next()
                    .unwrap()
                    .to_string();
            }
            if line.starts_with(ready_line) {
                break;
            }
        }
        // Keep reading so the process never blocks on a full pipe.
        std::thread::spawn(move || {
            let mut sink = Vec::new();
            let _ = out.read_to_end(&mut sink);
        });
        Proc { child, addr }
    }

    fn start_server(&mut self) {
        let ws = self.workspace.display().to_string();
        let p = self.spawn(
            &[
                "serve",
                "--database",
                &self.url.clone(),
                "--port",
                "0",
                "--token",
                TOKEN,
                "-w",
                &ws,
            ],
            "Keel is serving",
            "Press Ctrl-C",
        );
        self.servers.push(p);
    }

    fn start_worker(&mut self) {
        let p = self.spawn(
            &[
                "worker",
                "--database",
                &self.url.clone(),
                "--health-port",
                "0",
            ],
            "health:",
            "keel worker",
        );
        self.workers.push(p);
    }
}

/// One HTTP/1.1 request with the token; the status and the JSON body.
fn request(addr: &str, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
    let body = body.map(Value::to_string).unwrap_or_default();
    let raw = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(raw.as_bytes()).unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

fn create_session(addr: &str) -> String {
    let (status, body) = request(
        addr,
        "POST",
        "/api/v1/sessions",
        Some(&json!({"provider": "scripted", "script": "script.yaml"})),
    );
    assert_eq!(status, 201, "{body}");
    body["id"].as_str().unwrap().to_string()
}

fn send(addr: &str, id: &str, content: &str) {
    let (status, body) = request(
        addr,
        "POST",
        &format!("/api/v1/sessions/{id}/messages"),
        Some(&json!({ "content": content })),
    );
    assert_eq!(status, 202, "{body}");
    assert_eq!(body["queued"], true, "{body}");
}

/// `n` from the environment variable `var`, else `default`.
fn env_count(var: &str, default: usize) -> usize {
    std::env::var(var)
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(default)
}

/// Every event the WebSocket at `addr` delivers for session `id` until `turn_finished`.
async fn watch(addr: String, id: String, limit: Duration) -> Vec<Value> {
    let url = format!("ws://{addr}/api/v1/sessions/{id}/ws?since_seq=0&token={TOKEN}");
    let (mut socket, _) = tokio_tungstenite::connect_async(url).await.unwrap();
    let mut events = Vec::new();
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        let msg = tokio::time::timeout_at(deadline, socket.next())
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "session {id}: no turn_finished within {limit:?}; got {}",
                    kinds(&events).join(",")
                )
            });
        let Some(Ok(msg)) = msg else {
            panic!("session {id}: the WebSocket closed early");
        };
        let tokio_tungstenite::tungstenite::Message::Text(text) = msg else {
            continue;
        };
        let mut event: Value = serde_json::from_str(&text).unwrap();
        // Delivery latency (emitted → received here), kept beside the event for the figures.
        let emitted = event["ts"].as_u64().unwrap_or(0);
        let latency = now_ms().saturating_sub(emitted);
        event["_latency_ms"] = json!(latency);
        let done = event["type"] == "turn_finished";
        events.push(event);
        if done {
            let _ = socket.close(None).await;
            return events;
        }
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// The events without the test's own `_latency_ms`.
fn strip(events: &[Value]) -> Vec<Value> {
    events
        .iter()
        .map(|e| {
            let mut e = e.clone();
            if let Some(o) = e.as_object_mut() {
                o.remove("_latency_ms");
            }
            e
        })
        .collect()
}

fn kinds(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| e["type"].as_str().unwrap_or("?").to_string())
        .collect()
}

/// Seqs 1..=n, each once and in order, and the same events the store has.
fn assert_exactly_once(addr: &str, id: &str, events: &[Value]) {
    let seqs: Vec<u64> = events.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    let expected: Vec<u64> = (1..=seqs.len() as u64).collect();
    assert_eq!(seqs, expected, "session {id}: {:?}", kinds(events));
    let (status, stored) = request(addr, "GET", &format!("/api/v1/sessions/{id}/events"), None);
    assert_eq!(status, 200);
    let stored = stored.as_array().unwrap();
    assert_eq!(
        stored.len(),
        events.len(),
        "session {id}: stored vs streamed"
    );
    for (a, b) in stored.iter().zip(&strip(events)) {
        assert_eq!(a, b, "session {id}: the stream differs from the store");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_servers_three_workers_run_every_session_and_stream_each_event_once() {
    let Some(base) = test_database_url() else {
        return;
    };
    let url = fresh_database(&base, "many").await;
    let script = "turns:\n  - text: \"step one\"\n    delay_ms: 50\n    tool_calls:\n      - name: read_file\n        arguments: {path: src/lib.rs}\n  - text: \"done\"\n";
    let mut cluster = Cluster::new(url, script);
    cluster.start_server();
    cluster.start_server();
    // KEEL_CLUSTER_WORKERS and KEEL_CLUSTER_SESSIONS change the shape for the figures.
    let workers = env_count("KEEL_CLUSTER_WORKERS", 3);
    for _ in 0..workers {
        cluster.start_worker();
    }
    let a = cluster.servers[0].addr.clone();
    let b = cluster.servers[1].addr.clone();
    let n = env_count("KEEL_CLUSTER_SESSIONS", 30);
    let started = Instant::now();
    let mut watchers = Vec::new();
    let mut ids = Vec::new();
    for i in 0..n {
        // Created and sent through one server, watched on the other.
        let (via, other) = if i % 2 == 0 { (&a, &b) } else { (&b, &a) };
        let id = create_session(via);
        let watcher = tokio::spawn(watch(other.clone(), id.clone(), Duration::from_secs(600)));
        // The socket subscribes from seq 0, so sending before it is attached loses nothing.
        let (via, id2) = (via.clone(), id.clone());
        tokio::task::spawn_blocking(move || send(&via, &id2, "read the library"))
            .await
            .unwrap();
        watchers.push(watcher);
        ids.push((id, other.clone()));
    }
    let mut latencies = Vec::new();
    for (w, (id, other)) in watchers.into_iter().zip(&ids) {
        let events = w.await.unwrap();
        latencies.extend(events.iter().filter_map(|e| e["_latency_ms"].as_u64()));
        let last = events.last().unwrap();
        assert_eq!(last["status"], "completed", "session {id}: {last}");
        let (other, id) = (other.clone(), id.clone());
        tokio::task::spawn_blocking(move || assert_exactly_once(&other, &id, &events))
            .await
            .unwrap();
    }
    let elapsed = started.elapsed();
    latencies.sort_unstable();
    let pct = |p: usize| latencies[(latencies.len() * p / 100).min(latencies.len() - 1)];
    eprintln!(
        "{n} sessions through 2 servers and {workers} workers in {:.1} s ({:.2} turns/s); event delivery p50 {} ms, p99 {} ms over {} events",
        elapsed.as_secs_f64(),
        n as f64 / elapsed.as_secs_f64(),
        pct(50),
        pct(99),
        latencies.len()
    );
    // Every worker's /health answers; together they ran every turn.
    let mut completed = 0;
    for w in &cluster.workers {
        let (status, health) = request(&w.addr, "GET", "/health", None);
        assert_eq!(status, 200);
        assert_eq!(health["status"], "ok");
        assert_eq!(health["running"], 0);
        completed += health["completed"].as_u64().unwrap();
    }
    assert_eq!(completed, n as u64);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_killed_mid_turn_hands_its_job_to_another_and_the_session_completes() {
    let Some(base) = test_database_url() else {
        return;
    };
    let url = fresh_database(&base, "kill").await;
    // The first reply takes long enough to kill its worker while it waits.
    let script = "turns:\n  - text: \"thinking\"\n    delay_ms: 3000\n    tool_calls:\n      - name: read_file\n        arguments: {path: src/lib.rs}\n  - text: \"done\"\n";
    let mut cluster = Cluster::new(url, script);
    cluster.start_server();
    cluster.start_worker();
    cluster.start_worker();
    let server = cluster.servers[0].addr.clone();
    let id = create_session(&server);
    let watcher = tokio::spawn(watch(server.clone(), id.clone(), Duration::from_secs(300)));
    let (s2, id2) = (server.clone(), id.clone());
    tokio::task::spawn_blocking(move || send(&s2, &id2, "read the library"))
        .await
        .unwrap();
    // Once the turn has stored its first events, find the worker running it (its /health
    // says so) and kill it.
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let (_, stored) = request(
            &server,
            "GET",
            &format!("/api/v1/sessions/{id}/events"),
            None,
        );
        if kinds(stored.as_array().unwrap()).contains(&"turn_started".to_string()) {
            break;
        }
        assert!(Instant::now() < deadline, "the turn did not start");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let busy = loop {
        let found = cluster.workers.iter().position(|w| {
            let (_, h) = request(&w.addr, "GET", "/health", None);
            h["running"] == 1
        });
        if let Some(i) = found {
            break i;
        }
        assert!(Instant::now() < deadline, "no worker took the turn");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let mut dead = cluster.workers.remove(busy);
    dead.child.kill().unwrap(); // SIGKILL
    dead.child.wait().unwrap();
    let events = watcher.await.unwrap();
    let last = events.last().unwrap();
    assert_eq!(last["status"], "completed", "{last}");
    let (s3, id3) = (server.clone(), id.clone());
    tokio::task::spawn_blocking(move || assert_exactly_once(&s3, &id3, &events))
        .await
        .unwrap();
    let (_, health) = request(&cluster.workers[0].addr, "GET", "/health", None);
    assert_eq!(health["completed"], 1, "{health}");
}

/// The baseline for the figures (run with `--ignored`): the same sessions on one `keel serve`
/// with its SQLite store, turns in the server, watched on the same server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: cargo test -p keel-cli --test cluster -- --ignored --nocapture"]
async fn baseline_sqlite_single_process() {
    let script = "turns:\n  - text: \"step one\"\n    delay_ms: 50\n    tool_calls:\n      - name: read_file\n        arguments: {path: src/lib.rs}\n  - text: \"done\"\n";
    let mut cluster = Cluster::new(String::new(), script);
    let ws = cluster.workspace.display().to_string();
    let p = cluster.spawn(
        &["serve", "--port", "0", "--token", TOKEN, "-w", &ws],
        "Keel is serving",
        "Press Ctrl-C",
    );
    cluster.servers.push(p);
    let a = cluster.servers[0].addr.clone();
    let n = env_count("KEEL_CLUSTER_SESSIONS", 30);
    let started = Instant::now();
    let mut watchers = Vec::new();
    let mut senders = Vec::new();
    for _ in 0..n {
        let id = create_session(&a);
        watchers.push(tokio::spawn(watch(
            a.clone(),
            id.clone(),
            Duration::from_secs(600),
        )));
        let a = a.clone();
        senders.push(tokio::task::spawn_blocking(move || {
            let (status, body) = request(
                &a,
                "POST",
                &format!("/api/v1/sessions/{id}/messages"),
                Some(&json!({"content": "read the library"})),
            );
            assert_eq!(status, 200, "{body}");
        }));
    }
    let mut latencies = Vec::new();
    for w in watchers {
        let events = w.await.unwrap();
        assert_eq!(events.last().unwrap()["status"], "completed");
        latencies.extend(events.iter().filter_map(|e| e["_latency_ms"].as_u64()));
    }
    for s in senders {
        s.await.unwrap();
    }
    let elapsed = started.elapsed();
    latencies.sort_unstable();
    let pct = |p: usize| latencies[(latencies.len() * p / 100).min(latencies.len() - 1)];
    eprintln!(
        "{n} sessions on one SQLite server in {:.1} s ({:.2} turns/s); event delivery p50 {} ms, p99 {} ms over {} events",
        elapsed.as_secs_f64(),
        n as f64 / elapsed.as_secs_f64(),
        pct(50),
        pct(99),
        latencies.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_stopped_with_sigterm_finishes_its_running_turn_first() {
    let Some(base) = test_database_url() else {
        return;
    };
    let url = fresh_database(&base, "term").await;
    let script = "turns:\n  - text: \"slow\"\n    delay_ms: 2000\n";
    let mut cluster = Cluster::new(url, script);
    cluster.start_server();
    cluster.start_worker();
    let server = cluster.servers[0].addr.clone();
    let id = create_session(&server);
    let watcher = tokio::spawn(watch(server.clone(), id.clone(), Duration::from_secs(300)));
    let (s2, id2) = (server.clone(), id.clone());
    tokio::task::spawn_blocking(move || send(&s2, &id2, "go"))
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    while request(&cluster.workers[0].addr, "GET", "/health", None).1["running"] != 1 {
        assert!(
            Instant::now() < deadline,
            "the worker did not take the turn"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut worker = cluster.workers.remove(0);
    let pid = nix::unistd::Pid::from_raw(worker.child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    let status = tokio::task::spawn_blocking(move || worker.child.wait().unwrap())
        .await
        .unwrap();
    assert_eq!(status.code(), Some(0), "the worker stops cleanly");
    // The turn had finished before the worker exited: no other worker is running.
    let events = watcher.await.unwrap();
    assert_eq!(events.last().unwrap()["status"], "completed");
    tokio::task::spawn_blocking(move || assert_exactly_once(&server, &id, &events))
        .await
        .unwrap();
}
