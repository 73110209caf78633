//! `keel worker`: runs the turns `keel serve --database` queues (see `keel-queue`).

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use keel_config::Layer;
use keel_queue::{WorkerOptions, WorkerStats};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

use crate::args::WorkerArgs;
use crate::{exit, setup};

pub fn execute(args: WorkerArgs) -> anyhow::Result<u8> {
    let cwd = setup::workspace_dir(None)?;
    let config = setup::load_config(&cwd, Layer::from_overrides(&[]))?;
    let url = args
        .database
        .clone()
        .or_else(|| config.database.url.clone())
        .map(|u| u.trim().to_string())
        .filter(|u| !u.is_empty())
        .ok_or_else(|| {
            setup::UsageError(
                "keel worker needs the PostgreSQL database the servers queue turns in: pass --database postgres://USER@HOST[:PORT]/DATABASE, set KEEL_DATABASE_URL or `[database] url`".into(),
            )
        })?;
    let mut options = WorkerOptions::new();
    options.concurrency = args.concurrency.unwrap_or(config.worker.concurrency).max(1);
    options.heartbeat = Duration::from_secs(config.worker.heartbeat_secs.max(1));
    options.retries = config.worker.retries;
    if let Some(dir) = &config.worker.checkout_dir {
        options.checkout_dir = cwd.join(dir);
    }
    options.git_timeout = Duration::from_secs(config.worker.git_timeout_secs.max(1));
    let health_port = args.health_port.or(config.worker.health_port);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async move {
        let store = Arc::new(keel_store::PgStore::open(&url).await?);
        let shown = store.display_url().to_string();
        let pool = keel_queue::connect(&url).await?;
        let builder = setup::session_builder(store.clone());
        let stats = Arc::new(WorkerStats::default());
        let stop = CancellationToken::new();
        let mut out = crate::out::stdout();
        if let Some(port) = health_port {
            let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
                .await
                .map_err(|e| {
                    setup::UsageError(format!(
                        "cannot listen on 127.0.0.1:{port} for /health: {e}; pick another --health-port"
                    ))
                })?;
            let addr = listener.local_addr()?;
            writeln!(out, "health: http://{addr}/health")?;
            tokio::spawn(serve_health(listener, stats.clone()));
        }
        writeln!(
            out,
            "keel worker {} ready: {} turn{} at a time, queue on {shown}",
            options.name,
            options.concurrency,
            if options.concurrency == 1 { "" } else { "s" }
        )?;
        out.flush()?;
        drop(out);
        let signal = stop.clone();
        keel_tools::shell::pending::termination_handled_by_caller();
        tokio::spawn(async move {
            crate::serve::shutdown_signal().await;
            tell!("keel worker: finishing the running turns, taking no new ones…");
            signal.cancel();
        });
        // Turns, tasks and flow runs: each queue has its own apalis workers; one of them
        // failing for good stops the others.
        let mut queues = tokio::task::JoinSet::new();
        queues.spawn(keel_queue::run_task_worker(
            pool.clone(),
            builder.clone(),
            store.clone(),
            options.clone(),
            stats.clone(),
            stop.clone(),
        ));
        queues.spawn(keel_queue::run_flow_worker(
            pool.clone(),
            builder.clone(),
            store.clone(),
            options.clone(),
            stats.clone(),
            stop.clone(),
        ));
        queues.spawn(keel_queue::run_worker(
            pool,
            builder,
            options,
            stats,
            stop.clone(),
        ));
        let mut first_error = None;
        while let Some(done) = queues.join_next().await {
            stop.cancel();
            match done {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    first_error.get_or_insert_with(|| anyhow::Error::from(e));
                }
                Err(e) => {
                    first_error.get_or_insert_with(|| anyhow::anyhow!("a queue worker panicked: {e}"));
                }
            }
        }
        // A command still running is ended and checked (red-team pass 6, R6-7).
        keel_tools::shell::pending::finish_all();
        if let Some(e) = first_error {
            return Err(e);
        }
        tell!("keel worker: stopped");
        Ok(exit::COMPLETED)
    })
}

/// `GET /health` (any path, in fact): `{"status":"ok","database":"up","running":…,
/// "completed":…,"failed":…}`; while the database is unreachable, 503 with
/// `"status":"degraded","database":"down"` (the worker waits for it and does not exit).
async fn serve_health(listener: tokio::net::TcpListener, stats: Arc<WorkerStats>) {
    loop {
        let Ok((mut socket, _)) = listener.accept().await else {
            continue;
        };
        let stats = stats.clone();
        tokio::spawn(async move {
            // Read the whole request head first: closing while the client still writes would
            // reset the connection under it.
            let read_head = async {
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 16 * 1024 {
                    match socket.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
            };
            let _ = tokio::time::timeout(Duration::from_secs(5), read_head).await;
            let health = stats.health();
            let up = health.database == keel_queue::Database::Up;
            let body = serde_json::json!({
                "status": if up { "ok" } else { "degraded" },
                "database": health.database,
                "running": health.running,
                "completed": health.completed,
                "failed": health.failed,
            })
            .to_string();
            let status = if up {
                "200 OK"
            } else {
                "503 Service Unavailable"
            };
            let response = format!(
                "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = socket.write_all(response.as_bytes()).await;
            let _ = socket.shutdown().await;
        });
    }
}
