//! Shared harness for the server's tests: an in-process server on a loopback port with
//! scripted models, a minimal HTTP/1.1 client (so tests control every header), WebSocket and
//! SSE clients.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use keel_server::{Server, ServerOptions, SessionBuilder};
use keel_store::SqliteStore;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

/// Sessions built as `keel run` builds them, without the user's files or environment.
pub fn test_builder(store: Arc<SqliteStore>) -> SessionBuilder {
    builder_with_tests(store, None)
}

/// [`test_builder`] whose sessions run `tests` as the project's test command.
fn builder_with_tests(store: Arc<SqliteStore>, tests: Option<String>) -> SessionBuilder {
    SessionBuilder::isolated(store).adjust(Arc::new(move |config: &mut keel_engine::Config| {
        // These tests compare runs event by event (token counts included); the codemap joins
        // the first message only once a background index build has finished, so it is off.
        config.index.codemap_tokens = 0;
        if tests.is_some() {
            config.shell.test_command = tests.clone();
        }
    }))
}

pub struct TestServer {
    pub addr: std::net::SocketAddr,
    pub dir: tempfile::TempDir,
    pub store: Arc<SqliteStore>,
    pub token: Option<String>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl TestServer {
    pub async fn start() -> Self {
        Self::start_with("127.0.0.1", None).await
    }

    pub async fn start_with(host: &str, token: Option<&str>) -> Self {
        Self::start_full(host, token, None, false, None).await
    }

    /// A server in queue mode: turns go to `queue` (as `keel serve --database` sends them to
    /// the workers).
    pub async fn start_queued(queue: Arc<dyn keel_server::TurnQueue>) -> Self {
        Self::start_full("127.0.0.1", None, Some(queue), false, None).await
    }

    /// A server that also serves PRDs, tasks and work runs from its store (as `keel serve`).
    pub async fn start_with_tasks() -> Self {
        Self::start_full("127.0.0.1", None, None, true, None).await
    }

    /// A server whose sessions run `command` as the project's tests (plan_exec reaches
    /// delivery only after a passing check).
    pub async fn start_with_tests(command: &str) -> Self {
        Self::start_full("127.0.0.1", None, None, false, Some(command.to_string())).await
    }

    async fn start_full(
        host: &str,
        token: Option<&str>,
        queue: Option<Arc<dyn keel_server::TurnQueue>>,
        tasks: bool,
        tests: Option<String>,
    ) -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("ws/src")).unwrap();
        std::fs::write(
            dir.path().join("ws/src/lib.rs"),
            "pub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n",
        )
        .unwrap();
        std::fs::write(dir.path().join("secret.txt"), "outside the workspace\n").unwrap();
        let store = Arc::new(SqliteStore::open(&dir.path().join("keel.db")).unwrap());
        let options = ServerOptions {
            host: host.into(),
            port: 0,
            token: token.map(str::to_string),
            allowed_origins: vec![],
            default_workspace: dir.path().join("ws"),
            // The temp directory: `ws`, the other workspaces and scripts tests make beside it.
            workspace_roots: vec![dir.path().to_path_buf()],
        };
        let server = Server::bind(options, builder_with_tests(store.clone(), tests))
            .await
            .unwrap();
        if let Some(queue) = queue {
            server.hub().set_queue(queue);
        }
        if tasks {
            server
                .hub()
                .set_work_store(keel_store::work::WorkStores::of(store.clone()));
        }
        let token = match server.token() {
            keel_server::TokenOrigin::Generated(t) => Some(t.clone()),
            _ => token.map(str::to_string),
        };
        let mut addr = server.local_addr();
        if addr.ip().is_unspecified() {
            addr.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
        }
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            server
                .run(async move {
                    let _ = stopped.await;
                })
                .await
                .unwrap();
        });
        Self {
            addr,
            dir,
            store,
            token,
            stop: Some(stop),
            task: Some(task),
        }
    }

    pub fn workspace(&self) -> PathBuf {
        self.dir.path().join("ws")
    }

    /// Writes a script into the workspace and returns its relative path.
    pub fn script(&self, name: &str, yaml: &str) -> String {
        std::fs::write(self.workspace().join(name), yaml).unwrap();
        name.to_string()
    }

    /// The `Authorization` header every API request needs.
    pub fn auth_headers(&self) -> Vec<(String, String)> {
        self.token
            .iter()
            .map(|t| ("Authorization".to_string(), format!("Bearer {t}")))
            .collect()
    }

    pub fn host(&self) -> String {
        self.addr.to_string()
    }

    /// Sends one request; returns status and JSON body (Null when empty or not JSON).
    pub async fn request(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        let mut headers = vec![];
        if let Some(t) = &self.token {
            headers.push(("Authorization".to_string(), format!("Bearer {t}")));
        }
        let body = body.map(|b| b.to_string());
        if body.is_some() {
            headers.push(("Content-Type".into(), "application/json".into()));
        }
        let (status, _, text) = self.raw(method, path, &headers, body.as_deref()).await;
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    pub async fn get(&self, path: &str) -> (u16, Value) {
        self.request("GET", path, None).await
    }

    pub async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        self.request("POST", path, Some(body)).await
    }

    /// A raw HTTP/1.1 request with exactly these headers (plus Host and Connection: close).
    pub async fn raw(
        &self,
        method: &str,
        path: &str,
        headers: &[(String, String)],
        body: Option<&str>,
    ) -> (u16, Vec<(String, String)>, String) {
        let mut stream = TcpStream::connect(self.addr).await.unwrap();
        let mut req = format!("{method} {path} HTTP/1.1\r\n");
        if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
            req.push_str(&format!("Host: {}\r\n", self.host()));
        }
        req.push_str("Connection: close\r\n");
        for (k, v) in headers {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        let body = body.unwrap_or("");
        if !body.is_empty() || method == "POST" {
            req.push_str(&format!("Content-Length: {}\r\n", body.len()));
        }
        req.push_str("\r\n");
        req.push_str(body);
        stream.write_all(req.as_bytes()).await.unwrap();
        let mut raw = Vec::new();
        tokio::time::timeout(Duration::from_secs(60), stream.read_to_end(&mut raw))
            .await
            .expect("response within 60 s")
            .unwrap();
        parse_response(&raw)
    }

    pub async fn create_session(&self, script: &str, mode: &str) -> String {
        let (status, body) = self
            .post(
                "/api/v1/sessions",
                json!({"provider": "scripted", "script": script, "execution_mode": mode}),
            )
            .await;
        assert_eq!(status, 201, "{body}");
        body["id"].as_str().unwrap().to_string()
    }

    /// A second workspace like the first (a copy of `src/`), for sessions that must not see
    /// each other's files.
    pub fn another_workspace(&self, name: &str) -> PathBuf {
        assert_ne!(name, "ws", "`ws` is the first workspace");
        let ws = self.dir.path().join(name);
        std::fs::create_dir_all(ws.join("src")).unwrap();
        std::fs::copy(self.workspace().join("src/lib.rs"), ws.join("src/lib.rs")).unwrap();
        ws
    }

    /// Creates a session in `workspace` running the script at `script` (any path).
    pub async fn create_session_in(&self, workspace: &Path, script: &Path, mode: &str) -> String {
        let (status, body) = self
            .post(
                "/api/v1/sessions",
                json!({
                    "workspace": workspace.display().to_string(),
                    "provider": "scripted",
                    "script": script.display().to_string(),
                    "execution_mode": mode,
                }),
            )
            .await;
        assert_eq!(status, 201, "{body}");
        body["id"].as_str().unwrap().to_string()
    }

    pub fn ws_url(&self, id: &str, since: u64) -> String {
        let mut url = format!(
            "ws://{}/api/v1/sessions/{id}/ws?since_seq={since}",
            self.host()
        );
        if let Some(t) = &self.token {
            url.push_str(&format!("&token={t}"));
        }
        url
    }

    pub async fn ws(&self, id: &str, since: u64) -> Ws {
        let (socket, _) = tokio_tungstenite::connect_async(self.ws_url(id, since))
            .await
            .unwrap();
        Ws { socket }
    }

    /// Stops the server as Ctrl-C would and waits until it has.
    pub async fn shutdown(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            tokio::time::timeout(Duration::from_secs(30), task)
                .await
                .expect("the server stops within 30 s")
                .unwrap();
        }
    }
}

