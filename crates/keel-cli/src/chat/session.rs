//! The live side of `keel chat`: the session (created on the first message, or resumed), ops
//! sent to it, its events fed to the screen, slash commands and `!command` carried out.

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Arc;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use keel_engine::approval::ApprovalGate;
use keel_engine::config::ApprovalPolicy;
use keel_engine::runtime::{OpAck, SessionBuilder, SessionHandle, SessionOverrides};
use keel_engine::{Engine, EventSink};
use keel_protocol::{Attachment, Event, EventKind, Op};
use keel_store::{SessionRecord, SqliteStore, Store};
use keel_tools::sandbox::SandboxPolicy;
use keel_tools::shell::exec;
use tokio::sync::mpsc::UnboundedSender;

use super::app::{Action, App, Picker};
use super::composer;
use super::slash::{self, Slash};
use super::transcript::{Level, Transcript};
use super::workflow;
use super::{app_for, now_ms};
use crate::{ChatArgs, setup};

/// Most characters of a `!command`'s output sent to the agent.
const SHELL_OUTPUT_CHARS: usize = 20_000;
/// Most workspace files offered for `@path` completion.
const MAX_FILES: usize = 20_000;

/// What reaches the chat loop.
#[derive(Debug)]
pub enum Msg {
    Key(KeyEvent),
    Paste(String),
    Redraw,
    Event(Box<Event>),
    ShellDone {
        id: String,
        cmd: String,
        output: String,
        failed: bool,
        /// What the transcript shows of it: the output's tail and the exit code.
        details: Box<keel_protocol::ToolDetails>,
    },
    /// A progress event of the flow `/workflow` runs.
    Flow(Box<keel_flow::FlowEvent>),
    /// That flow ended.
    FlowDone(workflow::Done),
}

impl Msg {
    /// Typed by the user (drawn at once) rather than produced by the session.
    pub fn is_input(&self) -> bool {
        matches!(self, Msg::Key(_) | Msg::Paste(_) | Msg::Redraw)
    }
}

/// Forwards the session's events to the chat loop.
struct ChannelSink(UnboundedSender<Msg>);

impl EventSink for ChannelSink {
    fn publish(&self, event: &Event) {
        let _ = self.0.send(Msg::Event(Box::new(event.clone())));
    }
}

pub struct Chat {
    pub app: App,
    workspace: PathBuf,
    store: Arc<dyn Store>,
    /// The same store, for the flow tables (`/workflow`).
    sqlite: Arc<SqliteStore>,
    builder: SessionBuilder,
    /// What the command line asked for (provider, model, mode).
    flags: SessionOverrides,
    overrides: SessionOverrides,
    policy: Option<ApprovalPolicy>,
    /// The engine the next session runs on.
    engine: Arc<Engine>,
    handle: Option<Arc<SessionHandle>>,
    tx: UnboundedSender<Msg>,
    shells: usize,
    /// The flow `/workflow` is running, if any.
    flow: Option<workflow::Running>,
}

impl Chat {
    /// Resolves the workspace, the session to continue and the model; errors here are shown
    /// before the screen opens.
    pub async fn open(args: &ChatArgs, tx: UnboundedSender<Msg>) -> anyhow::Result<Self> {
        let mut workspace = setup::workspace_dir(args.common.workspace.as_deref())?;
        let resume = match (&args.resume, args.cont) {
            (Some(id), _) => Some(setup::session_record(&workspace, id)?),
            (None, true) => Some(setup::latest_session(&workspace)?),
            (None, false) => None,
        };
        let mut flags = setup::overrides(&args.llm);
        flags.mode = args.mode.map(crate::ModeArg::mode);
        if let Some(record) = &resume
            && args.common.workspace.is_none()
        {
            workspace = setup::session_workspace(record)?;
        }
        let overrides = match &resume {
            Some(record) => SessionOverrides::resuming(record, &flags),
            None => flags.clone(),
        };
        let config = setup::load_config(&workspace, overrides.layer())?;
        let sqlite = setup::open_store(&config)?;
        let store: Arc<dyn Store> = sqlite.clone();
        let history =
            composer::history_path(&keel_engine::config::data_dir(&setup::env_var), &workspace);
        let builder = setup::session_builder(store.clone());
        let engine = Arc::new(
            builder
                .engine_with(config, &workspace)
                .map_err(setup::engine_usage_error)?,
        );
        let mut chat = Self {
            app: app_for(workspace.clone(), Some(history)),
            workspace,
            store,
            sqlite,
            builder,
            flags,
            overrides,
            policy: args.approval.map(crate::ApprovalArg::policy),
            engine,
            handle: None,
            tx,
            shells: 0,
            flow: None,
        };
        chat.show_engine();
        if let Some(record) = resume {
            chat.attach(record).await;
        }
        Ok(chat)
    }

