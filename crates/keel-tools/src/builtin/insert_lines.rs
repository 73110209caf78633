//! `insert_lines`: inserts text after a line number. Hidden (never listed): it exists so the
//! Anthropic text editor's `insert` command (`str_replace_editor`) runs exactly; models see
//! `edit_file` instead.

use schemars::JsonSchema;
use serde::Deserialize;

use super::blocking;
use super::edit_file::{check_fresh, read_for_edit};
use crate::edit::{Document, unified_diff};
use crate::fs::WriteMode;
use crate::{ToolContext, ToolEffect, ToolError, ToolOutput, TypedTool};

/// Arguments of `insert_lines`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InsertLinesArgs {
    /// File to change (read it first).
    pub path: String,
    /// Insert after this line (1-based); 0 inserts at the top.
    pub after_line: usize,
    /// The lines to insert.
    pub text: String,
}

/// Inserts lines into an existing file.
#[derive(Debug, Clone, Copy, Default)]
pub struct InsertLines;

impl TypedTool for InsertLines {
    type Args = InsertLinesArgs;
    const NAME: &'static str = "insert_lines";

    fn description(&self) -> &str {
        "Insert text after a given line of an existing file (0 = at the top). Returns a diff."
    }

    fn effect(&self) -> ToolEffect {
        ToolEffect::WritesFiles
    }

    async fn run(&self, args: InsertLinesArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let target = ctx.workspace.locate_writable(&args.path)?;
        let rel = target.rel_string();
        let path = target.abs();
        let reads = ctx.reads.clone();
        let budget = ctx.max_output_chars;
        blocking(move || {
            let before = read_for_edit(&target, &rel)?;
            check_fresh(&reads, &path, &rel, &before)?;
            let doc = Document::decode(&before)
                .map_err(|e| ToolError::model(format!("cannot edit `{rel}`: {e}")))?;
            if doc.has_lone_cr() {
                // Line numbers would not mean what read_file showed.
                return Err(ToolError::model(format!(
                    "`{rel}` ends some lines with a lone `\\r`, so its line numbers are ambiguous; insert with edit_file (search for the lines around the place, repeat them in `replace` with the new ones)"
                )));
            }
            let lines: Vec<&str> = doc.text.split_inclusive('\n').collect();
            if args.after_line > lines.len() {
                return Err(ToolError::model(format!(
                    "`{rel}` has {} lines; `after_line` must be between 0 and {}",
                    lines.len(),
                    lines.len()
                )));
            }
            let mut insert = args.text.clone();
            if !insert.ends_with('\n') {
                insert.push('\n');
            }
            let mut text = String::with_capacity(doc.text.len() + insert.len() + 1);
            for line in &lines[..args.after_line] {
                text.push_str(line);
            }
            if !text.is_empty() && !text.ends_with('\n') {
                text.push('\n');
            }
            text.push_str(&insert);
            for line in &lines[args.after_line..] {
                text.push_str(line);
            }
            let after = doc.encode(&text);
            target
                .write_atomic(&after, WriteMode::Replace, None)
                .map_err(|e| ToolError::model(format!("cannot write `{rel}`: {e}")))?;
            reads.record(&path, &after);
            let diff = unified_diff(&rel, &doc.text, &text);
            let content = format!(
                "Inserted {} line(s) into `{rel}` after line {}.\n{}",
                insert.lines().count(),
                args.after_line,
                crate::text::truncate_middle(&diff, budget)
            );
            Ok(ToolOutput::text(content).with_files([rel]).with_diff(diff))
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builtin::ReadFile;
    use crate::builtin::testutil::Fixture;
    use serde_json::json;

    #[tokio::test]
    async fn inserts_after_a_line_keeping_the_rest() {
        let f = Fixture::new();
        f.write("a.txt", "one\r\ntwo\r\n");
        f.ok(&ReadFile, json!({"path": "a.txt"})).await;
        f.ok(
            &InsertLines,
            json!({"path": "a.txt", "after_line": 1, "text": "mid"}),
        )
        .await;
        let got = std::fs::read_to_string(f.dir.path().join("a.txt")).unwrap_or_default();
        assert_eq!(got, "one\r\nmid\r\ntwo\r\n");
        f.ok(
            &InsertLines,
            json!({"path": "a.txt", "after_line": 0, "text": "top\n"}),
        )
        .await;
        let got = std::fs::read_to_string(f.dir.path().join("a.txt")).unwrap_or_default();
        assert_eq!(got, "top\r\none\r\nmid\r\ntwo\r\n");
        let e = f
            .err(
                &InsertLines,
                json!({"path": "a.txt", "after_line": 9, "text": "x"}),
            )
            .await;
        assert!(e.contains("between 0 and 4"), "{e}");
        // A lone `\r` makes the editor's lines differ from read_file's numbering: refused.
        f.write("cr.txt", "one\rtwo\nthree\n");
        f.ok(&ReadFile, json!({"path": "cr.txt"})).await;
        let e = f
            .err(
                &InsertLines,
                json!({"path": "cr.txt", "after_line": 1, "text": "x"}),
            )
            .await;
        assert!(e.contains("lone `\\r`"), "{e}");
        assert_eq!(
            std::fs::read_to_string(f.dir.path().join("cr.txt")).unwrap_or_default(),
            "one\rtwo\nthree\n"
        );
    }
}
