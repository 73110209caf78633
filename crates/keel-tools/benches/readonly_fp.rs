//! False positives of the command classifier on everyday read-only commands: the share of
//! `tests/fixtures/shell_safety/everyday_read_only.txt` (300+ lines agents run to look around
//! a repository) rated anything but `read_only` — each one a question a person is asked for
//! nothing — and the classification time per command.
//!
//! The baseline, measured in the same run: another Keel's classifier, through its
//! `keel sandbox --check` (set `KEEL_BASELINE_BIN` to a `keel` binary built from an older
//! commit; without it the baseline is skipped and says so). Run with
//! `cargo bench -p keel-tools --bench readonly_fp`.

// The baseline is a keel binary the person benchmarking names, run directly.
#![allow(clippy::disallowed_methods)]

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use keel_tools::shell::{SafetyClass, classify};

const CORPUS: &str = include_str!("../tests/fixtures/shell_safety/everyday_read_only.txt");

fn commands() -> Vec<String> {
    CORPUS
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| l.replace('␤', "\n"))
        .collect()
}

/// The class another keel binary gives `command` (`keel sandbox --check`), run in `dir`.
fn baseline_class(bin: &Path, dir: &Path, command: &str) -> Result<String, String> {
    let out = Command::new(bin)
        .args(["sandbox", "--check", command])
        .current_dir(dir)
        .env("HOME", dir)
        .env("KEEL_HOME", dir.join("data"))
        .output()
        .map_err(|e| format!("cannot run {}: {e}", bin.display()))?;
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).map_err(|e| {
        format!(
            "{} printed no JSON ({e}): {}",
            bin.display(),
            String::from_utf8_lossy(&out.stderr)
        )
    })?;
    v["class"]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| format!("no class in {v}"))
}

fn main() {
    let commands = commands();
    let n = commands.len();
    let start = Instant::now();
    let mut flagged = Vec::new();
    for c in &commands {
        let a = classify(c);
        if a.class != SafetyClass::ReadOnly {
            flagged.push(format!("{c:?} → {} ({})", a.class, a.reasons.join("; ")));
        }
    }
    let per = start.elapsed() / n as u32;
    println!("everyday read-only commands: {n}");
    println!(
        "  this classifier: {}/{n} rated otherwise = {:.1}% ({per:?} per command)",
        flagged.len(),
        flagged.len() as f64 * 100.0 / n as f64
    );
    for f in &flagged {
        println!("    {f}");
    }
    match std::env::var_os("KEEL_BASELINE_BIN") {
        None => println!(
            "  baseline: skipped (set KEEL_BASELINE_BIN to a keel binary from an older commit)"
        ),
        Some(bin) => {
            let bin = Path::new(&bin);
            let dir = match tempfile::tempdir() {
                Ok(d) => d,
                Err(e) => return println!("  baseline: no temp dir: {e}"),
            };
            let mut base_flagged = Vec::new();
            for c in &commands {
                match baseline_class(bin, dir.path(), c) {
                    Ok(class) if class == "read_only" => {}
                    Ok(class) => base_flagged.push(format!("{c:?} → {class}")),
                    Err(e) => return println!("  baseline: {e}"),
                }
            }
            println!(
                "  baseline ({}): {}/{n} rated otherwise = {:.1}%",
                bin.display(),
                base_flagged.len(),
                base_flagged.len() as f64 * 100.0 / n as f64
            );
            for f in &base_flagged {
                println!("    {f}");
            }
        }
    }
}
