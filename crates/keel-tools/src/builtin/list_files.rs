//! `list_files`: the files under a directory, honouring ignore files, with sizes.

use std::collections::BTreeMap;

use globset::{Glob, GlobMatcher};
use keel_fs::walk::Visit;
use schemars::JsonSchema;
use serde::Deserialize;

use super::{blocking, human_size};
use crate::{ToolContext, ToolEffect, ToolError, ToolOutput, TypedTool, Workspace};

/// More entries than this and the listing becomes a per-directory summary.
const MAX_ENTRIES: usize = 300;
/// Never walk more than this many entries (a runaway tree must not stall the agent).
const WALK_CAP: usize = 200_000;
/// Directories skipped even when no ignore file mentions them.
pub(crate) const DEFAULT_SKIP_DIRS: &[&str] = &[
    ".git",
    ".hg",
    ".svn",
    ".keel",
    "node_modules",
    "__pycache__",
    ".venv",
    ".mypy_cache",
    ".pytest_cache",
    ".tox",
];

/// Arguments of `list_files`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListFilesArgs {
    /// Directory relative to the workspace root (default: the root).
    #[serde(default)]
    pub path: Option<String>,
    /// Glob filter, e.g. `*.rs` (file names) or `src/**/*.ts` (paths).
    #[serde(default)]
    pub pattern: Option<String>,
    /// How deep to descend (1 = direct children only).
    #[serde(default)]
    pub max_depth: Option<usize>,
}

/// Lists files, respecting .gitignore.
#[derive(Debug, Clone, Copy, Default)]
pub struct ListFiles;

impl TypedTool for ListFiles {
    type Args = ListFilesArgs;
    const NAME: &'static str = "list_files";

    fn description(&self) -> &str {
        "List files under a directory with their sizes, respecting .gitignore. Huge trees are summarised per directory."
    }

    fn effect(&self) -> ToolEffect {
        ToolEffect::ReadOnly
    }

    async fn run(&self, args: ListFilesArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let rel = args.path.clone().unwrap_or_default();
        let dir = ctx.workspace.locate_named(&rel)?;
        let ws = ctx.workspace.clone();
        let matcher = match &args.pattern {
            Some(p) => Some(PatternFilter::new(p)?),
            None => None,
        };
        let cancel = ctx.cancel.clone();
        blocking(move || {
            let shown = dir.rel_string();
            // Looked at beneath the workspace handle (the path resolved with links inside
            // followed), never by path again.
            match dir.info() {
                Ok(Some(i)) if i.kind == keel_fs::beneath::FileKind::Dir => {}
                Ok(Some(_)) => {
                    return Err(ToolError::model(format!(
                        "`{shown}` is a file, not a directory; use read_file to read it"
                    )));
                }
                Ok(None) | Err(_) => {
                    return Err(ToolError::model(format!(
                        "directory `{shown}` does not exist"
                    )));
                }
            }
            let entries = walk(&ws, &dir, args.max_depth, matcher.as_ref(), &cancel)?;
            Ok(ToolOutput::text(format_listing(
                &shown,
                &entries,
                matcher.is_some(),
            )))
        })
        .await
    }
}

struct PatternFilter {
    matcher: GlobMatcher,
    /// Patterns with a `/` match the workspace-relative path; others the file name.
    on_path: bool,
}

impl PatternFilter {
    fn new(pattern: &str) -> Result<Self, ToolError> {
        let glob = Glob::new(pattern)
            .map_err(|e| ToolError::model(format!("invalid glob pattern `{pattern}`: {e}")))?;
        Ok(Self {
            matcher: glob.compile_matcher(),
            on_path: pattern.contains('/'),
        })
    }

    fn matches(&self, rel: &str) -> bool {
        if self.on_path {
            self.matcher.is_match(rel)
        } else {
            let name = rel.rsplit('/').next().unwrap_or(rel);
            self.matcher.is_match(name)
        }
    }
}

struct Entry {
    rel: String,
    is_dir: bool,
    size: u64,
}

/// The entries under `dir`, read beneath the workspace handle (`keel_fs::walk`): every
/// directory is listed through its own open descriptor and entered with `O_NOFOLLOW`, so a
/// directory swapped for a symlink out mid-walk is never listed.
fn walk(
    ws: &Workspace,
    dir: &keel_fs::beneath::ResolvedPath,
    max_depth: Option<usize>,
    filter: Option<&PatternFilter>,
    cancel: &tokio_util::sync::CancellationToken,
) -> Result<Vec<Entry>, ToolError> {
    // Ignore files are read as project files (a FIFO `.gitignore` must not hang the listing).
    let rules = keel_index::ignore_rules::IgnoreRules::new(ws.root());
    let mut out = Vec::new();
    let mut walked = 0usize;
    let options = keel_fs::walk::WalkOptions { max_depth };
    let result = ws.handle().walk_sorted(dir.rel(), options, |e| {
        walked += 1;
        if walked > WALK_CAP || cancel.is_cancelled() {
            return Visit::Stop;
        }
        let is_dir = e.is_dir();
        let rel = e.rel.to_string_lossy();
        if is_dir && DEFAULT_SKIP_DIRS.contains(&e.name().to_string_lossy().as_ref()) {
            return Visit::Skip;
        }
        if rules.ignored(&rel, is_dir) {
            return Visit::Skip;
        }
        if let Some(f) = filter
            && (is_dir || !f.matches(&rel))
        {
            return Visit::Continue;
        }
        out.push(Entry {
            rel: rel.into_owned(),
            is_dir,
            size: e.len,
        });
        Visit::Continue
    });
    result.map_err(|e| ToolError::model(format!("cannot list `{}`: {e}", dir.rel_string())))?;
    Ok(out)
}

