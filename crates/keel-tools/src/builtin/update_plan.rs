//! `update_plan`: the checklist the model keeps for the task. Each call sends the whole list;
//! the result's metadata `{"plan": {"steps": [{step, status}], "explanation"}}` is stored with
//! the session's events and rendered by the front ends.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{ToolContext, ToolEffect, ToolError, ToolOutput, TypedTool};

/// Most steps in one plan.
const MAX_STEPS: usize = 50;

/// Where a step stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StepStatus {
    Pending,
    InProgress,
    Done,
}

impl StepStatus {
    fn mark(self) -> &'static str {
        match self {
            StepStatus::Pending => "[ ]",
            StepStatus::InProgress => "[>]",
            StepStatus::Done => "[x]",
        }
    }
}

/// One checklist item.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PlanStep {
    /// What to do, in a few words.
    pub step: String,
    pub status: StepStatus,
}

/// Arguments of `update_plan`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdatePlanArgs {
    /// The whole checklist, in order; at most one step in_progress.
    pub steps: Vec<PlanStep>,
    /// Why the plan changed, if it did.
    #[serde(default)]
    pub explanation: Option<String>,
}

/// Records the model's checklist.
#[derive(Debug, Clone, Copy, Default)]
pub struct UpdatePlan;

impl TypedTool for UpdatePlan {
    type Args = UpdatePlanArgs;
    const NAME: &'static str = "update_plan";

    fn description(&self) -> &str {
        "Keep a checklist of the task's steps (pending / in_progress / done) that the user sees. Send the whole list each time."
    }

    fn effect(&self) -> ToolEffect {
        ToolEffect::Control
    }

    async fn run(&self, args: UpdatePlanArgs, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        if args.steps.is_empty() {
            return Err(ToolError::model(
                "update_plan needs at least one step: {\"steps\": [{\"step\": \"…\", \"status\": \"pending\"}]}",
            ));
        }
        if args.steps.len() > MAX_STEPS {
            return Err(ToolError::model(format!(
                "a plan has at most {MAX_STEPS} steps; merge small ones"
            )));
        }
        if let Some(i) = args.steps.iter().position(|s| s.step.trim().is_empty()) {
            return Err(ToolError::model(format!("step {} has no text", i + 1)));
        }
        let active = args
            .steps
            .iter()
            .filter(|s| s.status == StepStatus::InProgress)
            .count();
        if active > 1 {
            return Err(ToolError::model(format!(
                "{active} steps are in_progress; keep exactly one in progress at a time"
            )));
        }
        let done = args
            .steps
            .iter()
            .filter(|s| s.status == StepStatus::Done)
            .count();
        let mut content = format!("Plan updated ({done}/{} done):", args.steps.len());
        for s in &args.steps {
            content.push_str(&format!("\n{} {}", s.status.mark(), s.step.trim()));
        }
        let explanation = args
            .explanation
            .as_deref()
            .map(str::trim)
            .filter(|e| !e.is_empty());
        Ok(ToolOutput::text(content).with_metadata(serde_json::json!({
            "plan": {"steps": args.steps, "explanation": explanation}
        })))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Tool;
    use crate::builtin::testutil::Fixture;
    use serde_json::json;

    #[tokio::test]
    async fn the_checklist_is_rendered_and_kept_in_metadata() {
        let f = Fixture::new();
        let out = UpdatePlan
            .execute(
                json!({"steps": [
                    {"step": "write the test", "status": "done"},
                    {"step": "fix the bug", "status": "in_progress"},
                    {"step": "run the suite", "status": "pending"}
                ]}),
                &f.ctx,
            )
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            out.content,
            "Plan updated (1/3 done):\n[x] write the test\n[>] fix the bug\n[ ] run the suite"
        );
        let meta = out.metadata.unwrap_or_default();
        assert_eq!(meta["plan"]["steps"][1]["status"], "in_progress");
    }

    #[tokio::test]
    async fn bad_plans_are_explained() {
        let f = Fixture::new();
        let two = f
            .err(
                &UpdatePlan,
                json!({"steps": [{"step": "a", "status": "in_progress"}, {"step": "b", "status": "in_progress"}]}),
            )
            .await;
        assert!(two.contains("exactly one in progress"), "{two}");
        assert!(
            f.err(&UpdatePlan, json!({"steps": []}))
                .await
                .contains("at least one")
        );
        let bad = f
            .err(
                &UpdatePlan,
                json!({"steps": [{"step": "a", "status": "finished"}]}),
            )
            .await;
        assert!(bad.contains("status"), "{bad}");
    }
}
