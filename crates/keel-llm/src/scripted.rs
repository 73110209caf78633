//! The scripted provider: plays model turns from a YAML or JSON file, for tests and demos.
//!
//! ```yaml
//! context_window: 8000          # optional: the window the engine assumes for this "model"
//! turns:
//!   - text: "I'll look at the file first."
//!     reasoning: "…"             # optional thinking text
//!     tool_calls:
//!       - name: read_file
//!         arguments: {path: "src/lib.rs"}
//!   - error: rate_limit          # rate_limit | server | timeout | overloaded | context_length
//!   - text: "Done: fixed the bug."
//! ```
//!
//! Each request consumes the next turn. Asking for a turn after the last one is an
//! [`LlmError::ScriptExhausted`], never a hang. Every request is recorded so tests can inspect
//! exactly what the engine sent.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use futures::stream::{self, StreamExt};
use keel_protocol::Usage;
use serde::Deserialize;
use serde_json::Value;

use crate::tokens::{estimate_request, estimate_text};
use crate::{ChatRequest, EventStream, LlmError, Provider, ProviderInfo, StopReason, StreamEvent};

/// A parsed script file.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Script {
    /// The model turns, played in order.
    pub turns: Vec<ScriptTurn>,
    /// The context window (tokens) the engine should assume for this model.
    #[serde(default)]
    pub context_window: Option<u64>,
    /// The model name to report (default `scripted`).
    #[serde(default)]
    pub model: Option<String>,
    /// Scripts for the subagents the session opens (`agent_open`), in the order they are
    /// opened: the first child plays `children[0]`, and so on.
    #[serde(default)]
    pub children: Vec<Script>,
}

/// One scripted model reply, or a provider error in its place.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ScriptTurn {
    #[serde(default)]
    pub text: Option<String>,
    #[serde(default)]
    pub reasoning: Option<String>,
    #[serde(default)]
    pub tool_calls: Vec<ScriptToolCall>,
    /// Fail this request with a provider error instead of replying.
    #[serde(default)]
    pub error: Option<ScriptError>,
    /// Wait this long before replying (to test cancellation, timeouts and kills).
    #[serde(default)]
    pub delay_ms: Option<u64>,
    /// Usage to report instead of an estimate.
    #[serde(default)]
    pub usage: Option<ScriptUsage>,
    /// Why the reply stopped: `end_turn`, `tool_use` or `max_tokens` (the output limit).
    /// Default: `tool_use` when there are tool calls, else `end_turn`.
    #[serde(default)]
    pub stop_reason: Option<ScriptStop>,
}

/// A scripted finish reason.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ScriptStop {
    EndTurn,
    ToolUse,
    MaxTokens,
}

/// A scripted tool call.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ScriptToolCall {
    pub name: String,
    /// Arguments as structured data.
    #[serde(default)]
    pub arguments: Option<Value>,
    /// Arguments as raw text, streamed verbatim (to script malformed or cut-off JSON).
    #[serde(default)]
    pub raw_arguments: Option<String>,
    /// Call id (default `call_<turn>_<n>`).
    #[serde(default)]
    pub id: Option<String>,
}

/// Provider failures a script can simulate.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ScriptError {
    RateLimit,
    Server,
    Timeout,
    Overloaded,
    /// The request does not fit the context window (not retried; the engine compacts).
    ContextLength,
}

/// Usage a script can report for a turn.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ScriptUsage {
    #[serde(default)]
    pub input_tokens: u64,
    #[serde(default)]
    pub output_tokens: u64,
    #[serde(default)]
    pub cache_read_tokens: u64,
    #[serde(default)]
    pub cache_creation_tokens: u64,
}

