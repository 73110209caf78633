//! MCP tool-call overhead through Keel versus calling the same server directly with rmcp.
//!
//!     cargo bench -p keel-mcp --bench mcp_overhead [-- CALLS]
//!
//! Two copies of the Python test server (`tests/servers/py_server.py`, stdio) are started: one
//! behind Keel (`ToolRegistry::execute` → `McpTool` → the hub's runtime → rmcp), one held by a
//! bare rmcp client on the caller's runtime. Calls of `echo` alternate between the two so both
//! see the same machine load; p50 and p90 of each and the difference are printed.

// Benchmarks start programs of their own (the keel binary, baselines such as `bash -c true`):
// allowed here, outside Keel's one spawn path (docs/SECURITY.md, "One way to start a process").
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use std::path::Path;
use std::time::{Duration, Instant};

use keel_mcp::{Approvals, Hub, Origin, ServerConfig, ServerDef, StartOptions};
use keel_tools::{ToolContext, ToolRegistry, Workspace};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;

fn pct(v: &mut [Duration], p: f64) -> Duration {
    v.sort();
    v[((v.len() - 1) as f64 * p).round() as usize]
}

fn main() {
    let calls: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(200);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/servers/py_server.py");
    let ok = std::process::Command::new("python3")
        .args(["-c", "import mcp.server.mcpserver"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("SKIPPED: the Python MCP SDK is missing (pip install 'mcp>=2,<3')");
        return;
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let def = ServerDef {
            name: "py".into(),
            config: ServerConfig {
                command: Some("python3".into()),
                args: vec![script.display().to_string()],
                ..ServerConfig::default()
            },
            origin: Origin::User("bench".into()),
        };
        let options = StartOptions {
            workspace: dir.path().to_path_buf(),
            startup_timeout: Duration::from_secs(30),
            call_timeout: Duration::from_secs(30),
        };
        let env = |k: &str| std::env::var(k).ok();
        let hub = Hub::start(vec![def], &Approvals::load(dir.path()), &options, &env).unwrap();
        let mut registry = ToolRegistry::new();
        hub.register(&mut registry);
        let ctx = ToolContext::new(Workspace::new(dir.path()).unwrap());

        let mut cmd = tokio::process::Command::new("python3");
        cmd.arg(&script)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true);
        let mut child = cmd.spawn().unwrap();
        let pipes = (child.stdout.take().unwrap(), child.stdin.take().unwrap());
        let direct = ().serve(pipes).await.unwrap();

        let args = serde_json::json!({"text": "ping"});
        let (mut keel, mut bare) = (Vec::new(), Vec::new());
        for i in 0..calls + 20 {
            let t = Instant::now();
            let out = registry
                .execute("mcp__py__echo", args.clone(), &ctx)
                .await
                .unwrap();
            let through_keel = t.elapsed();
            assert_eq!(out.content, "ping");
            let mut params = CallToolRequestParams::new("echo");
            params.arguments = args.as_object().cloned();
            let t = Instant::now();
            direct.call_tool(params).await.unwrap();
            let plain = t.elapsed();
            if i >= 20 {
                keel.push(through_keel);
                bare.push(plain);
            }
        }
        let (k50, k90) = (pct(&mut keel, 0.5), pct(&mut keel, 0.9));
        let (b50, b90) = (pct(&mut bare, 0.5), pct(&mut bare, 0.9));
        println!("echo over stdio, {calls} calls each (after 20 warm-up), alternating:");
        println!("  direct rmcp   p50 {b50:?}  p90 {b90:?}");
        println!("  through Keel  p50 {k50:?}  p90 {k90:?}");
        println!(
            "  overhead p50  {:?}",
            k50.checked_sub(b50).unwrap_or_default()
        );
        hub.shutdown().await;

        // Start-up: the same server as a project's (approved; confined read-only, no network,
        // through the sandbox) and as the user's own (unconfined), alternating.
        let data = tempfile::tempdir().unwrap();
        let project = ServerDef {
            name: "proj".into(),
            config: ServerConfig {
                command: Some("python3".into()),
                args: vec![script.display().to_string()],
                ..ServerConfig::default()
            },
            origin: Origin::Project(dir.path().join(".mcp.json")),
        };
        let mut approvals = Approvals::load(data.path());
        approvals.approve(dir.path(), &project, false).unwrap();
        let user = ServerDef {
            name: "own".into(),
            config: project.config.clone(),
            origin: Origin::User("bench".into()),
        };
        let starts = 8;
        let (mut confined, mut unconfined) = (Vec::new(), Vec::new());
        for _ in 0..starts {
            for (def, into) in [(&project, &mut confined), (&user, &mut unconfined)] {
                let t = Instant::now();
                let hub = Hub::start(vec![def.clone()], &approvals, &options, &env).unwrap();
                let took = t.elapsed();
                assert!(
                    matches!(hub.entries()[0].status, keel_mcp::Status::Ready { .. }),
                    "{:?}",
                    hub.entries()[0].status
                );
                hub.shutdown().await;
                into.push(took);
            }
        }
        let (c50, u50) = (pct(&mut confined, 0.5), pct(&mut unconfined, 0.5));
        println!("start to ready (handshake + tools listed), {starts} starts each, alternating:");
        println!("  user's own, unconfined   p50 {u50:?}");
        println!("  project's, confined      p50 {c50:?}");
        println!(
            "  ratio {:.2}",
            c50.as_secs_f64() / u50.as_secs_f64().max(1e-9)
        );
    });
}
