//! A model with a 2,048-token window (SmolLM2 behind a local server): Keel's full head alone
//! takes most of it, so such a run gets the compact head — a short base prompt, six tools, no
//! codemap — and can work; a window too small even for that fails with a message naming the
//! request's size, the window and the head's share.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use keel_engine::{Config, EngineBuilder, RunOptions, RunOutcome};
use keel_llm::ChatRequest;
use keel_llm::scripted::ScriptedProvider;
use keel_llm::tokens::estimate_request;
use keel_protocol::{ErrorCode, SessionStatus};
use keel_store::SqliteStore;

async fn run(window: u64, agents_md: &str, script: &str) -> (RunOutcome, Vec<ChatRequest>) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("src")).unwrap();
    std::fs::write(
        dir.path().join("src/lib.rs"),
        "pub fn answer() -> u32 { 41 }\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("AGENTS.md"), agents_md).unwrap();
    let mut config = Config::default();
    config.verify.enabled = false;
    config.agent.context_window = Some(window);
    let provider = ScriptedProvider::from_yaml(script).unwrap();
    let engine = EngineBuilder::new(config, dir.path())
        .provider(Arc::new(provider.clone()))
        .store(Arc::new(SqliteStore::open_in_memory().unwrap()))
        .build()
        .unwrap();
    let out = engine
        .run(
            "fix answer in src/lib.rs to return 42",
            RunOptions::default(),
        )
        .await
        .unwrap();
    (out, provider.requests())
}

const FIX: &str = r#"
turns:
  - tool_calls: [{name: read_file, arguments: {path: src/lib.rs}}]
  - tool_calls: [{name: edit_file, arguments: {path: src/lib.rs, edits: [{search: "41", replace: "42"}]}}]
  - text: "answer() returns 42 now."
"#;

#[tokio::test]
async fn a_2048_token_window_gets_the_compact_head_and_the_task_done() {
    let (out, requests) = run(2_048, "Use tabs.\n", FIX).await;
    assert_eq!(out.status, SessionStatus::Completed, "{:?}", out.error);
    let first = &requests[0];
    let head = estimate_request(&first.system, &first.tools, &[]);
    let names: Vec<&str> = first.tools.iter().map(|t| t.name.as_str()).collect();
    eprintln!("compact head: about {head} tokens, tools {names:?}");
    assert!(head <= 700, "the head takes about {head} of 2,048 tokens");
    // Lean schemas: a tool's required parameters only, no parameter descriptions.
    let read = first.tools.iter().find(|t| t.name == "read_file").unwrap();
    assert_eq!(
        read.input_schema["properties"].as_object().unwrap().len(),
        1,
        "{read:?}"
    );
    assert!(names.contains(&"edit_file") && names.contains(&"read_file"));
    assert!(!names.contains(&"codebase_search") && !names.contains(&"tool_search"));
    assert!(
        first.system.contains("Use tabs."),
        "the project's instructions stay"
    );
    assert!(!first.messages[0].text().contains("<codemap"));
    for r in &requests[1..] {
        assert_eq!(
            (&r.system, &r.tools),
            (&first.system, &first.tools),
            "byte-stable"
        );
    }
    // A large window keeps the full head.
    let (_, large) = run(128_000, "Use tabs.\n", FIX).await;
    let full = estimate_request(&large[0].system, &large[0].tools, &[]);
    assert!(full > head * 3 / 2, "full head {full}, compact {head}");
    assert!(large[0].tools.iter().any(|t| t.name == "codebase_search"));
}

#[tokio::test]
async fn a_window_too_small_for_any_head_fails_naming_both_sizes() {
    let agents_md = "Follow the house style in every file you touch. ".repeat(60);
    let (out, requests) = run(1_000, &agents_md, FIX).await;
    assert!(requests.is_empty(), "nothing was sent");
    assert_eq!(out.status, SessionStatus::Failed);
    let e = out.error.unwrap();
    assert_eq!(e.error_code, ErrorCode::ContextOverflow);
    assert!(e.message.contains("1000-token window"), "{}", e.message);
    assert!(e.message.contains("the compact head"), "{}", e.message);
    assert!(
        e.suggestions
            .iter()
            .any(|s| s.contains("larger context window")),
        "{:?}",
        e.suggestions
    );
}

/// llama-cpp-python 0.3.36's server with SmolLM2-135M's 2,048-token window, as the real one
/// behaves: whole replies in its own JSON (tool-call ids `call__0_<name>_cmpl-…`, a
/// `function_call` copy), `prompt_tokens` as its chat template renders the request (about 100
/// tokens of preamble, then roughly 4.4 bytes a token), and its own 400 body for a request
/// whose prompt does not fit the window (a larger `max_tokens` it only cuts to what is left).
mod tiny_server {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use keel_llm::mock::{MockReply, MockServer, Recorded};
    use serde_json::{Value, json};

