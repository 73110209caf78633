//! What Keel tells the model about a project, and where each piece goes.
//!
//! - The byte-stable head ([`prompt`]): Keel's base layer, the repository's root instruction
//!   files (`AGENTS.md`, `CLAUDE.md`, `.keel/project.md`), its `.keel/rules/*.md` without
//!   globs, and its constitution's stated parts — nothing volatile, so providers cache it.
//! - The tail: the task layer and environment ([`prompt`]), the user's own `AGENTS.md`,
//!   glob and nested rules injected once beside the result that touched a file ([`rules`]),
//!   skills ([`skills`]), saved memory and promoted lessons ([`memory`]).
//! - The enforceable law of a repository ([`constitution`]): protected paths and forbidden
//!   commands, checked before a tool runs.
//! - [`head`]: the compact head (a short base prompt and the few tools a small model needs)
//!   for a window too small for the full one.
//! - [`context`]: every layer with its source, size and placement, for `keel context` and
//!   `/context`, computed by the same functions the engine uses.
//!
//! Every file a repository ships is read through `keel_tools::project::ProjectDir` (beneath
//! the workspace, regular files only, bounded). This crate holds no loop state: the engine's
//! guardrails (`keel-engine/src/guardrails/`) carry each run's share of it.

pub mod constitution;
pub mod context;
pub mod frontmatter;
pub mod head;
pub mod memory;
pub mod prompt;
pub mod rules;
pub mod skills;
