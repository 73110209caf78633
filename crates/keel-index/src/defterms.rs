//! The words of each definition, counted when a file is indexed, so that ranking definitions
//! for a report (`search/definitions.rs`) reads no file at query time.
//!
//! A definition's own lines are its span, less its members' spans for a type (a class counts
//! its lines outside its methods). Each word of those lines (a run of letters, digits and
//! `_`) counts once towards the definition's length and once for every distinct stem among
//! its lowercase form and its identifier parts (`parseConfig` → parseconfig, parse,
//! config). What is stored per definition: the length, and the stems with their counts as
//! text (`stem count stem count …`, stems in byte order).

use std::collections::{BTreeMap, HashMap};

use crate::symbols::{Symbol, SymbolKind};
use crate::terms::split_identifier;

/// Definition kinds whose words are counted (the answers of a definition search).
pub(crate) const KINDS: &[&str] = &[
    "function",
    "method",
    "class",
    "struct",
    "enum",
    "trait",
    "interface",
];

/// A crude suffix stemmer (enough to match `parsing` with `parser`).
pub(crate) fn stem(w: &str) -> &str {
    for suffix in [
        "ations", "ation", "ings", "ing", "ers", "er", "ed", "es", "s", "e",
    ] {
        if let Some(s) = w.strip_suffix(suffix)
            && s.len() >= 3
        {
            return s;
        }
    }
    w
}

/// The words of one definition: how many, and each stem's count.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DefTerms {
    pub words: usize,
    pub stems: String,
}

/// The distinct stems of one word: its lowercase form and its identifier parts, stemmed.
fn word_stems(tok: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for part in std::iter::once(tok.to_lowercase()).chain(split_identifier(tok)) {
        let st = stem(&part);
        if !out.iter().any(|s| s == st) {
            out.push(st.to_string());
        }
    }
    out
}

/// One file's lines as words: per line, its word count and its words' stems (ids into a
/// per-file table).
struct LineWords {
    lines: Vec<(usize, std::ops::Range<usize>)>,
    ids: Vec<u32>,
    stems: Vec<String>,
}

impl LineWords {
    fn new(lines: &[&str]) -> LineWords {
        let mut memo: HashMap<&str, Vec<u32>> = HashMap::new();
        let mut stem_ids: HashMap<String, u32> = HashMap::new();
        let mut out = LineWords {
            lines: Vec::with_capacity(lines.len()),
            ids: Vec::new(),
            stems: Vec::new(),
        };
        for line in lines {
            let from = out.ids.len();
            let mut words = 0usize;
            for tok in line.split(|c: char| !(c.is_alphanumeric() || c == '_')) {
                if tok.is_empty() {
                    continue;
                }
                words += 1;
                let ids = memo.entry(tok).or_insert_with(|| {
                    word_stems(tok)
                        .into_iter()
                        .map(|st| {
                            let next = out.stems.len() as u32;
                            *stem_ids.entry(st.clone()).or_insert_with(|| {
                                out.stems.push(st);
                                next
                            })
                        })
                        .collect()
                });
                out.ids.extend_from_slice(ids);
            }
            out.lines.push((words, from..out.ids.len()));
        }
        out
    }
}

/// The words of each definition of a file (`None` for symbols of other kinds), in the order
/// of `symbols`. `lines` are the file's lines (split at `\n`, a trailing `\r` removed).
pub fn definition_terms(lines: &[&str], symbols: &[Symbol]) -> Vec<Option<DefTerms>> {
    if !symbols.iter().any(|s| KINDS.contains(&s.kind.name())) {
        return vec![None; symbols.len()];
    }
    let words = LineWords::new(lines);
    // Members: the symbols one level deeper that start inside the span, in (start, depth)
    // order, as the search reads them back.
    let mut order: Vec<usize> = (0..symbols.len()).collect();
    order.sort_by_key(|&i| (symbols[i].start_line.max(1), symbols[i].depth));
    let mut place = vec![0usize; symbols.len()];
    for (p, &i) in order.iter().enumerate() {
        place[i] = p;
    }
    symbols
        .iter()
        .enumerate()
        .map(|(i, s)| {
            if !KINDS.contains(&s.kind.name()) {
                return None;
            }
            let (start, end) = (s.start_line.max(1), s.end_line.max(1));
            let own_members = !matches!(s.kind, SymbolKind::Function | SymbolKind::Method);
            let members: Vec<(usize, usize)> = if own_members {
                order[place[i] + 1..]
                    .iter()
                    .map(|&j| &symbols[j])
                    .take_while(|m| m.start_line.max(1) <= end)
                    .filter(|m| m.depth == s.depth + 1)
                    .map(|m| (m.start_line.max(1), m.end_line.max(1)))
                    .collect()
            } else {
                Vec::new()
            };
            let mut counts: BTreeMap<&str, u32> = BTreeMap::new();
            let mut len = 0usize;
            let to = end.min(words.lines.len());
            for n in start..=to {
                if members.iter().any(|(a, b)| *a <= n && n <= *b) {
                    continue;
                }
                let Some((w, range)) = words.lines.get(n - 1) else {
                    break;
                };
                len += w;
                for id in &words.ids[range.clone()] {
                    *counts
                        .entry(words.stems[*id as usize].as_str())
                        .or_default() += 1;
                }
            }
            let mut stems = String::new();
            for (st, c) in counts {
                if !stems.is_empty() {
                    stems.push(' ');
                }
                stems.push_str(st);
                stems.push(' ');
                stems.push_str(&c.to_string());
            }
            Some(DefTerms { words: len, stems })
        })
        .collect()
}

/// The stems and counts of a stored [`DefTerms::stems`] text.
#[cfg(test)]
pub(crate) fn parse_stems(text: &str) -> impl Iterator<Item = (&str, u32)> {
    let mut it = text.split(' ');
    std::iter::from_fn(move || {
        loop {
            let st = it.next()?;
            let c = it.next()?;
            if let Ok(c) = c.parse::<u32>()
                && !st.is_empty()
            {
                return Some((st, c));
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::symbols::{Language, SymbolExtractor, TreeSitterExtractor};

    fn terms_of(src: &str) -> Vec<(String, Option<DefTerms>)> {
        let fs = TreeSitterExtractor::new()
            .extract(Language::Python, src)
            .unwrap();
        let lines: Vec<&str> = src.split('\n').collect();
        let t = definition_terms(&lines, &fs.symbols);
        fs.symbols
            .iter()
            .map(|s| s.qualified_name())
            .zip(t)
            .collect()
    }

    #[test]
    fn a_class_counts_its_lines_outside_its_methods() {
        let src = "class Parser:\n    limit = parse_limit\n    def parse(self, text):\n        return parseConfig(text)\n";
        let got = terms_of(src);
        let class = got[0].1.clone().unwrap();
        // class Parser limit parse_limit: 4 words; the method's lines are left out.
        assert_eq!(class.words, 4);
        assert_eq!(class.stems, "clas 1 limit 2 pars 2 parse_limit 1");
        let method = got[1].1.clone().unwrap();
        // def parse self text return parseConfig text: 7 words.
        assert_eq!(method.words, 7);
        assert!(method.stems.contains("config 1"), "{}", method.stems);
        assert!(method.stems.contains("pars 2"), "{}", method.stems);
        assert!(method.stems.contains("text 2"), "{}", method.stems);
        let parsed: Vec<(&str, u32)> = parse_stems(&method.stems).collect();
        assert!(parsed.contains(&("parseconfig", 1)), "{parsed:?}");
    }
}
