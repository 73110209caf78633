//! The hub as the session registry's source of late tools ([`keel_tools::LateTools`]): a
//! server's tools arrive when it is ready; a call by exact name to a tool of a server still
//! starting waits for that server (bounded by the startup timeout); a tool of a server that
//! failed gets an error naming the server and `keel mcp test NAME`.

use std::sync::Arc;

use futures::future::BoxFuture;
use keel_tools::{LateTool, LateTools};

use crate::hub::{Hub, Slot, Status};
use crate::tool::{MCP_RESOURCES, tool_name};

impl Hub {
    /// The server whose tools are named like `name` (`mcp__<server>__…`; the longest match).
    fn slot_of(&self, name: &str) -> Option<&Arc<Slot>> {
        self.slots
            .iter()
            .filter(|s| name.starts_with(&tool_name(&s.name, "")))
            .max_by_key(|s| tool_name(&s.name, "").len())
    }

    /// Waits (bounded by the startup timeout) until the named server has settled.
    pub async fn wait_for_server(&self, server: &str) {
        if let Some(slot) = self.slots.iter().find(|s| s.name == server) {
            self.wait_slots(vec![slot.clone()]).await;
        }
    }

    /// Waits (bounded) until every `active = true` server has settled.
    pub async fn wait_for_active(&self) {
        let active = self.slots.iter().filter(|s| s.active).cloned().collect();
        self.wait_slots(active).await;
    }

    async fn wait_slots(&self, slots: Vec<Arc<Slot>>) {
        if slots.iter().all(|s| s.done.get().is_some()) {
            return;
        }
        let wait = self.wait_until(move || slots.iter().all(|s| s.done.get().is_some()));
        // On the hub's runtime: its timer runs whatever runtime the caller is on.
        let _ = self.handle.spawn(wait).await;
    }
}

impl LateTools for Hub {
    fn arrived(&self) -> Vec<&LateTool> {
        self.slots
            .iter()
            .filter_map(|s| s.done.get())
            .flat_map(|d| d.tools.iter())
            .chain(self.resources.iter())
            .collect()
    }

    fn find(&self, name: &str) -> Option<&LateTool> {
        if name == MCP_RESOURCES {
            return self.resources.as_ref();
        }
        let done = self.slot_of(name)?.done.get()?;
        done.tools.iter().find(|(t, _)| t.name() == name)
    }

    fn wait_for<'a>(&'a self, name: &'a str) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            if let Some(slot) = self.slot_of(name) {
                self.wait_slots(vec![slot.clone()]).await;
            }
        })
    }

    fn settle_listed(&self) -> BoxFuture<'_, ()> {
        Box::pin(self.wait_for_active())
    }

    fn settle_all(&self) -> BoxFuture<'_, ()> {
        Box::pin(self.wait_slots(self.slots.clone()))
    }

    fn missing(&self, name: &str) -> Option<String> {
        let slot = self.slot_of(name)?;
        let server = &slot.name;
        let test = format!("check it with `keel mcp test {server}`");
        Some(match slot.status() {
            Status::Starting => format!(
                "the MCP server `{server}` is still starting; call `{name}` again shortly ({test} if it never becomes ready)"
            ),
            Status::Failed(why) => format!(
                "the tool `{name}` is unavailable: the MCP server `{server}` did not start ({why}); {test}"
            ),
            Status::NeedsApproval(why) => format!(
                "the tool `{name}` is unavailable: the MCP server `{server}` from {} is not started, the user must decide: {why}",
                slot.origin.path().display()
            ),
            Status::Disabled => format!(
                "the tool `{name}` is unavailable: the MCP server `{server}` is disabled in its configuration"
            ),
            Status::Ready { .. } => {
                let done = slot.done.get()?;
                let skipped = done
                    .listed
                    .iter()
                    .find(|t| tool_name(server, &t.name) == name)
                    .and_then(|t| {
                        let head = format!("MCP tool `{}` of server `{server}` skipped", t.name);
                        done.warnings.iter().find(|w| w.starts_with(&head))
                    });
                if let Some(why) = skipped {
                    return Some(format!("{why}; no provider accepts its schema"));
                }
                let names: Vec<&str> = self
                    .find_all(slot)
                    .into_iter()
                    .map(|(t, _)| t.name())
                    .collect();
                format!(
                    "the MCP server `{server}` has no tool `{name}`; its tools: {}",
                    names.join(", ")
                )
            }
        })
    }

    fn pending(&self) -> Option<String> {
        let (mut starting, mut failed) = (Vec::new(), Vec::new());
        for s in &self.slots {
            match s.status() {
                Status::Starting => starting.push(s.name.as_str()),
                Status::Failed(_) => failed.push(s.name.as_str()),
                _ => {}
            }
        }
        let mut lines = Vec::new();
        if !starting.is_empty() {
            lines.push(format!(
                "MCP server(s) still starting: {}. Their tools (`mcp__<server>__<tool>`) are found here once ready; a call by exact name waits for its server.",
                starting.join(", ")
            ));
        }
        for name in failed {
            lines.push(format!(
                "The MCP server `{name}` did not start; its tools are unavailable (check it with `keel mcp test {name}`)."
            ));
        }
        (!lines.is_empty()).then(|| lines.join("\n"))
    }
}

impl Hub {
    fn find_all<'a>(&'a self, slot: &'a Slot) -> Vec<&'a LateTool> {
        slot.done
            .get()
            .map(|d| d.tools.iter().collect())
            .unwrap_or_default()
    }
}
