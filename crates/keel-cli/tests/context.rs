//! `keel context --json` against what a run actually sends: the system prompt, the
//! constitution, the skill listing and the user memory, measured on the bytes a mock model
//! server received. Also `keel skills list|show|new`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use keel_llm::mock::{MockReply, MockServer, bodies};
use serde_json::Value;

mod common;
use common::*;

fn stdout(env: &Env, args: &[&str]) -> String {
    let out = env.keel().args(args).output().unwrap();
    assert_exit(&out, 0);
    String::from_utf8(out.stdout).unwrap()
}

fn block<'a>(text: &'a str, open: &str, close: &str) -> &'a str {
    let start = text
        .find(open)
        .unwrap_or_else(|| panic!("no {open} in {text}"));
    let end = text[start..].find(close).unwrap() + start + close.len();
    &text[start..end]
}

/// Runs `task` against a fresh mock model server; returns the first request's body.
fn first_request(env: &Env, task: &str) -> Value {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt
        .block_on(MockServer::queue(vec![MockReply::sse(bodies::openai(
            "",
            "Done.",
            &[],
            (100, 5),
        ))]))
        .unwrap();
    let out = env
        .keel()
        .env("OPENAI_API_KEY", "sk-test")
        .args(["run", "--json", "--provider", "openai", "--model", "gpt-4o"])
        .args(["--base-url", &format!("{}/v1", server.url())])
        .arg(task)
        .output()
        .unwrap();
    assert_exit(&out, 0);
    server.requests()[0].json()
}

/// The text of the first request's user message.
fn user_text(body: &Value) -> String {
    match &body["messages"][1]["content"] {
        Value::String(s) => s.clone(),
        other => other[0]["text"].as_str().unwrap().to_string(),
    }
}

fn layer<'a>(d: &'a Value, name: &str) -> &'a Value {
    d["layers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["name"] == name)
        .unwrap_or_else(|| panic!("no layer {name}"))
}

#[test]
fn context_sizes_match_the_bytes_sent() {
    let env = Env::new();
    std::fs::write(env.work.join("AGENTS.md"), "Keep functions short.\n").unwrap();
    std::fs::create_dir_all(env.work.join(".keel")).unwrap();
    std::fs::write(
        env.work.join(".keel/constitution.json"),
        r#"{"protected_paths": ["LICENSE"], "required_gates": ["cargo test"]}"#,
    )
    .unwrap();
    stdout(
        &env,
        &[
            "skills",
            "new",
            "deploy",
            "--description",
            "Deploy the service",
        ],
    );
    assert!(stdout(&env, &["skills", "list"]).contains("deploy"));
    assert!(stdout(&env, &["skills", "show", "deploy"]).contains("activation: model"));
    stdout(&env, &["memory", "add", "prefers small commits"]);

    let d: Value = serde_json::from_str(&stdout(&env, &["context", "--json"])).unwrap();
    let body = first_request(&env, "say hello, using $deploy");
    let system = body["messages"][0]["content"].as_str().unwrap();
    let user = user_text(&body);
    assert_eq!(
        d["system_prompt_bytes"].as_u64().unwrap() as usize,
        system.len()
    );
    // The head's text layers add up to the system prompt (joined by blank lines, one final
    // newline); the tool schemas are the rest of the head.
    let head: Vec<u64> = d["layers"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| {
            l["placement"] == "head"
                && l["bytes"].as_u64().unwrap() > 0
                && l["name"] != "tool schemas"
        })
        .map(|l| l["bytes"].as_u64().unwrap())
        .collect();
    let tools = layer(&d, "tool schemas");
    let sent: Vec<&str> = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(tools["items"].as_u64().unwrap() as usize, sent.len());
    for name in &sent {
        assert!(
            tools["source"].as_str().unwrap().contains(name),
            "{name} missing from {tools}"
        );
    }
    // Every layer of the first request together is what was sent, give or take the
    // provider's JSON wrapping and the task's own words.
    let estimate = |v: &str| keel_llm::tokens::estimate_text(v);
    let sent_tokens = estimate(system) + estimate(&user) + estimate(&body["tools"].to_string());
    let counted: u64 = d["layers"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["placement"] != "on_demand")
        .map(|l| l["tokens"].as_u64().unwrap())
        .sum();
    assert!(
        (counted as f64) > 0.75 * sent_tokens as f64 && counted <= sent_tokens,
        "the layers add up to {counted} tokens; the request held about {sent_tokens}"
    );
    assert_eq!(head.len(), 3, "base, root rules, constitution");
    assert_eq!(
        head.iter().sum::<u64>() as usize + 2 * (head.len() - 1) + 1,
        system.len()
    );
    assert!(system.contains("- cargo test"));
    let memory = block(&user, "<user-memory>", "</user-memory>");
    assert_eq!(
        layer(&d, "user memory")["bytes"].as_u64().unwrap() as usize,
        memory.len()
    );
    assert_eq!(layer(&d, "user memory")["placement"], "first_message");
    let skills = block(&user, "<skills>", "</skills>");
    assert_eq!(
        layer(&d, "skills (listed)")["bytes"].as_u64().unwrap() as usize,
        skills.len()
    );
    assert!(skills.contains("- deploy: Deploy the service"));
    // `$deploy` in the CLI task loads the skill into the same message.
    assert!(
        user.contains("<skill name=\"deploy\" activation=\"model\">"),
        "{user}"
    );
    // The table form names every layer.
    let table = stdout(&env, &["context"]);
    for name in [
        "base prompt",
        "tool schemas",
        "environment",
        "root rules",
        "nested rules",
        "constitution",
        "user memory",
        "overlay",
        "codemap",
        "session working memory",
    ] {
        assert!(table.contains(name), "{name} missing from {table}");
    }
}

