//! Query understanding: reads a bug report the way an engineer would.
//!
//! A long query (an issue: title, prose, tracebacks, snippets, config) is split into what
//! points at code: the title; traceback frames (Python, Rust panics and backtraces, JS stack
//! traces, Go panics), innermost first; error lines (exception type and message); the
//! identifiers of code spans and snippets; dotted module paths (`pvlib.iam.physical`,
//! `crate::net::http`); and whether the report is about tests. Prose is left to full-text
//! search, where it weighs little.

use std::collections::BTreeSet;

/// One stack frame named by a traceback.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// The path as printed (absolute, site-packages, `./src/…`).
    pub path: String,
    pub line: Option<usize>,
    pub function: Option<String>,
}

/// An error line: `TypeError: message`, `panic: message`, `panicked at 'message'`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorLine {
    /// The exception or error type, when one is named (`TypeError`, `SQLParseError`).
    pub kind: Option<String>,
    pub message: String,
}

/// What a report names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// The first non-empty line.
    pub title: String,
    /// Traceback frames, innermost first (whatever order the language prints them in).
    pub frames: Vec<Frame>,
    pub errors: Vec<ErrorLine>,
    /// Identifiers from inline code spans and the title (`suppress_invalid_tags`,
    /// `Dict.getitem` → `Dict`, `getitem`), in order, each once.
    pub span_identifiers: Vec<String>,
    /// Identifiers from fenced code blocks and indented snippets (weaker: snippets also hold
    /// the reporter's own names).
    pub block_identifiers: Vec<String>,
    /// Dotted or `::` names split into parts (`pvlib.iam.physical` → pvlib, iam, physical).
    pub dotted: Vec<Vec<String>>,
    /// Config and option names (`max_line_length`, `--no-verbose`, keys of config snippets).
    pub config_keys: Vec<super::config_keys::ConfigKey>,
    /// The report asks about tests (its title names tests, fixtures or pytest).
    pub about_tests: bool,
    /// The title describes a fault (`Fix false positive …`, `… crashes`, `… is not
    /// rendered`): what is asked for is the code behind a behaviour, not its docs.
    pub fault: bool,
    /// More than a one-line query: the report pipeline applies.
    pub long: bool,
}

/// Words that are never worth a symbol lookup: keywords and builtins of the usual languages,
/// and the names every snippet uses.
const NOT_IDENTIFIERS: &[&str] = &[
    "and",
    "as",
    "assert",
    "async",
    "await",
    "break",
    "case",
    "catch",
    "class",
    "const",
    "continue",
    "def",
    "del",
    "elif",
    "else",
    "enum",
    "except",
    "export",
    "extends",
    "false",
    "finally",
    "fn",
    "for",
    "from",
    "func",
    "function",
    "global",
    "go",
    "if",
    "impl",
    "import",
    "in",
    "interface",
    "is",
    "lambda",
    "let",
    "match",
    "mod",
    "mut",
    "new",
    "nil",
    "none",
    "nonlocal",
    "not",
    "null",
    "or",
    "package",
    "pass",
    "pub",
    "raise",
    "return",
    "self",
    "static",
    "struct",
    "super",
    "switch",
    "this",
    "throw",
    "true",
    "try",
    "type",
    "undefined",
    "use",
    "var",
    "while",
    "with",
    "yield",
    "print",
    "println",
    "len",
    "str",
    "int",
    "float",
    "dict",
    "list",
    "tuple",
    "set",
    "bool",
    "object",
    "range",
    "open",
    "main",
    "init",
    "args",
    "kwargs",
    "np",
    "pd",
    "os",
    "sys",
    "re",
    "json",
    "numpy",
    "pandas",
    "python",
    "traceback",
    "most",
    "recent",
    "call",
    "last",
    "file",
    "line",
    "module",
    "stdin",
    "error",
    "warning",
    "err",
    "ok",
    "some",
    "unwrap",
    "expect",
    "console",
    "log",
    "require",
    "value",
    "data",
    "result",
    "test",
    "foo",
    "bar",
    "baz",
    "example",
    "x",
    "y",
    "i",
    "e",
];

