//! What reaches `keel chat`'s loop: keys and pastes from the terminal, the session's events,
//! a `!command`'s end, a `/workflow` run's progress and end.

use crossterm::event::KeyEvent;
use keel_engine::EventSink;
use keel_protocol::Event;
use tokio::sync::mpsc::UnboundedSender;

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
    FlowDone(Done),
}

impl Msg {
    /// Typed by the user (drawn at once) rather than produced by the session.
    pub fn is_input(&self) -> bool {
        matches!(self, Msg::Key(_) | Msg::Paste(_) | Msg::Redraw)
    }
}

/// Forwards the session's events to the chat loop.
pub struct ChannelSink(pub UnboundedSender<Msg>);

impl EventSink for ChannelSink {
    fn publish(&self, event: &Event) {
        let _ = self.0.send(Msg::Event(Box::new(event.clone())));
    }
}

/// How a background flow run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Done {
    Ended {
        run_id: String,
        status: String,
        error: Option<String>,
    },
    /// The run could not start or its store failed.
    Failed(String),
}
