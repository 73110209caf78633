//! One running MCP server: connecting (stdio or streamable HTTP), calling, and restarting a
//! server that died — once. Every request runs on the hub's own runtime ([`crate::Hub`]), so
//! a server outlives no session and blocks none.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, ReadResourceRequestParams};
use rmcp::service::{RoleClient, RunningService, ServiceError};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::Value;
use tokio::sync::Mutex;

use keel_tools::sandbox::SandboxPolicy;
use keel_tools::shell::exec::{self, ExecRequest, Spawned};

use crate::config::Transport;

type Service = RunningService<RoleClient, ()>;

/// How a stdio server's process is confined: it always starts through Keel's one runner
/// ([`keel_tools::shell::exec::spawn`]: allowlisted environment plus the server's `env`, its
/// own process group killed with the server, a private temp dir), under this sandbox policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Confinement {
    /// [`SandboxPolicy::ReadOnly`] for a project's servers (the workspace and the rest of the
    /// disk read-only, Keel's data and config hidden); [`SandboxPolicy::Off`] for the user's
    /// own, which run as the user configured them.
    pub policy: SandboxPolicy,
    /// Network access (TCP, UDP, UNIX-socket connections): off for a project's server unless
    /// the user granted it when approving it.
    pub network: bool,
}

impl Confinement {
    /// A project's server: read-only, network only if granted.
    pub fn project(network: bool) -> Self {
        Self {
            policy: SandboxPolicy::ReadOnly,
            network,
        }
    }

    /// The user's own server: no kernel confinement (still the runner's environment and
    /// process group).
    pub fn user() -> Self {
        Self {
            policy: SandboxPolicy::Off,
            network: true,
        }
    }
}

/// How many times a server that died is started again in one session.
pub const MAX_RESTARTS: u32 = 1;

/// A tool as the server lists it.
#[derive(Debug, Clone)]
pub struct ListedTool {
    pub name: String,
    pub description: String,
    pub input_schema: Value,
}

/// A failed request, for the model (the loop continues).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct CallError(pub String);

/// Says whether a server may be started again (its approval still holds); `Err` says why not.
pub type Recheck = Arc<dyn Fn() -> Result<(), String> + Send + Sync>;

enum Conn {
    Up(Arc<Service>, Option<Box<Spawned>>),
    Down(String),
}

/// A connected (or failed) server.
pub struct Server {
    name: String,
    transport: Transport,
    confinement: Confinement,
    workspace: PathBuf,
    startup_timeout: Duration,
    call_timeout: Duration,
    conn: Mutex<Conn>,
    restarts: AtomicU32,
    recheck: Option<Recheck>,
    /// The private copy of the workspace a network-granted project server runs on (removed
    /// with the server).
    _copy: Option<crate::approve::PrivateCopy>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server").field("name", &self.name).finish()
    }
}

impl Server {
    /// Starts the server and waits (up to the startup timeout) for its handshake.
    pub async fn start(
        name: &str,
        transport: Transport,
        confinement: Confinement,
        workspace: PathBuf,
        startup_timeout: Duration,
        call_timeout: Duration,
    ) -> Result<Self, String> {
        let (service, process) =
            connect(&transport, confinement, &workspace, startup_timeout).await?;
        Ok(Self {
            name: name.to_string(),
            transport,
            confinement,
            workspace,
            startup_timeout,
            call_timeout,
            conn: Mutex::new(Conn::Up(Arc::new(service), process)),
            restarts: AtomicU32::new(0),
            recheck: None,
            _copy: None,
        })
    }

    /// Checked before every restart: a project server whose approval no longer holds (its
    /// script changed during the session) is not started again.
    pub fn with_recheck(mut self, recheck: Option<Recheck>) -> Self {
        self.recheck = recheck;
        self
    }

    /// Keeps `copy` (the private copy of the workspace the server runs on) while the server
    /// lives.
    pub fn with_private_copy(mut self, copy: Option<crate::approve::PrivateCopy>) -> Self {
        self._copy = copy;
        self
    }

    /// The server's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Times the server was restarted.
    pub fn restarts(&self) -> u32 {
        self.restarts.load(Ordering::Relaxed)
    }

