//! The session's MCP servers: launched together in the background on a small runtime of their
//! own, so building a session never waits for them (a slow or hung server delays nothing) and
//! a server's tools arrive in the session's registry (as [`keel_tools::LateTools`], see
//! `crate::late`) the moment it is ready. [`Hub::start`] is the blocking form for commands that
//! want the outcome (`keel mcp test`, `keel doctor`).

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use keel_tools::{LateTool, ToolRegistry, catalog::ToolState};

use crate::approve::{Approval, Approvals};
use crate::config::{EffectConfig, McpConfig, Origin, ServerDef, Transport, expand};
use crate::server::{CallError, Confinement, ListedTool, Recheck, Server};
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

/// How long [`Hub::shutdown`] waits for servers still starting to stop.
pub const SHUTDOWN_WAIT: Duration = Duration::from_secs(2);

/// A tool with the catalog state it is registered in.
pub type StatedTool = LateTool;

/// Where a server stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// Running, with this many tools.
    Ready { tools: usize },
    /// Defined in the project's `.mcp.json` and not (or no longer) approved by the user: the
    /// text says which, and what to do ([`crate::Approval::describe`]).
    NeedsApproval(String),
    /// `disabled = true`.
    Disabled,
    /// It did not start, or its definition is wrong.
    Failed(String),
    /// Starting in the background (within the startup timeout).
    Starting,
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Status::Ready { tools: 1 } => write!(f, "ready, 1 tool"),
            Status::Ready { tools } => write!(f, "ready, {tools} tools"),
            Status::NeedsApproval(why) => write!(f, "{why}"),
            Status::Disabled => write!(f, "disabled"),
            Status::Failed(e) => write!(f, "failed: {e}"),
            Status::Starting => write!(f, "starting"),
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
    pub(crate) handle: tokio::runtime::Handle,
    pub(crate) slots: Vec<Arc<Slot>>,
    /// `mcp_resources`, there from the start when any server is launched.
    pub(crate) resources: Option<LateTool>,
    /// Counts servers that settled; waiters watch it.
    pub(crate) settled: Arc<tokio::sync::watch::Sender<usize>>,
    /// Set by [`Hub::shutdown`]: servers still starting stop (their process group is killed).
    stop: tokio::sync::watch::Sender<bool>,
    pub(crate) startup_timeout: Duration,
}

/// One server: what its definition says, and once it has settled, how it went.
pub(crate) struct Slot {
    pub(crate) name: String,
    pub(crate) origin: Origin,
    pub(crate) active: bool,
    pub(crate) effect: EffectConfig,
    /// Set once: at launch for a server that is not started, else when it is ready or failed.
    pub(crate) done: OnceLock<Done>,
}

/// How a server's start ended.
pub(crate) struct Done {
    pub(crate) status: Status,
    pub(crate) listed: Vec<ListedTool>,
    pub(crate) server: Option<Arc<Server>>,
    /// Its tools as Keel tools, in their catalog state.
    pub(crate) tools: Vec<LateTool>,
    /// Tools skipped for their schema.
    pub(crate) warnings: Vec<String>,
}

impl Done {
    fn not_started(status: Status) -> Self {
        Self {
            status,
            listed: Vec::new(),
            server: None,
            tools: Vec::new(),
            warnings: Vec::new(),
        }
    }
}

impl Slot {
    /// The status now (`Starting` until it settled).
    pub(crate) fn status(&self) -> Status {
        self.done
            .get()
            .map_or(Status::Starting, |d| d.status.clone())
    }
}

impl std::fmt::Debug for Hub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.slots.iter().map(|e| &e.name))
            .finish()
    }
}

