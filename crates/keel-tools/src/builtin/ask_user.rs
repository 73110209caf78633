//! `ask_user`: the model asks the user a question it cannot answer itself.
//!
//! The tool only records the question: its output carries the typed blocker request
//! (`details.blocker`: question, context) and the engine decides what happens — in an
//! interactive session the user answers at once; otherwise the run pauses as `blocked` and the
//! answer arrives when the session resumes.

use schemars::JsonSchema;
use serde::Deserialize;

use crate::{ToolContext, ToolEffect, ToolError, ToolOutput, TypedTool};

/// Longest question accepted, in characters.
const MAX_QUESTION_CHARS: usize = 2_000;

/// Arguments of `ask_user`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AskUserArgs {
    /// One specific question the user can answer.
    pub question: String,
    /// What you tried and the options you see.
    pub context: Option<String>,
}

/// Puts a question to the user.
#[derive(Debug, Clone, Copy, Default)]
pub struct AskUser;

impl TypedTool for AskUser {
    type Args = AskUserArgs;
    const NAME: &'static str = "ask_user";

    fn description(&self) -> &str {
        "Ask the user a question when you cannot go on without their decision or information (missing credentials, ambiguous requirements). The run pauses until they answer. Never ask what you can find out with the other tools."
    }

    fn effect(&self) -> ToolEffect {
        ToolEffect::Control
    }

    async fn run(&self, args: AskUserArgs, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let question = args.question.trim();
        if question.is_empty() {
            return Err(ToolError::model(
                "ask_user needs a question: say exactly what you need the user to decide or provide",
            ));
        }
        if question.chars().count() > MAX_QUESTION_CHARS {
            return Err(ToolError::model(format!(
                "the question is longer than {MAX_QUESTION_CHARS} characters; ask one short, specific question and put background in `context`"
            )));
        }
        let context = args
            .context
            .as_deref()
            .map(str::trim)
            .filter(|c| !c.is_empty());
        Ok(
            ToolOutput::text("Question recorded for the user; the run pauses until they answer.")
                .with_blocker(question, context.map(str::to_string)),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Tool;
    use crate::builtin::testutil::Fixture;
    use serde_json::json;

    #[tokio::test]
    async fn records_the_question_as_a_typed_blocker_request() {
        let f = Fixture::new();
        let out = AskUser
            .execute(
                json!({"question": " Which database? ", "context": "Both are configured."}),
                &f.ctx,
            )
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let blocker = out.details.blocker.unwrap_or_default();
        assert_eq!(blocker.question, "Which database?");
        assert_eq!(blocker.context.as_deref(), Some("Both are configured."));
        assert_eq!(Tool::effect(&AskUser), ToolEffect::Control);
    }

    #[tokio::test]
    async fn an_empty_question_is_refused() {
        let f = Fixture::new();
        let err = f.err(&AskUser, json!({"question": "  "})).await;
        assert!(err.contains("needs a question"), "{err}");
    }
}
