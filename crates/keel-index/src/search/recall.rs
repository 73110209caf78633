//! The tail of a file ranking keeps room for the files whole-file BM25 ranks best.
//!
//! Structural evidence and chunk matches decide the head of a file ranking well; when they
//! miss, the fixed file is usually one whole-file BM25 (the report's words over each source
//! file as a whole) ranks near its top — a different view of the same words. A few of those
//! files, not already among the first [`KEEP`], take the places after them, so a reader (or
//! an agent) going down the first twenty meets them. In the first [`HEAD`] places only
//! whole-file BM25's best source file may come in, and only before a file that is not
//! source (a test, a page of docs).

use std::collections::HashSet;

use rusqlite::Connection;

use super::Cand;
use super::signals::file_text_scores;
use crate::IndexError;
use crate::pathrole::PathRole;
use crate::terms::fts_phrases;

/// How many of the ranking's own first files keep their places.
pub(super) const KEEP: usize = 12;
/// How many of whole-file BM25's best source files may follow them.
pub(super) const FROM_TEXT: usize = 8;
/// The places where whole-file BM25's best source file goes before a file that is not
/// source.
const HEAD: usize = 5;

/// Whole-file BM25's best files for `words` (a short query's: a report's come with its
/// full-text pass), best first.
pub(super) fn text_files(
    conn: &Connection,
    words: &[String],
    filter: &dyn Fn(&str) -> bool,
    skip: &HashSet<i64>,
) -> Result<Vec<(i64, String)>, IndexError> {
    let phrases = fts_phrases(words);
    if phrases.is_empty() {
        return Ok(Vec::new());
    }
    Ok(
        file_text_scores(conn, &phrases, super::FILE_TEXT_CANDIDATES, filter, skip)?
            .into_iter()
            .map(|(id, path, _)| (id, path))
            .collect(),
    )
}

/// Whole-file BM25's best source file, when the ranking's first [`HEAD`] hold it not but
/// hold a test, a document or another file that is not source: it takes the place of the
/// first such file (which moves down one). The ranking's head is its evidence's; a test or
/// a page of docs there is rarely what a report asks to change, and whole-file BM25's first
/// pick often is.
fn head_source(scored: &mut Vec<(f64, Cand)>, by_text: &[(i64, String)]) {
    let Some((id, path)) = by_text
        .iter()
        .find(|(_, path)| PathRole::of(path) == PathRole::Source)
    else {
        return;
    };
    let head = scored.len().min(HEAD);
    if scored[..head].iter().any(|(_, c)| c.file_id == *id) {
        return;
    }
    let Some(at) = scored[..head]
        .iter()
        .position(|(_, c)| PathRole::of(&c.path) != PathRole::Source)
    else {
        return;
    };
    let mut c = match scored.iter().position(|(_, c)| c.file_id == *id) {
        Some(k) => scored.remove(k).1,
        None => Cand {
            file_id: *id,
            path: path.to_string(),
            start: 1,
            end: 1,
            symbol: None,
            kind: None,
            text: 0.0,
            sym: 0.0,
            bonus: 0.0,
            why: Vec::new(),
        },
    };
    c.why.push("whole-file BM25's best source file".into());
    let hi = if at == 0 {
        scored[0].0 + 1.0
    } else {
        scored[at - 1].0
    };
    let lo = scored[at].0;
    scored.insert(at, ((hi + lo) / 2.0, c));
}

/// [`text_tail`] for file results.
pub(super) fn files_tail(scored: &mut Vec<(f64, Cand)>, by_text: &[(i64, String)]) {
    head_source(scored, by_text);
    text_tail(
        scored,
        by_text,
        KEEP,
        FROM_TEXT,
        |c| c.file_id,
        |file_id, path| Cand {
            file_id,
            path: path.to_string(),
            start: 1,
            end: 1,
            symbol: None,
            kind: None,
            text: 0.0,
            sym: 0.0,
            bonus: 0.0,
            why: Vec::new(),
        },
        |c| c.why.push("among whole-file BM25's best files".into()),
    );
}

