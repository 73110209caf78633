//! `keel trust show|llm|revoke`: what a workspace's `.keel/config.toml` suggests that only you
//! may decide (its `[llm]` section: the provider, model, endpoint, key variable or script your
//! sessions use), and accepting exactly that content for this workspace. The acceptance is a
//! SHA-256 of the section in Keel's trust store ([`keel_tools::trust`]); any change to the
//! section is a new suggestion. Project MCP servers are approved with `keel mcp add`.

use std::io::{IsTerminal, Write};

use clap::{Args, Subcommand};
use keel_config::{LLM_SUBJECT, Suggestion};
use keel_tools::trust::{TrustStore, Trusted};

use crate::args::CommonArgs;
use crate::{exit, setup};

#[derive(Debug, Args)]
pub struct TrustArgs {
    #[command(subcommand)]
    pub command: TrustCommand,
}

#[derive(Debug, Subcommand)]
pub enum TrustCommand {
    /// What the project's config suggests, and whether you accepted it.
    Show {
        #[command(flatten)]
        common: CommonArgs,
    },
    /// Accept the project's `[llm]` section exactly as it stands, for this workspace.
    Llm {
        #[command(flatten)]
        common: CommonArgs,
    },
    /// Withdraw an acceptance (`llm`): your own model settings apply again.
    Revoke {
        /// What to withdraw: `llm`.
        subject: String,
        #[command(flatten)]
        common: CommonArgs,
    },
}

fn store() -> TrustStore {
    TrustStore::load(&keel_config::data_dir(&setup::env_var))
}

fn suggestion(ws: &std::path::Path) -> anyhow::Result<Option<Suggestion>> {
    keel_config::llm_suggestion(ws).map_err(|e| setup::UsageError(e.to_string()).into())
}

pub fn execute(args: TrustArgs) -> anyhow::Result<u8> {
    let mut out = crate::out::stdout();
    match args.command {
        TrustCommand::Show { common } => {
            let ws = setup::workspace_dir(common.workspace.as_deref())?;
            match suggestion(&ws)? {
                None => writeln!(
                    out,
                    "The project's .keel/config.toml suggests no model settings; your own apply."
                )?,
                Some(s) => {
                    writeln!(
                        out,
                        "The project's .keel/config.toml suggests these model settings:\n\n{}",
                        s.text.trim_end()
                    )?;
                    match &s.destination {
                        Ok(to) => writeln!(out, "\nIt {to}.")?,
                        // Never applied, accepted or not (keel-config refuses it).
                        Err(why) => {
                            writeln!(out, "\nIt cannot be accepted, and is never applied: {why}.")?
                        }
                    }
                    match (&s.destination, store().accepts(&ws, LLM_SUBJECT, &s.sha256)) {
                        (Err(_), _) => {} // said above
                        (Ok(_), true) => writeln!(
                            out,
                            "\nAccepted: they apply in this workspace. Withdraw with: keel trust revoke llm"
                        )?,
                        (Ok(_), false) => writeln!(
                            out,
                            "\nNot accepted: your own model settings apply. Accept exactly this with: keel trust llm"
                        )?,
                    }
                }
            }
            writeln!(out, "Project MCP servers: keel mcp list")?;
        }
        TrustCommand::Llm { common } => {
            let ws = setup::workspace_dir(common.workspace.as_deref())?;
            let Some(s) = suggestion(&ws)? else {
                return Err(setup::UsageError(
                    "the project's .keel/config.toml has no [llm] section to accept".into(),
                )
                .into());
            };
            writeln!(
                out,
                "The project's .keel/config.toml suggests (where your code and keys go, and which model acts):\n\n{}\n",
                s.text.trim_end()
            )?;
            match &s.destination {
                Ok(to) => writeln!(out, "It {to}.\n")?,
                Err(why) => {
                    return Err(setup::UsageError(format!(
                        "these settings cannot be accepted: {why}"
                    ))
                    .into());
                }
            }
            if std::io::stdin().is_terminal() && crate::out::stdout_is_terminal() {
                write!(
                    out,
                    "Use exactly these settings in {}? [y/N] ",
                    ws.display()
                )?;
                out.flush()?;
                let mut answer = String::new();
                std::io::stdin().read_line(&mut answer)?;
                if !matches!(answer.trim(), "y" | "Y" | "yes") {
                    writeln!(out, "Not accepted.")?;
                    return Ok(exit::FAILED);
                }
            }
            store()
                .set(
                    &ws,
                    LLM_SUBJECT,
                    Trusted {
                        sha256: s.sha256,
                        ..Trusted::default()
                    },
                )
                .map_err(|e| anyhow::anyhow!("cannot record the acceptance: {e}"))?;
            writeln!(
                out,
                "Accepted for {}. Any change to the section is a new suggestion; withdraw with: keel trust revoke llm",
                ws.display()
            )?;
        }
        TrustCommand::Revoke { subject, common } => {
            let ws = setup::workspace_dir(common.workspace.as_deref())?;
            if subject != LLM_SUBJECT {
                return Err(setup::UsageError(format!(
                    "`{subject}` is not something `keel trust` records; use `llm` (project MCP servers: keel mcp remove NAME)"
                ))
                .into());
            }
            if store()
                .remove(&ws, LLM_SUBJECT)
                .map_err(|e| anyhow::anyhow!("cannot update the trust store: {e}"))?
            {
                writeln!(
                    out,
                    "Withdrawn: your own model settings apply in {} again.",
                    ws.display()
                )?;
            } else {
                writeln!(
                    out,
                    "Nothing to withdraw: no [llm] settings were accepted here."
                )?;
            }
        }
    }
    Ok(exit::COMPLETED)
}