impl Hub {
    /// Launches every enabled, approved server in the background and returns at once; each
    /// settles (ready, or failed after at most its startup timeout) on its own. Never fails
    /// for a server: one that cannot start ends as [`Status::Failed`]. Callable from sync
    /// code and from inside an async runtime.
    pub fn launch(
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
        let (settled, _) = tokio::sync::watch::channel(0usize);
        let settled = Arc::new(settled);
        let (stop, _) = tokio::sync::watch::channel(false);
        let mut slots = Vec::new();
        let mut launch = Vec::new();
        for def in defs {
            let slot = Arc::new(Slot {
                name: def.name.clone(),
                origin: def.origin.clone(),
                active: def.config.active,
                effect: def.config.effect,
                done: OnceLock::new(),
            });
            let approval = approvals.check(&options.workspace, &def);
            let not_started = if def.config.disabled {
                Some(Status::Disabled)
            } else if let Approval::Approved { network } = approval {
                match def
                    .config
                    .transport()
                    .and_then(|t| expand_transport(t, env))
                {
                    Ok(t) => {
                        let (confinement, recheck) = if def.origin.is_project() {
                            (
                                Confinement::project(network),
                                Some(recheck(approvals, &options.workspace, &def)),
                            )
                        } else {
                            (Confinement::user(), None)
                        };
                        // A project server with network access runs on a private copy of
                        // the files its approval pinned (R5-2, R5-8).
                        let copy = (def.origin.is_project() && network)
                            .then(|| (approvals.clone(), def.clone()));
                        launch.push((slot.clone(), t, confinement, recheck, copy));
                        None
                    }
                    Err(e) => Some(Status::Failed(e)),
                }
            } else {
                Some(Status::NeedsApproval(approval.describe(&def.name)))
            };
            if let Some(status) = not_started {
                let _ = slot.done.set(Done::not_started(status));
            }
            slots.push(slot);
        }
        let hub = Arc::new_cyclic(|me: &std::sync::Weak<Hub>| Hub {
            rt,
            handle: handle.clone(),
            resources: (!launch.is_empty()).then(|| {
                let tool: Arc<dyn keel_tools::Tool> = Arc::new(McpResources { hub: me.clone() });
                (tool, ToolState::Deferred)
            }),
            slots,
            settled: settled.clone(),
            startup_timeout: options.startup_timeout,
            stop,
        });
        for (slot, transport, confinement, recheck, copy) in launch {
            let opts = options.clone();
            let settled = settled.clone();
            let rt = handle.clone();
            let mut stop = hub.stop.subscribe();
            handle.spawn(async move {
                let limit = opts.startup_timeout;
                let name = slot.name.clone();
                let start = async {
                    let (workspace, transport, copy) = match copy {
                        Some((approvals, def)) => {
                            let ws = opts.workspace.clone();
                            let copy = tokio::task::spawn_blocking(move || {
                                approvals.private_copy(&ws, &def)
                            })
                            .await
                            .map_err(|e| format!("cannot make the private copy: {e}"))??;
                            let transport = copy.redirect(transport);
                            (copy.path().to_path_buf(), transport, Some(copy))
                        }
                        None => (opts.workspace, transport, None),
                    };
                    let server = Server::start(
                        &name,
                        transport,
                        confinement,
                        workspace,
                        opts.startup_timeout,
                        opts.call_timeout,
                    )
                    .await?
                    .with_recheck(recheck)
                    .with_private_copy(copy);
                    let tools = server.list_tools().await.map_err(|e| e.0)?;
                    Ok::<_, String>((Arc::new(server), tools))
                };
                // A shutdown while it starts drops `start`, and with it the process (its
                // process group is killed on drop).
                let result = tokio::select! {
                    biased;
                    _ = stop.wait_for(|stopped| *stopped) => {
                        Err("Keel stopped before it was ready".to_string())
                    }
                    r = tokio::time::timeout(limit, start) => r
                        .map_err(|_| format!("it did not start within {}s", limit.as_secs()))
                        .and_then(|r| r),
                };
                let done = match result {
                    Ok((server, listed)) => ready(&slot, server, listed, rt),
                    Err(e) => Done::not_started(Status::Failed(e)),
                };
                let _ = slot.done.set(done);
                settled.send_modify(|n| *n += 1);
            });
        }
        Ok(hub)
    }

    /// Starts every enabled, approved server at once and waits until each is ready or past
    /// its startup timeout ([`Hub::launch`], then waiting). Callable from sync code and from
    /// inside an async runtime (it blocks the calling thread).
    pub fn start(
        defs: Vec<ServerDef>,
        approvals: &Approvals,
        options: &StartOptions,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Arc<Hub>, String> {
        let hub = Self::launch(defs, approvals, options, env)?;
        let (tx, rx) = std::sync::mpsc::channel();
        let all: Vec<Arc<Slot>> = hub.slots.clone();
        let wait = hub.wait_until(move || all.iter().all(|s| s.done.get().is_some()));
        hub.handle.spawn(async move {
            wait.await;
            let _ = tx.send(());
        });
        let _ = rx.recv_timeout(options.startup_timeout + Duration::from_secs(3));
        Ok(hub)
    }

    /// A future (for the hub's runtime) that ends when `done()` holds, or after the startup
    /// timeout and a margin.
    pub(crate) fn wait_until(
        &self,
        done: impl Fn() -> bool + Send + Sync + 'static,
    ) -> impl Future<Output = ()> + Send + 'static {
        let mut rx = self.settled.subscribe();
        let limit = self.startup_timeout + Duration::from_secs(2);
        async move {
            let _ = tokio::time::timeout(limit, rx.wait_for(|_| done())).await;
        }
    }

    /// Whether the user declared every server read-only (`effect = "read_only"`): only then is
    /// reading their resources judged read-only.
    pub fn all_read_only(&self) -> bool {
        self.slots
            .iter()
            .all(|s| s.effect == EffectConfig::ReadOnly)
    }

