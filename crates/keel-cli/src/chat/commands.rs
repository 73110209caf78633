//! `keel chat`'s slash commands (`/new`, `/sessions`, `/resume`, `/compact`, `/mcp`, `/diff`,
//! `/workflow`, …) and `!command`, carried out on the live [`Chat`].

use std::ffi::OsString;
use std::sync::Arc;

use keel_protocol::{EventKind, Op};
use keel_store::SessionRecord;
use keel_tools::sandbox::SandboxPolicy;
use keel_tools::shell::exec;

use super::app::Picker;
use super::msg::Msg;
use super::session::{Chat, synthetic};
use super::slash::{self, Slash};
use super::transcript::{Level, Transcript};
use super::workflow;

/// Most characters of a `!command`'s output sent to the agent.
const SHELL_OUTPUT_CHARS: usize = 20_000;

impl Chat {
    pub(super) async fn slash(&mut self, cmd: Slash) {
        match cmd {
            Slash::Help => self.app.notice(slash::help(), Level::Info),
            Slash::Quit => self.app.quit = true,
            Slash::New => {
                self.shutdown().await;
                self.overrides = self.flags.clone();
                match self.builder.engine(&self.workspace, &self.overrides) {
                    Ok(engine) => self.engine = Arc::new(engine),
                    Err(e) => {
                        self.app.notice(format!("✗ cannot start a new session: {e}"), Level::Error);
                        return;
                    }
                }
                self.app.transcript = Transcript::default();
                self.app.running = false;
                self.show_engine();
                self.app.notice("new session: say what to do", Level::Info);
            }
            Slash::Sessions => match self.sessions().await {
                Ok(list) if list.is_empty() => {
                    self.app.notice("no session has run in this workspace yet", Level::Info);
                }
                Ok(list) => {
                    let mut text = String::from("sessions of this workspace (newest first; /resume ID continues one):");
                    for r in list.iter().take(15) {
                        text.push_str(&format!("\n  {}", session_label(r)));
                    }
                    self.app.notice(text, Level::Info);
                }
                Err(e) => self.app.notice(format!("✗ {e}"), Level::Error),
            },
            Slash::Resume(Some(id)) => self.resume(&id).await,
            Slash::Resume(None) => match self.sessions().await {
                Ok(list) if list.is_empty() => {
                    self.app.notice("no session has run in this workspace yet", Level::Info);
                }
                Ok(list) => {
                    self.app.picker = Some(Picker {
                        title: "resume a session".into(),
                        items: list.iter().map(|r| (r.id.clone(), session_label(r))).collect(),
                        selected: 0,
                    });
                }
                Err(e) => self.app.notice(format!("✗ {e}"), Level::Error),
            },
            Slash::Model(None) => {
                let st = &self.app.transcript.status;
                let window = st
                    .context_window
                    .map(|w| format!(" · context window {w} tokens"))
                    .unwrap_or_default();
                let text = format!("model: {}/{}{window} · /model NAME switches", st.provider, st.model);
                self.app.notice(text, Level::Info);
            }
            Slash::Model(Some(model)) => {
                if self.app.running {
                    self.app.notice("✗ a turn is running; switch models when it has finished", Level::Error);
                    return;
                }
                let Ok(handle) = self.session().await.map_err(|e| self.app.notice(e, Level::Error)) else {
                    return;
                };
                match handle.submit(Op::SetModel { model }).await {
                    Ok(_) => {
                        self.engine = handle.engine().await;
                        self.show_engine();
                        let st = &self.app.transcript.status;
                        let text = format!("model: {}/{} from the next turn", st.provider, st.model);
                        self.app.notice(text, Level::Ok);
                    }
                    Err(e) => self.app.notice(format!("✗ {e}"), Level::Error),
                }
            }
            Slash::Mode(None) => {
                let text = format!("mode: {} · /mode react|plan_exec sets it before the first message", self.app.mode);
                self.app.notice(text, Level::Info);
            }
            Slash::Mode(Some(mode)) => {
                let Ok(handle) = self.session().await.map_err(|e| self.app.notice(e, Level::Error)) else {
                    return;
                };
                match handle.submit(Op::SetMode { mode }).await {
                    Ok(_) => {
                        self.engine = handle.engine().await;
                        self.show_engine();
                        let text = format!("mode: {}", self.app.mode);
                        self.app.notice(text, Level::Ok);
                    }
                    Err(e) => self.app.notice(format!("✗ {e}"), Level::Error),
                }
            }
            Slash::Phase => {
                let text = match (&self.app.transcript.status.phase, self.app.mode.as_str()) {
                    (Some(p), _) => format!("plan_exec phase: {p}"),
                    (None, "plan_exec") => "plan_exec: no phase yet (the first message starts planning)".to_string(),
                    (None, mode) => format!("this session runs in {mode} mode, which has no phases; /mode plan_exec before the first message"),
                };
                self.app.notice(text, Level::Info);
            }
            Slash::Approval(None) => {
                let text = format!(
                    "approval policy: {} (never · on-request · untrusted; start with keel chat --approval POLICY to change it)",
                    self.app.approval
                );
                self.app.notice(text, Level::Info);
            }
            Slash::Approval(Some(p)) => self.app.notice(
                format!("changing the approval policy inside a session is not available yet; start with keel chat --approval {p}"),
                Level::Warn,
            ),
            Slash::Undo(turn) => {
                if self.handle.is_none() {
                    self.app.notice("nothing to undo: this session has not changed anything yet", Level::Info);
                    return;
                }
                self.submit(Op::Undo { to_turn: turn }).await;
            }
            Slash::Compact => {
                if self.handle.is_none() {
                    self.app.notice("nothing to compact yet", Level::Info);
                    return;
                }
                self.submit(Op::Compact).await;
            }
            Slash::Diff => self.diff().await,
            Slash::Cost => {
                let u = &self.app.transcript.status.usage;
                let text = format!(
                    "cost: {} · {} model request{}",
                    crate::render::usage_line(u),
                    u.requests,
                    if u.requests == 1 { "" } else { "s" }
                );
                self.app.notice(text, Level::Info);
            }
            Slash::Context => {
                let st = &self.app.transcript.status;
                let text = match (st.context_window, st.context_percent()) {
                    (Some(w), Some(p)) => format!("context: {} of {w} tokens ({p}%) in the latest request", st.context_tokens),
                    _ => format!("context: {} tokens in the latest request (the model's window is unknown)", st.context_tokens),
                };
                let text = match crate::context::dashboard(&self.workspace) {
                    Ok(d) => format!("{text}\n{}", super::layers::context_text(&d)),
                    Err(e) => format!("{text}\n✗ cannot read the prompt's layers: {e}"),
                };
                self.app.notice(text, Level::Info);
            }
            Slash::Memory => match self.store.memory_entries().await {
                Ok(entries) => self
                    .app
                    .notice(super::layers::memory_text(&entries), Level::Info),
                Err(e) => self
                    .app
                    .notice(format!("✗ cannot read memory: {e}"), Level::Error),
            },
            Slash::Skills => {
                let config_dir = keel_engine::rules::user_config_dir();
                let set = keel_engine::skills::discover(&self.workspace, config_dir.as_deref());
                self.app
                    .notice(super::layers::skills_text(&set), Level::Info);
            }
            Slash::Rules => {
                let files = keel_engine::rules::rule_files(&self.workspace);
                self.app
                    .notice(super::layers::rules_text(&files), Level::Info);
            }
            Slash::Workflow(arg) => self.workflow(arg),
            Slash::Mcp(words) => self.mcp(words).await,
            Slash::Init => {
                let root = self.workspace.clone();
                let done = tokio::task::spawn_blocking(move || {
                    crate::init::initialise(&root).map(|done| crate::init::report(&root, &done))
                })
                .await;
                match done {
                    Ok(Ok(report)) => self.app.notice(
                        format!("{report}\nA new session (/new) reads .keel/project.md in its prompt."),
                        Level::Ok,
                    ),
                    Ok(Err(e)) => self.app.notice(format!("✗ {e:#}"), Level::Error),
                    Err(e) => self.app.notice(format!("✗ /init stopped: {e}"), Level::Error),
                }
            }
        }
    }