/// Moves up to [`FROM_TEXT`] of `by_text`'s files (best first; source files only) that are
/// not among `ranked`'s first `keep` into the places right after them, each with a score
/// between its neighbours' so the order stays sorted by score. `ranked` is sorted, best
/// first; `new_hit(file_id, path)` makes a hit for a file the ranking did not hold.
pub(super) fn text_tail<C>(
    ranked: &mut Vec<(f64, C)>,
    by_text: &[(i64, String)],
    keep: usize,
    take: usize,
    id_of: impl Fn(&C) -> i64,
    new_hit: impl Fn(i64, &str) -> C,
    why: impl Fn(&mut C),
) {
    if ranked.len() <= keep || take == 0 {
        return;
    }
    let head: Vec<i64> = ranked[..keep].iter().map(|(_, c)| id_of(c)).collect();
    let picked: Vec<&(i64, String)> = by_text
        .iter()
        .filter(|(id, path)| PathRole::of(path) == PathRole::Source && !head.contains(id))
        .take(take)
        .collect();
    if picked.is_empty() {
        return;
    }
    let hi = ranked[keep - 1].0;
    let lo = ranked[keep].0;
    let mut moved = Vec::with_capacity(picked.len());
    for (j, (id, path)) in picked.iter().enumerate() {
        let s = lo + (hi - lo) * (picked.len() - j) as f64 / (picked.len() + 1) as f64;
        let mut c = match ranked.iter().position(|(_, c)| id_of(c) == *id) {
            Some(at) => ranked.remove(at).1,
            None => new_hit(*id, path),
        };
        why(&mut c);
        moved.push((s, c));
    }
    let tail = ranked.split_off(keep);
    ranked.extend(moved);
    ranked.extend(tail);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ranked(paths: &[&str]) -> Vec<(f64, (i64, String))> {
        paths
            .iter()
            .enumerate()
            .map(|(i, p)| (10.0 - i as f64, (i as i64, (*p).to_string())))
            .collect()
    }

    #[test]
    fn text_best_source_files_follow_the_head() {
        let mut r = ranked(&["a.py", "b.py", "c.py", "d.py", "e.py"]);
        let by_text = vec![
            (0, "a.py".to_string()),            // in the head: stays where it is
            (9, "tests/test_x.py".to_string()), // a test: not taken
            (4, "e.py".to_string()),            // ranked lower: moved up
            (7, "x.py".to_string()),            // not ranked at all: added
        ];
        text_tail(
            &mut r,
            &by_text,
            2,
            8,
            |c| c.0,
            |id, p| (id, p.to_string()),
            |_| {},
        );
        let order: Vec<&str> = r.iter().map(|(_, c)| c.1.as_str()).collect();
        assert_eq!(order, ["a.py", "b.py", "e.py", "x.py", "c.py", "d.py"]);
        assert!(
            r.windows(2).all(|w| w[0].0 >= w[1].0),
            "still sorted by score"
        );
    }

    fn cands(paths: &[&str]) -> Vec<(f64, Cand)> {
        paths
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let c = Cand {
                    file_id: i as i64,
                    path: (*p).to_string(),
                    start: 1,
                    end: 1,
                    symbol: None,
                    kind: None,
                    text: 0.0,
                    sym: 0.0,
                    bonus: 0.0,
                    why: Vec::new(),
                };
                (10.0 - i as f64, c)
            })
            .collect()
    }

    fn paths(r: &[(f64, Cand)]) -> Vec<&str> {
        r.iter().map(|(_, c)| c.path.as_str()).collect()
    }

    #[test]
    fn text_best_source_file_goes_before_a_test_or_doc_in_the_head() {
        let mut r = cands(&[
            "a.py",
            "docs/usage.rst",
            "tests/test_a.py",
            "b.py",
            "c.py",
            "d.py",
            "e.py",
        ]);
        let by_text = vec![(9, "tests/test_x.py".to_string()), (6, "e.py".to_string())];
        head_source(&mut r, &by_text);
        assert_eq!(
            paths(&r),
            [
                "a.py",
                "e.py",
                "docs/usage.rst",
                "tests/test_a.py",
                "b.py",
                "c.py",
                "d.py"
            ]
        );
        assert!(
            r.windows(2).all(|w| w[0].0 >= w[1].0),
            "still sorted by score"
        );
        // Not ranked at all: added.
        let mut r = cands(&["a.py", "tests/test_a.py", "b.py"]);
        head_source(&mut r, &[(7, "x.py".to_string())]);
        assert_eq!(paths(&r), ["a.py", "x.py", "tests/test_a.py", "b.py"]);
    }

    #[test]
    fn a_head_of_source_files_or_holding_the_text_best_is_left_alone() {
        let names = [
            "a.py",
            "b.py",
            "c.py",
            "d.py",
            "e.py",
            "tests/test_a.py",
            "f.py",
        ];
        let mut r = cands(&names);
        head_source(&mut r, &[(6, "f.py".to_string())]);
        assert_eq!(paths(&r), names);
        let names = ["a.py", "tests/test_a.py", "f.py"];
        let mut r = cands(&names);
        head_source(&mut r, &[(2, "f.py".to_string())]);
        assert_eq!(paths(&r), names);
    }

    #[test]
    fn a_short_ranking_is_left_alone() {
        let mut r = ranked(&["a.py", "b.py"]);
        text_tail(
            &mut r,
            &[(7, "x.py".into())],
            2,
            8,
            |c| c.0,
            |id, p| (id, p.into()),
            |_| {},
        );
        assert_eq!(r.len(), 2);
    }
}
