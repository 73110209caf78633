//! The JSON Keel sends: tools, system prompt, messages with tool results, signed thinking,
//! DeepSeek's `reasoning_content` round-trip and Anthropic `cache_control` placement, checked
//! against snapshots and against what real clients sent in the recorded cassettes. Plus the
//! byte-stable head: everything before the conversation serialises identically on every turn.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;

use common::*;
use keel_llm::mock::{MockReply, MockServer, bodies};
use keel_llm::{AnthropicProvider, ChatRequest, OpenAiProvider, Role as LlmRole, Router};
use keel_protocol::{ContentBlock, Message, Role, ToolSpec};
use serde_json::{Value, json};

fn tools() -> Vec<ToolSpec> {
    vec![
        ToolSpec {
            name: "list_files".into(),
            description: "List files.".into(),
            input_schema: json!({"type": "object", "properties": {}}),
        },
        ToolSpec {
            name: "read_file".into(),
            description: "Read a file.".into(),
            input_schema: json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
        },
    ]
}

/// A conversation with every kind of block: signed thinking, text, parallel-free tool calls,
/// an error result, a plain answer and a follow-up.
fn conversation() -> Vec<Message> {
    vec![
        Message::user_text("Fix the bug in src/lib.rs."),
        Message {
            role: Role::Assistant,
            content: vec![
                ContentBlock::Reasoning {
                    text: "I should read the file first.".into(),
                    signature: Some("sig-abc".into()),
                },
                ContentBlock::Text {
                    text: "Let me read it.".into(),
                },
                ContentBlock::ToolUse {
                    id: "call_1".into(),
                    name: "read_file".into(),
                    input: json!({"path": "src/lib.rs"}),
                },
            ],
        },
        Message {
            role: Role::User,
            content: vec![ContentBlock::ToolResult {
                tool_use_id: "call_1".into(),
                content: "1\tpub fn add(a: i32, b: i32) -> i32 { a - b }".into(),
                is_error: false,
            }],
        },
        Message {
            role: Role::Assistant,
            content: vec![ContentBlock::ToolUse {
                id: "call_2".into(),
                name: "list_files".into(),
                input: json!({}),
            }],
        },
        Message {
            role: Role::User,
            content: vec![ContentBlock::ToolResult {
                tool_use_id: "call_2".into(),
                content: "permission denied".into(),
                is_error: true,
            }],
        },
        Message::assistant_text("Fixed: `add` now adds."),
        Message::user_text("Thanks. Also add a test."),
    ]
}

fn request(messages: Vec<Message>) -> ChatRequest {
    ChatRequest {
        system: "You are Keel, a coding agent.".into(),
        tools: tools(),
        messages,
        max_tokens: None,
    }
}

fn target(provider: &str, model: &str) -> keel_llm::ModelTarget {
    Router::new(
        &llm_config(provider, model, "http://127.0.0.1:9"),
        Path::new("/"),
    )
    .target(LlmRole::Main)
    .unwrap()
}

fn anthropic_body(req: &ChatRequest) -> Vec<u8> {
    AnthropicProvider::new(&target("anthropic", "claude-sonnet-4-5"), None)
        .unwrap()
        .request_body(req)
        .unwrap()
}

fn openai_body(provider: &str, model: &str, req: &ChatRequest) -> Vec<u8> {
    OpenAiProvider::new(&target(provider, model), None)
        .unwrap()
        .request_body(req)
        .unwrap()
}

fn json_of(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes).unwrap()
}

#[test]
fn anthropic_request_shape() {
    let body = json_of(&anthropic_body(&request(conversation())));
    insta::assert_json_snapshot!("anthropic_request", body);
    // The head's breakpoint sits on the system prompt; the moving one on the last block.
    assert_eq!(body["system"][0]["cache_control"]["type"], "ephemeral");
    assert!(body["tools"][1].get("cache_control").is_none());
    let messages = body["messages"].as_array().unwrap();
    let last = messages.last().unwrap()["content"].as_array().unwrap();
    assert_eq!(last.last().unwrap()["cache_control"]["type"], "ephemeral");
    let marks = body.to_string().matches("cache_control").count();
    assert_eq!(
        marks, 2,
        "two breakpoints, well under Anthropic's limit of four"
    );
    // The signed thinking block goes back first, unchanged.
    assert_eq!(
        messages[1]["content"][0],
        json!({"type": "thinking", "thinking": "I should read the file first.", "signature": "sig-abc"})
    );
    assert_eq!(messages[4]["content"][0]["is_error"], true);
}

#[test]
fn anthropic_without_a_system_prompt_caches_through_the_last_tool() {
    let mut req = request(conversation());
    req.system.clear();
    let body = json_of(&anthropic_body(&req));
    assert!(body.get("system").is_none());
    assert_eq!(body["tools"][1]["cache_control"]["type"], "ephemeral");
    assert!(body["tools"][0].get("cache_control").is_none());
}