    /// Its tools (all pages).
    pub async fn list_tools(&self) -> Result<Vec<ListedTool>, CallError> {
        let svc = self.service().await?;
        let tools = self
            .timed(svc.list_all_tools())
            .await?
            .map_err(|e| self.failed("listing tools", &e))?;
        Ok(tools
            .into_iter()
            .map(|t| ListedTool {
                name: t.name.to_string(),
                description: t.description.map(|d| d.to_string()).unwrap_or_default(),
                input_schema: Value::Object((*t.input_schema).clone()),
            })
            .collect())
    }

    /// Calls a tool; the result as the server sent it (JSON). A server that died during the
    /// call is restarted once for later calls; this call is not repeated (it may have had
    /// effects).
    pub async fn call_tool(&self, tool: &str, args: Value) -> Result<Value, CallError> {
        let svc = self.service().await?;
        let mut params = CallToolRequestParams::new(tool.to_string());
        params.arguments = match args {
            Value::Object(m) => Some(m),
            Value::Null => None,
            other => {
                return Err(CallError(format!(
                    "arguments for an MCP tool must be a JSON object, got {other}"
                )));
            }
        };
        match self.timed(svc.call_tool(params)).await? {
            Ok(result) => serde_json::to_value(&result)
                .map_err(|e| CallError(format!("unreadable result from `{}`: {e}", self.name))),
            Err(e) => Err(self.after_failure(&svc, "the call", &e).await),
        }
    }

    /// Its resources (all pages), as JSON.
    pub async fn list_resources(&self) -> Result<Value, CallError> {
        let svc = self.service().await?;
        match self.timed(svc.list_all_resources()).await? {
            Ok(r) => serde_json::to_value(&r).map_err(|e| CallError(e.to_string())),
            Err(e) => Err(self.after_failure(&svc, "listing resources", &e).await),
        }
    }

    /// One resource's contents, as JSON.
    pub async fn read_resource(&self, uri: &str) -> Result<Value, CallError> {
        let svc = self.service().await?;
        match self
            .timed(svc.read_resource(ReadResourceRequestParams::new(uri)))
            .await?
        {
            Ok(r) => serde_json::to_value(&r).map_err(|e| CallError(e.to_string())),
            Err(e) => Err(self.after_failure(&svc, "reading the resource", &e).await),
        }
    }

    /// Stops the server (kills a spawned process).
    pub async fn shutdown(&self) {
        let mut conn = self.conn.lock().await;
        if let Conn::Up(svc, process) = &mut *conn {
            svc.cancellation_token().cancel();
            if let Some(p) = process {
                p.kill();
            }
        }
        *conn = Conn::Down("stopped".into());
    }

    async fn timed<T>(&self, fut: impl Future<Output = T>) -> Result<T, CallError> {
        tokio::time::timeout(self.call_timeout, fut)
            .await
            .map_err(|_| {
                CallError(format!(
                    "the MCP server `{}` did not answer within {}s",
                    self.name,
                    self.call_timeout.as_secs()
                ))
            })
    }

