//! Keel's shared vocabulary: conversation messages and their content blocks, tool calls and
//! results, token usage, error codes, the event stream and the operations front ends send.
//!
//! Every other crate speaks these types. This crate holds data only: serde, no I/O, no async,
//! no policy. The JSON shapes here are a public contract (`keel run --json`, the server, stored
//! transcripts): rename nothing, add with `#[serde(default)]`.

mod details;
mod event;
mod hash;
mod message;
mod op;

pub use details::{BlockerRequest, Excerpt, ToolDetails, Truncation};
pub use event::{
    ChildUsage, DeltaChannel, ErrorCode, ErrorInfo, Event, EventKind, SessionStatus, files_written,
};
pub use hash::fnv1a;
pub use message::{
    ContentBlock, Message, Role, ToolCall, ToolResult, ToolSpec, Usage, canonical_args,
};
pub use op::{ApprovalScope, Attachment, Op, Submission};
