//! `codebase_search`: ranked locations for a concept, an identifier or a file name, from the
//! workspace index (built on first use, refreshed before every search).

use std::sync::Arc;

use keel_index::{IndexSettings, Progress, SearchKind, SearchQuery, SharedIndex};
use schemars::JsonSchema;
use serde::Deserialize;
use tokio_util::sync::CancellationToken;

use super::blocking;
use crate::{ToolContext, ToolEffect, ToolError, ToolOutput, TypedTool};

/// Default and largest number of hits.
const DEFAULT_LIMIT: usize = 10;
const MAX_LIMIT: usize = 50;

/// What to return.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Any,
    // Definitions; for a report or a description, the functions, methods and classes to
    // open, ranked with their file's evidence. `level: function` says the same (the aliases
    // keep the schema, and so the first request, unchanged).
    #[serde(alias = "function", alias = "definition")]
    Symbol,
    File,
}

/// Arguments of `codebase_search`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CodebaseSearchArgs {
    /// Words, a description of what the code does, or an identifier.
    pub query: String,
    /// `any` (default), `symbol` (definitions) or `file`.
    #[serde(default, alias = "level")]
    pub kind: Option<Kind>,
    /// Only paths matching this glob, e.g. `src/**/*.rs`.
    #[serde(default)]
    pub path_glob: Option<String>,
    /// Most hits to return (default 10).
    #[serde(default)]
    pub limit: Option<usize>,
}

/// Hybrid search over the workspace index.
#[derive(Debug, Clone)]
pub struct CodebaseSearch {
    index: Arc<SharedIndex>,
}

impl Default for CodebaseSearch {
    fn default() -> Self {
        Self::new(Arc::new(SharedIndex::new(IndexSettings::default())))
    }
}

impl CodebaseSearch {
    /// A tool over `index` (shared with whoever else uses the workspace index, e.g. the
    /// codemap at run start).
    pub fn new(index: Arc<SharedIndex>) -> Self {
        Self { index }
    }
}

struct Cancel(CancellationToken);

impl Progress for Cancel {
    fn cancelled(&self) -> bool {
        self.0.is_cancelled()
    }
}

impl TypedTool for CodebaseSearch {
    type Args = CodebaseSearchArgs;
    const NAME: &'static str = "codebase_search";

    fn description(&self) -> &str {
        "Find where something is in the codebase: ranked code locations (file, lines, definition, snippet) for a description, identifier or file name. Start here; use grep for exact patterns."
    }

    fn effect(&self) -> ToolEffect {
        ToolEffect::ReadOnly
    }

    async fn run(
        &self,
        args: CodebaseSearchArgs,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        if args.query.trim().is_empty() {
            return Err(ToolError::model("query is empty: describe what to find"));
        }
        let query = SearchQuery {
            text: args.query.clone(),
            kind: match args.kind.unwrap_or(Kind::Any) {
                Kind::Any => SearchKind::Any,
                Kind::Symbol => SearchKind::Symbol,
                Kind::File => SearchKind::File,
            },
            path_glob: args.path_glob.clone(),
            limit: args.limit.unwrap_or(DEFAULT_LIMIT).clamp(1, MAX_LIMIT),
            ..SearchQuery::default()
        };
        let index = self.index.clone();
        let root = ctx.workspace.root().to_path_buf();
        let cancel = Cancel(ctx.cancel.clone());
        blocking(move || {
            let started = std::time::Instant::now();
            let (result, fresh) = index
                .with_fresh(&root, &cancel, |idx| {
                    let hits = idx.search(&query);
                    let files = idx.stats().map(|s| s.files).unwrap_or(0);
                    (hits, files)
                })
                .map_err(|e| match e {
                    keel_index::IndexError::Cancelled => ToolError::model("search cancelled"),
                    other => ToolError::model(format!("the codebase index failed: {other}")),
                })?;
            let (hits, files) = result;
            let hits = hits.map_err(|e| ToolError::model(e.to_string()))?;
            let mut out = String::new();
            if fresh.built {
                out.push_str(&format!(
                    "(indexed {files} files in {:.1} s)\n",
                    started.elapsed().as_secs_f64()
                ));
            }
            if hits.is_empty() {
                out.push_str(&format!(
                    "No matches for {:?} in {files} indexed files. Try other words, kind=\"any\", or grep for an exact pattern.",
                    args.query
                ));
                return Ok(ToolOutput::text(out));
            }
            for h in &hits {
                let what = match (&h.kind, &h.symbol) {
                    (Some(k), Some(s)) => format!(" {k} {s}"),
                    (None, Some(s)) => format!(" {s}"),
                    _ => String::new(),
                };
                let span = if h.start_line == h.end_line {
                    h.start_line.to_string()
                } else {
                    format!("{}-{}", h.start_line, h.end_line)
                };
                out.push_str(&format!(
                    "{}:{span}{what}",
                    crate::text::escape_name(&h.path)
                ));
                if !h.why.is_empty() {
                    let why: Vec<&str> = h.why.iter().take(3).map(String::as_str).collect();
                    out.push_str(&format!("  ({})", why.join("; ")));
                }
                out.push('\n');
                for (n, line) in &h.snippet {
                    out.push_str(&format!("  {n}: {}\n", line.trim()));
                }
            }
            let paths: Vec<&str> = hits.iter().map(|h| h.path.as_str()).collect();
            Ok(ToolOutput::text(out).with_metadata(serde_json::json!({
                "hits": hits.len(),
                "files_indexed": files,
                "built": fresh.built,
                "top": paths.first(),
            })))
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builtin::testutil::Fixture;
    use serde_json::json;

    #[tokio::test]
    async fn builds_on_first_use_then_sees_edits() {
        let f = Fixture::new();
        f.write(
            "src/config.rs",
            "/// Parses the configuration file.\npub fn parse_config(path: &str) -> u32 { 0 }\n",
        );
        f.write("src/net.rs", "pub fn send_request() {}\n");
        let tool = CodebaseSearch::default();
        let out = f.ok(&tool, json!({"query": "parse configuration"})).await;
        assert!(out.starts_with("(indexed 2 files"), "{out}");
        assert!(
            out.contains("src/config.rs:1-2 function parse_config"),
            "{out}"
        );
        assert!(out.contains("2: pub fn parse_config"), "{out}");
        // A new file is found by the next search without any manual step.
        f.write("src/cache.rs", "pub fn evict_stale_entries() {}\n");
        let out = f
            .ok(
                &tool,
                json!({"query": "evict stale entries", "kind": "symbol"}),
            )
            .await;
        assert!(!out.contains("(indexed"), "{out}");
        assert!(
            out.starts_with("src/cache.rs:1 function evict_stale_entries"),
            "{out}"
        );
        // `level: function` asks for definitions, like `kind: symbol`.
        let out = f
            .ok(
                &tool,
                json!({"query": "the stale entries are never evicted from the cache", "level": "function"}),
            )
            .await;
        assert!(
            out.starts_with("src/cache.rs:1 function evict_stale_entries"),
            "{out}"
        );
        let out = f.ok(&tool, json!({"query": "zebra unicorn"})).await;
        assert!(out.contains("No matches"), "{out}");
        let err = f.err(&tool, json!({"query": "x", "kind": "class"})).await;
        assert!(err.contains("kind"), "{err}");
        let err = f.err(&tool, json!({"query": "x", "path_glob": "a["})).await;
        assert!(err.contains("glob"), "{err}");
    }
}
