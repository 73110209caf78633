//! Word wrapping of styled lines to the screen's width (display columns, not bytes).

use ratatui::style::Style;
use ratatui::text::{Line, Span};
use unicode_width::UnicodeWidthChar;

/// `line` broken into lines of at most `width` columns, at spaces where possible.
/// Continuation lines start with `indent` (also counted in the width).
pub fn wrap(line: &Line<'static>, width: usize, indent: &str) -> Vec<Line<'static>> {
    let width = width.max(4);
    let chars: Vec<(char, Style)> = line
        .spans
        .iter()
        .flat_map(|s| {
            let style = line.style.patch(s.style);
            s.content.chars().map(move |c| (c, style))
        })
        .collect();
    let total: usize = chars.iter().map(|(c, _)| c.width().unwrap_or(0)).sum();
    if total <= width {
        return vec![line.clone()];
    }
    let mut out = Vec::new();
    let mut start = 0;
    let mut first = true;
    while start < chars.len() {
        let room = if first {
            width
        } else {
            width.saturating_sub(indent.chars().count()).max(1)
        };
        let mut cols = 0;
        let mut end = start;
        let mut last_space = None;
        while end < chars.len() {
            let w = chars[end].0.width().unwrap_or(0);
            if cols + w > room {
                break;
            }
            if chars[end].0 == ' ' {
                last_space = Some(end);
            }
            cols += w;
            end += 1;
        }
        if end == start {
            end = start + 1; // one character wider than the room: show it anyway
        } else if end < chars.len()
            && let Some(space) = last_space.filter(|s| *s > start)
        {
            end = space + 1;
        }
        let mut spans: Vec<Span<'static>> = Vec::new();
        if !first && !indent.is_empty() {
            spans.push(Span::raw(indent.to_string()));
        }
        let piece = &chars[start..end];
        let mut i = 0;
        while i < piece.len() {
            let style = piece[i].1;
            let mut text = String::new();
            while i < piece.len() && piece[i].1 == style {
                text.push(piece[i].0);
                i += 1;
            }
            spans.push(Span::styled(text, style));
        }
        // A space that ended the line is not drawn.
        if let Some(last) = spans.last_mut()
            && last.content.ends_with(' ')
            && end < chars.len()
        {
            let trimmed = last.content.trim_end_matches(' ').to_string();
            last.content = trimmed.into();
        }
        out.push(Line::from(spans));
        start = end;
        first = false;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(lines: &[Line<'_>]) -> Vec<String> {
        lines
            .iter()
            .map(|l| l.spans.iter().map(|s| s.content.as_ref()).collect())
            .collect()
    }

    #[test]
    fn wraps_at_spaces_and_indents_continuations() {
        let line = Line::from("the quick brown fox jumps over");
        assert_eq!(
            text(&wrap(&line, 12, "  ")),
            vec!["the quick", "  brown fox", "  jumps over"]
        );
    }

    #[test]
    fn long_words_are_cut_and_wide_characters_counted_by_columns() {
        assert_eq!(
            text(&wrap(&Line::from("abcdefghij"), 4, "")),
            vec!["abcd", "efgh", "ij"]
        );
        assert_eq!(
            text(&wrap(&Line::from("日本語日本"), 4, "")),
            vec!["日本", "語日", "本"]
        );
    }
}