impl Script {
    /// Parses a script from text; `json` selects the JSON reader, else YAML.
    pub fn parse(text: &str, json: bool) -> Result<Self, String> {
        // A script path can name any file the user can read (an eval suite or a flow chose
        // it): until the text is a mapping of a script's own keys, an error says only that —
        // serde's messages quote the text (`unknown field `KEY-LINE``, `invalid type: string
        // "https://user:TOKEN@host"`).
        const KEYS: [&str; 4] = ["turns", "context_window", "model", "children"];
        let top: Result<BTreeMap<String, serde::de::IgnoredAny>, String> = if json {
            serde_json::from_str(text).map_err(|e| e.to_string())
        } else {
            serde_saphyr::from_str_with_options(
                text,
                serde_saphyr::options! { with_snippet: false },
            )
            .map_err(|e| e.to_string())
        };
        let starts_like_a_script = || {
            text.lines()
                .map(str::trim)
                .find(|l| !l.is_empty() && !l.starts_with('#'))
                .is_some_and(|l| {
                    KEYS.iter().any(|k| {
                        l.strip_prefix(k)
                            .or_else(|| {
                                l.strip_prefix('{').map(str::trim_start).and_then(|l| {
                                    l.strip_prefix('"')
                                        .and_then(|l| l.strip_prefix(k))
                                        .and_then(|l| l.strip_prefix('"'))
                                })
                            })
                            .is_some_and(|rest| rest.trim_start().starts_with(':'))
                    })
                })
        };
        match top {
            // A script with a syntax error: where it is (serde names no value in these).
            Err(e) if starts_like_a_script() => return Err(e),
            Ok(map) if map.keys().all(|k| KEYS.contains(&k.as_str())) => {}
            _ => {
                return Err(format!(
                    "this is not a scripted-provider script: a script is a {} mapping of `turns` (and optionally `model`, `context_window`, `children`); see examples/demo.yaml",
                    if json { "JSON" } else { "YAML" }
                ));
            }
        }
        let script: Script = if json {
            serde_json::from_str(text).map_err(|e| e.to_string())?
        } else {
            // No snippet of the text in the error: a script path can name any file the user
            // can read (an eval suite or a flow chose it), and its lines must not be shown.
            serde_saphyr::from_str_with_options(
                text,
                serde_saphyr::options! { with_snippet: false },
            )
            .map_err(|e| e.to_string())?
        };
        script.validate()?;
        Ok(script)
    }

    fn validate(&self) -> Result<(), String> {
        for (i, child) in self.children.iter().enumerate() {
            child
                .validate()
                .map_err(|e| format!("children[{i}]: {e}"))?;
        }
        for (i, turn) in self.turns.iter().enumerate() {
            if turn.error.is_some() && (turn.text.is_some() || !turn.tool_calls.is_empty()) {
                return Err(format!(
                    "turn {}: `error` replaces the reply; remove `text`/`tool_calls` or the error",
                    i + 1
                ));
            }
            for call in &turn.tool_calls {
                if call.arguments.is_some() && call.raw_arguments.is_some() {
                    return Err(format!(
                        "turn {}: tool call `{}` has both `arguments` and `raw_arguments`; keep one",
                        i + 1,
                        call.name
                    ));
                }
            }
        }
        Ok(())
    }
}

/// The script of the `index`th subagent (from 0) of the script file at `path`.
pub fn load_child(path: &Path, index: usize) -> Result<ScriptedProvider, LlmError> {
    let parent = ScriptedProvider::load(path)?;
    let count = parent.script.children.len();
    let Some(child) = parent.script.children.get(index) else {
        return Err(LlmError::Config(format!(
            "{} has {count} script(s) under `children:`, but the session opened subagent number {}; add a script for it under `children:`",
            path.display(),
            index + 1
        )));
    };
    Ok(ScriptedProvider::new(
        child.clone(),
        format!("{} (children[{index}])", path.display()),
    ))
}

/// What a resumed session's stored reply looks like to [`Provider::fast_forward`]: its text
/// and the tools it called with their arguments, in order.
pub fn reply_fingerprint(text: &str, calls: &[(String, Value)]) -> String {
    let calls: Vec<String> = calls
        .iter()
        .map(|(name, args)| format!("{name}({args})"))
        .collect();
    format!("{}|{}", text.trim(), calls.join(";"))
}

/// A scripted call's arguments as the engine will see them.
fn call_arguments(call: &ScriptToolCall) -> Value {
    match (&call.raw_arguments, &call.arguments) {
        (Some(raw), _) => serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.clone())),
        (None, Some(v)) => v.clone(),
        (None, None) => Value::Object(serde_json::Map::new()),
    }
}

/// The fingerprint of a failed attempt that was retried (an `error:` turn).
pub const RETRY_FINGERPRINT: &str = "(retried error)";

/// Plays a [`Script`].
/// The largest script file read (far above any hand-written or recorded script).
pub const SCRIPT_LIMIT: u64 = 16 * 1024 * 1024;

