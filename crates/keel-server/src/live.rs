//! The live event endpoints: the WebSocket (events out; `user_message` and `cancel` in) and
//! the SSE stream (events out). Both resume after `since_seq` with no gaps or duplicates
//! ([`Subscription`]) and, at shutdown, send every event of the cancelled turns before closing.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::Stream;
use keel_protocol::Event;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::api::SinceQuery;
use crate::error::{ApiError, ErrorBody, PathParams, QueryParams};
use crate::hub::{Hub, LiveSession};
use crate::stream::Subscription;

/// What a WebSocket client sends.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum ClientMessage {
    /// The session's next user message; its turn's events follow, `turn_finished` last.
    UserMessage { content: String },
    /// Cancels the running turn.
    Cancel,
    /// Lets the call waiting for approval run (`scope`: `once` or `session`).
    Approve {
        call_id: String,
        #[serde(default)]
        #[schema(value_type = Option<String>)]
        scope: keel_protocol::ApprovalScope,
    },
    /// Refuses the call waiting for approval; the model reads the reason.
    Deny {
        call_id: String,
        #[serde(default)]
        reason: Option<String>,
    },
}

/// Sent instead of an event when a client message cannot be acted on (no `seq`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct RequestError {
    /// Always `request_error`.
    #[serde(rename = "type")]
    pub kind: String,
    pub error_code: String,
    pub message: String,
}

impl RequestError {
    fn from_api(e: &ApiError) -> Self {
        Self {
            kind: "request_error".into(),
            error_code: e.code.to_string(),
            message: e.message.clone(),
        }
    }
}

/// The stream position to resume from: `?since_seq=`, else SSE's `Last-Event-ID`, else 0.
fn since(q: SinceQuery, headers: &HeaderMap) -> u64 {
    q.since_seq
        .or_else(|| {
            headers
                .get("last-event-id")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse().ok())
        })
        .unwrap_or(0)
}

/// The session's event stream over a WebSocket. Send `{"type": "user_message", "content"}` to
/// run a turn, `{"type": "cancel"}` to cancel it, and `{"type": "approve", "call_id", "scope"?}`
/// or `{"type": "deny", "call_id", "reason"?}` to answer an `approval_requested` event; every event arrives as its JSON object
/// (as in `keel run --json`), each turn ending with `turn_finished`. Refusals come as
/// `{"type": "request_error", "error_code", "message"}`. Reconnect with `?since_seq=` set to the
/// last seq received.
#[utoipa::path(get, path = "/api/v1/sessions/{id}/ws", tag = "events",
    params(("id" = String, Path, description = "Session id"), SinceQuery),
    responses(
        (status = 101, description = "Switching to the WebSocket protocol"),
        (status = 400, description = "Not a WebSocket upgrade", body = ErrorBody),
        (status = 403, description = "Foreign Origin", body = ErrorBody),
        (status = 404, description = "No such session", body = ErrorBody),
    ))]
