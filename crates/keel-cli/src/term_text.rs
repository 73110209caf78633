//! Text from the model, tools and the repository made safe for a terminal: control characters
//! (escape sequences that write the clipboard, retitle the window, clear the screen or move
//! the cursor up to erase lines) become visible caret notation (`^[`). Keel's own colours are
//! added after this, so they still work. `--json` output is not touched.

use keel_protocol::Event;

/// `text` with every control character but newline and tab shown as caret notation (`^[`,
/// `^G`, `^M` for a lone carriage return, `^?`) or `<U+009B>` for C1 controls (and
/// `<U+202E>` for bidi controls).
pub(crate) fn visible(text: &str) -> std::borrow::Cow<'_, str> {
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
pub(crate) fn needs_escape(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t')
        || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `event` with every string in it made [`visible`] (the model's text, tool output, arguments,
/// error messages); the event itself when nothing needs it.
pub(crate) fn clean_event(event: &Event) -> std::borrow::Cow<'_, Event> {
    fn walk(v: &mut serde_json::Value) -> bool {
        match v {
            serde_json::Value::String(s) => match visible(s) {
                std::borrow::Cow::Owned(clean) => {
                    *s = clean;
                    true
                }
                std::borrow::Cow::Borrowed(_) => false,
            },
            // Every item is walked (no short circuit): each may need cleaning.
            serde_json::Value::Array(items) => {
                items.iter_mut().map(walk).filter(|c| *c).count() > 0
            }
            serde_json::Value::Object(map) => map.values_mut().map(walk).filter(|c| *c).count() > 0,
            _ => false,
        }
    }
    let Ok(mut value) = serde_json::to_value(event) else {
        return std::borrow::Cow::Borrowed(event);
    };
    if !walk(&mut value) {
        return std::borrow::Cow::Borrowed(event);
    }
    match serde_json::from_value(value) {
        Ok(clean) => std::borrow::Cow::Owned(clean),
        Err(_) => std::borrow::Cow::Borrowed(event),
    }
}

#[cfg(test)]
mod tests {
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
}
