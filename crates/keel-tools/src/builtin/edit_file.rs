//! `edit_file`: search/replace edits to one file, through the [`SearchReplaceEditor`].
//!
//! Refuses a file the session has not read, or one that changed on disk since it was read:
//! the model's search text would be based on content it has not seen.

use schemars::JsonSchema;
use serde::Deserialize;

use super::blocking;
use crate::beneath::ResolvedPath;
use crate::edit::{Document, Edit, MatchLevel, SearchReplaceEditor, unified_diff};
use crate::fs::WriteMode;
use crate::{ToolContext, ToolEffect, ToolError, ToolOutput, TypedTool};

/// One search/replace pair.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EditArg {
    /// Existing text to find, copied from the file (no line numbers); must match one place.
    pub search: String,
    /// Text to put in its place.
    pub replace: String,
    /// Change every occurrence instead of exactly one.
    #[serde(default, alias = "replaceAll")]
    pub replace_all: Option<bool>,
}

/// Arguments of `edit_file`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EditFileArgs {
    /// File path relative to the workspace root.
    pub path: String,
    /// Applied in order; all or none.
    pub edits: Vec<EditArg>,
}

/// Edits a file with search/replace blocks.
#[derive(Debug, Clone, Copy, Default)]
pub struct EditFile {
    pub editor: SearchReplaceEditor,
}

impl TypedTool for EditFile {
    type Args = EditFileArgs;
    const NAME: &'static str = "edit_file";

    fn description(&self) -> &str {
        "Change an existing file with search/replace edits. Read the file first; each search must match one place (small whitespace/indentation slips are tolerated). Returns a diff."
    }

    fn effect(&self) -> ToolEffect {
        ToolEffect::WritesFiles
    }

    async fn run(&self, args: EditFileArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let target = ctx.workspace.locate_writable(&args.path)?;
        let rel = target.rel_string();
        let path = target.abs();
        if args.edits.is_empty() {
            return Err(ToolError::model(
                "edit_file needs at least one {search, replace} pair in `edits`",
            ));
        }
        let reads = ctx.reads.clone();
        let editor = self.editor;
        let budget = ctx.max_output_chars;
        blocking(move || {
            let before = read_for_edit(&target, &rel)?;
            check_fresh(&reads, &path, &rel, &before)?;
            let doc = Document::decode(&before)
                .map_err(|e| ToolError::model(format!("cannot edit `{rel}`: {e}")))?;
            let edits: Vec<Edit> = args
                .edits
                .into_iter()
                .map(|e| Edit {
                    search: e.search,
                    replace: e.replace,
                    replace_all: e.replace_all.unwrap_or(false),
                })
                .collect();
            let outcome = editor.apply(&doc.text, &edits).map_err(|e| {
                ToolError::model(format!(
                    "{}\nNo edits were applied; `{rel}` is unchanged.",
                    e.describe(&rel, edits.len())
                ))
            })?;
            let after = doc.encode(&outcome.text);
            if after == before {
                return Err(ToolError::model(format!(
                    "the edits leave `{rel}` unchanged (each replace equals what it replaces); nothing was written"
                )));
            }
            // The file must not have changed while we worked.
            if target.read().ok().as_deref() != Some(before.as_slice()) {
                return Err(ToolError::model(format!(
                    "`{rel}` changed on disk during the edit; read it again and retry"
                )));
            }
            target
                .write_atomic(&after, WriteMode::Replace, None)
                .map_err(|e| ToolError::model(format!("cannot write `{rel}`: {e}")))?;
            reads.record(&path, &after);

            let diff = unified_diff(&rel, &doc.text, &outcome.text);
            let levels: Vec<&str> = outcome.applied.iter().map(|a| a.level.name()).collect();
            let worst = outcome
                .applied
                .iter()
                .map(|a| a.level)
                .max()
                .unwrap_or(MatchLevel::Exact);
            let mut notes: Vec<String> = Vec::new();
            for (i, a) in outcome.applied.iter().enumerate() {
                let which = if edits.len() > 1 {
                    format!("edit {} ", i + 1)
                } else {
                    String::new()
                };
                if a.unescaped {
                    notes.push(format!(
                        "{which}matched only with `\\n`, `\\t`, `\\\"`… in search and replace read as the characters they stand for (your arguments were escaped twice; send real line breaks)"
                    ));
                }
                if a.level != MatchLevel::Exact {
                    let sim = if a.level == MatchLevel::Fuzzy {
                        format!(", similarity {:.2}", a.similarity)
                    } else {
                        String::new()
                    };
                    notes.push(format!(
                        "{which}matched {} at lines {}-{}{sim}",
                        a.level, a.start_line, a.end_line
                    ));
                }
            }
            let mut content = format!(
                "Edited `{rel}` ({} edit{}{}).",
                edits.len(),
                if edits.len() == 1 { "" } else { "s" },
                replacements_note(&edits, &outcome.applied)
            );
            if !notes.is_empty() {
                content.push_str(&format!(
                    " Not exact — check the diff: {}.",
                    notes.join("; ")
                ));
            }
            content.push('\n');
            content.push_str(&crate::text::truncate_middle(&diff, budget));
            Ok(ToolOutput::text(content)
                .with_files([rel])
                .with_diff(diff)
                .with_metadata(serde_json::json!({
                "match_level": worst.name(),
                "match_levels": levels,
                "replacements": outcome.applied.iter().map(|a| a.replacements).collect::<Vec<_>>(),
            })))
        })
        .await
    }
}

