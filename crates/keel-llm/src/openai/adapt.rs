//! What the OpenAI-compatible client learns from a server's behaviour, and how it meets it:
//!
//! - a stream that ends before its finish reason → replies requested whole;
//! - a chat template that drops `role: tool` messages (the prompt does not grow by the tool
//!   results between consecutive requests) → tool results sent as user messages;
//! - a template that drops the tools (the prompt is no larger than it would be without the
//!   schemas) → reported, once;
//! - a context window the server enforces → `max_tokens` fits it, and a request that cannot fit
//!   is not sent;
//! - no usage in a stream → usage estimated, and marked so.
//!
//! Each fact is remembered per base URL and model ([`crate::learned`]), so the next run starts
//! right; each change is said once to the user as a [`StreamEvent::Notice`].

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use keel_protocol::{ContentBlock, ToolSpec, Usage};

use crate::learned::{Fact, Facts, ServerMemory};
use crate::tokens::{TokenScale, estimate_message, estimate_request, estimate_text};
use crate::{ChatRequest, LlmError, StreamEvent};

/// Estimated tool-result tokens a request must add before its prompt growth is judged.
pub(crate) const MIN_RESULT_TOKENS: u64 = 120;
/// Estimated tool-schema tokens below which a dropped catalog is not judged.
pub(crate) const MIN_TOOL_TOKENS: u64 = 150;
/// The largest server tokens per estimated token believed (in thousandths).
const MAX_PER_MILLE: u64 = 4000;
/// The smallest: a coarser tokenizer than four bytes a token (large vocabularies on code)
/// counts fewer tokens than estimated, and the window then holds more.
const MIN_PER_MILLE: u64 = 500;
/// Estimated prompt tokens a request needs before its count may set a scale below 1.0: in a
/// shorter one the template's preamble allowance is a large share of the estimate.
const MIN_TOKENS_FOR_COARSER: u64 = 500;
/// Tokens a chat template adds to every prompt whatever it holds (llama-cpp-python's
/// `chatml-function-calling`: ~100, tools or not), counted into every estimate the server's
/// counts are compared with. Without it a short request — a compaction summary, 292 estimated
/// tokens counted as 393 — reads as a tokenizer a third finer, and the scale, which only grows
/// and is remembered, made every later request of every later run look a third larger than the
/// server counts it (SmolLM2 runs ended `context_overflow` at 1,200 real tokens of 2,048).
const TEMPLATE_PREAMBLE_TOKENS: u64 = 128;
/// The smallest reply worth asking for: a request whose prompt leaves less room in the window
/// is not sent.
pub(crate) const MIN_REPLY_TOKENS: u32 = 256;

/// The prompt figures of one request, to compare with a later one's.
#[derive(Debug, Clone)]
pub(crate) struct Observation {
    messages: usize,
    /// A hash of the messages up to each one (`prefixes[i]` covers `messages[..=i]`): a later
    /// request is compared with this one only when it extends the same conversation (no
    /// compaction rewrote it in between).
    prefixes: std::sync::Arc<[u64]>,
    /// Estimated tokens of the tool results sent as `role: tool` messages.
    results: u64,
    /// Estimated tokens of everything else in the messages.
    rest: u64,
    /// Estimated tokens of the system prompt and messages (no tools).
    without_tools: u64,
    /// Estimated tokens of the tool schemas.
    tools: u64,
    /// Whether the results went as user messages.
    as_user: bool,
}

impl Observation {
    pub(crate) fn of(request: &ChatRequest, as_user: bool) -> Self {
        use std::hash::{Hash, Hasher};
        let mut results = 0;
        let mut rest = 0;
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        let mut prefixes = Vec::with_capacity(request.messages.len());
        for m in &request.messages {
            serde_json::to_string(m)
                .unwrap_or_default()
                .hash(&mut hasher);
            prefixes.push(hasher.finish());
            for block in &m.content {
                match block {
                    ContentBlock::ToolResult { content, .. } if !as_user => {
                        results += estimate_text(content)
                    }
                    _ => {}
                }
            }
            rest += estimate_message(m);
        }
        let tools = tool_tokens(&request.tools);
        Self {
            messages: request.messages.len(),
            prefixes: prefixes.into(),
            results,
            rest: rest.saturating_sub(results),
            without_tools: estimate_text(&request.system) + rest,
            tools,
            as_user,
        }
    }

    /// Whether this request carries `earlier`'s conversation unchanged, plus more messages.
    fn extends(&self, earlier: &Observation) -> bool {
        self.messages > earlier.messages
            && earlier.messages > 0
            && self.prefixes.get(earlier.messages - 1) == earlier.prefixes.last()
    }
}

fn tool_tokens(tools: &[ToolSpec]) -> u64 {
    estimate_request("", tools, &[])
}

