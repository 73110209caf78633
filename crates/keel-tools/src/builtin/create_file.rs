//! `create_file`: a new file with the given content.

use schemars::JsonSchema;
use serde::Deserialize;

use super::{blocking, human_size};
use crate::fs::WriteMode;
use crate::{ToolContext, ToolEffect, ToolError, ToolOutput, TypedTool};

/// Arguments of `create_file`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateFileArgs {
    /// New file path relative to the workspace root; parent directories are created.
    pub path: String,
    /// The complete file content.
    pub content: String,
    /// Replace an existing file (one you have read) with `content`.
    pub overwrite: Option<bool>,
}

/// Creates a new file; refuses to overwrite.
#[derive(Debug, Clone, Copy, Default)]
pub struct CreateFile;

impl TypedTool for CreateFile {
    type Args = CreateFileArgs;
    const NAME: &'static str = "create_file";

    fn description(&self) -> &str {
        "Create a new file with the given content. Fails if the file exists (use edit_file to change it) unless `overwrite` is true."
    }

    fn effect(&self) -> ToolEffect {
        ToolEffect::WritesFiles
    }

    async fn run(&self, args: CreateFileArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let target = ctx.workspace.locate_writable(&args.path)?;
        let rel = target.rel_string();
        if target.is_root() {
            return Err(ToolError::model(
                "create_file needs a file path, not the workspace root",
            ));
        }
        let reads = ctx.reads.clone();
        let budget = ctx.max_output_chars;
        let mut args = args;
        // A whole file a model wrapped in a code fence (Aider's whole-file replies): the
        // content inside, said in the result.
        let unwrapped = unwrap_fence(&args.content, &rel).map(|inner| {
            args.content = inner;
            " The ``` fence wrapped around `content` (and the file-name line above it) was left out."
        });
        let note = unwrapped.unwrap_or("");
        blocking(move || {
            let exists = target
                .info()
                .map_err(|e| ToolError::model(format!("cannot create `{rel}`: {e}")))?;
            if let Some(info) = exists {
                // `overwrite: true`, or an existing empty file: filling it loses nothing.
                let empty_file = info.kind == crate::fs::FileKind::File && info.len == 0;
                if empty_file
                    || (args.overwrite == Some(true) && info.kind != crate::fs::FileKind::Dir)
                {
                    return overwrite(&target, &rel, &args.content, &reads, budget).map(
                        |mut out| {
                            if let Some((head, rest)) = out.content.split_once('\n') {
                                out.content = format!("{head}{note}\n{rest}");
                            }
                            out
                        },
                    );
                }
                let what = if info.kind == crate::fs::FileKind::Dir {
                    "a directory"
                } else {
                    "a file"
                };
                return Err(ToolError::model(format!(
                    "`{rel}` already exists as {what}; use edit_file to change an existing file, or set `overwrite: true` to replace its whole content"
                )));
            }
            let bytes = args.content.as_bytes();
            target
                .write_atomic(bytes, WriteMode::CreateNew, None)
                .map_err(|e| {
                    if e.kind() == std::io::ErrorKind::AlreadyExists {
                        ToolError::model(format!(
                            "`{rel}` already exists; use edit_file to change an existing file"
                        ))
                    } else {
                        ToolError::model(format!("cannot create `{rel}`: {e}"))
                    }
                })?;
            reads.record(&target.abs(), bytes);
            let lines = crate::text::count(args.content.lines().count(), "line", "lines");
            Ok(ToolOutput::text(format!(
                "Created `{rel}` ({lines}, {}).{note}",
                human_size(bytes.len() as u64)
            ))
            .with_files([rel])
            .with_created(&args.content)
            .with_metadata(serde_json::json!({"created": true})))
        })
        .await
    }
}

/// Files in which a fence line may be meant as content (documentation, plain text, no
/// extension): never unwrapped.
const FENCED_ON_PURPOSE: &[&str] = &[
    "md", "markdown", "mdx", "mdc", "rst", "txt", "text", "adoc", "asciidoc", "org", "tex", "wiki",
];