    async fn sessions(&self) -> Result<Vec<SessionRecord>, String> {
        let here = self.workspace.display().to_string();
        self.store
            .list_sessions(500)
            .await
            .map(|all| all.into_iter().filter(|r| r.workspace == here).collect())
            .map_err(|e| format!("cannot list sessions: {e}"))
    }

    pub(super) async fn resume(&mut self, id: &str) {
        if self.app.running {
            self.app.notice(
                "✗ a turn is running; interrupt it (Esc) before switching sessions",
                Level::Error,
            );
            return;
        }
        let record = match self.store.get_session(id).await {
            Ok(r) => r,
            Err(e) => {
                self.app.notice(format!("✗ {e}"), Level::Error);
                return;
            }
        };
        if record.workspace != self.workspace.display().to_string() {
            self.app.notice(
                format!(
                    "✗ session {} ran in {}; continue it there: keel --resume {} -w {}",
                    record.id, record.workspace, record.id, record.workspace
                ),
                Level::Error,
            );
            return;
        }
        self.shutdown().await;
        self.attach(record).await;
    }

    /// `/mcp …`: `keel mcp …` in this workspace, its output as a notice (servers added or
    /// approved start with the next session).
    async fn mcp(&mut self, mut words: Vec<String>) {
        use clap::Parser;
        /// `/mcp`'s words, parsed as `keel mcp` parses its command line.
        #[derive(Parser)]
        #[command(name = "/mcp", no_binary_name = true, disable_help_subcommand = true)]
        struct McpLine {
            #[command(subcommand)]
            command: crate::mcp::McpCommand,
        }
        if words.is_empty() {
            words.push("list".into());
        }
        // `-w` right after the subcommand: before any `--` that starts a server's command.
        let mut argv = vec![words.remove(0)];
        argv.extend(["-w".into(), self.workspace.display().to_string()]);
        argv.extend(words);
        let args = match McpLine::try_parse_from(argv) {
            Ok(args) => args,
            Err(e) => {
                self.app
                    .notice(e.render().to_string().trim_end().to_string(), Level::Error);
                return;
            }
        };
        let done = tokio::task::spawn_blocking(move || {
            let mut out = Vec::new();
            let code = crate::mcp::run(args.command, &mut out);
            (code, String::from_utf8_lossy(&out).into_owned())
        })
        .await;
        match done {
            Ok((Ok(code), text)) => self.app.notice(
                text.trim_end().to_string(),
                if code == crate::exit::COMPLETED {
                    Level::Info
                } else {
                    Level::Error
                },
            ),
            Ok((Err(e), text)) => {
                let text = format!(
                    "{}✗ {e:#}",
                    if text.is_empty() { String::new() } else { text }
                );
                self.app.notice(text, Level::Error);
            }
            Err(e) => self
                .app
                .notice(format!("✗ /mcp stopped: {e}"), Level::Error),
        }
    }