/// The learned state of one client.
#[derive(Debug)]
pub(crate) struct Adaptive {
    pub(crate) memory: ServerMemory,
    whole_replies: AtomicBool,
    results_as_user: AtomicBool,
    tools_dropped: AtomicBool,
    window: Mutex<Option<u64>>,
    /// The previous request that reported its prompt size, and that size.
    last: Mutex<Option<(Observation, u64)>>,
    /// How many of the server's tokens one estimated token was, at most, in the requests it
    /// reported (in thousandths; its tokenizer may cut finer or coarser than four bytes a
    /// token); 0 until one was reported.
    per_mille: std::sync::atomic::AtomicU64,
    /// The scale of the latest request the server reported, in this process (0: none yet).
    recent_per_mille: std::sync::atomic::AtomicU64,
    /// Whether the tools were judged (once per process).
    tools_judged: AtomicBool,
    notices: Mutex<Vec<String>>,
    /// Whether prompt sizes are judged for dropped tools or results: only for local-server
    /// presets (hosted APIs render both natively).
    judges: bool,
}

impl Adaptive {
    /// The state `memory` remembers (facts past their time are learned again); `judges`:
    /// see [`Adaptive::judges`].
    pub(crate) fn new(memory: ServerMemory, judges: bool) -> Self {
        let facts = memory.facts();
        let mut notices = memory.take_notices();
        let whole = facts.streams.is_some_and(|f| !f.value);
        let as_user = facts.tool_results_as_user.is_some_and(|f| f.value);
        let dropped = facts.tools_dropped.is_some_and(|f| f.value);
        if dropped {
            notices.push(TOOLS_DROPPED.to_string());
        }
        Self {
            memory,
            whole_replies: AtomicBool::new(whole),
            results_as_user: AtomicBool::new(as_user),
            tools_dropped: AtomicBool::new(dropped),
            window: Mutex::new(facts.context_window.map(|f| f.value)),
            last: Mutex::new(None),
            per_mille: std::sync::atomic::AtomicU64::new(
                facts
                    .tokens_per_mille
                    .map_or(0, |f| f.value.clamp(MIN_PER_MILLE, MAX_PER_MILLE)),
            ),
            recent_per_mille: std::sync::atomic::AtomicU64::new(0),
            tools_judged: AtomicBool::new(facts.tools_dropped.is_some()),
            notices: Mutex::new(notices),
            judges,
        }
    }

    pub(crate) fn whole_replies(&self) -> bool {
        self.whole_replies.load(Ordering::Relaxed)
    }

    pub(crate) fn results_as_user(&self) -> bool {
        self.results_as_user.load(Ordering::Relaxed)
    }

    pub(crate) fn tools_dropped(&self) -> bool {
        self.tools_dropped.load(Ordering::Relaxed)
    }

    /// Server tokens per estimated token, in thousandths (what this server counted before).
    pub(crate) fn per_mille(&self) -> u64 {
        match self.per_mille.load(Ordering::Relaxed) {
            0 => 1000,
            known => known,
        }
    }

    /// How this server counts a request: the learned scale and the template's allowance (the
    /// one estimate the engine's compaction shares).
    pub(crate) fn scale(&self) -> TokenScale {
        TokenScale {
            per_mille: self.per_mille(),
            allowance: TEMPLATE_PREAMBLE_TOKENS,
        }
    }

    /// The window the server enforces, when learned.
    pub(crate) fn window(&self) -> Option<u64> {
        self.window.lock().ok().and_then(|w| *w)
    }

    pub(crate) fn take_notices(&self) -> Vec<String> {
        let mut out = self
            .notices
            .lock()
            .map(|mut n| std::mem::take(&mut *n))
            .unwrap_or_default();
        out.extend(self.memory.take_notices());
        out
    }

    fn notice(&self, text: String) {
        if let Ok(mut n) = self.notices.lock() {
            n.push(text);
        }
    }

    /// A stream ended before its finish reason: ask for whole replies from now on.
    pub(crate) fn learn_no_streaming(&self) {
        if !self.whole_replies.swap(true, Ordering::Relaxed) {
            self.memory.learn(|f, now| {
                f.streams = Some(Fact {
                    value: false,
                    learned_at: now,
                })
            });
        }
    }

