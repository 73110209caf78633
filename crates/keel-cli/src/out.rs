//! The one way `keel`'s commands write to the terminal: every byte goes through [`Clean`],
//! which shows control characters instead of obeying them (see [`crate::term_text::visible`]:
//! ESC/CSI/OSC sequences, a lone CR, BEL, C1 controls, bidi overrides, invalid UTF-8). A
//! repository's names, arguments, descriptions and error text — or a model's — therefore
//! cannot clear lines, hide text, retitle the window or write the clipboard, whichever command
//! prints them. Keel's own colours are written after cleaning, with [`Clean::style`] (static
//! strings only).
//!
//! `say!`/`tell!` replace `println!`/`eprintln!` (and `say_part!` `print!`); [`stdout`]/[`stderr`] replace `std::io::stdout()`/`stderr()`. keel-cli's
//! `clippy.toml` forbids the std macros and functions everywhere else, so a new command cannot
//! print raw by accident. The few raw writers — the event renderer (it cleans every event with
//! [`crate::term_text::clean_event`] before styling), the full-screen chat, `keel sandbox`'s
//! pass-through of the command's own output — say why where they allow it.
//!
//! JSON written here keeps its data: [`json_safe`] escapes what cleaning would change
//! (`\u009b`, `\u202e`) with JSON's own escapes first.

use std::io::{self, Write};

/// A writer that shows control characters instead of passing them on (see the module).
pub(crate) struct Clean<W: Write> {
    inner: W,
    /// An incomplete UTF-8 sequence, or a CR whose next byte is not known yet.
    pending: Vec<u8>,
}

impl<W: Write> Clean<W> {
    pub(crate) fn new(inner: W) -> Self {
        Self {
            inner,
            pending: Vec::new(),
        }
    }

    /// Writes one of Keel's own terminal styles (`"\x1b[1m"`) as it is.
    #[allow(dead_code)]
    pub(crate) fn style(&mut self, code: &'static str) -> io::Result<()> {
        self.drain(true)?;
        self.inner.write_all(code.as_bytes())
    }

    /// Cleans and writes what is pending; `all`: an incomplete tail too.
    fn drain(&mut self, all: bool) -> io::Result<()> {
        let mut out = String::new();
        let mut rest: &[u8] = &self.pending;
        loop {
            match std::str::from_utf8(rest) {
                Ok(s) => {
                    out.push_str(s);
                    rest = &[];
                    break;
                }
                Err(e) => {
                    let (good, bad) = rest.split_at(e.valid_up_to());
                    out.push_str(std::str::from_utf8(good).unwrap_or_default());
                    match e.error_len() {
                        Some(n) => {
                            for b in &bad[..n] {
                                out.push_str(&format!("\\x{b:02X}"));
                            }
                            rest = &bad[n..];
                        }
                        None if all => {
                            for b in bad {
                                out.push_str(&format!("\\x{b:02X}"));
                            }
                            rest = &[];
                            break;
                        }
                        None => {
                            rest = bad;
                            break;
                        }
                    }
                }
            }
        }
        // A CR at the very end may start a CRLF: keep it for the next write.
        let keep_cr = !all && rest.is_empty() && out.ends_with('\r');
        if keep_cr {
            out.pop();
        }
        let mut keep = rest.to_vec();
        if keep_cr {
            keep.insert(0, b'\r');
        }
        self.pending = keep;
        if out.is_empty() {
            return Ok(());
        }
        self.inner
            .write_all(crate::term_text::visible(&out).as_bytes())
    }
}

impl<W: Write> Write for Clean<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.pending.extend_from_slice(buf);
        self.drain(false)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.drain(true)?;
        self.inner.flush()
    }
}

impl<W: Write> Drop for Clean<W> {
    fn drop(&mut self) {
        let _ = self.drain(true);
        let _ = self.inner.flush();
    }
}

/// Standard output, cleaned (locked while the value lives).
#[allow(clippy::disallowed_methods)] // the one sanctioned raw handle, wrapped at once
pub(crate) fn stdout() -> Clean<io::StdoutLock<'static>> {
    Clean::new(io::stdout().lock())
}

/// Standard error, cleaned (locked while the value lives).
#[allow(clippy::disallowed_methods)] // the one sanctioned raw handle, wrapped at once
pub(crate) fn stderr() -> Clean<io::StderrLock<'static>> {
    Clean::new(io::stderr().lock())
}

/// Whether standard output / error is a terminal.
#[allow(clippy::disallowed_methods)] // no output: a question about the handle
pub(crate) fn stdout_is_terminal() -> bool {
    io::IsTerminal::is_terminal(&io::stdout())
}

#[allow(clippy::disallowed_methods)] // no output: a question about the handle
pub(crate) fn stderr_is_terminal() -> bool {
    io::IsTerminal::is_terminal(&io::stderr())
}

/// Raw standard output for the writers that clean what they write themselves (the event
/// renderer, the full-screen chat, `keel sandbox`'s pass-through) — each use says why.
#[allow(clippy::disallowed_methods)]
pub(crate) fn raw_stdout() -> io::Stdout {
    io::stdout()
}

