//! The worker's messages to its terminal (`keel worker` in the foreground, or a log a terminal
//! later shows): attempt failures, checkout errors, flow results. They carry text a repository
//! or a model chose — a git error's stderr, a flow's name, a session's failure message — so
//! each line goes through the one cleaning path (`keel_tools::text::visible`, the one
//! `keel`'s own output uses): an escape sequence in it is shown (`^[`), never obeyed (no
//! clipboard write, no retitled window, no erased lines). `clippy.toml` forbids `eprintln!`
//! and friends in this crate, so a new message cannot skip it.

/// Writes one worker message, cleaned, to stderr.
macro_rules! tell {
    ($($arg:tt)*) => {
        $crate::notice::write_line(&format!($($arg)*))
    };
}
pub(crate) use tell;

/// `text` as the worker prints it: control characters made visible.
pub(crate) fn line(text: &str) -> String {
    format!("{}\n", keel_tools::text::visible(text))
}

/// Writes `text` as one cleaned line to stderr (errors writing it are ignored, as
/// `eprintln!`'s would panic).
pub(crate) fn write_line(text: &str) {
    use std::io::Write;
    // The one sanctioned writer: the text is cleaned just above.
    #[allow(clippy::disallowed_methods)]
    let mut err = std::io::stderr().lock();
    let _ = err.write_all(line(text).as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A checkout error or a failed turn carrying an OSC 52 clipboard write, a title change
    /// and a cursor-up + erase line (as a hostile remote's git stderr or a model's text can):
    /// shown, not obeyed.
    #[test]
    fn worker_messages_show_escape_sequences_instead_of_obeying_them() {
        let message = format!(
            "keel worker: session s1: cannot check out {}: fatal: \u{1b}]52;c;cm0gLXJmIH4K\u{7}\u{1b}]0;pwned\u{7}\u{1b}[1A\u{1b}[2Kall good\u{9b}2J",
            "https://example.invalid/r.git"
        );
        let shown = line(&message);
        assert!(
            !shown.trim_end_matches('\n').chars().any(|c| c.is_control()),
            "{shown:?}"
        );
        assert!(shown.contains("^[]52;c;cm0gLXJmIH4K^G"), "{shown:?}");
        assert!(shown.ends_with("all good<U+009B>2J\n"), "{shown:?}");
    }
}