fn parse_response(raw: &[u8]) -> (u16, Vec<(String, String)>, String) {
    let text = String::from_utf8_lossy(raw).to_string();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let chunked = headers
        .iter()
        .any(|(k, v)| k == "transfer-encoding" && v.contains("chunked"));
    let body = if chunked {
        dechunk(body)
    } else {
        body.to_string()
    };
    (status, headers, body)
}

fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = s.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        s = rest[n..].trim_start_matches("\r\n");
    }
    out
}

pub struct Ws {
    pub socket: tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<TcpStream>>,
}

impl Ws {
    pub async fn send(&mut self, value: Value) {
        self.socket
            .send(Message::text(value.to_string()))
            .await
            .unwrap();
    }

    /// The next JSON message; `None` when the server closed the socket.
    pub async fn next(&mut self) -> Option<Value> {
        loop {
            let msg = tokio::time::timeout(Duration::from_secs(30), self.socket.next())
                .await
                .expect("a message within 30 s")?;
            match msg {
                Ok(Message::Text(t)) => return Some(serde_json::from_str(t.as_str()).unwrap()),
                Ok(Message::Close(_)) | Err(_) => return None,
                Ok(_) => {}
            }
        }
    }

    /// Messages up to and including the next `turn_finished`.
    pub async fn until_turn_finished(&mut self) -> Vec<Value> {
        let mut out = Vec::new();
        while let Some(v) = self.next().await {
            let done = v["type"] == "turn_finished";
            out.push(v);
            if done {
                break;
            }
        }
        out
    }
}

/// A WebSocket handshake with extra headers (Origin, Host).
pub async fn ws_with_headers(
    url: &str,
    headers: &[(&'static str, &str)],
) -> Result<Ws, tokio_tungstenite::tungstenite::Error> {
    let mut req = url.into_client_request().unwrap();
    for (k, v) in headers {
        req.headers_mut().insert(*k, v.parse().unwrap());
    }
    let (socket, _) = tokio_tungstenite::connect_async(req).await?;
    Ok(Ws { socket })
}

/// An event without what differs between two runs of the same script (session id, time).
pub fn comparable(event: &Value) -> Value {
    let mut e = event.clone();
    if let Some(o) = e.as_object_mut() {
        // Ids (of the session and of each run), clocks, where the workspace is, and snapshot
        // commits (they hash a time).
        for key in [
            "session_id",
            "ts",
            "run_id",
            "duration_ms",
            "workspace",
            "commit",
        ] {
            o.remove(key);
        }
    }
    e
}

/// Types of a list of events.
pub fn types(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| e["type"].as_str().unwrap_or("?").to_string())
        .collect()
}
