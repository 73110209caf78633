//! `keel serve`: Keel's engine behind an HTTP API, for teams that run agents as a service and
//! watch them in a browser.
//!
//! - REST under `/api/v1` ([`api`]): create/list/get/delete sessions, send a message and get
//!   the turn's result with its events and phase events, cancel, undo to a turn, list events,
//!   blockers; PRDs, tasks, work and proofs ([`tasks`]).
//! - A WebSocket and an SSE stream per session ([`live`]) carrying every event, resumable from
//!   any `seq` without gaps or duplicates ([`stream`]).
//! - An OpenAPI document generated from the handlers' types at `/api/v1/openapi.json`.
//! - The web UI from `web/`, embedded ([`ui`]).
//! - Security ([`security`]): loopback by default, a bearer token always (generated when none
//!   is configured), `Origin` and `Host` checks, body size limits, JSON errors ([`error`]);
//!   sessions and scripts only under the workspace roots ([`roots`]).
//!
//! Every session is built by the engine's [`SessionBuilder`] (configuration layers, providers,
//! tools, guardrails) and driven through its session handle
//! ([`keel_engine::runtime::SessionHandle`]): requests become `Op`s, so a session behaves the
//! same from the CLI, REST and WebSocket. This crate does not know how the terminal renders
//! events.

pub mod api;
pub mod approvals;
pub mod error;
pub mod hub;
pub mod live;
mod remote;
pub mod roots;
pub mod security;
pub mod stream;
pub mod tasks;
pub mod ui;

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::get;
use axum::serve::ListenerExt;
use tokio::net::TcpListener;
use utoipa::OpenApi;
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub use hub::{ControlSeqs, Controlled, Hub, Sent, SessionSpec, TaskQueue, TurnQueue, TurnResult};
pub use keel_engine::runtime::SessionBuilder;
pub use roots::WorkspaceRoots;
pub use security::{Access, TokenOrigin};

/// The largest request body (and WebSocket message) accepted.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// How long shutdown waits for streams to deliver their last events.
const STREAM_FLUSH_LIMIT: Duration = Duration::from_secs(5);

/// Where and how to serve.
#[derive(Debug, Clone)]
pub struct ServerOptions {
    /// Address or host name to bind.
    pub host: String,
    /// Port (0: any free one).
    pub port: u16,
    /// Bearer token; generated when none is given (loopback included).
    pub token: Option<String>,
    /// Browser origins allowed besides the server's own.
    pub allowed_origins: Vec<String>,
    /// The directory relative session workspaces are resolved against.
    pub default_workspace: PathBuf,
    /// Directories sessions may run in (and take scripts from); empty means
    /// `default_workspace` only.
    pub workspace_roots: Vec<PathBuf>,
}

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("cannot resolve `{host}`: {reason}")]
    Resolve { host: String, reason: String },
    #[error("cannot listen on {addr}: {source}; pick another port with --port")]
    Bind {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Security(#[from] security::SecurityError),
    #[error(transparent)]
    Roots(#[from] roots::RootsError),
    #[error("the server stopped with an error: {0}")]
    Io(#[from] std::io::Error),
}

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Keel API",
        description = "Run Keel agent sessions over HTTP: REST for sessions and turns, a WebSocket or SSE stream of every event. Errors are `{error_code, message}`. Every API request needs `Authorization: Bearer <token>` (or `?token=` on streams); the token is configured, or generated and printed at start-up.",
    ),
    modifiers(&BearerAuth),
    tags(
        (name = "sessions", description = "Create, list, read and delete sessions"),
        (name = "turns", description = "Send messages, cancel turns"),
        (name = "events", description = "The event stream: stored, WebSocket, SSE"),
        (name = "blockers", description = "Questions sessions wait on"),
        (name = "tasks", description = "PRDs, tasks with dependencies, work runs and their proofs"),
    )
)]
struct ApiDoc;

struct BearerAuth;

impl utoipa::Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)),
        );
        openapi.security = Some(vec![utoipa::openapi::security::SecurityRequirement::new(
            "bearer",
            Vec::<String>::new(),
        )]);
    }
}

/// The API routes and their OpenAPI document.
pub fn api_routes() -> (Router<Arc<Hub>>, utoipa::openapi::OpenApi) {
    let (router, mut doc) = OpenApiRouter::with_openapi(ApiDoc::openapi())
        .routes(routes!(api::create_session, api::list_sessions))
        .routes(routes!(api::get_session, api::delete_session))
        .routes(routes!(api::send_message))
        .routes(routes!(api::cancel_turn))
        .routes(routes!(api::undo))
        .routes(routes!(approvals::approve))
        .routes(routes!(approvals::deny))
        .routes(routes!(api::list_events))
        .routes(routes!(live::events_stream))
        .routes(routes!(live::session_ws))
        .routes(routes!(api::list_blockers))
        .routes(routes!(api::answer_blocker))
        .routes(routes!(tasks::list_prds, tasks::add_prd))
        .routes(routes!(tasks::get_prd, tasks::edit_prd))
        .routes(routes!(tasks::list_tasks, tasks::add_task))
        .routes(routes!(
            tasks::get_task,
            tasks::edit_task,
            tasks::delete_task
        ))
        .routes(routes!(tasks::generate))
        .routes(routes!(tasks::start))
        .routes(routes!(tasks::batch))
        .routes(routes!(tasks::status))
        .split_for_parts();
    common_responses(&mut doc);
    (router, doc)
}

