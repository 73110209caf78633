//! The live side of `keel chat`: the session (created on the first message, or resumed), ops
//! sent to it, its events fed to the screen. Slash commands and `!command` are `commands.rs`.

use std::path::PathBuf;
use std::sync::Arc;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use keel_config::ApprovalPolicy;
use keel_engine::approval::ApprovalGate;
use keel_engine::runtime::{OpAck, SessionBuilder, SessionHandle, SessionOverrides};
use keel_engine::{Engine, EventSink};
use keel_protocol::{Attachment, Event, EventKind, Op};
use keel_store::{SessionRecord, SqliteStore, Store};
use tokio::sync::mpsc::UnboundedSender;

use super::app::{Action, App};
use super::composer;
use super::msg::{ChannelSink, Msg};
use super::theme::Theme;
use super::transcript::{Level, Transcript};
use super::workflow;
use crate::args::ChatArgs;
use crate::launch::{self, Launch, Resume};
use crate::setup;

/// Most workspace files offered for `@path` completion.
const MAX_FILES: usize = 20_000;

pub struct Chat {
    pub app: App,
    pub(super) workspace: PathBuf,
    pub(super) store: Arc<dyn Store>,
    /// The same store, for the flow tables (`/workflow`).
    pub(super) sqlite: Arc<SqliteStore>,
    pub(super) builder: SessionBuilder,
    /// What the command line asked for (provider, model, mode).
    pub(super) flags: SessionOverrides,
    pub(super) overrides: SessionOverrides,
    pub(super) policy: Option<ApprovalPolicy>,
    /// The engine the next session runs on.
    pub(super) engine: Arc<Engine>,
    pub(super) handle: Option<Arc<SessionHandle>>,
    pub(super) tx: UnboundedSender<Msg>,
    pub(super) shells: usize,
    /// The flow `/workflow` is running, if any.
    pub(super) flow: Option<workflow::Running>,
}

impl Chat {
    /// Resolves the workspace, the session to continue and the model; errors here are shown
    /// before the screen opens.
    pub async fn open(args: &ChatArgs, tx: UnboundedSender<Msg>) -> anyhow::Result<Self> {
        // The flags, the session to continue, its configuration and store: one pass.
        let Launch {
            workspace,
            flags,
            overrides,
            resumed: resume,
            config,
            store: sqlite,
            builder,
            // A chat outlives its first session: each opens the workspace afresh.
            shared: _,
        } = Launch::open(
            setup::workspace_dir(args.common.workspace.as_deref())?,
            args.common.workspace.is_some(),
            launch::overrides(&args.llm, args.mode, None),
            Resume::from_flags(args.resume.as_deref(), args.cont),
        )?;
        let store: Arc<dyn Store> = sqlite.clone();
        let history = composer::history_path(&keel_config::data_dir(&setup::env_var), &workspace);
        let engine = Arc::new(
            builder
                .engine_with(config, &workspace)
                .map_err(setup::engine_usage_error)?,
        );
        let mut chat = Self {
            app: App::new(
                workspace.clone(),
                composer::Composer::with_history(Some(history)),
                Theme::from_env(),
            ),
            workspace,
            store,
            sqlite,
            builder,
            flags,
            overrides,
            policy: args.approval.map(crate::args::ApprovalArg::policy),
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

    pub(super) fn gate(&self) -> Arc<ApprovalGate> {
        Arc::new(ApprovalGate::from_config(
            self.engine.config(),
            self.policy,
            true,
        ))
    }

    pub(super) fn sinks(&self) -> Vec<Arc<dyn EventSink>> {
        vec![Arc::new(ChannelSink(self.tx.clone()))]
    }

    /// The status line's model, context window, mode and policy from the current engine.
    pub(super) fn show_engine(&mut self) {
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
    pub(super) async fn session(&mut self) -> Result<Arc<SessionHandle>, String> {
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
    pub(super) async fn attach(&mut self, record: SessionRecord) {
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
        let action = self.app.on_key(
            KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE),
            keel_store::now_ms(),
        );
        if let Some(a) = action {
            self.act(a).await;
        }
    }

    pub async fn on_msg(&mut self, msg: Msg) {
        let now = keel_store::now_ms();
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

    pub(super) async fn submit(&mut self, op: Op) {
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
            Ok(OpAck::Turn(_)) => self.app.turn_started(keel_store::now_ms()),
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

/// An event the chat makes itself (a `!command`, `/diff`), drawn like the session's own.
pub(super) fn synthetic(kind: EventKind) -> Event {
    Event {
        session_id: String::new(),
        seq: 0,
        ts: keel_store::now_ms(),
        run_id: String::new(),
        parent_run_id: None,
        kind,
    }
}
