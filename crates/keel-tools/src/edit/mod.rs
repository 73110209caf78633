//! The search/replace editor behind `edit_file` (and the matching `apply_patch` shares).
//!
//! Each edit's `search` text is looked for with a chain of ever more tolerant levels —
//! exact → whitespace-normalised → indentation-agnostic → fuzzy (similarity ≥ 0.85) — and the
//! first level that finds it decides. A match must be unique at that level: two candidates
//! are an error naming both, never a guess — unless the edit says `replace_all`, which
//! changes every exact (or whitespace/indentation-tolerant) occurrence and never a fuzzy one.
//! A tolerant match is applied by a line merge that refuses rather than keep a line the edit
//! removes or changes (see [`merge`]). Edits apply in order to the in-memory text; the caller
//! writes the result once, or nothing if any edit failed.
//!
//! This module works on text only: no file system, no read tracking (the tools do that).

mod document;
mod error;
mod indent;
pub(crate) mod matching;
mod merge;
mod splice;

pub use document::{DecodeError, Document};
pub(crate) use error::lacking;
pub use error::{Closest, EditError, EditErrorKind, Location, Separable};
use matching::{LineMatch, Lines, Scope, find_equal};
pub(crate) use splice::{LineBlock, Spliced, closest, closest_at, replacement, splice};

/// The default minimum similarity for a fuzzy match.
pub const FUZZY_THRESHOLD: f64 = 0.85;
/// A second fuzzy candidate this close to the best makes the match ambiguous.
pub const AMBIGUITY_MARGIN: f64 = 0.05;

/// One search/replace pair.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edit {
    pub search: String,
    pub replace: String,
    /// Replace every occurrence instead of requiring exactly one.
    pub replace_all: bool,
}

impl Edit {
    /// An edit of the one place `search` matches.
    pub fn new(search: impl Into<String>, replace: impl Into<String>) -> Self {
        Self {
            search: search.into(),
            replace: replace.into(),
            replace_all: false,
        }
    }

    /// An edit of every place `search` matches.
    pub fn every(search: impl Into<String>, replace: impl Into<String>) -> Self {
        Self {
            replace_all: true,
            ..Self::new(search, replace)
        }
    }
}

/// How tolerant the match that located an edit had to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum MatchLevel {
    /// Byte-for-byte.
    Exact,
    /// Same lines once runs of spaces/tabs are collapsed and line ends trimmed; indentation
    /// identical.
    WhitespaceNormalised,
    /// Same lines ignoring indentation; the replacement is re-indented to the found block.
    IndentationAgnostic,
    /// Similar enough (normalised Levenshtein ≥ the threshold); re-indented as well.
    Fuzzy,
}

impl MatchLevel {
    /// The chain, most strict first.
    pub const CHAIN: [MatchLevel; 4] = [
        MatchLevel::Exact,
        MatchLevel::WhitespaceNormalised,
        MatchLevel::IndentationAgnostic,
        MatchLevel::Fuzzy,
    ];

    /// A stable name for output and metadata.
    pub fn name(self) -> &'static str {
        match self {
            MatchLevel::Exact => "exact",
            MatchLevel::WhitespaceNormalised => "whitespace-normalised",
            MatchLevel::IndentationAgnostic => "indentation-agnostic",
            MatchLevel::Fuzzy => "fuzzy",
        }
    }
}

impl std::fmt::Display for MatchLevel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Where and how one edit applied. Lines are 1-based, in the text as it was when the edit
/// ran (after the earlier edits of the same call).
#[derive(Debug, Clone, PartialEq)]
pub struct AppliedEdit {
    pub level: MatchLevel,
    /// The first changed place starts here…
    pub start_line: usize,
    /// …and the last one ends here.
    pub end_line: usize,
    /// 1.0 unless fuzzy.
    pub similarity: f64,
    /// How many places were replaced: 1, or more with `replace_all`.
    pub replacements: usize,
    /// Found only once `\n`, `\t`, `\"`… in the search and the replacement were read as the
    /// characters they stand for (the arguments were escaped twice).
    pub unescaped: bool,
}

