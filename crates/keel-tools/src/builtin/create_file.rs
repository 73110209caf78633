//! `create_file`: a new file with the given content.

use schemars::JsonSchema;
use serde::Deserialize;

use super::{blocking, human_size};
use crate::fs::{WriteMode, atomic_write};
use crate::{ToolContext, ToolEffect, ToolError, ToolOutput, TypedTool};

/// Arguments of `create_file`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateFileArgs {
    /// New file path relative to the workspace root; parent directories are created.
    pub path: String,
    /// The complete file content.
    pub content: String,
}

/// Creates a new file; refuses to overwrite.
#[derive(Debug, Clone, Copy, Default)]
pub struct CreateFile;

impl TypedTool for CreateFile {
    type Args = CreateFileArgs;
    const NAME: &'static str = "create_file";

    fn description(&self) -> &str {
        "Create a new file with the given content. Fails if the file exists: use edit_file to change existing files."
    }

    fn effect(&self) -> ToolEffect {
        ToolEffect::WritesFiles
    }

    async fn run(&self, args: CreateFileArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let path = ctx.workspace.resolve_writable(&args.path)?;
        let rel = ctx.workspace.relative(&path);
        if rel == "." {
            return Err(ToolError::model(
                "create_file needs a file path, not the workspace root",
            ));
        }
        let reads = ctx.reads.clone();
        blocking(move || {
            if std::fs::symlink_metadata(&path).is_ok() {
                let what = if path.is_dir() {
                    "a directory"
                } else {
                    "a file"
                };
                return Err(ToolError::model(format!(
                    "`{rel}` already exists as {what}; use edit_file to change an existing file"
                )));
            }
            let bytes = args.content.as_bytes();
            atomic_write(&path, bytes, WriteMode::CreateNew).map_err(|e| {
                if e.kind() == std::io::ErrorKind::AlreadyExists {
                    ToolError::model(format!(
                        "`{rel}` already exists; use edit_file to change an existing file"
                    ))
                } else {
                    ToolError::model(format!("cannot create `{rel}`: {e}"))
                }
            })?;
            reads.record(&path, bytes);
            let lines = crate::text::count(args.content.lines().count(), "line", "lines");
            Ok(ToolOutput::text(format!(
                "Created `{rel}` ({lines}, {}).",
                human_size(bytes.len() as u64)
            ))
            .with_files([rel])
            .with_metadata(serde_json::json!({"created": true})))
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builtin::testutil::Fixture;
    use serde_json::json;

    #[tokio::test]
    async fn creates_with_parents_and_refuses_existing() {
        let f = Fixture::new();
        let out = f
            .ok(
                &CreateFile,
                json!({"path": "a/b/new.py", "content": "print(1)\n"}),
            )
            .await;
        assert!(out.contains("Created `a/b/new.py` (1 line, 9 B)"), "{out}");
        let on_disk = std::fs::read_to_string(f.dir.path().join("a/b/new.py")).unwrap_or_default();
        assert_eq!(on_disk, "print(1)\n");
        let err = f
            .err(&CreateFile, json!({"path": "a/b/new.py", "content": "x"}))
            .await;
        assert!(err.contains("edit_file"), "{err}");
        assert_eq!(
            std::fs::read_to_string(f.dir.path().join("a/b/new.py")).unwrap_or_default(),
            "print(1)\n",
            "existing content untouched"
        );
    }

    #[tokio::test]
    async fn refuses_escapes() {
        let f = Fixture::new();
        let err = f
            .err(&CreateFile, json!({"path": "../evil.txt", "content": "x"}))
            .await;
        assert!(err.contains("`..`"), "{err}");
        let err = f
            .err(
                &CreateFile,
                json!({"path": "/tmp/evil.txt", "content": "x"}),
            )
            .await;
        assert!(err.contains("absolute"), "{err}");
        let err = f.err(&CreateFile, json!({"path": "x.txt"})).await;
        assert!(err.contains("missing field `content`"), "{err}");
    }
}
