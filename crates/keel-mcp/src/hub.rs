//! The session's MCP servers: started together at session start (each within its startup
//! timeout) on a small runtime of their own, so a session's engine can be built from sync
//! code and a slow or hung server never blocks the loop's runtime.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use keel_tools::{Tool, ToolRegistry, catalog::ToolState};

use crate::approve::Approvals;
use crate::config::{EffectConfig, McpConfig, Origin, ServerDef, Transport, expand};
use crate::server::{CallError, ListedTool, Server};
use crate::tool::{McpResources, McpTool, tool_name};

/// Owns the runtime; shuts it down without blocking when the last tool or hub is dropped
/// (a runtime may not be dropped inside another one's async context).
pub(crate) struct Runtime(Option<tokio::runtime::Runtime>);

impl Drop for Runtime {
    fn drop(&mut self) {
        if let Some(rt) = self.0.take() {
            rt.shutdown_background();
        }
    }
}

/// A tool with the catalog state it is registered in.
pub type StatedTool = (Arc<dyn Tool>, ToolState);

/// Where a server stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// Running, with this many tools.
    Ready { tools: usize },
    /// Defined in the project's `.mcp.json` and not (or no longer) approved by the user.
    NeedsApproval,
    /// `disabled = true`.
    Disabled,
    /// It did not start, or its definition is wrong.
    Failed(String),
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Status::Ready { tools } => write!(f, "ready, {tools} tool(s)"),
            Status::NeedsApproval => write!(f, "not approved (run `keel mcp add NAME` to approve)"),
            Status::Disabled => write!(f, "disabled"),
            Status::Failed(e) => write!(f, "failed: {e}"),
        }
    }
}

/// One server's entry.
#[derive(Debug, Clone)]
pub struct ServerEntry {
    pub name: String,
    pub origin: Origin,
    pub status: Status,
    pub active: bool,
    pub effect: EffectConfig,
    pub tools: Vec<ListedTool>,
    pub server: Option<Arc<Server>>,
}

/// What starting needs besides the definitions.
#[derive(Debug, Clone)]
pub struct StartOptions {
    pub workspace: PathBuf,
    pub startup_timeout: Duration,
    pub call_timeout: Duration,
}

impl StartOptions {
    /// Options from `[mcp]` for `workspace`.
    pub fn from_config(config: &McpConfig, workspace: &Path) -> Self {
        Self {
            workspace: workspace.to_path_buf(),
            startup_timeout: Duration::from_secs(config.startup_timeout_secs.max(1)),
            call_timeout: Duration::from_secs(config.call_timeout_secs.max(1)),
        }
    }
}

/// The started servers of one session.
pub struct Hub {
    rt: Arc<Runtime>,
    handle: tokio::runtime::Handle,
    entries: Vec<ServerEntry>,
}

impl std::fmt::Debug for Hub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.entries.iter().map(|e| &e.name))
            .finish()
    }
}

impl Hub {
    /// Starts every enabled, approved server at once and waits until each is ready or past
    /// its startup timeout. Never fails: a server that cannot start is an entry with
    /// [`Status::Failed`]. Callable from sync code and from inside an async runtime.
    pub fn start(
        defs: Vec<ServerDef>,
        approvals: &Approvals,
        options: &StartOptions,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Arc<Hub>, String> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("keel-mcp")
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the MCP runtime: {e}"))?;
        let handle = rt.handle().clone();
        let rt = Arc::new(Runtime(Some(rt)));
        let mut pending = Vec::new();
        let mut entries = Vec::new();
        for def in defs {
            let mut entry = ServerEntry {
                name: def.name.clone(),
                origin: def.origin.clone(),
                status: Status::Disabled,
                active: def.config.active,
                effect: def.config.effect,
                tools: Vec::new(),
                server: None,
            };
            if def.config.disabled {
                entries.push(entry);
                continue;
            }
            if !approvals.is_approved(&options.workspace, &def) {
                entry.status = Status::NeedsApproval;
                entries.push(entry);
                continue;
            }
            let transport = match def
                .config
                .transport()
                .and_then(|t| expand_transport(t, env))
            {
                Ok(t) => t,
                Err(e) => {
                    entry.status = Status::Failed(e);
                    entries.push(entry);
                    continue;
                }
            };
            let opts = options.clone();
            let name = def.name.clone();
            let task = handle.spawn(async move {
                let limit = opts.startup_timeout;
                let start = async {
                    let server = Server::start(
                        &name,
                        transport,
                        opts.workspace,
                        opts.startup_timeout,
                        opts.call_timeout,
                    )
                    .await?;
                    let tools = server.list_tools().await.map_err(|e| e.0)?;
                    Ok::<_, String>((Arc::new(server), tools))
                };
                tokio::time::timeout(limit, start)
                    .await
                    .map_err(|_| format!("it did not start within {}s", limit.as_secs()))?
            });
            entry.status = Status::Failed(format!(
                "it did not start within {}s",
                options.startup_timeout.as_secs()
            ));
            pending.push((entries.len(), task));
            entries.push(entry);
        }
        // Wait for all of them on the hub's runtime, from whatever thread this is.
        let (tx, rx) = std::sync::mpsc::channel();
        handle.spawn(async move {
            let mut results = Vec::new();
            for (i, task) in pending {
                let r = match task.await {
                    Ok(r) => r,
                    Err(e) => Err(format!("its start-up task failed: {e}")),
                };
                results.push((i, r));
            }
            let _ = tx.send(results);
        });
        let limit = options.startup_timeout + Duration::from_secs(2);
        let results = rx.recv_timeout(limit).unwrap_or_default();
        for (i, r) in results {
            if let Some(entry) = entries.get_mut(i) {
                match r {
                    Ok((server, tools)) => {
                        entry.status = Status::Ready { tools: tools.len() };
                        entry.tools = tools;
                        entry.server = Some(server);
                    }
                    Err(e) => entry.status = Status::Failed(e),
                }
            }
        }
        Ok(Arc::new(Hub {
            rt,
            handle,
            entries,
        }))
    }

