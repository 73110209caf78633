//! MCP tools as Keel tools: `mcp__<server>__<tool>` behind the same [`Tool`] trait as the
//! built-in ones, and `mcp_resources` to list and read the servers' resources.

use std::sync::Arc;

use futures::future::BoxFuture;
use keel_tools::{Tool, ToolContext, ToolEffect, ToolError, ToolOutput};
use serde_json::{Value, json};

use crate::config::EffectConfig;
use crate::hub::{Hub, run_on};
use crate::server::Server;

/// The longest tool name providers accept (OpenAI's limit).
const MAX_NAME: usize = 64;

/// `mcp__<server>__<tool>`, with characters providers reject replaced by `_` and cut to 64.
pub fn tool_name(server: &str, tool: &str) -> String {
    let clean = |s: &str| -> String {
        s.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    };
    let mut name = format!("mcp__{}__{}", clean(server), clean(tool));
    name.truncate(MAX_NAME);
    name
}

/// One tool of one server.
pub struct McpTool {
    pub(crate) name: String,
    /// The name the server knows it by.
    pub(crate) remote: String,
    pub(crate) description: String,
    pub(crate) schema: Value,
    pub(crate) effect: EffectConfig,
    pub(crate) server: Arc<Server>,
    /// The hub's runtime (the hub, which owns it, lives as long as the registry that holds it).
    pub(crate) handle: tokio::runtime::Handle,
}

impl Tool for McpTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn input_schema(&self) -> Value {
        self.schema.clone()
    }

    fn effect(&self) -> ToolEffect {
        match self.effect {
            EffectConfig::Unknown => ToolEffect::Unknown,
            EffectConfig::ReadOnly => ToolEffect::ReadOnly,
        }
    }

    fn execute<'a>(
        &'a self,
        args: Value,
        _ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(async move {
            let server = self.server.clone();
            let remote = self.remote.clone();
            let result = run_on(&self.handle, async move {
                server.call_tool(&remote, args).await
            })
            .await
            .map_err(|e| ToolError::Model(e.0))?;
            let meta = json!({"mcp": {"server": self.server.name(), "tool": self.remote}});
            map_result(&result, meta)
        })
    }
}

/// A `tools/call` result as Keel output: text blocks verbatim, images and audio described
/// (the model gets their type and size; the data stays in metadata), embedded resources as
/// their text, resource links by URI, and structured content as JSON when no text says it.
/// `isError` becomes a model error with the same text.
pub fn map_result(result: &Value, mut meta: Value) -> Result<ToolOutput, ToolError> {
    let mut parts: Vec<String> = Vec::new();
    let mut media = Vec::new();
    for block in result
        .get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let str_of = |k: &str| block.get(k).and_then(Value::as_str).unwrap_or_default();
        match str_of("type") {
            "text" => parts.push(str_of("text").to_string()),
            kind @ ("image" | "audio") => {
                let mime = str_of("mimeType");
                let bytes = str_of("data").len() / 4 * 3;
                parts.push(format!("[{kind}: {mime}, about {bytes} bytes]"));
                media.push(json!({"type": kind, "mimeType": mime, "bytes": bytes}));
            }
            "resource" => {
                let r = block.get("resource").cloned().unwrap_or(Value::Null);
                let uri = r.get("uri").and_then(Value::as_str).unwrap_or_default();
                match r.get("text").and_then(Value::as_str) {
                    Some(text) => parts.push(format!("[resource {uri}]\n{text}")),
                    None => parts.push(format!("[binary resource {uri}]")),
                }
            }
            "resource_link" => {
                let uri = str_of("uri");
                let name = str_of("name");
                parts.push(format!(
                    "[resource link: {name} {uri} — read it with mcp_resources]"
                ));
            }
            other => parts.push(format!("[unsupported content block `{other}`]")),
        }
    }
    let structured = result.get("structuredContent").filter(|v| !v.is_null());
    if let Some(s) = structured
        && parts.iter().all(|p| p.trim().is_empty())
    {
        parts.push(serde_json::to_string_pretty(s).unwrap_or_default());
    }
    let text = parts.join("\n");
    if result.get("isError").and_then(Value::as_bool) == Some(true) {
        let msg = if text.trim().is_empty() {
            "the MCP tool reported an error without a message".to_string()
        } else {
            text
        };
        return Err(ToolError::Model(msg));
    }
    if let Value::Object(m) = &mut meta {
        if !media.is_empty() {
            m.insert("media".into(), Value::Array(media));
        }
        if let Some(s) = structured {
            m.insert("structured".into(), s.clone());
        }
    }
    let mut out = ToolOutput::text(if text.is_empty() {
        "(the tool returned no content)".to_string()
    } else {
        text
    });
    out.details.external = true;
    Ok(out.with_metadata(meta))
}

