//! Finding a block of lines in a file at each level of the matching chain. Shared by the
//! search/replace editor and the patch applier.

use std::ops::Range;

use rapidfuzz::distance::levenshtein::{Args, BatchComparator};

use super::MatchLevel;

/// A text split into lines (without their `\n`), with the byte offset of each line.
#[derive(Debug)]
pub(crate) struct Lines<'a> {
    pub text: &'a str,
    pub lines: Vec<&'a str>,
    starts: Vec<usize>,
}

impl<'a> Lines<'a> {
    pub fn new(text: &'a str) -> Self {
        let mut lines = Vec::new();
        let mut starts = Vec::new();
        let mut pos = 0;
        for piece in text.split_inclusive('\n') {
            starts.push(pos);
            lines.push(piece.strip_suffix('\n').unwrap_or(piece));
            pos += piece.len();
        }
        Self {
            text,
            lines,
            starts,
        }
    }

    pub fn len(&self) -> usize {
        self.lines.len()
    }

    /// Byte range of lines `range`, without the last line's `\n`.
    pub fn content_bytes(&self, range: Range<usize>) -> Range<usize> {
        if range.is_empty() {
            let at = self
                .starts
                .get(range.start)
                .copied()
                .unwrap_or(self.text.len());
            return at..at;
        }
        let start = self.starts[range.start];
        let last = range.end - 1;
        start..self.starts[last] + self.lines[last].len()
    }

    /// Byte range of lines `range` including the last line's `\n`; for a range that ends the
    /// file without a newline, the `\n` before it instead (so removing it leaves no stray
    /// blank line).
    pub fn removal_bytes(&self, range: Range<usize>) -> Range<usize> {
        let content = self.content_bytes(range.clone());
        if range.is_empty() {
            return content;
        }
        if self.text[content.end..].starts_with('\n') {
            content.start..content.end + 1
        } else if content.start > 0 {
            content.start - 1..content.end
        } else {
            content
        }
    }

    /// The 1-based line number of a byte offset.
    pub fn line_of_byte(&self, byte: usize) -> usize {
        self.starts.partition_point(|&s| s <= byte).max(1)
    }
}

/// A block found in the file: lines `start..start + len` (0-based).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct LineMatch {
    pub start: usize,
    pub len: usize,
    /// 1.0 except for fuzzy matches.
    pub similarity: f64,
}

impl LineMatch {
    pub fn range(&self) -> Range<usize> {
        self.start..self.start + self.len
    }

    pub fn overlaps(&self, other: &LineMatch) -> bool {
        self.start < other.start + other.len && other.start < self.start + self.len
    }
}

/// Collapses runs of spaces and tabs to one space and trims the end: `a  =\tb ` → `a = b`.
fn collapse(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut in_space = false;
    for c in s.chars() {
        if c == ' ' || c == '\t' || c == '\r' || c == '\u{a0}' {
            in_space = true;
        } else {
            if in_space && !out.is_empty() {
                out.push(' ');
            }
            in_space = false;
            out.push(c);
        }
    }
    out
}

/// The leading whitespace of a line.
pub(crate) fn indent_of(line: &str) -> &str {
    &line[..line.len() - line.trim_start_matches([' ', '\t']).len()]
}

/// The form lines are compared in at `level`.
pub(crate) fn key(level: MatchLevel, line: &str) -> String {
    match level {
        MatchLevel::Exact => line.to_string(),
        MatchLevel::WhitespaceNormalised => {
            let rest = collapse(line);
            if rest.is_empty() {
                rest
            } else {
                format!("{}{rest}", indent_of(line))
            }
        }
        MatchLevel::IndentationAgnostic | MatchLevel::Fuzzy => collapse(line),
    }
}

/// Where a block may be found: windows must start in `starts`; with `at_end`, they must end
/// at the last line.
#[derive(Debug, Clone)]
pub(crate) struct Scope {
    pub starts: Range<usize>,
    pub at_end: bool,
}

impl Scope {
    pub fn whole(lines: &Lines<'_>) -> Self {
        Scope {
            starts: 0..lines.len() + 1,
            at_end: false,
        }
    }

    fn allows(&self, start: usize, len: usize, total: usize) -> bool {
        self.starts.contains(&start)
            && start + len <= total
            && (!self.at_end || start + len == total)
    }
}