/// How many places each `replace_all` edit changed: `, replaced 3 occurrences` for a single
/// edit, `; edit 2 replaced 3 occurrences` among several; empty without `replace_all`.
fn replacements_note(edits: &[Edit], applied: &[crate::edit::AppliedEdit]) -> String {
    let plural = |n: usize| if n == 1 { "" } else { "s" };
    let all: Vec<String> = edits
        .iter()
        .zip(applied)
        .enumerate()
        .filter(|(_, (e, _))| e.replace_all)
        .map(|(i, (_, a))| {
            let n = a.replacements;
            if applied.len() == 1 {
                format!("replaced {n} occurrence{}", plural(n))
            } else {
                format!("edit {} replaced {n} occurrence{}", i + 1, plural(n))
            }
        })
        .collect();
    match (all.is_empty(), applied.len()) {
        (true, _) => String::new(),
        (false, 1) => format!(", {}", all.join("")),
        (false, _) => format!("; {}", all.join(", ")),
    }
}

/// Reads the file to edit, with errors that say what to do.
pub(crate) fn read_for_edit(target: &ResolvedPath, rel: &str) -> Result<Vec<u8>, ToolError> {
    match target.info() {
        Ok(Some(info)) if info.kind == crate::fs::FileKind::Dir => {
            return Err(ToolError::model(format!(
                "`{rel}` is a directory, not a file"
            )));
        }
        Ok(Some(_)) => {}
        Ok(None) => {
            return Err(ToolError::model(format!(
                "`{rel}` does not exist; use create_file to make a new file"
            )));
        }
        Err(e) => return Err(ToolError::model(format!("cannot read `{rel}`: {e}"))),
    }
    target
        .read()
        .map_err(|e| ToolError::model(format!("cannot read `{rel}`: {e}")))
}

