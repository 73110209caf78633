//! `keel memory`: the user memory and the promoted lessons, stored in the session database
//! and injected into new sessions as marked data. Every entry can be listed, searched,
//! edited and removed. The data functions return values so other front ends (`/memory` in
//! chat) can render them their own way.

use std::io::Write;

use clap::{Args, Subcommand};
use keel_config::Layer;
use keel_store::{MemoryEntry, MemoryKind, SqliteStore};

use crate::render::when;
use crate::{exit, setup};

#[derive(Debug, Args)]
pub struct MemoryArgs {
    #[command(subcommand)]
    pub command: MemoryCommand,
}

#[derive(Debug, Subcommand)]
pub enum MemoryCommand {
    /// Save a fact or preference (injected into every new session as data).
    Add {
        #[arg(required = true, value_name = "TEXT")]
        text: Vec<String>,
    },
    /// List the saved facts and lessons.
    List {
        /// Only this layer.
        #[arg(long, value_enum)]
        kind: Option<KindArg>,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Entries whose text or provenance contains QUERY (case-insensitive).
    Search {
        #[arg(value_name = "QUERY")]
        query: String,
        #[arg(long)]
        json: bool,
    },
    /// Replace the text of an entry (ID as `keel memory list` shows it: `m3` or `3`).
    Edit {
        id: String,
        #[arg(required = true, value_name = "TEXT")]
        text: Vec<String>,
    },
    /// Remove one entry.
    Rm { id: String },
    /// Remove every entry (or only one layer).
    Clear {
        #[arg(long, value_enum)]
        kind: Option<KindArg>,
    },
    /// Promote a lesson into the overlay, with the session that taught it as provenance.
    Promote {
        #[arg(required = true, value_name = "TEXT")]
        text: Vec<String>,
        /// The session that taught it (id or unique prefix; default: the latest session).
        #[arg(long, value_name = "ID")]
        session: Option<String>,
    },
    /// Check the memory: size of what new sessions receive, duplicates, entries that read
    /// like commands.
    Doctor,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum KindArg {
    Fact,
    Lesson,
}

impl From<KindArg> for MemoryKind {
    fn from(k: KindArg) -> Self {
        match k {
            KindArg::Fact => MemoryKind::Fact,
            KindArg::Lesson => MemoryKind::Lesson,
        }
    }
}

/// Parses `m3` or `3`.
pub fn parse_id(id: &str) -> anyhow::Result<i64> {
    id.trim()
        .trim_start_matches(['m', 'M'])
        .parse::<i64>()
        .map_err(|_| {
            setup::UsageError(format!(
                "`{id}` is not a memory id; `keel memory list` shows them (like m3)"
            ))
            .into()
        })
}

fn join(words: &[String]) -> String {
    words.join(" ")
}

/// One finding of `keel memory doctor`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Finding {
    pub id: Option<i64>,
    pub message: String,
}

/// What `keel memory doctor` reports: the tokens new sessions receive, and findings.
pub fn doctor(entries: &[MemoryEntry]) -> (u64, Vec<Finding>) {
    let blocks: String = [
        keel_engine::memory::user_memory_block(entries),
        keel_engine::memory::lessons_block(entries),
    ]
    .into_iter()
    .flatten()
    .collect::<Vec<_>>()
    .join("\n");
    let tokens = keel_llm::tokens::estimate_text(&blocks);
    let mut findings = Vec::new();
    let mut seen = std::collections::HashMap::new();
    for e in entries {
        let key = e.text.to_lowercase();
        if let Some(first) = seen.insert(key, e.id) {
            findings.push(Finding {
                id: Some(e.id),
                message: format!(
                    "duplicates m{first}; remove one with `keel memory rm m{}`",
                    e.id
                ),
            });
        }
        let lower = e.text.to_lowercase();
        if [
            "ignore ",
            "disregard ",
            "you must",
            "system prompt",
            "override",
        ]
        .iter()
        .any(|w| lower.contains(w))
        {
            findings.push(Finding {
                id: Some(e.id),
                message: "reads like a command; memory is given to the model as data, so state it as a fact or preference (\"prefers …\"), or put rules in AGENTS.md".into(),
            });
        }
    }
    if tokens > 1_500 {
        findings.push(Finding {
            id: None,
            message: format!(
                "new sessions receive about {tokens} tokens of memory; keep it short (remove stale entries)"
            ),
        });
    }
    (tokens, findings)
}

pub fn execute(args: MemoryArgs) -> anyhow::Result<u8> {
    let cwd = setup::workspace_dir(None)?;
    let config = setup::load_config(&cwd, Layer::from_overrides(&[]))?;
    let store = setup::open_store(&config)?;
    run(&store, args.command)
}

fn run(store: &SqliteStore, command: MemoryCommand) -> anyhow::Result<u8> {
    let mut out = crate::out::stdout();
    let err = setup::store_usage_error;
    match command {
        MemoryCommand::Add { text } => {
            let e = store
                .db()
                .add_memory(MemoryKind::Fact, &join(&text), "user")
                .map_err(err)?;
            writeln!(out, "Saved m{}: {}", e.id, e.text)?;
        }
        MemoryCommand::List { kind, json } => {
            let entries = store.db().list_memory(kind.map(Into::into))?;
            render(&mut out, &entries, json)?;
        }
        MemoryCommand::Search { query, json } => {
            render(&mut out, &store.db().search_memory(&query)?, json)?;
        }
        MemoryCommand::Edit { id, text } => {
            let e = store
                .db()
                .edit_memory(parse_id(&id)?, &join(&text))
                .map_err(err)?;
            writeln!(out, "Updated m{}: {}", e.id, e.text)?;
        }
        MemoryCommand::Rm { id } => {
            let e = store.db().remove_memory(parse_id(&id)?).map_err(err)?;
            writeln!(out, "Removed m{}: {}", e.id, e.text)?;
        }
        MemoryCommand::Clear { kind } => {
            let n = store.db().clear_memory(kind.map(Into::into))?;
            writeln!(
                out,
                "Removed {n} memory entr{}.",
                if n == 1 { "y" } else { "ies" }
            )?;
        }
        MemoryCommand::Promote { text, session } => {
            let record = match session {
                Some(s) => store.db().get_session(&s).map_err(err)?,
                None => store
                    .db()
                    .list_sessions(1)?
                    .into_iter()
                    .next()
                    .ok_or_else(|| {
                        setup::UsageError(
                        "no session to credit the lesson to; run one first or pass --session ID"
                            .into(),
                    )
                    })?,
            };
            let source = format!("session {}", record.id);
            let e = store
                .db()
                .add_memory(MemoryKind::Lesson, &join(&text), &source)
                .map_err(err)?;
            writeln!(out, "Promoted m{} (from {}): {}", e.id, e.source, e.text)?;
        }
        MemoryCommand::Doctor => {
            let entries = store.db().memory_entries()?;
            let (tokens, findings) = doctor(&entries);
            writeln!(
                out,
                "{}; new sessions receive about {tokens} tokens of memory (in the first message, not the cached head).",
                keel_tools::text::count(entries.len(), "entry", "entries")
            )?;
            for f in &findings {
                match f.id {
                    Some(id) => writeln!(out, "  m{id}: {}", f.message)?,
                    None => writeln!(out, "  {}", f.message)?,
                }
            }
            if findings.is_empty() {
                writeln!(out, "No problems found.")?;
            }
        }
    }
    Ok(exit::COMPLETED)
}

/// Prints entries as a table or JSON.
pub fn render(out: &mut impl Write, entries: &[MemoryEntry], json: bool) -> anyhow::Result<()> {
    if json {
        writeln!(out, "{}", crate::out::json_pretty(entries)?)?;
        return Ok(());
    }
    if entries.is_empty() {
        writeln!(out, "No memory entries. Add one with: keel memory add TEXT")?;
        return Ok(());
    }
    for e in entries {
        writeln!(
            out,
            "m{:<4} {:<6} {}  {}  [{}]",
            e.id,
            e.kind.as_str(),
            when(e.updated_at.max(0) as u64),
            e.text,
            e.source
        )?;
    }
    Ok(())
}
