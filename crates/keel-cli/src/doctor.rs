//! `keel doctor`: the setup as a list of checks, each one line with a status — configuration,
//! the model of every role and of the fallback list (provider, endpoint, whether its key is
//! present), the key variables Keel knows, and with `--ping` a one-line prompt to each model.
//! Key values are never printed. New areas (sandbox, index) add their own `*_checks` function
//! to [`collect`].

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use futures::StreamExt;
use keel_engine::Config;
use keel_llm::presets::{PRESETS, WireFormat};
use keel_llm::{ChatRequest, ModelTarget, Provider, Role, Router, TurnAssembler, build_provider};
use keel_protocol::Message;

use crate::args::DoctorArgs;
use crate::check::{Check, Status};
use crate::render::usage_line;
use crate::{exit, setup};

/// The output limit of a ping.
const PING_MAX_TOKENS: u32 = 64;

/// How long one ping may take.
const PING_TIMEOUT: Duration = Duration::from_secs(60);

pub fn execute(args: DoctorArgs) -> anyhow::Result<u8> {
    let workspace = setup::workspace_dir(args.common.workspace.as_deref())?;
    let config = setup::load_config(
        &workspace,
        crate::launch::overrides(&args.llm, None, None).layer(),
    );
    let checks = collect(config, &workspace, args.ping)?;
    if args.json {
        say!("{}", crate::out::json_pretty(&checks)?);
    } else {
        say_part!("{}", render(&checks));
    }
    let config_broken = checks
        .first()
        .is_some_and(|c| c.name == "config" && c.status == Status::Fail);
    Ok(if config_broken {
        exit::USAGE
    } else if checks.iter().any(|c| c.status == Status::Fail) {
        exit::FAILED
    } else {
        exit::COMPLETED
    })
}

/// Every check, in display order.
fn collect(
    config: anyhow::Result<Config>,
    workspace: &Path,
    ping: bool,
) -> anyhow::Result<Vec<Check>> {
    let mut checks = Vec::new();
    let config = match config {
        Ok(c) => {
            checks.push(Check::new(
                "config",
                Status::Ok,
                format!("loaded for workspace {}", workspace.display()),
            ));
            c
        }
        Err(e) => {
            checks.push(Check::new("config", Status::Fail, format!("{e:#}")));
            return Ok(checks);
        }
    };
    let models = model_checks(&config, workspace, &setup::env_var);
    checks.extend(models.checks);
    checks.push(key_check(&config, &setup::env_var));
    checks.extend(sandbox_checks(&config));
    checks.extend(git_config_paths_check(workspace));
    let homes = keel_tools::shell::exec::toolchain_homes();
    if !homes.is_empty() {
        let set: Vec<String> = homes
            .iter()
            .map(|(k, v)| format!("{k}={}", v.display()))
            .collect();
        checks.push(Check::new(
            "toolchains",
            Status::Info,
            format!(
                "HOME has no ~/.rustup or ~/.cargo: commands get {} (the rustup installation on PATH), so cargo works under the sandbox",
                set.join(", ")
            ),
        ));
    }
    checks.push(crate::index::health_check(&config, workspace));
    checks.extend(crate::db::health_check(&config));
    for (name, ok, message) in crate::mcp::doctor_checks(&config, workspace) {
        let status = if ok { Status::Ok } else { Status::Warn };
        checks.push(Check::new(&name, status, message));
    }
    checks.extend(crate::db::queue_check(&config));
    // Other areas push their checks here, before the pings.
    if ping && !models.pingable.is_empty() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("cannot start the async runtime")?;
        checks.extend(runtime.block_on(ping_checks(models.pingable)));
    }
    Ok(checks)
}

