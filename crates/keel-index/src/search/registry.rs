//! Names a registry gives its entries. A linter's messages (`use-yield-from`, `W0511`), a
//! rule set's codes (`E501`, `L016`): each is registered as a string literal in the source
//! file that defines the entry (pylint's `msgs` table) and emitted by the definitions that
//! check for it (`self.add_message("use-yield-from", …)`). A report naming one — often in
//! its title alone — points at those files and definitions far more than at the files that
//! merely share its words (`use`, `yield`, `from`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use rusqlite::{Connection, OptionalExtension, params};

use super::config_keys::phrase_chunks;
use super::evidence::{Evidence, LOCATION_SHARE};
use super::snippet::{FileLines, lines_of};
use super::*;
use crate::pathrole::PathRole;

/// A source file holding a registered name as a string literal (shared out among the files
/// that hold it).
const W_REGISTERED: f64 = 1.0;
/// Names held as literals in more source files than this point nowhere.
const MAX_FILES: usize = 6;
/// The most names one query looks up.
const MAX_NAMES: usize = 6;
/// The most locations (definitions holding the literal) one file gives.
const MAX_LOCATIONS: usize = 8;

/// The registry-like names of a query, each once, in order: hyphenated lowercase names of
/// two or more words (`use-yield-from`; not `--flags`, URLs or version strings) and codes of
/// one or two capital letters and three or four digits (`W0511`, `E501`).
pub(super) fn names(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let token_char = |c: char| c.is_ascii_alphanumeric() || "-_./:".contains(c);
    for raw in text.split(|c: char| !token_char(c)) {
        if raw.contains("://") || raw.starts_with("--") {
            continue;
        }
        for part in raw.split(['/', ':']) {
            let t = part.trim_end_matches('.');
            if t.contains('.') {
                continue;
            }
            if (is_hyphenated(t) || is_code(t)) && !out.iter().any(|n| n == t) {
                out.push(t.to_string());
            }
        }
        if out.len() >= MAX_NAMES {
            break;
        }
    }
    out.truncate(MAX_NAMES);
    out
}

/// `use-yield-from`, `invalid-name`: lowercase words joined by `-`, a letter first, six
/// characters or more, two of the words of two letters or more (not `e-mail`, `x-axis`).
fn is_hyphenated(t: &str) -> bool {
    t.len() >= 6
        && t.starts_with(|c: char| c.is_ascii_lowercase())
        && t.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && t.contains('-')
        && t.split('-').all(|w| !w.is_empty())
        && t.split('-')
            .filter(|w| w.len() >= 2 && w.chars().all(|c| c.is_ascii_lowercase()))
            .count()
            >= 2
}

/// `W0511`, `E501`, `PL123`: one or two capitals, then three or four digits.
fn is_code(t: &str) -> bool {
    let letters = t.chars().take_while(|c| c.is_ascii_uppercase()).count();
    let digits = t.len() - letters;
    (1..=2).contains(&letters)
        && (3..=4).contains(&digits)
        && t[letters..].chars().all(|c| c.is_ascii_digit())
}

/// Adds evidence for the source files holding one of `names` as a whole string literal,
/// and locations for the definitions holding it.
pub(super) fn matches(
    conn: &Connection,
    root: &Path,
    files: &mut FileLines,
    names: &[String],
    filter: &dyn Fn(&str) -> bool,
    ev: &mut Evidence,
) -> Result<(), IndexError> {
    if names.is_empty() {
        return Ok(());
    }
    // The innermost function holding a line: the location is the method that emits the
    // name, not the whole class a small class's single chunk spans (a line outside every
    // function keeps its chunk's definition: a class's table of messages).
    let mut innermost = conn.prepare_cached(
        "SELECT qualified, kind, start_line, end_line FROM symbols
         WHERE file_id = ?1 AND start_line <= ?2 AND end_line >= ?2
           AND kind IN ('function', 'method')
         ORDER BY depth DESC, start_line DESC LIMIT 1",
    )?;
    type Chunk = (Option<String>, Option<String>);
    for name in names {
        let words: Vec<String> = name.split('-').map(str::to_lowercase).collect();
        let phrase = format!("body : \"{}\"", words.join(" "));
        let quoted = [format!("\"{name}\""), format!("'{name}'")];
        let rows = phrase_chunks(conn, &phrase, 2000)?;
        // Per source file: its path and the lines holding the name as a literal, each with
        // its chunk.
        let mut found: BTreeMap<i64, (String, BTreeMap<usize, Chunk>)> = BTreeMap::new();
        for (fid, path, start, end, symbol, kind) in rows {
            if found.len() > MAX_FILES {
                break;
            }
            if !filter(&path) || PathRole::of(&path) != PathRole::Source {
                continue;
            }
            let Some(lines) = lines_of(files, root, &path) else {
                continue;
            };
            let (start, end) = (start.max(1) as usize, end.max(1) as usize);
            for (i, l) in lines
                .iter()
                .enumerate()
                .skip(start - 1)
                .take(end + 1 - start.min(end + 1))
            {
                if quoted.iter().any(|q| l.contains(q.as_str())) {
                    found
                        .entry(fid)
                        .or_insert_with(|| (path.clone(), BTreeMap::new()))
                        .1
                        .entry(i + 1)
                        .or_insert_with(|| (symbol.clone(), kind.clone()));
                }
            }
        }
        if found.is_empty() || found.len() > MAX_FILES {
            continue;
        }
        let w = W_REGISTERED / (found.len() as f64).sqrt();
        let why = format!("holds `{name}` as a string");
        for (fid, (path, lines)) in found {
            ev.add(fid, &path, w, why.clone());
            let mut seen = BTreeSet::new();
            for (line, chunk) in lines {
                let def: Option<(String, String, i64, i64)> = innermost
                    .query_row(params![fid, line as i64], |r| {
                        Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
                    })
                    .optional()?;
                let (symbol, kind, start, end) = match def {
                    Some((q, k, s, e)) => (Some(q), Some(k), s.max(1) as usize, e.max(1) as usize),
                    // The line alone: a class's whole span would swallow its methods'
                    // own locations when overlapping hits merge.
                    None => (chunk.0, chunk.1, line, line),
                };
                if seen.len() >= MAX_LOCATIONS || !seen.insert((start, symbol.clone())) {
                    continue;
                }
                ev.locations.push(Cand {
                    file_id: fid,
                    path: path.clone(),
                    start,
                    end,
                    symbol,
                    kind,
                    text: 0.0,
                    sym: w * LOCATION_SHARE,
                    bonus: 0.0,
                    why: vec![why.clone()],
                });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_from_titles() {
        assert_eq!(
            names("False positive for `use-yield-from` for generators yielding from iterators"),
            ["use-yield-from"]
        );
        assert_eq!(names("W0511: Doesn't detect TODO in docstrings"), ["W0511"]);
        assert_eq!(
            names("Document rationale for consider-alternative-union-syntax/R6003"),
            ["consider-alternative-union-syntax", "R6003"]
        );
        // Flags, URLs, dotted names, versions and one-word or short hyphenations are not.
        assert!(
            names("pylint --disable-all at https://github.com/pylint-dev/x-y 1.2-rc3").is_empty()
        );
        assert!(names("an e-mail, a x-axis, python3.10-dev, ABC12345").is_empty());
    }
}
