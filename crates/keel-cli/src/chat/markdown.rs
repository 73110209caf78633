//! Markdown → styled terminal lines (pulldown-cmark), shared by `keel chat` and `keel run`:
//! headings, emphasis, inline code, lists, quotes, tables (columns fitted to the width, cells
//! wrapped inside their column) and fenced code blocks with light keyword colouring per
//! language. Re-rendered from the whole text on every change, so a streamed answer is always
//! shown as what it is so far.

use pulldown_cmark::{
    Alignment, CodeBlockKind, Event as Md, HeadingLevel, Options, Parser, Tag, TagEnd,
};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use unicode_width::UnicodeWidthStr;

use super::theme::Theme;
use super::wrap::wrap;

/// The narrowest a table column gets before the table is allowed to overflow.
const MIN_COLUMN: usize = 4;

/// Renders `text` as lines for a screen `width` columns wide. Only tables are laid out to the
/// width; other lines are not wrapped (see [`super::wrap`]).
pub fn render(text: &str, width: usize, theme: &Theme) -> Vec<Line<'static>> {
    let mut r = Renderer {
        theme,
        width,
        lines: Vec::new(),
        current: Vec::new(),
        styles: Vec::new(),
        lists: Vec::new(),
        code: None,
        quote: 0,
        prefix_pending: None,
        table: None,
    };
    let options = Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TABLES;
    for event in Parser::new_ext(text, options) {
        r.event(event);
    }
    if let Some((lang, body)) = r.code.take() {
        // An unterminated fence while the answer streams: show what came so far.
        r.code_block(&lang, &body);
    }
    if let Some(table) = r.table.take() {
        r.table_lines(table);
    }
    r.flush();
    while r.lines.last().is_some_and(|l| l.spans.is_empty()) {
        r.lines.pop();
    }
    r.lines
}

struct Renderer<'t> {
    theme: &'t Theme,
    width: usize,
    lines: Vec<Line<'static>>,
    current: Vec<Span<'static>>,
    styles: Vec<Style>,
    /// Open lists: the next number for ordered ones.
    lists: Vec<Option<u64>>,
    /// The open code block: its language and body so far.
    code: Option<(String, String)>,
    quote: usize,
    /// The bullet waiting for an item's first text.
    prefix_pending: Option<String>,
    /// The open table: its cells so far.
    table: Option<Table>,
}

/// A table being read: rows of cells of styled text.
#[derive(Default)]
struct Table {
    aligns: Vec<Alignment>,
    rows: Vec<Vec<Vec<Span<'static>>>>,
    /// Rows of the header (drawn bold, with a rule under them).
    head_rows: usize,
}

