//! The set of tools a session can call, in a deterministic order.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::future::BoxFuture;
use keel_protocol::ToolSpec;
use serde_json::Value;

use crate::catalog::{TOOL_SEARCH, ToolSearch, ToolState, default_state, search_tools};
use crate::late::LateTools;
use crate::{Tool, ToolContext, ToolEffect, ToolError, ToolOutput};

/// Runs after every successful call of a tool with [`ToolEffect::WritesFiles`], given the
/// workspace-relative paths it wrote (`details.files`); what it returns is appended to the
/// tool result. Auto-lint ([`crate::shell::AutoLint`]) is one.
pub trait PostWriteHook: Send + Sync {
    /// Inspects the written files; `Some(text)` is appended to the tool result for the model.
    fn after_write<'a>(
        &'a self,
        paths: &'a [String],
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Option<String>>;
}

/// Tools by name, with the lifecycle table beside them (one [`ToolState`] per name; see
/// [`crate::catalog`]). Iteration and the advertised catalog are sorted by name, so the
/// catalog's bytes never depend on registration order (the cached prompt head relies on this).
#[derive(Clone, Default)]
pub struct ToolRegistry {
    tools: BTreeMap<String, Arc<dyn Tool>>,
    /// The lifecycle table: every registered tool's state, plus removed names.
    states: BTreeMap<String, ToolState>,
    post_write: Option<Arc<dyn PostWriteHook>>,
    /// Tools that arrive after build (see [`crate::late`]); the registry's own tools and
    /// states take precedence over theirs.
    late: Option<Arc<dyn LateTools>>,
    /// The state of late tools with no state of their own here (a subagent hides the ones
    /// that arrive after its scope was fixed).
    late_default: Option<ToolState>,
}

impl std::fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.tools.keys()).finish()
    }
}

