//! Session working memory: a tool result over the size limit ([`output_budget`]:
//! `agent.max_output_chars`, scaled down for a small window) is not cut and lost. Tools return their whole output (up to
//! [`keel_tools::text::OUTPUT_CAP_CHARS`]); the run keeps an oversized one whole and the model
//! gets its head and tail plus a handle; `read_result {handle, offset, limit?}` reads any part. The loop answers `read_result` itself, because the stored
//! results belong to the run (like `advance_phase`'s phases).

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::Deserialize;

use keel_tools::{ToolContext, ToolEffect, ToolError, ToolOutput, TypedTool};

/// The tool's name.
pub const READ_RESULT: &str = "read_result";
/// Characters per page of a stored result (at most; a smaller result budget means smaller
/// pages, so a page always fits).
pub const PAGE_CHARS: usize = 20_000;
/// Characters the note around a preview may take, reserved from the budget.
const NOTE_CHARS: usize = 400;

/// Arguments of `read_result`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadResultArgs {
    /// The handle named in the cut result (like `r1`).
    pub handle: String,
    /// Character offset to start at (default 0).
    #[serde(default)]
    pub offset: Option<usize>,
    /// Characters to read (default and maximum: one page).
    #[serde(default)]
    pub limit: Option<usize>,
}

/// Pages through a stored oversized tool result.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReadResult;

impl TypedTool for ReadResult {
    type Args = ReadResultArgs;
    const NAME: &'static str = READ_RESULT;