impl Renderer<'_> {
    fn style(&self) -> Style {
        self.styles
            .iter()
            .fold(Style::default(), |acc, s| acc.patch(*s))
    }

    fn push(&mut self, text: &str, style: Style) {
        if let Some(table) = self.table.as_mut() {
            let cell = table.rows.last_mut().and_then(|r| r.last_mut());
            if let Some(cell) = cell {
                cell.push(Span::styled(text.to_string(), style));
            }
            return;
        }
        if self.current.is_empty() {
            let indent = "  ".repeat(self.lists.len().saturating_sub(1));
            let quote = "│ ".repeat(self.quote);
            let bullet = self.prefix_pending.take();
            let lead = format!(
                "{quote}{indent}{}",
                bullet.clone().unwrap_or_else(|| if self.lists.is_empty() {
                    String::new()
                } else {
                    "  ".into()
                })
            );
            if !lead.is_empty() {
                self.current.push(Span::styled(lead, self.theme.dim));
            }
        }
        self.current.push(Span::styled(text.to_string(), style));
    }

    fn flush(&mut self) {
        if !self.current.is_empty() {
            self.lines
                .push(Line::from(std::mem::take(&mut self.current)));
        }
    }

    fn blank(&mut self) {
        self.flush();
        if self.lines.last().is_some_and(|l| !l.spans.is_empty()) {
            self.lines.push(Line::default());
        }
    }

    fn event(&mut self, event: Md<'_>) {
        if let Some((_, body)) = self.code.as_mut() {
            match event {
                Md::Text(t) => {
                    body.push_str(&t);
                    return;
                }
                Md::End(TagEnd::CodeBlock) => {
                    if let Some((lang, body)) = self.code.take() {
                        self.code_block(&lang, &body);
                    }
                    return;
                }
                _ => return,
            }
        }
        match event {
            Md::Start(tag) => self.start(tag),
            Md::End(tag) => self.end(tag),
            Md::Text(t) => {
                let style = self.style();
                let mut first = true;
                for part in t.split('\n') {
                    if !first {
                        self.flush();
                    }
                    first = false;
                    if !part.is_empty() {
                        self.push(part, style);
                    }
                }
            }
            Md::Code(t) => {
                let style = self.style().patch(self.theme.code);
                if self.theme.color {
                    self.push(&t, style);
                } else {
                    // Without colour the backticks are what marks code.
                    self.push(&format!("`{t}`"), style);
                }
            }
            Md::SoftBreak => {
                let style = self.style();
                self.push(" ", style);
            }
            Md::HardBreak => self.flush(),
            Md::Rule => {
                self.blank();
                self.lines
                    .push(Line::styled("─".repeat(20), self.theme.dim));
            }
            Md::TaskListMarker(done) => {
                let style = self.style();
                self.push(if done { "[x] " } else { "[ ] " }, style);
            }
            Md::Html(t) | Md::InlineHtml(t) => {
                let style = self.style();
                self.push(&t, style);
            }
            _ => {}
        }
    }

    fn start(&mut self, tag: Tag<'_>) {
        match tag {
            Tag::Paragraph if self.lists.is_empty() => self.blank(),
            Tag::Heading { level, .. } => {
                self.blank();
                let marks = match level {
                    HeadingLevel::H1 => "# ",
                    HeadingLevel::H2 => "## ",
                    _ => "### ",
                };
                self.styles.push(self.theme.heading);
                self.push(marks, self.theme.heading);
            }
            Tag::BlockQuote(_) => {
                self.blank();
                self.quote += 1;
                self.styles.push(self.theme.dim);
            }
            Tag::CodeBlock(kind) => {
                self.blank();
                let lang = match kind {
                    CodeBlockKind::Fenced(l) => {
                        l.split([',', ' ']).next().unwrap_or("").to_string()
                    }
                    CodeBlockKind::Indented => String::new(),
                };
                self.code = Some((lang, String::new()));
            }
            Tag::List(start) => {
                if self.lists.is_empty() {
                    self.blank();
                } else {
                    self.flush();
                }
                self.lists.push(start);
            }
            Tag::Item => {
                self.flush();
                let bullet = match self.lists.last_mut() {
                    Some(Some(n)) => {
                        let b = format!("{n}. ");
                        *n += 1;
                        b
                    }
                    _ => "• ".to_string(),
                };
                self.prefix_pending = Some(bullet);
            }
            Tag::Emphasis => self
                .styles
                .push(Style::default().add_modifier(Modifier::ITALIC)),
            Tag::Strong => self
                .styles
                .push(Style::default().add_modifier(Modifier::BOLD)),
            Tag::Strikethrough => self
                .styles
                .push(Style::default().add_modifier(Modifier::CROSSED_OUT)),
            Tag::Link { .. } => self.styles.push(self.theme.link),
            Tag::Table(aligns) => {
                self.blank();
                self.table = Some(Table {
                    aligns,
                    ..Table::default()
                });
            }
            Tag::TableHead => {
                self.styles.push(self.theme.bold);
                if let Some(t) = self.table.as_mut() {
                    t.rows.push(Vec::new());
                }
            }
            Tag::TableRow => {
                if let Some(t) = self.table.as_mut() {
                    t.rows.push(Vec::new());
                }
            }
            Tag::TableCell => {
                if let Some(row) = self.table.as_mut().and_then(|t| t.rows.last_mut()) {
                    row.push(Vec::new());
                }
            }
            _ => {}
        }
    }

    fn end(&mut self, tag: TagEnd) {
        match tag {
            TagEnd::Paragraph => self.flush(),
            TagEnd::Heading(_) => {
                self.styles.pop();
                self.flush();
            }
            TagEnd::BlockQuote(_) => {
                self.flush();
                self.quote = self.quote.saturating_sub(1);
                self.styles.pop();
            }
            TagEnd::List(_) => {
                self.flush();
                self.lists.pop();
            }
            TagEnd::Item => self.flush(),
            TagEnd::Emphasis | TagEnd::Strong | TagEnd::Strikethrough | TagEnd::Link => {
                self.styles.pop();
            }
            TagEnd::TableHead => {
                self.styles.pop();
                if let Some(t) = self.table.as_mut() {
                    t.head_rows = t.rows.len();
                }
            }
            TagEnd::Table => {
                if let Some(table) = self.table.take() {
                    self.table_lines(table);
                }
            }
            _ => {}
        }
    }

    /// Lays a table out in columns: natural widths, the widest narrowed until the table fits
    /// the screen, each cell wrapped inside its column; ` │ ` between columns, a rule under
    /// the header.
    fn table_lines(&mut self, table: Table) {
        let cols = table.rows.iter().map(Vec::len).max().unwrap_or(0);
        if cols == 0 {
            return;
        }
        let text_width =
            |cell: &[Span<'_>]| -> usize { cell.iter().map(|s| s.content.as_ref().width()).sum() };
        let mut widths = vec![1; cols];
        for row in &table.rows {
            for (i, cell) in row.iter().enumerate() {
                widths[i] = widths[i].max(text_width(cell));
            }
        }
        let room = self.width.saturating_sub(1 + 3 * (cols - 1));
        while widths.iter().sum::<usize>() > room {
            let Some((i, w)) = widths.iter().copied().enumerate().max_by_key(|(_, w)| *w) else {
                break;
            };
            if w <= MIN_COLUMN {
                break;
            }
            widths[i] = w - 1;
        }
        let dim = self.theme.dim;
        for (r, row) in table.rows.iter().enumerate() {
            let wrapped: Vec<Vec<Line<'static>>> = (0..cols)
                .map(|i| {
                    let spans = row.get(i).cloned().unwrap_or_default();
                    wrap(&Line::from(spans), widths[i], "")
                })
                .collect();
            let height = wrapped.iter().map(Vec::len).max().unwrap_or(1);
            for k in 0..height {
                let mut spans = vec![Span::raw(" ")];
                for (i, cell) in wrapped.iter().enumerate() {
                    if i > 0 {
                        spans.push(Span::styled(" │ ", dim));
                    }
                    let piece = cell.get(k).cloned().unwrap_or_default();
                    let used: usize = piece.spans.iter().map(|s| s.content.as_ref().width()).sum();
                    let pad = widths[i].saturating_sub(used);
                    let (before, after) = match table.aligns.get(i) {
                        Some(Alignment::Right) => (pad, 0),
                        Some(Alignment::Center) => (pad / 2, pad - pad / 2),
                        _ => (0, pad),
                    };
                    if before > 0 {
                        spans.push(Span::raw(" ".repeat(before)));
                    }
                    spans.extend(piece.spans);
                    // The last column needs no padding on the right.
                    if after > 0 && i + 1 < cols {
                        spans.push(Span::raw(" ".repeat(after)));
                    }
                }
                self.lines.push(Line::from(spans));
            }
            if r + 1 == table.head_rows {
                let rule: Vec<String> = widths
                    .iter()
                    .enumerate()
                    .map(|(i, w)| "─".repeat(w + if i + 1 < cols { 2 } else { 1 }))
                    .collect();
                self.lines.push(Line::styled(rule.join("┼"), dim));
            }
        }
        self.lines.push(Line::default());
    }

    fn code_block(&mut self, lang: &str, body: &str) {
        self.flush();
        let label = if lang.is_empty() { "code" } else { lang };
        self.lines
            .push(Line::styled(format!("  ┌ {label}"), self.theme.dim));
        for line in body.trim_end_matches('\n').split('\n') {
            let mut spans = vec![Span::styled("  │ ".to_string(), self.theme.dim)];
            spans.extend(highlight(line, lang, self.theme));
            self.lines.push(Line::from(spans));
        }
        self.lines.push(Line::default());
    }
}

