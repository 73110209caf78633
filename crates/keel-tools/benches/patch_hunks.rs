//! Many hunks on a large file (red-team pass 3, R3-10): one `apply_patch` of 2,000 hunks
//! (`@@ -line N +LINE N`, N = 1, 101, 201, …) on a 200,000-line file — 151 s of a core before
//! the hunks were located through a line index. Also 20,000 hunks (every tenth line), and a
//! patch whose hunks are given in reverse order (each found by the whole-file fallback).
//!
//! Uses only `patch::parse` and `patch::plan` (API older than the index), so the binary of an
//! older revision runs the same cases: build both, then run them alternately under
//! `/work/wt/quiet.sh`. Prints `case<TAB>milliseconds` (best of RUNS; a case past its 10 s
//! deadline prints the time it took to refuse, marked `refused`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Instant;

use keel_tools::patch::{parse, plan};
use keel_tools::{ReadTracker, Workspace};

const LINES: usize = 200_000;
const RUNS: usize = 3;

fn patch_of(ns: impl Iterator<Item = usize>) -> String {
    let mut p = String::from("*** Begin Patch\n*** Update File: f.txt\n");
    for n in ns {
        p.push_str(&format!("@@\n-line {n}\n+LINE {n}\n"));
    }
    p.push_str("*** End Patch\n");
    p
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let text: String = (1..=LINES).map(|n| format!("line {n}\n")).collect();
    std::fs::write(dir.path().join("f.txt"), &text).unwrap();
    let workspace = Workspace::new(dir.path()).unwrap();
    let reads = ReadTracker::default();
    let cases = [
        (
            "2000_hunks_every_100th_line",
            patch_of((0..2_000).map(|k| 1 + k * 100)),
        ),
        (
            "20000_hunks_every_10th_line",
            patch_of((0..20_000).map(|k| 1 + k * 10)),
        ),
        (
            "500_hunks_reverse_order",
            patch_of((0..500).rev().map(|k| 1 + k * 400)),
        ),
    ];
    for (name, text) in &cases {
        let patch = parse(text).unwrap();
        let mut best = f64::MAX;
        let mut outcome = "applied";
        for _ in 0..RUNS {
            let started = Instant::now();
            let result = plan(&patch, &workspace, &reads);
            best = best.min(started.elapsed().as_secs_f64() * 1000.0);
            if result.is_err() {
                outcome = "refused";
            }
        }
        println!("{name}\t{best:.1}\t{outcome}");
    }
}
