//! `keel skills list|show|new`. The data comes from `keel_engine::skills` so other front
//! ends (`/skills` in chat) can render the same skills their own way.

use std::io::Write;

use clap::{Args, Subcommand};

use crate::args::CommonArgs;
use crate::{exit, setup};

#[derive(Debug, Args)]
pub struct SkillsArgs {
    #[command(subcommand)]
    pub command: SkillsCommand,
}

#[derive(Debug, Subcommand)]
pub enum SkillsCommand {
    /// The skills found here, their activation and where they come from.
    List {
        #[command(flatten)]
        common: CommonArgs,
        #[arg(long)]
        json: bool,
    },
    /// One skill: its front matter, files and instructions.
    Show {
        name: String,
        #[command(flatten)]
        common: CommonArgs,
    },
    /// Create `.keel/skills/NAME/SKILL.md` from a template.
    New {
        name: String,
        /// One line on when to use it.
        #[arg(long, default_value = "Describe in one line when to use this skill.")]
        description: String,
        #[command(flatten)]
        common: CommonArgs,
    },
}

pub fn execute(args: SkillsArgs) -> anyhow::Result<u8> {
    let mut out = crate::out::stdout();
    let config_dir = keel_engine::rules::user_config_dir();
    match args.command {
        SkillsCommand::List { common, json } => {
            let ws = setup::workspace_dir(common.workspace.as_deref())?;
            let set = keel_engine::skills::discover(&ws, config_dir.as_deref());
            if json {
                let v = serde_json::json!({"skills": set.skills, "problems": set.problems});
                writeln!(out, "{}", crate::out::json_pretty(&v)?)?;
                return Ok(exit::COMPLETED);
            }
            if set.skills.is_empty() {
                writeln!(out, "No skills. Create one with: keel skills new NAME")?;
            }
            for s in &set.skills {
                let tools = if s.tools.is_empty() {
                    String::new()
                } else {
                    format!("  tools: {}", s.tools.join(", "))
                };
                writeln!(
                    out,
                    "{:<20} {:<7} {:<15} {}{tools}",
                    s.name,
                    s.activation.as_str(),
                    s.origin,
                    s.description
                )?;
            }
            for p in &set.problems {
                writeln!(out, "skipped {}: {}", p.path, p.message)?;
            }
        }
        SkillsCommand::Show { name, common } => {
            let ws = setup::workspace_dir(common.workspace.as_deref())?;
            let set = keel_engine::skills::discover(&ws, config_dir.as_deref());
            let Some(s) = set.get(&name) else {
                return Err(setup::UsageError(format!(
                    "no skill `{name}`; `keel skills list` shows them"
                ))
                .into());
            };
            writeln!(out, "name: {}\ndescription: {}", s.name, s.description)?;
            writeln!(out, "activation: {}", s.activation.as_str())?;
            if !s.globs.is_empty() {
                writeln!(out, "globs: {}", s.globs.join(", "))?;
            }
            if !s.tools.is_empty() {
                writeln!(out, "tools: {}", s.tools.join(", "))?;
            }
            writeln!(out, "folder: {} ({})", s.dir.display(), s.origin)?;
            if !s.files.is_empty() {
                writeln!(out, "files: {}", s.files.join(", "))?;
            }
            writeln!(out, "\n{}", s.body)?;
        }
        SkillsCommand::New {
            name,
            description,
            common,
        } => {
            let ws = setup::workspace_dir(common.workspace.as_deref())?;
            let file =
                keel_engine::skills::create(&ws, &name, &description).map_err(setup::UsageError)?;
            writeln!(out, "Created {}", file.display())?;
        }
    }
    Ok(exit::COMPLETED)
}
