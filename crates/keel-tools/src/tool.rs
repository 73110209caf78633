//! The tool trait, its outcome types, and the typed-arguments layer most tools use.

use std::future::Future;

use futures::future::BoxFuture;
use keel_protocol::{BlockerRequest, Excerpt, ToolDetails};
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::{PathError, ToolContext, Workspace};

/// What a tool may do to the world. Phase policy, snapshots and the sandbox key off this.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ToolEffect {
    /// Reads files or state; changes nothing.
    ReadOnly,
    /// Creates, edits or deletes files in the workspace.
    WritesFiles,
    /// Runs programs (which may do anything the sandbox allows).
    RunsCommands,
    /// Changes only the agent's own state (plan, phase, questions to the user).
    Control,
    /// Not known: an external (MCP) tool that may do anything. Approval treats it as risky,
    /// phases that forbid writing or running commands forbid it too.
    Unknown,
}

/// A tool's successful result.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolOutput {
    /// What the model sees.
    pub content: String,
    /// What the call did, typed: the files it changed (tools with
    /// [`ToolEffect::WritesFiles`] must set them on success) and their diff, a command's exit
    /// code, a question for the user (a [`ToolEffect::Control`] tool like `ask_user`; the run
    /// pauses until answered). The loop, its guardrails and the renderers read these.
    pub details: ToolDetails,
    /// Free-form extras for UIs and events (a match level, a sandbox name); never sent to the
    /// model and never read by the loop.
    pub metadata: Option<Value>,
}

impl ToolOutput {
    /// Output with text only.
    pub fn text(content: impl Into<String>) -> Self {
        Self {
            content: content.into(),
            ..Self::default()
        }
    }

    /// Adds metadata.
    pub fn with_metadata(mut self, metadata: Value) -> Self {
        self.metadata = Some(metadata);
        self
    }

    /// Records the files the call created, changed or deleted.
    pub fn with_files(mut self, files: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.details.files = files.into_iter().map(Into::into).collect();
        self
    }

    /// Records a unified diff of the change.
    pub fn with_diff(mut self, diff: impl Into<String>) -> Self {
        self.details.diff = Some(diff.into());
        self
    }

    /// Records the exit code of the command the call ran.
    pub fn with_exit_code(mut self, code: Option<i32>) -> Self {
        self.details.exit_code = code;
        self
    }

    /// Records the start of the file the call created, for a person to see (bounded).
    pub fn with_created(mut self, content: &str) -> Self {
        self.details.created = Some(Excerpt::head(content));
        self
    }

    /// Records the end of the output of the command the call ran, for a person to see
    /// (bounded).
    pub fn with_output_tail(mut self, output: &str) -> Self {
        self.details.output_tail = Some(Excerpt::tail(output));
        self
    }

    /// Asks the engine to put `question` to the user.
    pub fn with_blocker(mut self, question: impl Into<String>, context: Option<String>) -> Self {
        self.details.blocker = Some(BlockerRequest {
            question: question.into(),
            context,
        });
        self
    }
}

/// A tool failure.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ToolError {
    /// Something the model did wrong or should know (bad path, missing file, bad arguments).
    /// Returned to the model as an error result; the loop continues.
    #[error("{0}")]
    Model(String),
    /// The call ran and its result is a failure (the tests failed, the test command could not
    /// run to a result): an error result for the model and ✗ for a person, like [`Model`],
    /// that keeps what the call did — exit code, output tail, counts in `metadata` — for the
    /// renderers and events.
    ///
    /// [`Model`]: ToolError::Model
    #[error("{}", .0.content)]
    Failed(Box<ToolOutput>),
    /// Something the model cannot fix (the store failed, the disk is full). Stops the turn.
    #[error("{0}")]
    Fatal(String),
}

impl ToolError {
    /// A message for the model.
    pub fn model(msg: impl Into<String>) -> Self {
        ToolError::Model(msg.into())
    }

    /// A failed result that keeps its typed details (see [`ToolError::Failed`]).
    pub fn failed(output: ToolOutput) -> Self {
        ToolError::Failed(Box::new(output))
    }
}

impl From<PathError> for ToolError {
    fn from(e: PathError) -> Self {
        ToolError::Model(e.to_string())
    }
}

