//! Writing a line-level match back into the text: the search and replacement as lines, the
//! merge of each found region, and the closest region to show when a search fails.

use super::matching::{self, LineMatch, Lines, Scope, find_fuzzy};
use super::{Closest, MatchLevel, indent, merge};

/// Below this, a region is not worth showing as "closest".
const CLOSEST_FLOOR: f64 = 0.4;
/// The closest region shown on failure is at most this many lines.
const MAX_CLOSEST_LINES: usize = 30;

/// The search and replacement as lines, for line-level matching: one final newline dropped,
/// blank lines at the ends of the search ignored (and as many at the ends of the
/// replacement).
pub(crate) struct LineBlock<'a> {
    pub search: Vec<&'a str>,
    pub replace: Vec<&'a str>,
}

impl<'a> LineBlock<'a> {
    pub fn new(search: &'a str, replace: &'a str) -> Self {
        let split = |s: &'a str| -> Vec<&'a str> {
            let s = s.strip_suffix('\n').unwrap_or(s);
            s.split('\n').collect()
        };
        Self::from_lines(
            split(search),
            if replace.is_empty() {
                Vec::new()
            } else {
                split(replace)
            },
        )
    }

    pub fn from_lines(mut search: Vec<&'a str>, mut replace: Vec<&'a str>) -> Self {
        fn blank(l: &&&str) -> bool {
            l.trim().is_empty()
        }
        let lead = search.iter().take_while(blank).count();
        if lead == search.len() {
            return Self {
                search: Vec::new(),
                replace,
            };
        }
        let trail = search.iter().rev().take_while(blank).count();
        search.truncate(search.len() - trail);
        search.drain(..lead);
        let r_lead = replace.iter().take_while(blank).count().min(lead);
        replace.drain(..r_lead);
        let r_trail = replace.iter().rev().take_while(blank).count().min(trail);
        replace.truncate(replace.len() - r_trail);
        Self { search, replace }
    }
}

/// The text after splicing, or why a match cannot be applied.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Spliced {
    Done(String),
    /// A found region lacks lines the edit removes or changes (see [`merge`]).
    Unmatched {
        closest: Closest,
        /// Those search lines.
        lines: Vec<String>,
    },
}

/// Replaces each matched region (in file order, not overlapping) with the block's
/// replacement — re-indented unless the match kept indentation, merged with the region's own
/// lines. Nothing is spliced if any region refuses the merge.
pub(crate) fn splice(
    file: &Lines<'_>,
    block: &LineBlock<'_>,
    found: &[LineMatch],
    level: MatchLevel,
) -> Spliced {
    let text = file.text;
    let mut out = String::with_capacity(text.len() + 64);
    let mut cursor = 0;
    for m in found {
        let region = &file.lines[m.range()];
        let new_lines = match replacement(block, region, &file.lines, level) {
            Ok(lines) => lines,
            Err(lines) => {
                return Spliced::Unmatched {
                    closest: closest_at(file, &block.search, *m),
                    lines,
                };
            }
        };
        let cut = if new_lines.is_empty() {
            file.removal_bytes(m.range())
        } else {
            file.content_bytes(m.range())
        };
        // A removal at the end of a file without a final newline takes the newline before
        // it, which an adjacent earlier region may already have consumed.
        let start = cut.start.max(cursor);
        out.push_str(&text[cursor..start]);
        out.push_str(&new_lines.join("\n"));
        cursor = cut.end.max(start);
    }
    out.push_str(&text[cursor..]);
    Spliced::Done(out)
}

/// The lines that replace `region` (the file's lines a match of `block.search` found, at
/// `level`): the block's replacement — re-indented unless the match kept indentation —
/// merged with the region's own lines. `Err`: the search lines the region lacks. `file`: the
/// file's lines (its first ones tell its indentation style).
pub(crate) fn replacement(
    block: &LineBlock<'_>,
    region: &[&str],
    file: &[&str],
    level: MatchLevel,
) -> Result<Vec<String>, Vec<String>> {
    let replace: Vec<String> = match level {
        MatchLevel::Exact | MatchLevel::WhitespaceNormalised => {
            block.replace.iter().map(|l| l.to_string()).collect()
        }
        MatchLevel::IndentationAgnostic | MatchLevel::Fuzzy => {
            indent::reindent(&block.replace, &block.search, region, file)
        }
    };
    merge::merge(&block.search, region, &replace).map_err(|unmatched| {
        unmatched
            .lines
            .iter()
            .map(|&i| block.search[i].to_string())
            .collect()
    })
}

/// The region most like `search`, with what differs, if anything is reasonably close.
pub(crate) fn closest(file: &Lines<'_>, search: &[&str]) -> Option<Closest> {
    let best = find_fuzzy(file, search, &Scope::whole(file), CLOSEST_FLOOR, false)
        .into_iter()
        .next()?;
    Some(closest_at(file, search, best))
}

/// `found` described as the closest region to `search`: its lines and what differs.
pub(crate) fn closest_at(file: &Lines<'_>, search: &[&str], found: LineMatch) -> Closest {
    let region: Vec<&str> = file.lines[found.range()].to_vec();
    // Compare ignoring indentation and whitespace runs (those never stop a match), show the
    // lines as written.
    let search_keys: Vec<String> = search
        .iter()
        .map(|l| matching::key(MatchLevel::IndentationAgnostic, l))
        .collect();
    let region_keys: Vec<String> = region
        .iter()
        .map(|l| matching::key(MatchLevel::IndentationAgnostic, l))
        .collect();
    let mut differences = Vec::new();
    for op in super::bounded_ops(&search_keys, &region_keys) {
        let (tag, old, new) = op.as_tag_tuple();
        if tag == similar::DiffTag::Equal {
            continue;
        }
        differences.extend(old.map(|i| format!("- {}", search[i])));
        differences.extend(new.map(|i| format!("+ {}", region[i])));
    }
    let shown = region
        .iter()
        .take(MAX_CLOSEST_LINES)
        .map(|l| l.to_string())
        .collect();
    Closest {
        start_line: found.start + 1,
        end_line: found.start + found.len.max(1),
        similarity: found.similarity,
        lines: shown,
        differences,
    }
}
