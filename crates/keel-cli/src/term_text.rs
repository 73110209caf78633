//! Text from the model, tools and the repository made safe for a terminal: control characters
//! (escape sequences that write the clipboard, retitle the window, clear the screen or move
//! the cursor up to erase lines) become visible caret notation (`^[`). Keel's own colours are
//! added after this, so they still work. `--json` output is not touched.

use keel_protocol::Event;

// One cleaning path for every crate that writes to a terminal (keel-queue's worker too).
pub(crate) use keel_tools::text::{needs_escape, visible};

/// `event` with every string in it made [`visible`] (the model's text, tool output, arguments,
/// error messages); the event itself when nothing needs it.
pub(crate) fn clean_event(event: &Event) -> std::borrow::Cow<'_, Event> {
    fn walk(v: &mut serde_json::Value) -> bool {
        match v {
            serde_json::Value::String(s) => match visible(s) {
                std::borrow::Cow::Owned(clean) => {
                    *s = clean;
                    true
                }
                std::borrow::Cow::Borrowed(_) => false,
            },
            // Every item is walked (no short circuit): each may need cleaning.
            serde_json::Value::Array(items) => {
                items.iter_mut().map(walk).filter(|c| *c).count() > 0
            }
            serde_json::Value::Object(map) => map.values_mut().map(walk).filter(|c| *c).count() > 0,
            _ => false,
        }
    }
    let Ok(mut value) = serde_json::to_value(event) else {
        return std::borrow::Cow::Borrowed(event);
    };
    if !walk(&mut value) {
        return std::borrow::Cow::Borrowed(event);
    }
    match serde_json::from_value(value) {
        Ok(clean) => std::borrow::Cow::Owned(clean),
        Err(_) => std::borrow::Cow::Borrowed(event),
    }
}