/// The result of a successful call: the new text and how each edit applied.
#[derive(Debug, Clone, PartialEq)]
pub struct EditOutcome {
    pub text: String,
    pub applied: Vec<AppliedEdit>,
}

/// Applies search/replace edits to text with the matching chain.
#[derive(Debug, Clone, Copy)]
pub struct SearchReplaceEditor {
    /// Minimum similarity for a fuzzy match.
    pub fuzzy_threshold: f64,
    /// A second fuzzy candidate within this of the best one is an ambiguity.
    pub ambiguity_margin: f64,
}

impl Default for SearchReplaceEditor {
    fn default() -> Self {
        Self {
            fuzzy_threshold: FUZZY_THRESHOLD,
            ambiguity_margin: AMBIGUITY_MARGIN,
        }
    }
}

/// At most this many candidate locations are named in an ambiguity error.
const MAX_LOCATIONS: usize = 5;
/// Lines above and below that are compared to tell whether context can separate matches.
const SEPARATING_CONTEXT: usize = 3;

/// Line endings as the editor sees them: `\r\n` and a lone `\r` are line breaks, like `\n`
/// ([`Document`] decodes files the same way).
pub(crate) fn normalise_newlines(s: &str) -> std::borrow::Cow<'_, str> {
    if s.contains('\r') {
        std::borrow::Cow::Owned(s.replace("\r\n", "\n").replace('\r', "\n"))
    } else {
        std::borrow::Cow::Borrowed(s)
    }
}

impl SearchReplaceEditor {
    /// Applies `edits` in order to `text` (`\n` line endings). All or nothing: on error the
    /// caller's text is untouched and the error names the failing edit.
    pub fn apply(&self, text: &str, edits: &[Edit]) -> Result<EditOutcome, EditError> {
        let mut current = text.to_string();
        let mut applied = Vec::with_capacity(edits.len());
        for (index, edit) in edits.iter().enumerate() {
            let (next, how) = self
                .apply_one(&current, edit)
                .map_err(|kind| EditError { index, kind })?;
            current = next;
            applied.push(how);
        }
        Ok(EditOutcome {
            text: current,
            applied,
        })
    }

    /// Applies one edit. When nothing matches and the edit reads as escaped twice (`\n` sent
    /// as a backslash and an `n`, on one line), it is tried once more with the escapes read —
    /// in the search and the replacement alike — and applies only if that finds the text
    /// without a fuzzy match.
    pub fn apply_one(
        &self,
        text: &str,
        edit: &Edit,
    ) -> Result<(String, AppliedEdit), EditErrorKind> {
        let err = match self.apply_as_sent(text, edit) {
            Err(err @ EditErrorKind::NoMatch { .. }) => err,
            other => return other,
        };
        let Some(unescaped) = escaped_twice(edit) else {
            return Err(err);
        };
        match self.apply_as_sent(text, &unescaped) {
            Ok((out, mut how)) if how.level != MatchLevel::Fuzzy => {
                how.unescaped = true;
                Ok((out, how))
            }
            _ => Err(err),
        }
    }