fn is_noise(ident: &str) -> bool {
    let lower = ident.to_ascii_lowercase();
    ident.len() < 3
        || NOT_IDENTIFIERS.contains(&lower.as_str())
        // Dunder names (`__init__`) are in every class.
        || (ident.starts_with("__") && ident.ends_with("__"))
}

/// Error type names: `TypeError`, `pydicom.errors.InvalidDicomError`, `IOException`.
fn looks_error_kind(word: &str) -> bool {
    let last = word.rsplit('.').next().unwrap_or(word);
    last.chars().next().is_some_and(|c| c.is_ascii_uppercase())
        && last.chars().all(|c| c.is_alphanumeric() || c == '_')
        && [
            "Error",
            "Exception",
            "Warning",
            "Exit",
            "Interrupt",
            "Fault",
            "Failure",
        ]
        .iter()
        .any(|s| last.ends_with(s))
}

impl Report {
    /// Analyses a query. Short queries come back with `long: false` and little else.
    pub fn parse(text: &str) -> Report {
        let mut r = Report {
            title: text
                .lines()
                .map(str::trim)
                .find(|l| !l.is_empty())
                .unwrap_or("")
                .to_string(),
            ..Report::default()
        };
        r.long = text.trim().contains('\n') || text.split_whitespace().count() > 15;
        let title_lower = r.title.to_lowercase();
        r.about_tests = title_lower
            .split(|c: char| !c.is_alphanumeric() && c != '_')
            .any(|w| {
                matches!(
                    w,
                    "test"
                        | "tests"
                        | "testing"
                        | "pytest"
                        | "unittest"
                        | "fixture"
                        | "fixtures"
                        | "conftest"
                        | "testcase"
                )
            });
        r.fault = describes_fault(&title_lower);
        let mut python_frames = Vec::new();
        let mut other_frames = Vec::new();
        let lines: Vec<&str> = text.lines().collect();
        let mut in_block = false;
        let mut seen_span = BTreeSet::new();
        let mut seen_block = BTreeSet::new();
        let mut seen_dotted = BTreeSet::new();
        // The source line Python prints under a frame quotes the call into the next frame:
        // its names are the traceback's own, already weighed as frames. Only the innermost
        // frame's line (the failing statement) counts as a snippet.
        let mut after_frame = false;
        let mut innermost_line: Option<&str> = None;
        let dumps = environment_dumps(&lines);
        for (i, raw) in lines.iter().enumerate() {
            if dumps.contains(&i) {
                continue;
            }
            let line = raw.trim();
            let echo = std::mem::take(&mut after_frame);
            if echo && !line.is_empty() && (raw.starts_with(' ') || raw.starts_with('\t')) {
                innermost_line = Some(line);
                continue;
            }
            if line.starts_with("```") || line.starts_with("~~~") {
                in_block = !in_block;
                continue;
            }
            // Python 3.11's `^^^^` markers under the failing expression.
            if line.contains('^') && line.chars().all(|c| matches!(c, '^' | '~' | ' ')) {
                continue;
            }
            if line.contains("panicked at '")
                && let Some(e) = error_line(line)
            {
                r.errors.push(e);
            }
            if let Some(f) = python_frame(line) {
                python_frames.push(f);
                after_frame = true;
                continue;
            }
            if let Some(f) = js_frame(line).filter(|_| line.contains(" (")) {
                other_frames.push(f);
                continue;
            }
            if let Some((f, e)) = warning_line(line) {
                other_frames.push(f);
                r.errors.push(e);
                continue;
            }
            if let Some(f) = go_or_rust_location(line, i.checked_sub(1).map(|j| lines[j])) {
                other_frames.push(f);
                continue;
            }
            let code = in_block || raw.starts_with("    ") || raw.starts_with('\t');
            if !line.contains("panicked at '")
                && let Some(e) =
                    error_line(line).or_else(|| code.then(|| custom_error_line(line)).flatten())
            {
                r.errors.push(e);
            }
            if code || i == 0 || line == r.title {
                let (idents, seen) = if code && line != r.title {
                    (&mut r.block_identifiers, &mut seen_block)
                } else {
                    (&mut r.span_identifiers, &mut seen_span)
                };
                collect_identifiers(line, idents, seen, &mut r.dotted, &mut seen_dotted, code);
            }
            if !code {
                for span in inline_spans(line) {
                    if let Some(e) = error_line(span) {
                        r.errors.push(e);
                    }
                    collect_identifiers(
                        span,
                        &mut r.span_identifiers,
                        &mut seen_span,
                        &mut r.dotted,
                        &mut seen_dotted,
                        true,
                    );
                }
            }
        }
        if let Some(line) = innermost_line {
            collect_identifiers(
                line,
                &mut r.block_identifiers,
                &mut seen_block,
                &mut r.dotted,
                &mut seen_dotted,
                true,
            );
        }
        // Python prints the innermost frame last; the others print it first.
        python_frames.reverse();
        r.frames = python_frames;
        r.frames.extend(other_frames);
        // An identifier in a span or the title need not be looked up again as a block one.
        r.block_identifiers.retain(|b| !seen_span.contains(b));
        let kept: String = if dumps.is_empty() {
            text.to_string()
        } else {
            lines
                .iter()
                .enumerate()
                .filter(|(i, _)| !dumps.contains(i))
                .map(|(_, l)| *l)
                .collect::<Vec<_>>()
                .join("\n")
        };
        r.config_keys = super::config_keys::keys(&kept, &r.span_identifiers);
        r
    }
}