    fn description(&self) -> &str {
        "Read any part of a tool result that was too long to show whole: give its handle and the character offset to read from (optionally a limit)."
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

/// The smallest result budget a small window brings the configured one down to.
pub const MIN_OUTPUT_CHARS: usize = 1_000;

/// Windows below this many tokens get the compact head, which alone takes up to half of them.
const SMALL_WINDOW: u64 = 8_192;

/// Characters of one tool result shown to the model: `agent.max_output_chars` (the SPEC's
/// 4,000 by default), but at most about a quarter of a `window`-token context (four
/// characters a token) — an eighth in a window under 8,192 tokens, where the head takes up to
/// half — never below [`MIN_OUTPUT_CHARS`] (unless configured lower), so one `cargo build`
/// cannot fill a small model's window. The rest stays behind a handle.
pub fn output_budget(configured: usize, window: u64) -> usize {
    let share = if window < SMALL_WINDOW {
        window / 2
    } else {
        window
    };
    let share = usize::try_from(share).unwrap_or(usize::MAX);
    configured.min(share.max(MIN_OUTPUT_CHARS))
}

/// The oversized results of a run, by handle.
#[derive(Debug, Default)]
pub struct StoredResults {
    results: BTreeMap<String, Vec<char>>,
    /// Handles stored since the last [`StoredResults::take_unsaved`].
    unsaved: Vec<String>,
}

/// Characters of a page for a result budget of `limit`.
fn page_chars(limit: usize) -> usize {
    PAGE_CHARS.min(limit.saturating_sub(NOTE_CHARS)).max(100)
}

/// Where a head of about `want` characters ends: just after a newline when one is near.
fn head_end(chars: &[char], want: usize, slack: usize) -> usize {
    let want = want.min(chars.len());
    (want.saturating_sub(slack)..want)
        .rev()
        .find(|&i| chars[i] == '\n')
        .map_or(want, |i| i + 1)
}

/// Where a tail of about `want` characters starts: just after a newline when one is near.
fn tail_start(chars: &[char], want: usize, slack: usize) -> usize {
    let start = chars.len().saturating_sub(want);
    (start..(start + slack).min(chars.len()))
        .find(|&i| chars[i] == '\n')
        .map_or(start, |i| i + 1)
}

impl StoredResults {
    /// `content` as the model should see it: whole when it fits in `limit` characters, else
    /// stored whole under a new handle and replaced by its head and tail (together within
    /// `limit`), the size of what lies between, and how to read any of it with `read_result`.
    pub fn fit(&mut self, content: String, limit: usize) -> String {
        let total = content.chars().count();
        if total <= limit {
            return content;
        }
        let handle = format!("r{}", self.results.len() + 1);
        let chars: Vec<char> = content.chars().collect();
        let budget = limit.saturating_sub(NOTE_CHARS).max(100);
        let slack = budget / 5;
        let head = head_end(&chars, budget * 2 / 3, slack);
        let tail = tail_start(&chars, budget - budget * 2 / 3, slack).max(head);
        let lines = chars.iter().filter(|c| **c == '\n').count();
        let page = page_chars(limit);
        let shown_head: String = chars[..head].iter().collect();
        let shown_tail: String = chars[tail..].iter().collect();
        let bytes = content.len();
        self.results.insert(handle.clone(), chars);
        self.unsaved.push(handle.clone());
        format!(
            "[keel: this result has {total} characters ({bytes} bytes, {lines} lines), more than the {limit} shown at once; it is stored whole as `{handle}`. Its head and tail follow. Read any part with read_result {{\"handle\": \"{handle}\", \"offset\": N}} ({page} characters a page).]\n{}\n[… characters {head}–{tail} of `{handle}` omitted here; read them with read_result {{\"handle\": \"{handle}\", \"offset\": {head}}} …]\n{shown_tail}",
            shown_head.trim_end_matches('\n')
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

    /// A `read_result` call: the page at `offset`, or why not. `limit` is the result budget
    /// (`agent.max_output_chars`): a page and its note always fit in it.
    pub fn read(
        &self,
        arguments: &serde_json::Value,
        limit: usize,
    ) -> Result<ToolOutput, ToolError> {
        let args: ReadResultArgs = serde_json::from_value(arguments.clone()).map_err(|e| {
            ToolError::model(format!(
                "read_result takes {{\"handle\": \"r1\", \"offset\": 0, \"limit\": {}}}: {e}",
                page_chars(limit)
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
        let handle = args.handle.trim();
        let total = chars.len();
        let start = args.offset.unwrap_or(0);
        if start >= total {
            return Err(ToolError::model(format!(
                "offset {start} is past the end of `{handle}` ({total} characters)"
            )));
        }
        let page = args.limit.unwrap_or(usize::MAX).clamp(1, page_chars(limit));
        let end = start.saturating_add(page).min(total);
        let text: String = chars[start..end].iter().collect();
        let bytes: usize = chars.iter().map(|c| c.len_utf8()).sum();
        let next = if end < total {
            format!(" Next: read_result {{\"handle\": \"{handle}\", \"offset\": {end}}}.")
        } else {
            " That is the end.".to_string()
        };
        Ok(ToolOutput::text(format!(
            "[keel: `{handle}` characters {start}–{end} of {total} ({bytes} bytes).{next}]\n{text}"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_active_skill_never_hides_read_result() {
        // keel-knowledge names the tool by its literal; it must stay this one's name.
        assert!(keel_knowledge::skills::ALWAYS_ALLOWED.contains(&READ_RESULT));
    }

    #[test]
    fn the_budget_is_the_configured_one_scaled_down_for_small_windows() {
        assert_eq!(output_budget(4_000, 128_000), 4_000);
        assert_eq!(output_budget(4_000, 8_192), 4_000);
        assert_eq!(
            output_budget(4_000, 2_048),
            1_024,
            "an eighth of a 2,048-token window, half of which the compact head takes"
        );
        assert_eq!(output_budget(4_000, 6_000), 3_000);
        assert_eq!(output_budget(4_000, 512), MIN_OUTPUT_CHARS);
        assert_eq!(
            output_budget(300, 512),
            300,
            "a smaller configured budget stands"
        );
        assert_eq!(output_budget(30_000, 32_000), 30_000);
    }

    #[test]
    fn an_oversized_result_is_retrievable_in_full_through_its_handle() {
        let mut stored = StoredResults::default();
        assert_eq!(stored.fit("short".into(), 100), "short");
        let full: String = (0..9_000).map(|i| format!("{i:05}\n")).collect();
        let shown = stored.fit(full.clone(), 30_000);
        assert!(shown.contains("stored whole as `r1`"), "{shown}");
        assert!(shown.chars().count() <= 30_000, "{}", shown.len());
        assert!(shown.contains("\n00000\n") && shown.ends_with("08999\n"));
        let mut rebuilt = String::new();
        let mut offset = 0;
        loop {
            let page = stored
                .read(&json!({"handle": "r1", "offset": offset}), 30_000)
                .unwrap_or_else(|e| panic!("{e:?}"))
                .content;
            let (note, text) = page.split_once('\n').unwrap_or_default();
            rebuilt.push_str(text);
            offset += text.chars().count();
            if note.contains("That is the end.") {
                assert!(note.contains("of 54000 (54000 bytes)"), "{note}");
                break;
            }
        }
        assert_eq!(rebuilt, full);
        assert!(stored.read(&json!({"handle": "r9"}), 30_000).is_err());
        assert!(
            stored
                .read(&json!({"handle": "r1", "offset": 10_000_000}), 30_000)
                .is_err()
        );
        // A limit reads less; a small budget means small pages that still fit in it.
        let few = stored
            .read(&json!({"handle": "r1", "offset": 6, "limit": 6}), 30_000)
            .unwrap_or_else(|e| panic!("{e:?}"))
            .content;
        assert!(few.ends_with("\n00001\n"), "{few}");
        let small = stored
            .read(&json!({"handle": "r1"}), 1_000)
            .unwrap_or_else(|e| panic!("{e:?}"))
            .content;
        assert!(small.chars().count() <= 1_000, "{}", small.len());
    }

    #[test]
    fn the_preview_keeps_head_and_tail_within_the_budget() {
        let mut stored = StoredResults::default();
        let text = "é".repeat(5_000);
        let shown = stored.fit(text, 1_000);
        assert!(shown.chars().count() <= 1_000, "{}", shown.chars().count());
        assert!(shown.contains("omitted here"));
    }
}
