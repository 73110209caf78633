//! Keel's MCP client against real servers: a small server on the official Python SDK
//! (`tests/servers/py_server.py`, stdio and streamable HTTP) and the reference "everything"
//! server from npm (`tests/servers/package.json`). `.ci/run` installs both; elsewhere a test
//! whose server is missing says so and skips, except under `CI=true`, where it fails.

// Tests start programs of their own (the keel binary, git fixtures, tmux, servers): allowed
// here, outside Keel's one spawn path (docs/SECURITY.md, "One way to start a process").
#![allow(clippy::disallowed_methods)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use keel_mcp::{Approvals, Hub, Origin, ServerConfig, ServerDef, StartOptions, Status};
use keel_tools::{ToolContext, ToolError, ToolRegistry, ToolState, Workspace};
use serde_json::json;

fn servers_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/servers")
}

/// Whether `what` is installed; skips visibly outside CI, fails in CI.
fn available(ok: bool, what: &str) -> bool {
    if ok {
        return true;
    }
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{what} is missing; .ci/run installs it");
    }
    eprintln!("SKIPPED: {what} is missing (install it as .ci/run does)");
    false
}

fn python_mcp() -> bool {
    let ok = std::process::Command::new("python3")
        .args(["-c", "import mcp.server.mcpserver, uvicorn"])
        .output()
        .is_ok_and(|o| o.status.success());
    available(ok, "the Python MCP SDK (pip install 'mcp>=2,<3')")
}

fn everything_bin() -> Option<PathBuf> {
    let bin = servers_dir().join("node_modules/.bin/mcp-server-everything");
    available(
        bin.exists(),
        "@modelcontextprotocol/server-everything (npm ci --prefix crates/keel-mcp/tests/servers)",
    )
    .then_some(bin)
}

fn py_def(name: &str, extra: &[&str]) -> ServerDef {
    let mut args = vec![servers_dir().join("py_server.py").display().to_string()];
    args.extend(extra.iter().map(|s| s.to_string()));
    ServerDef {
        name: name.into(),
        config: ServerConfig {
            command: Some("python3".into()),
            args,
            env: BTreeMap::from([("GIVEN".to_string(), "from-config".to_string())]),
            ..ServerConfig::default()
        },
        origin: Origin::User("test".into()),
    }
}

struct Setup {
    _dir: tempfile::TempDir,
    hub: Arc<Hub>,
    registry: ToolRegistry,
    ctx: ToolContext,
}

fn start(defs: Vec<ServerDef>, startup_secs: u64, env: &dyn Fn(&str) -> Option<String>) -> Setup {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let options = StartOptions {
        workspace: dir.path().to_path_buf(),
        startup_timeout: Duration::from_secs(startup_secs),
        call_timeout: Duration::from_secs(30),
    };
    let approvals = Approvals::load(dir.path());
    let hub = Hub::start(defs, &approvals, &options, env).unwrap_or_else(|e| panic!("{e}"));
    let mut registry = ToolRegistry::new();
    let warnings = hub.register(&mut registry);
    assert!(warnings.is_empty(), "{warnings:?}");
    let ctx = ToolContext::new(Workspace::new(dir.path()).unwrap_or_else(|e| panic!("{e}")));
    Setup {
        _dir: dir,
        hub,
        registry,
        ctx,
    }
}

fn no_env(_: &str) -> Option<String> {
    None
}