/// `content` wrapped whole in one code fence — `` ```lang `` … `` ``` `` — optionally below a
/// line that is just the file's name: the lines inside (ending in a newline). `None` when it
/// is not so wrapped, when the fence lines could be two blocks of one file, or for a file in
/// which a fence may be content ([`FENCED_ON_PURPOSE`]).
fn unwrap_fence(content: &str, rel: &str) -> Option<String> {
    let file = std::path::Path::new(rel);
    let ext = file.extension()?.to_str()?.to_ascii_lowercase();
    if FENCED_ON_PURPOSE.contains(&ext.as_str()) {
        return None;
    }
    let name = file.file_name()?.to_str()?;
    let mut lines: Vec<&str> = content.lines().collect();
    while lines.last().is_some_and(|l| l.trim().is_empty()) {
        lines.pop();
    }
    let names_the_file = |l: &str| {
        let n = l
            .trim()
            .trim_end_matches(':')
            .trim_start_matches('#')
            .trim();
        let n = n.trim_matches(|c| c == '`' || c == '*');
        n == rel || n == name || n.ends_with(&format!("/{rel}"))
    };
    if lines.first().is_some_and(|l| names_the_file(l)) {
        lines.remove(0);
    }
    let (first, last) = (lines.first()?.trim_start(), lines.last()?.trim());
    let mark = first.chars().next().filter(|c| *c == '`' || *c == '~')?;
    let run = first.chars().take_while(|c| *c == mark).count();
    let bare_fence = |l: &str| {
        let l = l.trim();
        l.chars().count() >= run && l.chars().all(|c| c == mark)
    };
    if run < 3 || lines.len() < 2 || !bare_fence(last) {
        return None;
    }
    let inner = &lines[1..lines.len() - 1];
    // Another bare fence inside: the first and last lines belong to different blocks.
    if inner.iter().any(|l| bare_fence(l)) {
        return None;
    }
    let eol = if content.contains("\r\n") {
        "\r\n"
    } else {
        "\n"
    };
    let mut out = inner.join(eol);
    if !out.is_empty() {
        out.push_str(eol);
    }
    Some(out)
}