impl Report {
    /// The text the ordinary hybrid pipeline searches for a long report: the title, the
    /// identifiers of code spans and the error lines, without the prose and snippets around
    /// them (those reach the ranking through [`Report`]'s other fields and a low-weight
    /// full-text pass).
    pub fn focus_text(&self) -> String {
        let mut out = self.title.clone();
        // In backticks: names, not the words of a sentence (`QueryTerms::sentence_capitals`).
        for i in &self.span_identifiers {
            out.push_str(" `");
            out.push_str(i);
            out.push('`');
        }
        for e in self.errors.iter().take(4) {
            out.push('\n');
            if let Some(k) = &e.kind {
                out.push_str(k);
                out.push_str(": ");
            }
            out.push_str(&e.message);
        }
        out
    }
}

/// `File "path", line 12, in func`.
fn python_frame(line: &str) -> Option<Frame> {
    let rest = line.strip_prefix("File \"")?;
    let (path, rest) = rest.split_once('"')?;
    let mut frame = Frame {
        path: path.to_string(),
        line: None,
        function: None,
    };
    if let Some((_, after)) = rest.split_once("line ") {
        let digits: String = after.chars().take_while(char::is_ascii_digit).collect();
        frame.line = digits.parse().ok();
    }
    if let Some((_, func)) = rest.split_once(", in ") {
        let func = func.trim();
        if !func.starts_with('<') && !func.is_empty() {
            frame.function = Some(func.to_string());
        }
    }
    Some(frame)
}

/// `path:line[:col]` at the end of `s` (trailing `)` and ` +0x1d` removed).
fn path_line_col(s: &str) -> Option<(String, Option<usize>)> {
    let s = s.trim().trim_end_matches(')').trim_end_matches(',');
    let s = s.split(" +0x").next().unwrap_or(s);
    let s = s.strip_prefix("file://").unwrap_or(s);
    let mut parts: Vec<&str> = s.rsplitn(3, ':').collect();
    parts.reverse();
    let (path, line) = match parts.as_slice() {
        [p, l, c] if c.chars().all(|ch| ch.is_ascii_digit()) => {
            if l.chars().all(|ch| ch.is_ascii_digit()) {
                (p.to_string(), l.parse().ok())
            } else {
                (format!("{p}:{l}"), c.parse().ok())
            }
        }
        [p, l] => (p.to_string(), l.parse().ok()),
        _ => return None,
    };
    line?;
    let file = path.rsplit(['/', '\\']).next().unwrap_or(&path);
    let has_ext = file
        .rsplit_once('.')
        .is_some_and(|(stem, ext)| !stem.is_empty() && (1..=5).contains(&ext.len()));
    if !has_ext || path.contains(' ') {
        return None;
    }
    Some((path, line))
}