impl Setup {
    async fn call(&self, tool: &str, args: serde_json::Value) -> Result<String, ToolError> {
        self.registry
            .execute(tool, args, &self.ctx)
            .await
            .map(|o| o.content)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_server_lists_and_calls_tools_with_an_allowlisted_env() {
    if !python_mcp() {
        return;
    }
    let s = start(vec![py_def("py", &[])], 20, &no_env);
    let entry = &s.hub.entries()[0];
    assert_eq!(
        entry.status,
        Status::Ready { tools: 4 },
        "{:?}",
        entry.status
    );
    assert_eq!(
        s.registry.deferred_names(),
        [
            "mcp__py__crash",
            "mcp__py__echo",
            "mcp__py__env",
            "mcp__py__fail",
            "mcp_resources"
        ]
    );
    assert_eq!(
        s.registry.state("mcp__py__echo"),
        Some(&ToolState::Deferred)
    );
    let tool = s
        .registry
        .get("mcp__py__echo")
        .unwrap_or_else(|| panic!("no echo"));
    assert_eq!(tool.effect(), keel_tools::ToolEffect::Unknown);
    assert_eq!(tool.input_schema()["properties"]["text"]["type"], "string");
    assert_eq!(
        s.call("mcp__py__echo", json!({"text": "hi there"})).await,
        Ok("hi there".into())
    );
    // The configured variable arrives; Keel's own environment beyond the allowlist does not.
    assert_eq!(
        s.call("mcp__py__env", json!({"name": "GIVEN"})).await,
        Ok("from-config".into())
    );
    assert!(std::env::var("CARGO_MANIFEST_DIR").is_ok());
    assert_eq!(
        s.call("mcp__py__env", json!({"name": "CARGO_MANIFEST_DIR"}))
            .await,
        Ok("<unset>".into())
    );
    // Resources through the tool.
    let list = s.call("mcp_resources", json!({"server": "py"})).await;
    assert!(
        list.as_deref().is_ok_and(|l| l.contains("keel://greeting")),
        "{list:?}"
    );
    let read = s
        .call(
            "mcp_resources",
            json!({"server": "py", "uri": "keel://greeting"}),
        )
        .await;
    assert_eq!(read, Ok("hello from the python server".into()));
    // Red-team pass 5, R5-12: a resource is whatever the server reaches (a filesystem
    // server's `~/.ssh`), so reading one is judged like the server's tools — unknown, asked
    // about — unless the user declared every server read-only.
    let resources = s
        .registry
        .get("mcp_resources")
        .unwrap_or_else(|| panic!("no mcp_resources"));
    assert_eq!(resources.effect(), keel_tools::ToolEffect::Unknown);
    s.hub.shutdown().await;
    let mut declared = py_def("py", &[]);
    declared.config.effect = keel_mcp::EffectConfig::ReadOnly;
    let s = start(vec![declared], 20, &no_env);
    let resources = s
        .registry
        .get("mcp_resources")
        .unwrap_or_else(|| panic!("no mcp_resources"));
    assert_eq!(resources.effect(), keel_tools::ToolEffect::ReadOnly);
    s.hub.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_error_is_a_model_error() {
    if !python_mcp() {
        return;
    }
    let s = start(vec![py_def("py", &[])], 20, &no_env);
    let err = s.call("mcp__py__fail", json!({"reason": "testing"})).await;
    match err {
        Err(ToolError::Model(m)) => assert!(m.contains("failed on purpose: testing"), "{m}"),
        other => panic!("expected a model error, got {other:?}"),
    }
    // The server is still fine.
    assert_eq!(
        s.call("mcp__py__echo", json!({"text": "ok"})).await,
        Ok("ok".into())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_mid_call_restarts_once_then_answers_with_a_clear_error() {
    if !python_mcp() {
        return;
    }
    let s = start(vec![py_def("py", &[])], 20, &no_env);
    let first = s.call("mcp__py__crash", json!({})).await;
    let Err(ToolError::Model(m)) = first else {
        panic!("expected a model error, got {first:?}");
    };
    assert!(m.contains("exited during the call"), "{m}");
    assert!(m.contains("restarted"), "{m}");
    // The restarted server answers.
    assert_eq!(
        s.call("mcp__py__echo", json!({"text": "back"})).await,
        Ok("back".into())
    );
    assert_eq!(s.hub.server("py").map(|s| s.restarts()), Some(1));
    // A second death is final for the session.
    let second = s.call("mcp__py__crash", json!({})).await;
    assert!(matches!(second, Err(ToolError::Model(_))), "{second:?}");
    let after = s.call("mcp__py__echo", json!({"text": "x"})).await;
    let Err(ToolError::Model(m)) = after else {
        panic!("expected a model error, got {after:?}");
    };
    assert!(m.contains("already restarted"), "{m}");
    assert!(m.contains("keel mcp test py"), "{m}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_server_times_out_and_the_others_still_start() {
    if !python_mcp() {
        return;
    }
    let started = Instant::now();
    // 20 s for the fast one: a Python server's start took over 10 s at load 20 on 2 cores
    // (the CI warm-up of the twelfth session).
    let s = start(
        vec![
            py_def("slow", &["--slow-start", "120"]),
            py_def("fast", &[]),
        ],
        20,
        &no_env,
    );
    assert!(
        started.elapsed() < Duration::from_secs(40),
        "{:?}",
        started.elapsed()
    );
    let by_name = |n: &str| {
        s.hub
            .entries()
            .iter()
            .find(|e| e.name == n)
            .map(|e| e.status.clone())
    };
    let slow = by_name("slow");
    assert!(
        matches!(&slow, Some(Status::Failed(m)) if m.contains("did not start within 20s")),
        "{slow:?}"
    );
    assert_eq!(by_name("fast"), Some(Status::Ready { tools: 4 }));
    assert!(s.registry.get("mcp__slow__echo").is_none());
    assert_eq!(
        s.call("mcp__fast__echo", json!({"text": "f"})).await,
        Ok("f".into())
    );
}

/// A free local port (bound, then released for the server).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or_else(|e| panic!("{e}"))
}

struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn http_server(token: &str) -> (Child, String) {
    let port = free_port();
    let child = std::process::Command::new("python3")
        .arg(servers_dir().join("py_server.py"))
        .args(["--http", &port.to_string()])
        .env("MCP_TEST_TOKEN", token)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("{e}"));
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "the HTTP server did not listen");
        std::thread::sleep(Duration::from_millis(100));
    }
    (Child(child), format!("http://127.0.0.1:{port}/mcp"))
}

fn http_def(name: &str, url: &str) -> ServerDef {
    ServerDef {
        name: name.into(),
        config: ServerConfig {
            kind: Some("http".into()),
            url: Some(url.into()),
            headers: BTreeMap::from([(
                "Authorization".to_string(),
                "Bearer ${KEEL_TEST_MCP_TOKEN}".to_string(),
            )]),
            ..ServerConfig::default()
        },
        origin: Origin::User("test".into()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamable_http_with_a_bearer_token_from_the_environment() {
    if !python_mcp() {
        return;
    }
    let (_server, url) = http_server("s3cret");
    let env = |k: &str| (k == "KEEL_TEST_MCP_TOKEN").then(|| "s3cret".to_string());
    let s = start(vec![http_def("web", &url)], 20, &env);
    assert_eq!(s.hub.entries()[0].status, Status::Ready { tools: 4 });
    assert_eq!(
        s.call("mcp__web__echo", json!({"text": "over http"})).await,
        Ok("over http".into())
    );
    let err = s.call("mcp__web__fail", json!({})).await;
    assert!(matches!(err, Err(ToolError::Model(_))), "{err:?}");

    // A wrong token is refused by the server; an unset variable is named.
    let wrong = |k: &str| (k == "KEEL_TEST_MCP_TOKEN").then(|| "nope".to_string());
    let bad = start(vec![http_def("web", &url)], 10, &wrong);
    assert!(matches!(bad.hub.entries()[0].status, Status::Failed(_)));
    let unset = start(vec![http_def("web", &url)], 10, &no_env);
    let st = &unset.hub.entries()[0].status;
    assert!(
        matches!(st, Status::Failed(m) if m.contains("KEEL_TEST_MCP_TOKEN")),
        "{st:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reference_everything_server_from_npm() {
    let Some(bin) = everything_bin() else {
        return;
    };
    let def = ServerDef {
        name: "everything".into(),
        config: ServerConfig {
            command: Some(bin.display().to_string()),
            args: vec!["stdio".into()],
            ..ServerConfig::default()
        },
        origin: Origin::User("test".into()),
    };
    let s = start(vec![def], 30, &no_env);
    let entry = &s.hub.entries()[0];
    assert!(
        matches!(entry.status, Status::Ready { tools } if tools >= 5),
        "{:?}",
        entry.status
    );
    let echo = s
        .call("mcp__everything__echo", json!({"message": "from keel"}))
        .await;
    assert!(
        echo.as_deref().is_ok_and(|t| t.contains("from keel")),
        "{echo:?}"
    );
    // Every schema the reference server ships is accepted after sanitising.
    for t in &entry.tools {
        assert!(
            s.registry
                .get(&keel_mcp::tool_name("everything", &t.name))
                .is_some(),
            "{} was skipped",
            t.name
        );
    }
    let list = s
        .call("mcp_resources", json!({"server": "everything"}))
        .await;
    assert!(list.is_ok(), "{list:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unapproved_project_server_is_not_started() {
    // No server runs here: the definition is refused before anything is spawned.
    let mut def = py_def("proj", &[]);
    def.origin = Origin::Project(".mcp.json".into());
    let s = start(vec![def.clone()], 5, &no_env);
    assert!(matches!(
        s.hub.entries()[0].status,
        Status::NeedsApproval(_)
    ));
    assert!(s.registry.names().next().is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_exits_at_start_is_reported_with_its_stderr() {
    let def = ServerDef {
        name: "broken".into(),
        config: ServerConfig {
            command: Some("sh".into()),
            args: vec![
                "-c".into(),
                "echo 'boom: no config file' >&2; exit 1".into(),
            ],
            ..ServerConfig::default()
        },
        origin: Origin::User("test".into()),
    };
    let missing = ServerDef {
        name: "missing".into(),
        config: ServerConfig {
            command: Some("/nonexistent/mcp-server".into()),
            ..ServerConfig::default()
        },
        origin: Origin::User("test".into()),
    };
    let s = start(vec![def, missing], 10, &no_env);
    let status = |i: usize| s.hub.entries()[i].status.clone();
    assert!(
        matches!(status(0), Status::Failed(m) if m.contains("boom: no config file")),
        "{:?}",
        status(0)
    );
    assert!(
        matches!(status(1), Status::Failed(m) if m.contains("cannot run `/nonexistent/mcp-server`")),
        "{:?}",
        status(1)
    );
}

/// A server still starting when Keel stops (a `keel run` that finished before the server's
/// handshake) does not outlive it: `shutdown` abandons the start and kills its process
/// group, within a bound, instead of leaving it running.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_still_starting_is_killed_by_shutdown() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let pid_file = dir.path().join("server.pid");
    let def = ServerDef {
        name: "slow".into(),
        config: ServerConfig {
            command: Some("sh".into()),
            args: vec![
                "-c".into(),
                format!("echo $$ > '{}'; exec sleep 30", pid_file.display()),
            ],
            ..ServerConfig::default()
        },
        origin: Origin::User("test".into()),
    };
    let options = StartOptions {
        workspace: dir.path().to_path_buf(),
        startup_timeout: Duration::from_secs(20),
        call_timeout: Duration::from_secs(30),
    };
    let hub = Hub::launch(vec![def], &Approvals::load(dir.path()), &options, &no_env)
        .unwrap_or_else(|e| panic!("{e}"));
    let t0 = Instant::now();
    let pid = loop {
        if let Some(pid) = std::fs::read_to_string(&pid_file)
            .ok()
            .and_then(|s| s.trim().parse::<i32>().ok())
        {
            break pid;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "the server never started"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(hub.entries()[0].status, Status::Starting);
    let alive = |pid: i32| {
        Path::new(&format!("/proc/{pid}")).exists()
            && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .unwrap_or_default()
                .contains(") Z ")
    };
    assert!(alive(pid));
    let t1 = Instant::now();
    hub.shutdown().await;
    let took = t1.elapsed();
    assert!(
        took < keel_mcp::SHUTDOWN_WAIT + Duration::from_millis(500),
        "{took:?}"
    );
    // Killed (a zombie until its parent reaps it counts as gone).
    let gone = Instant::now();
    while alive(pid) && gone.elapsed() < Duration::from_secs(2) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(!alive(pid), "the starting server outlived shutdown");
    assert!(
        matches!(&hub.entries()[0].status, Status::Failed(m) if m.contains("stopped before it was ready")),
        "{:?}",
        hub.entries()[0].status
    );
}

/// Red-team pass 5, R5-8: a network-approved project server that exited was started again
/// mid-session after a fresh check of its files — while a subagent's command swapped
/// `srv.py` between the approved text and another, the interpreter read the other one (1 try
/// in 4) and sent the workspace out. Such a server is started once per session, before any
/// command of it runs; after it exits its tools say so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_project_server_with_network_is_not_restarted_mid_session() {
    if !python_mcp() {
        return;
    }
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap_or_else(|e| panic!("{e}"));
    let mut def = py_def("proj", &[]);
    def.origin = Origin::Project(".mcp.json".into());
    let mut approvals = Approvals::load(&dir.path().join("data"));
    approvals
        .approve(&ws, &def, true)
        .unwrap_or_else(|e| panic!("{e}"));
    let options = StartOptions {
        workspace: ws.clone(),
        startup_timeout: Duration::from_secs(20),
        call_timeout: Duration::from_secs(30),
    };
    let hub =
        Hub::start(vec![def], &approvals, &options, &no_env).unwrap_or_else(|e| panic!("{e}"));
    let mut registry = ToolRegistry::new();
    let warnings = hub.register(&mut registry);
    assert!(warnings.is_empty(), "{warnings:?}");
    assert!(
        matches!(hub.entries()[0].status, Status::Ready { .. }),
        "{:?}",
        hub.entries()[0].status
    );
    let ctx = ToolContext::new(Workspace::new(&ws).unwrap_or_else(|e| panic!("{e}")));
    let crashed = registry
        .execute("mcp__proj__crash", json!({}), &ctx)
        .await
        .map(|o| o.content);
    let Err(ToolError::Model(m)) = crashed else {
        panic!("expected a model error, got {crashed:?}");
    };
    assert!(m.contains("not started again during a session"), "{m}");
    let after = registry
        .execute("mcp__proj__echo", json!({"text": "x"}), &ctx)
        .await
        .map(|o| o.content);
    let Err(ToolError::Model(m)) = after else {
        panic!("expected a model error, got {after:?}");
    };
    assert!(m.contains("until the next session"), "{m}");
    assert_eq!(hub.server("proj").map(|s| s.restarts()), Some(0));
    hub.shutdown().await;
}

/// A minimal MCP server on stdio (no SDK): its one tool runs the workspace file `srvcore`
/// (no code extension) when called — a module loaded lazily, inside a tool call.
const LAZY_SERVER: &str = r#"import json, runpy, sys
def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()
for line in sys.stdin:
    msg = json.loads(line)
    mid, method = msg.get("id"), msg.get("method")
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": mid, "result": {"protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {}}, "serverInfo": {"name": "lazy", "version": "1"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": mid, "result": {"tools": [{"name": "which", "description": "says which code ran", "inputSchema": {"type": "object", "properties": {}}}]}})
    elif method == "tools/call":
        who = runpy.run_path("srvcore")["WHO"]
        send({"jsonrpc": "2.0", "id": mid, "result": {"content": [{"type": "text", "text": who}]}})
    elif mid is not None:
        send({"jsonrpc": "2.0", "id": mid, "result": {}})
"#;

/// Red-team pass 5, R5-8 (the lazy form) and R5-2's variant: an approved network-granted
/// project server ran a workspace file without a code extension (`runpy.run_path("srvcore")`)
/// inside a tool call, after the model had changed it mid-session. The server now runs on a
/// private copy of exactly the approved bytes: the change never reaches it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_network_server_runs_the_approved_bytes_not_the_model_s_later_edit() {
    let python = std::process::Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !available(python, "python3") {
        return;
    }
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(ws.join("srv.py"), LAZY_SERVER).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(ws.join("srvcore"), "WHO = 'approved'\n").unwrap_or_else(|e| panic!("{e}"));
    let def = ServerDef {
        name: "lazy".into(),
        config: ServerConfig {
            command: Some("python3".into()),
            args: vec!["srv.py".into()],
            ..ServerConfig::default()
        },
        origin: Origin::Project(ws.join(".mcp.json")),
    };
    let mut approvals = Approvals::load(&dir.path().join("data"));
    approvals
        .approve(&ws, &def, true)
        .unwrap_or_else(|e| panic!("{e}"));
    let options = StartOptions {
        workspace: ws.clone(),
        startup_timeout: Duration::from_secs(20),
        call_timeout: Duration::from_secs(30),
    };
    let hub =
        Hub::start(vec![def], &approvals, &options, &no_env).unwrap_or_else(|e| panic!("{e}"));
    let mut registry = ToolRegistry::new();
    let warnings = hub.register(&mut registry);
    assert!(warnings.is_empty(), "{warnings:?}");
    let ctx = ToolContext::new(Workspace::new(&ws).unwrap_or_else(|e| panic!("{e}")));
    let first = registry
        .execute("mcp__lazy__which", json!({}), &ctx)
        .await
        .map(|o| o.content);
    assert!(
        first.as_deref().is_ok_and(|t| t.contains("approved")),
        "{first:?}"
    );
    // The model rewrites the file mid-session.
    std::fs::write(ws.join("srvcore"), "WHO = 'changed by the model'\n")
        .unwrap_or_else(|e| panic!("{e}"));
    let second = registry
        .execute("mcp__lazy__which", json!({}), &ctx)
        .await
        .map(|o| o.content);
    assert!(
        second
            .as_deref()
            .is_ok_and(|t| t.contains("approved") && !t.contains("changed")),
        "{second:?}"
    );
    hub.shutdown().await;
}