/// The codemap layer: absent before the index exists (and a run then sends none), and once
/// `keel index` built it, the dashboard's size is the size of the `<codemap>` block the mock
/// server received in the first message.
#[test]
fn the_codemap_layer_matches_the_codemap_sent() {
    let env = Env::new();
    std::fs::create_dir_all(env.work.join("src")).unwrap();
    std::fs::write(
        env.work.join("src/billing.rs"),
        "/// Totals an invoice.\npub fn invoice_total(lines: &[u64]) -> u64 {\n    lines.iter().sum()\n}\n\npub struct Ledger {\n    pub entries: Vec<u64>,\n}\n",
    )
    .unwrap();
    std::fs::write(
        env.work.join("src/lib.rs"),
        "pub mod billing;\n\npub fn greet(name: &str) -> String {\n    format!(\"hi {name}\")\n}\n",
    )
    .unwrap();
    let before: Value = serde_json::from_str(&stdout(&env, &["context", "--json"])).unwrap();
    let layer_before = layer(&before, "codemap");
    assert_eq!(layer_before["bytes"], 0);
    assert!(
        layer_before["source"]
            .as_str()
            .unwrap()
            .contains("not built"),
        "{layer_before}"
    );

    stdout(&env, &["index"]);
    let d: Value = serde_json::from_str(&stdout(&env, &["context", "--json"])).unwrap();
    let codemap = layer(&d, "codemap");
    assert_eq!(codemap["placement"], "first_message");
    assert_eq!(codemap["items"], 1);
    assert_eq!(codemap["view"], "keel map");
    assert!(
        codemap["clear"]
            .as_str()
            .unwrap()
            .contains("codemap_tokens = 0")
    );

    let body = first_request(&env, "where is the invoice total?");
    let user = user_text(&body);
    let sent = block(&user, "<codemap>", "</codemap>");
    assert!(sent.contains("invoice_total"), "{sent}");
    assert_eq!(codemap["bytes"].as_u64().unwrap() as usize, sent.len());
    assert!(codemap["tokens"].as_u64().unwrap() > 0);
    // The table names the layer with its size.
    let table = stdout(&env, &["context"]);
    let row = table
        .lines()
        .find(|l| l.starts_with("codemap"))
        .unwrap_or_else(|| panic!("no codemap row in {table}"));
    assert!(row.contains(&codemap["tokens"].to_string()), "{row}");
}

#[test]
fn an_invalid_constitution_stops_keel_run_and_keel_context_with_exit_2() {
    let env = Env::new();
    std::fs::create_dir_all(env.work.join(".keel")).unwrap();
    std::fs::write(env.work.join(".keel/constitution.json"), r#"{"gates": []}"#).unwrap();
    let out = env.keel().args(["context"]).output().unwrap();
    assert_exit(&out, 2);
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown field `gates`"));
    let script = env.script("s.yaml", "turns:\n  - text: done\n");
    let out = env
        .keel()
        .args(["run", "--provider", "scripted", "--script"])
        .arg(&script)
        .arg("hi")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(".keel/constitution.json") && err.contains("unknown field `gates`"),
        "{err}"
    );
    assert_ne!(out.status.code(), Some(0));
}

/// Many saved facts: `keel context --task` sizes the user memory as that task's first message
/// carries it (the relevant facts within agent.memory_tokens), not as all the facts, and
/// without a task the layer is the budget, the most a session sends.
#[test]
fn the_memory_layer_is_what_a_session_sends_not_every_fact() {
    let env = Env::new();
    let topics = [
        "prefers small commits with imperative subject lines",
        "the staging database is refreshed every Monday",
        "the tokenizer must stay allocation-free on the hot path",
        "uses fish as the login shell",
        "the docs site is built with mdBook",
    ];
    for i in 0..40 {
        stdout(
            &env,
            &[
                "memory",
                "add",
                &format!("{} ({i})", topics[i % topics.len()]),
            ],
        );
    }
    let task = "speed up the tokenizer";
    let d: Value =
        serde_json::from_str(&stdout(&env, &["context", "--json", "--task", task])).unwrap();
    let body = first_request(&env, task);
    let user = user_text(&body);
    let sent = block(&user, "<user-memory>", "</user-memory>");
    assert_eq!(sent.matches("allocation-free").count(), 8, "{sent}");
    let memory = layer(&d, "user memory");
    assert_eq!(
        memory["bytes"].as_u64().unwrap() as usize,
        sent.len(),
        "{memory}"
    );
    assert_eq!(memory["items"], 8, "{memory}");
    assert!(memory["tokens"].as_u64().unwrap() <= 300, "{memory}");
    // No task: the budget, said to be the most; never the size of all 40 facts.
    let d: Value = serde_json::from_str(&stdout(&env, &["context", "--json"])).unwrap();
    let memory = layer(&d, "user memory");
    assert_eq!(memory["tokens"], 300, "{memory}");
    assert!(
        memory["source"]
            .as_str()
            .unwrap()
            .contains("at most agent.memory_tokens (300)"),
        "{memory}"
    );
}
