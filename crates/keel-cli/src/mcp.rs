//! `keel mcp list|add|remove|test`: the MCP servers defined for a workspace, approving a
//! project's `.mcp.json` servers (or adding your own to the user-level `mcp.json`), and
//! starting one to see its tools. The data comes from `keel_engine::mcp` and `keel_mcp`.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context;
use clap::{Args, Subcommand};
use keel_config::Layer;
use keel_mcp::{Approval, Hub, Origin, ServerConfig, ServerDef, StartOptions, Status};

use crate::args::CommonArgs;
use crate::{exit, setup};

#[derive(Debug, Args)]
pub struct McpArgs {
    #[command(subcommand)]
    pub command: McpCommand,
}

#[derive(Debug, Subcommand)]
pub enum McpCommand {
    /// Every server defined here: where it comes from, how it is reached, whether it may start.
    List {
        #[command(flatten)]
        common: CommonArgs,
        #[arg(long)]
        json: bool,
    },
    /// Approve the project's `.mcp.json` server NAME as it stands; or, with `--url` or a
    /// command after `--`, add your own server NAME to the user-level mcp.json.
    Add {
        name: String,
        /// Streamable HTTP endpoint of a server to add.
        #[arg(long, value_name = "URL", conflicts_with = "command")]
        url: Option<String>,
        /// A header for an HTTP server, `NAME: VALUE` (`${VAR}` is read from the environment
        /// when the server starts). Repeatable.
        #[arg(long = "header", value_name = "NAME: VALUE")]
        headers: Vec<String>,
        /// A variable for a stdio server, `NAME=VALUE`. Repeatable.
        #[arg(long = "env", value_name = "NAME=VALUE")]
        env: Vec<String>,
        /// The command (and arguments) of a stdio server to add, after `--`.
        #[arg(last = true, value_name = "COMMAND")]
        command: Vec<String>,
        /// When approving a project's stdio server: let it reach the network (it runs with the
        /// network off otherwise).
        #[arg(long)]
        network: bool,
        /// When approving a project's server without a terminal to ask on: approve it as shown.
        #[arg(long, conflicts_with = "confirm")]
        yes: bool,
        /// When approving a project's server: approve it only if it is still exactly what was
        /// shown with this code (`/mcp add NAME` in `keel chat` shows it).
        #[arg(long, value_name = "CODE")]
        confirm: Option<String>,
        #[command(flatten)]
        common: CommonArgs,
    },
    /// Remove NAME from the user-level mcp.json, or withdraw approval of the project's NAME.
    Remove {
        name: String,
        #[command(flatten)]
        common: CommonArgs,
    },
    /// Start NAME, list its tools and stop it.
    Test {
        name: String,
        #[command(flatten)]
        common: CommonArgs,
    },
}

/// How approving a project's server gets the user's yes once its details are shown (never
/// before: red-team R4-14).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ask {
    /// A y/N question on the terminal.
    Terminal,
    /// No terminal (`keel mcp add` in a script): shown, not approved without `--yes`.
    NoTerminal,
    /// `keel chat`'s `/mcp add`: shown, approved by typing it again with `--confirm CODE`.
    Chat,
}

pub fn execute(args: McpArgs) -> anyhow::Result<u8> {
    let ask = if std::io::stdin().is_terminal() && crate::out::stdout_is_terminal() {
        Ask::Terminal
    } else {
        Ask::NoTerminal
    };
    run_asking(args.command, &mut crate::out::stdout(), ask)
}

/// Carries out one `keel mcp` command for `keel chat`, writing what it says to `out` (its
/// `/mcp` notice): a project server's approval is shown first and recorded only when typed
/// again with the code shown (`--confirm CODE`).
pub fn run(command: McpCommand, out: &mut dyn Write) -> anyhow::Result<u8> {
    run_asking(command, out, Ask::Chat)
}

