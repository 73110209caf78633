//! Snippets: the few lines of a hit a person (or model) needs to recognise it.

use std::collections::BTreeSet;

use super::{MAX_SNIPPET_CHARS, MAX_SNIPPET_LINES};

/// The files one search has read, by path (`None`: unreadable), so that evidence, config
/// keys and snippets read each file once.
pub(super) type FileLines = std::collections::HashMap<String, Option<Vec<String>>>;

/// The lines of `rel` from `files`, read on first use.
pub(super) fn lines_of<'a>(
    files: &'a mut FileLines,
    root: &std::path::Path,
    rel: &str,
) -> Option<&'a [String]> {
    if !files.contains_key(rel) {
        files.insert(rel.to_string(), read_lines(root, rel));
    }
    files.get(rel).and_then(|l| l.as_deref())
}

/// The lines of the indexed file `rel`, read beneath the workspace `root` (regular files
/// only, bounded: a file swapped for a link out or a FIFO since indexing is not read).
pub(super) fn read_lines(root: &std::path::Path, rel: &str) -> Option<Vec<String>> {
    let project = keel_fs::project::ProjectDir::open(root).ok()?;
    let bytes = project
        .read_bytes(rel, crate::build::MAX_ANALYSED_BYTES)
        .ok()??;
    Some(
        String::from_utf8_lossy(&bytes)
            .split('\n')
            .map(|l| l.strip_suffix('\r').unwrap_or(l).to_string())
            .collect(),
    )
}

/// Up to three lines of `start..=end`: the first non-blank line, then the lines with the
/// most query words. Also returns the query words found in the span.
pub(super) fn snippet(
    lines: &[String],
    start: usize,
    end: usize,
    words: &[String],
) -> (Vec<(usize, String)>, Vec<String>) {
    let end = end.min(lines.len());
    if start == 0 || start > end {
        return (Vec::new(), Vec::new());
    }
    let span = &lines[start - 1..end];
    let mut found: Vec<String> = Vec::new();
    let mut scored: Vec<(usize, usize)> = Vec::new();
    for (i, l) in span.iter().enumerate() {
        let lower = l.to_lowercase();
        let hits: Vec<&String> = words
            .iter()
            .filter(|w| w.len() > 1 && lower.contains(w.as_str()))
            .collect();
        for w in &hits {
            if !found.contains(w) {
                found.push((*w).clone());
            }
        }
        if !hits.is_empty() {
            scored.push((hits.len(), i));
        }
    }
    let mut chosen: BTreeSet<usize> = BTreeSet::new();
    if let Some(first) = span.iter().position(|l| !l.trim().is_empty()) {
        chosen.insert(first);
    }
    scored.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    for (_, i) in scored {
        if chosen.len() >= MAX_SNIPPET_LINES {
            break;
        }
        chosen.insert(i);
    }
    let lines = chosen
        .into_iter()
        .map(|i| {
            let t = span[i].trim_end();
            let t: String = if t.chars().count() > MAX_SNIPPET_CHARS {
                let mut s: String = t.chars().take(MAX_SNIPPET_CHARS).collect();
                s.push('…');
                s
            } else {
                t.to_string()
            };
            (start + i, t)
        })
        .collect();
    let mut ordered: Vec<String> = words
        .iter()
        .filter(|w| found.contains(w))
        .cloned()
        .collect();
    ordered.dedup();
    (lines, ordered)
}

pub(super) fn dedup_keep_order(v: &mut Vec<String>) {
    let mut seen = BTreeSet::new();
    v.retain(|s| seen.insert(s.clone()));
}
