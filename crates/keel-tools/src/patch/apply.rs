//! Applying one file's hunks in order, through a line index (red-team pass 3, R3-10: 2,000
//! hunks on a 200,000-line file took 151 s of a core when each hunk rebuilt the file's text
//! and compared keys of every line).
//!
//! The file is kept as lines: the ones already final (before the previous hunk's end) and the
//! rest of a base, which is the original file until a hunk has to be looked for in the whole
//! file again. Each base line is indexed by a hash of its text without indentation and
//! whitespace runs (equal at any non-fuzzy level implies equal there), so a hunk's exact,
//! whitespace-normalised and indentation-agnostic matches come from the positions of its
//! rarest line rather than a scan. A fuzzy match, the whole-file fallback and the error
//! messages work on the file's text as before (bounded by the per-file deadline); the result
//! is byte for byte what applying the hunks to the rebuilt text one at a time gives.

use std::borrow::Cow;
use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};

use super::{Hunk, locate_unique};
use crate::edit::matching::{LineMatch, Lines, Scope, find_fuzzy, key};
use crate::edit::{
    FUZZY_THRESHOLD, LineBlock, MatchLevel, closest, closest_at, lacking, replacement,
};

/// The non-fuzzy levels, strictest first.
const EQUAL_LEVELS: [MatchLevel; 3] = [
    MatchLevel::Exact,
    MatchLevel::WhitespaceNormalised,
    MatchLevel::IndentationAgnostic,
];

/// How many of the file's first lines, and of its first non-blank ones, tell its indentation
/// style (what re-indenting reads).
const STYLE_LINES: usize = 500;
const STYLE_NONBLANK: usize = 200;

fn line_hash(line: &str) -> u64 {
    let mut h = DefaultHasher::new();
    key(MatchLevel::IndentationAgnostic, line).hash(&mut h);
    h.finish()
}

/// The file being patched: `done` (final lines, before the last hunk's end), then
/// `base[next..]`, with `index` over `base`.
struct Doc<'a> {
    done: Vec<Cow<'a, str>>,
    base: Vec<Cow<'a, str>>,
    next: usize,
    /// Line hash → positions in `base`, ascending.
    index: HashMap<u64, Vec<usize>>,
    /// Whether the text ends with a newline.
    final_newline: bool,
}

impl<'a> Doc<'a> {
    fn new(text: &'a str) -> Self {
        let base: Vec<Cow<'a, str>> = Lines::new(text)
            .lines
            .into_iter()
            .map(Cow::Borrowed)
            .collect();
        let mut doc = Self {
            done: Vec::new(),
            base,
            next: 0,
            index: HashMap::new(),
            final_newline: text.ends_with('\n'),
        };
        doc.reindex();
        doc
    }

    fn reindex(&mut self) {
        self.index.clear();
        for (i, line) in self.base.iter().enumerate() {
            self.index.entry(line_hash(line)).or_default().push(i);
        }
    }

    fn len(&self) -> usize {
        self.done.len() + self.base.len() - self.next
    }

    /// The line at document position `d` (`d < len()`).
    fn line(&self, d: usize) -> &str {
        match self.done.get(d) {
            Some(l) => l,
            None => &self.base[self.next + d - self.done.len()],
        }
    }

    /// Document position of base position `b` (`b >= next`).
    fn doc_of(&self, b: usize) -> usize {
        self.done.len() + b - self.next
    }

    /// Base position of document position `d` (`d >= done.len()`).
    fn base_of(&self, d: usize) -> usize {
        self.next + d - self.done.len()
    }

    /// The whole text.
    fn text(&self) -> String {
        let lines: Vec<&str> = (0..self.len()).map(|d| self.line(d)).collect();
        let mut out = lines.join("\n");
        if self.final_newline && !lines.is_empty() {
            out.push('\n');
        }
        out
    }

    /// Makes the whole document the base (positions stay), for a look at all of it.
    fn rebase(&mut self) {
        if self.done.is_empty() && self.next == 0 {
            return;
        }
        let mut all = std::mem::take(&mut self.done);
        all.extend(self.base.drain(self.next..));
        self.base = all;
        self.next = 0;
        self.reindex();
    }

