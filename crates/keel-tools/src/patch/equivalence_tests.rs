//! The line-indexed hunk applier (`apply.rs`) against the one it replaced — kept here as the
//! reference: each hunk rebuilt the file's text and compared the keys of every line (red-team
//! pass 3, R3-10). On thousands of random files and patches both give the same text and match
//! levels, or fail at the same hunk.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use crate::edit::matching::key;
use crate::edit::{LineBlock, Spliced, closest, lacking, splice};

/// The applier before the line index (main 7e9b17f), unchanged.
fn old_apply_hunks_within(
    text: &str,
    hunks: &[Hunk],
    deadline: std::time::Duration,
) -> Result<(String, Vec<MatchLevel>), (usize, String)> {
    let started = std::time::Instant::now();
    let mut current = text.to_string();
    let mut cursor = 0usize;
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
        let file = Lines::new(&current);
        let mut from = cursor;
        let mut anchor_line = None;
        for anchor in hunk.outer.iter().chain(&hunk.anchor) {
            let wanted = key(MatchLevel::IndentationAgnostic, anchor);
            let hit = (from..file.len())
                .find(|&i| key(MatchLevel::IndentationAgnostic, file.lines[i]) == wanted)
                .or_else(|| {
                    (from..file.len()).find(|&i| {
                        key(MatchLevel::IndentationAgnostic, file.lines[i]).contains(&wanted)
                    })
                });
            if let Some(i) = hit {
                from = i;
                anchor_line = Some(i);
            }
        }
        let old = hunk.old_lines();
        let new = hunk.new_lines();
        let block = LineBlock::from_lines(old.clone(), new.clone());
        if block.search.is_empty() {
            // Pure insertion: after the anchor line, else at the end of the file.
            let at = anchor_line.map_or(file.len(), |i| i + 1);
            let (next, end) = old_insert_lines(&file, at, &new);
            current = next;
            cursor = end;
            levels.push(MatchLevel::Exact);
            continue;
        }
        let Some((found, level)) =
            old_locate(&file, &block.search, from, hunk.at_end).or_else(|| {
                if from > 0 {
                    locate_unique(&file, &block.search, hunk.at_end)
                } else {
                    None
                }
            })
        else {
            let mut detail = String::from("its context and removed lines are not in the file.\n");
            match closest(&file, &block.search) {
                Some(c) => c.describe(&mut detail, "the hunk"),
                None => {
                    detail.push_str("Nothing in the file resembles them; read the file again.\n")
                }
            }
            detail
                .push_str("Fix the hunk's ` ` and `-` lines to match the file exactly and retry.");
            return Err((k, detail));
        };
        let next = match splice(&file, &block, &[found], level) {
            Spliced::Done(next) => next,
            Spliced::Unmatched { closest, lines } => {
                let mut detail = format!(
                    "its closest place in the file {}. Applying it would keep the text the hunk replaces.\n",
                    lacking(&lines, "the hunk")
                );
                closest.describe(&mut detail, "the hunk");
                detail.push_str(
                    "Fix the hunk's ` ` and `-` lines to match the file exactly and retry.",
                );
                return Err((k, detail));
            }
        };
        // The next hunk looks after this one's new lines (kept file lines included).
        let after = file.len() - (found.start + found.len);
        cursor = next.split_inclusive('\n').count().saturating_sub(after);
        current = next;
        levels.push(level);
    }
    Ok((current, levels))
}

fn old_insert_lines(file: &Lines<'_>, at: usize, new: &[&str]) -> (String, usize) {
    let text = file.text;
    let mut block = new.join("\n");
    block.push('\n');
    let byte = if at >= file.len() {
        text.len()
    } else {
        file.content_bytes(at..at + 1).start
    };
    let mut out = String::with_capacity(text.len() + block.len() + 1);
    out.push_str(&text[..byte]);
    if byte == text.len() && !text.is_empty() && !text.ends_with('\n') {
        out.push('\n');
    }
    out.push_str(&block);
    out.push_str(&text[byte..]);
    (out, at + new.len())
}

/// The first match at or after `from` at the strictest level that has one (fuzzy: the best).
fn old_locate(
    file: &Lines<'_>,
    search: &[&str],
    from: usize,
    at_end: bool,
) -> Option<(LineMatch, MatchLevel)> {
    let scope = Scope {
        starts: from..file.len() + 1,
        at_end,
    };
    for level in [
        MatchLevel::Exact,
        MatchLevel::WhitespaceNormalised,
        MatchLevel::IndentationAgnostic,
    ] {
        if let Some(m) = find_equal(level, file, search, &scope).first() {
            return Some((*m, level));
        }
    }
    find_fuzzy(file, search, &scope, FUZZY_THRESHOLD, true)
        .first()
        .map(|m| (*m, MatchLevel::Fuzzy))
}

#[test]
fn the_indexed_applier_gives_what_the_text_applier_gave() {
    let mut seed: u64 = 0x1234_5678;
    let mut rnd = |n: u64| {
        seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1442695040888963407);
        (seed >> 33) % n
    };
    let words = [
        "a",
        "b",
        "fn x() {",
        "}",
        "    let y = 1;",
        "\tret",
        "",
        "  ",
        "c  d",
        "E",
    ];
    let mut compared = 0;
    for _case in 0..4000 {
        let n = rnd(30) as usize;
        let mut text: String = (0..n)
            .map(|_| words[rnd(words.len() as u64) as usize].to_string() + "\n")
            .collect();
        if rnd(4) == 0 {
            text.pop();
        }
        let mut patch = String::from("*** Begin Patch\n*** Update File: f\n");
        let hunks = 1 + rnd(4);
        for _ in 0..hunks {
            if rnd(5) == 0 {
                patch.push_str(&format!("@@ {}\n", words[rnd(words.len() as u64) as usize]));
            } else {
                patch.push_str("@@\n");
            }
            let lines = 1 + rnd(4);
            for _ in 0..lines {
                let w = words[rnd(words.len() as u64) as usize];
                let w = if rnd(6) == 0 {
                    format!("  {w}")
                } else {
                    w.to_string()
                };
                match rnd(3) {
                    0 => patch.push_str(&format!(" {w}\n")),
                    1 => patch.push_str(&format!("-{w}\n")),
                    _ => patch.push_str(&format!("+{w}\n")),
                }
            }
            if rnd(8) == 0 {
                patch.push_str("*** End of File\n");
            }
        }
        patch.push_str("*** End Patch\n");
        let Ok(p) = parse(&patch) else { continue };
        let Some(FileOp::Update { hunks, .. }) = p.ops.first() else {
            continue;
        };
        let d = std::time::Duration::from_secs(10);
        let a = old_apply_hunks_within(&text, hunks, d);
        let b = apply_hunks_within(&text, hunks, d);
        let a = a.map_err(|(k, _)| k);
        let b = b.map_err(|(k, _)| k);
        assert_eq!(a, b, "text {text:?}\npatch {patch}");
        compared += 1;
    }
    assert!(compared > 1000, "{compared}");
}
