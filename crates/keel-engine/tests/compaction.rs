//! Context compaction end to end: a long scripted session crosses the threshold, compacts, and
//! the must-keep facts survive; the summariser falls back auxiliary → main → rules.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;

use common::*;
use keel_engine::compaction::ContextBudget;
use keel_llm::tokens::TokenScale;
use keel_llm::tokens::estimate_request;
use keel_protocol::{ContentBlock, EventKind, SessionStatus};
use keel_protocol::{Message, Usage};
use keel_store::Store;

const TASK: &str = "Survey every module and write notes for each step";

fn compactions(h: &Harness) -> Vec<(u64, u64, String, Vec<String>)> {
    h.events()
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::Compaction {
                tokens_before,
                tokens_after,
                summarizer,
                stages,
                ..
            } => Some((tokens_before, tokens_after, summarizer, stages)),
            _ => None,
        })
        .collect()
}

/// Index of the main request made right after the first compaction that summarised.
fn request_after_first_summary(h: &Harness) -> usize {
    let mut turns = 0;
    for e in h.events() {
        match e.kind {
            EventKind::TurnStarted { .. } => turns += 1,
            EventKind::Compaction { stages, .. } if stages.iter().any(|s| s == "summarize") => {
                return turns - 1;
            }
            _ => {}
        }
    }
    panic!("no compaction summarised");
}

#[tokio::test]
async fn a_sixty_turn_session_compacts_and_keeps_the_must_keep_facts() {
    let mut h = Harness::new(&long_session_script(8_000));
    long_session_workspace(&mut h);
    let aux = scripted(&summaries_script(40, "Summary"));
    h.auxiliary = Some(Arc::new(aux.clone()));
    let out = h.run(TASK).await;
    assert_eq!(out.status, SessionStatus::Completed, "{:?}", out.error);
    assert_eq!(out.iterations as usize, LONG_SESSION_TURNS);

    let c = compactions(&h);
    assert!(!c.is_empty(), "the session crossed the threshold");
    for (before, after, summarizer, stages) in &c {
        assert!(after < before, "{before} → {after}");
        assert!(*before >= (8_000.0 * 0.85) as u64);
        assert!(!stages.is_empty());
        if stages.iter().any(|s| s == "summarize") {
            assert_eq!(summarizer, "auxiliary");
        }
    }
    assert!(
        c.iter().any(|(_, _, s, _)| s == "auxiliary"),
        "the oldest turns were summarised: {c:?}"
    );
    assert!(!aux.requests().is_empty());
    assert!(
        h.main_summaries.requests().is_empty(),
        "the main model wrote no summary"
    );

    let reqs = h.provider.requests();
    // No request the model saw was over the window, and the head never changed.
    let head = |r: &keel_llm::ChatRequest| {
        format!("{}{}", r.system, serde_json::to_string(&r.tools).unwrap())
    };
    for r in &reqs {
        assert!(estimate_request(&r.system, &r.tools, &r.messages) <= 8_000);
        assert_eq!(head(r), head(&reqs[0]));
    }

    // Right after summarising, the request still holds the task, the files created long ago
    // and the unresolved error from turn 10.
    let n = request_after_first_summary(&h);
    let after = &reqs[n];
    let ContentBlock::Text { text: first } = &after.messages[0].content[0] else {
        panic!("the first message starts with the task");
    };
    assert!(first.starts_with(TASK), "{first}");
    let all = h.request_text(n);
    assert!(all.contains("notes/step_1.md"), "modified files are kept");
    assert!(all.contains("notes/step_4.md"));
    assert!(
        all.contains("`src/lib.rs` already exists"),
        "the unresolved error is kept"
    );
    assert!(all.contains("Summary 1:"), "the summary is in the request");
    // The last five tool calls are intact.
    let calls: usize = after.messages.iter().map(|m| m.tool_calls().len()).sum();
    assert!(calls >= 5);
    // And the store still has every message.
    let stored = h.store.messages(&out.session_id).await.unwrap();
    assert_eq!(stored.len(), 2 * LONG_SESSION_TURNS);
}