    /// The live connection; a dead one is restarted if it has not been yet.
    async fn service(&self) -> Result<Arc<Service>, CallError> {
        let mut conn = self.conn.lock().await;
        if let Conn::Up(svc, _) = &*conn {
            if !svc.is_closed() {
                return Ok(svc.clone());
            }
            // Dropping the old connection ends what is left of its process group.
            *conn = Conn::Down("its connection closed".into());
        }
        let Conn::Down(reason) = &*conn else {
            return Err(CallError("unreachable connection state".into()));
        };
        // A project server with network access is started once, when the session starts and
        // no command of it runs yet. Started again mid-session, the check of its files and the
        // interpreter's reading of them are moments apart while a command (a subagent's) may
        // be swapping them: it ran unapproved code with the network (red-team pass 5, R5-8).
        if self.recheck.is_some() && self.confinement.network {
            return Err(CallError(format!(
                "the MCP server `{}` is not running ({reason}); a project server with network access is not started again during a session (a command running now could change its files between Keel's check and the start), so its tools are unavailable until the next session",
                self.name
            )));
        }
        if self.restarts.load(Ordering::Relaxed) >= MAX_RESTARTS {
            return Err(CallError(format!(
                "the MCP server `{}` is not running ({reason}) and was already restarted {MAX_RESTARTS} time(s) this session; its tools are unavailable until Keel is restarted (check it with `keel mcp test {}`)",
                self.name, self.name
            )));
        }
        self.restarts.fetch_add(1, Ordering::Relaxed);
        if let Some(check) = &self.recheck
            && let Err(why) = check()
        {
            *conn = Conn::Down(format!("not restarted: {why}"));
            return Err(CallError(format!(
                "the MCP server `{}` stopped and is not started again: {why}",
                self.name
            )));
        }
        match connect(
            &self.transport,
            self.confinement,
            &self.workspace,
            self.startup_timeout,
        )
        .await
        {
            Ok((svc, process)) => {
                let svc = Arc::new(svc);
                *conn = Conn::Up(svc.clone(), process);
                Ok(svc)
            }
            Err(e) => {
                *conn = Conn::Down(format!("restarting it failed: {e}"));
                Err(CallError(format!(
                    "the MCP server `{}` had stopped and restarting it failed: {e}",
                    self.name
                )))
            }
        }
    }

    /// Turns a request failure into a message; a closed transport marks the server down and
    /// restarts it (once) so its next call can succeed.
    async fn after_failure(&self, svc: &Arc<Service>, what: &str, e: &ServiceError) -> CallError {
        let died = matches!(
            e,
            ServiceError::TransportClosed | ServiceError::TransportSend(_)
        ) || svc.is_closed();
        if !died {
            return self.failed(what, e);
        }
        {
            let mut conn = self.conn.lock().await;
            if matches!(&*conn, Conn::Up(s, _) if Arc::ptr_eq(s, svc)) {
                *conn = Conn::Down(format!("it exited during {what}"));
            }
        }
        let restarted = match self.service().await {
            Ok(_) => "it was restarted; the call was not repeated (it may have had effects) — call again if it is safe to".to_string(),
            Err(CallError(m)) => m,
        };
        CallError(format!(
            "the MCP server `{}` exited during {what}: {restarted}",
            self.name
        ))
    }

    fn failed(&self, what: &str, e: &ServiceError) -> CallError {
        CallError(format!("the MCP server `{}` failed {what}: {e}", self.name))
    }
}

async fn connect(
    transport: &Transport,
    confinement: Confinement,
    workspace: &std::path::Path,
    timeout: Duration,
) -> Result<(Service, Option<Box<Spawned>>), String> {
    let fut = async {
        match transport {
            Transport::Stdio { command, args, env } => {
                let mut argv: Vec<std::ffi::OsString> = std::iter::once(command)
                    .chain(args)
                    .map(std::ffi::OsString::from)
                    .collect();
                let mut req = ExecRequest::new(Vec::new(), workspace);
                if confinement.policy == SandboxPolicy::Off {
                    // Unconfined: nothing of the workspace may stand in for the server's code.
                    let place =
                        crate::place::user_place(command, workspace, |k| std::env::var_os(k));
                    req.cwd = place.cwd;
                    argv[0] = place.program;
                    req.env_set = place.env;
                }
                req.argv = argv;
                req.policy = confinement.policy;
                req.roots.network = confinement.network;
                req.env_set
                    .extend(env.iter().map(|(k, v)| (k.clone(), v.clone())));
                let mut process = exec::spawn(req)
                    .await
                    .map_err(|e| format!("cannot run `{command}`: {e}"))?;
                let tail = StderrTail::default();
                if let Some(stderr) = process.child.stderr.take() {
                    tail.collect(stderr);
                }
                let (Some(stdout), Some(stdin)) =
                    (process.child.stdout.take(), process.child.stdin.take())
                else {
                    return Err(format!("`{command}` started without its pipes"));
                };
                match ().serve((stdout, stdin)).await {
                    Ok(svc) => Ok((svc, Some(Box::new(process)))),
                    Err(e) => {
                        // Give the process a moment to write why it stopped.
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        Err(format!(
                            "the handshake with `{command}` failed: {e}{}",
                            tail.render()
                        ))
                    }
                }
            }
            Transport::Http { url, headers } => {
                let mut map = HashMap::new();
                for (k, v) in headers {
                    let name = http::HeaderName::from_bytes(k.as_bytes())
                        .map_err(|e| format!("bad header name `{k}`: {e}"))?;
                    let value = http::HeaderValue::from_str(v)
                        .map_err(|e| format!("bad value for header `{k}`: {e}"))?;
                    map.insert(name, value);
                }
                // The workspace's reqwest has no built-in crypto provider; an already installed
                // one (the model clients install the same) is kept.
                let _ = rustls::crypto::ring::default_provider().install_default();
                let config =
                    StreamableHttpClientTransportConfig::with_uri(url.as_str()).custom_headers(map);
                let transport = StreamableHttpClientTransport::from_config(config);
                ().serve(transport)
                    .await
                    .map(|svc| (svc, None))
                    .map_err(|e| format!("connecting to {url} failed: {e}"))
            }
        }
    };
    tokio::time::timeout(timeout, fut)
        .await
        .map_err(|_| format!("it did not start within {}s", timeout.as_secs()))?
}

