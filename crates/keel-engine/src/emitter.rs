//! The event emitter: numbers each event, stores it durably, then publishes it to sinks.

use std::sync::{Arc, Mutex};

use keel_protocol::{Event, EventKind};
use keel_store::Store;

use crate::EngineError;

/// Receives every event of a session after it is stored (CLI printer, JSON writer, server
/// broadcast). Must not block for long: it runs on the engine's task.
pub trait EventSink: Send + Sync {
    fn publish(&self, event: &Event);
}

impl<F: Fn(&Event) + Send + Sync> EventSink for F {
    fn publish(&self, event: &Event) {
        self(event)
    }
}

/// Keeps every event it receives (tests, REST responses that return a turn's events).
#[derive(Debug, Default)]
pub struct CollectingSink {
    events: Mutex<Vec<Event>>,
}

impl CollectingSink {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// The events received so far.
    pub fn events(&self) -> Vec<Event> {
        self.events.lock().map(|e| e.clone()).unwrap_or_default()
    }

    /// The `type` names of the events received so far.
    pub fn types(&self) -> Vec<&'static str> {
        self.events
            .lock()
            .map(|e| e.iter().map(Event::type_name).collect())
            .unwrap_or_default()
    }
}

impl EventSink for CollectingSink {
    fn publish(&self, event: &Event) {
        if let Ok(mut e) = self.events.lock() {
            e.push(event.clone());
        }
    }
}

/// Stamps `ts` and the run, has the store write each event (the store assigns `seq` inside
/// the write), then hands it to the sinks — so no sink ever sees an event that a crash could
/// lose, and several writers (tasks, processes) never number two events alike. Cheap to clone:
/// clones are the same emitter (one order lock), such as the one a hook's `HookContext` holds.
#[derive(Clone)]
pub struct Emitter {
    inner: Arc<Inner>,
}

struct Inner {
    session_id: String,
    run_id: String,
    parent_run_id: Option<String>,
    /// Held from the write to the last sink, so sinks see this emitter's events in seq order.
    order: tokio::sync::Mutex<()>,
    store: Arc<dyn Store>,
    sinks: Vec<Arc<dyn EventSink>>,
}

impl std::fmt::Debug for Emitter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Emitter")
            .field("session_id", &self.inner.session_id)
            .finish_non_exhaustive()
    }
}

impl Emitter {
    /// An emitter of `session_id`'s events (the store continues its numbering).
    pub fn new(session_id: String, store: Arc<dyn Store>, sinks: Vec<Arc<dyn EventSink>>) -> Self {
        Self {
            inner: Arc::new(Inner {
                session_id,
                run_id: crate::time::new_run_id(),
                parent_run_id: None,
                order: tokio::sync::Mutex::new(()),
                store,
                sinks,
            }),
        }
    }

    /// Stamps events with `run_id` (and the run that started it) instead of a fresh id: an
    /// emitter of its own (a clone made earlier keeps the old stamps).
    pub fn in_run(self, run_id: Option<String>, parent_run_id: Option<String>) -> Self {
        let old = self.inner;
        Self {
            inner: Arc::new(Inner {
                session_id: old.session_id.clone(),
                run_id: run_id.unwrap_or_else(|| old.run_id.clone()),
                parent_run_id,
                order: tokio::sync::Mutex::new(()),
                store: old.store.clone(),
                sinks: old.sinks.clone(),
            }),
        }
    }

    /// The run whose events this emitter stamps.
    pub fn run_id(&self) -> &str {
        &self.inner.run_id
    }

    /// Where this emitter's events go after they are stored.
    pub(crate) fn sinks(&self) -> &[Arc<dyn EventSink>] {
        &self.inner.sinks
    }

    /// The session this emitter numbers events for.
    pub fn session_id(&self) -> &str {
        &self.inner.session_id
    }

    /// Stores and publishes one event.
    pub async fn emit(&self, kind: EventKind) -> Result<Event, EngineError> {
        let inner = &*self.inner;
        let order = inner.order.lock().await;
        let draft = Event {
            session_id: inner.session_id.clone(),
            seq: 0, // assigned by the store
            ts: crate::time::now_ms(),
            run_id: inner.run_id.clone(),
            parent_run_id: inner.parent_run_id.clone(),
            kind,
        };
        let event = inner.store.append_event(&draft).await?;
        // Publish while still holding the lock so sinks see events in seq order even when
        // several tasks emit at once.
        for sink in &inner.sinks {
            sink.publish(&event);
        }
        drop(order);
        Ok(event)
    }
}

impl Emitter {
    /// Emits what Keel's post-command checks queued for the workspace `root` — files moved
    /// aside, what a bound left unchecked — as `workspace_check` events (for `call_id`'s
    /// command when there is one): the user sees them in the event stream, not only the model
    /// in the tool result (red-team pass 10, R10-22).
    pub async fn workspace_checks(
        &self,
        root: &std::path::Path,
        call_id: Option<&str>,
    ) -> Result<(), EngineError> {
        for notice in keel_tools::shell::bounds::take_notices(root) {
            self.emit(EventKind::WorkspaceCheck {
                call_id: call_id.map(str::to_string),
                unchecked: notice.unchecked,
                message: notice.text,
            })
            .await?;
        }
        Ok(())
    }
}

/// The approval gate records what it asks and what it was told as the session's events.
impl keel_approval::Events for Emitter {
    type Error = EngineError;

    async fn emit(&self, kind: EventKind) -> Result<(), EngineError> {
        Emitter::emit(self, kind).await.map(|_| ())
    }
}
