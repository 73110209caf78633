//! Session working memory: a tool result over the size limit is not cut and lost. The run
//! keeps it whole and the model gets its beginning plus a handle; `read_result {handle,
//! offset}` pages through the rest. The loop answers `read_result` itself, because the stored
//! results belong to the run (like `advance_phase`'s phases).

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::Deserialize;

use keel_tools::{ToolContext, ToolEffect, ToolError, ToolOutput, TypedTool};

/// The tool's name.
pub const READ_RESULT: &str = "read_result";
/// Characters per page of a stored result (and of the part shown at first).
pub const PAGE_CHARS: usize = 20_000;

/// Arguments of `read_result`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadResultArgs {
    /// The handle named in the cut result (like `r1`).
    pub handle: String,
    /// Character offset to start at (default 0).
    #[serde(default)]
    pub offset: Option<usize>,
}

/// Pages through a stored oversized tool result.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReadResult;

impl TypedTool for ReadResult {
    type Args = ReadResultArgs;
    const NAME: &'static str = READ_RESULT;

    fn description(&self) -> &str {
        "Read more of a tool result that was too long to show whole: give its handle and the character offset to continue from."
    }

    fn effect(&self) -> ToolEffect {
        ToolEffect::ReadOnly
    }

    async fn run(
        &self,
        _args: ReadResultArgs,
        _ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        Err(ToolError::model(
            "read_result only works inside a session that stored a long result; there is none here",
        ))
    }
}

/// The oversized results of a run, by handle.
#[derive(Debug, Default)]
pub struct StoredResults {
    results: BTreeMap<String, Vec<char>>,
    /// Handles stored since the last [`StoredResults::take_unsaved`].
    unsaved: Vec<String>,
}

impl StoredResults {
    /// `content` as the model should see it: whole when it fits in `limit` characters, else
    /// stored under a new handle and replaced by its first page and how to read on.
    pub fn fit(&mut self, content: String, limit: usize) -> String {
        let total = content.chars().count();
        if total <= limit {
            return content;
        }
        let handle = format!("r{}", self.results.len() + 1);
        let chars: Vec<char> = content.chars().collect();
        let page = PAGE_CHARS.min(limit);
        let head: String = chars[..page.min(total)].iter().collect();
        self.results.insert(handle.clone(), chars);
        self.unsaved.push(handle.clone());
        format!(
            "[keel: this result has {total} characters, more than the {limit} shown at once; it is stored whole as `{handle}`. Characters 0–{page} follow. Read on with read_result {{\"handle\": \"{handle}\", \"offset\": {page}}}.]\n{head}"
        )
    }

    /// Results stored since the last call, `(handle, content)`, to persist.
    pub fn take_unsaved(&mut self) -> Vec<(String, String)> {
        std::mem::take(&mut self.unsaved)
            .into_iter()
            .filter_map(|h| {
                let text: String = self.results.get(&h)?.iter().collect();
                Some((h, text))
            })
            .collect()
    }

    /// Restores results stored by earlier runs of the session.
    pub fn restore(&mut self, stored: Vec<(String, String)>) {
        for (handle, content) in stored {
            self.results.insert(handle, content.chars().collect());
        }
    }

    /// How many results are stored, and their total characters.
    pub fn stats(&self) -> (usize, usize) {
        (
            self.results.len(),
            self.results.values().map(Vec::len).sum(),
        )
    }

    /// A `read_result` call: the page at `offset`, or why not.
    pub fn read(&self, arguments: &serde_json::Value) -> Result<ToolOutput, ToolError> {
        let args: ReadResultArgs = serde_json::from_value(arguments.clone()).map_err(|e| {
            ToolError::model(format!(
                "read_result takes {{\"handle\": \"r1\", \"offset\": 0}}: {e}"
            ))
        })?;
        let Some(chars) = self.results.get(args.handle.trim()) else {
            let known: Vec<&str> = self.results.keys().map(String::as_str).collect();
            return Err(ToolError::model(format!(
                "no stored result `{}`; this session has {}",
                args.handle,
                if known.is_empty() {
                    "none".to_string()
                } else {
                    known.join(", ")
                }
            )));
        };
        let total = chars.len();
        let start = args.offset.unwrap_or(0);
        if start >= total {
            return Err(ToolError::model(format!(
                "offset {start} is past the end of `{}` ({total} characters)",
                args.handle
            )));
        }
        let end = (start + PAGE_CHARS).min(total);
        let text: String = chars[start..end].iter().collect();
        let next = if end < total {
            format!(
                " Next: read_result {{\"handle\": \"{}\", \"offset\": {end}}}.",
                args.handle
            )
        } else {
            " That is the end.".to_string()
        };
        Ok(ToolOutput::text(format!(
            "[keel: `{}` characters {start}–{end} of {total}.{next}]\n{text}",
            args.handle
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_oversized_result_is_retrievable_in_full_through_its_handle() {
        let mut stored = StoredResults::default();
        assert_eq!(stored.fit("short".into(), 100), "short");
        let full: String = (0..9_000).map(|i| format!("{i:05}\n")).collect();
        let shown = stored.fit(full.clone(), 30_000);
        assert!(shown.contains("stored whole as `r1`") && shown.len() < full.len());
        let mut rebuilt = String::new();
        let mut offset = 0;
        loop {
            let page = stored
                .read(&json!({"handle": "r1", "offset": offset}))
                .unwrap_or_else(|e| panic!("{e:?}"))
                .content;
            let (note, text) = page.split_once('\n').unwrap_or_default();
            rebuilt.push_str(text);
            offset += text.chars().count();
            if note.contains("That is the end.") {
                break;
            }
        }
        assert_eq!(rebuilt, full);
        assert!(stored.read(&json!({"handle": "r9"})).is_err());
        assert!(
            stored
                .read(&json!({"handle": "r1", "offset": 10_000_000}))
                .is_err()
        );
    }
}