/// Whether shell commands can be confined by the kernel and whether config allows it, then
/// one line per mechanism saying exactly what this kernel enforces and what it cannot.
fn sandbox_checks(config: &Config) -> Vec<Check> {
    use keel_tools::sandbox;
    let line = sandbox::describe_support();
    let mut checks = vec![if !config.shell.sandbox {
        Check::new(
            "sandbox",
            Status::Warn,
            format!("disabled by `shell.sandbox = false`; the kernel offers: {line}"),
        )
    } else if sandbox::is_available() {
        Check::new("sandbox", Status::Ok, line)
    } else {
        Check::new("sandbox", Status::Warn, line)
    }];
    if !config.shell.sandbox {
        return checks;
    }
    for (name, statement) in sandbox::describe_enforcement() {
        let status = if statement.contains("NOT") || statement.contains("NO ") {
            Status::Warn
        } else {
            Status::Ok
        };
        let statement = if name.starts_with("network") && config.shell.network {
            format!("ON by `shell.network = true` (commands may use the network); {statement}")
        } else {
            statement
        };
        checks.push(Check::new(format!("sandbox: {name}"), status, statement));
    }
    checks.push(secret_stores_check(config));
    checks.extend(writable_trees_check(config));
    checks
}

/// Working-tree files and directories the repository's git configuration names as
/// configuration to read or programs to run (`core.hooksPath = .husky`, an included
/// `.gitconfig`, `filter.x.clean = ./scripts/clean.sh`): the user's git runs them outside the
/// sandbox, so they are read-only to the agent (red-team pass 4, R4-3; pass 2, R14).
fn git_config_paths_check(workspace: &Path) -> Option<Check> {
    let paths = keel_tools::sandbox::git_config_paths(workspace);
    if paths.is_empty() {
        return None;
    }
    let show = |p: &keel_tools::sandbox::GitConfigPath| format!("{} ({})", p.path.display(), p.key);
    let (present, missing): (Vec<_>, Vec<_>) = paths
        .iter()
        .partition(|p| workspace.join(&p.path).symlink_metadata().is_ok());
    let mut detail = String::from("the repository's git config and installed hooks name ");
    if present.is_empty() {
        detail.push_str("no work-tree file that exists yet");
    } else {
        let list: Vec<String> = present.iter().map(|p| show(p)).collect();
        detail.push_str(&list.join(", "));
    }
    detail.push_str(
        ": your own git reads or runs them outside the sandbox (hooks at `git commit`, filters \
         and fsmonitor at `git status`), so they are read-only to the agent's file tools and \
         commands; change them yourself",
    );
    if !missing.is_empty() {
        let mut list: Vec<String> = missing.iter().take(5).map(|p| show(p)).collect();
        if missing.len() > 5 {
            list.push(format!("{} more", missing.len() - 5));
        }
        detail.push_str(&format!(
            ". Not there yet (the file tools refuse them; one a command creates is renamed to \
             `….quarantined-by-keel`): {}",
            list.join(", ")
        ));
    }
    Some(Check::new("git: work-tree programs", Status::Info, detail))
}

/// `shell.writable` trees are shared with everything the user runs later outside Keel: a
/// command can plant code there (a package cache's extracted sources or build scripts, a
/// tool's config) that the user's next build runs unconfined (red-team pass 2, R24).
fn writable_trees_check(config: &Config) -> Option<Check> {
    if config.shell.writable.is_empty() {
        return None;
    }
    Some(Check::new(
        "sandbox: writable trees",
        Status::Warn,
        format!(
            "commands may write {} (`shell.writable`); what your own builds and tools later read \
             from there — a package cache's sources and build scripts, configuration — runs \
             outside the sandbox, so a hostile repository's command can plant code in it. Keep \
             only trees you need, and prefer a per-project cache (e.g. CARGO_HOME inside the \
             workspace)",
            config.shell.writable.join(", ")
        ),
    ))
}