    pub const WINDOW: u64 = 2_048;

    pub fn prompt_tokens(body: &Value) -> u64 {
        let mut bytes = body.get("tools").map_or(0, |t| t.to_string().len());
        for m in body["messages"].as_array().into_iter().flatten() {
            bytes += m["content"].as_str().map_or(0, str::len) + 12;
            bytes += m.get("tool_calls").map_or(0, |c| c.to_string().len());
        }
        100 + (bytes as u64 * 10).div_ceil(44)
    }

    fn overflow(prompt: u64, completion: u64) -> String {
        format!(
            r#"{{"error":{{"message":"This model's maximum context length is {WINDOW} tokens. However, you requested {} tokens ({prompt} in the messages, {completion} in the completion). Please reduce the length of the messages or completion.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}}}"#,
            prompt + completion
        )
    }

    fn reply(n: usize, message: Value, finish: &str, prompt: u64) -> MockReply {
        reply_of(n, message, finish, prompt, 40)
    }

    /// A reply of `completion` tokens.
    pub fn reply_of(
        n: usize,
        message: Value,
        finish: &str,
        prompt: u64,
        completion: u64,
    ) -> MockReply {
        MockReply::json(
            json!({"id": format!("chatcmpl-{n}"), "object": "chat.completion",
                   "created": 1_795_874_476, "model": "smollm2",
                   "choices": [{"index": 0, "message": message, "logprobs": null,
                                "finish_reason": finish}],
                   "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                             "total_tokens": prompt + completion}})
            .to_string(),
        )
    }

    /// The model's `step`-th reply: one tool call per reply, then `text`. A step named
    /// `"overrun:<tool>"` is the server ignoring `max_tokens` on a tool call: arguments cut
    /// where the window filled up, `completion_tokens` the rest of the window.
    pub async fn serve(steps: Vec<(&'static str, String)>, text: &'static str) -> MockServer {
        let next = AtomicUsize::new(0);
        MockServer::with_handler(move |req: &Recorded, n| {
            let body = req.json();
            let prompt = prompt_tokens(&body);
            let limit = body["max_tokens"].as_u64().unwrap_or(16);
            if prompt >= WINDOW {
                return MockReply::error(400, overflow(prompt, limit));
            }
            if body.get("tools").is_none() {
                // A compaction summary.
                let m = json!({"role": "assistant", "content": "- Listed and read the files; one read was refused."});
                return reply(n, m, "stop", prompt);
            }
            // The model's replies in order: a request the server refused got none.
            let step = next.fetch_add(1, Ordering::Relaxed);
            match steps.get(step) {
                Some((name, args)) => {
                    let (name, overrun) = match name.strip_prefix("overrun:") {
                        Some(tool) => (tool, true),
                        None => (*name, false),
                    };
                    let id = format!("call__0_{name}_cmpl-{n}");
                    let call = json!({"name": name, "arguments": args});
                    let m = json!({"content": null, "role": "assistant",
                                   "tool_calls": [{"id": id, "type": "function", "function": call}],
                                   "function_call": call});
                    if overrun {
                        return reply_of(n, m, "tool_calls", prompt, WINDOW - prompt);
                    }
                    reply(n, m, "tool_calls", prompt)
                }
                None => reply(n, json!({"role": "assistant", "content": text}), "stop", prompt),
            }
        })
        .await
        .unwrap()
    }
}

/// Runs "add a function answer() to calc.py that returns 42" in `dir` against `server` (the
/// raw-server mock), through the real client of the `llamacpp` preset, with what an earlier
/// run learned about the server (`learn`); returns the outcome, every request and each one's
/// (prompt tokens, max_tokens).
async fn run_on_tiny_server(
    dir: &std::path::Path,
    server: &keel_llm::mock::MockServer,
    learn: impl FnOnce(&mut keel_llm::learned::Facts, u64),
) -> (RunOutcome, Vec<keel_llm::mock::Recorded>, Vec<(u64, u64)>) {
    use keel_llm::learned::ServerMemory;
    use keel_llm::{Role, Router, build_provider};

    let base = format!("{}/v1", server.url());
    let home = tempfile::tempdir().unwrap();
    ServerMemory::open(Some(home.path()), &base, "smollm2").learn(learn);
    let mut config = Config::default();
    config.verify.enabled = false;
    config.shell.lint.enabled = false;
    config.llm.provider = Some("llamacpp".into());
    config.llm.model = Some("smollm2".into());
    config.llm.base_url = Some(base.clone());
    let target = Router::new(&config.llm, std::path::Path::new("/"))
        .with_learned_dir(Some(home.path().to_path_buf()))
        .target(Role::Main)
        .unwrap();
    let provider = build_provider(&target, &|_| None).unwrap();
    let engine = EngineBuilder::new(config, dir)
        .provider(provider)
        .store(Arc::new(SqliteStore::open_in_memory().unwrap()))
        .build()
        .unwrap();
    let out = engine
        .run(
            "add a function answer() to calc.py that returns 42",
            RunOptions::default(),
        )
        .await
        .unwrap();
    let requests = server.requests();
    let sizes: Vec<(u64, u64)> = requests
        .iter()
        .map(|r| {
            let b = r.json();
            (
                tiny_server::prompt_tokens(&b),
                b["max_tokens"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    eprintln!("requests (prompt, max_tokens): {sizes:?}");
    (out, requests, sizes)
}

/// A SmolLM2-sized run on the raw server's 2,048-token window (learned by an earlier run, as
/// the real runs had it): two reads of a 1.8 KB file, a 1.6 KB garbage call that is refused,
/// three more reads, then the change. Compaction must make room — protecting one call, not five, in
/// such a window, and shrinking the refused call's arguments — so the run ends by its work,
/// not `context_overflow`; every request it sends fits the window.
async fn tiny_window_run(learned: bool, per_mille: Option<u64>) {
    use keel_llm::learned::Fact;

    let dir = tempfile::tempdir().unwrap();
    let calc: String = (0..24)
        .map(|i| {
            format!(
                "def f{i}(a, b):\n    \"\"\"Helper {i} of the calculator.\"\"\"\n    return a + b\n"
            )
        })
        .collect::<String>()
        + "def add(a, b):\n    return a + b\n";
    std::fs::write(dir.path().join("calc.py"), &calc).unwrap();
    std::fs::write(
        dir.path().join("README.md"),
        "# calc\n\nA calculator.\n".repeat(50),
    )
    .unwrap();
    std::fs::write(
        dir.path().join("NOTES.md"),
        "- every helper adds its two arguments\n".repeat(60),
    )
    .unwrap();
    std::fs::write(
        dir.path().join("TODO.md"),
        "- keep every helper adding its two arguments\n".repeat(50),
    )
    .unwrap();
    let garbage = format!(
        r#"{{"path": "{}"}}"#,
        "calc.py and then the answer function that returns 42 ".repeat(60)
    );
    let steps = vec![
        ("list_files", "{}".to_string()),
        ("read_file", r#"{"path": "calc.py"}"#.to_string()),
        ("read_file", garbage),
        ("read_file", r#"{"path": "README.md"}"#.to_string()),
        ("read_file", r#"{"path": "NOTES.md"}"#.to_string()),
        ("read_file", r#"{"path": "TODO.md"}"#.to_string()),
        (
            "edit_file",
            r#"{"path": "calc.py", "edits": [{"search": "def add(a, b):", "replace": "def answer():\n    return 42\n\n\ndef add(a, b):"}]}"#
                .to_string(),
        ),
    ];
    let server = tiny_server::serve(steps, "Added answer() to calc.py; it returns 42.").await;
    let (out, requests, sizes) = run_on_tiny_server(dir.path(), &server, |f, now| {
        if learned {
            f.context_window = Some(Fact {
                value: tiny_server::WINDOW,
                learned_at: now,
            });
        }
        f.streams = Some(Fact {
            value: false,
            learned_at: now,
        });
        if let Some(value) = per_mille {
            f.tokens_per_mille = Some(Fact {
                value,
                learned_at: now,
            });
        }
    })
    .await;
    assert_eq!(out.status, SessionStatus::Completed, "{:?}", out.error);
    assert!(
        std::fs::read_to_string(dir.path().join("calc.py"))
            .unwrap()
            .contains("def answer():")
    );
    if per_mille.is_some() {
        // Every request of the model's (with tools) was sent with more room than the
        // smallest reply keel-llm falls back to when the estimate fits only without its
        // safety tenth; and every model reply got a request (none refused unsent: the
        // script's eight replies in eight requests).
        let tool_requests: Vec<u64> = requests
            .iter()
            .map(|r| r.json())
            .filter(|b| b.get("tools").is_some())
            .map(|b| b["max_tokens"].as_u64().unwrap_or(0))
            .collect();
        assert!(
            tool_requests.iter().all(|&m| m > 256),
            "max_tokens of each request: {tool_requests:?}"
        );
        assert_eq!(tool_requests.len(), 8, "{tool_requests:?}");
    }
    // Once the window is known, no request is refused (the first run learns it from one
    // refusal).
    let refused = sizes
        .iter()
        .filter(|(p, _)| *p >= tiny_server::WINDOW)
        .count();
    assert_eq!(refused, usize::from(!learned), "{sizes:?}");
    // The run compacted, and the summary of the earlier steps was written by rules, not asked
    // of a model this small (its summaries were garbage, and each was one more request that
    // re-read the steps without the prompt cache — the request a real run timed out in).
    let summary_requests = requests
        .iter()
        .filter(|r| r.json().get("tools").is_none())
        .count();
    assert_eq!(summary_requests, 0, "no summary asked of the model");
    let last = &requests.last().unwrap().body;
    assert!(
        last.contains("<earlier-work>") && last.contains(".md → ok: read_file "),
        "the earlier steps, summarised by rules, reach the model: {last}"
    );
    // The refused garbage call does not travel whole in the last request.
    let last = &requests.last().unwrap().body;
    assert!(
        !last.contains(&"the answer function that returns 42 ".repeat(10)),
        "the refused call's arguments were shrunk"
    );
}

#[tokio::test]
async fn a_run_in_a_2048_token_window_ends_by_its_work_not_by_overflow() {
    tiny_window_run(true, None).await;
}

/// An earlier run taught keel-llm that this server counts 1.3 of its tokens per estimated one
/// (the largest scale it ever saw is kept), while this run's requests count less. The engine
/// compacts by keel-llm's own figure: no request is squeezed to the smallest reply or refused
/// before sending — the real SmolLM2 runs ended `context_overflow` when the engine, measuring
/// with the last request's ratio, judged 1,457 tokens small enough and keel-llm, measuring
/// with its learned scale, refused to send them.
#[tokio::test]
async fn compaction_measures_with_the_clients_learned_scale() {
    tiny_window_run(true, Some(1_300)).await;
}

/// The first run against the server, its window not yet known: the first refusal teaches it,
/// Keel compacts to it (the compact head, the tail of one call) and the run still ends by its
/// work (the real run 1 ended `context_overflow` on its resend).
#[tokio::test]
async fn a_first_run_that_learns_the_2048_token_window_still_ends_by_its_work() {
    tiny_window_run(false, None).await;
}

/// The raw server ignores `max_tokens` on tool calls (llama-cpp-python 0.3.36): twice in a row
/// SmolLM2 fills an `edit_file` call with garbage until the window is full — arguments cut
/// inside a string, `finish_reason` still `tool_calls`. Each reply is taken as cut off at the
/// output limit: the call is not run, the model is told in a line (not the tool's schema,
/// hundreds of tokens in this window), the garbage does not travel, and the run ends by its
/// work, not `context_overflow` (a real run did, on its fourth request).
#[tokio::test]
async fn a_server_ignoring_max_tokens_on_tool_calls_does_not_end_the_run() {
    use keel_llm::learned::Fact;

    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("calc.py"),
        "def add(a, b):\n    return a + b\n",
    )
    .unwrap();
    let garbage = |seed: &str| {
        format!(
            r#"{{ "path": "2018-04-23T15:49:37.63PST_LocalFile/{seed}", "edits": [{{"search": "{}"#,
            "keyframe_name =&lt;path%34;:&#34; typeList.type_list C++/Immutable ".repeat(70)
        )
    };
    let steps = vec![
        ("read_file", r#"{"path": "calc.py"}"#.to_string()),
        ("overrun:edit_file", garbage("a")),
        ("overrun:edit_file", garbage("b")),
        (
            "edit_file",
            r#"{"path": "calc.py", "edits": [{"search": "def add(a, b):", "replace": "def answer():\n    return 42\n\n\ndef add(a, b):"}]}"#
                .to_string(),
        ),
    ];
    let server = tiny_server::serve(steps, "Added answer() to calc.py; it returns 42.").await;
    let (out, requests, _) = run_on_tiny_server(dir.path(), &server, |f, now| {
        f.context_window = Some(Fact {
            value: tiny_server::WINDOW,
            learned_at: now,
        });
        f.streams = Some(Fact {
            value: false,
            learned_at: now,
        });
        f.tool_results_as_user = Some(Fact {
            value: true,
            learned_at: now,
        });
    })
    .await;
    assert_eq!(out.status, SessionStatus::Completed, "{:?}", out.error);
    assert!(
        std::fs::read_to_string(dir.path().join("calc.py"))
            .unwrap()
            .contains("def answer():")
    );
    let last = &requests.last().unwrap().body;
    assert!(
        !last.contains("keyframe_name"),
        "the garbage does not travel"
    );
    assert!(
        last.matches("cut off at the output token limit").count() >= 2,
        "the model was told each call was cut off: {last}"
    );
    assert!(
        !last.contains("Schema of edit_file"),
        "a cut-off call gets no schema: {last}"
    );
}
