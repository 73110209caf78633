//! What Keel knows about models without asking them: a small built-in table of context windows
//! and prices (USD per million tokens), matched by the longest model-name prefix, and the cost
//! of a request. Config (`[llm.prices]`) overrides the prices; the table is a convenience, not
//! a source of truth — prices change, and unknown models simply cost `0` (not reported).

use std::collections::BTreeMap;

use keel_protocol::Usage;
use serde::{Deserialize, Serialize};

/// Prices in US dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    /// Uncached prompt tokens.
    pub input: f64,
    /// Output tokens (including reasoning).
    pub output: f64,
    /// Prompt tokens read from the cache (default: the input price).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_read: Option<f64>,
    /// Prompt tokens written to the cache (default: the input price).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write: Option<f64>,
}

impl Price {
    const fn new(input: f64, output: f64, cache_read: f64, cache_write: f64) -> Self {
        Self {
            input,
            output,
            cache_read: Some(cache_read),
            cache_write: Some(cache_write),
        }
    }

    /// The cost in dollars of one request's `usage` (whose `input_tokens` include the cached
    /// ones, see [`Usage`]).
    pub fn cost(&self, usage: &Usage) -> f64 {
        let read = usage.cache_read_tokens;
        let written = usage.cache_creation_tokens;
        let fresh = usage.input_tokens.saturating_sub(read + written);
        let per_token = |tokens: u64, per_million: f64| tokens as f64 * per_million / 1e6;
        per_token(fresh, self.input)
            + per_token(read, self.cache_read.unwrap_or(self.input))
            + per_token(written, self.cache_write.unwrap_or(self.input))
            + per_token(usage.output_tokens, self.output)
    }
}

/// Built-in facts about a model family.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ModelFacts {
    /// Model names starting with this belong to the family (longest prefix wins).
    pub prefix: &'static str,
    pub context_window: u64,
    pub price: Price,
}

/// Prices as published by the providers in November 2025. Dated snapshots (`…-20250929`) and
/// OpenRouter names (`anthropic/claude-sonnet-4.5`) match by prefix.
const MODELS: &[ModelFacts] = &[
    facts("claude-opus-4-5", 200_000, Price::new(5.0, 25.0, 0.5, 6.25)),
    facts("claude-opus-4", 200_000, Price::new(15.0, 75.0, 1.5, 18.75)),
    facts("claude-sonnet-4", 200_000, Price::new(3.0, 15.0, 0.3, 3.75)),
    facts("claude-haiku-4", 200_000, Price::new(1.0, 5.0, 0.1, 1.25)),
    facts(
        "claude-3-7-sonnet",
        200_000,
        Price::new(3.0, 15.0, 0.3, 3.75),
    ),
    facts(
        "claude-3-5-sonnet",
        200_000,
        Price::new(3.0, 15.0, 0.3, 3.75),
    ),
    facts("claude-3-5-haiku", 200_000, Price::new(0.8, 4.0, 0.08, 1.0)),
    facts("gpt-5-nano", 400_000, Price::new(0.05, 0.4, 0.005, 0.05)),
    facts("gpt-5-mini", 400_000, Price::new(0.25, 2.0, 0.025, 0.25)),
    facts("gpt-5", 400_000, Price::new(1.25, 10.0, 0.125, 1.25)),
    facts("gpt-4.1-nano", 1_047_576, Price::new(0.1, 0.4, 0.025, 0.1)),
    facts("gpt-4.1-mini", 1_047_576, Price::new(0.4, 1.6, 0.1, 0.4)),
    facts("gpt-4.1", 1_047_576, Price::new(2.0, 8.0, 0.5, 2.0)),
    facts("gpt-4o-mini", 128_000, Price::new(0.15, 0.6, 0.075, 0.15)),
    facts("gpt-4o", 128_000, Price::new(2.5, 10.0, 1.25, 2.5)),
    facts("o4-mini", 200_000, Price::new(1.1, 4.4, 0.275, 1.1)),
    facts("o3", 200_000, Price::new(2.0, 8.0, 0.5, 2.0)),
    facts(
        "deepseek-chat",
        128_000,
        Price::new(0.28, 0.42, 0.028, 0.28),
    ),
    facts(
        "deepseek-reasoner",
        128_000,
        Price::new(0.28, 0.42, 0.028, 0.28),
    ),
];

const fn facts(prefix: &'static str, context_window: u64, price: Price) -> ModelFacts {
    ModelFacts {
        prefix,
        context_window,
        price,
    }
}