/// `at func (path:line:col)` or `at path:line:col` (JS/TS stack traces).
fn js_frame(line: &str) -> Option<Frame> {
    let rest = line.strip_prefix("at ")?;
    if let Some((func, loc)) = rest.split_once(" (") {
        let (path, line) = path_line_col(loc)?;
        let func = func
            .trim()
            .trim_start_matches("async ")
            .trim_start_matches("new ");
        let func = func.rsplit('.').next().unwrap_or(func);
        Some(Frame {
            path,
            line,
            function: (!func.is_empty() && !func.contains('<')).then(|| func.to_string()),
        })
    } else {
        let (path, line) = path_line_col(rest)?;
        Some(Frame {
            path,
            line,
            function: None,
        })
    }
}

/// Go (`\t/path/file.go:123 +0x1d` under `pkg.(*T).Method(...)`) and Rust (`at ./src/x.rs:12:5`
/// under `3: crate::mod::func`; `panicked at src/main.rs:10:5`) locations.
fn go_or_rust_location(line: &str, prev: Option<&str>) -> Option<Frame> {
    let loc = if let Some(rest) = line.strip_prefix("at ") {
        rest
    } else if let Some((_, rest)) = line.split_once("panicked at ") {
        // Old format: `panicked at 'msg', src/main.rs:10:5`; new: `panicked at src/main.rs:10:5:`.
        let rest = rest.trim_end_matches(':');
        match rest.rsplit_once("', ") {
            Some((_, loc)) => loc,
            None => rest,
        }
    } else if line.contains(".go:") || line.contains(".rs:") {
        line
    } else {
        return None;
    };
    let (path, line_no) = path_line_col(loc)?;
    // The function is on the line before (Go: `main.(*T).run(...)`; Rust: `3: a::b::run`).
    let function = prev.and_then(|p| {
        let p = p.trim();
        if p.starts_with("at ") {
            return None;
        }
        let p = p
            .split_once(": ")
            .filter(|(n, _)| n.chars().all(|c| c.is_ascii_digit()))
            .map_or(p, |(_, f)| f);
        let p = strip_call_args(p);
        let name = p.rsplit(['.', ':']).find(|s| !s.is_empty())?;
        let name = name.trim_matches(|c: char| !(c.is_alphanumeric() || c == '_'));
        (!name.is_empty() && name != "{{closure}}" && !name.contains(' ')).then(|| name.to_string())
    });
    Some(Frame {
        path,
        line: line_no,
        function,
    })
}

/// Python warnings and compiler-style diagnostics: `path.py:470: FutureWarning: message`.
fn warning_line(line: &str) -> Option<(Frame, ErrorLine)> {
    let mut parts = line.splitn(4, ": ");
    let loc = parts.next()?;
    let kind = parts.next()?.trim();
    let message = parts.next().map(str::trim).unwrap_or("");
    if !looks_error_kind(kind) {
        return None;
    }
    let (path, line_no) = path_line_col(loc)?;
    Some((
        Frame {
            path,
            line: line_no,
            function: None,
        },
        ErrorLine {
            kind: Some(kind.to_string()),
            message: message.to_string(),
        },
    ))
}

/// `pkg.(*T).Put(0xc0, {0x4b})` → `pkg.(*T).Put`: drops a trailing balanced argument list.
fn strip_call_args(s: &str) -> &str {
    if !s.ends_with(')') {
        return s;
    }
    let mut depth = 0i32;
    for (i, c) in s.char_indices().rev() {
        match c {
            ')' => depth += 1,
            '(' => {
                depth -= 1;
                if depth == 0 {
                    return &s[..i];
                }
            }
            _ => {}
        }
    }
    s
}