    /// The live session's id, once there is one.
    pub fn session_id(&self) -> Option<String> {
        self.handle.as_ref().map(|h| h.id().to_string())
    }

    pub fn shell_running(&self) -> bool {
        self.shells > 0
    }

    fn gate(&self) -> Arc<ApprovalGate> {
        Arc::new(ApprovalGate::from_config(
            self.engine.config(),
            self.policy,
            true,
        ))
    }

    fn sinks(&self) -> Vec<Arc<dyn EventSink>> {
        vec![Arc::new(ChannelSink(self.tx.clone()))]
    }

    /// The status line's model, context window, mode and policy from the current engine.
    fn show_engine(&mut self) {
        let info = self.engine.provider_info();
        let config = self.engine.config();
        let st = &mut self.app.transcript.status;
        // The window the engine compacts against: configured, the provider's, else what Keel
        // knows of the model (a script that names a real model but declares no window).
        st.context_window = config
            .agent
            .context_window
            .or(info.context_window)
            .or_else(|| keel_llm::models::lookup(&info.model).map(|f| f.context_window));
        st.priced = keel_llm::models::price_for(&info.model, &config.llm.prices).is_some();
        st.provider = info.provider;
        st.model = info.model;
        self.app.mode = self.engine.mode().as_str().to_string();
        self.app.approval = self
            .policy
            .unwrap_or(self.engine.config().approval.policy)
            .as_str()
            .to_string();
    }

    /// The live session, created now if this chat has none yet.
    async fn session(&mut self) -> Result<Arc<SessionHandle>, String> {
        if let Some(h) = &self.handle {
            return Ok(h.clone());
        }
        let (handle, _) = SessionHandle::create(self.engine.clone(), self.sinks())
            .await
            .map_err(|e| format!("cannot start a session: {e}"))?;
        let handle = Arc::new(
            handle
                .rebuild_with(
                    self.builder.clone(),
                    &self.workspace,
                    self.overrides.clone(),
                )
                .approvals(self.gate()),
        );
        self.app.transcript.status.session = Some(handle.id().to_string());
        self.handle = Some(handle.clone());
        Ok(handle)
    }

    /// Continues the stored session `record`: its transcript replayed, a handle on it.
    async fn attach(&mut self, record: SessionRecord) {
        self.overrides = SessionOverrides::resuming(&record, &self.flags);
        match self.builder.engine(&self.workspace, &self.overrides) {
            Ok(engine) => self.engine = Arc::new(engine),
            Err(e) => {
                self.app
                    .notice(format!("cannot resume {}: {e}", record.id), Level::Error);
                return;
            }
        }
        let handle = SessionHandle::new(self.engine.clone(), record.id.clone(), self.sinks())
            .rebuild_with(
                self.builder.clone(),
                &self.workspace,
                self.overrides.clone(),
            )
            .approvals(self.gate());
        self.handle = Some(Arc::new(handle));
        self.app.transcript = Transcript::default();
        self.show_engine();
        let events = self
            .store
            .events(&record.id, 0)
            .await
            .map_err(|e| e.to_string());
        match events {
            Ok(events) => {
                for e in &events {
                    self.app.on_event(e, e.ts);
                }
            }
            Err(e) => self.app.notice(
                format!("cannot read the session's events: {e}"),
                Level::Error,
            ),
        }
        self.app.running = false;
        self.app.transcript.status.session = Some(record.id.clone());
        self.app.notice(
            format!(
                "resumed session {} ({}) · {}",
                record.id, record.status, record.task
            ),
            Level::Info,
        );
    }