/// Which protected stores exist here ([`keel_tools::stores`]): the `shell.hide` secret stores
/// (under every home), those moved by environment variables, and Keel's own files — hidden
/// from commands and refused by the file tools.
fn secret_stores_check(config: &Config) -> Check {
    use keel_tools::{sandbox, stores};
    let env = &stores::process_env;
    let exists = |p: &std::path::Path| p.symlink_metadata().is_ok();
    let present: Vec<&str> = config
        .shell
        .hide
        .iter()
        .filter(|p| sandbox::expand_hidden(p).iter().any(|e| exists(e)))
        .map(String::as_str)
        .collect();
    let mut also: Vec<String> = stores::always(env)
        .into_iter()
        .filter(|s| exists(&s.path))
        .map(|s| s.path.display().to_string())
        .collect();
    also.sort();
    also.dedup();
    let listed = if present.is_empty() {
        "none of them exists here".to_string()
    } else {
        format!("present here: {}", present.join(", "))
    };
    let keel = if also.is_empty() {
        String::new()
    } else {
        format!("; also hidden: {}", also.join(", "))
    };
    let (linked, uncovered) = linked_stores_text(config);
    let keel = format!("{keel}{linked}");
    let count = config.shell.hide.len();
    match &sandbox::support().mount_namespace {
        Ok(_) => Check::new(
            "sandbox: secret stores",
            if uncovered { Status::Warn } else { Status::Ok },
            format!(
                "{count} paths of `shell.hide` read as empty and are read-only to commands, \
                 inside the workspace too ({listed}){keel}; the file tools refuse them as well; \
                 the rest of the disk stays readable"
            ),
        ),
        Err(e) => Check::new(
            "sandbox: secret stores",
            Status::Warn,
            format!(
                "NOT hidden: commands can read the {count} paths of `shell.hide` ({listed}){keel}; \
                 no namespaces for commands ({e}); the file tools still refuse them"
            ),
        ),
    }
}