#[tokio::test]
async fn compaction_sends_far_fewer_tokens_than_the_full_history() {
    let run = |window: Option<u64>| async move {
        let mut h = Harness::new(&long_session_script(8_000));
        long_session_workspace(&mut h);
        h.config.agent.context_window = window;
        h.auxiliary = Some(Arc::new(scripted(&summaries_script(40, "Summary"))));
        let out = h.run(TASK).await;
        assert_eq!(out.status, SessionStatus::Completed);
        let reqs = h.provider.requests();
        let sent: u64 = reqs
            .iter()
            .map(|r| estimate_request(&r.system, &r.tools, &r.messages))
            .sum();
        (sent, h.count("compaction"))
    };
    let (with, compactions) = run(None).await;
    let (without, none) = run(Some(100_000_000)).await;
    assert!(compactions > 0);
    assert_eq!(none, 0);
    assert!(
        with * 10 < without * 6,
        "compaction should save at least 40% of the tokens sent: {with} vs {without}"
    );
}

/// A short session whose later requests cross a 3,500-token window (the tool catalog alone
/// is about 1,900 tokens of it).
fn small_session(h: &Harness) -> String {
    for i in 0..8 {
        let body: String = (0..30)
            .map(|l| format!("fn f{i}_{l}() {{ let value = {l}; }}\n"))
            .collect();
        h.write(&format!("src/f{i}.rs"), &body);
    }
    let mut s = String::from("turns:\n");
    for i in 0..8 {
        s.push_str(&format!(
            "  - tool_calls:\n      - name: read_file\n        arguments: {{path: \"src/f{i}.rs\"}}\n"
        ));
    }
    s.push_str("  - text: \"All read.\"\n");
    s
}

async fn run_small(h: &mut Harness) -> Vec<String> {
    let script = small_session(h);
    h.provider = scripted(&script);
    h.config.agent.context_window = Some(3_500);
    let out = h.run("read every file").await;
    assert_eq!(out.status, SessionStatus::Completed, "{:?}", out.error);
    compactions(h)
        .into_iter()
        .filter(|c| c.3.iter().any(|s| s == "summarize"))
        .map(|c| c.2)
        .collect()
}

#[tokio::test]
async fn auxiliary_failure_falls_back_to_the_main_model() {
    let mut h = Harness::new("turns: []\n");
    let aux = scripted("turns:\n  - error: server\n  - error: server\n  - error: server\n");
    h.auxiliary = Some(Arc::new(aux.clone()));
    h.main_summaries = scripted(&summaries_script(3, "Main summary"));
    let who = run_small(&mut h).await;
    assert!(!who.is_empty());
    assert!(who.iter().all(|w| w == "main"), "{who:?}");
    assert_eq!(
        aux.requests().len(),
        who.len(),
        "one auxiliary try per summary, no retries"
    );
    let last = h.provider.requests().len() - 1;
    // The latest main-model summary is what the model sees (how many compactions happen
    // depends on the size of the tool catalog in the 3,500-token window).
    assert!(
        h.request_text(last)
            .contains(&format!("Main summary {}", who.len()))
    );
}

#[tokio::test]
async fn an_empty_auxiliary_reply_counts_as_failure() {
    let mut h = Harness::new("turns: []\n");
    h.auxiliary = Some(Arc::new(scripted(
        "turns:\n  - text: \"   \"\n  - text: \"\\n\\t\"\n  - text: \" \"\n",
    )));
    h.main_summaries = scripted(&summaries_script(3, "Main summary"));
    let who = run_small(&mut h).await;
    assert!(!who.is_empty());
    assert!(who.iter().all(|w| w == "main"), "{who:?}");
}

#[tokio::test]
async fn when_both_models_fail_the_summary_is_rule_based() {
    let mut h = Harness::new("turns: []\n");
    h.auxiliary = Some(Arc::new(scripted(
        "turns:\n  - error: server\n  - error: server\n  - error: server\n",
    )));
    h.main_summaries = scripted("turns:\n  - error: timeout\n  - text: \"\"\n  - error: server\n");
    let who = run_small(&mut h).await;
    assert!(!who.is_empty());
    assert!(who.iter().all(|w| w == "rule_based"), "{who:?}");
    let last = h.provider.requests().len() - 1;
    let text = h.request_text(last);
    assert!(text.contains("read_file src/f0.rs → ok"), "{text}");
    assert!(text.contains("<earlier-work>"));
}

#[tokio::test]
async fn without_an_auxiliary_model_the_main_model_summarises() {
    let mut h = Harness::new("turns: []\n");
    h.main_summaries = scripted(&summaries_script(3, "Main summary"));
    let who = run_small(&mut h).await;
    assert!(!who.is_empty());
    assert!(who.iter().all(|w| w == "main"), "{who:?}");
}

