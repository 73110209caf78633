//! Tools that join a registry after it was built: an MCP server's tools arrive when the
//! server, started in the background, is ready. The registry asks its [`LateTools`] source on
//! every lookup, so a tool is callable (and `tool_search` finds it) from the moment it arrives,
//! in the session's registry and in every clone of it (a subagent's).
//!
//! Late tools never change the first-turn catalog's bytes by arriving: `tool_search`'s
//! description names only the registry's own deferred tools, and a late tool is listed only
//! when its source says it is active — a source with active tools is waited for
//! ([`LateTools::settle_listed`]) before a run computes its catalog.

use std::sync::Arc;

use futures::future::BoxFuture;

use crate::Tool;
use crate::catalog::ToolState;

/// A tool with the catalog state it arrived in.
pub type LateTool = (Arc<dyn Tool>, ToolState);

/// A source of tools that arrive after the registry was built.
pub trait LateTools: Send + Sync {
    /// Every tool that has arrived so far. A tool, once arrived, stays (same name, same state).
    fn arrived(&self) -> Vec<&LateTool>;

    /// The arrived tool `name`.
    fn find(&self, name: &str) -> Option<&LateTool> {
        self.arrived().into_iter().find(|(t, _)| t.name() == name)
    }

    /// Waits until the source that would provide `name` has settled (its tools arrived or it
    /// failed), bounded by the source's own start-up limit. Returns at once for a name that is
    /// not this source's or whose source has settled.
    fn wait_for<'a>(&'a self, name: &'a str) -> BoxFuture<'a, ()>;

    /// Waits (bounded) until every source whose tools are listed in the first-turn catalog has
    /// settled, so the catalog a run computes does not depend on timing.
    fn settle_listed(&self) -> BoxFuture<'_, ()>;

    /// Waits (bounded) until every source has settled.
    fn settle_all(&self) -> BoxFuture<'_, ()>;

    /// Why `name`, not (yet) arrived, cannot be called — e.g. its server failed to start —
    /// for the model; `None` when the name is not this source's.
    fn missing(&self, name: &str) -> Option<String>;

    /// A note for `tool_search` results about tools still arriving, or that will not (their
    /// server failed).
    fn pending(&self) -> Option<String>;
}