/// Where the stores' symlinks lead (a dotfile manager's `~/.ssh/id_ed25519` →
/// `~/dotfiles/ssh/id_ed25519`): hidden too, and named here with the link (R11).
/// The text, and whether a target could not be covered.
fn linked_stores_text(config: &Config) -> (String, bool) {
    use keel_tools::{sandbox, stores};
    let env = &stores::process_env;
    let mut all = stores::always(env);
    all.extend(
        config
            .shell
            .hide
            .iter()
            .flat_map(|h| sandbox::expand_hidden(h))
            .map(|path| stores::Store {
                path,
                kind: stores::StoreKind::Secret,
            }),
    );
    let homes = stores::homes(env);
    let found = stores::link_targets(&all);
    let mut covered = Vec::new();
    let mut wide = Vec::new();
    for t in &found.targets {
        let line = format!("{} (via {})", t.target.display(), t.link.display());
        if sandbox::too_wide_to_cover(&t.target, &homes) {
            wide.push(line);
        } else {
            covered.push(line);
        }
    }
    let mut out = String::new();
    if !covered.is_empty() {
        out.push_str(&format!(
            "; link targets hidden too: {}",
            covered.join(", ")
        ));
    }
    if !wide.is_empty() {
        out.push_str(&format!(
            "; NOT hidden (a link leads to `/` or a home, too wide to cover — move the secret \
             into the store): {}",
            wide.join(", ")
        ));
    }
    if !found.unfound.is_empty() {
        out.push_str(&format!(
            "; NOT hidden (a hard link to it lies where Keel did not find it — outside the \
             home, or past {} entries — and reads there): {}",
            stores::MAX_LINK_SEARCH,
            found
                .unfound
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if found.truncated {
        out.push_str(&format!(
            "; the stores hold more than {} entries or {} levels: links past that are not \
             looked for",
            stores::MAX_ENTRIES,
            stores::MAX_DEPTH
        ));
    }
    (out, !wide.is_empty() || !found.unfound.is_empty())
}

struct ModelChecks {
    checks: Vec<Check>,
    /// Distinct models that could be built, by label.
    pingable: Vec<(String, Arc<dyn Provider>)>,
}

/// The model of each role and each fallback: where it is, whether its key is there.
fn model_checks(
    config: &Config,
    workspace: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> ModelChecks {
    let mut out = ModelChecks {
        checks: Vec::new(),
        pingable: Vec::new(),
    };
    let router =
        Router::new(&config.llm, workspace).with_learned_dir(keel_config::user_data_dir(env));
    if !router.is_configured() {
        out.checks.push(Check::new(
            "provider",
            Status::Fail,
            keel_llm::router::not_configured_message(),
        ));
        return out;
    }
    let mut seen: Vec<(String, ModelTarget)> = Vec::new();
    let mut entries: Vec<(String, Result<ModelTarget, keel_llm::LlmError>)> = Role::ALL
        .iter()
        .map(|r| (r.as_str().to_string(), router.target(*r)))
        .collect();
    match router.fallbacks() {
        Ok(list) => {
            for (i, t) in list.into_iter().enumerate() {
                entries.push((format!("fallback {}", i + 1), Ok(t)));
            }
        }
        Err(e) => entries.push(("fallback".into(), Err(e))),
    }
    for (name, target) in entries {
        let target = match target {
            Ok(t) => t,
            Err(e) => {
                out.checks
                    .push(Check::new(name, Status::Fail, e.to_string()));
                continue;
            }
        };
        if let Some((earlier, _)) = seen.iter().find(|(_, t)| *t == target) {
            let detail = format!("same model as {earlier}");
            out.checks.push(Check::new(name, Status::Info, detail));
            continue;
        }
        seen.push((name.clone(), target.clone()));
        let detail = describe(&target, env);
        match build_provider(&target, env) {
            Ok(p) => {
                let status =
                    if target.context_window.is_none() && target.wire != WireFormat::Scripted {
                        // Compaction needs the window; the built-in table does not know this model.
                        Status::Warn
                    } else {
                        Status::Ok
                    };
                let detail = if status == Status::Warn {
                    format!(
                        "{detail} · context window unknown: set agent.context_window (or llm.models.<name>.context_window for an alias)"
                    )
                } else {
                    detail
                };
                out.checks.push(Check::new(name, status, detail));
                let label = target.label();
                if !out.pingable.iter().any(|(l, _)| *l == label) {
                    out.pingable.push((label, p));
                }
            }
            Err(e) => out
                .checks
                .push(Check::new(name, Status::Fail, format!("{detail}: {e}"))),
        }
    }
    out
}

/// `anthropic/claude-sonnet-4-5 at https://… (llm.model) · key ANTHROPIC_API_KEY set · …`
fn describe(t: &ModelTarget, env: &dyn Fn(&str) -> Option<String>) -> String {
    if t.wire == WireFormat::Scripted {
        let script = t
            .script
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| "no script set".into());
        return format!("scripted model playing {script}");
    }
    let mut parts = vec![format!(
        "{} at {} ({}, {})",
        t.label(),
        t.base_url,
        t.wire.as_str(),
        t.chosen_by
    )];
    parts.push(match &t.api_key_env {
        Some(var) if env(var).is_some_and(|v| !v.trim().is_empty()) => format!("key {var} set"),
        Some(var) if t.key_required => format!("key {var} NOT set"),
        Some(var) => format!("no key ({var} unset; none needed)"),
        None => "no key needed".into(),
    });
    if let Some(w) = t.context_window {
        parts.push(format!("context {}k", w / 1000));
    }
    match t.price {
        Some(p) => parts.push(format!("${}/${} per Mtok in/out", p.input, p.output)),
        // Not guessed from a similar name: costs are not counted for it.
        None => parts.push("price unknown (costs not counted; set llm.prices)".into()),
    }
    parts.join(" · ")
}

/// Which key variables are present (by name only).
fn key_check(config: &Config, env: &dyn Fn(&str) -> Option<String>) -> Check {
    let mut vars: Vec<String> = PRESETS
        .iter()
        .filter(|p| p.key_required)
        .filter_map(|p| p.key_env.map(str::to_string))
        .collect();
    for entry in config.llm.providers.values() {
        if let Some(v) = &entry.api_key_env
            && !vars.contains(v)
        {
            vars.push(v.clone());
        }
    }
    let listed: Vec<String> = vars
        .iter()
        .map(|v| {
            let state = if env(v).is_some_and(|s| !s.trim().is_empty()) {
                "set"
            } else {
                "not set"
            };
            format!("{v} {state}")
        })
        .collect();
    Check::new("keys", Status::Info, listed.join(" · "))
}

/// Sends each model one short prompt, without retries, and reports the answer.
async fn ping_checks(models: Vec<(String, Arc<dyn Provider>)>) -> Vec<Check> {
    let request = ChatRequest {
        system: String::new(),
        tools: Vec::new(),
        messages: vec![Message::user_text(
            "This is a connectivity test. Reply with the single word: pong",
        )],
        // A small model asked for one word can still ramble to the end of its context.
        max_tokens: Some(PING_MAX_TOKENS),
    };
    let mut checks = Vec::new();
    for (label, provider) in models {
        let started = Instant::now();
        let result = tokio::time::timeout(PING_TIMEOUT, async {
            match ping(provider.as_ref(), &request).await {
                // A stream cut off before its finish reason: the client has switched to whole
                // replies; one more try shows whether that is what this server needs.
                Err(keel_llm::LlmError::Truncated(_)) => ping(provider.as_ref(), &request).await,
                other => other,
            }
        })
        .await;
        let secs = started.elapsed().as_secs_f64();
        let name = format!("ping {label}");
        checks.push(match result {
            Ok(Ok(turn)) => {
                let reply: String = turn.text.trim().chars().take(60).collect();
                let needed = provider.adaptations();
                let needed = if needed.is_empty() {
                    String::new()
                } else {
                    format!(" · needed: {}", needed.join("; "))
                };
                Check::new(
                    name,
                    Status::Ok,
                    format!(
                        "\"{reply}\" in {secs:.1}s · {}{needed}",
                        usage_line(&turn.usage)
                    ),
                )
            }
            Ok(Err(e)) => Check::new(name, Status::Fail, e.to_string()),
            Err(_) => Check::new(
                name,
                Status::Fail,
                format!("no complete answer within {}s", PING_TIMEOUT.as_secs()),
            ),
        });
        if let Some(check) = template_check(&label, provider.as_ref()).await {
            checks.push(check);
        }
    }
    checks
}

/// Whether the server's chat template shows the model its tools and their results (four
/// one-token requests compared by their prompt size); what it finds is remembered for later
/// runs.
async fn template_check(label: &str, provider: &dyn Provider) -> Option<Check> {
    let name = format!("template {label}");
    let result = tokio::time::timeout(PING_TIMEOUT, provider.probe_template()).await;
    Some(match result {
        Ok(None) => return None,
        Ok(Some(Ok(found))) => {
            let dropped = found.tools_dropped || found.results_dropped;
            let status = if dropped { Status::Warn } else { Status::Ok };
            Check::new(name, status, found.lines.join("\n"))
        }
        Ok(Some(Err(e))) => Check::new(name, Status::Warn, format!("not measured: {e}")),
        Err(_) => Check::new(
            name,
            Status::Warn,
            format!("not measured within {}s", PING_TIMEOUT.as_secs()),
        ),
    })
}

async fn ping(
    provider: &dyn Provider,
    request: &ChatRequest,
) -> Result<keel_llm::ModelTurn, keel_llm::LlmError> {
    let mut stream = provider.stream(request).await?;
    let mut assembler = TurnAssembler::new();
    while let Some(event) = stream.next().await {
        assembler.push(event?);
    }
    assembler.finish()
}

/// One line per check; multi-line details are indented under it.
fn render(checks: &[Check]) -> String {
    let mut out = String::new();
    for c in checks {
        let mark = match c.status {
            Status::Ok => "✓",
            Status::Warn => "!",
            Status::Fail => "✗",
            Status::Info => "·",
        };
        let mut lines = c.detail.lines();
        out.push_str(&format!(
            "{mark} {:<12} {}\n",
            c.name,
            lines.next().unwrap_or_default()
        ));
        for line in lines {
            out.push_str(&format!("  {:<12} {line}\n", ""));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writable_trees_are_named_as_a_risk_only_when_listed() {
        let mut config = Config::default();
        assert!(writable_trees_check(&config).is_none());
        config.shell.writable = vec!["~/.cargo/registry".into()];
        let check = writable_trees_check(&config).unwrap_or_else(|| panic!("no check"));
        assert_eq!(check.status, Status::Warn);
        assert!(
            check.detail.contains("~/.cargo/registry"),
            "{}",
            check.detail
        );
        assert!(
            check.detail.contains("outside the sandbox"),
            "{}",
            check.detail
        );
    }

    #[test]
    fn work_tree_programs_the_git_config_names_are_shown() {
        if keel_tools::shell::exec::find_program("git").is_none() {
            assert!(std::env::var_os("CI").is_none(), "CI needs git on PATH");
            tell!("SKIPPED: git is not installed");
            return;
        }
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        assert!(git_config_paths_check(dir.path()).is_none());
        std::fs::create_dir_all(dir.path().join(".git")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(
            dir.path().join(".git/config"),
            "[core]\n\thooksPath = .husky\n",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let check = git_config_paths_check(dir.path()).unwrap_or_else(|| panic!("no check"));
        assert!(
            check.detail.contains(".husky (core.hookspath)"),
            "{}",
            check.detail
        );
    }
}
