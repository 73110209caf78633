//! Start-up and footprint figures for the `keel` binary, each next to a baseline measured in
//! the same run (spawning `true`): `keel --version`, launch → first model request (scripted
//! provider: the first `turn_started` event, emitted right before the request is sent), a whole
//! scripted demo session, peak RSS, and the size of the first request's head.
//!
//! Run: `cargo bench -p keel-cli --bench startup`. Build in release for meaningful numbers
//! (`cargo bench` does).

// Benchmarks start programs of their own (the keel binary, baselines such as `bash -c true`):
// allowed here, outside Keel's one spawn path (docs/SECURITY.md, "One way to start a process").
#![allow(
    clippy::disallowed_macros,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::disallowed_methods
)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

const RUNS: usize = 40;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn time_cmd(mut make: impl FnMut() -> Command) -> Duration {
    let mut samples = Vec::with_capacity(RUNS);
    for _ in 0..RUNS {
        let mut cmd = make();
        cmd.stdout(Stdio::null()).stderr(Stdio::null());
        let t = Instant::now();
        let status = cmd.status().expect("spawn");
        samples.push(t.elapsed());
        assert!(status.success());
    }
    median(samples)
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

fn main() {
    let keel = env!("CARGO_BIN_EXE_keel");
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let demo = repo_root().join("examples/demo.yaml");

    let baseline = time_cmd(|| Command::new("true"));
    let version = time_cmd(|| {
        let mut c = Command::new(keel);
        c.arg("--version");
        c
    });

    // Launch → first model request, and a whole demo session, on fresh copies of the demo repo.
    let mut first_request = Vec::new();
    let mut whole = Vec::new();
    for i in 0..RUNS {
        let work = tmp.path().join(format!("w{i}"));
        copy_dir(&repo_root().join("examples/demo-repo"), &work);
        let t = Instant::now();
        let mut child = Command::new(keel)
            .args(["run", "--json", "--script"])
            .arg(&demo)
            .arg("--workspace")
            .arg(&work)
            .arg("add tests")
            .env("KEEL_HOME", &home)
            // Measure the harness, not `cargo check` (the auto-check after create_file), whose
            // rustc would also dominate the children's peak RSS.
            .env("KEEL_SHELL__LINT__ENABLED", "false")
            .env("KEEL_VERIFY__ENABLED", "false")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut reader = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        loop {
            line.clear();
            assert!(reader.read_line(&mut line).unwrap() > 0, "keel ended early");
            if line.contains("\"turn_started\"") {
                first_request.push(t.elapsed());
                break;
            }
        }
        std::io::copy(&mut reader, &mut std::io::sink()).unwrap();
        assert!(child.wait().unwrap().success());
        whole.push(t.elapsed());
    }
    let usage = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_CHILDREN)
        .expect("getrusage");
    // ru_maxrss is in KiB on Linux: the largest child so far (keel runs dominate `true`).
    let peak_rss_mb = usage.max_rss() as f64 / 1024.0;

    // The head: system prompt + tool catalog, as the engine sends it.
    let store = Arc::new(keel_store::SqliteStore::open_in_memory().unwrap());
    let provider = Arc::new(keel_llm::scripted::ScriptedProvider::load(&demo).unwrap());
    let engine = keel_engine::EngineBuilder::new(keel_engine::Config::default(), tmp.path())
        .provider(provider)
        .store(store)
        .build()
        .unwrap();
    let tools = serde_json::to_string(&engine.tools().specs()).unwrap();
    let head_bytes = engine.system_prompt().len() + tools.len();
    let head_tokens = keel_llm::tokens::estimate_text(engine.system_prompt())
        + keel_llm::tokens::estimate_text(&tools);

    let b = ms(baseline);
    println!(
        "keel start-up and footprint (median of {RUNS} runs; baseline = spawning `true`: {b:.2} ms)"
    );
    println!(
        "  keel --version                 {:>7.2} ms  ({:.1}× baseline)   target ≤ 5 ms",
        ms(version),
        ms(version) / b
    );
    let fr = median(first_request);
    println!(
        "  launch → first model request   {:>7.2} ms  ({:.1}× baseline)   target ≤ 50 ms",
        ms(fr),
        ms(fr) / b
    );
    let w = median(whole);
    println!(
        "  whole 4-turn scripted session  {:>7.2} ms  ({:.1}× baseline)",
        ms(w),
        ms(w) / b
    );
    println!(
        "  peak RSS of a demo session     {peak_rss_mb:>7.1} MB                     target ≤ 50 MB"
    );
    println!(
        "  first-request head             {head_bytes:>7} bytes ≈ {head_tokens} tokens ({} tools)   target ≤ 4,000 tokens",
        engine.tools().names().count()
    );
}