/// [`run`], asking as `ask` says before an approval.
fn run_asking(command: McpCommand, out: &mut dyn Write, ask: Ask) -> anyhow::Result<u8> {
    match command {
        McpCommand::List { common, json } => {
            let ws = setup::workspace_dir(common.workspace.as_deref())?;
            let (defs, warnings) = definitions(&ws)?;
            let approvals = keel_engine::mcp::approvals();
            if json {
                let list: Vec<_> = defs
                    .iter()
                    .map(|d| {
                        let approval = approvals.check(&ws, d);
                        serde_json::json!({
                            "name": d.name,
                            "source": d.origin.path(),
                            "project": d.origin.is_project(),
                            "approved": approval.allows_start(),
                            "approval": approval.describe(&d.name),
                            "transport": describe(d),
                            "active": d.config.active,
                            "disabled": d.config.disabled,
                        })
                    })
                    .collect();
                let v = serde_json::json!({"servers": list, "warnings": warnings});
                writeln!(out, "{}", crate::out::json_pretty(&v)?)?;
                return Ok(exit::COMPLETED);
            }
            if defs.is_empty() {
                writeln!(
                    out,
                    "No MCP servers. Add one with: keel mcp add NAME -- COMMAND [ARGS...]"
                )?;
            }
            for d in &defs {
                let approval = approvals.check(&ws, d);
                let state = if d.config.disabled {
                    "disabled"
                } else if matches!(approval, Approval::Changed(_)) {
                    "CHANGED SINCE APPROVED"
                } else if !approval.allows_start() {
                    "NOT APPROVED (keel mcp add NAME)"
                } else if d.config.active {
                    "active"
                } else {
                    "deferred"
                };
                writeln!(
                    out,
                    "{:<16} {:<34} {}  ({})",
                    d.name,
                    state,
                    describe(d),
                    d.origin.path().display()
                )?;
                if d.origin.is_project() && !approval.allows_start() && !d.config.disabled {
                    writeln!(out, "{:<16} {}", "", approval.describe(&d.name))?;
                }
            }
            for w in &warnings {
                writeln!(out, "warning: {w}")?;
            }
        }
        McpCommand::Add {
            name,
            url,
            headers,
            env,
            command,
            network,
            yes,
            confirm,
            common,
        } => {
            let ws = setup::workspace_dir(common.workspace.as_deref())?;
            if url.is_none() && command.is_empty() {
                let answer = match (confirm, yes) {
                    (Some(code), _) => Answer::Confirmed(code),
                    (None, true) => Answer::Yes,
                    (None, false) => Answer::Ask(ask),
                };
                return approve(&ws, &name, network, answer, out);
            }
            if network {
                return Err(setup::UsageError(
                    "--network is for approving a project's server (`keel mcp add NAME --network`); your own servers run unconfined"
                        .into(),
                )
                .into());
            }
            // Your own servers start outside any workspace (a repository must not shadow
            // them): a relative file you named here is pinned to where you named it.
            let (command, pinned) = pin_relative_files(&command);
            let config = ServerConfig {
                kind: url.as_ref().map(|_| "http".to_string()),
                url,
                headers: pairs(&headers, ':')?,
                env: pairs(&env, '=')?,
                command: command.first().cloned(),
                args: command.iter().skip(1).cloned().collect(),
                ..ServerConfig::default()
            };
            config.transport().map_err(setup::UsageError)?;
            let file = user_file()?;
            let mut json = keel_mcp::config::read_mcp_json(&file).map_err(setup::UsageError)?;
            json.mcp_servers.insert(name.clone(), config);
            write_json(&file, &json)?;
            writeln!(out, "Added `{name}` to {}", file.display())?;
            for (given, absolute) in &pinned {
                writeln!(
                    out,
                    "  {given} → {absolute} (your servers start outside the workspace)"
                )?;
            }
            writeln!(out, "Check it with: keel mcp test {name}")?;
        }
        McpCommand::Remove { name, common } => {
            let ws = setup::workspace_dir(common.workspace.as_deref())?;
            let file = user_file()?;
            let mut json = keel_mcp::config::read_mcp_json(&file).map_err(setup::UsageError)?;
            if json.mcp_servers.remove(&name).is_some() {
                write_json(&file, &json)?;
                writeln!(out, "Removed `{name}` from {}", file.display())?;
            } else if keel_engine::mcp::approvals()
                .revoke(&ws, &name)
                .context("cannot update the MCP approvals")?
            {
                writeln!(
                    out,
                    "Withdrew approval of the project's `{name}`; it will not start until approved again"
                )?;
            } else {
                return Err(setup::UsageError(format!(
                    "`{name}` is neither in {} nor an approved project server (servers in your config.toml's [mcp.servers] are removed there)",
                    file.display()
                ))
                .into());
            }
        }
        McpCommand::Test { name, common } => {
            let ws = setup::workspace_dir(common.workspace.as_deref())?;
            let config = setup::load_config(&ws, Layer::from_overrides(&[]))?;
            let (defs, _) = keel_engine::mcp::definitions(&config, &ws);
            let Some(def) = defs.into_iter().find(|d| d.name == name) else {
                return Err(setup::UsageError(format!(
                    "no MCP server `{name}`; `keel mcp list` shows them"
                ))
                .into());
            };
            let approvals = keel_engine::mcp::approvals();
            let approval = approvals.check(&ws, &def);
            if !approval.allows_start() {
                return Err(setup::UsageError(format!(
                    "`{name}` comes from the project's .mcp.json and is {}",
                    approval.describe(&name)
                ))
                .into());
            }
            let started = Instant::now();
            let options = StartOptions::from_config(&config.mcp, &ws);
            let hub = Hub::start(vec![def], &approvals, &options, &setup::env_var)
                .map_err(anyhow::Error::msg)?;
            let entries = hub.entries();
            let Some(entry) = entries.first() else {
                return Ok(exit::FAILED);
            };
            writeln!(
                out,
                "{name}: {} ({} ms)",
                entry.status,
                started.elapsed().as_millis()
            )?;
            for t in &entry.tools {
                let first = t.description.lines().next().unwrap_or_default();
                writeln!(out, "  {}  {first}", keel_mcp::tool_name(&name, &t.name))?;
            }
            for w in hub.tools().1 {
                writeln!(out, "  {w}")?;
            }
            if !matches!(entry.status, Status::Ready { .. }) {
                return Ok(exit::FAILED);
            }
        }
    }
    Ok(exit::COMPLETED)
}

