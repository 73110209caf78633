//! Definitions that only hand a call on to a namesake (`Api.describe_tags` calling
//! `backend.describe_tags(...)`): of several definitions a report's name matches, these are
//! not where the behaviour lives.

use super::snippet::{FileLines, lines_of};

/// Whether the definition of `name` at `start..=end` of `path` calls a function of the same
/// name (`self.backend.name(`, `name(`) after its first line. Files are read once per search.
pub(super) fn forwards(
    files: &mut FileLines,
    root: &std::path::Path,
    path: &str,
    start: i64,
    end: i64,
    name: &str,
) -> bool {
    let Some(lines) = lines_of(files, root, path) else {
        return false;
    };
    let (from, to) = (
        start.max(1) as usize,
        (end.max(start) as usize).min(lines.len()),
    );
    // Docstrings, doctests and comments show calls; they make none.
    let mut in_doc = false;
    lines.get(from..to).unwrap_or(&[]).iter().any(|l| {
        let t = l.trim_start();
        let quotes = t.matches("\"\"\"").count() + t.matches("'''").count();
        let was = in_doc;
        if quotes % 2 == 1 {
            in_doc = !in_doc;
        }
        !was && quotes == 0
            && !["#", "//", "*", ">>>", "..."]
                .iter()
                .any(|p| t.starts_with(p))
            && calls(t, name)
    })
}

/// `line` calls `name(` as a whole word.
fn calls(line: &str, name: &str) -> bool {
    let mut rest = line;
    while let Some(at) = rest.find(name) {
        let before = rest[..at].chars().next_back();
        let after = rest[at + name.len()..].trim_start();
        // `def name(` / `fn name(` / `function name(` define; they do not call.
        let defines = ["def", "fn", "function", "func"]
            .iter()
            .any(|k| rest[..at].trim_end().ends_with(k));
        if before.is_none_or(|c| !(c.is_alphanumeric() || c == '_'))
            && after.starts_with('(')
            && !defines
        {
            return true;
        }
        rest = &rest[at + name.len()..];
    }
    false
}
