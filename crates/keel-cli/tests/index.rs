//! `keel index`, `keel search`, `keel map` and the doctor's index line, on a copy of the
//! index fixture repository.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use serde_json::Value;

mod common;
use common::*;

/// A copy of the index fixture repository; `keel(args)` runs to completion.
struct Fixture(Env);

impl Fixture {
    fn new() -> Self {
        Self(Env::with_repo(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("../keel-index/tests/fixtures/repo"),
        ))
    }

    fn keel(&self, args: &[&str]) -> std::process::Output {
        self.0.keel().args(args).output().unwrap()
    }
}

fn stdout(out: &std::process::Output) -> String {
    assert!(
        out.status.success(),
        "exit {:?}\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn index_search_map_and_doctor() {
    let env = Fixture::new();
    // Before any index: doctor says so, without building one.
    // (Doctor fails overall here: no model is configured. Only its index line matters.)
    let doc = String::from_utf8_lossy(&env.keel(&["doctor", "--json"]).stdout).into_owned();
    let checks: Value = serde_json::from_str(&doc).unwrap();
    let index = checks
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "index")
        .unwrap();
    assert!(
        index["detail"].as_str().unwrap().contains("not built yet"),
        "{index}"
    );
    assert!(!env.0.work.join(".keel").exists());

    let out = stdout(&env.keel(&["index", "--stats"]));
    assert!(
        out.starts_with("indexed 23 files (23 read, 0 removed)"),
        "{out}"
    );
    assert!(
        out.contains("state:    ready") && out.contains("symbols:  44"),
        "{out}"
    );
    let again = stdout(&env.keel(&["index"]));
    assert!(
        again.starts_with("indexed 23 files (0 read, 0 removed)"),
        "{again}"
    );

    let out = stdout(&env.keel(&["search", "--json", "--limit", "3", "apply", "a", "discount"]));
    let hits: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(hits[0]["path"], "py/shop/pricing.py", "{out}");
    assert_eq!(hits[0]["symbol"], "apply_discount");
    assert_eq!(hits[0]["start_line"], 7);
    let out = stdout(&env.keel(&["search", "--kind", "file", "HttpClient"]));
    assert!(out.starts_with("rust/src/net/http.rs:"), "{out}");
    // `--files`: one hit per file, as many files as asked for.
    let out = stdout(&env.keel(&["search", "--files", "--json", "--limit", "4", "price"]));
    let hits: Value = serde_json::from_str(&out).unwrap();
    let mut paths: Vec<&str> = hits
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths.len(), 4, "{out}");
    paths.sort();
    paths.dedup();
    assert_eq!(paths.len(), 4, "{out}");
    let bad = env.keel(&["search", "--kind", "class", "x"]);
    assert_eq!(bad.status.code(), Some(2));

    let map = stdout(&env.keel(&["map", "--tokens", "200"]));
    assert!(map.starts_with("Codemap: 23 files"), "{map}");
    assert!(map.len() / 4 <= 200, "{map}");
    assert!(
        map.contains("rust/src/config.rs: struct Config, fn parse_config"),
        "{map}"
    );

    let doc = String::from_utf8_lossy(&env.keel(&["doctor"]).stdout).into_owned();
    assert!(
        doc.contains("index") && doc.contains("23 files, 44 symbols"),
        "{doc}"
    );
}