/// Every server definition for `ws` with the merged configuration.
fn definitions(ws: &Path) -> anyhow::Result<(Vec<ServerDef>, Vec<String>)> {
    let config = setup::load_config(ws, Layer::from_overrides(&[]))?;
    Ok(keel_engine::mcp::definitions(&config, ws))
}

/// The user's answer to approving a project's server, or how to get it.
enum Answer {
    /// `--yes`: approve what is shown.
    Yes,
    /// `--confirm CODE`: approve what is shown if its code is CODE.
    Confirmed(String),
    Ask(Ask),
}

fn approve(
    ws: &Path,
    name: &str,
    network: bool,
    answer: Answer,
    out: &mut dyn Write,
) -> anyhow::Result<u8> {
    let (defs, _) = definitions(ws)?;
    let Some(def) = defs.into_iter().find(|d| d.name == name) else {
        return Err(setup::UsageError(format!(
            "no MCP server `{name}` here; to add your own: keel mcp add {name} -- COMMAND [ARGS...] (or --url URL)"
        ))
        .into());
    };
    if !matches!(def.origin, Origin::Project(_)) {
        writeln!(out, "`{name}` is your own server; it needs no approval")?;
        return Ok(exit::COMPLETED);
    }
    let files = keel_mcp::covered_files(ws, &def, network).map_err(|e| {
        setup::UsageError(format!("the project's `{name}` cannot be approved: {e}"))
    })?;
    writeln!(
        out,
        "The project's `{name}` (from {}):",
        def.origin.path().display()
    )?;
    for line in approval_details(&def, &files, network) {
        writeln!(out, "  {line}")?;
    }
    // What is recorded is what was shown: this definition and these files' hashes (a file
    // changed while the user read it is found changed at the next start).
    let code = keel_mcp::approval_code(&def, network, &files);
    let flag = if network { " --network" } else { "" };
    match answer {
        Answer::Yes => {}
        Answer::Confirmed(given) if given.trim() == code => {}
        Answer::Confirmed(given) => {
            writeln!(
                out,
                "Not approved: `{name}` is no longer what code {given} was shown for (its definition or a file above changed). To approve it as shown above: /mcp add {name}{flag} --confirm {code}"
            )?;
            return Ok(exit::FAILED);
        }
        Answer::Ask(Ask::Terminal) => {
            write!(out, "Approve `{name}` exactly as shown? [y/N] ")?;
            out.flush()?;
            let mut answer = String::new();
            std::io::stdin().read_line(&mut answer)?;
            if !matches!(answer.trim(), "y" | "Y" | "yes") {
                writeln!(out, "Not approved.")?;
                return Ok(exit::FAILED);
            }
        }
        Answer::Ask(Ask::NoTerminal) => {
            writeln!(
                out,
                "Not approved: there is no terminal to ask on. To approve exactly what is shown: keel mcp add {name}{flag} --confirm {code} (or --yes)"
            )?;
            return Ok(exit::FAILED);
        }
        Answer::Ask(Ask::Chat) => {
            writeln!(
                out,
                "Not approved yet. To approve exactly what is shown, type: /mcp add {name}{flag} --confirm {code}"
            )?;
            return Ok(exit::FAILED);
        }
    }
    let mut approvals = keel_engine::mcp::approvals();
    approvals
        .approve_as_shown(ws, &def, network, &files)
        .map_err(anyhow::Error::msg)?;
    writeln!(
        out,
        "Approved. It starts with the next session; a changed definition or a changed file above needs approving again."
    )?;
    Ok(exit::COMPLETED)
}