impl ToolRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a tool in its default state ([`default_state`]: the built-in catalog's state,
    /// `deferred` for any other tool), replacing any tool of the same name.
    pub fn register(&mut self, tool: impl Tool + 'static) -> &mut Self {
        self.register_arc(Arc::new(tool))
    }

    /// Adds a shared tool in its default state, replacing any tool of the same name.
    pub fn register_arc(&mut self, tool: Arc<dyn Tool>) -> &mut Self {
        let state = default_state(tool.name());
        self.register_with_state(tool, state)
    }

    /// Adds a shared tool in the given state, replacing any tool of the same name.
    pub fn register_with_state(&mut self, tool: Arc<dyn Tool>, state: ToolState) -> &mut Self {
        let name = tool.name().to_string();
        self.tools.insert(name.clone(), tool);
        self.states.insert(name, state);
        self
    }

    /// Sets a name's lifecycle state. A [`ToolState::Removed`] name needs no tool; every other
    /// state applies only to a registered (or arrived late) tool (`false` when there is none).
    pub fn set_state(&mut self, name: &str, state: ToolState) -> bool {
        if matches!(state, ToolState::Removed { .. }) {
            self.tools.remove(name);
        } else if self.get(name).is_none() {
            return false;
        }
        self.states.insert(name.to_string(), state);
        true
    }

    /// A name's lifecycle state (`None` for a name never registered or removed).
    pub fn state(&self, name: &str) -> Option<&ToolState> {
        if let Some(s) = self.states.get(name) {
            return Some(s);
        }
        let (_, state) = self.late.as_ref()?.find(name)?;
        Some(self.late_default.as_ref().unwrap_or(state))
    }

    /// Whether a call by this exact name runs.
    pub fn dispatchable(&self, name: &str) -> bool {
        self.get(name).is_some() && self.state(name).is_some_and(ToolState::dispatchable)
    }

    /// Adds a source of tools that arrive after build (MCP servers starting in the
    /// background), replacing any earlier one.
    pub fn set_late(&mut self, late: Arc<dyn LateTools>) -> &mut Self {
        self.late = Some(late);
        self
    }

    /// The source of late tools, if any.
    pub fn late(&self) -> Option<&Arc<dyn LateTools>> {
        self.late.as_ref()
    }

    /// Late tools with no state of their own here get `state` (`None`: the source's).
    pub fn set_late_default(&mut self, state: Option<ToolState>) -> &mut Self {
        self.late_default = state;
        self
    }

    /// Waits (bounded) until the tool `name` has arrived or its source failed; at once for
    /// any other name.
    pub async fn wait_for(&self, name: &str) {
        if self.tools.contains_key(name) {
            return;
        }
        if let Some(late) = &self.late {
            late.wait_for(name).await;
        }
    }

    /// Waits (bounded) until every late source with listed tools has settled, so the
    /// first-turn catalog ([`ToolRegistry::specs`]) does not depend on timing.
    pub async fn settle_listed(&self) {
        if let Some(late) = &self.late {
            late.settle_listed().await;
        }
    }

    /// Waits (bounded) until every late source has settled (a subagent's scope is fixed from
    /// the tools there are).
    pub async fn settle_all(&self) {
        if let Some(late) = &self.late {
            late.settle_all().await;
        }
    }

    /// Why `name` cannot be called yet (its late source failed or is still starting).
    pub fn late_missing(&self, name: &str) -> Option<String> {
        if self.tools.contains_key(name) {
            return None;
        }
        self.late.as_ref()?.missing(name)
    }

    /// Every tool, own and arrived, sorted by name (own ones shadow late ones).
    fn all(&self) -> Vec<(&str, &Arc<dyn Tool>)> {
        let mut all: BTreeMap<&str, &Arc<dyn Tool>> =
            self.tools.iter().map(|(n, t)| (n.as_str(), t)).collect();
        if let Some(late) = &self.late {
            for (t, _) in late.arrived() {
                all.entry(t.name()).or_insert(t);
            }
        }
        all.into_iter().collect()
    }

    /// Names in the first-turn catalog, sorted.
    pub fn listed_names(&self) -> Vec<String> {
        self.names_where(ToolState::listed)
    }

    /// Names `tool_search` can find (active and deferred), sorted.
    pub fn searchable_names(&self) -> Vec<String> {
        self.names_where(ToolState::searchable)
    }

    /// Deferred names, sorted.
    pub fn deferred_names(&self) -> Vec<String> {
        self.names_where(|s| *s == ToolState::Deferred)
    }

    fn names_where(&self, keep: impl Fn(&ToolState) -> bool) -> Vec<String> {
        self.all()
            .into_iter()
            .filter(|(n, _)| self.state(n).is_some_and(&keep))
            .map(|(n, _)| n.to_string())
            .collect()
    }

    /// Sets the hook that runs after every successful file-writing tool call (replacing any
    /// earlier one).
    pub fn set_post_write_hook(&mut self, hook: Arc<dyn PostWriteHook>) -> &mut Self {
        self.post_write = Some(hook);
        self
    }

    /// Removes a tool by name (and its lifecycle entry).
    pub fn remove(&mut self, name: &str) -> Option<Arc<dyn Tool>> {
        self.states.remove(name);
        self.tools.remove(name)
    }

    /// A tool by name (an own one, else one that arrived late).
    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.tools
            .get(name)
            .or_else(|| self.late.as_ref()?.find(name).map(|(t, _)| t))
    }

    /// Tool names, sorted (late tools that have arrived included).
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.all().into_iter().map(|(n, _)| n)
    }

    /// Tools, sorted by name (late tools that have arrived included).
    pub fn tools(&self) -> impl Iterator<Item = &Arc<dyn Tool>> {
        self.all().into_iter().map(|(_, t)| t)
    }

    /// The first-turn catalog as advertised to the model: the active tools, sorted by name.
    /// `tool_search`'s description names the registry's own deferred tools — never late ones,
    /// whose arrival must not change these bytes — so it is deterministic too.
    pub fn specs(&self) -> Vec<ToolSpec> {
        let deferred: Vec<String> = self
            .deferred_names()
            .into_iter()
            .filter(|n| self.tools.contains_key(n))
            .collect();
        self.tools()
            .filter(|t| self.state(t.name()).is_some_and(ToolState::listed))
            .map(|t| ToolSpec {
                name: t.name().to_string(),
                description: if t.name() == TOOL_SEARCH {
                    ToolSearch::describe(&deferred)
                } else {
                    t.description().to_string()
                },
                input_schema: t.input_schema(),
            })
            .collect()
    }

    /// Runs the named tool. An unknown name is a model error naming the closest tool and
    /// listing the available ones, never a crash; a removed one says what replaced it; a
    /// deprecated one runs and its result metadata carries `deprecated: {replacement}`.
    pub async fn execute(
        &self,
        name: &str,
        args: Value,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let Some(tool) = self.get(name).filter(|_| self.dispatchable(name)) else {
            return Err(ToolError::Model(self.unknown_tool_message(name)));
        };
        if name == TOOL_SEARCH {
            // A search while MCP servers are still starting would find none of their tools:
            // wait (bounded by their startup timeout; at once once they have settled).
            tokio::select! {
                () = self.settle_all() => {}
                () = ctx.cancel.cancelled() => {}
            }
            return search_tools(self, &args);
        }
        // A write holds the workspace's lock shared: a command the approval gate judged by
        // its files runs alone, and no write lands between its check and its end (R6-15).
        let hold = match tool.effect() {
            ToolEffect::WritesFiles => {
                Some(crate::shell::judged::hold_for_write(ctx.workspace.root()).await)
            }
            _ => None,
        };
        let executed = tool.execute(args, ctx).await;
        drop(hold);
        let mut output = executed?;
        if let Some(ToolState::Deprecated { replacement }) = self.state(name) {
            let mut meta = match output.metadata.take() {
                Some(Value::Object(m)) => m,
                Some(other) => {
                    let mut m = serde_json::Map::new();
                    m.insert("value".into(), other);
                    m
                }
                None => serde_json::Map::new(),
            };
            meta.insert(
                "deprecated".into(),
                serde_json::json!({"tool": name, "replacement": replacement}),
            );
            output.metadata = Some(Value::Object(meta));
        }
        // What a write made into a path the user's git reads or runs (a `package.json` given
        // lint-staged's section) is moved out of git's way, whichever tool wrote it (R6-9).
        if tool.effect() == ToolEffect::WritesFiles
            && let Some(note) = crate::shell::git_programs::after_file_write(
                ctx.workspace.root(),
                &written_paths(&output),
            )
        {
            if !output.content.is_empty() {
                output.content.push_str("\n\n");
            }
            output.content.push_str(&note);
        }
        // What a write made hidden from the user's review (a `.gitignore` ignoring itself and
        // the package written before it: R9-7) is moved aside.
        if tool.effect() == ToolEffect::WritesFiles
            && let Some(note) = crate::shell::session_hidden::after_file_write(
                ctx.workspace.root(),
                &written_paths(&output),
            )
        {
            if !output.content.is_empty() {
                output.content.push_str("\n\n");
            }
            output.content.push_str(&note);
        }
        if tool.effect() == ToolEffect::WritesFiles
            && let Some(hook) = &self.post_write
        {
            let paths = written_paths(&output);
            if !paths.is_empty()
                && let Some(note) = hook.after_write(&paths, ctx).await
            {
                if !output.content.is_empty() {
                    output.content.push_str("\n\n");
                }
                output.content.push_str(&note);
            }
        }
        Ok(output)
    }

    fn unknown_tool_message(&self, name: &str) -> String {
        if let Some(why) = self.late_missing(name) {
            return why;
        }
        if let Some(ToolState::Removed { replacement }) = self.state(name) {
            return match replacement {
                Some(r) => format!("the tool `{name}` was removed; use `{r}` instead."),
                None => format!("the tool `{name}` was removed."),
            };
        }
        let available = self.listed_names();
        let nearest = self
            .searchable_names()
            .into_iter()
            .map(|n| (edit_distance(&name.to_lowercase(), &n), n))
            .min()
            .filter(|(d, n)| *d <= n.len() / 2 + 1);
        let mut msg = format!("unknown tool `{name}`.");
        if let Some((_, n)) = nearest {
            msg.push_str(&format!(" Did you mean `{n}`?"));
        }
        msg.push_str(&format!(" Available tools: {}.", available.join(", ")));
        msg
    }
}

