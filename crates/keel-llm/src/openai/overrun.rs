//! Replies longer than the output limit Keel asked for. Some servers ignore `max_tokens` —
//! llama-cpp-python 0.3.36's `chatml-function-calling` handler does on tool calls, and a weak
//! model then fills a call's arguments until the server's window is full (SmolLM2: 1,328
//! tokens for 923 asked, 76 s, and the next request no longer fit: `context_overflow`).
//!
//! A streamed reply is read only until its output passes the limit by half (the output is
//! estimated from its bytes, scaled by what this server counted before); a whole reply is judged
//! by the server's own `completion_tokens`. Either way the reply ends as cut off at the output
//! limit ([`crate::StopReason::MaxTokens`]): an incomplete tool call in it is not run, and the
//! model is told to send it again, shorter.

/// Estimated output tokens tolerated past the limit before a stream is cut: the estimate is
/// about four bytes a token and a tokenizer may count differently.
const SLACK_TOKENS: u64 = 32;

/// Watches one reply's output against the limit of its request.
#[derive(Debug, Clone)]
pub(crate) struct OutputCap {
    /// The output limit the request asked for (none: nothing to enforce).
    limit: Option<u32>,
    /// Server tokens per estimated token, in thousandths.
    per_mille: u64,
    over: bool,
}

impl OutputCap {
    pub(crate) fn new(limit: Option<u32>, per_mille: u64) -> Self {
        Self {
            limit,
            per_mille: per_mille.max(1),
            over: false,
        }
    }

    /// Whether the reply ran past its limit.
    pub(crate) fn over(&self) -> bool {
        self.over
    }

    /// After `bytes` of streamed output in all: the notice to give, the first time the output
    /// passes the cap — the caller then stops reading.
    pub(crate) fn streamed(&mut self, bytes: usize) -> Option<String> {
        let limit = u64::from(self.limit?);
        if self.over {
            return None;
        }
        let estimated = (bytes as u64).div_ceil(4).saturating_mul(self.per_mille) / 1000;
        if estimated <= limit + limit / 2 + SLACK_TOKENS {
            return None;
        }
        self.over = true;
        Some(format!(
            "the server ignored the output limit ({limit} tokens asked, about {estimated} streamed): Keel stopped reading and treats the reply as cut off"
        ))
    }

    /// The server's own count of the reply's output tokens: the notice to give when it is
    /// past the limit.
    pub(crate) fn counted(&mut self, output_tokens: u64) -> Option<String> {
        let limit = u64::from(self.limit?);
        if self.over || output_tokens <= limit {
            return None;
        }
        self.over = true;
        Some(format!(
            "the server ignored the output limit: {output_tokens} tokens for the {limit} asked; Keel treats the reply as cut off (an incomplete tool call in it is not run)"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_is_cut_half_past_its_limit_and_said_once() {
        let mut cap = OutputCap::new(Some(100), 1000);
        assert!(cap.streamed(4 * 150).is_none(), "within the slack");
        let notice = cap.streamed(4 * 200).expect("past the cap");
        assert!(notice.contains("100 tokens asked"), "{notice}");
        assert!(cap.over());
        assert!(cap.streamed(4 * 400).is_none(), "said once");
    }

    #[test]
    fn a_finer_tokenizer_cuts_earlier_and_no_limit_is_never_cut() {
        // This server counts twice the estimate: 100 estimated tokens are 200 of its own.
        let mut fine = OutputCap::new(Some(100), 2000);
        assert!(fine.streamed(4 * 100).is_some());
        let mut open = OutputCap::new(None, 1000);
        assert!(open.streamed(10_000_000).is_none());
        assert!(open.counted(1_000_000).is_none());
        assert!(!open.over());
    }

    #[test]
    fn a_whole_reply_is_judged_by_the_servers_count() {
        let mut cap = OutputCap::new(Some(923), 1000);
        assert!(cap.counted(923).is_none(), "exactly the limit is honoured");
        let notice = cap.counted(1328).expect("past the limit");
        assert!(notice.contains("1328 tokens for the 923 asked"), "{notice}");
        assert!(cap.over());
    }
}