/// What approving a project's server lets it do, every value shown as written (`${NAME}`
/// stays a reference: its value is read from your environment when the server starts).
fn approval_details(def: &ServerDef, files: &[keel_mcp::NamedFile], network: bool) -> Vec<String> {
    let c = &def.config;
    let mut lines = Vec::new();
    match c.transport() {
        Ok(keel_mcp::Transport::Stdio { command, args, env }) => {
            lines.push(
                format!("runs:      {command} {}", args.join(" "))
                    .trim_end()
                    .to_string(),
            );
            for (k, v) in &env {
                lines.push(format!("env:       {k}={v}"));
            }
            lines.push(format!(
                "confined:  the workspace and the rest of the disk read-only, Keel's data hidden, {}",
                if network {
                    "network ALLOWED (--network)"
                } else {
                    "no network (approve with --network to allow it)"
                }
            ));
            if files.is_empty() {
                lines.push("covers:    the definition (it names no workspace file)".into());
            }
            const SHOWN: usize = 30;
            for f in files.iter().take(SHOWN) {
                let short: String = f.sha256.chars().take(12).collect();
                lines.push(format!("covers:    {}  sha256 {short}…", f.path));
            }
            if files.len() > SHOWN {
                lines.push(format!(
                    "covers:    … and {} more workspace files (with network access the \
                     server runs on a private copy of exactly these; a change to any of them \
                     needs approving again)",
                    files.len() - SHOWN
                ));
            }
        }
        Ok(keel_mcp::Transport::Http { url, headers }) => {
            lines.push(format!("sends to:  {url}  (host {})", host_of(&url)));
            for (k, v) in &headers {
                lines.push(format!("header:    {k}: {v}"));
            }
        }
        Err(e) => lines.push(format!("invalid:   {e}")),
    }
    if c.active {
        lines.push("active:    its tools are in every first request".into());
    }
    if c.effect == keel_mcp::EffectConfig::ReadOnly {
        lines.push("effect:    read_only (its tools run without asking)".into());
    }
    let vars = referenced_vars(c);
    if !vars.is_empty() {
        let to = match c.transport() {
            Ok(keel_mcp::Transport::Http { url, .. }) => format!("sent to {}", host_of(&url)),
            _ => "given to the server process".into(),
        };
        lines.push(format!(
            "secrets:   {} from your environment, {to}",
            vars.iter()
                .map(|v| format!("${{{v}}}"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    lines
}

/// The `${NAME}` variables a definition's values read from Keel's environment.
fn referenced_vars(c: &ServerConfig) -> Vec<String> {
    let mut out = std::collections::BTreeSet::new();
    let values = c
        .env
        .values()
        .chain(c.headers.values())
        .chain(c.url.iter())
        .chain(c.command.iter())
        .chain(c.args.iter());
    for v in values {
        let mut rest = v.as_str();
        while let Some(start) = rest.find("${") {
            let after = &rest[start + 2..];
            let Some(end) = after.find('}') else { break };
            out.insert(after[..end].to_string());
            rest = &after[end + 1..];
        }
    }
    out.into_iter().collect()
}

/// The host (and port) a URL's requests go to, parsed as the HTTP client parses it.
fn host_of(url: &str) -> String {
    keel_mcp::config::url_host(url).unwrap_or_else(|| "(no host)".into())
}

/// One line: `stdio: cmd args` or `http: url`, with every env value and header of a project's
/// server (they are in the repository anyway; `${NAME}` stays a reference) and only the names
/// of your own servers' (their values may be your secrets).
fn describe(def: &ServerDef) -> String {
    let project = def.origin.is_project();
    let show = |m: &BTreeMap<String, String>, sep: &str| -> String {
        m.iter()
            .map(|(k, v)| {
                if project {
                    format!("{k}{sep}{v}")
                } else {
                    k.clone()
                }
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    match def.config.transport() {
        Ok(keel_mcp::Transport::Stdio { command, args, env }) => {
            let line = format!("stdio: {command} {}", args.join(" "));
            let mut s = line.trim_end().to_string();
            if !env.is_empty() {
                s.push_str(&format!(" (env: {})", show(&env, "=")));
            }
            s
        }
        Ok(keel_mcp::Transport::Http { url, headers }) => {
            let mut s = format!("http: {url}");
            if !headers.is_empty() {
                s.push_str(&format!(" (headers: {})", show(&headers, ": ")));
            }
            s
        }
        Err(e) => format!("invalid: {e}"),
    }
}

fn pairs(items: &[String], sep: char) -> anyhow::Result<BTreeMap<String, String>> {
    items
        .iter()
        .map(|i| match i.split_once(sep) {
            Some((k, v)) if !k.trim().is_empty() => {
                Ok((k.trim().to_string(), v.trim().to_string()))
            }
            _ => Err(setup::UsageError(format!("`{i}` is not of the form NAME{sep}VALUE")).into()),
        })
        .collect()
}

fn user_file() -> anyhow::Result<PathBuf> {
    let dir = keel_engine::rules::user_config_dir().ok_or_else(|| {
        setup::UsageError("no user config directory (set HOME or KEEL_CONFIG)".into())
    })?;
    Ok(keel_mcp::config::user_file(&dir))
}

fn write_json(file: &Path, json: &keel_mcp::config::McpJson) -> anyhow::Result<()> {
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let text = serde_json::to_string_pretty(json)?;
    std::fs::write(file, text + "\n").with_context(|| format!("cannot write {}", file.display()))
}

/// `keel doctor`'s lines: one per server with its status and tool count (servers are started
/// for the check and stopped after).
pub fn doctor_checks(config: &keel_engine::Config, ws: &Path) -> Vec<(String, bool, String)> {
    let (defs, warnings) = keel_engine::mcp::definitions(config, ws);
    let mut lines: Vec<(String, bool, String)> = warnings
        .into_iter()
        .map(|w| ("mcp".to_string(), false, w))
        .collect();
    if defs.is_empty() {
        return lines;
    }
    let options = StartOptions::from_config(&config.mcp, ws);
    match Hub::start(
        defs,
        &keel_engine::mcp::approvals(),
        &options,
        &setup::env_var,
    ) {
        Ok(hub) => {
            for e in hub.entries() {
                let ok = matches!(e.status, Status::Ready { .. } | Status::Disabled);
                lines.push((format!("mcp {}", e.name), ok, e.status.to_string()));
            }
        }
        Err(e) => lines.push(("mcp".into(), false, e)),
    }
    lines
}

/// The words of a server's command with every relative path that names an existing file in the
/// current directory made absolute, and the (given, absolute) pairs changed. User servers start
/// outside the workspace, so `python3 server.py` must keep meaning the file the user named.
fn pin_relative_files(command: &[String]) -> (Vec<String>, Vec<(String, String)>) {
    let Ok(cwd) = std::env::current_dir() else {
        return (command.to_vec(), Vec::new());
    };
    let mut pinned = Vec::new();
    let words = command
        .iter()
        .enumerate()
        .map(|(i, word)| {
            let path = Path::new(word);
            // The program itself only when written as a path (`./server`), never a bare name
            // (`python3`), which is looked up on PATH.
            let candidate = !word.starts_with('-')
                && path.is_relative()
                && (i > 0 || word.contains('/'))
                && cwd.join(path).is_file();
            if !candidate {
                return word.clone();
            }
            let absolute = cwd.join(path).display().to_string();
            pinned.push((word.clone(), absolute.clone()));
            absolute
        })
        .collect();
    (words, pinned)
}