/// Keywords of the languages coloured in code blocks (a light approach: keywords, strings,
/// comments and numbers; no grammar).
fn keywords(lang: &str) -> (&'static [&'static str], &'static str) {
    match lang {
        "rust" | "rs" => (
            &[
                "as", "async", "await", "break", "const", "continue", "crate", "else", "enum",
                "fn", "for", "if", "impl", "in", "let", "loop", "match", "mod", "move", "mut",
                "pub", "ref", "return", "self", "Self", "static", "struct", "trait", "type",
                "unsafe", "use", "where", "while", "true", "false",
            ],
            "//",
        ),
        "python" | "py" => (
            &[
                "and", "as", "assert", "async", "await", "class", "def", "elif", "else", "except",
                "finally", "for", "from", "if", "import", "in", "is", "lambda", "not", "or",
                "pass", "raise", "return", "try", "while", "with", "yield", "None", "True",
                "False", "self",
            ],
            "#",
        ),
        "js" | "javascript" | "ts" | "typescript" | "jsx" | "tsx" => (
            &[
                "async",
                "await",
                "break",
                "case",
                "catch",
                "class",
                "const",
                "continue",
                "default",
                "else",
                "export",
                "extends",
                "for",
                "from",
                "function",
                "if",
                "import",
                "in",
                "interface",
                "let",
                "new",
                "of",
                "return",
                "switch",
                "this",
                "throw",
                "try",
                "type",
                "var",
                "while",
                "true",
                "false",
                "null",
                "undefined",
            ],
            "//",
        ),
        "go" => (
            &[
                "break",
                "case",
                "chan",
                "const",
                "continue",
                "default",
                "defer",
                "else",
                "for",
                "func",
                "go",
                "if",
                "import",
                "interface",
                "map",
                "package",
                "range",
                "return",
                "select",
                "struct",
                "switch",
                "type",
                "var",
                "nil",
                "true",
                "false",
            ],
            "//",
        ),
        "c" | "cpp" | "c++" | "h" | "java" => (
            &[
                "break",
                "case",
                "class",
                "const",
                "continue",
                "else",
                "enum",
                "for",
                "if",
                "include",
                "namespace",
                "new",
                "public",
                "private",
                "return",
                "static",
                "struct",
                "switch",
                "typedef",
                "void",
                "while",
                "int",
                "char",
                "bool",
                "true",
                "false",
            ],
            "//",
        ),
        "sh" | "bash" | "shell" | "zsh" | "console" => (
            &[
                "if", "then", "else", "elif", "fi", "for", "do", "done", "while", "case", "esac",
                "function", "export", "local", "return",
            ],
            "#",
        ),
        "toml" | "yaml" | "yml" => (&["true", "false"], "#"),
        _ => (&[], ""),
    }
}

