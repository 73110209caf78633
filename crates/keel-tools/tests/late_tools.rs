//! Late tools (`keel_tools::late`): tools that arrive after a registry was built are found,
//! searched and dispatched from the moment they arrive, in every clone of the registry; their
//! arrival never changes the first-turn catalog's bytes (unless they arrive `active`); a name
//! whose source failed gets the source's explanation; a clone can hide later arrivals.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, OnceLock};

use futures::future::BoxFuture;
use keel_tools::{
    LateTool, LateTools, Tool, ToolContext, ToolEffect, ToolError, ToolOutput, ToolRegistry,
    ToolState, Workspace, builtin,
};
use serde_json::{Value, json};

struct Remote(&'static str);

impl Tool for Remote {
    fn name(&self) -> &str {
        self.0
    }

    fn description(&self) -> &str {
        "A remote tool."
    }

    fn input_schema(&self) -> Value {
        json!({"type": "object", "properties": {"text": {"type": "string"}}})
    }

    fn effect(&self) -> ToolEffect {
        ToolEffect::ReadOnly
    }

    fn execute<'a>(
        &'a self,
        _args: Value,
        _ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(async move { Ok(ToolOutput::text(format!("{} ran", self.0))) })
    }
}

/// A source whose tools arrive when `arrive` is called.
#[derive(Default)]
struct Source {
    tools: OnceLock<Vec<LateTool>>,
}

impl Source {
    fn arrive(&self, state: ToolState) {
        let tools: Vec<LateTool> = vec![(Arc::new(Remote("mcp__srv__echo")), state)];
        let _ = self.tools.set(tools);
    }
}

impl LateTools for Source {
    fn arrived(&self) -> Vec<&LateTool> {
        self.tools
            .get()
            .map(|t| t.iter().collect())
            .unwrap_or_default()
    }

    fn wait_for<'a>(&'a self, _name: &'a str) -> BoxFuture<'a, ()> {
        Box::pin(async {})
    }

    fn settle_listed(&self) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }

    fn settle_all(&self) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }

    fn missing(&self, name: &str) -> Option<String> {
        name.starts_with("mcp__srv__")
            .then(|| "the server `srv` did not start; check it with `keel mcp test srv`".into())
    }

    fn pending(&self) -> Option<String> {
        self.tools
            .get()
            .is_none()
            .then(|| "server(s) still starting: srv".into())
    }
}

fn registry(source: &Arc<Source>) -> ToolRegistry {
    let mut r = ToolRegistry::new();
    builtin::register_defaults(&mut r);
    r.set_late(source.clone());
    r
}

fn ctx() -> (tempfile::TempDir, ToolContext) {
    let dir = tempfile::tempdir().unwrap();
    let ctx = ToolContext::new(Workspace::new(dir.path()).unwrap());
    (dir, ctx)
}

fn catalog_bytes(r: &ToolRegistry) -> String {
    serde_json::to_string(&r.specs()).unwrap()
}

#[tokio::test]
async fn a_late_tool_is_callable_and_searchable_once_it_arrives_without_changing_the_head() {
    let source = Arc::new(Source::default());
    let reg = registry(&source);
    let clone = reg.clone();
    let before = catalog_bytes(&reg);
    let (_dir, ctx) = ctx();

    let early = reg
        .execute("mcp__srv__echo", json!({}), &ctx)
        .await
        .unwrap_err();
    assert!(early.to_string().contains("keel mcp test srv"), "{early}");
    let search = reg
        .execute("tool_search", json!({"query": "remote"}), &ctx)
        .await
        .unwrap();
    assert!(
        search.content.contains("still starting: srv"),
        "{}",
        search.content
    );

    source.arrive(ToolState::Deferred);
    assert_eq!(
        catalog_bytes(&reg),
        before,
        "a deferred arrival changed the head"
    );
    for r in [&reg, &clone] {
        assert_eq!(r.state("mcp__srv__echo"), Some(&ToolState::Deferred));
        assert!(r.names().any(|n| n == "mcp__srv__echo"));
        let out = r.execute("mcp__srv__echo", json!({}), &ctx).await.unwrap();
        assert_eq!(out.content, "mcp__srv__echo ran");
        let found = r
            .execute("tool_search", json!({"query": "remote"}), &ctx)
            .await
            .unwrap();
        assert!(
            found.content.contains("mcp__srv__echo"),
            "{}",
            found.content
        );
    }
}

#[test]
fn an_active_arrival_is_listed_and_a_clone_can_hide_later_arrivals() {
    let source = Arc::new(Source::default());
    let reg = registry(&source);
    let mut child = reg.clone();
    child.set_late_default(Some(ToolState::Hidden));
    source.arrive(ToolState::Active);
    assert!(reg.specs().iter().any(|s| s.name == "mcp__srv__echo"));
    assert!(!child.specs().iter().any(|s| s.name == "mcp__srv__echo"));
    assert_eq!(child.state("mcp__srv__echo"), Some(&ToolState::Hidden));
    // An own state set on an arrived tool wins over the default.
    assert!(child.set_state("mcp__srv__echo", ToolState::Deferred));
    assert_eq!(child.state("mcp__srv__echo"), Some(&ToolState::Deferred));
}