/// `overwrite: true` on an existing file: only a regular file the session has read and that
/// has not changed since (the model is replacing content it has seen), written atomically with
/// its permission bits kept.
fn overwrite(
    target: &crate::beneath::ResolvedPath,
    rel: &str,
    content: &str,
    reads: &crate::ReadTracker,
    budget: usize,
) -> Result<ToolOutput, ToolError> {
    let path = target.abs();
    let before = super::edit_file::read_for_edit(target, rel)?;
    // An empty file holds nothing the model could have missed.
    if !before.is_empty() {
        super::edit_file::check_fresh(reads, &path, rel, &before)?;
    }
    let bytes = content.as_bytes();
    if before == bytes {
        return Err(ToolError::model(format!(
            "`{rel}` already has exactly this content; nothing was written"
        )));
    }
    if target.read().ok().as_deref() != Some(before.as_slice()) {
        return Err(ToolError::model(format!(
            "`{rel}` changed on disk during the call; read it again and retry"
        )));
    }
    target
        .write_atomic(bytes, WriteMode::Replace, None)
        .map_err(|e| ToolError::model(format!("cannot write `{rel}`: {e}")))?;
    reads.record(&path, bytes);
    let old_text = String::from_utf8_lossy(&before);
    let diff = crate::edit::unified_diff(rel, &old_text, content);
    let mut text = format!(
        "Replaced `{rel}` ({} lines, {}; it had {} lines).\n",
        content.lines().count(),
        human_size(bytes.len() as u64),
        old_text.lines().count()
    );
    text.push_str(&crate::text::truncate_middle(&diff, budget));
    Ok(ToolOutput::text(text)
        .with_files([rel])
        .with_diff(diff)
        .with_metadata(serde_json::json!({"created": false, "overwritten": true})))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builtin::testutil::Fixture;
    use serde_json::json;

    #[test]
    fn a_fence_around_a_whole_file_is_left_out_only_where_it_cannot_be_content() {
        let wrapped = "app.py\n```python\nprint(1)\n\nprint(2)\n```\n";
        assert_eq!(
            unwrap_fence(wrapped, "src/app.py").as_deref(),
            Some("print(1)\n\nprint(2)\n")
        );
        assert_eq!(
            unwrap_fence("```\r\na\r\n```", "x.rs").as_deref(),
            Some("a\r\n")
        );
        // Documentation may be a fenced block on purpose; a file without an extension too.
        assert_eq!(unwrap_fence("```\na\n```\n", "notes.md"), None);
        assert_eq!(unwrap_fence("```\na\n```\n", "NOTES"), None);
        // Not one block: two fenced blocks, an unclosed fence, no fence, a name only.
        assert_eq!(unwrap_fence("```\na\n```\nb\n```\nc\n```\n", "x.py"), None);
        assert_eq!(unwrap_fence("```\na\nb\n", "x.py"), None);
        assert_eq!(unwrap_fence("a = 1\n", "x.py"), None);
        assert_eq!(unwrap_fence("x.py\n", "x.py"), None);
        // Another file's name above the fence is not this file's.
        assert_eq!(unwrap_fence("y.py\n```\na\n```\n", "x.py"), None);
    }

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
        let done = CreateFile
            .run(
                CreateFileArgs {
                    path: "shown.py".into(),
                    content: "import os\nprint(os.getcwd())\n".into(),
                    overwrite: None,
                },
                &f.ctx,
            )
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let created = done.details.created.unwrap_or_default();
        assert_eq!(created.text, "import os\nprint(os.getcwd())");
        assert_eq!(created.total_lines, 2, "the content is shown to a person");
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
    async fn overwrite_replaces_a_file_it_has_read() {
        let f = Fixture::new();
        f.write("notes.md", "old\ntext\n");
        // Not read yet: refused, untouched.
        let call = json!({"path": "notes.md", "content": "new\n", "overwrite": true});
        let err = f.err(&CreateFile, call.clone()).await;
        assert!(err.contains("have not read `notes.md`"), "{err}");
        assert_eq!(
            std::fs::read_to_string(f.dir.path().join("notes.md")).unwrap_or_default(),
            "old\ntext\n"
        );
        f.ok(&crate::builtin::ReadFile, json!({"path": "notes.md"}))
            .await;
        // Without `overwrite` it still refuses, and says how to replace.
        let err = f
            .err(&CreateFile, json!({"path": "notes.md", "content": "new\n"}))
            .await;
        assert!(err.contains("overwrite: true"), "{err}");
        let out = f.ok(&CreateFile, call).await;
        assert!(out.starts_with("Replaced `notes.md`"), "{out}");
        assert!(out.contains("-old") && out.contains("+new"), "{out}");
        assert_eq!(
            std::fs::read_to_string(f.dir.path().join("notes.md")).unwrap_or_default(),
            "new\n"
        );
        // A new file with `overwrite: true` is simply created.
        f.ok(
            &CreateFile,
            json!({"path": "fresh.txt", "content": "x\n", "overwrite": true}),
        )
        .await;
        // A directory is never overwritten.
        std::fs::create_dir(f.dir.path().join("d")).unwrap_or_default();
        let err = f
            .err(
                &CreateFile,
                json!({"path": "d", "content": "x", "overwrite": true}),
            )
            .await;
        assert!(err.contains("directory"), "{err}");
    }

    #[tokio::test]
    async fn fills_an_empty_file_and_unwraps_a_fenced_whole_file() {
        let f = Fixture::new();
        f.write("empty.py", "");
        // Unread, but empty: nothing to lose, so it is filled (and its fence left out).
        let out = f
            .ok(
                &CreateFile,
                json!({"path": "empty.py", "content": "empty.py\n```python\nx = 1\n```"}),
            )
            .await;
        assert!(out.contains("fence"), "{out}");
        assert_eq!(
            std::fs::read_to_string(f.dir.path().join("empty.py")).unwrap_or_default(),
            "x = 1\n"
        );
        // One byte in it: refused as before, untouched.
        f.write("one.py", "\n");
        let err = f
            .err(&CreateFile, json!({"path": "one.py", "content": "x = 1\n"}))
            .await;
        assert!(err.contains("already exists"), "{err}");
        assert_eq!(
            std::fs::read_to_string(f.dir.path().join("one.py")).unwrap_or_default(),
            "\n"
        );
        // Markdown keeps its fence.
        f.ok(
            &CreateFile,
            json!({"path": "snippet.md", "content": "```\ncode\n```\n"}),
        )
        .await;
        assert_eq!(
            std::fs::read_to_string(f.dir.path().join("snippet.md")).unwrap_or_default(),
            "```\ncode\n```\n"
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