/// Refuses files the session has not read, or that changed since.
pub(crate) fn check_fresh(
    reads: &crate::ReadTracker,
    path: &std::path::Path,
    rel: &str,
    current: &[u8],
) -> Result<(), ToolError> {
    match reads.get(path) {
        None => Err(ToolError::model(format!(
            "you have not read `{rel}` in this session; read_file it first so your search text matches its current content"
        ))),
        Some(stamp)
            if stamp.len != current.len() as u64
                || stamp.hash != crate::context::fnv1a(current) =>
        {
            Err(ToolError::model(format!(
                "`{rel}` changed on disk since you last read it (by a command or another program); read_file it again and redo the edit against its current content"
            )))
        }
        Some(_) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Tool;
    use crate::builtin::ReadFile;
    use crate::builtin::testutil::Fixture;
    use serde_json::json;

    async fn read(f: &Fixture, path: &str) {
        f.ok(&ReadFile, json!({"path": path})).await;
    }

    #[tokio::test]
    async fn edits_after_a_read_and_reports_the_diff_and_level() {
        let f = Fixture::new();
        f.write("app.py", "def add(a, b):\n    return a + b\n");
        read(&f, "app.py").await;
        let out = EditFile::default()
            .execute(
                json!({"path": "app.py", "edits": [{"search": "return a + b", "replace": "return a + b + 0"}]}),
                &f.ctx,
            )
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(
            out.content.starts_with("Edited `app.py` (1 edit)."),
            "{}",
            out.content
        );
        assert!(
            out.content.contains("+    return a + b + 0"),
            "{}",
            out.content
        );
        assert_eq!(out.details.files, vec!["app.py".to_string()]);
        assert_eq!(out.metadata.unwrap_or_default()["match_level"], "exact");
        assert!(
            out.details
                .diff
                .as_deref()
                .unwrap_or("")
                .starts_with("--- a/app.py\n+++ b/app.py\n")
        );
        // A second edit needs no re-read: the session's own write is recorded.
        let out = f
            .ok(
                &EditFile::default(),
                json!({"path": "app.py", "edits": [{"search": "def add(a, b):\nreturn a + b + 0", "replace": "def add(a, b):\n    return b + a"}]}),
            )
            .await;
        assert!(out.contains("indentation-agnostic"), "{out}");
        assert_eq!(
            std::fs::read_to_string(f.dir.path().join("app.py")).unwrap_or_default(),
            "def add(a, b):\n    return b + a\n"
        );
    }

    #[tokio::test]
    async fn refuses_unread_and_stale_files() {
        let f = Fixture::new();
        f.write("a.rs", "fn a() {}\n");
        let edit = json!({"path": "a.rs", "edits": [{"search": "fn a", "replace": "fn b"}]});
        let err = f.err(&EditFile::default(), edit.clone()).await;
        assert!(err.contains("have not read `a.rs`"), "{err}");
        read(&f, "a.rs").await;
        f.write("a.rs", "fn a() { changed() }\n");
        let err = f.err(&EditFile::default(), edit.clone()).await;
        assert!(
            err.contains("changed on disk since you last read it"),
            "{err}"
        );
        assert_eq!(
            std::fs::read_to_string(f.dir.path().join("a.rs")).unwrap_or_default(),
            "fn a() { changed() }\n"
        );
        read(&f, "a.rs").await;
        f.ok(&EditFile::default(), edit).await;
    }

    #[tokio::test]
    async fn a_failing_edit_writes_nothing() {
        let f = Fixture::new();
        f.write("m.txt", "one\ntwo\n");
        read(&f, "m.txt").await;
        let err = f
            .err(
                &EditFile::default(),
                json!({"path": "m.txt", "edits": [
                    {"search": "one", "replace": "ONE"},
                    {"search": "three", "replace": "3"}
                ]}),
            )
            .await;
        assert!(err.starts_with("edit 2 of 2: no match"), "{err}");
        assert!(err.contains("No edits were applied"), "{err}");
        assert_eq!(
            std::fs::read_to_string(f.dir.path().join("m.txt")).unwrap_or_default(),
            "one\ntwo\n"
        );
        let err = f
            .err(
                &EditFile::default(),
                json!({"path": "m.txt", "edits": [{"search": "one", "replace": "one"}]}),
            )
            .await;
        assert!(err.contains("unchanged"), "{err}");
        let err = f
            .err(
                &EditFile::default(),
                json!({"path": "nope.txt", "edits": [{"search": "a", "replace": "b"}]}),
            )
            .await;
        assert!(err.contains("create_file"), "{err}");
    }

    #[tokio::test]
    async fn replace_all_changes_every_occurrence_and_says_how_many() {
        let f = Fixture::new();
        f.write("a.txt", "foo bar foo baz foo\n");
        read(&f, "a.txt").await;
        // Without it, the ambiguity error points at `replace_all`.
        let err = f
            .err(
                &EditFile::default(),
                json!({"path": "a.txt", "edits": [{"search": "foo", "replace": "qux"}]}),
            )
            .await;
        assert!(err.contains("line 1 column 1, line 1 column 9"), "{err}");
        assert!(err.contains("`replace_all: true`"), "{err}");
        let out = f
            .ok(
                &EditFile::default(),
                json!({"path": "a.txt", "edits": [{"search": "foo", "replace": "qux", "replace_all": true}]}),
            )
            .await;
        assert!(
            out.starts_with("Edited `a.txt` (1 edit, replaced 3 occurrences)."),
            "{out}"
        );
        assert_eq!(
            std::fs::read_to_string(f.dir.path().join("a.txt")).unwrap_or_default(),
            "qux bar qux baz qux\n"
        );
    }

    /// The probe: a fuzzy match whose file line holds two search lines is refused,
    /// never written half-right.
    #[tokio::test]
    async fn a_split_line_is_refused_not_half_applied() {
        let f = Fixture::new();
        f.write("l.txt", "one\ntwo three\nfour\n");
        read(&f, "l.txt").await;
        let err = f
            .err(
                &EditFile::default(),
                json!({"path": "l.txt", "edits": [{"search": "one\ntwo\nthree\nfour", "replace": "one\ntwo\nTHREE\nfour"}]}),
            )
            .await;
        assert!(err.contains("`three`"), "{err}");
        assert!(err.contains("`l.txt` is unchanged"), "{err}");
        assert_eq!(
            std::fs::read_to_string(f.dir.path().join("l.txt")).unwrap_or_default(),
            "one\ntwo three\nfour\n"
        );
    }

    #[tokio::test]
    async fn preserves_crlf_bom_tabs_and_mode() {
        let f = Fixture::new();
        let original =
            "\u{FEFF}package main\r\n\r\nfunc main() {\r\n\tif ok {\r\n\t\trun()\r\n\t}\r\n}\r\n";
        f.write("main.go", original);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(
                f.dir.path().join("main.go"),
                std::fs::Permissions::from_mode(0o754),
            )
            .unwrap_or_else(|e| panic!("{e}"));
        }
        read(&f, "main.go").await;
        f.ok(
            &EditFile::default(),
            json!({"path": "main.go", "edits": [{"search": "if ok {\n    run()\n}", "replace": "if ok {\n    run()\n    log()\n}"}]}),
        )
        .await;
        let after = std::fs::read(f.dir.path().join("main.go")).unwrap_or_default();
        assert_eq!(
            String::from_utf8_lossy(&after),
            "\u{FEFF}package main\r\n\r\nfunc main() {\r\n\tif ok {\r\n\t\trun()\r\n\t\tlog()\r\n\t}\r\n}\r\n"
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(f.dir.path().join("main.go"))
                .map(|m| m.permissions().mode())
                .unwrap_or(0);
            assert_eq!(mode & 0o777, 0o754);
        }
    }

    #[tokio::test]
    async fn refuses_binary_and_non_utf8() {
        let f = Fixture::new();
        std::fs::write(f.dir.path().join("l1.txt"), b"caf\xE9\n").unwrap_or_else(|e| panic!("{e}"));
        read(&f, "l1.txt").await;
        let err = f
            .err(
                &EditFile::default(),
                json!({"path": "l1.txt", "edits": [{"search": "caf", "replace": "x"}]}),
            )
            .await;
        assert!(err.contains("not valid UTF-8"), "{err}");
        assert_eq!(
            std::fs::read(f.dir.path().join("l1.txt")).unwrap_or_default(),
            b"caf\xE9\n"
        );
    }
}
