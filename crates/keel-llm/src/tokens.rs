//! Token estimation for when a provider does not report usage, and [`TokenScale`]: the one
//! estimate of a request's size that the engine's compaction and the client's check before
//! sending share.

use keel_protocol::{ContentBlock, Message, ToolSpec};

/// Estimated tokens of a text: about four bytes per token for English and code, which is what
/// the common BPE tokenizers average on source files. Errs high on short strings.
pub fn estimate_text(text: &str) -> u64 {
    (text.len() as u64).div_ceil(4)
}

/// Estimated tokens of one message, including a small per-block framing overhead.
pub fn estimate_message(message: &Message) -> u64 {
    let mut total = 4;
    for block in &message.content {
        total += 3 + match block {
            ContentBlock::Text { text } => estimate_text(text),
            ContentBlock::Reasoning { text, .. } => estimate_text(text),
            ContentBlock::RedactedReasoning { data } => estimate_text(data) * 3 / 4,
            ContentBlock::ToolUse { name, input, .. } => {
                estimate_text(name) + estimate_text(&input.to_string())
            }
            ContentBlock::ToolResult { content, .. } => estimate_text(content),
        };
    }
    total
}

/// Estimated tokens of a whole request: system prompt, tool schemas and messages.
pub fn estimate_request(system: &str, tools: &[ToolSpec], messages: &[Message]) -> u64 {
    let head = estimate_text(system)
        + tools
            .iter()
            .map(|t| {
                estimate_text(&t.name)
                    + estimate_text(&t.description)
                    + estimate_text(&t.input_schema.to_string())
            })
            .sum::<u64>();
    head + messages.iter().map(estimate_message).sum::<u64>()
}

/// How a model's server counts a request beside Keel's byte estimate: the scale learned from
/// the prompt sizes it reported and the tokens its chat template adds to every prompt.
///
/// It is the one estimate of a request's size: the OpenAI-compatible client fits `max_tokens`
/// and refuses a request that cannot fit with it, and the engine compacts with the same figure
/// ([`crate::Provider::token_scale`]). Two estimates that disagree let the engine judge a
/// context small enough that the client then refused to send (SmolLM2 runs ended
/// `context_overflow` with nothing left to compact: 1,457 tokens by the engine's figure, about
/// 1,815 by the client's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenScale {
    /// Server tokens per estimated token, in thousandths (1000: the estimate as it is).
    pub per_mille: u64,
    /// Tokens the chat template adds to every prompt, whatever it holds.
    pub allowance: u64,
}

impl TokenScale {
    /// The bare estimate: no scale, no template allowance.
    pub const PLAIN: Self = Self {
        per_mille: 1000,
        allowance: 0,
    };

    /// Server tokens of a request whose bare estimate is `estimated`.
    pub fn scale(&self, estimated: u64) -> u64 {
        (estimated + self.allowance).saturating_mul(self.per_mille) / 1000
    }

    /// Server tokens of a whole request: system prompt, tool schemas and messages.
    pub fn request(&self, system: &str, tools: &[ToolSpec], messages: &[Message]) -> u64 {
        self.scale(estimate_request(system, tools, messages))
    }

    /// `tokens` with the tenth kept for safety on top (what the estimate may miss): the size
    /// the client fits the reply's `max_tokens` beside.
    pub fn with_margin(tokens: u64) -> u64 {
        tokens + tokens / 10
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scale_counts_the_template_and_the_tokenizer() {
        let msgs = [Message::user_text("x".repeat(4_000))];
        let plain = TokenScale::PLAIN.request("", &[], &msgs);
        assert_eq!(plain, estimate_request("", &[], &msgs));
        let server = TokenScale {
            per_mille: 1_500,
            allowance: 128,
        };
        assert_eq!(server.request("", &[], &msgs), (plain + 128) * 3 / 2);
        assert_eq!(TokenScale::with_margin(1_000), 1_100);
    }

    #[test]
    fn estimates_scale_with_length() {
        assert_eq!(estimate_text(""), 0);
        assert_eq!(estimate_text("abcd"), 1);
        assert_eq!(estimate_text("abcde"), 2);
        let small = estimate_message(&Message::user_text("hi"));
        let big = estimate_message(&Message::user_text("x".repeat(4000)));
        assert!(big > small + 900);
    }
}