    /// The first line at or after `from` whose text without indentation is `wanted` (an `@@`
    /// anchor), else the first that contains it.
    fn find_anchor(&self, from: usize, anchor: &str) -> Option<usize> {
        let wanted = key(MatchLevel::IndentationAgnostic, anchor);
        let start = self.base_of(from.max(self.done.len()));
        let equal = self.index.get(&line_hash(anchor)).and_then(|positions| {
            let first = positions.partition_point(|&p| p < start);
            positions[first..]
                .iter()
                .find(|&&p| key(MatchLevel::IndentationAgnostic, &self.base[p]) == wanted)
        });
        if let Some(&p) = equal {
            return Some(self.doc_of(p));
        }
        (start..self.base.len())
            .find(|&p| key(MatchLevel::IndentationAgnostic, &self.base[p]).contains(&wanted))
            .map(|p| self.doc_of(p))
    }

    /// The first window at or after `from` whose lines equal `search`'s at the strictest
    /// non-fuzzy level that has one (with `at_end`, only the window ending the file).
    fn find_equal(
        &self,
        search: &[&str],
        from: usize,
        at_end: bool,
    ) -> Option<(LineMatch, MatchLevel)> {
        let m = search.len();
        let n = self.len();
        if m == 0 || m > n {
            return None;
        }
        // The rarest search line's positions are the candidates.
        let mut pivot: Option<(usize, &Vec<usize>)> = None;
        for (j, line) in search.iter().enumerate() {
            let positions = self.index.get(&line_hash(line))?;
            if pivot.is_none_or(|(_, best)| positions.len() < best.len()) {
                pivot = Some((j, positions));
            }
        }
        let (j, positions) = pivot?;
        let lowest = self.base_of(from.max(self.done.len())) + j;
        let first = positions.partition_point(|&p| p < lowest);
        let starts: Vec<usize> = positions[first..]
            .iter()
            .map(|&p| self.doc_of(p - j))
            .filter(|&s| s + m <= n && (!at_end || s + m == n))
            .collect();
        for level in EQUAL_LEVELS {
            let wanted: Vec<String> = search.iter().map(|l| key(level, l)).collect();
            let hit = starts.iter().find(|&&s| {
                wanted
                    .iter()
                    .enumerate()
                    .all(|(i, w)| key(level, self.line(s + i)) == *w)
            });
            if let Some(&start) = hit {
                return Some((
                    LineMatch {
                        start,
                        len: m,
                        similarity: 1.0,
                    },
                    level,
                ));
            }
        }
        None
    }

    /// The first lines, as many as re-indenting reads to tell the file's style (its first
    /// [`STYLE_LINES`] lines and its first [`STYLE_NONBLANK`] non-blank ones).
    fn style_lines(&self) -> Vec<&str> {
        let mut out = Vec::new();
        let mut nonblank = 0;
        for d in 0..self.len() {
            if out.len() >= STYLE_LINES && nonblank >= STYLE_NONBLANK {
                break;
            }
            let line = self.line(d);
            if !line.trim().is_empty() {
                nonblank += 1;
            }
            out.push(line);
        }
        out
    }

    /// Inserts `new` before document position `at` (at the end: `at >= len()`); the lines
    /// before it become final.
    fn insert(&mut self, at: usize, new: &[&str]) {
        let at = at.min(self.len());
        self.finish_before(at);
        // An insertion of nothing still adds its line break (as the text splice did).
        if new.is_empty() {
            self.done.push(Cow::Borrowed(""));
        }
        self.done
            .extend(new.iter().map(|l| Cow::Owned(l.to_string())));
        if self.next == self.base.len() {
            self.final_newline = true;
        }
    }

    /// Replaces the `len` lines at document position `start` (not before the final lines)
    /// with `lines`; everything up to their end becomes final.
    fn replace(&mut self, start: usize, len: usize, lines: Vec<String>) {
        self.finish_before(start);
        self.next += len;
        self.done.extend(lines.into_iter().map(Cow::Owned));
    }