/// A tool the model can call. Object-safe so built-in and external (MCP) tools share one path.
pub trait Tool: Send + Sync {
    /// The name the model calls it by (`snake_case`, unique in a registry).
    fn name(&self) -> &str;
    /// One or two sentences: what it does and when to use it.
    fn description(&self) -> &str;
    /// JSON Schema of the arguments object.
    fn input_schema(&self) -> Value;
    /// What the tool may change.
    fn effect(&self) -> ToolEffect;
    /// Runs the tool.
    fn execute<'a>(
        &'a self,
        args: Value,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>>;
    /// The command line this call would run, resolved in `workspace` (the project's test
    /// script, not just `run_tests`), for the approval gate and the phase policy to judge
    /// before it runs. `None`: the tool runs no command of its own choosing (`run_command`'s
    /// command is its `command` argument).
    fn planned_command(&self, _args: &Value, _workspace: &Workspace) -> Option<PlannedCommand> {
        None
    }
}

/// A command a tool call would run ([`Tool::planned_command`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedCommand {
    /// The bash command line.
    pub command: String,
    /// Where it runs (absolute, inside the workspace).
    pub cwd: std::path::PathBuf,
}

/// A tool with typed arguments: the schema is derived from `Args` and argument errors name the
/// offending field. Every `TypedTool` is a [`Tool`].
pub trait TypedTool: Send + Sync + 'static {
    /// The argument type; `#[serde(deny_unknown_fields)]` recommended so typos are reported.
    type Args: DeserializeOwned + JsonSchema + Send;
    /// The tool's name.
    const NAME: &'static str;
    /// What it does and when to use it.
    fn description(&self) -> &str;
    /// What it may change.
    fn effect(&self) -> ToolEffect;
    /// Runs the tool with parsed arguments.
    fn run(
        &self,
        args: Self::Args,
        ctx: &ToolContext,
    ) -> impl Future<Output = Result<ToolOutput, ToolError>> + Send;
    /// See [`Tool::planned_command`].
    fn planned_command(&self, _args: &Value, _workspace: &Workspace) -> Option<PlannedCommand> {
        None
    }
}

impl<T: TypedTool> Tool for T {
    fn name(&self) -> &str {
        T::NAME
    }

    fn description(&self) -> &str {
        TypedTool::description(self)
    }

    fn input_schema(&self) -> Value {
        crate::schema_for::<T::Args>()
    }

    fn effect(&self) -> ToolEffect {
        TypedTool::effect(self)
    }

    fn execute<'a>(
        &'a self,
        args: Value,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(async move {
            let parsed = parse_args::<T::Args>(T::NAME, args)?;
            self.run(parsed, ctx).await
        })
    }

    fn planned_command(&self, args: &Value, workspace: &Workspace) -> Option<PlannedCommand> {
        TypedTool::planned_command(self, args, workspace)
    }
}

/// Parses tool arguments, naming the offending field on failure, e.g.
/// "invalid arguments for read_file: start_line: invalid type: string \"x\", expected u32".
pub fn parse_args<A: DeserializeOwned>(tool: &str, args: Value) -> Result<A, ToolError> {
    let args = match args {
        // Some models send `null` or nothing for tools without parameters.
        Value::Null => Value::Object(Default::default()),
        other => other,
    };
    if !args.is_object() {
        return Err(ToolError::model(format!(
            "invalid arguments for {tool}: expected a JSON object of named arguments, got {args}"
        )));
    }
    serde_path_to_error::deserialize::<_, A>(args).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner().to_string();
        let msg = if path.is_empty() || path == "." {
            format!("invalid arguments for {tool}: {inner}")
        } else {
            format!("invalid arguments for {tool}: field `{path}`: {inner}")
        };
        ToolError::Model(msg)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Args {
        path: String,
        start_line: Option<u32>,
    }

    fn err(v: Value) -> String {
        match parse_args::<Args>("read_file", v) {
            Err(ToolError::Model(m)) => m,
            other => panic!("expected a model error, got {other:?}"),
        }
    }

    #[test]
    fn argument_errors_name_the_field() {
        let m = err(serde_json::json!({"path": "a", "start_line": "ten"}));
        assert!(m.contains("`start_line`"), "{m}");
        assert!(m.contains("invalid type"), "{m}");
        let m = err(serde_json::json!({}));
        assert!(m.contains("missing field `path`"), "{m}");
        let m = err(serde_json::json!({"path": 3}));
        assert!(m.contains("`path`"), "{m}");
        let m = err(serde_json::json!({"file": "a", "path": "b"}));
        assert!(m.contains("unknown field `file`"), "{m}");
        let m = err(serde_json::json!(["a"]));
        assert!(m.contains("JSON object"), "{m}");
    }
}
