//! What the cluster tests share (`cluster.rs`, and any other test of `keel serve --database`
//! with `keel worker`): a fresh PostgreSQL database per test, real `keel` processes on
//! loopback ports, HTTP and WebSocket helpers.

// Tests start programs of their own (the keel binary, git fixtures, tmux, servers): allowed
// here, outside Keel's one spawn path (docs/SECURITY.md, "One way to start a process").
#![allow(clippy::disallowed_methods)]
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)] // each test file uses a subset

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};
use sqlx::Connection;

#[path = "../shared/pg_url.rs"]
mod pg_url;
pub mod private_pg;
pub use pg_url::postgres_test_url;

pub const TOKEN: &str = "cluster-test-token-0123456789";

/// The test server's URL, or `None` after saying why this is skipped (a failure in CI).
pub fn test_database_url() -> Option<String> {
    postgres_test_url("servers and workers (keel serve --database, keel worker)")
}

/// A new, empty database on the test server, migrated with `keel db migrate`.
pub async fn fresh_database(base_url: &str, tag: &str) -> String {
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
pub struct Cluster {
    pub _tmp: tempfile::TempDir,
    pub workspace: PathBuf,
    pub home: PathBuf,
    pub url: String,
    pub servers: Vec<Proc>,
    pub workers: Vec<Proc>,
}

/// A running `keel` process and the address it printed.
pub struct Proc {
    pub child: Child,
    pub addr: String,
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Cluster {
    pub fn new(url: String, script: &str) -> Self {
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

    pub fn keel(&self) -> Command {
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
    pub fn spawn(&self, args: &[&str], addr_line: &str, ready_line: &str) -> Proc {
        self.spawn_env(args, &[], addr_line, ready_line)
    }

    /// [`Cluster::spawn`] with extra environment variables.
    pub fn spawn_env(
        &self,
        args: &[&str],
        env: &[(&str, String)],
        addr_line: &str,
        ready_line: &str,
    ) -> Proc {
        let mut child = self
            .keel()
            .args(args)
            .envs(env.iter().map(|(k, v)| (k, v)))
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

    pub fn start_server(&mut self) {
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

    /// Kills with SIGKILL the worker whose `/health` says it runs a job (waiting for one until
    /// `deadline`; `what` names the job in the failure), and drops it from `workers`.
    pub fn kill_busy_worker(&mut self, deadline: std::time::Instant, what: &str) {
        let busy = loop {
            let found = self.workers.iter().position(|w| {
                let (_, h) = request(&w.addr, "GET", "/health", None);
                h["running"] == 1
            });
            if let Some(i) = found {
                break i;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "no worker runs {what}"
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        let mut dead = self.workers.remove(busy);
        dead.child.kill().unwrap(); // SIGKILL
        dead.child.wait().unwrap();
    }

    pub fn start_worker(&mut self) {
        self.start_worker_env(&[]);
    }

    /// A worker with extra environment variables (`KEEL_WORKER__CHECKOUT_DIR`, …).
    pub fn start_worker_env(&mut self, env: &[(&str, String)]) {
        let p = self.spawn_env(
            &[
                "worker",
                "--database",
                &self.url.clone(),
                "--health-port",
                "0",
            ],
            env,
            "health:",
            "keel worker",
        );
        self.workers.push(p);
    }
}

/// One HTTP/1.1 request with the token; the status and the JSON body.
pub fn request(addr: &str, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
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

pub fn create_session(addr: &str) -> String {
    let (status, body) = request(
        addr,
        "POST",
        "/api/v1/sessions",
        Some(&json!({"provider": "scripted", "script": "script.yaml"})),
    );
    assert_eq!(status, 201, "{body}");
    body["id"].as_str().unwrap().to_string()
}

pub fn send(addr: &str, id: &str, content: &str) {
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
pub fn env_count(var: &str, default: usize) -> usize {
    std::env::var(var)
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(default)
}

/// A WebSocket client attached to session `id`'s stream on a server.
pub type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// A WebSocket attached to session `id` on the server at `addr`, from seq 0.
pub async fn attach(addr: &str, id: &str) -> Socket {
    let url = format!("ws://{addr}/api/v1/sessions/{id}/ws?since_seq=0&token={TOKEN}");
    let (socket, _) = tokio_tungstenite::connect_async(url).await.unwrap();
    socket
}

/// Every event the WebSocket at `addr` delivers for session `id` until `turn_finished`.
pub async fn watch(addr: String, id: String, limit: Duration) -> Vec<Value> {
    let socket = attach(&addr, &id).await;
    watch_socket(socket, id, limit).await
}

/// Every event `socket` (attached to session `id`) delivers until `turn_finished`.
pub async fn watch_socket(mut socket: Socket, id: String, limit: Duration) -> Vec<Value> {
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
            panic!(
                "session {id}: the WebSocket closed early ({msg:?}); got {}",
                kinds(&events).join(",")
            );
        };
        let text = match msg {
            tokio_tungstenite::tungstenite::Message::Text(text) => text,
            tokio_tungstenite::tungstenite::Message::Close(frame) => panic!(
                "session {id}: the server closed the WebSocket ({frame:?}); got {}",
                kinds(&events).join(",")
            ),
            _ => continue,
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

pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// The events without the test's own `_latency_ms`.
pub fn strip(events: &[Value]) -> Vec<Value> {
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

pub fn kinds(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| e["type"].as_str().unwrap_or("?").to_string())
        .collect()
}

/// Seqs 1..=n, each once and in order, and the same events the store has.
pub fn assert_exactly_once(addr: &str, id: &str, events: &[Value]) {
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
