//! What a tool call did, typed: the fields the loop's guardrails and every renderer read,
//! beside the text the model reads. Free-form extras for UIs stay in the result's `metadata`.

use serde::{Deserialize, Serialize};

/// The typed part of a tool's result.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolDetails {
    /// Workspace-relative files the call created, changed or deleted (every tool that writes
    /// files sets it on success).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<String>,
    /// A unified diff of what changed, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diff: Option<String>,
    /// The exit code of the command the call ran (`None` when killed or not a command).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// A question the tool asks the engine to put to the user (`ask_user`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocker: Option<BlockerRequest>,
    /// The result was cut before the model saw it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub truncated: Option<Truncation>,
    /// The result came from an external tool (an MCP server), not one of Keel's own.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub external: bool,
    /// The start of the file the call created (`create_file`), for a person to see; bounded
    /// by [`Excerpt::head`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created: Option<Excerpt>,
    /// The end of the output of the command the call ran (stdout, then stderr), for a person
    /// to see; bounded by [`Excerpt::tail`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tail: Option<Excerpt>,
}

impl ToolDetails {
    /// True when no field is set.
    pub fn is_empty(&self) -> bool {
        self == &Self::default()
    }
}

/// Lines shown to a person from a longer text (a created file's head, a command output's
/// tail): whole lines, at most [`Excerpt::MAX_LINES`] of them and [`Excerpt::MAX_CHARS`]
/// characters, so a stored event stays small whatever the tool produced.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Excerpt {
    /// The lines shown, joined by `\n` (no trailing newline).
    pub text: String,
    /// Lines in the whole text.
    pub total_lines: usize,
}

impl Excerpt {
    /// Most lines kept.
    pub const MAX_LINES: usize = 40;
    /// Most characters kept (a longer line is cut and ends in `…`).
    pub const MAX_CHARS: usize = 4000;

    /// The first lines of `text`.
    pub fn head(text: &str) -> Self {
        let total_lines = text.lines().count();
        let mut kept = Vec::new();
        let mut budget = Self::MAX_CHARS;
        for line in text.lines().take(Self::MAX_LINES) {
            if budget == 0 {
                break;
            }
            let line = cut(line, budget);
            budget = budget.saturating_sub(line.chars().count().max(1));
            kept.push(line);
        }
        Self {
            text: kept.join("\n"),
            total_lines,
        }
    }

    /// The last lines of `text` (trailing blank lines left out).
    pub fn tail(text: &str) -> Self {
        let lines: Vec<&str> = text.trim_end().lines().collect();
        let mut kept = Vec::new();
        let mut budget = Self::MAX_CHARS;
        for line in lines.iter().rev().take(Self::MAX_LINES) {
            if budget == 0 {
                break;
            }
            let line = cut(line, budget);
            budget = budget.saturating_sub(line.chars().count().max(1));
            kept.push(line);
        }
        kept.reverse();
        Self {
            text: kept.join("\n"),
            total_lines: lines.len(),
        }
    }

    /// Lines of the whole text not in [`Excerpt::text`].
    pub fn hidden_lines(&self) -> usize {
        let shown = if self.text.is_empty() {
            0
        } else {
            self.text.lines().count()
        };
        self.total_lines.saturating_sub(shown)
    }
}

/// `line` cut to `max` characters (ending in `…` when cut).
fn cut(line: &str, max: usize) -> String {
    if line.chars().count() <= max {
        return line.to_string();
    }
    let mut s: String = line.chars().take(max.saturating_sub(1)).collect();
    s.push('…');
    s
}

/// A question for the user, raised by a tool.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockerRequest {
    pub question: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
}

/// How much of a result was cut.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Truncation {
    /// Characters of the result before it was cut.
    pub original_chars: usize,
    /// Characters the model was shown.
    pub shown_chars: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn excerpts_are_bounded_whole_lines() {
        let text: String = (1..=100).map(|i| format!("line {i}\n")).collect();
        let head = Excerpt::head(&text);
        assert_eq!(head.total_lines, 100);
        assert_eq!(head.text.lines().count(), Excerpt::MAX_LINES);
        assert!(head.text.starts_with("line 1\nline 2\n"));
        assert_eq!(head.hidden_lines(), 60);
        let tail = Excerpt::tail(&text);
        assert!(tail.text.ends_with("line 99\nline 100"), "{}", tail.text);
        assert_eq!(tail.hidden_lines(), 60);
        // One huge line (minified code, a binary dump) stays within the character budget.
        let huge = "x".repeat(100_000);
        let e = Excerpt::head(&huge);
        assert_eq!(e.text.chars().count(), Excerpt::MAX_CHARS);
        assert!(e.text.ends_with('…'));
        assert_eq!(Excerpt::tail("").total_lines, 0);
        assert_eq!(Excerpt::tail("").hidden_lines(), 0);
    }

    #[test]
    fn details_stored_before_excerpts_read_back() {
        let old: ToolDetails =
            serde_json::from_str(r#"{"files":["a.rs"],"exit_code":0}"#).unwrap_or_default();
        assert_eq!(old.files, ["a.rs"]);
        assert!(old.created.is_none() && old.output_tail.is_none());
        let with = ToolDetails {
            created: Some(Excerpt::head("fn main() {}\n")),
            ..ToolDetails::default()
        };
        let json = serde_json::to_value(&with).unwrap_or_default();
        assert_eq!(json["created"]["text"], "fn main() {}");
        assert_eq!(json["created"]["total_lines"], 1);
        assert!(
            json.get("output_tail").is_none(),
            "unset fields are left out"
        );
    }
}
