//! The golden event streams of the scripted examples (issue 33): `keel run --json` on
//! examples/demo.yaml, the plan_exec example, the subagent example, and the
//! implement-review-deliver flow (its `--json` lines and each node session's stored events).
//! The streams are normalised (timestamps, session/run ids, durations, commit hashes,
//! temp paths, token estimates, the test runner's raw output) and compared with the files in
//! `tests/golden/`. A refactor of the engine must leave them byte-identical.
//!
//! `KEEL_BLESS=1 cargo test -p keel-cli --test golden` rewrites the files; review the diff
//! before committing it: every changed line is a behaviour change a user can see.

// Tests start programs of their own (the keel binary, git fixtures): allowed here, outside
// Keel's one spawn path (docs/SECURITY.md, "One way to start a process").
#![allow(
    clippy::disallowed_macros,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::disallowed_methods
)]

mod common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;
use serde_json::Value;

/// Keys whose values vary from run to run, and what they become.
const MASKED: &[(&str, &str)] = &[
    ("ts", "[ts]"),
    ("duration_ms", "[ms]"),
    ("commit", "[commit]"),
    // The token estimate follows the prompt's exact wording, which other changes may touch;
    // the first-request tests pin the prompt itself.
    ("input_tokens", "[estimate]"),
];

/// Keys that hold ids: each distinct value becomes `[<prefix>-N]` by order of appearance, and
/// every occurrence inside a string too.
const IDS: &[(&str, &str)] = &[
    ("session_id", "session"),
    ("run_id", "run"),
    ("parent_run_id", "run"),
    ("id", "id"),
];

struct Normalizer {
    /// Literal strings (temp paths) and their placeholders, longest first.
    literals: Vec<(String, String)>,
    ids: HashMap<String, String>,
    counters: HashMap<&'static str, usize>,
    order: Vec<(String, String)>,
}

impl Normalizer {
    fn new(env: &Env) -> Self {
        let mut literals = Vec::new();
        for (path, name) in [(&env.work, "[workspace]"), (&env.home, "[home]")] {
            literals.push((path.display().to_string(), name.to_string()));
            if let Ok(real) = path.canonicalize() {
                literals.push((real.display().to_string(), name.to_string()));
            }
        }
        literals.sort_by_key(|(s, _)| std::cmp::Reverse(s.len()));
        Self {
            literals,
            ids: HashMap::new(),
            counters: HashMap::new(),
            order: Vec::new(),
        }
    }

    /// Registers the ids of `events` (in order), so strings can mention them.
    fn learn(&mut self, events: &[Value]) {
        for e in events {
            for (key, prefix) in IDS {
                // Tool call ids (`call_1_2`) are the scripted provider's own and stable.
                if *key == "id" {
                    continue;
                }
                if let Some(v) = e.get(*key).and_then(Value::as_str)
                    && !self.ids.contains_key(v)
                {
                    let n = self.counters.entry(prefix).or_insert(0);
                    *n += 1;
                    let placeholder = format!("[{prefix}-{n}]");
                    self.ids.insert(v.to_string(), placeholder.clone());
                    self.order.push((v.to_string(), placeholder));
                }
            }
        }
        self.order.sort_by_key(|(s, _)| std::cmp::Reverse(s.len()));
    }

    fn string(&self, s: &str) -> String {
        let mut out = s.to_string();
        for (from, to) in &self.literals {
            out = out.replace(from.as_str(), to);
        }
        for (from, to) in &self.order {
            out = out.replace(from.as_str(), to);
        }
        out
    }

    fn value(&self, v: &mut Value) {
        match v {
            Value::String(s) => *s = self.string(s),
            Value::Array(items) => items.iter_mut().for_each(|i| self.value(i)),
            Value::Object(map) => {
                for (k, item) in map.iter_mut() {
                    if let Some((_, mask)) = MASKED.iter().find(|(m, _)| m == k)
                        && !item.is_null()
                    {
                        *item = Value::String(mask.to_string());
                        continue;
                    }
                    self.value(item);
                }
            }
            _ => {}
        }
    }

    fn event(&self, mut e: Value) -> Value {
        // A test runner's raw output holds timings, hashes and a thread-dependent order;
        // its counted summary stays.
        if e["type"] == "tool_result"
            && e["name"] == "run_tests"
            && let Some(tail) = e.pointer_mut("/details/output_tail/text")
        {
            *tail = Value::String("[test output]".into());
        }
        self.value(&mut e);
        e
    }
}

fn json_events(stdout: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l:?}: {e}")))
        .collect()
}