#[test]
fn anthropic_thinking_budget_raises_max_tokens() {
    let mut config = llm_config("anthropic", "claude-sonnet-4-5", "http://127.0.0.1:9");
    config.thinking_budget = Some(10_000);
    let t = Router::new(&config, Path::new("/"))
        .target(LlmRole::Main)
        .unwrap();
    let body = json_of(
        &AnthropicProvider::new(&t, None)
            .unwrap()
            .request_body(&request(conversation()))
            .unwrap(),
    );
    assert_eq!(
        body["thinking"],
        json!({"type": "enabled", "budget_tokens": 10000})
    );
    assert!(body["max_tokens"].as_u64().unwrap() > 10_000);
}

#[test]
fn openai_request_shape() {
    let body = json_of(&openai_body("openai", "gpt-4o", &request(conversation())));
    insta::assert_json_snapshot!("openai_request", body);
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
    let messages = body["messages"].as_array().unwrap();
    assert_eq!(messages[0]["role"], "system");
    assert!(
        messages
            .iter()
            .all(|m| m.get("reasoning_content").is_none()),
        "OpenAI gets no reasoning_content"
    );
    assert_eq!(messages[5]["content"], "Error: permission denied");
}

#[test]
fn deepseek_sends_reasoning_content_on_every_tool_call_message_even_empty() {
    let body = json_of(&openai_body(
        "deepseek",
        "deepseek-reasoner",
        &request(conversation()),
    ));
    insta::assert_json_snapshot!("deepseek_request", body);
    let messages = body["messages"].as_array().unwrap();
    let assistants: Vec<&Value> = messages
        .iter()
        .filter(|m| m["role"] == "assistant")
        .collect();
    assert_eq!(assistants.len(), 3);
    assert_eq!(
        assistants[0]["reasoning_content"],
        "I should read the file first."
    );
    assert_eq!(assistants[1]["reasoning_content"], "", "empty, but present");
    assert!(
        assistants[2].get("reasoning_content").is_none(),
        "plain answers carry none"
    );
    assert_eq!(body.get("max_completion_tokens"), None);
}

/// The OpenAI cassette's second request, rebuilt from Keel's messages, matches what the
/// recording client sent.
#[test]
fn openai_tool_loop_messages_match_the_recorded_cassette() {
    let dir =
        fixtures().join("cassettes/pydantic__pydantic-ai__test_run_stream_sync_streams_real_model");
    let recorded = json_of(&read(&dir.join("01_request.json")));
    let messages = vec![
        Message::user_text("What is the capital of the UK? Use the tool, then answer."),
        Message {
            role: Role::Assistant,
            content: vec![ContentBlock::ToolUse {
                id: "call_ZR5UUuTt3pf61kjwAJIYdVMj".into(),
                name: "get_capital".into(),
                input: json!({"country": "UK"}),
            }],
        },
        Message {
            role: Role::User,
            content: vec![ContentBlock::ToolResult {
                tool_use_id: "call_ZR5UUuTt3pf61kjwAJIYdVMj".into(),
                content: "London".into(),
                is_error: false,
            }],
        },
    ];
    let req = ChatRequest {
        system: String::new(),
        tools: vec![],
        messages,
        max_tokens: None,
    };
    let body = json_of(&openai_body("openai", "gpt-4o-mini", &req));
    // The recording client sent `content: null` beside the tool call; Keel sends "" (OpenAI
    // accepts both, strict OpenAI-compatible servers only the string). Otherwise identical.
    let mut expected = recorded["body"]["messages"].clone();
    assert_eq!(expected[1]["content"], serde_json::Value::Null);
    expected[1]["content"] = json!("");
    assert_eq!(body["messages"], expected);
    assert_eq!(body["stream_options"], recorded["body"]["stream_options"]);
}

/// The Anthropic cassette's tool-result turn has the same shape as Keel's.
#[test]
fn anthropic_tool_results_match_the_recorded_cassette() {
    let dir = fixtures().join("cassettes/simonw__llm-anthropic__test_tools");
    let recorded = json_of(&read(&dir.join("01_request.json")));
    let results = vec![
        ContentBlock::ToolResult {
            tool_use_id: "toolu_01LtHJmixrs9NcWQkK8hu8hj".into(),
            content: "Charles".into(),
            is_error: false,
        },
        ContentBlock::ToolResult {
            tool_use_id: "toolu_01N8a4jWyf116qKTMqKKmjyt".into(),
            content: "Sammy".into(),
            is_error: false,
        },
    ];
    let req = ChatRequest {
        system: String::new(),
        tools: vec![],
        messages: vec![
            Message::user_text("Two names for a pet pelican"),
            Message {
                role: Role::Assistant,
                content: vec![
                    ContentBlock::ToolUse {
                        id: "toolu_01LtHJmixrs9NcWQkK8hu8hj".into(),
                        name: "pelican_name_generator".into(),
                        input: json!({}),
                    },
                    ContentBlock::ToolUse {
                        id: "toolu_01N8a4jWyf116qKTMqKKmjyt".into(),
                        name: "pelican_name_generator".into(),
                        input: json!({}),
                    },
                ],
            },
            Message {
                role: Role::User,
                content: results,
            },
        ],
        max_tokens: None,
    };
    let mut body = json_of(&anthropic_body(&req));
    // Keel marks the last block as a cache breakpoint; the recording client did not.
    body["messages"][2]["content"][1]
        .as_object_mut()
        .unwrap()
        .remove("cache_control");
    assert_eq!(body["messages"][2], recorded["body"]["messages"][2]);
    assert_eq!(
        body["messages"][1]["content"],
        json!(
            recorded["body"]["messages"][1]["content"]
                .as_array()
                .unwrap()[1..]
        )
    );
}