    fn apply_as_sent(
        &self,
        text: &str,
        edit: &Edit,
    ) -> Result<(String, AppliedEdit), EditErrorKind> {
        let search = normalise_newlines(&edit.search);
        let replace = normalise_newlines(&edit.replace);
        let (search, replace) = (search.as_ref(), replace.as_ref());
        if search.is_empty() {
            if text.is_empty() {
                let lines = replace.lines().count().max(1);
                return Ok((
                    replace.to_string(),
                    AppliedEdit {
                        level: MatchLevel::Exact,
                        start_line: 1,
                        end_line: lines,
                        similarity: 1.0,
                        replacements: 1,
                        unescaped: false,
                    },
                ));
            }
            return Err(EditErrorKind::EmptySearch);
        }
        let file = Lines::new(text);
        if edit.replace_all {
            return replace_every(&file, search, replace);
        }

        // 1. Exact, anywhere (also inside a line).
        let hits = occurrences(text, search);
        if let [at] = hits[..] {
            let mut out = String::with_capacity(text.len() + replace.len());
            out.push_str(&text[..at]);
            out.push_str(replace);
            out.push_str(&text[at + search.len()..]);
            return Ok((
                out,
                AppliedEdit {
                    level: MatchLevel::Exact,
                    start_line: file.line_of_byte(at),
                    end_line: file.line_of_byte(at + search.len().saturating_sub(1)),
                    similarity: 1.0,
                    replacements: 1,
                    unescaped: false,
                },
            ));
        }
        if hits.len() > 1 {
            return Err(ambiguous_exact(&file, &hits, search.len()));
        }

        // 2-4. Line-level matching.
        let block = LineBlock::new(search, replace);
        if block.search.is_empty() {
            return Err(EditErrorKind::NoMatch {
                closest: None,
                replace_all: false,
            });
        }
        let scope = Scope::whole(&file);
        for level in [
            MatchLevel::WhitespaceNormalised,
            MatchLevel::IndentationAgnostic,
        ] {
            let found = find_equal(level, &file, &block.search, &scope);
            match found.len() {
                0 => continue,
                1 => return applied(&file, &block, &found, level),
                _ => return Err(ambiguous(&file, level, &found)),
            }
        }
        if let Some(why) = matching::fuzzy_refused(&block.search) {
            return Err(EditErrorKind::NoNearMatch { why });
        }
        let Some(found) =
            matching::find_fuzzy_bounded(&file, &block.search, &scope, self.fuzzy_threshold, true)
        else {
            return Err(EditErrorKind::NoNearMatch {
                why: format!(
                    "looking for a near match took longer than {} s without a unique result",
                    matching::FUZZY_BUDGET.as_secs()
                ),
            });
        };
        if let Some(best) = found.first().copied() {
            let rivals: Vec<LineMatch> = std::iter::once(best)
                .chain(found.iter().skip(1).copied().filter(|c| {
                    !c.overlaps(&best) && c.similarity >= best.similarity - self.ambiguity_margin
                }))
                .collect();
            let rivals = without_overlaps(rivals);
            if rivals.len() > 1 {
                return Err(ambiguous(&file, MatchLevel::Fuzzy, &rivals));
            }
            return applied(&file, &block, &[best], MatchLevel::Fuzzy);
        }
        Err(EditErrorKind::NoMatch {
            closest: closest(&file, &block.search),
            replace_all: false,
        })
    }
}

/// The matched places (in file order) spliced, or the refusal the merge rule gives.
fn applied(
    file: &Lines<'_>,
    block: &LineBlock<'_>,
    found: &[LineMatch],
    level: MatchLevel,
) -> Result<(String, AppliedEdit), EditErrorKind> {
    match splice(file, block, found, level) {
        Spliced::Done(text) => Ok((
            text,
            AppliedEdit {
                level,
                start_line: found.first().map_or(1, |m| m.start + 1),
                end_line: found.last().map_or(1, |m| m.start + m.len.max(1)),
                similarity: found.iter().map(|m| m.similarity).fold(1.0, f64::min),
                replacements: found.len(),
                unescaped: false,
            },
        )),
        Spliced::Unmatched { closest, lines } => Err(EditErrorKind::Unmatched { closest, lines }),
    }
}

/// `s` with the escapes a twice-escaped argument carries read as their characters (`\n`,
/// `\t`, `\r`, `\"`, `\'`, `` \` ``, `\$`, `\\`; others kept); `None` if there are none.
fn unescape(s: &str) -> Option<String> {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    let mut changed = false;
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        let read = match chars.clone().next() {
            Some('n') => '\n',
            Some('t') => '\t',
            Some('r') => '\r',
            Some(q @ ('"' | '\'' | '`' | '$' | '\\')) => q,
            _ => {
                out.push(c);
                continue;
            }
        };
        chars.next();
        out.push(read);
        changed = true;
    }
    changed.then_some(out)
}