/// The last lines a server wrote to stderr (drained continuously so it never blocks), quoted
/// in start-up errors.
#[derive(Clone, Default)]
struct StderrTail(Arc<std::sync::Mutex<String>>);

/// How much of a server's stderr is kept.
const STDERR_TAIL: usize = 2000;

/// Keeps at most about twice [`STDERR_TAIL`] bytes of `b`: its end.
fn trim_tail(b: &mut String) {
    if b.len() > STDERR_TAIL * 2 {
        let cut = b.len() - STDERR_TAIL;
        let cut = (cut..b.len()).find(|i| b.is_char_boundary(*i)).unwrap_or(0);
        b.drain(..cut);
    }
}

impl StderrTail {
    fn collect(&self, stderr: tokio::process::ChildStderr) {
        use tokio::io::AsyncReadExt;
        let buf = self.0.clone();
        tokio::spawn(async move {
            // Read in fixed chunks, never a whole line: a server that writes one endless line
            // must not grow Keel's memory (red-team B10). Only the tail is kept.
            let mut stderr = stderr;
            let mut chunk = [0u8; 4096];
            while let Ok(n) = stderr.read(&mut chunk).await {
                if n == 0 {
                    break;
                }
                let Ok(mut b) = buf.lock() else { return };
                b.push_str(&String::from_utf8_lossy(&chunk[..n]));
                trim_tail(&mut b);
            }
        });
    }

    fn render(&self) -> String {
        let text = self.0.lock().map(|b| b.clone()).unwrap_or_default();
        let text = text.trim();
        if text.is_empty() {
            return String::new();
        }
        let start = text.len().saturating_sub(STDERR_TAIL);
        let start = (start..text.len())
            .find(|i| text.is_char_boundary(*i))
            .unwrap_or(0);
        format!("; its stderr ends:\n{}", &text[start..])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_endless_stderr_line_is_read_in_pieces_and_only_its_tail_kept() {
        // Red-team B10: a server writing one line without end grew Keel's memory without
        // bound (the reader waited for the newline). The tail fills while the line goes on.
        #[allow(clippy::disallowed_methods)]
        let child = tokio::process::Command::new("sh")
            .arg("-c")
            .arg("head -c 3000000 /dev/zero | tr '\\0' a >&2; sleep 5")
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn();
        let mut child = match child {
            Ok(c) => c,
            Err(e) => panic!("cannot run sh: {e}"),
        };
        let tail = StderrTail::default();
        if let Some(stderr) = child.stderr.take() {
            tail.collect(stderr);
        }
        let started = std::time::Instant::now();
        loop {
            let len = tail.0.lock().map(|b| b.len()).unwrap_or_default();
            assert!(len <= STDERR_TAIL * 2, "kept {len} bytes");
            if len >= STDERR_TAIL {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(4),
                "nothing of the unfinished line was read"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(tail.render().ends_with("aaaa"));
    }
}