/// Every window of `search.len()` lines whose lines equal `search`'s at a non-fuzzy level.
pub(crate) fn find_equal(
    level: MatchLevel,
    file: &Lines<'_>,
    search: &[&str],
    scope: &Scope,
) -> Vec<LineMatch> {
    let m = search.len();
    let n = file.len();
    if m == 0 || m > n {
        return Vec::new();
    }
    let file_keys: Vec<String> = file.lines.iter().map(|l| key(level, l)).collect();
    let search_keys: Vec<String> = search.iter().map(|l| key(level, l)).collect();
    let mut found = Vec::new();
    for start in 0..=n - m {
        if scope.allows(start, m, n)
            && file_keys[start..start + m]
                .iter()
                .zip(&search_keys)
                .all(|(a, b)| a == b)
        {
            found.push(LineMatch {
                start,
                len: m,
                similarity: 1.0,
            });
        }
    }
    found
}

/// Whether a window's boundary line is recognisably the search's: a fuzzy window must start
/// and end like the search, so it never cuts a block short of its closing line or starts in
/// the middle of the previous one.
fn resembles(line: &str, wanted: &str) -> bool {
    line == wanted
        || rapidfuzz::distance::levenshtein::normalized_similarity(line.chars(), wanted.chars())
            >= BOUNDARY_SIMILARITY
}

/// How alike a fuzzy window's first and last lines must be to the search's.
const BOUNDARY_SIMILARITY: f64 = 0.6;

/// The longest search block a near (fuzzy) match is looked for: past it, the cost of
/// comparing every window grows with the square of the block (red-team pass 2, R19: a
/// 400-line near miss in a 6,000-line file took minutes).
pub const FUZZY_MAX_LINES: usize = 200;
/// The most characters of search text a near match is looked for.
pub const FUZZY_MAX_CHARS: usize = 20_000;
/// How long looking for a near match may take before it reports no unique match.
pub const FUZZY_BUDGET: std::time::Duration = std::time::Duration::from_secs(1);

/// Why no near match is looked for `search` (too long), if so.
pub(crate) fn fuzzy_refused(search: &[&str]) -> Option<String> {
    let chars: usize = search.iter().map(|l| l.chars().count() + 1).sum();
    if search.len() > FUZZY_MAX_LINES {
        Some(format!(
            "the search block has {} lines, more than the {FUZZY_MAX_LINES} a near match is looked for",
            search.len()
        ))
    } else if chars > FUZZY_MAX_CHARS {
        Some(format!(
            "the search block has {chars} characters, more than the {FUZZY_MAX_CHARS} a near match is looked for"
        ))
    } else {
        None
    }
}

/// How many times a line may occur in the file and still anchor candidate windows.
const ANCHOR_MAX_OCCURRENCES: usize = 4;

/// The window starts worth comparing when some of the search's lines occur exactly (after
/// normalising) and rarely in the file: each such line pins the window around its place
/// (± `slack` lines). `None` when no line is that distinctive: every start is compared.
fn anchor_starts(
    file_keys: &[String],
    search_keys: &[String],
    slack: usize,
) -> Option<std::collections::BTreeSet<usize>> {
    let mut at: std::collections::HashMap<&str, Vec<usize>> = std::collections::HashMap::new();
    for (i, k) in file_keys.iter().enumerate() {
        let places = at.entry(k.as_str()).or_default();
        if places.len() <= ANCHOR_MAX_OCCURRENCES {
            places.push(i);
        }
    }
    let mut starts = std::collections::BTreeSet::new();
    for (i, k) in search_keys.iter().enumerate() {
        if k.chars().count() < 4 {
            continue;
        }
        let Some(places) = at.get(k.as_str()) else {
            continue;
        };
        if places.len() > ANCHOR_MAX_OCCURRENCES {
            continue;
        }
        for &p in places {
            let base = p.saturating_sub(i);
            for s in base.saturating_sub(slack)..=base + slack {
                starts.insert(s);
            }
        }
    }
    (!starts.is_empty()).then_some(starts)
}

/// [`find_fuzzy_bounded`] with `None` (refused or out of time) as no candidate.
pub(crate) fn find_fuzzy(
    file: &Lines<'_>,
    search: &[&str],
    scope: &Scope,
    threshold: f64,
    anchored: bool,
) -> Vec<LineMatch> {
    find_fuzzy_bounded(file, search, scope, threshold, anchored).unwrap_or_default()
}

