//! `read_file`: a file, a line range of it, or one symbol (function, class, method…) found by
//! tree-sitter, with line numbers. Files over [`LARGE_FILE_LINES`] lines read without a range
//! or symbol show their head, a symbol outline and their tail, so a big file costs little.

use std::path::Path;

use keel_index::symbols::{
    FileSymbols, Language, Symbol, SymbolExtractor, TreeSitterExtractor, lookup, outline,
};
use schemars::JsonSchema;
use serde::Deserialize;

use super::{blocking, human_size};
use crate::{ToolContext, ToolEffect, ToolError, ToolOutput, TypedTool};

/// Lines longer than this are cut (minified code, data blobs).
const MAX_LINE_CHARS: usize = 2_000;
/// A range without an end shows at most this many lines.
const MAX_LINES: usize = 2_000;
/// Bytes inspected for a NUL to decide a file is binary.
const BINARY_SNIFF: usize = 8_192;
/// Files above this many lines, read without a range or symbol, get head + outline + tail.
pub const LARGE_FILE_LINES: usize = 500;
/// Head and tail sizes of a large file's summary view.
const HEAD_LINES: usize = 40;
const TAIL_LINES: usize = 20;
/// Outline entries shown for a large file.
const OUTLINE_ENTRIES: usize = 150;
/// Several matching symbols are all shown when together they are at most this many lines;
/// otherwise they are listed.
const MULTI_MATCH_LINES: usize = 200;
/// Symbols suggested when the asked one does not exist.
const SUGGESTIONS: usize = 25;
/// Files larger than this are not loaded.
const MAX_READ_BYTES: u64 = 32 * 1024 * 1024;

/// Arguments of `read_file`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadFileArgs {
    /// File path relative to the workspace root.
    pub path: String,
    /// Only this definition: `name`, `Type.method` or `Type::method`.
    #[serde(default)]
    pub symbol: Option<String>,
    /// First line to show (1-based, inclusive).
    #[serde(default)]
    pub start_line: Option<usize>,
    /// Last line to show (inclusive).
    #[serde(default)]
    pub end_line: Option<usize>,
}

/// Reads a file with line numbers.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReadFile;

impl TypedTool for ReadFile {
    type Args = ReadFileArgs;
    const NAME: &'static str = "read_file";

    fn description(&self) -> &str {
        "Read a text file with line numbers. Large files show an outline: then pass symbol (a function, class or `Type.method`) or start_line/end_line."
    }

    fn effect(&self) -> ToolEffect {
        ToolEffect::ReadOnly
    }

    async fn run(&self, args: ReadFileArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let target = ctx.workspace.locate_named(&args.path)?;
        let rel = target.rel_string();
        // git-crypt's key decrypts the repository's secrets in all its history (R10-27).
        if crate::sandbox::git_secrets::is_crypt_key(&rel) {
            return Err(ToolError::model(format!(
                "`{rel}` is a git-crypt key: the agent does not read it"
            )));
        }
        let reads = ctx.reads.clone();
        blocking(move || {
            let info = target
                .info()
                .and_then(|i| i.ok_or_else(|| std::io::ErrorKind::NotFound.into()))
                .map_err(|e| not_readable(&rel, &e))?;
            if info.kind == crate::fs::FileKind::Dir {
                return Err(ToolError::model(format!(
                    "`{rel}` is a directory; use list_files to see what it contains"
                )));
            }
            info.check_regular().map_err(|e| not_readable(&rel, &e))?;
            if info.len > MAX_READ_BYTES {
                return Ok(ToolOutput::text(format!(
                    "`{rel}` is {}: too large to read here. Search it with grep or inspect it with a command.",
                    human_size(info.len)
                )));
            }
            let bytes = target.read().map_err(|e| not_readable(&rel, &e))?;
            reads.record(&target.abs(), &bytes);
            // A repository's git configuration without its credentials (red-team pass 10,
            // R10-10), as commands see it.
            if crate::sandbox::git_secrets::is_repository_config(&rel)
                && let Some(clean) =
                    crate::sandbox::git_secrets::scrub(&String::from_utf8_lossy(&bytes))
            {
                return render(&rel, clean.as_bytes(), &args);
            }
            render(&rel, &bytes, &args)
        })
        .await
    }
}

fn not_readable(rel: &str, e: &std::io::Error) -> ToolError {
    if e.kind() == std::io::ErrorKind::NotFound {
        ToolError::model(format!(
            "`{rel}` does not exist; use list_files to find the right path"
        ))
    } else {
        ToolError::model(format!(
            "cannot read `{}`: {e}",
            crate::text::escape_name(rel)
        ))
    }
}