pub async fn session_ws(
    State(hub): State<Arc<Hub>>,
    PathParams(id): PathParams<String>,
    QueryParams(q): QueryParams<SinceQuery>,
    headers: HeaderMap,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Result<Response, ApiError> {
    let upgrade = upgrade.map_err(|e| {
        ApiError::bad_request(format!(
            "this endpoint speaks WebSocket only: {}",
            e.body_text()
        ))
    })?;
    let session = hub.session(&id).await?;
    // Subscribe before the upgrade so nothing published meanwhile is missed.
    let sub = Subscription::new(hub.store.clone(), &session, since(q, &headers)).await?;
    let tracker = hub.streams.clone();
    Ok(upgrade
        .max_message_size(crate::MAX_BODY_BYTES)
        .on_upgrade(move |socket| tracker.track_future(ws_loop(hub, session, sub, socket)))
        .into_response())
}

enum Step {
    Event(Result<Option<Box<Event>>, ApiError>),
    Client(Option<Result<Message, axum::Error>>),
    Flush,
    Deleted,
}

async fn ws_loop(
    hub: Arc<Hub>,
    session: Arc<LiveSession>,
    mut sub: Subscription,
    mut socket: WebSocket,
) {
    loop {
        let step = tokio::select! {
            biased;
            _ = hub.closed.cancelled() => Step::Flush,
            _ = session.deleted.cancelled() => Step::Deleted,
            msg = socket.recv() => Step::Client(msg),
            ev = sub.next() => Step::Event(ev.map(|e| e.map(Box::new))),
        };
        match step {
            Step::Event(Ok(Some(event))) => {
                if send_json(&mut socket, &event).await.is_err() {
                    return;
                }
            }
            Step::Event(Ok(None)) | Step::Deleted => {
                close(&mut socket, "the session was deleted").await;
                return;
            }
            // The database is away for a moment (a restart): the socket stays attached and
            // the subscription reads what it missed once the database answers again.
            Step::Event(Err(e)) if e.status == StatusCode::SERVICE_UNAVAILABLE => {
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Step::Event(Err(e)) => {
                let _ = send_json(&mut socket, &RequestError::from_api(&e)).await;
                close(&mut socket, "the event stream failed").await;
                return;
            }
            Step::Flush => {
                while let Ok(Some(event)) = sub.try_next().await {
                    if send_json(&mut socket, &event).await.is_err() {
                        return;
                    }
                }
                close(&mut socket, "the server is shutting down").await;
                return;
            }
            Step::Client(None | Some(Err(_))) | Step::Client(Some(Ok(Message::Close(_)))) => return,
            Step::Client(Some(Ok(Message::Text(text)))) => {
                if let Err(e) = handle_client(&hub, &session, text.as_str()).await
                    && send_json(&mut socket, &RequestError::from_api(&e))
                        .await
                        .is_err()
                {
                    return;
                }
            }
            Step::Client(Some(Ok(Message::Binary(_)))) => {
                let e = ApiError::bad_request("send JSON text messages, not binary ones");
                if send_json(&mut socket, &RequestError::from_api(&e))
                    .await
                    .is_err()
                {
                    return;
                }
            }
            // Pings are answered by the WebSocket layer.
            Step::Client(Some(Ok(_))) => {}
        }
    }
}

async fn handle_client(hub: &Hub, session: &Arc<LiveSession>, text: &str) -> Result<(), ApiError> {
    let msg: ClientMessage = serde_json::from_str(text).map_err(|e| {
        ApiError::bad_request(format!(
            "cannot read the message ({e}); send {{\"type\": \"user_message\", \"content\": \"…\"}}, {{\"type\": \"cancel\"}}, or {{\"type\": \"approve\" | \"deny\", \"call_id\": \"…\"}}"
        ))
    })?;
    match msg {
        ClientMessage::UserMessage { content } => {
            // The turn's events reach this socket through the subscription.
            hub.send(session, content).await.map(drop)
        }
        ClientMessage::Cancel => hub.cancel(session).await,
        ClientMessage::Approve { call_id, scope } => hub
            .submit(session, keel_protocol::Op::Approve { call_id, scope })
            .await
            .map(drop),
        ClientMessage::Deny { call_id, reason } => hub
            .submit(session, keel_protocol::Op::Deny { call_id, reason })
            .await
            .map(drop),
    }
}

async fn send_json<T: Serialize>(socket: &mut WebSocket, value: &T) -> Result<(), axum::Error> {
    let text = serde_json::to_string(value).unwrap_or_else(|_| "{}".into());
    socket.send(Message::text(text)).await
}

async fn close(socket: &mut WebSocket, reason: &str) {
    let frame = CloseFrame {
        code: axum::extract::ws::close_code::AWAY,
        reason: reason.into(),
    };
    let _ = socket.send(Message::Close(Some(frame))).await;
}

/// The session's event stream as Server-Sent Events: each event's JSON as `data`, its seq as
/// `id` (so a reconnecting `EventSource` resumes by itself through `Last-Event-ID`).
#[utoipa::path(get, path = "/api/v1/sessions/{id}/events/stream", tag = "events",
    params(("id" = String, Path, description = "Session id"), SinceQuery),
    responses(
        (status = 200, description = "text/event-stream of events", content_type = "text/event-stream", body = String),
        (status = 404, description = "No such session", body = ErrorBody),
    ))]
pub async fn events_stream(
    State(hub): State<Arc<Hub>>,
    PathParams(id): PathParams<String>,
    QueryParams(q): QueryParams<SinceQuery>,
    headers: HeaderMap,
) -> Result<Sse<impl Stream<Item = Result<SseEvent, Infallible>>>, ApiError> {
    let session = hub.session(&id).await?;
    let sub = Subscription::new(hub.store.clone(), &session, since(q, &headers)).await?;
    let state = SseState {
        hub,
        session,
        sub,
        flushing: false,
    };
    let stream = futures::stream::unfold(state, |mut st| async move {
        let event = st.next().await?;
        let body = serde_json::to_string(&event).unwrap_or_else(|_| "{}".into());
        let sse = SseEvent::default().id(event.seq.to_string()).data(body);
        Some((Ok(sse), st))
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))))
}

struct SseState {
    hub: Arc<Hub>,
    session: Arc<LiveSession>,
    sub: Subscription,
    flushing: bool,
}

impl SseState {
    /// The next event, or `None` to end the stream.
    async fn next(&mut self) -> Option<Event> {
        if self.flushing {
            return self.sub.try_next().await.ok().flatten();
        }
        loop {
            let ev = tokio::select! {
                biased;
                _ = self.hub.closed.cancelled() => {
                    self.flushing = true;
                    return self.sub.try_next().await.ok().flatten();
                }
                _ = self.session.deleted.cancelled() => return None,
                ev = self.sub.next() => ev,
            };
            match ev {
                // The database is away for a moment: stay attached (as the WebSocket does).
                Err(e) if e.status == StatusCode::SERVICE_UNAVAILABLE => {
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
                ev => return ev.ok().flatten(),
            }
        }
    }
}