/// Whether `name` is the model family `prefix` names: the prefix itself, or the prefix and a
/// suffix after a separator (a dated snapshot `-20250929`, a tag `:latest`). `gpt-5o` or
/// `gpt-55` is not `gpt-5`: an unknown model gets no guessed window or price.
fn in_family(name: &str, prefix: &str) -> bool {
    name.strip_prefix(prefix)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with(['-', '.', ':', '@', '_']))
}

/// The built-in facts for `model`, by longest prefix (also after a `vendor/` prefix).
pub fn lookup(model: &str) -> Option<&'static ModelFacts> {
    let bare = model.rsplit('/').next().unwrap_or(model);
    MODELS
        .iter()
        .filter(|f| in_family(bare, f.prefix))
        .max_by_key(|f| f.prefix.len())
}

/// The price for `model`: the longest matching prefix among the config overrides and the
/// built-in table, an override winning a tie (so an override for `gpt-4o` leaves `gpt-4o-mini`
/// to its own entry unless that is overridden too).
pub fn price_for(model: &str, overrides: &BTreeMap<String, Price>) -> Option<Price> {
    let bare = model.rsplit('/').next().unwrap_or(model);
    // The user's own keys are prefixes as written; the built-in ones name families.
    let matches = |prefix: &str| in_family(model, prefix) || in_family(bare, prefix);
    let from_config = overrides
        .iter()
        .filter(|(k, _)| model.starts_with(k.as_str()) || bare.starts_with(k.as_str()))
        .map(|(k, p)| ((k.len(), 1), *p));
    let built_in = MODELS
        .iter()
        .filter(|f| matches(f.prefix))
        .map(|f| ((f.prefix.len(), 0), f.price));
    from_config
        .chain(built_in)
        .max_by_key(|(rank, _)| *rank)
        .map(|(_, p)| p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn longest_prefix_wins_and_vendor_prefixes_are_ignored() {
        assert_eq!(
            lookup("gpt-4o-mini-2024-07-18").map(|f| f.prefix),
            Some("gpt-4o-mini")
        );
        assert_eq!(
            lookup("gpt-4o-2024-08-06").map(|f| f.prefix),
            Some("gpt-4o")
        );
        assert_eq!(
            lookup("claude-opus-4-5-20251101").map(|f| f.prefix),
            Some("claude-opus-4-5")
        );
        assert_eq!(
            lookup("anthropic/claude-sonnet-4.5").map(|f| f.prefix),
            Some("claude-sonnet-4")
        );
        assert!(lookup("llama3.2:3b").is_none());
        // A name that only starts like a known one is another model: nothing is guessed.
        assert!(lookup("gpt-5o").is_none());
        assert!(lookup("gpt-55").is_none());
        assert!(lookup("deepseek-chatter").is_none());
        assert_eq!(price_for("gpt-5o", &BTreeMap::new()), None);
        assert_eq!(lookup("gpt-5:latest").map(|f| f.prefix), Some("gpt-5"));
    }

    #[test]
    fn cost_splits_cached_and_fresh_input() {
        let p = Price::new(3.0, 15.0, 0.3, 3.75);
        let u = Usage {
            input_tokens: 1_000_000,
            output_tokens: 100_000,
            cache_read_tokens: 600_000,
            cache_creation_tokens: 100_000,
            ..Usage::default()
        };
        // 300k fresh × 3 + 600k × 0.3 + 100k × 3.75 + 100k × 15 (per million)
        let expected = 0.9 + 0.18 + 0.375 + 1.5;
        assert!((p.cost(&u) - expected).abs() < 1e-9, "{}", p.cost(&u));
    }

    #[test]
    fn overrides_beat_the_table() {
        let mut o = BTreeMap::new();
        o.insert(
            "gpt-4o".to_string(),
            Price {
                input: 1.0,
                output: 2.0,
                cache_read: None,
                cache_write: None,
            },
        );
        assert_eq!(
            price_for("gpt-4o-2024-08-06", &o).map(|p| p.input),
            Some(1.0)
        );
        assert_eq!(
            price_for("gpt-4o-mini", &o).map(|p| p.input),
            Some(0.15),
            "a longer built-in prefix keeps its own price"
        );
        assert_eq!(price_for("deepseek-chat", &o).map(|p| p.output), Some(0.42));
        assert_eq!(price_for("my-local-model", &o), None);
    }
}