use crate::text::escape_name;

fn format_listing(shown: &str, entries: &[Entry], filtered: bool) -> String {
    let files = entries.iter().filter(|e| !e.is_dir).count();
    if entries.is_empty() {
        return if filtered {
            format!("No files under `{shown}` match the pattern.")
        } else {
            format!("`{shown}` is empty (or everything in it is ignored).")
        };
    }
    if entries.len() <= MAX_ENTRIES {
        let mut out = String::new();
        for e in entries {
            if e.is_dir {
                out.push_str(&format!("{}/\n", escape_name(&e.rel)));
            } else {
                out.push_str(&format!(
                    "{}  ({})\n",
                    escape_name(&e.rel),
                    human_size(e.size)
                ));
            }
        }
        out.push_str(&format!("[{files} files]\n"));
        return out;
    }
    // Too many to list: count files per directory, two levels below the listed one.
    let base_depth = if shown == "." {
        0
    } else {
        shown.split('/').count()
    };
    let mut per_dir: BTreeMap<String, (usize, u64)> = BTreeMap::new();
    let mut top_files = Vec::new();
    for e in entries.iter().filter(|e| !e.is_dir) {
        let parts: Vec<&str> = e.rel.split('/').collect();
        let depth = parts.len() - base_depth;
        if depth == 1 {
            top_files.push(e);
            continue;
        }
        let key_len = (base_depth + 2).min(parts.len() - 1);
        let key = parts[..key_len].join("/");
        let slot = per_dir.entry(key).or_default();
        slot.0 += 1;
        slot.1 += e.size;
    }
    let mut out = format!(
        "`{shown}` holds {files} files, too many to list; per directory (narrow with path, pattern or max_depth):\n"
    );
    for (dir, (count, bytes)) in per_dir.iter().take(MAX_ENTRIES) {
        out.push_str(&format!(
            "{}/  {count} files, {}\n",
            escape_name(dir),
            human_size(*bytes)
        ));
    }
    if per_dir.len() > MAX_ENTRIES {
        out.push_str(&format!(
            "… and {} more directories\n",
            per_dir.len() - MAX_ENTRIES
        ));
    }
    for e in top_files.iter().take(50) {
        out.push_str(&format!(
            "{}  ({})\n",
            escape_name(&e.rel),
            human_size(e.size)
        ));
    }
    if top_files.len() > 50 {
        out.push_str(&format!("… and {} more files here\n", top_files.len() - 50));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builtin::testutil::Fixture;
    use serde_json::json;

    #[tokio::test]
    async fn lists_with_sizes_and_honours_gitignore() {
        let f = Fixture::new();
        f.write(".gitignore", "build/\n*.log\n");
        f.write("src/main.rs", "fn main() {}\n");
        f.write("src/util/mod.rs", "");
        f.write("build/out.bin", "xx");
        f.write("debug.log", "x");
        f.write("node_modules/x/index.js", "x");
        let out = f.ok(&ListFiles, json!({})).await;
        assert!(out.contains("src/main.rs  (13 B)"), "{out}");
        assert!(out.contains("src/util/"), "{out}");
        assert!(out.contains(".gitignore"), "{out}");
        assert!(!out.contains("build/out.bin"), "{out}");
        assert!(!out.contains("debug.log"), "{out}");
        assert!(!out.contains("node_modules"), "{out}");
    }

    #[tokio::test]
    async fn pattern_depth_and_subdirectory() {
        let f = Fixture::new();
        f.write("a.rs", "");
        f.write("src/b.rs", "");
        f.write("src/c.py", "");
        f.write("src/deep/d.rs", "");
        let out = f.ok(&ListFiles, json!({"pattern": "*.rs"})).await;
        assert!(
            out.contains("a.rs") && out.contains("src/deep/d.rs"),
            "{out}"
        );
        assert!(!out.contains("c.py"), "{out}");
        let out = f
            .ok(&ListFiles, json!({"path": "src", "max_depth": 1}))
            .await;
        assert!(
            out.contains("src/b.rs") && out.contains("src/deep/"),
            "{out}"
        );
        assert!(!out.contains("d.rs"), "{out}");
        let out = f.ok(&ListFiles, json!({"pattern": "src/*.py"})).await;
        assert!(out.contains("src/c.py") && !out.contains("b.rs"), "{out}");
        let err = f.err(&ListFiles, json!({"path": "nope"})).await;
        assert!(err.contains("does not exist"), "{err}");
        let err = f.err(&ListFiles, json!({"pattern": "a[b"})).await;
        assert!(err.contains("invalid glob"), "{err}");
    }

    #[tokio::test]
    async fn huge_trees_are_summarised() {
        let f = Fixture::new();
        for i in 0..400 {
            f.write(&format!("pkg/mod{}/f{i}.txt", i % 4), "x");
        }
        let out = f.ok(&ListFiles, json!({})).await;
        assert!(out.contains("400 files, too many to list"), "{out}");
        assert!(out.contains("pkg/mod0/  100 files"), "{out}");
    }
}