/// Windows of about `search.len()` lines (± a tenth, at least one for blocks of 3+ lines)
/// whose normalised text is at least `threshold` similar (normalised Levenshtein over the
/// lines, indentation and whitespace runs ignored), best first. `anchored` also requires the
/// window's first and last lines to resemble the search's. `None` when the search is too
/// long for a near match ([`fuzzy_refused`]) or the look took longer than [`FUZZY_BUDGET`]
/// (a partial look cannot tell a unique match).
pub(crate) fn find_fuzzy_bounded(
    file: &Lines<'_>,
    search: &[&str],
    scope: &Scope,
    threshold: f64,
    anchored: bool,
) -> Option<Vec<LineMatch>> {
    let m = search.len();
    let n = file.len();
    if m == 0 || n == 0 {
        return Some(Vec::new());
    }
    if fuzzy_refused(search).is_some() {
        return None;
    }
    let deadline = std::time::Instant::now() + FUZZY_BUDGET;
    let search_keys: Vec<String> = search.iter().map(|l| collapse(l)).collect();
    let needle = search_keys.join("\n");
    let needle_len = needle.chars().count();
    if needle_len == 0 {
        return Some(Vec::new());
    }
    let file_keys: Vec<String> = file.lines.iter().map(|l| collapse(l)).collect();
    let mut prefix = Vec::with_capacity(n + 1);
    prefix.push(0usize);
    for k in &file_keys {
        let last = prefix.last().copied().unwrap_or(0);
        prefix.push(last + k.chars().count());
    }
    let slack = if m >= 3 { (m / 10).max(1) } else { 0 };
    let comparator = BatchComparator::new(needle.chars());
    let args = Args::default().score_cutoff(threshold);
    let anchored_starts = anchor_starts(&file_keys, &search_keys, slack);
    let mut found = Vec::new();
    for len in m.saturating_sub(slack).max(1)..=m + slack {
        if len > n {
            break;
        }
        let starts: Box<dyn Iterator<Item = usize>> = match &anchored_starts {
            Some(starts) => Box::new(starts.iter().copied().filter(|s| s + len <= n)),
            None => Box::new(0..=n - len),
        };
        for start in starts {
            if !scope.allows(start, len, n) {
                continue;
            }
            let window_len = prefix[start + len] - prefix[start] + (len - 1);
            // Levenshtein similarity can never beat the length ratio.
            let bound = window_len.min(needle_len) as f64 / window_len.max(needle_len) as f64;
            if bound < threshold {
                continue;
            }
            if anchored
                && (!resembles(&file_keys[start], &search_keys[0])
                    || !resembles(&file_keys[start + len - 1], &search_keys[m - 1]))
            {
                continue;
            }
            if std::time::Instant::now() > deadline {
                return None;
            }
            let window = file_keys[start..start + len].join("\n");
            if let Some(similarity) =
                comparator.normalized_similarity_with_args(window.chars(), &args)
            {
                found.push(LineMatch {
                    start,
                    len,
                    similarity,
                });
            }
        }
    }
    // Best first; on ties the window closest in size to the search, then the earliest.
    found.sort_by(|a, b| {
        b.similarity
            .total_cmp(&a.similarity)
            .then(a.len.abs_diff(m).cmp(&b.len.abs_diff(m)))
            .then(a.start.cmp(&b.start))
    });
    Some(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_per_level() {
        let l = "    let  x =\t1;   ";
        assert_eq!(key(MatchLevel::Exact, l), l);
        assert_eq!(key(MatchLevel::WhitespaceNormalised, l), "    let x = 1;");
        assert_eq!(key(MatchLevel::IndentationAgnostic, l), "let x = 1;");
        assert_eq!(key(MatchLevel::WhitespaceNormalised, " \t "), "");
    }

    #[test]
    fn byte_ranges() {
        let lines = Lines::new("a\nbb\nccc");
        assert_eq!(lines.len(), 3);
        assert_eq!(lines.content_bytes(1..2), 2..4);
        assert_eq!(lines.removal_bytes(1..2), 2..5);
        assert_eq!(lines.removal_bytes(2..3), 4..8);
        assert_eq!(lines.line_of_byte(0), 1);
        assert_eq!(lines.line_of_byte(2), 2);
        assert_eq!(lines.line_of_byte(7), 3);
    }

    #[test]
    fn fuzzy_finds_a_near_block_and_scopes_apply() {
        let text = "fn a() {\n    one();\n    two();\n}\n\nfn b() {\n    three();\n}\n";
        let lines = Lines::new(text);
        let found = find_fuzzy(
            &lines,
            &["fn a() {", "    one();", "    twoo();", "}"],
            &Scope::whole(&lines),
            0.85,
            true,
        );
        assert_eq!(found.first().map(|m| (m.start, m.len)), Some((0, 4)));
        let scope = Scope {
            starts: 1..lines.len(),
            at_end: false,
        };
        let found = find_fuzzy(
            &lines,
            &["fn a() {", "    one();", "    twoo();", "}"],
            &scope,
            0.85,
            true,
        );
        assert!(found.is_empty(), "{found:?}");
    }
}
