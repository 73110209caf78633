//! Keel's tools: the [`Tool`] trait, the [`ToolRegistry`], workspace path confinement and the
//! built-in tools the model calls.
//!
//! Every tool takes JSON arguments (validated against a schema derived from its Rust argument
//! type) and a [`ToolContext`], and returns either output for the model or a [`ToolError`]:
//! [`ToolError::Model`] is a message the model should read and act on (the loop goes on),
//! [`ToolError::Failed`] is the same for a call that ran and failed (failing tests) and keeps
//! its typed details, [`ToolError::Fatal`] stops the turn. Every file a tool touches is reached
//! through [`Workspace::locate`]: resolved beneath the workspace's open directory handle
//! ([`beneath`]), which refuses anything outside the workspace and leaves no gap between
//! checking a path and opening it.
//!
//! [`shell`] holds the command-safety analyser (a real bash grammar), `run_command`,
//! `run_tests` and auto-lint after edits; [`sandbox`] confines commands with Landlock.
//!
//! This crate does not run the agent loop, talk to models or decide phase policy; it only
//! describes and executes tools (callers pick the sandbox policy on the [`ToolContext`]).

pub use keel_fs::{beneath, project, stores};

pub mod build_dirs;
pub mod builtin;
pub mod catalog;
pub mod confined_git;
mod context;
pub mod edit;
#[cfg(any(test, feature = "test-fixtures"))]
pub mod fixtures;
pub mod fs;
pub mod git_config;
pub mod late;
pub mod patch;
pub mod recorded;
mod registry;
pub mod safe_git;
pub mod sandbox;
mod schema;
pub mod shell;
pub mod text;
mod tool;
pub mod trust;
mod workspace;

pub use catalog::{Repair, Resolved, ToolState, resolve_call};
pub use context::{FileStamp, ReadTracker, ToolContext};
pub use late::{LateTool, LateTools};
pub use registry::{PostWriteHook, ToolRegistry};
pub use schema::schema_for;
pub use tool::{PlannedCommand, Tool, ToolEffect, ToolError, ToolOutput, TypedTool, parse_args};
pub use workspace::{PathError, Workspace};