/// Renders file bytes for the model: numbered lines, a range or a symbol, and notes for odd
/// files.
pub(crate) fn render(
    rel: &str,
    bytes: &[u8],
    args: &ReadFileArgs,
) -> Result<ToolOutput, ToolError> {
    if bytes.is_empty() {
        return Ok(ToolOutput::text(format!("`{rel}` is empty (0 bytes).")));
    }
    if bytes[..bytes.len().min(BINARY_SNIFF)].contains(&0) {
        return Ok(ToolOutput::text(format!(
            "`{rel}` is a binary file ({}); its content is not shown.",
            human_size(bytes.len() as u64)
        )));
    }
    let (text, lossy) = match std::str::from_utf8(bytes) {
        Ok(t) => (std::borrow::Cow::Borrowed(t), false),
        Err(_) => (String::from_utf8_lossy(bytes), true),
    };
    let text = text.strip_prefix('\u{FEFF}').unwrap_or(&text);
    let file = FileView {
        rel,
        lines: text.lines().collect(),
        lossy,
    };
    if let Some(symbol) = &args.symbol {
        return read_symbol(&file, text, symbol, args.start_line, args.end_line);
    }
    if args.start_line.is_none() && args.end_line.is_none() && file.total() > LARGE_FILE_LINES {
        return Ok(ToolOutput::text(summary_view(&file, text)));
    }
    file.range(args.start_line, args.end_line, Vec::new())
}

struct FileView<'a> {
    rel: &'a str,
    lines: Vec<&'a str>,
    lossy: bool,
}

impl FileView<'_> {
    fn total(&self) -> usize {
        self.lines.len()
    }

    /// Lines `first..=last` (1-based, clamped), numbered, with the cut-line count.
    fn numbered(&self, first: usize, last: usize, out: &mut String) -> usize {
        let width = last.to_string().len();
        let mut cut_lines = 0;
        for n in first..=last.min(self.total()) {
            let line = self.lines[n - 1];
            let line = line.strip_suffix('\r').unwrap_or(line);
            if line.chars().count() > MAX_LINE_CHARS {
                cut_lines += 1;
                let cut: String = line.chars().take(MAX_LINE_CHARS).collect();
                out.push_str(&format!(
                    "{n:>width$}\t{cut}… [line cut at {MAX_LINE_CHARS} chars]\n"
                ));
            } else {
                out.push_str(&format!("{n:>width$}\t{line}\n"));
            }
        }
        cut_lines
    }

    fn finish_notes(&self, notes: &mut Vec<String>, cut_lines: usize) {
        if cut_lines > 0 {
            notes.push(format!(
                "{cut_lines} line(s) longer than {MAX_LINE_CHARS} chars were cut"
            ));
        }
        if self.lossy {
            notes.push("the file is not valid UTF-8; invalid bytes are shown as \u{FFFD}".into());
        }
    }

    /// A line range (the whole file by default).
    fn range(
        &self,
        start: Option<usize>,
        end: Option<usize>,
        mut notes: Vec<String>,
    ) -> Result<ToolOutput, ToolError> {
        let total = self.total();
        let first = start.unwrap_or(1).max(1);
        if first > total {
            return Err(ToolError::model(format!(
                "start_line {first} is past the end of `{}`, which has {total} lines",
                self.rel
            )));
        }
        let mut last = end.unwrap_or(total).min(total);
        if last < first {
            return Err(ToolError::model(format!(
                "end_line {} is before start_line {first}",
                end.unwrap_or(0)
            )));
        }
        if end.is_none() && last - first + 1 > MAX_LINES {
            last = first + MAX_LINES - 1;
            notes.push(format!(
                "showing lines {first}-{last} of {total}; pass start_line/end_line for the rest"
            ));
        }
        let mut out = String::new();
        let cut = self.numbered(first, last, &mut out);
        self.finish_notes(&mut notes, cut);
        if first > 1 || last < total {
            notes.push(format!("`{}` has {total} lines", self.rel));
        }
        push_notes(&mut out, &notes);
        Ok(ToolOutput::text(out))
    }
}

fn push_notes(out: &mut String, notes: &[String]) {
    if !notes.is_empty() {
        out.push_str(&format!("[{}]\n", notes.join("; ")));
    }
}

/// The symbols of a file, or why there are none.
fn symbols_of(rel: &str, text: &str) -> Result<FileSymbols, String> {
    let path = Path::new(rel);
    let Some(language) = Language::detect(path, text) else {
        let what = path
            .extension()
            .and_then(|e| e.to_str())
            .map(|e| format!(".{e} files"))
            .unwrap_or_else(|| "this file type".into());
        return Err(format!("symbols are not available for {what}"));
    };
    TreeSitterExtractor
        .extract(language, text)
        .map_err(|e| format!("symbols are not available: {e}"))
}

/// Head, outline and tail of a large file.
fn summary_view(file: &FileView<'_>, text: &str) -> String {
    let total = file.total();
    let mut out = String::new();
    let mut cut = file.numbered(1, HEAD_LINES, &mut out);
    let omitted = total - HEAD_LINES - TAIL_LINES;
    out.push_str(&format!("… {omitted} lines not shown …\n"));
    cut += file.numbered(total - TAIL_LINES + 1, total, &mut out);
    let mut notes = vec![format!(
        "`{}` has {total} lines; only the head and tail are shown",
        file.rel
    )];
    match symbols_of(file.rel, text) {
        Ok(fs) if !fs.symbols.is_empty() => {
            out.push_str(&format!(
                "[outline of `{}` ({}, {} symbols) — read one with symbol=\"Name\", or a range with start_line/end_line]\n",
                file.rel,
                fs.language,
                fs.symbols.len()
            ));
            out.push_str(&outline::render(&fs.symbols, OUTLINE_ENTRIES));
        }
        Ok(_) => notes.push("no symbols found; use start_line/end_line".into()),
        Err(why) => notes.push(format!("{why}; use start_line/end_line")),
    }
    file.finish_notes(&mut notes, cut);
    push_notes(&mut out, &notes);
    out
}