#[derive(Debug, Clone)]
pub struct ScriptedProvider {
    script: Arc<Script>,
    source: String,
    state: Arc<Mutex<State>>,
}

#[derive(Debug, Default)]
struct State {
    next: usize,
    requests: Vec<ChatRequest>,
}

impl ScriptedProvider {
    /// Loads a script file (`.json` is read as JSON, anything else as YAML).
    pub fn load(path: &Path) -> Result<Self, LlmError> {
        // A script may lie in the workspace (a flow's node names one): read like any file the
        // user names — a regular file only (a FIFO cannot hang Keel, a device is never
        // opened), at most SCRIPT_LIMIT bytes.
        let cannot =
            |why: String| LlmError::Config(format!("cannot read script {}: {why}", path.display()));
        let text = keel_fs::project::read_user_file(path, SCRIPT_LIMIT)
            .map_err(|e| cannot(e.problem.to_string()))?
            .ok_or_else(|| cannot("it does not exist".into()))?;
        let json = path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("json"));
        let script = Script::parse(&text, json)
            .map_err(|e| LlmError::Config(format!("invalid script {}: {e}", path.display())))?;
        Ok(Self::new(script, path.display().to_string()))
    }

    /// Wraps an already parsed script; `source` names it in error messages.
    pub fn new(script: Script, source: impl Into<String>) -> Self {
        Self {
            script: Arc::new(script),
            source: source.into(),
            state: Arc::new(Mutex::new(State::default())),
        }
    }

    /// Sets the context window the provider reports when the script names none.
    pub fn with_context_window(mut self, window: Option<u64>) -> Self {
        if self.script.context_window.is_none() {
            Arc::make_mut(&mut self.script).context_window = window;
        }
        self
    }

    /// Parses YAML script text (convenient in tests).
    pub fn from_yaml(text: &str) -> Result<Self, LlmError> {
        let script = Script::parse(text, false)
            .map_err(|e| LlmError::Config(format!("invalid script: {e}")))?;
        Ok(Self::new(script, "inline script"))
    }

    /// The script being played.
    pub fn script(&self) -> &Script {
        &self.script
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<ChatRequest> {
        self.state
            .lock()
            .map(|s| s.requests.clone())
            .unwrap_or_default()
    }

    /// How many turns have been played.
    pub fn turns_played(&self) -> usize {
        self.state.lock().map(|s| s.next).unwrap_or(0)
    }

    /// Where the script came from.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The path a script was loaded from, if it was a file.
    pub fn source_path(&self) -> Option<PathBuf> {
        let p = PathBuf::from(&self.source);
        p.exists().then_some(p)
    }

    fn take_turn(&self, request: &ChatRequest) -> Result<(usize, ScriptTurn), LlmError> {
        let mut state = self
            .state
            .lock()
            .map_err(|_| LlmError::InvalidResponse("scripted provider state poisoned".into()))?;
        state.requests.push(request.clone());
        let index = state.next;
        let Some(turn) = self.script.turns.get(index) else {
            return Err(LlmError::ScriptExhausted(format!(
                "{} has {} and all were played, but the engine asked for turn {}. \
                 End the script with a turn that has `text` and no `tool_calls` so the model finishes.",
                self.source,
                match self.script.turns.len() {
                    1 => "1 turn".to_string(),
                    n => format!("{n} turns"),
                },
                index + 1
            )));
        };
        state.next += 1;
        Ok((index, turn.clone()))
    }
}

impl Provider for ScriptedProvider {
    /// Skips the turns a resumed session already played — when they are this script's first
    /// turns (a different script starts from its top), and only before this process's first
    /// request (a provider that has played turns keeps its place).
    fn fast_forward(&self, played: &[String]) {
        let Ok(mut state) = self.state.lock() else {
            return;
        };
        if state.next != 0 || !state.requests.is_empty() || played.len() > self.script.turns.len() {
            return;
        }
        let ours = self.script.turns.iter().map(|t| match t.error {
            Some(_) => RETRY_FINGERPRINT.to_string(),
            None => reply_fingerprint(
                t.text.as_deref().unwrap_or(""),
                &t.tool_calls
                    .iter()
                    .map(|c| (c.name.clone(), call_arguments(c)))
                    .collect::<Vec<_>>(),
            ),
        });
        if ours.zip(played).all(|(a, b)| a == *b) {
            state.next = played.len();
        }
    }

