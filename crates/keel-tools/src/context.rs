//! What a tool gets besides its arguments: the workspace, session file state, cancellation.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use tokio_util::sync::CancellationToken;

use crate::Workspace;
use crate::sandbox::SandboxPolicy;

/// Everything a tool may use while it runs. Cheap to clone; clones share session state.
#[derive(Debug, Clone)]
pub struct ToolContext {
    pub workspace: Workspace,
    /// Files the session has read (or written), to refuse edits to unread or stale files.
    pub reads: Arc<ReadTracker>,
    /// Fires when the user cancels the turn; long-running tools must stop promptly.
    pub cancel: CancellationToken,
    /// Budget in characters for secondary parts of a result (an edit's diff). Command and git
    /// output is returned whole up to [`crate::text::OUTPUT_CAP_CHARS`]; the engine fits each
    /// result to `agent.max_output_chars` and keeps the rest behind a handle.
    pub max_output_chars: usize,
    /// Where commands run by tools may write. Read-only phases set
    /// [`SandboxPolicy::ReadOnly`]: `run_command` then refuses commands the analyser does not
    /// judge read-only and runs the rest under the read-only kernel sandbox.
    pub sandbox: SandboxPolicy,
    /// A person approved this call as it is: what its command installs into a workspace
    /// virtual environment stays ([`crate::shell::exec::ExecRequest::approved`], which the
    /// runners set only when that approval covered writes to installed code: R9-13).
    pub approved: bool,
}

impl ToolContext {
    /// A context for `workspace` with fresh session state and the default output budget.
    pub fn new(workspace: Workspace) -> Self {
        Self {
            workspace,
            reads: Arc::new(ReadTracker::default()),
            cancel: CancellationToken::new(),
            max_output_chars: 30_000,
            sandbox: SandboxPolicy::default(),
            approved: false,
        }
    }
}

/// The state of a file when the session last saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileStamp {
    pub len: u64,
    pub modified: Option<SystemTime>,
    /// FNV-1a 64 of the content.
    pub hash: u64,
}

impl FileStamp {
    /// Stamps content read from (or written to) `path`.
    pub fn of(path: &Path, content: &[u8]) -> Self {
        let modified = std::fs::metadata(path).and_then(|m| m.modified()).ok();
        Self {
            len: content.len() as u64,
            modified,
            hash: fnv1a(content),
        }
    }
}

/// FNV-1a, 64-bit (the one content hash, from keel-protocol).
pub use keel_protocol::fnv1a;

/// Which files the session has seen, and in what state.
#[derive(Debug, Default)]
pub struct ReadTracker {
    files: Mutex<HashMap<PathBuf, FileStamp>>,
}

impl ReadTracker {
    /// Records that the session saw `path` with this content (after a read or its own write).
    pub fn record(&self, path: &Path, content: &[u8]) {
        let stamp = FileStamp::of(path, content);
        if let Ok(mut files) = self.files.lock() {
            files.insert(path.to_path_buf(), stamp);
        }
    }

    /// The stamp recorded for `path`, if the session has seen it.
    pub fn get(&self, path: &Path) -> Option<FileStamp> {
        self.files.lock().ok().and_then(|f| f.get(path).copied())
    }

    /// Forgets `path` (after the session deletes or moves it).
    pub fn forget(&self, path: &Path) {
        if let Ok(mut files) = self.files.lock() {
            files.remove(path);
        }
    }
}