    /// The server counted `counted` prompt tokens where Keel estimated `estimated`: the first
    /// scale, or one larger than the known one by a twentieth, is used from now on, and
    /// remembered. The largest seen stands (the estimate must not fall short of any prompt);
    /// below 1.0 only from a request large enough to show it.
    fn calibrate(&self, counted: u64, estimated: u64) {
        if estimated < 50 {
            return;
        }
        let large = estimated >= MIN_TOKENS_FOR_COARSER;
        let estimated = estimated + TEMPLATE_PREAMBLE_TOKENS;
        let scale = (counted.saturating_mul(1000) / estimated).clamp(MIN_PER_MILLE, MAX_PER_MILLE);
        if scale < 1000 && !large {
            return;
        }
        self.recent_per_mille.store(scale, Ordering::Relaxed);
        let known = self.per_mille.fetch_max(scale, Ordering::Relaxed);
        if known == 0 || scale > known + known / 20 {
            self.memory.learn(|f, now| {
                f.tokens_per_mille = Some(Fact {
                    value: scale,
                    learned_at: now,
                })
            });
        }
    }

    /// The server refused a request (`sent`) as larger than its `window`; its `message` may
    /// say how many tokens the prompt counted, which calibrates Keel's estimate.
    pub(crate) fn learn_window(&self, window: u64, sent: &Observation, message: &str) {
        let estimated = sent.without_tools + sent.tools;
        if let Some(counted) = prompt_in_error(message) {
            self.calibrate(counted, estimated);
        }
        if let Ok(mut w) = self.window.lock() {
            *w = Some(window);
        }
        self.memory.learn(|f, now| {
            f.context_window = Some(Fact {
                value: window,
                learned_at: now,
            })
        });
    }

    /// Records what `probe` found (`keel doctor --ping`), replacing older facts.
    pub(crate) fn learn_probe(&self, results_dropped: Option<bool>, tools_dropped: Option<bool>) {
        if let Some(d) = results_dropped {
            self.results_as_user.store(d, Ordering::Relaxed);
        }
        if let Some(d) = tools_dropped {
            self.tools_dropped.store(d, Ordering::Relaxed);
            self.tools_judged.store(true, Ordering::Relaxed);
        }
        self.memory.learn(|f: &mut Facts, now| {
            if let Some(d) = results_dropped {
                f.tool_results_as_user = Some(Fact {
                    value: d,
                    learned_at: now,
                });
            }
            if let Some(d) = tools_dropped {
                f.tools_dropped = Some(Fact {
                    value: d,
                    learned_at: now,
                });
            }
        });
    }

    /// The output limit for `request` within the learned (or configured) `window`: `limit`
    /// lowered so that prompt + limit fits; an error when not even [`MIN_REPLY_TOKENS`] fit
    /// in a window the server enforced, since it would refuse the request. No limit stays none.
    pub(crate) fn fit_max_tokens(
        &self,
        request: &ChatRequest,
        limit: Option<u32>,
        configured_window: Option<u64>,
    ) -> Result<Option<u32>, LlmError> {
        // No limit: the server stops at its window by itself.
        let learned = self.window();
        let (Some(limit), Some(window)) = (limit, learned.or(configured_window)) else {
            return Ok(limit);
        };
        // The estimate is about four bytes a token: scale it by what this server counted
        // before, and leave a tenth more for what it has not been seen counting.
        let scaled = self
            .scale()
            .request(&request.system, &request.tools, &request.messages);
        let prompt = TokenScale::with_margin(scaled);
        let room = window.saturating_sub(prompt);
        let floor = limit.min(MIN_REPLY_TOKENS);
        if room < u64::from(floor) {
            // A window from Keel's table, not one the server enforced, or a request that fits
            // but for the tenth left for safety: the estimate may be wrong, so the server
            // decides (its refusal states the prompt's real size, which Keel learns from).
            // SmolLM2 runs ended `context_overflow` on requests refused at ~1,815 estimated
            // tokens whose real prompts were ~1,350, with nothing left to compact.
            // The same when the request fits by the scale of this run's latest request: the
            // largest scale ever seen is kept (an estimate must not fall short), and one
            // request of a weak model's garbage can set it far above what its requests count
            // (1.63 remembered, 1.02 counted: a 1,450-token request refused as 2,065).
            let recent = match self.recent_per_mille.load(Ordering::Relaxed) {
                0 => scaled,
                per_mille => TokenScale {
                    per_mille,
                    ..self.scale()
                }
                .request(&request.system, &request.tools, &request.messages),
            };
            if learned.is_none() || window.saturating_sub(scaled.min(recent)) >= u64::from(floor) {
                return Ok(Some(floor));
            }
            return Err(LlmError::ContextLength {
                message: format!(
                    "the request (about {prompt} tokens) leaves no room for a reply in the server's {window}-token window; Keel did not send it"
                ),
                window: Some(window),
            });
        }
        let room = u32::try_from(room).unwrap_or(u32::MAX);
        Ok(Some(limit.min(room)))
    }