/// The edit as meant when its arguments were escaped twice: both texts on one line (a real
/// line break means they were not), the search holding escapes, and the replacement escaped
/// the same way (a bare `"` where the search escapes its quotes is a mix, never guessed at).
fn escaped_twice(edit: &Edit) -> Option<Edit> {
    if edit.search.contains(['\n', '\r']) || edit.replace.contains(['\n', '\r']) {
        return None;
    }
    let search = unescape(&edit.search)?;
    if edit.search.contains("\\\"") {
        let bare_quote = edit
            .replace
            .char_indices()
            .any(|(i, c)| c == '"' && !edit.replace[..i].ends_with('\\'));
        if bare_quote {
            return None;
        }
    }
    let replace = unescape(&edit.replace).unwrap_or_else(|| edit.replace.clone());
    Some(Edit {
        search,
        replace,
        replace_all: edit.replace_all,
    })
}

/// `replace_all`: every exact occurrence (left to right, not overlapping), else every
/// whitespace- or indentation-tolerant one; never fuzzy ones.
fn replace_every(
    file: &Lines<'_>,
    search: &str,
    replace: &str,
) -> Result<(String, AppliedEdit), EditErrorKind> {
    let text = file.text;
    let hits: Vec<usize> = text.match_indices(search).map(|(at, _)| at).collect();
    if let (Some(&first), Some(&last)) = (hits.first(), hits.last()) {
        return Ok((
            text.replace(search, replace),
            AppliedEdit {
                level: MatchLevel::Exact,
                start_line: file.line_of_byte(first),
                end_line: file.line_of_byte(last + search.len().saturating_sub(1)),
                similarity: 1.0,
                replacements: hits.len(),
                unescaped: false,
            },
        ));
    }
    let block = LineBlock::new(search, replace);
    if block.search.is_empty() {
        return Err(EditErrorKind::NoMatch {
            closest: None,
            replace_all: true,
        });
    }
    let scope = Scope::whole(file);
    for level in [
        MatchLevel::WhitespaceNormalised,
        MatchLevel::IndentationAgnostic,
    ] {
        let mut found = find_equal(level, file, &block.search, &scope);
        // Left to right, skipping windows that overlap one already taken.
        let mut end = 0;
        found.retain(|m| {
            let keep = m.start >= end;
            if keep {
                end = m.start + m.len;
            }
            keep
        });
        if !found.is_empty() {
            return applied(file, &block, &found, level);
        }
    }
    Err(EditErrorKind::NoMatch {
        closest: closest(file, &block.search),
        replace_all: true,
    })
}

/// Start offsets of every occurrence of `needle`, overlapping ones included (`aa` occurs
/// twice in `aaa`: a unique match must be unique in that sense too).
fn occurrences(text: &str, needle: &str) -> Vec<usize> {
    let mut hits = Vec::new();
    let mut from = 0;
    while let Some(i) = text.get(from..).and_then(|t| t.find(needle)) {
        let at = from + i;
        hits.push(at);
        let step = text[at..].chars().next().map_or(1, char::len_utf8);
        from = at + step;
    }
    hits
}

/// Keeps the first of any overlapping candidates (they are best-first).
fn without_overlaps(candidates: Vec<LineMatch>) -> Vec<LineMatch> {
    let mut kept: Vec<LineMatch> = Vec::new();
    for c in candidates {
        if kept.iter().all(|k| !k.overlaps(&c)) {
            kept.push(c);
        }
    }
    kept
}

/// Several exact hits: where each is (with its column), and whether context could separate
/// them.
fn ambiguous_exact(file: &Lines<'_>, hits: &[usize], len: usize) -> EditErrorKind {
    let spans: Vec<(usize, usize)> = hits
        .iter()
        .map(|&at| {
            (
                file.line_of_byte(at) - 1,
                file.line_of_byte(at + len.saturating_sub(1)),
            )
        })
        .collect();
    let same_line = spans.windows(2).any(|w| w[0].0 == w[1].0);
    let locations = hits
        .iter()
        .zip(&spans)
        .take(MAX_LOCATIONS)
        .map(|(&at, &(start, end))| {
            let line_start = file.content_bytes(start..start + 1).start;
            Location {
                start_line: start + 1,
                end_line: end,
                column: Some(file.text[line_start..at].chars().count() + 1),
            }
        })
        .collect();
    EditErrorKind::Ambiguous {
        level: MatchLevel::Exact,
        locations,
        total: hits.len(),
        separable: if same_line {
            Separable::OnlyWithinTheLine
        } else {
            separable_by_context(file, &spans)
        },
    }
}