/// One line of code as spans: keywords, strings, comments and numbers coloured.
pub fn highlight(line: &str, lang: &str, theme: &Theme) -> Vec<Span<'static>> {
    let (words, comment) = keywords(lang);
    if words.is_empty() {
        return vec![Span::styled(line.to_string(), theme.code_text)];
    }
    let mut spans = Vec::new();
    let mut plain = String::new();
    let chars: Vec<char> = line.chars().collect();
    let mut i = 0;
    let flush = |plain: &mut String, spans: &mut Vec<Span<'static>>| {
        if !plain.is_empty() {
            spans.push(Span::styled(std::mem::take(plain), theme.code_text));
        }
    };
    while i < chars.len() {
        let rest: String = chars[i..].iter().collect();
        if !comment.is_empty() && rest.starts_with(comment) {
            flush(&mut plain, &mut spans);
            spans.push(Span::styled(rest, theme.comment));
            return spans;
        }
        let c = chars[i];
        if c == '"' || c == '\'' || c == '`' {
            flush(&mut plain, &mut spans);
            let mut j = i + 1;
            while j < chars.len() && chars[j] != c {
                if chars[j] == '\\' {
                    j += 1;
                }
                j += 1;
            }
            let end = (j + 1).min(chars.len());
            spans.push(Span::styled(
                chars[i..end].iter().collect::<String>(),
                theme.string,
            ));
            i = end;
            continue;
        }
        if c.is_alphanumeric() || c == '_' {
            let mut j = i;
            while j < chars.len() && (chars[j].is_alphanumeric() || chars[j] == '_') {
                j += 1;
            }
            let word: String = chars[i..j].iter().collect();
            if words.contains(&word.as_str()) {
                flush(&mut plain, &mut spans);
                spans.push(Span::styled(word, theme.keyword));
            } else if c.is_ascii_digit() {
                flush(&mut plain, &mut spans);
                spans.push(Span::styled(word, theme.number));
            } else {
                plain.push_str(&word);
            }
            i = j;
            continue;
        }
        plain.push(c);
        i += 1;
    }
    flush(&mut plain, &mut spans);
    spans
}

