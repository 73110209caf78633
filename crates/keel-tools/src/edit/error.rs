//! Why an edit failed, and the message that makes the model's retry cheap: where the nearest
//! text is, what differs, and what to change in the call.

use std::fmt::Write as _;

use super::MatchLevel;

/// The file region most like a search that matched nowhere (or that matched only loosely).
#[derive(Debug, Clone, PartialEq)]
pub struct Closest {
    pub start_line: usize,
    pub end_line: usize,
    pub similarity: f64,
    /// The region's lines as they are in the file.
    pub lines: Vec<String>,
    /// Line diff of the search against the region: `- ` lines only in the search, `+ ` lines
    /// only in the file.
    pub differences: Vec<String>,
}

impl Closest {
    /// Appends "The closest region is lines a-b (similarity x):", the numbered lines and
    /// what differs; `theirs` names the model's text ("your search", "the hunk").
    pub fn describe(&self, out: &mut String, theirs: &str) {
        let _ = writeln!(
            out,
            "The closest region is lines {}-{} (similarity {:.2}):",
            self.start_line, self.end_line, self.similarity
        );
        let width = self.end_line.to_string().len();
        for (i, l) in self.lines.iter().enumerate() {
            let _ = writeln!(out, "{:>width$}\t{l}", self.start_line + i);
        }
        if !self.differences.is_empty() {
            let _ = writeln!(out, "What differs (- {theirs}, + the file):");
            for d in &self.differences {
                let _ = writeln!(out, "{d}");
            }
        }
    }
}

/// One place a search matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Location {
    /// 1-based inclusive lines.
    pub start_line: usize,
    pub end_line: usize,
    /// 1-based column (in characters) where an exact match starts.
    pub column: Option<usize>,
}

impl Location {
    /// A whole-lines match.
    pub fn lines(start_line: usize, end_line: usize) -> Self {
        Self {
            start_line,
            end_line,
            column: None,
        }
    }
}

/// How a retry can tell matching places apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Separable {
    /// Adding lines above or below to `search` singles one out.
    ByContext,
    /// The places share a line: more of that line is needed, not more lines.
    OnlyWithinTheLine,
    /// Even the lines around them are the same: only `replace_all` (or a different edit).
    No,
}

/// Why an edit failed.
#[derive(Debug, Clone, PartialEq)]
pub enum EditErrorKind {
    EmptySearch,
    NoMatch {
        closest: Option<Closest>,
        /// The edit asked for every occurrence, which takes a match that is exact up to
        /// whitespace or indentation.
        replace_all: bool,
    },
    Ambiguous {
        level: MatchLevel,
        /// The first few candidates, in file order.
        locations: Vec<Location>,
        total: usize,
        separable: Separable,
    },
    /// No exact match, and no near match was looked for (the block is too long) or the look
    /// ran out of time: nothing was changed.
    NoNearMatch {
        why: String,
    },
    /// The best (fuzzy) match lacks lines the edit removes or changes: applying it would keep
    /// the text the edit replaces.
    Unmatched {
        closest: Closest,
        /// The search's lines that have no counterpart in the file.
        lines: Vec<String>,
    },
}

/// An edit that failed, by its 0-based index in the call.
#[derive(Debug, Clone, PartialEq)]
pub struct EditError {
    pub index: usize,
    pub kind: EditErrorKind,
}

impl EditError {
    /// A message for the model: what failed, where the nearest text is, what to do.
    pub fn describe(&self, path: &str, edits: usize) -> String {
        let which = if edits > 1 {
            format!("edit {} of {edits}", self.index + 1)
        } else {
            "the edit".to_string()
        };
        let mut out = String::new();
        match &self.kind {
            EditErrorKind::EmptySearch => {
                let _ = write!(
                    out,
                    "{which}: `search` is empty. Put the existing lines to change in `search` (for an insertion, the lines around it, repeated in `replace`)."
                );
            }
            EditErrorKind::Ambiguous {
                level,
                locations,
                total,
                separable,
            } => {
                let shared_line = locations
                    .windows(2)
                    .any(|w| w[0].start_line == w[1].start_line);
                let spans: Vec<String> = locations
                    .iter()
                    .map(|l| match l.column {
                        Some(c) if shared_line => format!("line {} column {c}", l.start_line),
                        _ if l.start_line == l.end_line => format!("line {}", l.start_line),
                        _ => format!("lines {}-{}", l.start_line, l.end_line),
                    })
                    .collect();
                let more = if *total > locations.len() {
                    format!(" and {} more", total - locations.len())
                } else {
                    String::new()
                };
                let advice = match separable {
                    Separable::ByContext => format!(
                        "Add surrounding lines to `search` so it matches exactly one, or set `replace_all: true` to change all {total}."
                    ),
                    Separable::OnlyWithinTheLine => format!(
                        "They share a line, so more lines around them will not tell them apart: put more of that line in `search`, or set `replace_all: true` to change all {total}."
                    ),
                    Separable::No => format!(
                        "The lines around them are the same too, so more context will not tell them apart: set `replace_all: true` to change all {total}, or edit a larger block that differs."
                    ),
                };
                let _ = write!(
                    out,
                    "{which}: the search text matches {total} places in `{path}` ({level} match): {}{more}. {advice}",
                    spans.join(", ")
                );
            }
            EditErrorKind::NoMatch {
                closest,
                replace_all,
            } => {
                let _ = write!(out, "{which}: no match for the search text in `{path}`.");
                if *replace_all {
                    out.push_str(
                        " With `replace_all`, the text must match exactly (up to whitespace and indentation); a loose match is never applied everywhere.",
                    );
                }
                match closest {
                    Some(c) => {
                        out.push('\n');
                        c.describe(&mut out, "your search");
                        out.push_str(
                            "Copy the lines exactly as the file has them (without line numbers) and retry.",
                        );
                    }
                    None => out.push_str(
                        "\nNothing in the file resembles it; read the file again to see its current content.",
                    ),
                }
            }
            EditErrorKind::NoNearMatch { why } => {
                let _ = write!(
                    out,
                    "{which}: no exact match for the search text in `{path}` (up to whitespace and indentation), and {why}; nothing was changed. Read the lines again and copy them exactly as the file has them (without line numbers), or edit a smaller block."
                );
            }
            EditErrorKind::Unmatched { closest, lines } => {
                let _ = writeln!(
                    out,
                    "{which}: no exact match in `{path}`, and the closest region {}. Applying it would keep the text the edit replaces, so nothing was changed.",
                    lacking(lines, "your edit")
                );
                closest.describe(&mut out, "your search");
                out.push_str(
                    "Copy the lines exactly as the file has them (without line numbers) and retry.",
                );
            }
        }
        out
    }
}

/// "lacks a line your edit removes or changes: `three`": the search (or hunk) lines a loose
/// match has no counterpart for, named for the model.
pub(crate) fn lacking(lines: &[String], whose: &str) -> String {
    let quoted: Vec<String> = lines.iter().map(|l| format!("`{}`", l.trim())).collect();
    format!(
        "lacks {} {whose} removes or changes: {}",
        if lines.len() == 1 { "a line" } else { "lines" },
        quoted.join(", ")
    )
}