/// The files a tool result says it wrote.
fn written_paths(output: &ToolOutput) -> Vec<String> {
    output.details.files.clone()
}

/// Levenshtein distance over chars (names are short).
pub(crate) fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for (i, ca) in a.chars().enumerate() {
        cur[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            cur[j + 1] = (prev[j + 1] + 1).min(cur[j] + 1).min(prev[j] + cost);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Workspace;
    use crate::builtin;

    #[tokio::test]
    async fn unknown_tool_suggests_the_nearest() {
        let mut reg = ToolRegistry::new();
        builtin::register_defaults(&mut reg);
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let ctx = ToolContext::new(Workspace::new(dir.path()).unwrap_or_else(|e| panic!("{e}")));
        let err = reg
            .execute("read_fil", serde_json::json!({}), &ctx)
            .await
            .err();
        let Some(ToolError::Model(msg)) = err else {
            panic!("expected a model error, got {err:?}");
        };
        assert!(msg.contains("unknown tool `read_fil`"), "{msg}");
        assert!(msg.contains("Did you mean `read_file`?"), "{msg}");
        assert!(msg.contains("list_files"), "{msg}");
    }

    #[test]
    fn catalog_is_sorted_whatever_the_registration_order() {
        let mut a = ToolRegistry::new();
        a.register(builtin::ReadFile)
            .register(builtin::CreateFile)
            .register(builtin::ListFiles);
        let mut b = ToolRegistry::new();
        b.register(builtin::ListFiles)
            .register(builtin::ReadFile)
            .register(builtin::CreateFile);
        let sa = serde_json::to_string(&a.specs()).unwrap_or_default();
        let sb = serde_json::to_string(&b.specs()).unwrap_or_default();
        assert_eq!(sa, sb);
        assert_eq!(
            a.names().collect::<Vec<_>>(),
            ["create_file", "list_files", "read_file"]
        );
    }

    #[test]
    fn distance() {
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("", "ab"), 2);
    }
}