#[tokio::test]
async fn a_context_overflow_from_the_server_compacts_and_sends_once_more() {
    // The server's window is smaller than Keel thought: after 12 reads it refuses the
    // request as too long; Keel compacts to what it learned and sends a smaller one.
    let mut script = String::from("turns:\n");
    for i in 0..12 {
        script.push_str(&format!(
            "  - text: \"Reading module {i}.\"\n    tool_calls:\n      - name: read_file\n        arguments: {{path: \"src/mod_{i}.rs\"}}\n"
        ));
    }
    script.push_str("  - error: context_length\n  - text: \"Done: read the modules.\"\n");
    let mut h = Harness::new(&script);
    long_session_workspace(&mut h);
    h.auxiliary = Some(Arc::new(scripted(&summaries_script(5, "Summary"))));
    let out = h.run(TASK).await;
    assert_eq!(out.status, SessionStatus::Completed, "{:?}", out.error);
    assert_eq!(
        compactions(&h).len(),
        1,
        "one compaction, after the overflow"
    );
    assert_eq!(
        h.count("recovery"),
        0,
        "no recovery attempt resends the large prompt"
    );
    let requests = h.provider.requests();
    let n = requests.len();
    let refused = h.request_text(n - 2);
    let resent = h.request_text(n - 1);
    assert!(
        resent.len() * 2 < refused.len(),
        "the retry is smaller: {} vs {} bytes",
        resent.len(),
        refused.len()
    );
}

/// A summary larger than the turns it replaces is dropped: compaction never grows the context
/// (a weak model's 128-token summary of two short steps took a SmolLM2 run from 1,410 to 1,585
/// tokens, and the next request no longer fit its window).
#[tokio::test]
async fn a_summary_larger_than_what_it_replaces_is_dropped() {
    let mut h = Harness::new("turns: []\n");
    let long = "The model surveyed the files and wrote long notes about each of them. ".repeat(60);
    let mut summaries = String::from("turns:\n");
    for _ in 0..6 {
        summaries.push_str(&format!("  - text: \"{long}\"\n"));
    }
    h.main_summaries = scripted(&summaries);
    let script = small_session(&h);
    h.provider = scripted(&script);
    h.config.agent.context_window = Some(3_500);
    let out = h.run("read every file").await;
    assert_eq!(out.status, SessionStatus::Completed, "{:?}", out.error);
    let c = compactions(&h);
    assert!(!c.is_empty(), "the session crossed the threshold");
    for (before, after, _, _) in &c {
        assert!(after <= before, "a compaction grew the context: {c:?}");
    }
    assert!(
        c.iter()
            .any(|(_, _, _, stages)| stages.iter().any(|s| s == "summary_dropped")),
        "{c:?}"
    );
    for n in 0..h.provider.requests().len() {
        assert!(
            !h.request_text(n).contains("wrote long notes"),
            "request {n} carries the dropped summary"
        );
    }
}

// The context budget alone: its threshold, its calibration on reported usage and on the
// provider's own scale, and what an overflow teaches it.

#[test]
fn the_budget_calibrates_on_reported_usage() {
    let mut b = ContextBudget::new(10_000, 0.85);
    assert_eq!(b.threshold_tokens(), 8_500);
    assert_eq!(b.target_tokens(), 5_100);
    let msg = Message::user_text("x".repeat(400));
    let raw = b.message_tokens(&msg);
    b.observe(
        1_000,
        &Usage {
            input_tokens: 2_000,
            cache_read_tokens: 500,
            ..Usage::default()
        },
    );
    assert_eq!(
        b.message_tokens(&msg),
        raw * 2,
        "cached tokens are part of the input"
    );
    b.observe(1_000, &Usage::default());
    assert_eq!(b.message_tokens(&msg), raw * 2, "no report: keep the ratio");
}

#[test]
fn a_small_window_compacts_before_the_request_leaves_no_room_for_a_reply() {
    // 85% of 2,048 (1,740) would leave keel-llm's smallest reply no room: it sends a
    // request over 1,629 tokens (with its tenth: 1,792) only with a 256-token reply.
    assert_eq!(ContextBudget::new(2_048, 0.85).threshold_tokens(), 1_529);
    assert_eq!(ContextBudget::new(4_096, 0.85).threshold_tokens(), 3_390);
    // From about 6,000 tokens the configured share comes first, as before.
    assert_eq!(ContextBudget::new(8_192, 0.85).threshold_tokens(), 6_963);
    assert_eq!(
        ContextBudget::new(128_000, 0.85).threshold_tokens(),
        108_800
    );
}