    /// Every server, in name order.
    pub fn entries(&self) -> &[ServerEntry] {
        &self.entries
    }

    /// The running servers' tools, each in its catalog state: deferred unless the server is
    /// `active = true`. A tool whose schema no provider would accept is skipped (its reason
    /// is in the returned warnings).
    pub fn tools(self: &Arc<Self>) -> (Vec<StatedTool>, Vec<String>) {
        let mut out: Vec<StatedTool> = Vec::new();
        let mut warnings = Vec::new();
        for entry in &self.entries {
            let Some(server) = &entry.server else {
                continue;
            };
            for t in &entry.tools {
                match crate::schema::sanitize_all(&t.input_schema) {
                    Ok(schema) => {
                        let tool = McpTool {
                            name: tool_name(&entry.name, &t.name),
                            remote: t.name.clone(),
                            description: t.description.clone(),
                            schema,
                            effect: entry.effect,
                            server: server.clone(),
                            hub: self.clone(),
                        };
                        let state = if entry.active {
                            ToolState::Active
                        } else {
                            ToolState::Deferred
                        };
                        out.push((Arc::new(tool), state));
                    }
                    Err(e) => warnings.push(format!(
                        "MCP tool `{}` of server `{}` skipped: {e}",
                        t.name, entry.name
                    )),
                }
            }
        }
        if self.entries.iter().any(|e| e.server.is_some()) {
            out.push((
                Arc::new(McpResources { hub: self.clone() }),
                ToolState::Deferred,
            ));
        }
        (out, warnings)
    }

    /// Registers [`Hub::tools`] in `registry`; returns the warnings.
    pub fn register(self: &Arc<Self>, registry: &mut ToolRegistry) -> Vec<String> {
        let (tools, warnings) = self.tools();
        for (tool, state) in tools {
            registry.register_with_state(tool, state);
        }
        warnings
    }

    /// A running server by name.
    pub fn server(&self, name: &str) -> Option<Arc<Server>> {
        self.entries
            .iter()
            .find(|e| e.name == name)
            .and_then(|e| e.server.clone())
    }

    /// Runs `fut` on the hub's runtime and waits for it from any runtime.
    pub async fn run<T: Send + 'static>(
        &self,
        fut: impl Future<Output = Result<T, CallError>> + Send + 'static,
    ) -> Result<T, CallError> {
        let _keep = self.rt.clone();
        match self.handle.spawn(fut).await {
            Ok(r) => r,
            Err(e) => Err(CallError(format!("the MCP request was lost: {e}"))),
        }
    }

    /// Stops every server.
    pub async fn shutdown(&self) {
        for e in &self.entries {
            if let Some(s) = e.server.clone() {
                let _ = self
                    .run(async move {
                        s.shutdown().await;
                        Ok(())
                    })
                    .await;
            }
        }
    }
}

fn expand_transport(
    t: Transport,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Transport, String> {
    let map = |m: std::collections::BTreeMap<String, String>, what: &str| {
        m.into_iter()
            .map(|(k, v)| {
                expand(&v, env)
                    .map(|v| (k.clone(), v))
                    .map_err(|e| format!("{what} `{k}`: {e}"))
            })
            .collect::<Result<_, _>>()
    };
    Ok(match t {
        Transport::Stdio {
            command,
            args,
            env: vars,
        } => Transport::Stdio {
            command,
            args,
            env: map(vars, "env")?,
        },
        Transport::Http { url, headers } => Transport::Http {
            url: expand(&url, env)?,
            headers: map(headers, "header")?,
        },
    })
}
