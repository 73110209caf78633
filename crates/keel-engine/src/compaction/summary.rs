//! Summaries of the oldest turns (R13–R15): the auxiliary model first, then the main model,
//! then rules. Empty or whitespace-only replies count as failures.

use futures::StreamExt;
use keel_llm::{ChatRequest, Provider, TurnAssembler};
use keel_protocol::{ContentBlock, Message, Role, Usage};

use super::stages::calls_by_id;
use crate::ending::Interrupt;
use keel_tracker::{call_target, key_line};

/// Upper bound of the transcript excerpt sent to a summariser.
const MAX_SUMMARY_INPUT_CHARS: usize = 48_000;
/// Output budget of a summary request.
const SUMMARY_MAX_TOKENS: u32 = 1_500;
/// A smaller window's summaries: at most a sixteenth of it written, at most half of it read (a
/// 1,500-token summary cannot fit in a 2,048-token window, and a weak model on a local server
/// takes minutes to write one).
const SUMMARY_WINDOW_SHARE: u64 = 16;

/// A main model with a window this small or smaller does not write summaries: rules do
/// ([`rule_based_summary_within`]). On the raw llama.cpp server SmolLM2-135M's (2,048 tokens)
/// were garbage that grew the context they were meant to shrink, and each cost one more
/// request that re-read its excerpt under another system prompt (no prompt cache): 304 s on
/// the loaded machine, the request a run timed out in.
const RULES_ONLY_WINDOW: u64 = 2_048;

/// Whether a main model with a `window`-token context leaves its summaries to rules.
pub(crate) fn summaries_by_rules(window: u64) -> bool {
    window <= RULES_ONLY_WINDOW
}

/// The output budget of a summary for a main model with a `window`-token context.
pub(crate) fn summary_max_tokens(window: u64) -> u32 {
    let share = (window / SUMMARY_WINDOW_SHARE).max(128);
    u32::try_from(share).map_or(SUMMARY_MAX_TOKENS, |s| s.min(SUMMARY_MAX_TOKENS))
}

/// `input` cut (in the middle) to what a `window`-token model can read with room to answer:
/// about half the window, four characters a token.
pub(crate) fn fit_summary_input(input: String, window: u64) -> String {
    let max = usize::try_from(window.saturating_mul(2)).unwrap_or(usize::MAX);
    if input.chars().count() <= max {
        return input;
    }
    keel_tools::text::truncate_middle(&input, max)
}
/// The summariser's instructions.
pub const SUMMARY_PROMPT: &str = include_str!("../prompts/summarize.md");

/// Which summariser produced a compaction's summary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Summarizer {
    Auxiliary,
    Main,
    RuleBased,
}

impl Summarizer {
    /// The name used in `compaction` events.
    pub fn as_str(self) -> &'static str {
        match self {
            Summarizer::Auxiliary => "auxiliary",
            Summarizer::Main => "main",
            Summarizer::RuleBased => "rule_based",
        }
    }
}

/// The text a summariser reads: the previous summary, then the steps, oldest first.
pub fn render_for_summary(previous: Option<&str>, region: &[Message]) -> String {
    let calls = calls_by_id(region);
    let mut out = String::new();
    if let Some(p) = previous {
        out.push_str("Summary of the steps before these:\n");
        out.push_str(p.trim());
        out.push_str("\n\n");
    }
    out.push_str("Steps to summarise, oldest first:\n");
    let clip = |s: &str, n: usize| -> String {
        let s = s.trim();
        if s.chars().count() > n {
            format!("{}…", s.chars().take(n).collect::<String>())
        } else {
            s.to_string()
        }
    };
    for m in region {
        for b in &m.content {
            match (m.role, b) {
                (Role::Assistant, ContentBlock::Text { text }) if !text.trim().is_empty() => {
                    out.push_str(&format!("[assistant] {}\n", clip(text, 600)));
                }
                (Role::User, ContentBlock::Text { text }) if !text.trim().is_empty() => {
                    out.push_str(&format!("[user] {}\n", clip(text, 600)));
                }
                (_, ContentBlock::ToolUse { name, input, .. }) => {
                    out.push_str(&format!(
                        "[tool call] {name} {}\n",
                        clip(&input.to_string(), 200)
                    ));
                }
                (
                    _,
                    ContentBlock::ToolResult {
                        tool_use_id,
                        content,
                        is_error,
                    },
                ) => {
                    let name = calls
                        .get(tool_use_id)
                        .map(|c| c.name.as_str())
                        .unwrap_or("tool");
                    let kind = if *is_error { "error" } else { "ok" };
                    out.push_str(&format!("[{name} result, {kind}] {}\n", clip(content, 400)));
                }
                _ => {}
            }
        }
    }
    keel_tools::text::truncate_middle(&out, MAX_SUMMARY_INPUT_CHARS)
}

/// A summary built by rules alone, for when no model can write one.
pub fn rule_based_summary(previous: Option<&str>, region: &[Message]) -> String {
    rule_based_summary_within(previous, region, usize::MAX)
}