/// `TypeError: msg`, `pkg.errors.FooError: msg`, `panic: msg`, `Error: msg`,
/// `thread 'main' panicked at 'msg'`.
fn error_line(line: &str) -> Option<ErrorLine> {
    if let Some(msg) = line.strip_prefix("panic: ") {
        return Some(ErrorLine {
            kind: None,
            message: msg.trim().to_string(),
        });
    }
    if let Some((_, rest)) = line.split_once("panicked at '") {
        let msg = rest.rsplit_once("', ").map_or(rest, |(m, _)| m);
        return Some(ErrorLine {
            kind: None,
            message: msg.to_string(),
        });
    }
    let (head, msg) = match line.split_once(':') {
        Some((h, m)) => (h.trim(), m.trim()),
        None => (line.trim(), ""),
    };
    if head == "Error" && !msg.is_empty() {
        return Some(ErrorLine {
            kind: None,
            message: msg.to_string(),
        });
    }
    let head = head
        .trim_start_matches("raise ")
        .trim_start_matches("E ")
        .trim();
    if !head.contains(' ') && looks_error_kind(head) {
        let kind = head.rsplit('.').next().unwrap_or(head).to_string();
        return Some(ErrorLine {
            kind: Some(kind),
            message: msg.to_string(),
        });
    }
    None
}

/// In code: `OutOfStock: message`, `shop.errors.OutOfStock: message` (an exception class
/// whose name does not say Error).
fn custom_error_line(line: &str) -> Option<ErrorLine> {
    let (head, msg) = line.split_once(": ")?;
    let last = head.rsplit('.').next().unwrap_or(head);
    let camel = last.chars().next().is_some_and(|c| c.is_ascii_uppercase())
        && last.chars().skip(1).any(|c| c.is_ascii_uppercase())
        && last.chars().any(|c| c.is_ascii_lowercase())
        && head
            .chars()
            .all(|c| c.is_alphanumeric() || c == '_' || c == '.');
    (camel && !msg.trim().is_empty()).then(|| ErrorLine {
        kind: Some(last.to_string()),
        message: msg.trim().to_string(),
    })
}

/// The contents of inline `code spans` of a line.
fn inline_spans(line: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(start) = rest.find('`') {
        let after = &rest[start + 1..];
        let Some(end) = after.find('`') else { break };
        if end > 0 {
            out.push(&after[..end]);
        }
        rest = &after[end + 1..];
    }
    out
}

/// The lines of fenced blocks that are environment reports (`pv.Report()`, `dvc version`,
/// `print_config()`, `pip freeze`: `OS : Linux`, `numpy : 1.24.2`, `pydicom 2.1.0`): the
/// reporter's machine, not the project's code. Their names (`vendor`, `version`, package
/// names) would otherwise be looked up as identifiers.
fn environment_dumps(lines: &[&str]) -> BTreeSet<usize> {
    let mut out = BTreeSet::new();
    let mut block: Option<usize> = None;
    for (i, raw) in lines.iter().enumerate() {
        let line = raw.trim();
        if !(line.starts_with("```") || line.starts_with("~~~")) {
            continue;
        }
        match block.take() {
            None => block = Some(i + 1),
            Some(start) => {
                let (mut env, mut other) = (0usize, 0usize);
                for l in &lines[start..i] {
                    match environment_line(l.trim()) {
                        Some(true) => env += 1,
                        Some(false) => other += 1,
                        None => {}
                    }
                }
                if env >= 3 && env >= other {
                    out.extend(start..i);
                }
            }
        }
    }
    out
}