    /// Moves the base lines before document position `d` to the final lines.
    fn finish_before(&mut self, d: usize) {
        let b = self.base_of(d.max(self.done.len()));
        let moved: Vec<Cow<'a, str>> = self.base[self.next..b].to_vec();
        self.done.extend(moved);
        self.next = b;
    }
}

/// Applies `hunks` to `text` in order (each looked for after the previous one's end and after
/// its `@@` anchors; only if nothing follows, in the whole file, where the match must be
/// unique). On failure, the failing hunk's index and what went wrong.
pub(super) fn apply_hunks_within(
    text: &str,
    hunks: &[Hunk],
    deadline: std::time::Duration,
) -> Result<(String, Vec<MatchLevel>), (usize, String)> {
    let started = std::time::Instant::now();
    let mut doc = Doc::new(text);
    let mut levels = Vec::with_capacity(hunks.len());
    for (k, hunk) in hunks.iter().enumerate() {
        if started.elapsed() > deadline {
            return Err((
                k,
                format!(
                    "applying this file's {} hunks took longer than {} s (hunk {} of {} reached); nothing was written. Split the change into several smaller patches, or rewrite the file with create_file",
                    hunks.len(),
                    deadline.as_secs(),
                    k + 1,
                    hunks.len()
                ),
            ));
        }
        let mut from = doc.done.len();
        let mut anchor_line = None;
        for anchor in hunk.outer.iter().chain(&hunk.anchor) {
            if let Some(i) = doc.find_anchor(from, anchor) {
                from = i;
                anchor_line = Some(i);
            }
        }
        let old = hunk.old_lines();
        let new = hunk.new_lines();
        let block = LineBlock::from_lines(old, new.clone());
        if block.search.is_empty() {
            // Pure insertion: after the anchor line, else at the end of the file.
            let at = anchor_line.map_or(doc.len(), |i| i + 1);
            doc.insert(at, &new);
            levels.push(MatchLevel::Exact);
            continue;
        }
        let mut found = doc.find_equal(&block.search, from, hunk.at_end);
        if found.is_none() {
            // A near match, or a match anywhere: looked for in the whole text.
            doc.rebase();
            let whole = doc.text();
            let file = Lines::new(&whole);
            let scope = Scope {
                starts: from..file.len() + 1,
                at_end: hunk.at_end,
            };
            found = find_fuzzy(&file, &block.search, &scope, FUZZY_THRESHOLD, true)
                .first()
                .map(|m| (*m, MatchLevel::Fuzzy))
                .or_else(|| {
                    if from > 0 {
                        locate_unique(&file, &block.search, hunk.at_end)
                    } else {
                        None
                    }
                });
            if found.is_none() {
                let mut detail =
                    String::from("its context and removed lines are not in the file.\n");
                match closest(&file, &block.search) {
                    Some(c) => c.describe(&mut detail, "the hunk"),
                    None => detail
                        .push_str("Nothing in the file resembles them; read the file again.\n"),
                }
                detail.push_str(
                    "Fix the hunk's ` ` and `-` lines to match the file exactly and retry.",
                );
                return Err((k, detail));
            }
        }
        let Some((m, level)) = found else {
            continue; // unreachable: handled above
        };
        if m.start < doc.done.len() {
            doc.rebase();
        }
        let region: Vec<&str> = (m.start..m.start + m.len).map(|d| doc.line(d)).collect();
        let style = doc.style_lines();
        match replacement(&block, &region, &style, level) {
            Ok(lines) => doc.replace(m.start, m.len, lines),
            Err(lines) => {
                let whole = doc.text();
                let file = Lines::new(&whole);
                let mut detail = format!(
                    "its closest place in the file {}. Applying it would keep the text the hunk replaces.\n",
                    lacking(&lines, "the hunk")
                );
                closest_at(&file, &block.search, m).describe(&mut detail, "the hunk");
                detail.push_str(
                    "Fix the hunk's ` ` and `-` lines to match the file exactly and retry.",
                );
                return Err((k, detail));
            }
        }
        levels.push(level);
    }
    Ok((doc.text(), levels))
}
