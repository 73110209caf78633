//! The body of one tool call as a person sees it, drawn from the result's typed
//! [`ToolDetails`]: the diff of an edit, the head of a file the call created, the tail of a
//! command's output (with its exit code), or the error. One renderer for `keel chat`'s
//! transcript and `keel run`'s output; the web UI draws the same fields (`web/chat.js`).
//!
//! Events stored before the excerpts were recorded still render: a `create_file` call's
//! content comes from its arguments, a command's output from the result text.

use keel_protocol::{Excerpt, ToolDetails};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use serde_json::Value;

use super::markdown::highlight;
use super::theme::Theme;

/// The tools whose result text is a command's output.
const COMMAND_TOOLS: &[&str] = &["run_command", "run_tests", "!"];

/// One finished tool call.
#[derive(Debug, Clone, Copy)]
pub struct ToolView<'a> {
    pub name: &'a str,
    /// The call's arguments (for events stored before `details.created`).
    pub args: &'a Value,
    pub is_error: bool,
    /// The result text the model read.
    pub content: &'a str,
    pub details: &'a ToolDetails,
}

/// How many lines of each kind of body are shown before "… N more lines".
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub diff: usize,
    pub file: usize,
    pub output: usize,
}

impl Limits {
    /// Everything (Ctrl-O in the chat): the excerpts are bounded already.
    pub const ALL: Limits = Limits {
        diff: usize::MAX,
        file: usize::MAX,
        output: usize::MAX,
    };
}

/// The lines under the call's header line, each indented by two columns. `hint` follows a
/// "… N more lines" note (the chat says how to expand).
pub fn body(view: &ToolView<'_>, limits: Limits, hint: &str, theme: &Theme) -> Vec<Line<'static>> {
    let content = without_repair_note(view.content);
    let tail = view.details.output_tail.clone().or_else(|| {
        COMMAND_TOOLS
            .contains(&view.name)
            .then(|| Excerpt::tail(&command_output(content)))
    });
    if view.is_error {
        return match tail.filter(|t| !t.text.trim().is_empty()) {
            Some(t) => output_lines(&t, view.details.exit_code, limits.output, hint, theme),
            None => head_lines(content, theme.error, limits.output, hint, theme),
        };
    }
    if let Some(diff) = view
        .details
        .diff
        .as_deref()
        .filter(|d| !d.trim().is_empty())
    {
        return limit(diff_lines(diff, theme), limits.diff, hint, theme);
    }
    if let Some(file) = created(view) {
        let path = view
            .details
            .files
            .first()
            .map(String::as_str)
            .or_else(|| view.args.get("path").and_then(Value::as_str))
            .unwrap_or("");
        return file_lines(&file, path, limits.file, hint, theme);
    }
    match tail {
        Some(t) => output_lines(&t, view.details.exit_code, limits.output, hint, theme),
        None => Vec::new(),
    }
}

/// The created file's head: recorded, or (older events) from the call's arguments.
fn created(view: &ToolView<'_>) -> Option<Excerpt> {
    view.details.created.clone().or_else(|| {
        (view.name == "create_file")
            .then(|| view.args.get("content").and_then(Value::as_str))
            .flatten()
            .map(Excerpt::head)
    })
}

/// A result without the `[keel: …]` note a repaired call starts with (shown on its own line).
fn without_repair_note(content: &str) -> &str {
    match content.strip_prefix("[keel: ") {
        Some(rest) => rest.split_once('\n').map_or("", |(_, body)| body),
        None => content,
    }
}

/// A command result's output without the status line and the `stdout:`/`stderr:` labels
/// (`run_command`'s format), for results stored before `output_tail` existed.
fn command_output(content: &str) -> String {
    content
        .lines()
        .enumerate()
        .filter(|(i, l)| {
            !(*i == 0 && (l.starts_with("exit code") || l.starts_with("killed by")))
                && *l != "stdout:"
                && *l != "stderr:"
        })
        .map(|(_, l)| l)
        .collect::<Vec<_>>()
        .join("\n")
}

/// The last `max` lines of a command's output, an exit code other than 0 under them.
fn output_lines(
    tail: &Excerpt,
    exit_code: Option<i32>,
    max: usize,
    hint: &str,
    theme: &Theme,
) -> Vec<Line<'static>> {
    let lines: Vec<&str> = tail.text.lines().collect();
    let shown = lines.len().min(max);
    let earlier = tail.total_lines.saturating_sub(shown);
    let mut out = Vec::new();
    if earlier > 0 {
        out.push(more_line(earlier, "earlier line", hint, theme));
    }
    out.extend(
        lines[lines.len() - shown..]
            .iter()
            .map(|l| Line::styled(format!("  {l}"), theme.dim)),
    );
    if let Some(code) = exit_code.filter(|c| *c != 0) {
        out.push(Line::styled(format!("  exit code {code}"), theme.error));
    }
    out
}

/// The first `max` non-blank lines of `text`.
fn head_lines(
    text: &str,
    style: Style,
    max: usize,
    hint: &str,
    theme: &Theme,
) -> Vec<Line<'static>> {
    let lines: Vec<Line<'static>> = text
        .trim_end()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| Line::styled(format!("  {l}"), style))
        .collect();
    limit(lines, max, hint, theme)
}

