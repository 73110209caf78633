//! The constitution's forbidden calls as a hook: a call the repository's
//! `.keel/constitution.json` forbids is refused before it runs (`keel_knowledge::constitution`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures::future::BoxFuture;
use keel_protocol::ToolCall;

use crate::hooks::{Hook, HookAction, HookContext};
use keel_knowledge::constitution::Constitution;

pub(crate) struct ConstitutionHook {
    constitution: Arc<Constitution>,
    /// The workspace: a command's scripts are read to see what it runs.
    root: PathBuf,
}

impl ConstitutionHook {
    pub(crate) fn new(constitution: Arc<Constitution>, root: &Path) -> Self {
        Self {
            constitution,
            root: root.to_path_buf(),
        }
    }
}

impl Hook for ConstitutionHook {
    fn name(&self) -> &str {
        "constitution"
    }

    fn before_tool<'a>(
        &'a self,
        _cx: &'a HookContext,
        call: &'a ToolCall,
    ) -> BoxFuture<'a, HookAction> {
        let verdict = match self.constitution.check_call_in(call, Some(&self.root)) {
            Some(why) => HookAction::Deny(why),
            None => HookAction::Continue,
        };
        Box::pin(async move { verdict })
    }
}