fn ambiguous(file: &Lines<'_>, level: MatchLevel, found: &[LineMatch]) -> EditErrorKind {
    let mut sorted: Vec<LineMatch> = found.to_vec();
    sorted.sort_by_key(|m| m.start);
    let spans: Vec<(usize, usize)> = sorted
        .iter()
        .map(|m| (m.start, m.start + m.len.max(1)))
        .collect();
    let locations = spans
        .iter()
        .take(MAX_LOCATIONS)
        .map(|&(a, b)| Location::lines(a + 1, b))
        .collect();
    EditErrorKind::Ambiguous {
        level,
        locations,
        total: spans.len(),
        separable: separable_by_context(file, &spans),
    }
}

/// Whether lines around the matches (0-based `[start, end)` line spans) tell them apart.
fn separable_by_context(file: &Lines<'_>, spans: &[(usize, usize)]) -> Separable {
    let around = |&(start, end): &(usize, usize)| -> (Vec<&str>, Vec<&str>) {
        let above = file.lines[start.saturating_sub(SEPARATING_CONTEXT)..start].to_vec();
        let below_end = (end + SEPARATING_CONTEXT).min(file.len());
        let below = file.lines[end.min(below_end)..below_end].to_vec();
        (above, below)
    };
    let first = spans.first().map(around);
    if spans.iter().skip(1).all(|s| Some(around(s)) == first) {
        Separable::No
    } else {
        Separable::ByContext
    }
}

/// A unified diff of `old` → `new` for `path`, 3 lines of context; empty if equal.
pub fn unified_diff(path: &str, old: &str, new: &str) -> String {
    if old == new {
        return String::new();
    }
    let (before, after) = (old.lines().count(), new.lines().count());
    if before.saturating_add(after) > DIFF_MAX_LINES {
        return format!(
            "--- a/{path}\n+++ b/{path}\n(no line diff: {before} lines replaced by {after}, more than {DIFF_MAX_LINES} in all)\n"
        );
    }
    line_diff(old, new)
        .unified_diff()
        .context_radius(3)
        .header(&format!("a/{path}"), &format!("b/{path}"))
        .to_string()
}

/// The most lines (old and new together) a display diff is computed for.
pub const DIFF_MAX_LINES: usize = 20_000;

/// A line diff that gives up on the shortest edit after [`DIFF_DEADLINE`] (still a correct
/// diff, perhaps a longer one): Myers' algorithm is quadratic in the worst case, and a
/// 200,000-line file overwritten with one line kept Keel busy for minutes (red-team pass 8,
/// R8-24).
pub fn line_diff<'a>(old: &'a str, new: &'a str) -> similar::TextDiff<'a, 'a, 'a, str> {
    similar::TextDiff::configure()
        .timeout(DIFF_DEADLINE)
        .diff_lines(old, new)
}

/// The edit operations between two sequences of lines (or line keys), by Myers' algorithm
/// with the same deadline as [`line_diff`]: past it the result is still correct (every
/// `Equal` run is equal), only perhaps longer. Every alignment the edit tools compute goes
/// through here — a mixed-line-ending file's endings, a fuzzy edit's merge — so no file's size
/// or shape keeps a tool call busy (red-team pass 9, R9-10: a 40,000-line file with mixed
/// endings kept `edit_file` in Myers' algorithm for minutes).
pub(crate) fn bounded_ops<T: Eq + std::hash::Hash + Ord>(
    old: &[T],
    new: &[T],
) -> Vec<similar::DiffOp> {
    similar::capture_diff_slices_deadline(
        similar::Algorithm::Myers,
        old,
        new,
        Some(std::time::Instant::now() + DIFF_DEADLINE),
    )
}

/// How long a line diff may look for the shortest edit.
pub const DIFF_DEADLINE: std::time::Duration = std::time::Duration::from_millis(500);

#[cfg(test)]
mod tests;
