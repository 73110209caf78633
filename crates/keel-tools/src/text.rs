//! Text helpers shared by tools: budgets that keep both ends of long output, and file names
//! made safe to print.

/// The most characters a tool returns as its result text. Tools hand over their whole output
/// up to this safety cap (a marker stands where even more was left out); the engine applies
/// the per-result budget (`agent.max_output_chars`) and keeps anything longer whole, behind a
/// handle the model pages through with `read_result`.
pub const OUTPUT_CAP_CHARS: usize = 2_000_000;

/// `n` and the noun in its number: `1 line`, `2 lines`, `0 entries` (`count(n, "entry",
/// "entries")`).
pub fn count(n: usize, one: &str, many: &str) -> String {
    if n == 1 {
        format!("1 {one}")
    } else {
        format!("{n} {many}")
    }
}

/// `text` made safe for a terminal (`keel` commands, `keel chat`, `keel worker`'s messages):
/// every control character but newline and tab shown as caret notation (`^[`,
/// `^G`, `^M` for a lone carriage return, `^?`) or `<U+009B>` for C1 controls (and
/// `<U+202E>` for bidi controls).
pub fn visible(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(needs_escape) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\r' if chars.peek() == Some(&'\n') => {}
            c if !needs_escape(c) => out.push(c),
            '\u{7f}' => out.push_str("^?"),
            c if (c as u32) < 0x20 => {
                out.push('^');
                out.push(char::from(c as u8 + 64));
            }
            c => out.push_str(&format!("<U+{:04X}>", c as u32)),
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Control characters but newline and tab, and the bidi controls that reorder what follows
/// (`U+202A`–`U+202E`, `U+2066`–`U+2069`: `txt.exe` shown as `exe.txt`).
pub fn needs_escape(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t')
        || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// A file name or path as tool output shows it: control characters (a newline, an escape
/// sequence, a carriage return) are escaped (`\n`, `\x1b`), so a crafted name cannot fake
/// extra lines or results in a listing.
pub fn escape_name(name: &str) -> std::borrow::Cow<'_, str> {
    if !name.chars().any(char::is_control) {
        return std::borrow::Cow::Borrowed(name);
    }
    let mut out = String::with_capacity(name.len() + 8);
    for c in name.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Shortens `text` to about `budget` characters by keeping its head and its tail and stating
/// how much was left out in between. Text within budget is returned unchanged. Cuts fall on
/// line boundaries when one is near, so the model never sees half a line at the seam.
pub fn truncate_middle(text: &str, budget: usize) -> String {
    truncate_middle_noted(text, budget, "")
}

/// [`truncate_middle`] with `why` appended to the marker (like `: the output passed the cap`).
pub fn truncate_middle_noted(text: &str, budget: usize, why: &str) -> String {
    let total = text.chars().count();
    if total <= budget {
        return text.to_string();
    }
    let head_chars = budget * 2 / 3;
    let tail_chars = budget.saturating_sub(head_chars);
    let head_end = byte_index(text, head_chars);
    let tail_start = byte_index(text, total - tail_chars);
    // Snap to newlines within 20% of the budget.
    let slack = budget / 5;
    let head_end = text[..head_end]
        .rfind('\n')
        .filter(|i| head_end - i <= slack)
        .map_or(head_end, |i| i + 1);
    let tail_start = text[tail_start..]
        .find('\n')
        .filter(|i| *i <= slack)
        .map_or(tail_start, |i| tail_start + i + 1);
    let omitted = text[head_end..tail_start].chars().count();
    let omitted_lines = text[head_end..tail_start].matches('\n').count();
    format!(
        "{}\n[… {omitted} characters ({omitted_lines} lines) omitted{why} …]\n{}",
        text[..head_end].trim_end_matches('\n'),
        &text[tail_start..]
    )
}

fn byte_index(text: &str, char_index: usize) -> usize {
    text.char_indices()
        .nth(char_index)
        .map_or(text.len(), |(i, _)| i)
}

#[cfg(test)]
mod tests {
    #[test]
    fn counts_agree_with_their_number() {
        assert_eq!(count(1, "line", "lines"), "1 line");
        assert_eq!(count(0, "line", "lines"), "0 lines");
        assert_eq!(count(2, "entry", "entries"), "2 entries");
    }

    use super::*;

    #[test]
    fn escape_sequences_are_shown_not_obeyed() {
        // Red-team B11: OSC 52 (clipboard), a window title, clear screen, cursor up + erase.
        let evil = "hi \u{1b}]52;c;cm0gLXJmIH4K\u{7} \u{1b}[1A\u{1b}[2K HIDDEN \u{9b}2J\rover";
        let shown = visible(evil);
        assert!(!shown.chars().any(|c| c.is_control()), "{shown:?}");
        assert_eq!(
            shown,
            "hi ^[]52;c;cm0gLXJmIH4K^G ^[[1A^[[2K HIDDEN <U+009B>2J^Mover"
        );
        assert_eq!(visible("a\tb\r\nc\n"), "a\tb\nc\n");
        assert!(matches!(visible("plain"), std::borrow::Cow::Borrowed(_)));
    }

    #[test]
    fn short_text_is_untouched() {
        assert_eq!(truncate_middle("abc", 10), "abc");
    }

    #[test]
    fn keeps_head_and_tail_and_counts_the_gap() {
        let text: String = (1..=1000).map(|i| format!("line {i}\n")).collect();
        let out = truncate_middle(&text, 300);
        assert!(out.starts_with("line 1\n"), "{out}");
        assert!(out.ends_with("line 1000\n"), "{out}");
        assert!(out.contains("characters ("), "{out}");
        assert!(out.len() < 420, "{}", out.len());
        let (head, rest) = out.split_once("\n[… ").unwrap_or_default();
        let (marker, tail) = rest.split_once(" …]\n").unwrap_or_default();
        let omitted: usize = marker
            .split(' ')
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        assert!(text.starts_with(head) && text.ends_with(tail));
        // The head lost only its final newline to the seam.
        assert_eq!(head.len() + 1 + omitted + tail.len(), text.len());
    }

    #[test]
    fn control_characters_in_names_are_escaped() {
        assert_eq!(escape_name("src/a.rs"), "src/a.rs");
        assert_eq!(escape_name("a\nb.txt"), "a\\nb.txt");
        assert_eq!(escape_name("x\x1b[31m\r"), "x\\x1b[31m\\r");
        assert!(!escape_name("é\u{7f}").contains('\u{7f}'));
    }

    #[test]
    fn multibyte_safe() {
        let text = "é".repeat(1000);
        let out = truncate_middle(&text, 100);
        assert!(out.contains("omitted"));
    }
}