/// Markdown arriving in pieces, printed block by block: whatever precedes the last blank line
/// is complete and is rendered once; the rest waits for more text or the end.
#[derive(Debug, Default)]
pub struct MarkdownStream {
    text: String,
    printed: usize,
}

impl MarkdownStream {
    /// Adds `delta`; returns the lines that became complete.
    pub fn push(&mut self, delta: &str, width: usize, theme: &Theme) -> Vec<Line<'static>> {
        self.text.push_str(delta);
        let Some(end) = self.text.rfind("\n\n") else {
            return Vec::new();
        };
        let lines = render(&self.text[..end], width, theme);
        self.take(lines)
    }

    /// The message is complete (`full`: its final text, when known): the lines not printed
    /// yet. Ready for the next message afterwards.
    pub fn finish(
        &mut self,
        full: Option<&str>,
        width: usize,
        theme: &Theme,
    ) -> Vec<Line<'static>> {
        if let Some(full) = full {
            self.text = full.to_string();
        }
        let lines = render(&self.text, width, theme);
        let rest = self.take(lines);
        *self = Self::default();
        rest
    }

    /// Whether text waits to be printed.
    pub fn is_open(&self) -> bool {
        !self.text.is_empty()
    }

    fn take(&mut self, lines: Vec<Line<'static>>) -> Vec<Line<'static>> {
        if lines.len() <= self.printed {
            return Vec::new();
        }
        let new = lines[self.printed..].to_vec();
        self.printed = lines.len();
        new
    }
}

/// `lines` as terminal text, one `\n`-terminated line each: ANSI styles when `color`.
pub fn to_ansi(lines: &[Line<'_>], color: bool) -> String {
    use ratatui::style::Color;
    let mut out = String::new();
    for line in lines {
        for span in &line.spans {
            // The cells keep what the model, a tool or the repository wrote, escape bytes
            // included (the live screen drops them as it draws): shown as caret text here,
            // before Keel's own colours, so chat's transcript printed on quit cannot write the
            // clipboard, retitle or clear the terminal (red-team pass 3, R3-7).
            let content = crate::term_text::visible(&span.content);
            let style = line.style.patch(span.style);
            let mut codes: Vec<&str> = Vec::new();
            if color {
                let m = style.add_modifier;
                if m.contains(Modifier::BOLD) {
                    codes.push("1");
                }
                if m.contains(Modifier::DIM) {
                    codes.push("2");
                }
                if m.contains(Modifier::ITALIC) {
                    codes.push("3");
                }
                if m.contains(Modifier::UNDERLINED) {
                    codes.push("4");
                }
                if m.contains(Modifier::CROSSED_OUT) {
                    codes.push("9");
                }
                codes.push(match style.fg {
                    Some(Color::Red) => "31",
                    Some(Color::Green) => "32",
                    Some(Color::Yellow) => "33",
                    Some(Color::Blue) => "34",
                    Some(Color::Magenta) => "35",
                    Some(Color::Cyan) => "36",
                    _ => "",
                });
                codes.retain(|c| !c.is_empty());
            }
            if codes.is_empty() {
                out.push_str(&content);
            } else {
                out.push_str(&format!("\x1b[{}m{}\x1b[0m", codes.join(";"), content));
            }
        }
        out.push('\n');
    }
    out
}

/// `lines` as plain text.
#[cfg(test)]
pub fn plain(lines: &[Line<'_>]) -> String {
    lines
        .iter()
        .map(|l| {
            l.spans
                .iter()
                .map(|s| s.content.as_ref())
                .collect::<String>()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
#[path = "markdown_tests.rs"]
mod tests;