    /// Every server, in name order, as it stands now.
    pub fn entries(&self) -> Vec<ServerEntry> {
        self.slots
            .iter()
            .map(|s| {
                let done = s.done.get();
                ServerEntry {
                    name: s.name.clone(),
                    origin: s.origin.clone(),
                    status: s.status(),
                    active: s.active,
                    effect: s.effect,
                    tools: done.map(|d| d.listed.clone()).unwrap_or_default(),
                    server: done.and_then(|d| d.server.clone()),
                }
            })
            .collect()
    }

    /// The tools of the servers ready so far (and `mcp_resources`), each in its catalog
    /// state — deferred unless the server is `active = true` — and the tools skipped for a
    /// schema no provider would accept.
    pub fn tools(&self) -> (Vec<StatedTool>, Vec<String>) {
        let mut out = Vec::new();
        let mut warnings = Vec::new();
        for d in self.slots.iter().filter_map(|s| s.done.get()) {
            out.extend(d.tools.iter().cloned());
            warnings.extend(d.warnings.iter().cloned());
        }
        out.extend(self.resources.iter().cloned());
        (out, warnings)
    }

    /// Makes the servers' tools part of `registry` — those ready now and those that arrive
    /// later (the hub is the registry's late source); returns the warnings known so far.
    pub fn register(self: &Arc<Self>, registry: &mut ToolRegistry) -> Vec<String> {
        registry.set_late(self.clone());
        self.tools().1
    }

    /// A running server by name.
    pub fn server(&self, name: &str) -> Option<Arc<Server>> {
        self.slots
            .iter()
            .find(|e| e.name == name)
            .and_then(|e| e.done.get())
            .and_then(|d| d.server.clone())
    }

    /// Runs `fut` on the hub's runtime and waits for it from any runtime.
    pub async fn run<T: Send + 'static>(
        &self,
        fut: impl Future<Output = Result<T, CallError>> + Send + 'static,
    ) -> Result<T, CallError> {
        let _keep = self.rt.clone();
        run_on(&self.handle, fut).await
    }

    /// Stops every server: those still starting first (their start is abandoned and the
    /// process killed; waited for at most [`SHUTDOWN_WAIT`]), then the running ones.
    pub async fn shutdown(&self) {
        self.stop.send_replace(true);
        let all: Vec<Arc<Slot>> = self.slots.clone();
        let wait = self.wait_until(move || all.iter().all(|s| s.done.get().is_some()));
        let _ = tokio::time::timeout(
            SHUTDOWN_WAIT,
            self.run(async move {
                wait.await;
                Ok(())
            }),
        )
        .await;
        for s in self.slots.iter().filter_map(|s| s.done.get()) {
            if let Some(s) = s.server.clone() {
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

/// Runs `fut` on the runtime of `handle` and waits for it from any runtime.
pub(crate) async fn run_on<T: Send + 'static>(
    handle: &tokio::runtime::Handle,
    fut: impl Future<Output = Result<T, CallError>> + Send + 'static,
) -> Result<T, CallError> {
    match handle.spawn(fut).await {
        Ok(r) => r,
        Err(e) => Err(CallError(format!("the MCP request was lost: {e}"))),
    }
}

/// A ready server's outcome: its tools as Keel tools (a tool whose schema no provider would
/// accept is skipped, with a warning).
fn ready(
    slot: &Slot,
    server: Arc<Server>,
    listed: Vec<ListedTool>,
    handle: tokio::runtime::Handle,
) -> Done {
    let mut tools: Vec<LateTool> = Vec::new();
    let mut warnings = Vec::new();
    let state = if slot.active {
        ToolState::Active
    } else {
        ToolState::Deferred
    };
    for t in &listed {
        match crate::schema::sanitize_all(&t.input_schema) {
            Ok(schema) => {
                let tool = McpTool {
                    name: tool_name(&slot.name, &t.name),
                    remote: t.name.clone(),
                    description: t.description.clone(),
                    schema,
                    effect: slot.effect,
                    server: server.clone(),
                    handle: handle.clone(),
                };
                tools.push((Arc::new(tool), state.clone()));
            }
            Err(e) => warnings.push(format!(
                "MCP tool `{}` of server `{}` skipped: {e}",
                t.name, slot.name
            )),
        }
    }
    Done {
        status: Status::Ready {
            tools: listed.len(),
        },
        listed,
        server: Some(server),
        tools,
        warnings,
    }
}

/// Checks, before a project server is started again after it stopped, that it is still
/// approved as it stands: the script it runs may have been rewritten since the session began.
fn recheck(approvals: &Approvals, workspace: &Path, def: &ServerDef) -> Recheck {
    let approvals = approvals.clone();
    let workspace = workspace.to_path_buf();
    let def = def.clone();
    Arc::new(move || match approvals.check(&workspace, &def) {
        Approval::Approved { .. } => Ok(()),
        other => Err(other.describe(&def.name)),
    })
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
            url: crate::config::expanded_url(&url, &expand(&url, env)?)?,
            headers: map(headers, "header")?,
        },
    })
}