    /// Judges a request's reported prompt size (`prompt_tokens`) against the previous one's
    /// and against its tool schemas; returns the notices of what changed.
    pub(crate) fn observe(&self, now: Observation, prompt_tokens: u64) {
        if prompt_tokens == 0 {
            return;
        }
        // A template that drops the tools counts fewer tokens than sent: not a finer tokenizer.
        let tools = if self.tools_dropped() { 0 } else { now.tools };
        self.calibrate(prompt_tokens, now.without_tools + tools);
        if !self.judges {
            return;
        }
        if !self.tools_judged.swap(true, Ordering::Relaxed) && now.tools >= MIN_TOOL_TOKENS {
            // Rendered tools make the prompt about `without_tools + tools`; dropped ones leave
            // it near `without_tools`.
            let dropped = prompt_tokens < now.without_tools + now.tools / 3;
            self.tools_dropped.store(dropped, Ordering::Relaxed);
            self.memory.learn(|f, t| {
                f.tools_dropped = Some(Fact {
                    value: dropped,
                    learned_at: t,
                })
            });
            if dropped {
                self.notice(format!(
                    "{TOOLS_DROPPED} (the prompt counted {prompt_tokens} tokens; the tool schemas alone are about {})",
                    now.tools
                ));
            }
        }
        // The request the growth is measured from: the previous one, or an earlier one when
        // the results added since were too few to judge (a weak model's short results —
        // `list_files` of three files, a one-line error — add up over a few requests; judged
        // one request at a time they never reached the threshold, and plan_exec runs went on
        // sending `role: tool` results the template dropped).
        let Ok(mut last) = self.last.lock() else {
            return;
        };
        let Some((before, before_tokens)) = last.clone() else {
            *last = Some((now, prompt_tokens));
            return;
        };
        if now.as_user || before.as_user || !now.extends(&before) || now.results < before.results {
            *last = Some((now, prompt_tokens));
            return;
        }
        let added_results = now.results - before.results;
        if added_results < MIN_RESULT_TOKENS {
            return;
        }
        *last = Some((now.clone(), prompt_tokens));
        drop(last);
        let grew = prompt_tokens.saturating_sub(before_tokens);
        // The results and the rest of the new messages should add roughly their size; a
        // template that drops `role: tool` adds only the rest.
        let added_rest = now.rest.saturating_sub(before.rest);
        // Half the results is the line: a template frames a tool call in more tokens than its
        // estimate (llama-cpp-python's `chatml-function-calling`: SmolLM2's plan_exec prompt grew
        // 144 tokens for two calls, about 100 estimated, and 123 estimated tokens of dropped
        // results — a third would have called that rendered), and no tokenizer counts text at
        // under half the estimate.
        if grew < added_rest + added_results / 2 {
            self.results_as_user.store(true, Ordering::Relaxed);
            self.memory.learn(|f, t| {
                f.tool_results_as_user = Some(Fact {
                    value: true,
                    learned_at: t,
                })
            });
            self.notice(format!(
                "this server's chat template drops tool results (role: tool): the prompt grew by {grew} tokens for about {added_results} tokens of results; Keel now sends tool results as user messages (tool_results_as_user) and remembers it for this server and model"
            ));
        }
    }
}

const TOOLS_DROPPED: &str = "this server's chat template leaves the tool schemas out of the prompt: the model cannot call Keel's tools. Use a chat format that renders tools (llama-cpp-python: --chat_format chatml-function-calling) or another model";

/// The prompt size a context-overflow error states: llama-cpp-python and OpenAI "(N in your
/// prompt", llama.cpp "request (N tokens)".
pub(crate) fn prompt_in_error(message: &str) -> Option<u64> {
    let number_before = |text: &str, marker: &str| -> Option<u64> {
        let end = text.find(marker)?;
        let digits: String = text[..end]
            .chars()
            .rev()
            .take_while(|c| c.is_ascii_digit())
            .collect::<String>()
            .chars()
            .rev()
            .collect();
        digits.parse().ok()
    };
    number_before(message, " in your prompt").or_else(|| {
        let start = message.find("request (")? + "request (".len();
        number_before(&message[start..], " tokens)")
    })
}

/// The usage to report for a reply that carried none: the prompt estimated from the request,
/// the output from the reply's text and arguments.
pub(crate) fn estimated_usage(request: &ChatRequest, output_bytes: usize) -> Usage {
    Usage {
        input_tokens: estimate_request(&request.system, &request.tools, &request.messages),
        output_tokens: (output_bytes as u64).div_ceil(4),
        estimated: true,
        ..Usage::default()
    }
}

/// The bytes of reply text and tool-call arguments an event carries.
pub(crate) fn output_bytes(event: &StreamEvent) -> usize {
    match event {
        StreamEvent::TextDelta(t) | StreamEvent::ReasoningDelta(t) => t.len(),
        StreamEvent::ToolCallDelta { arguments, .. } => arguments.len(),
        StreamEvent::ToolCallStart { name, .. } => name.len(),
        _ => 0,
    }
}
