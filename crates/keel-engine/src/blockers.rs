//! Blockers (K1.4): questions for a human that pause a run.
//!
//! A blocker is raised by the model (the `ask_user` tool), by a pattern (a command failing
//! for missing credentials, a final answer that asks for clarification instead of doing the
//! task), by the fix tracker (the same failure again and again) or by the iteration budget
//! running out while the run was still progressing. The run then ends `blocked` (exit code 3),
//! the blocker is stored with its question, and `keel blocker answer` + `keel run --resume`
//! deliver the answer into the session's next run as Q&A.
//!
//! This module decides what is a blocker and how answers read to the model; the loop raises
//! them and the store keeps them.

use std::sync::{Arc, LazyLock};

use futures::future::BoxFuture;
use keel_protocol::ToolDetails;
use keel_store::BlockerRecord;
use regex::Regex;

/// Who raised a blocker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockerSource {
    /// The model called `ask_user`.
    Model,
    /// Output or an answer matched a known pattern (missing credentials, ambiguity).
    Pattern,
    /// The fix tracker saw the same failure too often.
    FixTracker,
    /// The iteration budget ran out while the run was still making progress.
    Budget,
    /// A hook stopped the run ([`crate::hooks::HookAction::Stop`]).
    Hook,
}

impl BlockerSource {
    /// The name stored and shown (`model`, `pattern`, `fix_tracker`, `budget`, `hook`).
    pub fn as_str(self) -> &'static str {
        match self {
            BlockerSource::Model => "model",
            BlockerSource::Pattern => "pattern",
            BlockerSource::FixTracker => "fix_tracker",
            BlockerSource::Budget => "budget",
            BlockerSource::Hook => "hook",
        }
    }
}

/// A blocker about to be raised.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockerDraft {
    pub question: String,
    pub source: BlockerSource,
    pub evidence: Vec<String>,
}

/// A raised blocker, as reported in a [`crate::RunOutcome`].
#[derive(Debug, Clone, PartialEq)]
pub struct BlockerInfo {
    /// The id to answer it with (`keel blocker answer ID "…"`).
    pub id: String,
    pub question: String,
    /// `model`, `pattern`, `fix_tracker` or `budget`.
    pub source: String,
    pub evidence: Vec<String>,
}

/// Answers the model's `ask_user` questions during an interactive run (a terminal UI, a web
/// client). Without one, a question becomes a blocker and the run ends `blocked`.
pub trait UserPrompt: Send + Sync {
    /// Asks the user; `None` when they decline or are not there, which raises a blocker.
    fn ask<'a>(
        &'a self,
        question: &'a str,
        context: Option<&'a str>,
    ) -> BoxFuture<'a, Option<String>>;
}

/// A shared [`UserPrompt`].
pub type SharedUserPrompt = Arc<dyn UserPrompt>;

/// A new blocker id: `blk-` and 8 hex digits (any unique prefix names it).
pub fn new_blocker_id() -> String {
    let random = uuid::Uuid::now_v7().as_u128() as u32;
    format!("blk-{random:08x}")
}

/// The question a tool asked the engine to put to the user (its typed blocker request; the
/// `ask_user` tool sets it).
pub fn requested_question(details: &ToolDetails) -> Option<(String, Option<String>)> {
    let blocker = details.blocker.as_ref()?;
    let question = blocker.question.trim();
    if question.is_empty() {
        return None;
    }
    let context = blocker
        .context
        .as_deref()
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .map(str::to_string);
    Some((question.to_string(), context))
}

static CREDENTIALS: LazyLock<Vec<Regex>> = LazyLock::new(|| {
    [
        r"(?i)\b(api[_ -]?key|access[_ -]?token|auth[_ -]?token|secret[_ -]?key|credentials?)\b[^\n]{0,40}\b(missing|not set|not found|not provided|is required|are required|invalid|expired)\b",
        r"(?i)\b(missing|no|invalid|expired)\s+(api[_ -]?key|credentials|access[_ -]?token|auth[_ -]?token)\b",
        r"(?i)permission denied \(publickey",
        r"(?i)could not read username for",
        r"(?i)\bauthentication (failed|required)\b",
        r"(?i)\b(environment )?variable `?[A-Z0-9_]*(KEY|TOKEN|SECRET|PASSWORD)`? (is )?not set\b",
        r"\b[A-Z][A-Z0-9_]*_(?:KEY|TOKEN|SECRET|PASSWORD)\b[^\n]{0,60}(?i:\b(?:not set|missing|is required|not found|not defined|undefined)\b)",
    ]
    .iter()
    .filter_map(|p| Regex::new(p).ok())
    .collect()
});

static AMBIGUITY: LazyLock<Vec<Regex>> = LazyLock::new(|| {
    [
        r"(?i)\b(need|needs|require|requires) (some |more |further )?clarification\b",
        r"(?i)\b(could|can|would) you (please )?(clarify|confirm which|tell me which)\b",
        r"(?i)\bplease clarify\b",
        r"(?i)\b(cannot|can't|can not|unable to) proceed without\b",
        r"(?i)\bthe (task|requirement|request)s? (is|are) (ambiguous|unclear)\b",
        r"(?i)\bbefore i (can )?(proceed|continue), (i need|please)\b",
    ]
    .iter()
    .filter_map(|p| Regex::new(p).ok())
    .collect()
});

/// A blocker when a command's failure output says credentials are missing: the model cannot
/// invent an API key, so asking is the only way forward.
pub fn credentials_blocker(tool: &str, output: &str) -> Option<BlockerDraft> {
    let line = output
        .lines()
        .map(str::trim)
        .find(|line| line.len() < 2_000 && CREDENTIALS.iter().any(|re| re.is_match(line)))?;
    let line: String = line.chars().take(300).collect();
    Some(BlockerDraft {
        question: format!(
            "`{tool}` failed for missing or invalid credentials: \"{line}\". Provide them (for \
             example by setting the environment variable), or say how to proceed without them."
        ),
        source: BlockerSource::Pattern,
        evidence: vec![format!("{tool}: {line}")],
    })
}

/// A blocker when the model's final answer asks for clarification instead of finishing: the
/// question goes to a human rather than the run ending "completed".
pub fn ambiguity_blocker(final_text: &str) -> Option<BlockerDraft> {
    let text = final_text.trim();
    let hit = AMBIGUITY.iter().find_map(|re| re.find(text))?;
    Some(BlockerDraft {
        question: text.chars().take(2_000).collect(),
        source: BlockerSource::Pattern,
        evidence: vec![format!(
            "the final answer asks for clarification (\"{}\")",
            hit.as_str()
        )],
    })
}

/// The user-message text that delivers answered blockers to the model.
pub fn answers_text(answered: &[BlockerRecord]) -> Option<String> {
    let answered: Vec<&BlockerRecord> = answered
        .iter()
        .filter(|b| b.answer.as_deref().is_some_and(|a| !a.trim().is_empty()))
        .collect();
    if answered.is_empty() {
        return None;
    }
    let mut out = String::from("Answers to your earlier questions:\n");
    for b in answered {
        out.push_str(&format!(
            "\nQ ({}): {}\nA: {}\n",
            b.id,
            b.question.trim(),
            b.answer.as_deref().unwrap_or("").trim()
        ));
    }
    Some(out)
}