/// `mcp_resources`: list a server's resources, or read one.
pub struct McpResources {
    /// Weak: the hub holds this tool.
    pub(crate) hub: std::sync::Weak<Hub>,
}

/// The resources tool's name.
pub const MCP_RESOURCES: &str = "mcp_resources";

impl Tool for McpResources {
    fn name(&self) -> &str {
        MCP_RESOURCES
    }

    fn description(&self) -> &str {
        "Lists the resources an MCP server offers (give `server`), or reads one (give `server` and `uri`)."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "server": {"type": "string", "description": "The MCP server's name."},
                "uri": {"type": "string", "description": "The resource to read; omit to list them."}
            },
            "required": ["server"]
        })
    }

    /// A resource is whatever the server reaches — a filesystem server's `~/.ssh`, a GitHub
    /// server's private repositories — so reading one is judged like the server's own tools:
    /// read-only only when the user declared every server read-only, else unknown (asked about
    /// under `on-request` and `untrusted`, with the `uri` shown: red-team pass 5, R5-12).
    fn effect(&self) -> ToolEffect {
        match self.hub.upgrade() {
            Some(hub) if hub.all_read_only() => ToolEffect::ReadOnly,
            _ => ToolEffect::Unknown,
        }
    }

    fn execute<'a>(
        &'a self,
        args: Value,
        _ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(async move {
            let name = args
                .get("server")
                .and_then(Value::as_str)
                .ok_or_else(|| ToolError::model("mcp_resources needs `server`"))?;
            let Some(hub) = self.hub.upgrade() else {
                return Err(ToolError::model("the MCP servers were stopped"));
            };
            hub.wait_for_server(name).await;
            let Some(server) = hub.server(name) else {
                let entries = hub.entries();
                let running: Vec<&str> = entries
                    .iter()
                    .filter(|e| e.server.is_some())
                    .map(|e| e.name.as_str())
                    .collect();
                let why = entries
                    .iter()
                    .find(|e| e.name == name)
                    .map(|e| {
                        format!(
                            " (it is {}; check it with `keel mcp test {name}`)",
                            e.status
                        )
                    })
                    .unwrap_or_default();
                return Err(ToolError::model(format!(
                    "no running MCP server `{name}`{why}; running: {}",
                    running.join(", ")
                )));
            };
            let uri = args.get("uri").and_then(Value::as_str).map(str::to_string);
            let result = hub
                .run(async move {
                    match uri {
                        Some(u) => server.read_resource(&u).await,
                        None => server.list_resources().await,
                    }
                })
                .await
                .map_err(|e| ToolError::Model(e.0))?;
            Ok(ToolOutput::text(render_resources(&result)))
        })
    }
}

fn render_resources(v: &Value) -> String {
    // A list of resources.
    if let Some(list) = v.as_array() {
        if list.is_empty() {
            return "(no resources)".into();
        }
        return list
            .iter()
            .map(|r| {
                let s = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or_default();
                format!("{} — {} {}", s("uri"), s("name"), s("mimeType"))
                    .trim_end()
                    .to_string()
            })
            .collect::<Vec<_>>()
            .join("\n");
    }
    // A read: contents[].
    let contents = v.get("contents").and_then(Value::as_array);
    contents
        .into_iter()
        .flatten()
        .map(|c| {
            let uri = c.get("uri").and_then(Value::as_str).unwrap_or_default();
            match c.get("text").and_then(Value::as_str) {
                Some(t) => t.to_string(),
                None => format!("[binary content of {uri}]"),
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_fit_every_provider() {
        assert_eq!(tool_name("py", "echo"), "mcp__py__echo");
        assert_eq!(tool_name("my server", "a.b"), "mcp__my_server__a_b");
        assert!(tool_name("s", &"x".repeat(100)).len() <= 64);
    }

    #[test]
    fn results_map_onto_text_and_metadata() {
        let r = json!({"content": [
            {"type": "text", "text": "hi"},
            {"type": "image", "mimeType": "image/png", "data": "AAAA"},
            {"type": "resource", "resource": {"uri": "file:///a", "text": "body"}}
        ], "structuredContent": {"n": 1}});
        let out = map_result(&r, json!({})).unwrap_or_default();
        assert!(out.content.contains("hi"));
        assert!(out.content.contains("[image: image/png"));
        assert!(out.content.contains("body"));
        assert!(out.details.external);
        let meta = out.metadata.unwrap_or_default();
        assert_eq!(meta["structured"], json!({"n": 1}));
        let only = map_result(
            &json!({"content": [], "structuredContent": {"n": 2}}),
            json!({}),
        );
        assert!(only.unwrap_or_default().content.contains("\"n\": 2"));
        let err = map_result(
            &json!({"content": [{"type": "text", "text": "bad"}], "isError": true}),
            json!({}),
        );
        assert_eq!(err.err(), Some(ToolError::Model("bad".into())));
    }
}