    /// `/diff`: in a git repository, its uncommitted changes; elsewhere (Keel keeps its own
    /// snapshot repository there), what this session changed, from its snapshots.
    async fn diff(&mut self) {
        let ws = self.workspace.clone();
        let session = self.session_id();
        let found = tokio::task::spawn_blocking(move || {
            let snaps = keel_snapshot::Snapshots::open(&ws).map_err(|e| e.to_string())?;
            if snaps.in_user_repository() {
                return Ok(None);
            }
            let Some(session) = session else {
                return Ok(Some(None));
            };
            snaps
                .session_diff(&session)
                .map(|d| Some(d.map(|d| (session, d))))
                .map_err(|e| e.to_string())
        })
        .await
        .unwrap_or_else(|e| Err(format!("the diff stopped: {e}")));
        match found {
            Ok(None) => self.git_diff(),
            Ok(Some(None)) => self.app.notice(
                "nothing to show: this chat has not changed any files yet (the workspace is not a git repository, so /diff shows what this session changed)",
                Level::Info,
            ),
            Ok(Some(Some((session, diff)))) if diff.trim().is_empty() => self.app.notice(
                format!("session {session} has no changes in the workspace (none made, or all undone)"),
                Level::Info,
            ),
            Ok(Some(Some((_, diff)))) => self.diff_cell("session diff", diff),
            Err(e) => self.app.notice(format!("✗ cannot show the changes: {e}"), Level::Error),
        }
    }

    /// A diff, drawn as a tool call's cell.
    fn diff_cell(&mut self, name: &str, diff: String) {
        let id = format!("diff-{}", keel_store::now_ms());
        let now = keel_store::now_ms();
        self.app.on_event(
            &synthetic(EventKind::ToolCall {
                id: id.clone(),
                name: name.into(),
                arguments: serde_json::json!({}),
            }),
            now,
        );
        self.app.on_event(
            &synthetic(EventKind::ToolResult {
                id,
                name: name.into(),
                is_error: false,
                content: String::new(),
                details: keel_protocol::ToolDetails {
                    diff: Some(diff),
                    ..Default::default()
                },
                metadata: None,
            }),
            now,
        );
    }