/// The answers every operation can give besides its own, added to each operation's responses
/// so the document lists every status the server sends: 401 without the token, and for a JSON
/// body 400 (not JSON), 413 (too large), 415 (not sent as JSON) and 422 (a missing or unknown
/// field, a wrong type) — `JsonBody`'s rejections.
fn common_responses(doc: &mut utoipa::openapi::OpenApi) {
    use utoipa::openapi::{ContentBuilder, Ref, RefOr, ResponseBuilder};
    let error = |description: &str| {
        RefOr::T(
            ResponseBuilder::new()
                .description(description)
                .content(
                    "application/json",
                    ContentBuilder::new()
                        .schema(Some(Ref::from_schema_name("ErrorBody")))
                        .build(),
                )
                .build(),
        )
    };
    for item in doc.paths.paths.values_mut() {
        for op in [
            &mut item.get,
            &mut item.put,
            &mut item.post,
            &mut item.delete,
            &mut item.patch,
        ]
        .into_iter()
        .flatten()
        {
            let responses = &mut op.responses.responses;
            responses
                .entry("401".into())
                .or_insert_with(|| error("No or a wrong bearer token"));
            if op.request_body.is_some() {
                for (status, why) in [
                    ("400", "The body is not valid JSON"),
                    ("413", "The body is too large"),
                    ("415", "The body was not sent as `application/json`"),
                    (
                        "422",
                        "The body does not fit this endpoint (a missing or unknown field, a wrong type)",
                    ),
                ] {
                    responses.entry(status.into()).or_insert_with(|| error(why));
                }
            }
        }
    }
}

/// The whole application: API, OpenAPI document, UI, limits and access checks.
pub fn app(hub: Arc<Hub>, access: Arc<Access>) -> Router {
    let (api, doc) = api_routes();
    let doc = Arc::new(doc);
    api.route(
        "/api/v1/openapi.json",
        get(move || {
            let doc = doc.clone();
            async move { axum::Json(doc.as_ref().clone()) }
        }),
    )
    .route("/", get(ui::index))
    // A session's own address (bookmarked, shared, reloaded) and the tasks board's: the page,
    // which opens what the path names.
    .route("/s/{id}", get(ui::index))
    .route("/tasks", get(ui::index))
    .route("/ui/{file}", get(ui::file))
    .fallback(error::not_found)
    .method_not_allowed_fallback(error::method_not_allowed)
    .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
    .layer(axum::middleware::from_fn_with_state(
        access,
        security::guard,
    ))
    .with_state(hub)
}

/// A bound server, ready to run.
pub struct Server {
    hub: Arc<Hub>,
    access: Arc<Access>,
    listener: TcpListener,
    addr: SocketAddr,
    token: TokenOrigin,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl Server {
    /// Checks the workspace roots, binds the address and settles the access rules (without a
    /// configured token one is generated, on loopback too: any local process could otherwise
    /// drive the server).
    pub async fn bind(
        options: ServerOptions,
        builder: SessionBuilder,
    ) -> Result<Self, ServerError> {
        let target = format!("{}:{}", options.host.trim_matches(['[', ']']), options.port);
        let target = if options.host.contains(':') && !options.host.starts_with('[') {
            format!("[{}]:{}", options.host, options.port)
        } else {
            target
        };
        let addr = tokio::net::lookup_host(&target)
            .await
            .map_err(|e| ServerError::Resolve {
                host: options.host.clone(),
                reason: e.to_string(),
            })?
            .next()
            .ok_or_else(|| ServerError::Resolve {
                host: options.host.clone(),
                reason: "no address".into(),
            })?;
        let roots = if options.workspace_roots.is_empty() {
            vec![options.default_workspace.clone()]
        } else {
            options.workspace_roots.clone()
        };
        let roots = WorkspaceRoots::new(&roots)?;
        let (access, token) = Access::for_bind(addr.ip(), options.token, options.allowed_origins)?;
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| ServerError::Bind {
                addr: addr.to_string(),
                source,
            })?;
        let addr = listener.local_addr()?;
        let hub = Arc::new(Hub::new(builder, options.default_workspace, roots));
        Ok(Self {
            hub,
            access: Arc::new(access),
            listener,
            addr,
            token,
        })
    }

    /// The bound address (with the real port when 0 was asked for).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Where the token came from (a generated one is shown to the user once).
    pub fn token(&self) -> &TokenOrigin {
        &self.token
    }

    /// The sessions and turns.
    pub fn hub(&self) -> Arc<Hub> {
        self.hub.clone()
    }

    /// Serves until `shutdown` completes, then stops cleanly: new turns are refused, running
    /// turns are cancelled and end with their events committed, streams deliver those events
    /// and close, in-flight requests finish.
    pub async fn run(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), ServerError> {
        let hub = self.hub.clone();
        let app = app(self.hub.clone(), self.access);
        let stop = hub.clone();
        // Events are small writes that must leave at once: no Nagle delay.
        let listener = self.listener.tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        });
        axum::serve(listener, app)
            .with_graceful_shutdown(async move {
                shutdown.await;
                stop.shutdown().await;
            })
            .await?;
        hub.wait_for_streams(STREAM_FLUSH_LIMIT).await;
        Ok(())
    }
}