/// Raw standard error (see [`raw_stdout`]).
#[allow(clippy::disallowed_methods)]
pub(crate) fn raw_stderr() -> io::Stderr {
    io::stderr()
}

/// Serialized JSON with every character cleaning would change (DEL, C1 controls, bidi
/// controls; serde escapes C0 already) written as a `\uXXXX` escape: the same data, and
/// nothing a terminal obeys.
pub(crate) fn json_safe(json: &str) -> std::borrow::Cow<'_, str> {
    if !json.chars().any(crate::term_text::needs_escape) {
        return std::borrow::Cow::Borrowed(json);
    }
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        if crate::term_text::needs_escape(c) {
            let mut buf = [0u16; 2];
            for unit in c.encode_utf16(&mut buf) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// `value` as one line of JSON made [`json_safe`].
pub(crate) fn json<T: serde::Serialize + ?Sized>(value: &T) -> serde_json::Result<String> {
    serde_json::to_string(value).map(|s| json_safe(&s).into_owned())
}

/// `value` as indented JSON made [`json_safe`].
pub(crate) fn json_pretty<T: serde::Serialize + ?Sized>(value: &T) -> serde_json::Result<String> {
    serde_json::to_string_pretty(value).map(|s| json_safe(&s).into_owned())
}

/// `println!` through [`stdout`] (a write error such as a closed pipe is ignored).
macro_rules! say {
    () => {{
        use std::io::Write as _;
        let _ = writeln!($crate::out::stdout());
    }};
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!($crate::out::stdout(), $($arg)*);
    }};
}

/// `print!` through [`stdout`], flushed.
macro_rules! say_part {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let mut out = $crate::out::stdout();
        let _ = write!(out, $($arg)*);
        let _ = out.flush();
    }};
}

/// `eprintln!` through [`stderr`].
macro_rules! tell {
    () => {{
        use std::io::Write as _;
        let _ = writeln!($crate::out::stderr());
    }};
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!($crate::out::stderr(), $($arg)*);
    }};
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cleaned(pieces: &[&[u8]]) -> String {
        let mut buf = Vec::new();
        {
            let mut w = Clean::new(&mut buf);
            for p in pieces {
                w.write_all(p).unwrap_or_else(|e| panic!("{e}"));
            }
        }
        String::from_utf8(buf).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn what_reaches_the_terminal_holds_no_control_character() {
        // Red-team R20's payloads: erase lines, move up, conceal, retitle, clipboard, CR.
        let evil = "x\r \u{1b}[2K\u{1b}[1A\u{1b}[2K\r  runs: ok\n  env: A=1 \u{1b}[8m \u{1b}]0;PWN\u{7}\u{1b}]52;c;cm0K\u{7}\u{9b}2J \u{202e}txt.exe\n";
        let shown = cleaned(&[evil.as_bytes()]);
        assert!(
            !shown.chars().any(|c| c.is_control() && c != '\n'),
            "{shown:?}"
        );
        assert!(!shown.contains('\u{202e}'), "{shown:?}");
        assert!(shown.contains("^[[2K") && shown.contains("^M") && shown.contains("<U+202E>"));
        // Split anywhere — inside a UTF-8 sequence, between CR and LF — the result is the same.
        let bytes = evil.as_bytes();
        for cut in 0..bytes.len() {
            assert_eq!(
                cleaned(&[&bytes[..cut], &bytes[cut..]]),
                shown,
                "cut at {cut}"
            );
        }
        assert_eq!(cleaned(&[b"a\r", b"\nb\n"]), "a\nb\n");
        assert_eq!(cleaned(&[b"a\r"]), "a^M");
        // Invalid UTF-8 (a raw 0x9B is CSI to an 8-bit terminal) is shown as bytes.
        assert_eq!(cleaned(&[b"a\x9b2Jb\xe2\x80"]), "a\\x9B2Jb\\xE2\\x80");
        // Keel's own styles pass, after cleaning.
        let mut buf = Vec::new();
        {
            let mut w = Clean::new(&mut buf);
            w.style("\u{1b}[1m").unwrap_or_else(|e| panic!("{e}"));
            w.write_all(b"\x1b[8mname")
                .unwrap_or_else(|e| panic!("{e}"));
            w.style("\u{1b}[0m").unwrap_or_else(|e| panic!("{e}"));
        }
        assert_eq!(buf, b"\x1b[1m^[[8mname\x1b[0m");
    }

    #[test]
    fn json_keeps_its_data_and_loses_its_control_characters() {
        let v = serde_json::json!({"name": "a\u{1b}[2J\u{9b}b\u{202e}c\u{7f}"});
        let text = serde_json::to_string(&v).unwrap_or_else(|e| panic!("{e}"));
        let safe = json_safe(&text);
        assert!(
            !safe.chars().any(|c| c.is_control() || c == '\u{202e}'),
            "{safe}"
        );
        let back: serde_json::Value = serde_json::from_str(&safe).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(back, v);
        assert_eq!(
            cleaned(&[safe.as_bytes()]),
            safe,
            "cleaning leaves it alone"
        );
    }
}
