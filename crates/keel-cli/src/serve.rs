//! `keel serve`: the HTTP API and web UI, with sessions built exactly as `keel run` builds them.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use keel_engine::config::Layer;
use keel_engine::{Config, EngineBuilder};
use keel_server::{Server, ServerOptions, SessionSetup, TokenOrigin};

use crate::{ServeArgs, exit, setup};

/// Session configuration and providers for the server: the CLI's own functions, with the
/// `keel serve` provider flags as defaults under each request's choices.
struct CliSetup {
    defaults: Vec<(&'static str, toml::Value)>,
}

impl SessionSetup for CliSetup {
    fn config(
        &self,
        workspace: &Path,
        overrides: &[(&str, toml::Value)],
    ) -> Result<Config, String> {
        let mut all: Vec<(&str, toml::Value)> = self.defaults.clone();
        all.extend(overrides.iter().cloned());
        setup::load_config(workspace, Layer::from_overrides(&all)).map_err(|e| format!("{e:#}"))
    }

    fn providers(
        &self,
        config: &Config,
        workspace: &Path,
        builder: EngineBuilder,
    ) -> Result<EngineBuilder, String> {
        let providers = setup::providers(config, workspace).map_err(|e| format!("{e:#}"))?;
        Ok(providers.attach(builder))
    }
}

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
    let store = setup::open_store(&config)?;
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
        let setup = CliSetup {
            defaults: setup::llm_overrides(&args.llm),
        };
        let server = Server::bind(options, store, Arc::new(setup))
            .await
            .map_err(|e| setup::UsageError(e.to_string()))?;
        let addr = server.local_addr();
        let url = format!("http://{addr}/");
        let mut out = std::io::stdout().lock();
        match server.token() {
            TokenOrigin::Generated(token) => {
                let stored = keel_server::security::write_token_file(
                    &keel_engine::config::data_dir(&setup::env_var),
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
                writeln!(out, "Keel is serving {url} (API token required)")?;
            }
        }
        writeln!(out, "Press Ctrl-C to stop.")?;
        out.flush()?;
        drop(out);
        server.run(shutdown_signal()).await?;
        eprintln!("keel: server stopped");
        Ok(exit::COMPLETED)
    })
}

/// Ctrl-C or SIGTERM.
async fn shutdown_signal() {
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
    eprintln!("keel: stopping: cancelling running turns…");
}
