//! `keel prd add|show|list|edit`: product requirements documents, stored in the database with
//! every version kept.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::{Args, Subcommand};
use keel_config::Layer;
use keel_store::SqliteStore;

use crate::args::CommonArgs;
use crate::render::when;
use crate::{exit, setup};

#[derive(Debug, Args)]
pub struct PrdArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    #[command(subcommand)]
    pub command: PrdCommand,
}

#[derive(Debug, Subcommand)]
pub enum PrdCommand {
    /// Store a PRD from FILE (`-`: standard input). Its title is its first heading.
    Add {
        /// The PRD file, or `-` for standard input.
        file: PathBuf,
        /// Title (default: the first Markdown heading or line).
        #[arg(long)]
        title: Option<String>,
    },
    /// Print a PRD (default: the latest one) at its latest version or at --version.
    #[command(disable_version_flag = true)]
    Show {
        id: Option<u32>,
        #[arg(long, value_name = "N")]
        version: Option<u32>,
        #[arg(long)]
        json: bool,
    },
    /// List the workspace's PRDs.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Store a new version of a PRD: from FILE (`-`: standard input), or edited in $EDITOR.
    Edit { id: u32, file: Option<PathBuf> },
}

/// The workspace (canonical string) and the store.
pub fn open(common: &CommonArgs) -> anyhow::Result<(PathBuf, String, std::sync::Arc<SqliteStore>)> {
    let root = setup::workspace_dir(common.workspace.as_deref())?;
    let config = setup::load_config(&root, Layer::from_overrides(&[]))?;
    let store = setup::open_store(&config)?;
    let ws = root.display().to_string();
    Ok((root, ws, store))
}

fn read_input(root: &Path, file: &Path) -> anyhow::Result<String> {
    let text = if file == Path::new("-") {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .context("cannot read the PRD from standard input")?;
        s
    } else {
        // In the workspace a project file (a link out, a FIFO or a device refused), elsewhere
        // the user's own; regular files only, at most 1 MB.
        let cannot = |why: String| {
            setup::UsageError(format!("cannot read the PRD {}: {why}", file.display()))
        };
        keel_tools::project::read_named_file(root, file, keel_tools::project::DEFINITION_LIMIT)
            .map_err(|e| cannot(format!("it {}", e.problem)))?
            .ok_or_else(|| cannot("it does not exist".into()))?
    };
    if text.trim().is_empty() {
        return Err(setup::UsageError("the PRD is empty".into()).into());
    }
    Ok(text)
}

/// The first Markdown heading (or first non-empty line), cut to 100 characters.
pub fn title_of(text: &str) -> String {
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("Untitled PRD");
    line.trim_start_matches('#')
        .trim()
        .chars()
        .take(100)
        .collect()
}

pub fn execute(args: PrdArgs) -> anyhow::Result<u8> {
    let (root, ws, store) = open(&args.common)?;
    let mut out = crate::out::stdout();
    match args.command {
        PrdCommand::Add { file, title } => {
            let body = read_input(&root, &file)?;
            let title = title.unwrap_or_else(|| title_of(&body));
            let prd = store.db().add_prd(&ws, &title, &body)?;
            writeln!(
                out,
                "Added PRD #{} \"{}\". Next: keel task generate --prd {}",
                prd.id, prd.title, prd.id
            )?;
        }
        PrdCommand::Show { id, version, json } => {
            let prd = store
                .db()
                .prd(&ws, id, version)
                .map_err(setup::store_usage_error)?;
            if json {
                writeln!(out, "{}", crate::out::json_pretty(&prd)?)?;
            } else {
                writeln!(
                    out,
                    "PRD #{} \"{}\", version {} ({} UTC)\n\n{}",
                    prd.id,
                    prd.title,
                    prd.version,
                    when(prd.updated_at),
                    prd.body.trim_end()
                )?;
            }
        }
        PrdCommand::List { json } => {
            let prds = store.db().list_prds(&ws)?;
            if json {
                writeln!(out, "{}", crate::out::json_pretty(&prds)?)?;
            } else if prds.is_empty() {
                writeln!(out, "No PRDs here yet; add one with keel prd add prd.md")?;
            } else {
                writeln!(
                    out,
                    "{:<4}  {:<7}  {:<19}  TITLE",
                    "ID", "VERSION", "UPDATED (UTC)"
                )?;
                for p in prds {
                    writeln!(
                        out,
                        "{:<4}  {:<7}  {:<19}  {}",
                        p.id,
                        p.version,
                        when(p.updated_at),
                        p.title
                    )?;
                }
            }
        }
        PrdCommand::Edit { id, file } => {
            let current = store
                .db()
                .prd(&ws, Some(id), None)
                .map_err(setup::store_usage_error)?;
            let body = match file {
                Some(f) => read_input(&root, &f)?,
                None => edit_in_editor(&current.body)?,
            };
            let prd = store
                .db()
                .edit_prd(&ws, id, &body)
                .map_err(setup::store_usage_error)?;
            if prd.version == current.version {
                writeln!(out, "PRD #{id} is unchanged (version {}).", prd.version)?;
            } else {
                writeln!(out, "Stored PRD #{id} version {}.", prd.version)?;
            }
        }
    }
    Ok(exit::COMPLETED)
}

fn edit_in_editor(body: &str) -> anyhow::Result<String> {
    let editor = crate::editor::user_editor().ok_or_else(|| {
        setup::UsageError(
            "no editor: set $EDITOR, or give the new version as a file (`keel prd edit ID FILE`)"
                .into(),
        )
    })?;
    let (status, text) = crate::editor::edit(&editor, "PRD.md", body)?;
    if !status.success() {
        anyhow::bail!("the editor exited with {status}; the PRD was not changed");
    }
    if text.trim().is_empty() {
        return Err(setup::UsageError("the edited PRD is empty; nothing stored".into()).into());
    }
    Ok(text)
}