fn describe(s: &Symbol) -> String {
    format!(
        "{} `{}` (lines {}-{})",
        s.kind,
        s.qualified_name(),
        s.start_line,
        s.end_line
    )
}

fn read_symbol(
    file: &FileView<'_>,
    text: &str,
    query: &str,
    start: Option<usize>,
    end: Option<usize>,
) -> Result<ToolOutput, ToolError> {
    let rel = file.rel;
    if query.trim().is_empty() {
        return Err(ToolError::model(
            "`symbol` is empty; give a name like `parse` or `Parser.parse`, or leave it out",
        ));
    }
    let fs = match symbols_of(rel, text) {
        Ok(fs) => fs,
        Err(why) => {
            // Unsupported language: the file (or the range) with a note.
            let note = format!("{why}; showing the file instead of `{query}`");
            if start.is_none() && end.is_none() && file.total() > LARGE_FILE_LINES {
                return Ok(ToolOutput::text(format!(
                    "[{note}]\n{}",
                    summary_view(file, text)
                )));
            }
            return file.range(start, end, vec![note]);
        }
    };
    let found = lookup::find(&fs.symbols, query);
    if found.is_empty() {
        return Err(ToolError::model(no_such_symbol(rel, query, &fs)));
    }
    let total = file.total();
    let clip = |s: &Symbol| -> (usize, usize) {
        (
            start.map_or(s.start_line, |a| a.max(s.start_line)),
            end.map_or(s.end_line, |b| b.min(s.end_line)).min(total),
        )
    };
    if found.len() == 1 {
        let s = found[0];
        let (first, last) = clip(s);
        if first > last {
            return Err(ToolError::model(format!(
                "lines {}-{} are outside {}",
                start.unwrap_or(s.start_line),
                end.unwrap_or(s.end_line),
                describe(s)
            )));
        }
        let mut out = format!("`{rel}`: {}", describe(s));
        if (first, last) != (s.start_line, s.end_line) {
            out.push_str(&format!(", showing {first}-{last}"));
        }
        out.push_str(&format!(" of {total}\n"));
        let last = last.min(first + MAX_LINES - 1);
        let cut = file.numbered(first, last, &mut out);
        let mut notes = Vec::new();
        if last < clip(s).1 {
            notes.push(format!(
                "showing the first {MAX_LINES} lines; pass start_line/end_line for the rest"
            ));
        }
        file.finish_notes(&mut notes, cut);
        push_notes(&mut out, &notes);
        return Ok(ToolOutput::text(out));
    }
    let lines: usize = found.iter().map(|s| s.line_count()).sum();
    let mut out = format!("`{rel}`: `{query}` matches {} symbols", found.len());
    if lines <= MULTI_MATCH_LINES {
        out.push_str(&format!(
            " (all shown; pick one with a qualified name like `{}`):\n",
            found[0].qualified_name()
        ));
        let mut cut = 0;
        for s in &found {
            let (first, last) = clip(s);
            out.push_str(&format!("── {}\n", describe(s)));
            if first <= last {
                cut += file.numbered(first, last, &mut out);
            }
        }
        let mut notes = Vec::new();
        file.finish_notes(&mut notes, cut);
        push_notes(&mut out, &notes);
    } else {
        out.push_str(&format!(
            " ({lines} lines together); read one by its qualified name or with start_line/end_line:\n"
        ));
        for s in &found {
            out.push_str(&format!("  {} — {}\n", describe(s), s.signature));
        }
    }
    Ok(ToolOutput::text(out))
}

fn no_such_symbol(rel: &str, query: &str, fs: &FileSymbols) -> String {
    if fs.symbols.is_empty() {
        return format!(
            "`{rel}` defines no symbols ({} parser); read it without `symbol`, or with start_line/end_line",
            fs.language
        );
    }
    let mut out = format!("no symbol `{query}` in `{rel}`. ");
    let suggestions = lookup::suggest(&fs.symbols, query, SUGGESTIONS);
    out.push_str(if fs.symbols.len() > suggestions.len() {
        "Closest of its symbols:\n"
    } else {
        "Its symbols:\n"
    });
    for s in &suggestions {
        out.push_str(&format!("  {}\n", describe(s)));
    }
    if fs.symbols.len() > suggestions.len() {
        out.push_str(&format!(
            "… {} more; read the file without `symbol` for its outline.\n",
            fs.symbols.len() - suggestions.len()
        ));
    }
    if fs.has_syntax_errors {
        out.push_str("(The file has syntax errors; definitions near them may be missing.)\n");
    }
    out
}

#[cfg(test)]
mod tests;