/// The bytes up to the conversation (model, limits, system prompt, tools) are identical on
/// every turn and for every client built from the same configuration.
#[test]
fn the_head_is_byte_identical_across_turns_and_clients() {
    let all = conversation();
    let turns: Vec<ChatRequest> = (1..=all.len())
        .map(|n| request(all[..n].to_vec()))
        .collect();
    let anthropic_head = |b: &[u8]| {
        let s = String::from_utf8(b.to_vec()).unwrap();
        s[..s.find("\"messages\":").unwrap()].to_string()
    };
    let openai_head = |b: &[u8]| {
        // Through the system message, which is the first entry of `messages`.
        let s = String::from_utf8(b.to_vec()).unwrap();
        s[..s.find(",{\"role\":\"user\"").unwrap()].to_string()
    };
    let first_a = anthropic_head(&anthropic_body(&turns[0]));
    let first_o = openai_head(&openai_body("deepseek", "deepseek-chat", &turns[0]));
    assert!(first_a.contains("\"tools\":") && first_a.contains("You are Keel"));
    assert!(first_o.contains("\"tools\":") && first_o.contains("You are Keel"));
    for t in &turns {
        assert_eq!(anthropic_head(&anthropic_body(t)), first_a);
        assert_eq!(
            openai_head(&openai_body("deepseek", "deepseek-chat", t)),
            first_o
        );
    }
}

/// A mock DeepSeek that answers HTTP 400 like the real API when an assistant message with
/// tool calls lacks `reasoning_content`, and a three-turn tool loop that passes against it.
#[tokio::test]
async fn deepseek_three_turn_tool_loop_passes_the_reasoning_rule() {
    let rule = |req: &keel_llm::mock::Recorded, n: usize| -> MockReply {
        let body = req.json();
        let violates = body["messages"].as_array().into_iter().flatten().any(|m| {
            m["role"] == "assistant"
                && m.get("tool_calls")
                    .is_some_and(|c| !c.as_array().unwrap().is_empty())
                && m.get("reasoning_content").is_none()
        });
        if violates {
            return MockReply::error(
                400,
                r#"{"error":{"message":"The reasoning_content in the thinking mode must be passed back to the API.","type":"invalid_request_error","param":null,"code":"invalid_request_error"}}"#,
            );
        }
        match n {
            0 => MockReply::sse(bodies::openai(
                "The user wants the file. I will read it.",
                "",
                &[("call_a", "read_file", r#"{"path": "src/lib.rs"}"#)],
                (100, 20),
            )),
            1 => MockReply::sse(bodies::openai(
                "",
                "Now the listing.",
                &[("call_b", "list_files", "{}")],
                (140, 10),
            )),
            _ => MockReply::sse(bodies::openai("All seen.", "Done.", &[], (180, 5))),
        }
    };
    for (preset, should_pass) in [("deepseek", true), ("vllm", false)] {
        let server = MockServer::with_handler(rule).await.unwrap();
        let p = provider(preset, "deepseek-reasoner", &server.url());
        let mut req = request(vec![Message::user_text("Read src/lib.rs and list files.")]);
        let mut outcome = Ok(());
        for _ in 0..3 {
            match turn(p.as_ref(), &req).await {
                Ok(t) => {
                    req.messages.push(t.to_message());
                    if t.tool_calls.is_empty() {
                        assert_eq!(t.text, "Done.");
                        break;
                    }
                    let results = t
                        .tool_calls
                        .iter()
                        .map(|c| ContentBlock::ToolResult {
                            tool_use_id: c.id.clone(),
                            content: format!("output of {}", c.name),
                            is_error: false,
                        })
                        .collect();
                    req.messages.push(Message {
                        role: Role::User,
                        content: results,
                    });
                }
                Err(e) => {
                    outcome = Err(e);
                    break;
                }
            }
        }
        if should_pass {
            outcome.unwrap();
            assert_eq!(server.requests().len(), 3);
            let last = server.requests()[2].json();
            let assistants: Vec<&Value> = last["messages"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|m| m["role"] == "assistant")
                .collect();
            assert_eq!(
                assistants[0]["reasoning_content"],
                "The user wants the file. I will read it."
            );
            assert_eq!(assistants[1]["reasoning_content"], "");
        } else {
            // Without the capability the mock rejects the second request: the rule is real.
            let e = outcome.unwrap_err();
            assert!(
                e.to_string()
                    .contains("reasoning_content in the thinking mode"),
                "{e}"
            );
        }
    }
}