/// [`rule_based_summary`] in at most about `max_chars` characters: the newest steps that fit
/// (with a line counting the ones left out) after at most a third of it of the previous summary.
pub fn rule_based_summary_within(
    previous: Option<&str>,
    region: &[Message],
    max_chars: usize,
) -> String {
    let calls = calls_by_id(region);
    let mut lines = Vec::new();
    for m in region {
        for b in &m.content {
            match (m.role, b) {
                (Role::Assistant, ContentBlock::Text { text }) if !text.trim().is_empty() => {
                    let t: String = text.trim().chars().take(200).collect();
                    lines.push(format!("- said: {}", t.replace('\n', " ")));
                }
                (
                    _,
                    ContentBlock::ToolResult {
                        tool_use_id,
                        content,
                        is_error,
                    },
                ) => {
                    let call = calls.get(tool_use_id);
                    let what = match call {
                        Some(c) => match call_target(c) {
                            Some(t) => format!("{} {t}", c.name),
                            None => c.name.clone(),
                        },
                        None => "tool".into(),
                    };
                    let first: String = key_line(content)
                        .trim_start_matches("[compacted] ")
                        .chars()
                        .take(120)
                        .collect();
                    let kind = if *is_error { "error" } else { "ok" };
                    lines.push(format!("- {what} → {kind}: {first}"));
                }
                _ => {}
            }
        }
    }
    const MAX_LINES: usize = 40;
    let mut out = String::new();
    if let Some(p) = previous {
        let p: String = p.trim().chars().take(1_500.min(max_chars / 3)).collect();
        out.push_str(&p);
        out.push('\n');
    }
    // The newest lines that fit what is left (a line of its own says how many were left out).
    let room = max_chars.saturating_sub(out.chars().count() + 40);
    let mut used = 0;
    let fitting = lines
        .iter()
        .rev()
        .take_while(|l| {
            used += l.chars().count() + 1;
            used <= room
        })
        .count();
    if fitting < lines.len() && fitting < MAX_LINES {
        out.push_str(&format!(
            "- ({} earlier steps omitted)\n",
            lines.len() - fitting
        ));
        lines.drain(..lines.len() - fitting);
    }
    if lines.len() > MAX_LINES {
        out.push_str(&format!(
            "- ({} earlier steps omitted)\n",
            lines.len() - MAX_LINES
        ));
        lines.drain(..lines.len() - MAX_LINES);
    }
    out.push_str(&lines.join("\n"));
    out
}

/// Asks `provider` for a summary. `Ok(None)` when it fails or answers with only whitespace
/// (both count as failure, R15); `Err` only on cancellation.
pub(crate) async fn ask_for_summary(
    provider: &dyn Provider,
    input: &str,
    max_tokens: u32,
    cancel: &tokio_util::sync::CancellationToken,
) -> Result<(Option<String>, Usage), Interrupt> {
    let request = ChatRequest {
        system: SUMMARY_PROMPT.to_string(),
        tools: Vec::new(),
        messages: vec![Message::user_text(input)],
        max_tokens: Some(max_tokens),
    };
    let attempt = async {
        let mut stream = provider.stream(&request).await?;
        let mut assembler = TurnAssembler::new();
        while let Some(event) = stream.next().await {
            let event = event?;
            let done = matches!(event, keel_llm::StreamEvent::Finish { .. });
            assembler.push(event);
            if done {
                break;
            }
        }
        assembler.finish()
    };
    let turn = tokio::select! {
        biased;
        _ = cancel.cancelled() => return Err(Interrupt::Cancelled),
        t = attempt => t,
    };
    Ok(match turn {
        Ok(t) if !t.text.trim().is_empty() => (Some(t.text.trim().to_string()), t.usage),
        Ok(t) => (None, t.usage),
        Err(_) => (None, Usage::default()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compaction::stages::tests::session;

    #[test]
    fn a_small_window_gets_short_summaries_of_short_excerpts() {
        assert_eq!(summary_max_tokens(2_048), 128);
        assert_eq!(summary_max_tokens(8_192), 512);
        assert_eq!(summary_max_tokens(500), 128);
        assert_eq!(summary_max_tokens(128_000), SUMMARY_MAX_TOKENS);
        let long = "x".repeat(10_000);
        assert!(fit_summary_input(long.clone(), 2_048).chars().count() <= 4_200);
        assert_eq!(fit_summary_input(long.clone(), 128_000), long);
    }

    #[test]
    fn the_rule_based_summary_lists_steps_and_outcomes() {
        let m = session();
        let s = rule_based_summary(Some("Earlier: listed files."), &m[1..5]);
        assert!(s.starts_with("Earlier: listed files."));
        assert!(
            s.contains("- read_file src/f0.rs → ok: 1\tpub fn f0_1() {"),
            "{s}"
        );
        let input = render_for_summary(None, &m[1..5]);
        assert!(input.contains("[tool call] read_file {\"path\":\"src/f0.rs\"}"));
        assert!(input.contains("[read_file result, ok]"));
    }

    #[test]
    fn a_small_window_summarises_by_rules_within_a_model_summarys_size() {
        assert!(summaries_by_rules(2_048) && summaries_by_rules(1_024));
        assert!(!summaries_by_rules(3_500) && !summaries_by_rules(128_000));
        let m = session();
        let whole = rule_based_summary(Some("Earlier: listed files."), &m[1..]);
        let max = whole.chars().count() / 2;
        let s = rule_based_summary_within(Some("Earlier: listed files."), &m[1..], max);
        assert!(
            s.chars().count() <= max,
            "{} > {max}: {s}",
            s.chars().count()
        );
        // The newest steps are kept, the omitted ones counted.
        assert!(s.contains("earlier steps omitted"), "{s}");
        let newest = whole.lines().last().unwrap_or_default();
        assert!(s.ends_with(newest), "{s}");
    }
}