#[test]
fn with_the_providers_scale_the_budget_measures_what_the_provider_measures() {
    let msgs = [Message::user_text("x".repeat(4_000))];
    let scale = TokenScale {
        per_mille: 1_400,
        allowance: 128,
    };
    let mut b = ContextBudget::new(2_048, 0.85);
    // A usage ratio measured before: the provider's scale replaces it.
    b.observe(
        1_000,
        &Usage {
            input_tokens: 800,
            ..Usage::default()
        },
    );
    b.set_scale(Some(scale));
    assert_eq!(
        b.request_tokens("", &[], &msgs),
        scale.request("", &[], &msgs)
    );
    // Reported usage does not move it: the provider calibrated on it.
    b.observe(
        1_000,
        &Usage {
            input_tokens: 700,
            ..Usage::default()
        },
    );
    assert_eq!(
        b.request_tokens("", &[], &msgs),
        scale.request("", &[], &msgs)
    );
    // A context at the threshold leaves the reply more than the provider's smallest one (256
    // tokens), with its safety tenth.
    let t = b.threshold_tokens();
    assert!(2_048 - TokenScale::with_margin(t) > 256);
}

#[test]
fn an_overflow_with_a_known_window_raises_the_estimate_not_shrinks_the_window() {
    let msg = Message::user_text("x".repeat(4_000));
    let mut b = ContextBudget::new(2_048, 0.85);
    let raw = b.message_tokens(&msg);
    b.learn_overflow(Some(2_048), 1_024);
    assert_eq!(b.window, 2_048);
    assert_eq!(b.message_tokens(&msg), raw * 2);
    // Without a reported window it shrinks to what did not fit.
    let mut b = ContextBudget::new(128_000, 0.85);
    b.learn_overflow(None, 30_000);
    assert_eq!(b.window, 30_000);
    assert_eq!(b.message_tokens(&msg), raw);
}

/// The raw server's real plan_exec run 2 ended `context_overflow`: SmolLM2 called `read_file`
/// with a garbage path of three lines (170 characters: short enough for the usual stages to
/// keep it whole) and got a 750-byte error quoting it, in the protected tail; the request after
/// it did not fit the 2,048-token window even after a forced compaction. The forced compaction's
/// last resort keeps only short arguments and the error's key line of every failed call, the
/// tail's included; the task and successful calls stay as they are.
#[test]
fn the_last_resort_shrinks_every_failed_call_and_keeps_the_task() {
    use keel_engine::compaction::shrink_failed_calls;
    let garbage = "/tmp/keel-llama-dif5fd4l\nmath.py\nThis is a math. This is the code for this function, which does what it's supposed to do. &#816f%07A2B@CDAABAAAAAAABBBBBBBBBBBBBBBBBBBBBBBAE\n";
    let error = format!(
        "`{}` holds a control character (U+000A); file names are plain text, so the file tools never name a file with one. Call read_file again with the path exactly as list_files shows it. {}",
        garbage.escape_debug(),
        "The workspace holds: README.md, calc.py, test_calc.py. ".repeat(6)
    );
    let task = Message::user_text("fix the bug in calc.py: add(2, 3) must return 5");
    let call = |id: &str, path: &str| Message {
        role: keel_protocol::Role::Assistant,
        content: vec![ContentBlock::ToolUse {
            id: id.into(),
            name: "read_file".into(),
            input: serde_json::json!({ "path": path }),
        }],
    };
    let result = |id: &str, content: &str, is_error: bool| Message {
        role: keel_protocol::Role::User,
        content: vec![ContentBlock::ToolResult {
            tool_use_id: id.into(),
            content: content.into(),
            is_error,
        }],
    };
    let calc = "def add(a, b):\n    return a - b\n".repeat(12);
    let mut messages = vec![
        task.clone(),
        call("c1", "calc.py"),
        result("c1", &calc, false),
        call("c2", garbage),
        result("c2", &error, true),
    ];
    let failed_before = serde_json::to_string(&messages[3..]).unwrap().len();
    assert!(shrink_failed_calls(&mut messages));
    assert_eq!(messages[0], task, "the task stays byte for byte");
    assert_eq!(messages[1], call("c1", "calc.py"));
    assert_eq!(
        messages[2],
        result("c1", &calc, false),
        "a successful read stays"
    );
    let text = serde_json::to_string(&messages[3..]).unwrap();
    assert!(
        !text.contains("supposed to do"),
        "the garbage path is gone: {text}"
    );
    assert!(text.contains("read_file"), "{text}");
    assert!(
        text.len() * 2 < failed_before,
        "the failed call is less than half its {failed_before} bytes: {text}"
    );
    assert!(!shrink_failed_calls(&mut messages), "idempotent");
}