/// `Some(true)` for a line of an environment report (`GPU Vendor : Mesa`, `numpy : 1.24.2`,
/// `MONAI version: 0.6.0`, `pydicom 2.1.0`), `None` for a separator or blank, `Some(false)`
/// otherwise.
fn environment_line(line: &str) -> Option<bool> {
    if line.is_empty()
        || line
            .chars()
            .all(|c| matches!(c, '-' | '=' | '_' | '*' | '#' | ' '))
    {
        return None;
    }
    let versionish = |v: &str| {
        let v = v.trim_start_matches(['v', 'V']);
        let mut parts = v.split('.');
        parts
            .next()
            .is_some_and(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
            && parts
                .next()
                .is_some_and(|p| p.chars().next().is_some_and(|c| c.is_ascii_digit()))
    };
    if let Some((key, value)) = line.split_once(':') {
        let key = key.trim();
        let value = value.trim();
        let label = !key.is_empty()
            && key.len() <= 40
            && key.chars().next().is_some_and(char::is_alphabetic)
            && key.chars().all(|c| {
                c.is_alphanumeric() || matches!(c, ' ' | '(' | ')' | '.' | '-' | '_' | '/')
            });
        if label && !value.is_empty() {
            let spaced = key.contains(' ') || key.to_lowercase().contains("version");
            return Some(spaced || value.split_whitespace().any(versionish));
        }
    }
    let mut words = line.split_whitespace();
    let name = words.next().unwrap_or("");
    let named = name.len() <= 30 && name.chars().next().is_some_and(char::is_alphabetic);
    Some(named && words.next().is_some_and(versionish))
}

/// Identifier-like tokens of code: dotted names are kept whole in `dotted` and each part is
/// an identifier. In prose (`code` false) only tokens that look like code count (mixed
/// case, `_`, dots between words, a call).
/// Whether a (lowercase) title describes a fault: it names a bug, a failure or an error,
/// or says something is not done.
fn describes_fault(title_lower: &str) -> bool {
    title_lower
        .split(|c: char| !c.is_alphanumeric() && c != '\'')
        .any(|w| {
            matches!(
                w,
                "bug"
                    | "fix"
                    | "fixed"
                    | "fixes"
                    | "crash"
                    | "crashes"
                    | "crashed"
                    | "error"
                    | "errors"
                    | "exception"
                    | "fail"
                    | "fails"
                    | "failed"
                    | "failure"
                    | "false"
                    | "incorrect"
                    | "incorrectly"
                    | "wrong"
                    | "wrongly"
                    | "broken"
                    | "regression"
                    | "raise"
                    | "raises"
                    | "raised"
                    | "warning"
                    | "warnings"
                    | "unexpected"
                    | "ignored"
                    | "ignores"
                    | "missing"
                    | "doesn't"
                    | "isn't"
                    | "cannot"
                    | "can't"
                    | "not"
            )
        })
}

fn collect_identifiers(
    text: &str,
    out: &mut Vec<String>,
    seen: &mut BTreeSet<String>,
    dotted: &mut Vec<Vec<String>>,
    seen_dotted: &mut BTreeSet<String>,
    code: bool,
) {
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if !(c.is_alphabetic() || c == '_') || (i > 0 && chars[i - 1].is_alphanumeric()) {
            i += 1;
            continue;
        }
        let start = i;
        while i < chars.len()
            && (chars[i].is_alphanumeric()
                || chars[i] == '_'
                || ((chars[i] == '.' || chars[i] == ':')
                    && chars
                        .get(i + 1)
                        .is_some_and(|n| n.is_alphabetic() || *n == '_' || *n == ':')))
        {
            i += 1;
        }
        let token: String = chars[start..i].iter().collect();
        let token = token.trim_matches(|c: char| c == '.' || c == ':');
        let call = chars.get(i) == Some(&'(');
        let parts: Vec<String> = token
            .split(['.', ':'])
            .filter(|p| !p.is_empty())
            .map(str::to_string)
            .collect();
        if parts.len() > 1 && seen_dotted.insert(parts.join(".")) {
            dotted.push(parts.clone());
        }
        for (k, part) in parts.iter().enumerate() {
            let looks_code = part.contains('_')
                || part.chars().skip(1).any(|c| c.is_uppercase())
                || parts.len() > 1
                || (call && k + 1 == parts.len());
            if (code || looks_code) && !is_noise(part) && seen.insert(part.clone()) {
                out.push(part.clone());
            }
        }
    }
}

#[cfg(test)]
#[path = "report_tests.rs"]
mod tests;
