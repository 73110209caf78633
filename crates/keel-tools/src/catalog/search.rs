//! `tool_search`: finds tools that are not in the first-turn catalog (deferred ones) by regex
//! or BM25 over their name, description and parameter names, and returns their schemas.
//!
//! The schemas travel in the tool result — the conversation's tail — so the cached head
//! (system prompt and tool list) never changes; a found tool is called by name like any other
//! (a deferred tool dispatches by exact name whether or not it was searched for).

use futures::future::BoxFuture;
use serde_json::{Value, json};

use crate::{Tool, ToolContext, ToolEffect, ToolError, ToolOutput, ToolRegistry};

/// The tool's name.
pub const TOOL_SEARCH: &str = "tool_search";

/// Results returned when the call gives no `limit`.
const DEFAULT_LIMIT: usize = 5;
/// Deferred tool names listed in the description (the rest are found by searching).
const MAX_NAMES_IN_DESCRIPTION: usize = 30;

/// `tool_search {query, limit?}`. The registry runs it (it searches the registry's own
/// catalog); executing it outside a registry is an error.
#[derive(Debug, Clone, Copy, Default)]
pub struct ToolSearch;

impl ToolSearch {
    const DESCRIPTION: &'static str = "Find more tools by keyword or regex over names, descriptions and parameters; returns their schemas. Found tools can be called right away.";

    /// The description as advertised: the base text plus the deferred tools' names, so a
    /// model can also call one directly.
    pub fn describe(deferred: &[String]) -> String {
        if deferred.is_empty() {
            return Self::DESCRIPTION.to_string();
        }
        let mut names: Vec<&str> = deferred
            .iter()
            .take(MAX_NAMES_IN_DESCRIPTION)
            .map(String::as_str)
            .collect();
        if deferred.len() > MAX_NAMES_IN_DESCRIPTION {
            names.push("…");
        }
        format!("{} More tools: {}.", Self::DESCRIPTION, names.join(", "))
    }
}

impl Tool for ToolSearch {
    fn name(&self) -> &str {
        TOOL_SEARCH
    }

    fn description(&self) -> &str {
        Self::DESCRIPTION
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "query": {
                    "type": "string",
                    "description": "Words or a regex, e.g. `git diff` or `^git_`; `select:a,b` returns those tools."
                },
                "limit": {"type": "integer", "description": "Most tools to return (default 5)."}
            },
            "required": ["query"]
        })
    }

    fn effect(&self) -> ToolEffect {
        ToolEffect::ReadOnly
    }

    fn execute<'a>(
        &'a self,
        _args: Value,
        _ctx: &'a ToolContext,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(async {
            Err(ToolError::Fatal(
                "tool_search runs through the tool registry (ToolRegistry::execute)".into(),
            ))
        })
    }
}

/// One searchable tool.
struct Doc {
    name: String,
    state: &'static str,
    description: String,
    schema: Value,
    terms: Vec<String>,
}

/// Runs a search over `registry`'s searchable tools (active and deferred).
pub fn search_tools(registry: &ToolRegistry, args: &Value) -> Result<ToolOutput, ToolError> {
    let query = args
        .get("query")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|q| !q.is_empty())
        .ok_or_else(|| {
            ToolError::model("tool_search needs `query`: words such as \"git diff\", or a regex")
        })?;
    let limit = args
        .get("limit")
        .and_then(Value::as_u64)
        .map_or(DEFAULT_LIMIT, |l| (l as usize).clamp(1, 20));
    let docs: Vec<Doc> = registry
        .tools()
        .filter(|t| t.name() != TOOL_SEARCH)
        .filter_map(|t| {
            let state = registry.state(t.name())?;
            state.searchable().then(|| {
                let schema = t.input_schema();
                let mut text = format!("{} {}", t.name(), t.description());
                if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                    for k in props.keys() {
                        text.push(' ');
                        text.push_str(k);
                    }
                }
                Doc {
                    name: t.name().to_string(),
                    state: state.as_str(),
                    description: t.description().to_string(),
                    schema,
                    terms: terms(&text),
                }
            })
        })
        .collect();
    let found = rank(&docs, query);
    let hits: Vec<&Doc> = found.into_iter().take(limit).map(|i| &docs[i]).collect();
    // Tools still arriving (MCP servers starting): say so, so a miss is not final.
    let pending = registry
        .late()
        .and_then(|l| l.pending())
        .map(|p| format!("\n\n{p}"))
        .unwrap_or_default();
    if hits.is_empty() {
        let names: Vec<&str> = docs.iter().map(|d| d.name.as_str()).collect();
        return Ok(ToolOutput::text(format!(
            "No tool matches `{query}`. Searchable tools: {}.{pending}",
            names.join(", ")
        )));
    }
    let mut out = format!(
        "{} tool(s) found; call them by name (now or later):\n",
        hits.len()
    );
    for d in &hits {
        out.push_str(&format!(
            "\n## {} ({})\n{}\nSchema: {}\n",
            d.name, d.state, d.description, d.schema
        ));
    }
    out.push_str(&pending);
    let names: Vec<&str> = hits.iter().map(|d| d.name.as_str()).collect();
    Ok(ToolOutput::text(out).with_metadata(json!({"tools": names})))
}

/// Indexes of matching docs, best first: `select:` names, else a regex (when the query has
/// regex syntax and compiles), else BM25 over the terms.
fn rank(docs: &[Doc], query: &str) -> Vec<usize> {
    if let Some(list) = query.strip_prefix("select:") {
        return list
            .split(',')
            .filter_map(|n| docs.iter().position(|d| d.name == n.trim()))
            .collect();
    }
    if query.chars().any(|c| "^$*+?()[]|\\".contains(c))
        && let Ok(re) = regex::RegexBuilder::new(query)
            .case_insensitive(true)
            .size_limit(1 << 20)
            .build()
    {
        let mut hits: Vec<usize> = (0..docs.len())
            .filter(|&i| re.is_match(&docs[i].name))
            .collect();
        for (i, d) in docs.iter().enumerate() {
            if !hits.contains(&i)
                && (re.is_match(&d.description) || d.terms.iter().any(|t| re.is_match(t)))
            {
                hits.push(i);
            }
        }
        return hits;
    }
    bm25(docs, &terms(query))
}

fn terms(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// Okapi BM25 (k1 = 1.2, b = 0.75); ties keep name order. Docs scoring zero are left out.
fn bm25(docs: &[Doc], query: &[String]) -> Vec<usize> {
    let n = docs.len() as f64;
    if n == 0.0 || query.is_empty() {
        return Vec::new();
    }
    let avg = docs.iter().map(|d| d.terms.len()).sum::<usize>() as f64 / n;
    let mut scored: Vec<(f64, usize)> = docs
        .iter()
        .enumerate()
        .map(|(i, d)| {
            let len = d.terms.len() as f64;
            let score: f64 = query
                .iter()
                .map(|q| {
                    let df = docs.iter().filter(|o| o.terms.contains(q)).count() as f64;
                    let tf = d.terms.iter().filter(|t| *t == q).count() as f64;
                    if tf == 0.0 {
                        return 0.0;
                    }
                    let idf = ((n - df + 0.5) / (df + 0.5) + 1.0).ln();
                    idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * len / avg.max(1.0)))
                })
                .sum();
            (score, i)
        })
        .filter(|(s, _)| *s > 0.0)
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    scored.into_iter().map(|(_, i)| i).collect()
}