    fn info(&self) -> ProviderInfo {
        ProviderInfo {
            provider: "scripted".into(),
            model: self
                .script
                .model
                .clone()
                .unwrap_or_else(|| "scripted".into()),
            context_window: self.script.context_window,
        }
    }

    fn stream<'a>(
        &'a self,
        request: &'a ChatRequest,
    ) -> BoxFuture<'a, Result<EventStream, LlmError>> {
        Box::pin(async move {
            let (index, turn) = self.take_turn(request)?;
            if let Some(ms) = turn.delay_ms {
                tokio::time::sleep(Duration::from_millis(ms)).await;
            }
            if let Some(err) = turn.error {
                return Err(simulated_error(err));
            }
            let input_tokens = estimate_request(&request.system, &request.tools, &request.messages);
            Ok(stream::iter(turn_events(index, &turn, input_tokens).into_iter().map(Ok)).boxed())
        })
    }
}

fn simulated_error(err: ScriptError) -> LlmError {
    match err {
        ScriptError::RateLimit => LlmError::RateLimited {
            message: "scripted rate limit".into(),
            retry_after: Some(Duration::from_millis(0)),
        },
        ScriptError::Server => LlmError::Server {
            status: 500,
            message: "scripted server error".into(),
            retry_after: None,
        },
        ScriptError::Timeout => LlmError::Timeout("scripted timeout".into()),
        ScriptError::Overloaded => LlmError::Overloaded {
            message: "scripted overload".into(),
            retry_after: Some(Duration::from_millis(0)),
        },
        ScriptError::ContextLength => LlmError::ContextLength {
            message: "scripted: the request exceeds the available context size".into(),
            window: None,
        },
    }
}

/// The stream events of one scripted turn: reasoning, text in word-sized chunks, tool calls
/// with their argument JSON in two fragments (as real providers split them), usage, finish.
fn turn_events(index: usize, turn: &ScriptTurn, input_tokens: u64) -> Vec<StreamEvent> {
    let mut events = Vec::new();
    let mut output = String::new();
    if let Some(r) = &turn.reasoning {
        output.push_str(r);
        events.push(StreamEvent::ReasoningDelta(r.clone()));
    }
    if let Some(text) = &turn.text {
        output.push_str(text);
        for chunk in chunks(text) {
            events.push(StreamEvent::TextDelta(chunk.to_string()));
        }
    }
    for (n, call) in turn.tool_calls.iter().enumerate() {
        let id = call
            .id
            .clone()
            .unwrap_or_else(|| format!("call_{}_{}", index + 1, n + 1));
        events.push(StreamEvent::ToolCallStart {
            index: n,
            id,
            name: call.name.clone(),
        });
        let raw = match (&call.raw_arguments, &call.arguments) {
            (Some(raw), _) => raw.clone(),
            (None, Some(v)) => v.to_string(),
            (None, None) => "{}".to_string(),
        };
        output.push_str(&call.name);
        output.push_str(&raw);
        let mid = raw
            .char_indices()
            .nth(raw.chars().count() / 2)
            .map_or(0, |(i, _)| i);
        for part in [&raw[..mid], &raw[mid..]] {
            if !part.is_empty() {
                events.push(StreamEvent::ToolCallDelta {
                    index: n,
                    arguments: part.to_string(),
                });
            }
        }
    }
    let usage = match turn.usage {
        Some(u) => Usage {
            input_tokens: u.input_tokens,
            output_tokens: u.output_tokens,
            cache_read_tokens: u.cache_read_tokens,
            cache_creation_tokens: u.cache_creation_tokens,
            ..Usage::default()
        },
        None => Usage {
            input_tokens,
            output_tokens: estimate_text(&output).max(1),
            ..Usage::default()
        },
    };
    events.push(StreamEvent::Usage(usage));
    events.push(StreamEvent::Finish {
        stop_reason: match turn.stop_reason {
            Some(ScriptStop::MaxTokens) => StopReason::MaxTokens,
            Some(ScriptStop::EndTurn) => StopReason::EndTurn,
            Some(ScriptStop::ToolUse) => StopReason::ToolUse,
            None if turn.tool_calls.is_empty() => StopReason::EndTurn,
            None => StopReason::ToolUse,
        },
    });
    events
}