/// A created file's first lines, numbered and coloured by its extension's language.
fn file_lines(
    file: &Excerpt,
    path: &str,
    max: usize,
    hint: &str,
    theme: &Theme,
) -> Vec<Line<'static>> {
    let lang = path.rsplit('.').next().unwrap_or("");
    let lines: Vec<&str> = file.text.lines().collect();
    let shown = lines.len().min(max);
    let width = shown.max(1).to_string().len();
    let mut out: Vec<Line<'static>> = lines[..shown]
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let mut spans = vec![Span::styled(format!("  {:>width$} │ ", i + 1), theme.dim)];
            spans.extend(highlight(l, lang, theme));
            Line::from(spans)
        })
        .collect();
    let more = file.total_lines.saturating_sub(shown);
    if more > 0 {
        out.push(more_line(more, "more line", hint, theme));
    }
    out
}

/// A unified diff, coloured: additions, removals, hunk headers.
pub fn diff_lines(diff: &str, theme: &Theme) -> Vec<Line<'static>> {
    diff.lines()
        .map(|l| {
            let style = if l.starts_with("+++") || l.starts_with("---") {
                theme.bold
            } else if l.starts_with('+') {
                theme.added
            } else if l.starts_with('-') {
                theme.removed
            } else if l.starts_with("@@") {
                theme.hunk
            } else {
                theme.dim
            };
            Line::styled(format!("  {l}"), style)
        })
        .collect()
}

/// `lines` cut to `max`, with a note of how many more there are.
pub fn limit(
    mut lines: Vec<Line<'static>>,
    max: usize,
    hint: &str,
    theme: &Theme,
) -> Vec<Line<'static>> {
    if lines.len() > max {
        let more = lines.len() - max;
        lines.truncate(max);
        lines.push(more_line(more, "more line", hint, theme));
    }
    lines
}

/// `  … 3 more lines (Ctrl-O expands)`.
fn more_line(n: usize, what: &str, hint: &str, theme: &Theme) -> Line<'static> {
    let plural = if n == 1 { "" } else { "s" };
    let hint = if hint.is_empty() {
        String::new()
    } else {
        format!(" ({hint})")
    };
    Line::styled(format!("  … {n} {what}{plural}{hint}"), theme.dim)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat::markdown::plain;
    use serde_json::json;

    const FEW: Limits = Limits {
        diff: 3,
        file: 3,
        output: 2,
    };

    fn render(view: &ToolView<'_>) -> String {
        plain(&body(view, FEW, "Ctrl-O expands", &Theme::plain()))
    }

    #[test]
    fn a_created_file_shows_its_first_lines_numbered() {
        let details = ToolDetails {
            files: vec!["src/mul.rs".into()],
            created: Some(Excerpt::head(
                "pub fn mul(a: i32, b: i32) -> i32 {\n    a * b\n}\n\n// end\n",
            )),
            ..ToolDetails::default()
        };
        let view = ToolView {
            name: "create_file",
            args: &json!({"path": "src/mul.rs"}),
            is_error: false,
            content: "Created `src/mul.rs` (5 lines, 50 B).",
            details: &details,
        };
        assert_eq!(
            render(&view),
            "  1 │ pub fn mul(a: i32, b: i32) -> i32 {\n  2 │     a * b\n  3 │ }\n  … 2 more lines (Ctrl-O expands)"
        );
        // An event stored before `created` existed: the content comes from the arguments.
        let old = ToolDetails::default();
        let args = json!({"path": "a.py", "content": "x = 1\n"});
        let view = ToolView {
            args: &args,
            details: &old,
            ..view
        };
        assert_eq!(render(&view), "  1 │ x = 1");
    }

    #[test]
    fn a_command_shows_the_tail_of_its_output_and_a_failing_exit_code() {
        let details = ToolDetails {
            exit_code: Some(101),
            output_tail: Some(Excerpt::tail(
                "compiling\ntest a ... ok\ntest b ... FAILED\n",
            )),
            ..ToolDetails::default()
        };
        let view = ToolView {
            name: "run_command",
            args: &json!({"command": "cargo test"}),
            is_error: false,
            content: "exit code: 101\nstdout:\n…",
            details: &details,
        };
        assert_eq!(
            render(&view),
            "  … 1 earlier line (Ctrl-O expands)\n  test a ... ok\n  test b ... FAILED\n  exit code 101"
        );
        // Stored before `output_tail`: the result text, without its labels.
        let old = ToolDetails::default();
        let view = ToolView {
            content: "exit code: 0\nstdout:\nhello\nstderr:\nwarning",
            details: &old,
            ..view
        };
        assert_eq!(render(&view), "  hello\n  warning");
    }

    #[test]
    fn an_error_shows_its_message_and_a_diff_wins_over_the_text() {
        let none = ToolDetails::default();
        let view = ToolView {
            name: "edit_file",
            args: &json!({}),
            is_error: true,
            content: "[keel: arguments repaired]\nno match for `a + b`\n\nclosest lines:\n 3 | a+b",
            details: &none,
        };
        assert_eq!(
            render(&view),
            "  no match for `a + b`\n  closest lines:\n  … 1 more line (Ctrl-O expands)"
        );
        let edit = ToolDetails {
            diff: Some("--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n".into()),
            ..ToolDetails::default()
        };
        let view = ToolView {
            is_error: false,
            details: &edit,
            content: "Edited x",
            ..view
        };
        assert_eq!(
            render(&view),
            "  --- a/x\n  +++ b/x\n  @@ -1 +1 @@\n  … 2 more lines (Ctrl-O expands)"
        );
        let all = plain(&body(&view, Limits::ALL, "", &Theme::plain()));
        assert!(all.ends_with("  -a\n  +b"), "{all}");
    }
}
