//! `keel serve`: the HTTP API and web UI, with sessions built exactly as `keel run` builds them.

use std::io::Write;
use std::sync::Arc;

use anyhow::Context;
use keel_config::Layer;
use keel_server::{Server, ServerOptions, TokenOrigin};

use crate::args::ServeArgs;
use crate::{exit, setup};

pub fn execute(args: ServeArgs) -> anyhow::Result<u8> {
    let workspace = setup::workspace_dir(args.common.workspace.as_deref())?;
    let mut overrides: Vec<(&str, toml::Value)> = Vec::new();
    if let Some(h) = &args.host {
        overrides.push(("server.host", toml::Value::String(h.clone())));
    }
    if let Some(p) = args.port {
        overrides.push(("server.port", toml::Value::Integer(i64::from(p))));
    }
    if let Some(t) = &args.token {
        overrides.push(("server.token", toml::Value::String(t.clone())));
    }
    let config = setup::load_config(&workspace, Layer::from_overrides(&overrides))?;
    let database = args
        .database
        .clone()
        .map(|u| u.trim().to_string())
        .filter(|u| !u.is_empty());
    // Stateless mode keeps no local session database.
    let store = match database {
        Some(_) => None,
        None => Some(setup::open_store(&config)?),
    };
    let options = ServerOptions {
        host: config.server.host.clone(),
        port: config.server.port,
        token: config.server.token.clone(),
        allowed_origins: config.server.allowed_origins.clone(),
        workspace_roots: config
            .server
            .workspaces
            .iter()
            .map(|w| workspace.join(keel_tools::sandbox::expand_home(w)))
            .collect(),
        default_workspace: workspace,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async move {
        let (shared, queued): (Arc<dyn keel_store::Store>, _) = match &store {
            Some(store) => (store.clone(), None),
            None => {
                let url = database.as_deref().unwrap_or_default();
                // API calls fail fast with 503 while the database is unreachable (the
                // workers are the ones riding out a restart).
                let pg = Arc::new(
                    keel_store::PgStore::open_with(url, std::time::Duration::from_secs(3))
                        .await?
                        .retry_for(std::time::Duration::ZERO),
                );
                let pool = keel_queue::connect(url).await?;
                (pg.clone(), Some((pg, pool)))
            }
        };
        // The `keel serve` provider flags are defaults under each request's own choices.
        let builder = setup::session_builder(shared).defaults(crate::launch::overrides(&args.llm, None, None));
        let server = Server::bind(options, builder)
            .await
            .map_err(|e| setup::UsageError(e.to_string()))?;
        if let Some(store) = store {
            server
                .hub()
                .set_work_store(keel_store::work::WorkStores::of(store));
        }
        if let Some((pg, pool)) = queued {
            server.hub().set_queue(keel_queue::turn_queue(&pool));
            server
                .hub()
                .set_work_store(keel_store::work::WorkStores::of(pg.clone()));
            server.hub().set_task_queue(keel_queue::task_queue(&pool));
            tokio::spawn(follow_events(pg, server.hub()));
        }
        let addr = server.local_addr();
        let url = format!("http://{addr}/");
        let mut out = crate::out::stdout();
        match server.token() {
            TokenOrigin::Generated(token) => {
                let stored = keel_server::security::write_token_file(
                    &keel_config::data_dir(&setup::env_var),
                    token,
                );
                writeln!(out, "Keel is serving {url}#token={token}")?;
                let kept = match &stored {
                    Ok(path) => format!("also in {}, readable only by you", path.display()),
                    Err(e) => format!("it could not be stored: {e}"),
                };
                writeln!(
                    out,
                    "API token ({kept}; send it as `Authorization: Bearer <token>`): {token}"
                )?;
            }
            TokenOrigin::Configured => {
                // The token the user gave (`--token`, `KEEL_SERVER__TOKEN`, `[server] token`):
                // the address that opens the web UI with it, as for a generated one.
                let token = config.server.token.as_deref().unwrap_or_default().trim();
                writeln!(out, "Keel is serving {url}#token={token}")?;
                writeln!(
                    out,
                    "API token: the one you configured (--token, KEEL_SERVER__TOKEN or [server] token); send it as `Authorization: Bearer <token>`"
                )?;
            }
        }
        writeln!(out, "Press Ctrl-C to stop.")?;
        out.flush()?;
        drop(out);
        server
            .run(async {
                shutdown_signal().await;
                tell!("keel: stopping: cancelling running turns…");
            })
            .await?;
        // A command still running is ended and checked (red-team pass 6, R6-7).
        keel_tools::shell::pending::finish_all();
        tell!("keel: server stopped");
        Ok(exit::COMPLETED)
    })
}

/// Stateless mode: every event any worker stores reaches this server's streams (the store's
/// LISTEN/NOTIFY notices, then the events read by seq). When the connection is lost (the
/// database restarted), notices sent meanwhile are gone: once it is back, every watched
/// session is read from the last seq this server delivered. One line per outage.
async fn follow_events(store: Arc<keel_store::PgStore>, hub: Arc<keel_server::Hub>) {
    let mut down = false;
    loop {
        match store.listen_events().await {
            Ok(mut notices) => {
                if down {
                    tell!("keel: the database is back; catching up the event streams");
                }
                // Anything stored before this subscription (or during an outage).
                let mut missed = true;
                down = false;
                loop {
                    if missed {
                        match hub.catch_up().await {
                            Ok(()) => missed = false,
                            Err(e) => {
                                tell!("keel: cannot catch up the event streams: {}", e.message);
                                break;
                            }
                        }
                    }
                    match notices.next().await {
                        Ok(keel_store::Notice::Stored { session, seq }) => {
                            if let Err(e) = hub.stored(&session, seq).await {
                                tell!(
                                    "keel: cannot read the events of session {session}: {}",
                                    e.message
                                );
                            }
                        }
                        Ok(keel_store::Notice::Reconnected) => missed = true,
                        Err(e) => {
                            down = true;
                            tell!("keel: lost the database's event notices (reconnecting): {e}");
                            break;
                        }
                    }
                }
            }
            Err(e) if !down => {
                down = true;
                tell!("keel: cannot follow the database's events (retrying): {e}");
            }
            Err(_) => {}
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
}

/// Ctrl-C or SIGTERM. The caller shuts down gracefully and then runs the commands' pending
/// checks (`keel_tools::shell::pending::finish_all`).
pub async fn shutdown_signal() {
    keel_tools::shell::pending::termination_handled_by_caller();
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {}
        _ = term => {}
    }
}
