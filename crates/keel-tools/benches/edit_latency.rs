//! Edit latency on a 10,000-line file: `SearchReplaceEditor` and the patch planner, one exact
//! and one fuzzy edit each, median of 21 runs.
//!
//! It uses only API that predates issue 30 (`SearchReplaceEditor::apply`, `Edit::new`,
//! `patch::parse`, `patch::plan`), so the same file builds against an older revision:
//! `crates/keel-tools/benches/edit_latency_vs.sh [BASE]` builds it at BASE and at the working
//! tree and runs both alternately, printing each figure beside the base's from the same run.
//! Run alone (`cargo bench -p keel-tools --bench edit_latency`) it prints this revision's
//! figures as `case<TAB>microseconds` lines.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use keel_tools::edit::{Edit, SearchReplaceEditor};
use keel_tools::patch::{parse, plan};
use keel_tools::{ReadTracker, Workspace};

const LINES: usize = 10_000;
const RUNS: usize = 21;

/// A Rust-like source file of `LINES` lines: small impl blocks with names and expressions
/// drawn from a fixed pseudo-random sequence, so blocks look alike without being copies.
fn source() -> String {
    const WORDS: [&str; 24] = [
        "total", "count", "limit", "scale", "queue", "batch", "retry", "delay", "owner", "cache",
        "index", "width", "depth", "speed", "price", "level", "score", "range", "shift", "phase",
        "slack", "burst", "epoch", "quota",
    ];
    let mut seed: u64 = 0x5eed;
    let mut word = || {
        seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        WORDS[(seed >> 33) as usize % WORDS.len()]
    };
    let mut s = String::with_capacity(LINES * 32);
    let mut i = 0;
    while s.matches('\n').count() < LINES {
        let (a, b, c, d) = (word(), word(), word(), word());
        s.push_str(&format!(
            "impl Worker{i} {{\n    pub fn step(&mut self, {a}: u64) -> u64 {{\n        let {b} = {a} * {i};\n        self.{c} += {b};\n        if self.{c} > self.{d}_limit {{\n            self.{c} -= {i};\n        }}\n        self.{c}\n    }}\n}}\n\n"
        ));
        i += 1;
    }
    s
}

/// The method of worker `n`, exactly as the file has it.
fn method(text: &str, n: usize) -> String {
    let at = text.find(&format!("impl Worker{n} {{\n")).unwrap();
    let start = at + text[at..].find("    pub fn step").unwrap();
    let end = start + text[start..].find("\n    }\n").unwrap() + "\n    }\n".len();
    text[start..end].to_string()
}

fn median(mut f: impl FnMut()) -> Duration {
    let mut samples: Vec<Duration> = (0..RUNS)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .collect();
    samples.sort();
    samples[RUNS / 2]
}

fn main() {
    let text = source();
    let target = method(&text, 700);
    let changed = target.replace(" * 700;", " * 700 + 1;");
    // Misremembered lines: only the fuzzy level finds it.
    let misremembered = target.replacen(" > self.", " >= self.", 1);

    let editor = SearchReplaceEditor::default();
    let exact = [Edit::new(target.clone(), changed.clone())];
    let fuzzy = [Edit::new(misremembered.clone(), changed.clone())];
    assert_eq!(
        editor.apply(&text, &exact).unwrap().applied[0].level.name(),
        "exact"
    );
    assert_eq!(
        editor.apply(&text, &fuzzy).unwrap().applied[0].level.name(),
        "fuzzy"
    );

    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("workers.rs"), &text).unwrap();
    let workspace = Workspace::new(dir.path()).unwrap();
    let reads = ReadTracker::default();
    let hunk = |old: &str| -> String {
        let mut p = String::from("*** Begin Patch\n*** Update File: workers.rs\n@@\n");
        for l in old.lines() {
            p.push_str(&format!("-{l}\n"));
        }
        for l in changed.lines() {
            p.push_str(&format!("+{l}\n"));
        }
        p.push_str("*** End Patch\n");
        p
    };
    let exact_patch = parse(&hunk(&target)).unwrap();
    let fuzzy_patch = parse(&hunk(&misremembered)).unwrap();
    assert!(plan(&exact_patch, &workspace, &reads).is_ok());
    assert!(plan(&fuzzy_patch, &workspace, &reads).is_ok());

    let cases: [(&str, Duration); 4] = [
        (
            "edit_exact",
            median(|| {
                std::hint::black_box(editor.apply(&text, &exact).is_ok());
            }),
        ),
        (
            "edit_fuzzy",
            median(|| {
                std::hint::black_box(editor.apply(&text, &fuzzy).is_ok());
            }),
        ),
        (
            "patch_exact",
            median(|| {
                std::hint::black_box(plan(&exact_patch, &workspace, &reads).is_ok());
            }),
        ),
        (
            "patch_fuzzy",
            median(|| {
                std::hint::black_box(plan(&fuzzy_patch, &workspace, &reads).is_ok());
            }),
        ),
    ];
    for (name, d) in cases {
        println!("{name}\t{:.1}", d.as_secs_f64() * 1e6);
    }
}