/// Splits text after each space so a UI sees it arrive word by word.
fn chunks(text: &str) -> impl Iterator<Item = &str> {
    text.split_inclusive(' ')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::TurnAssembler;

    async fn play(p: &ScriptedProvider) -> Result<crate::ModelTurn, LlmError> {
        let req = ChatRequest::default();
        let mut s = p.stream(&req).await?;
        let mut a = TurnAssembler::new();
        while let Some(ev) = s.next().await {
            a.push(ev?);
        }
        a.finish()
    }

    #[test]
    fn a_script_error_never_shows_the_files_lines() {
        // A script path can name any readable file (an eval suite's `script`): a parse error
        // says where, not what (red-team pass 2 printed a key's first line).
        for text in [
            "RT-SECRET-KEY-LINE\n",
            "turns:\n  - text: ok\nRT-SECRET-KEY-LINE: x\n",
            "https://user:RT-SECRET-TOKEN@host\n",
            "RT-SECRET: [\n",
            "{\"RT-SECRET\": 1}",
        ] {
            let e = Script::parse(text, false).unwrap_err();
            assert!(!e.contains("RT-SECRET"), "{e}");
            assert!(!e.is_empty());
        }
        // A real script's mistakes are still named precisely.
        let e = Script::parse("turns:\n  - text: ok\n    tool_cals: []\n", false).unwrap_err();
        assert!(e.contains("tool_cals"), "{e}");
        let e = Script::parse("turns: [\n", false).unwrap_err();
        assert!(!e.contains("not a scripted-provider script"), "{e}");
    }

    const SCRIPT: &str = r#"
turns:
  - text: "I'll look at the file first."
    reasoning: "need context"
    tool_calls:
      - name: read_file
        arguments: {path: "src/lib.rs"}
  - error: rate_limit
  - text: "Done: fixed the bug."
"#;

    #[tokio::test]
    async fn plays_turns_in_order_then_reports_exhaustion() {
        let p = ScriptedProvider::from_yaml(SCRIPT).unwrap_or_else(|e| panic!("{e}"));
        let t1 = play(&p).await.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(t1.text, "I'll look at the file first.");
        assert_eq!(t1.reasoning.as_deref(), Some("need context"));
        assert_eq!(t1.tool_calls[0].id, "call_1_1");
        assert_eq!(t1.tool_calls[0].arguments["path"], "src/lib.rs");
        assert_eq!(t1.stop_reason, StopReason::ToolUse);
        assert!(t1.usage.output_tokens > 0);

        let e = play(&p).await.err();
        assert!(matches!(e, Some(LlmError::RateLimited { .. })));

        let t3 = play(&p).await.unwrap_or_else(|e| panic!("{e}"));
        assert!(t3.tool_calls.is_empty());
        assert_eq!(t3.stop_reason, StopReason::EndTurn);

        match play(&p).await {
            Err(LlmError::ScriptExhausted(msg)) => {
                assert!(msg.contains("has 3 turns and"), "{msg}");
                assert!(msg.contains("turn 4"), "{msg}");
            }
            other => panic!("expected exhaustion, got {other:?}"),
        }
        assert_eq!(p.requests().len(), 4);
    }

    #[test]
    fn rejects_unknown_keys_and_contradictions() {
        let typo = ScriptedProvider::from_yaml("turns:\n  - txt: hi\n").err();
        let msg = typo.map(|e| e.to_string()).unwrap_or_default();
        assert!(msg.contains("txt"), "{msg}");
        let both = ScriptedProvider::from_yaml("turns:\n  - text: hi\n    error: server\n").err();
        assert!(both.is_some());
    }

    #[test]
    fn reads_json_scripts() {
        let s = Script::parse(
            r#"{"context_window": 900, "turns": [{"text": "ok"}]}"#,
            true,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(s.context_window, Some(900));
        assert_eq!(s.turns[0].text.as_deref(), Some("ok"));
    }

    #[tokio::test]
    async fn raw_arguments_stream_verbatim_and_reach_the_loop_as_text() {
        let p = ScriptedProvider::from_yaml(
            "turns:\n  - tool_calls:\n      - name: create_file\n        raw_arguments: '{\"path\": \"a'\n",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let turn = play(&p).await.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            turn.tool_calls[0].arguments,
            serde_json::Value::String("{\"path\": \"a".into())
        );
    }
}
