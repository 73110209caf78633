//! The session runtime: one builder that turns configuration and overrides into an engine,
//! and one handle that owns a live session — operations in ([`keel_protocol::Op`]), events
//! out. `keel run`, `keel serve` (REST, WebSocket, SSE) and any later front end drive
//! sessions only through it.

mod builder;
mod handle;
mod undo;

pub use builder::{ConfigAdjust, Providers, SessionBuilder, SessionOverrides, Warn};
pub use handle::{OpAck, OpError, SessionHandle, TurnEnd, TurnResult, TurnTicket};
pub use undo::{UndoError, undo_session};
