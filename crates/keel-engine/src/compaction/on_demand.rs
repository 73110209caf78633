//! Compaction on demand (the `compact` operation): between turns, the session's working
//! context is compacted now, through every stage that applies, whatever the threshold. The
//! stored transcript keeps everything, so the compacted context is stored as a checkpoint
//! (a stored result under a `compact-…` handle, named in the `compaction` event); later turns
//! start from it plus the messages stored after it ([`working_context`]).

use keel_protocol::{Event, EventKind, Message, SessionStatus};
use serde::{Deserialize, Serialize};

use super::Carry;
use crate::ending::Interrupt;
use crate::engine::{Engine, RunOptions};
use crate::run::Run;
use crate::session::{budget, give_back, take_lease, tool_context};
use crate::{Emitter, EngineError};
use keel_protocol::files_written;

/// Handles of stored compaction checkpoints start so (they are not `read_result` handles).
pub(crate) const CHECKPOINT_PREFIX: &str = "compact-";

/// A compacted working context.
#[derive(Debug, Serialize, Deserialize)]
struct Checkpoint {
    /// Stored messages it stands for (the first `covered` of the transcript).
    covered: usize,
    messages: Vec<Message>,
    #[serde(flatten)]
    carry: Carry,
}

/// What an on-demand compaction did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompactReport {
    pub tokens_before: u64,
    pub tokens_after: u64,
    /// The stages that changed something; empty when there was nothing to compact.
    pub stages: Vec<String>,
    /// The stored checkpoint's handle (`None` when nothing changed).
    pub checkpoint: Option<String>,
}

/// The working context of session `id` for its next turn: the latest checkpoint of an
/// on-demand compaction followed by the messages stored after it, else every stored
/// message; and what compaction carries on. A checkpoint that cannot be read is ignored (the whole
/// transcript is always valid).
pub(crate) async fn working_context(
    engine: &Engine,
    id: &str,
    events: &[Event],
    stored: Vec<Message>,
) -> Result<(Vec<Message>, Carry), EngineError> {
    let Some(handle) = events.iter().rev().find_map(|e| match &e.kind {
        EventKind::Compaction {
            checkpoint: Some(h),
            ..
        } => Some(h.clone()),
        _ => None,
    }) else {
        return Ok((stored, Carry::default()));
    };
    let results = engine.store.stored_results(id).await?;
    let checkpoint = results
        .into_iter()
        .find(|(h, _)| *h == handle)
        .and_then(|(_, text)| serde_json::from_str::<Checkpoint>(&text).ok())
        .filter(|c| c.covered <= stored.len() && !c.messages.is_empty());
    Ok(match checkpoint {
        Some(mut c) => {
            c.messages.extend(stored.into_iter().skip(c.covered));
            (c.messages, c.carry)
        }
        None => (stored, Carry::default()),
    })
}

/// Compacts the stored session `session_ref` now (see the module docs). Refused while the
/// session runs; an idle session with no conversation yet has nothing to compact.
pub(crate) async fn compact_session(
    engine: &Engine,
    session_ref: &str,
    options: RunOptions,
) -> Result<CompactReport, EngineError> {
    let record = engine.store.get_session(session_ref).await?;
    crate::session::ensure_not_running(&record)?;
    let lease = take_lease(engine, &record.id, &options).await?;
    let outcome = compact_held(engine, &record.id, &options).await;
    give_back(lease).await;
    outcome
}

async fn compact_held(
    engine: &Engine,
    id: &str,
    options: &RunOptions,
) -> Result<CompactReport, EngineError> {
    let record = engine.store.get_session(id).await?;
    let stored = engine.store.messages(id).await?;
    let covered = stored.len();
    let events = engine.store.events(id, 0).await?;
    let (messages, carry) = working_context(engine, id, &events, stored).await?;
    let emitter = Emitter::new(id.to_string(), engine.store.clone(), options.sinks.clone())
        .in_run(options.run_id.clone(), options.parent_run_id.clone());
    // `active` MCP servers' tools are in the catalog: wait (bounded) until they settled, so
    // the first-turn catalog never depends on timing.
    engine.tools.settle_listed().await;
    let mut run = Run::new(
        engine,
        &emitter,
        tool_context(engine, options),
        budget(engine),
        options,
    );
    run.continue_from(
        messages,
        record.usage,
        record.iterations,
        files_written(&events),
    );
    run.carry_on(&carry);
    let before = run.context_tokens();
    let nothing = CompactReport {
        tokens_before: before,
        tokens_after: before,
        stages: Vec::new(),
        checkpoint: None,
    };
    if record.status == SessionStatus::Idle || run.messages().len() < 2 {
        return Ok(nothing);
    }
    let done = match run.compact(true).await {
        Ok(Some(done)) => done,
        Ok(None) => return Ok(nothing),
        Err(Interrupt::Engine(e)) => return Err(e),
        Err(Interrupt::Cancelled) => {
            return Err(EngineError::Setup("the compaction was cancelled".into()));
        }
        Err(Interrupt::Llm(e)) => {
            return Err(EngineError::Provider(format!(
                "the compaction's summary request failed: {e}"
            )));
        }
    };
    let handle = format!("{CHECKPOINT_PREFIX}{}", crate::time::new_run_id());
    let checkpoint = Checkpoint {
        covered,
        messages: run.messages().to_vec(),
        carry: run.carried(),
    };
    let text = serde_json::to_string(&checkpoint)
        .map_err(|e| EngineError::Internal(format!("cannot encode the checkpoint: {e}")))?;
    engine.store.save_result(id, &handle, &text).await?;
    let report = CompactReport {
        tokens_before: done.tokens_before,
        tokens_after: done.tokens_after,
        stages: done.stages.clone(),
        checkpoint: Some(handle.clone()),
    };
    emitter.emit(done.event(Some(handle))).await?;
    // A summary request's usage counts for the session.
    engine
        .store
        .update_session(id, record.status, run.iterations(), &run.usage())
        .await?;
    Ok(report)
}