    /// Sends what the composer holds, as Enter would.
    pub async fn send_composer(&mut self) {
        let action = self
            .app
            .on_key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE), now_ms());
        if let Some(a) = action {
            self.act(a).await;
        }
    }

    pub async fn on_msg(&mut self, msg: Msg) {
        let now = now_ms();
        match msg {
            Msg::Key(key) => {
                if let Some(action) = self.app.on_key(key, now) {
                    self.act(action).await;
                }
                if self.app.wants_files() {
                    self.app.files = Some(composer::workspace_files(&self.workspace, MAX_FILES));
                }
            }
            Msg::Paste(text) => self.app.on_paste(&text),
            Msg::Redraw => {}
            Msg::Event(event) => {
                let current = self.handle.as_ref().map(|h| h.id().to_string());
                if current.as_deref() == Some(event.session_id.as_str()) {
                    self.app.on_event(&event, now);
                }
            }
            Msg::Flow(event) => workflow::show_event(&mut self.app, &event),
            Msg::FlowDone(done) => {
                let name = self.flow.take().map(|f| f.name).unwrap_or_default();
                workflow::show_done(&mut self.app, &name, &done);
            }
            Msg::ShellDone {
                id,
                cmd,
                output,
                failed,
                details,
            } => {
                self.shells = self.shells.saturating_sub(1);
                self.app.on_event(
                    &synthetic(EventKind::ToolResult {
                        id,
                        name: "!".into(),
                        is_error: failed,
                        content: output.clone(),
                        details: *details,
                        metadata: None,
                    }),
                    now,
                );
                self.app.shell_outputs.push(Attachment {
                    name: format!("output of `{cmd}`, run by the user"),
                    content: output,
                });
                self.app.notice(
                    "the command's output goes to the agent with your next message",
                    Level::Info,
                );
            }
        }
    }

    async fn act(&mut self, action: Action) {
        match action {
            Action::Op(op) => self.submit(op).await,
            Action::Slash(cmd) => self.slash(cmd).await,
            Action::Shell(cmd) => self.shell(cmd),
            Action::Resume(id) => self.resume(&id).await,
        }
    }

    async fn submit(&mut self, op: Op) {
        let starts_turn = matches!(op, Op::UserMessage { .. } | Op::AnswerBlocker { .. });
        let handle = match self.session().await {
            Ok(h) => h,
            Err(e) => {
                self.app.running = false;
                self.app.transcript.untyped();
                self.app.notice(e, Level::Error);
                return;
            }
        };
        match handle.submit(op).await {
            Ok(OpAck::Turn(_)) => self.app.turn_started(now_ms()),
            Ok(OpAck::Undone(_) | OpAck::Done) => {}
            Err(e) => {
                if starts_turn {
                    self.app.running = false;
                    self.app.transcript.untyped();
                }
                self.app.notice(format!("✗ {e}"), Level::Error);
            }
        }
    }

    async fn slash(&mut self, cmd: Slash) {
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

    async fn resume(&mut self, id: &str) {
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
            let snaps = keel_engine::snapshot::Snapshots::open(&ws).map_err(|e| e.to_string())?;
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
        let id = format!("diff-{}", now_ms());
        let now = now_ms();
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
    fn shell(&mut self, cmd: String) {
        let id = format!("shell-{}", now_ms());
        self.app.on_event(
            &synthetic(EventKind::ToolCall {
                id: id.clone(),
                name: "!".into(),
                arguments: serde_json::json!({ "command": cmd }),
            }),
            now_ms(),
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
        req.roots = settings.roots_for(&self.workspace);
        req.env_keep = settings.env_keep.clone();
        let tx = self.tx.clone();
        self.shells += 1;
        tokio::spawn(async move {
            let mut details = keel_protocol::ToolDetails::default();
            let (output, failed) = match exec::run(req).await {
                Ok(out) => {
                    let mut text = out.combined_text();
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

    /// Ends the live session's handle (a running turn is cancelled and recorded).
    pub async fn shutdown(&mut self) {
        if let Some(f) = self.flow.take() {
            f.cancel.cancel();
        }
        if let Some(h) = self.handle.take() {
            h.shutdown().await;
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

/// An event the chat makes itself (a `!command`, `/diff`), drawn like the session's own.
fn synthetic(kind: EventKind) -> Event {
    Event {
        session_id: String::new(),
        seq: 0,
        ts: now_ms(),
        run_id: String::new(),
        parent_run_id: None,
        kind,
    }
}