/// Compares `lines` with `tests/golden/<name>.jsonl` (or writes it with `KEEL_BLESS=1`).
fn check(name: &str, events: &[Value]) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(format!("{name}.jsonl"));
    let mut text = String::new();
    for e in events {
        text.push_str(&serde_json::to_string(e).unwrap());
        text.push('\n');
    }
    if std::env::var_os("KEEL_BLESS").is_some_and(|v| v == "1") {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &text).unwrap();
        eprintln!("blessed {}", path.display());
        return;
    }
    let want = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; run `KEEL_BLESS=1 cargo test -p keel-cli --test golden` to write it",
            path.display()
        )
    });
    if want != text {
        let (w, g): (Vec<&str>, Vec<&str>) = (want.lines().collect(), text.lines().collect());
        let first = (0..w.len().max(g.len()))
            .find(|&i| w.get(i) != g.get(i))
            .unwrap_or(0);
        panic!(
            "the `{name}` event stream changed (golden file {}), first at line {}:\n  golden: {}\n  now:    {}\n({} lines golden, {} now). If the change is intended, rewrite it with KEEL_BLESS=1 and say so in the commit.",
            path.display(),
            first + 1,
            w.get(first).unwrap_or(&"(none)"),
            g.get(first).unwrap_or(&"(none)"),
            w.len(),
            g.len()
        );
    }
}

fn run_example(env: &Env, cmd: &mut Command) -> Vec<Value> {
    let out = cmd.output().unwrap();
    assert_exit(&out, 0);
    let _ = env;
    json_events(&out.stdout)
}

/// A session's events in order, normalised.
fn normalized(env: &Env, events: Vec<Value>) -> Vec<Value> {
    let mut n = Normalizer::new(env);
    n.learn(&events);
    events.into_iter().map(|e| n.event(e)).collect()
}

#[test]
fn demo_run() {
    let env = Env::new();
    let events = run_example(
        &env,
        env.keel()
            .args(["run", "--provider", "scripted", "--json", "--script"])
            .arg(repo_root().join("examples/demo.yaml"))
            .arg("add tests for the demo library"),
    );
    check("demo", &normalized(&env, events));
}

#[test]
fn plan_exec_run() {
    let env = Env::new();
    let events = run_example(
        &env,
        env.keel_with_toolchain()
            .args(["run", "--mode", "plan_exec", "--json", "--script"])
            .arg(repo_root().join("examples/plan_exec.yaml"))
            .arg("add tests for the demo library"),
    );
    check("plan_exec", &normalized(&env, events));
}

#[test]
fn subagent_run() {
    let env = Env::new();
    let events = run_example(
        &env,
        env.keel()
            .args(["run", "--json", "--script"])
            .arg(repo_root().join("examples/subagents.yaml"))
            .arg("find the public functions and the tests"),
    );
    // The children run in parallel: their events interleave with each other and the
    // parent's in any order. Each run's own stream is ordered; compare those, the parent's
    // first, then each child's by agent id. `seq` numbers the interleaving: left out.
    let parent = events[0]["run_id"].clone();
    let mut agent_of: HashMap<String, String> = HashMap::new();
    for e in &events {
        if e["type"] == "agent_started" {
            agent_of.insert(
                e["run_id"].as_str().unwrap().to_string(),
                e["agent_id"].as_str().unwrap().to_string(),
            );
        }
    }
    let key = |e: &Value| -> String {
        if e["run_id"] == parent {
            String::new()
        } else {
            let run = e["run_id"].as_str().unwrap_or_default();
            agent_of
                .get(run)
                .cloned()
                .unwrap_or_else(|| panic!("an event of an unknown run: {e}"))
        }
    };
    let mut streams: Vec<(String, Value)> = events
        .into_iter()
        .map(|mut e| {
            e.as_object_mut().unwrap().shift_remove("seq");
            (key(&e), e)
        })
        .collect();
    streams.sort_by(|a, b| a.0.cmp(&b.0)); // stable: each run keeps its order
    let ordered: Vec<Value> = streams.into_iter().map(|(_, e)| e).collect();
    assert!(
        ordered.iter().any(|e| e["type"] == "agent_started"),
        "the subagents did not start"
    );
    check("subagents", &normalized(&env, ordered));
}

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .current_dir(dir)
        .args(args)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@t")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@t")
        .output()
        .expect("git must be installed for this test (CI installs it)");
    assert!(out.status.success(), "git {args:?}");
}

#[test]
fn flow_run() {
    let src = tempfile::tempdir().unwrap();
    let env = Env::with_repo(src.path());
    git(&env.work, &["init", "-q", "-b", "main"]);
    std::fs::write(env.work.join("README.md"), "demo\n").unwrap();
    git(&env.work, &["add", "-A"]);
    git(&env.work, &["commit", "-qm", "init"]);
    let flow: PathBuf = repo_root().join("examples/flows/implement-review-deliver.yaml");
    let flow_events = run_example(&env, env.keel().args(["flow", "run", "--json"]).arg(&flow));

    // Each node's agent session, in the order they ran.
    let out = env.keel().args(["sessions", "--json"]).output().unwrap();
    assert_exit(&out, 0);
    let list: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    let mut sessions: Vec<Vec<Value>> = list
        .iter()
        .map(|s| {
            let id = s["id"].as_str().unwrap();
            let out = env
                .keel()
                .args(["sessions", "show", "--json", id])
                .output()
                .unwrap();
            assert_exit(&out, 0);
            json_events(&out.stdout)
        })
        .collect();
    sessions.sort_by_key(|events| events[0]["ts"].as_u64().unwrap_or(0));
    assert!(
        sessions.len() >= 2,
        "the flow's agent nodes left no sessions"
    );

    let mut all = flow_events;
    all.extend(sessions.into_iter().flatten());
    check("flow", &normalized(&env, all));
}