    /// `git diff` of the workspace (hardened git, [`super::diff`]: nothing a command planted in
    /// `.git` runs), as a diff cell.
    fn git_diff(&mut self) {
        match super::diff::workspace_diff(&self.workspace) {
            Ok(diff) if diff.trim().is_empty() => {
                self.app.notice("no uncommitted changes", Level::Info);
            }
            Ok(diff) => self.diff_cell("git diff", diff),
            Err(e) => self.app.notice(format!("✗ {e}"), Level::Error),
        }
    }

    /// `!command`: runs under the same sandbox as the agent's `run_command` (workspace-write).
    pub(super) fn shell(&mut self, cmd: String) {
        let id = format!("shell-{}", keel_store::now_ms());
        self.app.on_event(
            &synthetic(EventKind::ToolCall {
                id: id.clone(),
                name: "!".into(),
                arguments: serde_json::json!({ "command": cmd }),
            }),
            keel_store::now_ms(),
        );
        let settings = self.engine.config().shell.tool_settings();
        let mut req = exec::ExecRequest::new(
            vec![
                exec::shell_program().into_os_string(),
                OsString::from("-c"),
                OsString::from(&cmd),
            ],
            &self.workspace,
        );
        req.policy = settings.policy_for(SandboxPolicy::WorkspaceWrite);
        req.timeout = settings.default_timeout;
        // The user's own command line: their network setting.
        req.roots = settings.approved_roots_for(&self.workspace);
        req.env_keep = settings.env_keep.clone();
        // The user typed it: what it installs into a virtual environment is theirs.
        req.approved = true;
        let tx = self.tx.clone();
        self.shells += 1;
        tokio::spawn(async move {
            let mut details = keel_protocol::ToolDetails::default();
            let (output, failed) = match exec::run(req).await {
                Ok(out) => {
                    let mut text = out.combined_text();
                    // First, so cutting a long output never drops it.
                    if let Some(report) = &out.quarantined {
                        text = format!("{report}\n{text}");
                    }
                    details.output_tail = Some(keel_protocol::Excerpt::tail(&text));
                    details.exit_code = out.exit_code();
                    if text.chars().count() > SHELL_OUTPUT_CHARS {
                        text =
                            text.chars().take(SHELL_OUTPUT_CHARS).collect::<String>() + "\n… (cut)";
                    }
                    let status = match out.ending {
                        exec::Ending::Exited(c) => format!("exit code {c}"),
                        exec::Ending::Signalled(s) => format!("killed by signal {s}"),
                        exec::Ending::TimedOut => "timed out".into(),
                        exec::Ending::Cancelled => "cancelled".into(),
                    };
                    (format!("{status}\n{text}"), !out.success())
                }
                Err(e) => (format!("the command could not start: {e}"), true),
            };
            let _ = tx.send(Msg::ShellDone {
                id,
                cmd,
                output,
                failed,
                details: Box::new(details),
            });
        });
    }

    /// `/workflow`: the flows here, or one run in the background (one at a time).
    fn workflow(&mut self, arg: Option<String>) {
        let Some(arg) = arg else {
            self.app
                .notice(workflow::list_text(&self.workspace), Level::Info);
            return;
        };
        if arg == "stop" {
            match &self.flow {
                Some(running) => {
                    running.cancel.cancel();
                    self.app
                        .notice(format!("stopping flow {}…", running.name), Level::Info);
                }
                None => self.app.notice("no flow is running", Level::Info),
            }
            return;
        }
        if self.app.running {
            self.app.notice(
                "the agent is working in this workspace; start the flow when its turn is over (Esc interrupts it)",
                Level::Warn,
            );
            return;
        }
        if let Some(running) = &self.flow {
            self.app.notice(
                format!(
                    "flow {} is still running; wait for its last line, or /workflow stop, before starting another",
                    running.name
                ),
                Level::Warn,
            );
            return;
        }
        match workflow::start(
            &self.workspace,
            &arg,
            self.engine.config(),
            self.sqlite.clone(),
            self.overrides.clone(),
            self.tx.clone(),
        ) {
            Ok(running) => self.flow = Some(running),
            Err(e) => self.app.notice(format!("✗ {e}"), Level::Error),
        }
    }
}

/// `0198f3a2 · 2026-11-23 16:20 · completed · fix the tests`
fn session_label(r: &SessionRecord) -> String {
    let id: String = r.id.chars().take(8).collect();
    let task: String = r
        .task
        .lines()
        .next()
        .unwrap_or("")
        .chars()
        .take(50)
        .collect();
    format!(
        "{id} · {} · {} · {task}",
        crate::render::when(r.updated_at),
        r.status
    )
}
