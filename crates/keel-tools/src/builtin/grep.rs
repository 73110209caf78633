//! `grep`: exact regex search over the workspace's files (ripgrep's searcher; .gitignore and
//! the index's default ignores apply).

use keel_index::IndexSettings;
use schemars::JsonSchema;
use serde::Deserialize;

use super::blocking;
use crate::{ToolContext, ToolEffect, ToolError, ToolOutput, TypedTool};

const DEFAULT_MAX: usize = 50;
const MAX_MAX: usize = 500;

/// Arguments of `grep`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GrepArgs {
    /// Regular expression (Rust syntax; all lowercase = case-insensitive).
    pub pattern: String,
    /// Only files matching this glob, e.g. `*.py` or `src/**/*.rs`.
    #[serde(default)]
    pub glob: Option<String>,
    /// Most matching lines to return (default 50).
    #[serde(default)]
    pub max_results: Option<usize>,
}

/// Exact regex search.
#[derive(Debug, Clone, Default)]
pub struct Grep {
    settings: IndexSettings,
}

impl Grep {
    /// A grep over the files `settings` admit.
    pub fn new(settings: IndexSettings) -> Self {
        Self { settings }
    }
}

impl TypedTool for Grep {
    type Args = GrepArgs;
    const NAME: &'static str = "grep";

    fn description(&self) -> &str {
        "Search file contents for a regex; returns matching lines as path:line: text."
    }

    fn effect(&self) -> ToolEffect {
        ToolEffect::ReadOnly
    }

    async fn run(&self, args: GrepArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let max = args.max_results.unwrap_or(DEFAULT_MAX).clamp(1, MAX_MAX);
        let root = ctx.workspace.root().to_path_buf();
        let settings = self.settings.clone();
        blocking(move || {
            let r =
                keel_index::grep::grep(&root, &settings, &args.pattern, args.glob.as_deref(), max)
                    .map_err(|e| ToolError::model(e.to_string()))?;
            if r.matches.is_empty() {
                return Ok(ToolOutput::text(format!(
                    "No matches for /{}/ in {} files.",
                    args.pattern, r.files_searched
                )));
            }
            let mut out = String::new();
            for m in &r.matches {
                out.push_str(&format!(
                    "{}:{}: {}\n",
                    crate::text::escape_name(&m.path),
                    m.line,
                    m.text
                ));
            }
            let files: std::collections::BTreeSet<&str> =
                r.matches.iter().map(|m| m.path.as_str()).collect();
            if r.truncated {
                out.push_str(&format!(
                    "[first {} matches shown; narrow the pattern or glob, or raise max_results]\n",
                    r.matches.len()
                ));
            } else {
                out.push_str(&format!(
                    "[{} matches in {} files]\n",
                    r.matches.len(),
                    files.len()
                ));
            }
            Ok(ToolOutput::text(out))
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
    async fn finds_lines_with_numbers() {
        let f = Fixture::new();
        f.write("a.py", "import os\n\ndef main():\n    os.exit(0)\n");
        f.write("b.rs", "fn main() {}\n");
        f.write(".gitignore", "ignored/\n");
        f.write("ignored/c.py", "def main(): pass\n");
        let out = f
            .ok(&Grep::default(), json!({"pattern": "def main|fn main"}))
            .await;
        assert_eq!(
            out,
            "a.py:3: def main():\nb.rs:1: fn main() {}\n[2 matches in 2 files]\n"
        );
        let out = f
            .ok(&Grep::default(), json!({"pattern": "main", "glob": "*.rs"}))
            .await;
        assert!(out.starts_with("b.rs:1:"), "{out}");
        let out = f
            .ok(&Grep::default(), json!({"pattern": "o", "max_results": 1}))
            .await;
        assert!(out.contains("[first 1 matches shown"), "{out}");
        let err = f
            .err(&Grep::default(), json!({"pattern": "(unclosed"}))
            .await;
        assert!(err.contains("invalid regular expression"), "{err}");
    }
}
