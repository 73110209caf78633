//! `apply_patch`: a multi-file patch in the "*** Begin Patch" envelope, validated whole before
//! any file is written, then written all or nothing.

use schemars::JsonSchema;
use serde::Deserialize;

use super::blocking;
use crate::fs::atomic_write_all;
use crate::patch::{parse, plan, summarize};
use crate::{ToolContext, ToolEffect, ToolError, ToolOutput, TypedTool};

/// Arguments of `apply_patch`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApplyPatchArgs {
    /// `*** Begin Patch` … `*** End Patch` with `*** Add File:`, `*** Update File:` (`@@`
    /// hunks of ` `/`-`/`+` lines, optional `*** Move to:`) and `*** Delete File:` sections.
    pub patch: String,
}

/// Applies a multi-file patch.
#[derive(Debug, Clone, Copy, Default)]
pub struct ApplyPatch;

impl TypedTool for ApplyPatch {
    type Args = ApplyPatchArgs;
    const NAME: &'static str = "apply_patch";

    fn description(&self) -> &str {
        "Add, update, move and delete files with one patch; nothing is written unless every hunk applies."
    }

    fn effect(&self) -> ToolEffect {
        ToolEffect::WritesFiles
    }

    async fn run(&self, args: ApplyPatchArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let workspace = ctx.workspace.clone();
        let reads = ctx.reads.clone();
        let budget = ctx.max_output_chars;
        blocking(move || {
            let unchanged = "No file was changed.";
            let patch =
                parse(&args.patch).map_err(|e| ToolError::model(format!("{e}. {unchanged}")))?;
            let plan = plan(&patch, &workspace, &reads)
                .map_err(|e| ToolError::model(format!("{e}\n{unchanged}")))?;
            atomic_write_all(&plan.changes).map_err(|e| {
                ToolError::model(format!(
                    "cannot write `{}`: {}. {unchanged}",
                    workspace.relative(&e.path),
                    e.source
                ))
            })?;
            for (path, bytes) in &plan.written {
                reads.record(path, bytes);
            }
            for path in &plan.removed {
                reads.forget(path);
            }
            let mut content = summarize(&plan);
            content.push_str(&crate::text::truncate_middle(&plan.diff, budget));
            let levels: Vec<&str> = plan.levels.iter().map(|l| l.name()).collect();
            let worst = plan
                .levels
                .iter()
                .max()
                .map(|l| l.name())
                .unwrap_or("exact");
            Ok(ToolOutput::text(content)
                .with_files(plan.paths)
                .with_diff(plan.diff)
                .with_metadata(serde_json::json!({
                    "match_level": worst,
                    "match_levels": levels,
                })))
        })
        .await
    }
}
