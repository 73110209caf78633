//! The built-in tools.

mod apply_patch;
mod ask_user;
mod codebase_search;
mod create_file;
mod edit_file;
mod git;
mod grep;
mod insert_lines;
mod list_files;
mod read_file;
mod update_plan;

pub use apply_patch::ApplyPatch;
pub use ask_user::AskUser;
pub use codebase_search::{CodebaseSearch, CodebaseSearchArgs};
pub use create_file::CreateFile;
pub use edit_file::EditFile;
pub use git::{GitDiff, GitStatus};
pub use grep::{Grep, GrepArgs};
pub use insert_lines::InsertLines;
pub use list_files::ListFiles;
pub use read_file::{LARGE_FILE_LINES, ReadFile};
pub use update_plan::{PlanStep, StepStatus, UpdatePlan};

use crate::ToolRegistry;

/// Registers the built-in tools every session has, each in its catalog state
/// ([`crate::catalog::default_state`]): `git_status`, `git_diff`, `update_plan` and `ask_user`
/// are deferred, `insert_lines` is hidden. `codebase_search` and `grep` use the default index
/// settings; an engine replaces them with configured ones (same names).
pub fn register_defaults(registry: &mut ToolRegistry) {
    registry
        .register(ListFiles)
        .register(ReadFile)
        .register(CreateFile)
        .register(AskUser)
        .register(EditFile::default())
        .register(ApplyPatch)
        .register(CodebaseSearch::default())
        .register(Grep::default())
        .register(crate::catalog::ToolSearch)
        .register(GitStatus)
        .register(GitDiff)
        .register(UpdatePlan)
        .register_with_state(
            std::sync::Arc::new(InsertLines),
            crate::catalog::ToolState::Hidden,
        );
}

/// Human-readable byte size (`512 B`, `1.5 KB`, `3.2 MB`): keel-fs's, one wording everywhere.
pub(crate) use keel_fs::human_size;

/// Runs blocking file-system work off the async runtime.
pub(crate) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, crate::ToolError> + Send + 'static,
) -> Result<T, crate::ToolError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| crate::ToolError::Fatal(format!("a tool task failed: {e}")))?
}

#[cfg(test)]
pub(crate) mod testutil {
    use crate::{Tool, ToolContext, ToolError, Workspace};

    pub struct Fixture {
        pub dir: tempfile::TempDir,
        pub ctx: ToolContext,
    }

    impl Fixture {
        pub fn new() -> Self {
            let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
            let ctx =
                ToolContext::new(Workspace::new(dir.path()).unwrap_or_else(|e| panic!("{e}")));
            Self { dir, ctx }
        }

        pub fn write(&self, rel: &str, content: &str) {
            let p = self.dir.path().join(rel);
            if let Some(parent) = p.parent() {
                std::fs::create_dir_all(parent).unwrap_or_else(|e| panic!("{e}"));
            }
            std::fs::write(p, content).unwrap_or_else(|e| panic!("{e}"));
        }

        pub async fn ok(&self, tool: &dyn Tool, args: serde_json::Value) -> String {
            match tool.execute(args, &self.ctx).await {
                Ok(out) => out.content,
                Err(e) => panic!("tool failed: {e}"),
            }
        }

        pub async fn err(&self, tool: &dyn Tool, args: serde_json::Value) -> String {
            match tool.execute(args, &self.ctx).await {
                Ok(out) => panic!("expected an error, got: {}", out.content),
                Err(ToolError::Model(m)) => m,
                Err(ToolError::Failed(out)) => out.content,
                Err(ToolError::Fatal(m)) => panic!("expected a model error, got fatal: {m}"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(human_size(12), "12 B");
        assert_eq!(human_size(1536), "1.5 KB");
        assert_eq!(human_size(5 * 1024 * 1024), "5.0 MB");
    }
}
