//! Rules beyond the root instruction files.
//!
//! - **`.keel/rules/*.md`** without `globs` front matter are repository law like AGENTS.md:
//!   they join the byte-stable head ([`head_rules`]), sorted by file name.
//! - **`.keel/rules/*.md` with `globs`** apply to matching files only: injected once, in the
//!   tail, when the first matching file is read or edited.
//! - **Nested `AGENTS.md` / `CLAUDE.md`** (in a subdirectory) apply to files under their
//!   directory: injected once, in the tail, when the first file there is read or edited.
//! - **The user-level file** (`AGENTS.md` in Keel's config directory) travels in the first
//!   message ([`user_rules`]): it is the user's, not the repository's, so it stays out of the
//!   head that must be identical for everyone working on the repository.
//!
//! Tail injections ride on the tool result that touched the file ([`TailRules::annotate`]),
//! so the head never changes and nothing is injected before it applies.

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};

use globset::{Glob, GlobSet, GlobSetBuilder};
use keel_protocol::ToolCall;
use serde_json::Value;

use keel_tools::fs::FileKind;
use keel_tools::project::{INSTRUCTIONS_LIMIT, ProjectDir, read_user_file};

use crate::frontmatter;

/// Project instruction files: the root ones are read into the project layer of the head, in
/// this order (`.keel/project.md` is the tech stack `keel init` detected); nested
/// `AGENTS.md` / `CLAUDE.md` apply to the files under their directory.
pub const PROJECT_FILES: &[&str] = &["AGENTS.md", "CLAUDE.md", ".keel/project.md"];

/// Where repository rules live, relative to the workspace root.
pub const RULES_DIR: &str = ".keel/rules";
/// Longest rule file taken whole.
const MAX_RULE_CHARS: usize = 20_000;
/// Tools whose `path` (or patch) names a file the agent reads or edits.
const FILE_TOOLS: &[&str] = &[
    "read_file",
    "edit_file",
    "create_file",
    "insert_lines",
    "apply_patch",
];

/// One `.keel/rules/*.md` file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleFile {
    /// Workspace-relative path (`.keel/rules/style.md`).
    pub source: String,
    /// Glob patterns from the front matter; empty: the rule always applies (head).
    pub globs: Vec<String>,
    pub body: String,
}

fn cut(text: &str, name: &str) -> String {
    let text = text.trim();
    if text.chars().count() > MAX_RULE_CHARS {
        let c: String = text.chars().take(MAX_RULE_CHARS).collect();
        format!("{c}\n[… {name} cut at {MAX_RULE_CHARS} characters]")
    } else {
        text.to_string()
    }
}

/// The repository's `.keel/rules/*.md` files, sorted by name; empty ones are skipped, and so
/// are files that must not be read (see [`rule_files_checked`]).
pub fn rule_files(workspace: &Path) -> Vec<RuleFile> {
    match ProjectDir::open(workspace) {
        Ok(project) => rule_files_checked(&project).0,
        Err(_) => Vec::new(),
    }
}

/// The repository's `.keel/rules/*.md` files, and a message for each one refused (a symlink
/// out of the workspace, not a regular file, over [`INSTRUCTIONS_LIMIT`]).
pub fn rule_files_checked(project: &ProjectDir) -> (Vec<RuleFile>, Vec<String>) {
    let mut problems = Vec::new();
    let files = project
        .list(RULES_DIR)
        .into_iter()
        .filter(|e| e.name.ends_with(".md") && e.kind != FileKind::Dir)
        .filter_map(|e| {
            let source = format!("{RULES_DIR}/{}", e.name);
            let text = match project.read(&source, INSTRUCTIONS_LIMIT) {
                Ok(text) => text?,
                Err(e) => {
                    problems.push(e.to_string());
                    return None;
                }
            };
            let doc = frontmatter::parse(&text);
            let body = cut(&doc.body, &source);
            if body.is_empty() {
                return None;
            }
            Some(RuleFile {
                globs: doc
                    .get("globs")
                    .map(frontmatter::Value::as_list)
                    .unwrap_or_default(),
                source,
                body,
            })
        })
        .collect();
    (files, problems)
}

/// The head part of the rules: every `.keel/rules/*.md` without `globs`.
pub fn head_rules(workspace: &Path) -> Option<String> {
    let project = ProjectDir::open(workspace).ok()?;
    head_rules_checked(&project).0
}

/// [`head_rules`], with a message for each rule file refused.
pub fn head_rules_checked(project: &ProjectDir) -> (Option<String>, Vec<String>) {
    let (files, problems) = rule_files_checked(project);
    let sections: Vec<String> = files
        .into_iter()
        .filter(|r| r.globs.is_empty())
        .map(|r| format!("## From {}\n{}", r.source, r.body))
        .collect();
    (
        (!sections.is_empty()).then(|| sections.join("\n\n")),
        problems,
    )
}

/// The user-level rules file: `AGENTS.md` in Keel's config directory, as a first-message
/// block. The user's own file (a symlink is followed), read only if regular and bounded.
pub fn user_rules(config_dir: Option<&Path>) -> Option<String> {
    let path = config_dir?.join("AGENTS.md");
    let text = read_user_file(&path, INSTRUCTIONS_LIMIT).ok()??;
    let body = cut(&text, "the user's AGENTS.md");
    (!body.is_empty()).then(|| {
        format!(
            "<user-rules source=\"{}\">\nThe user's own standing instructions for every repository:\n{body}\n</user-rules>",
            path.display()
        )
    })
}

/// Keel's config directory (where the user's `config.toml` lives).
pub fn user_config_dir() -> Option<PathBuf> {
    let env = |k: &str| std::env::var(k).ok();
    keel_config::user_config_path(&env).and_then(|p| p.parent().map(Path::to_path_buf))
}

/// The files a successful call read or edited, workspace-relative, as the model named them.
pub fn touched_paths(call: &ToolCall) -> Vec<String> {
    if !FILE_TOOLS.contains(&call.name.as_str()) {
        return Vec::new();
    }
    let mut out = Vec::new();
    if let Some(p) = call.arguments.get("path").and_then(Value::as_str) {
        out.push(p.to_string());
    }
    if call.name == "apply_patch"
        && let Some(text) = ["patch", "input"]
            .iter()
            .find_map(|k| call.arguments.get(*k).and_then(Value::as_str))
        && let Ok(patch) = keel_tools::patch::parse(text)
    {
        for op in &patch.ops {
            out.push(op.path().to_string());
            if let keel_tools::patch::FileOp::Update {
                move_to: Some(to), ..
            } = op
            {
                out.push(to.clone());
            }
        }
    }
    out.into_iter().filter_map(|p| normalize(&p)).collect()
}

/// `./a//b.rs` → `a/b.rs`; absolute paths and `..` are not rule triggers.
fn normalize(path: &str) -> Option<String> {
    let mut parts = Vec::new();
    for c in Path::new(path).components() {
        match c {
            Component::Normal(s) => parts.push(s.to_str()?.to_string()),
            Component::CurDir => {}
            _ => return None,
        }
    }
    (!parts.is_empty()).then(|| parts.join("/"))
}

/// The rule sources already injected in a stored transcript (so a resumed session does not
/// inject them twice).
pub fn injected_in(messages: &[keel_protocol::Message]) -> Vec<String> {
    let mut out = Vec::new();
    for m in messages {
        for block in &m.content {
            let text = match block {
                keel_protocol::ContentBlock::ToolResult { content, .. } => content,
                keel_protocol::ContentBlock::Text { text } => text,
                _ => continue,
            };
            for (i, _) in text.match_indices("<rules source=\"") {
                let rest = &text[i + "<rules source=\"".len()..];
                if let Some(end) = rest.find('"') {
                    out.push(rest[..end].to_string());
                }
            }
        }
    }
    out
}

/// Rules waiting for the first file they apply to: nested instruction files and glob rules.
/// Each is injected at most once per session.
#[derive(Debug)]
pub struct TailRules {
    /// The workspace's project files (`None` when its directory cannot be opened).
    project: Option<ProjectDir>,
    glob_rules: Vec<(RuleFile, GlobSet)>,
    injected: BTreeSet<String>,
}

impl TailRules {
    /// The tail rules of the workspace at `root` (glob rules read now; nested files when
    /// first needed).
    pub fn new(root: &Path) -> Self {
        let glob_rules = rule_files(root)
            .into_iter()
            .filter(|r| !r.globs.is_empty())
            .filter_map(|r| {
                let mut b = GlobSetBuilder::new();
                for g in &r.globs {
                    b.add(Glob::new(g).ok()?);
                }
                Some((r.clone(), b.build().ok()?))
            })
            .collect();
        Self {
            project: ProjectDir::open(root).ok(),
            glob_rules,
            injected: BTreeSet::new(),
        }
    }

    /// Marks rules already injected earlier in a resumed session (their sources).
    pub fn mark_injected(&mut self, sources: impl IntoIterator<Item = String>) {
        self.injected.extend(sources);
    }

    /// Sources injected so far in this session.
    pub fn injected(&self) -> &BTreeSet<String> {
        &self.injected
    }

    /// The rule blocks that start applying now that `paths` were read or edited, in order:
    /// nested instruction files from the outermost directory in, then glob rules.
    pub fn on_paths(&mut self, paths: &[String]) -> Vec<String> {
        let mut blocks = Vec::new();
        for path in paths {
            let dirs: Vec<&str> = path.match_indices('/').map(|(i, _)| &path[..i]).collect();
            for dir in dirs {
                for name in PROJECT_FILES {
                    let source = format!("{dir}/{name}");
                    if self.injected.contains(&source) {
                        continue;
                    }
                    // A nested file that must not be read (a link out, a FIFO, too big) is
                    // left out; it never reaches the model.
                    let Some(Ok(Some(text))) = self
                        .project
                        .as_ref()
                        .map(|p| p.read(&source, INSTRUCTIONS_LIMIT))
                    else {
                        continue;
                    };
                    self.injected.insert(source.clone());
                    let body = cut(&text, &source);
                    if body.is_empty() {
                        continue;
                    }
                    blocks.push(format!(
                        "<rules source=\"{source}\">\nInstructions for files under {dir}/ (they take precedence over the root instructions there):\n{body}\n</rules>"
                    ));
                }
            }
            for (rule, set) in &self.glob_rules {
                if self.injected.contains(&rule.source) || !set.is_match(path) {
                    continue;
                }
                self.injected.insert(rule.source.clone());
                blocks.push(format!(
                    "<rules source=\"{}\" globs=\"{}\">\nInstructions for files matching these patterns:\n{}\n</rules>",
                    rule.source,
                    rule.globs.join(", "),
                    rule.body
                ));
            }
        }
        blocks
    }

    /// `content` of a successful `call`, followed by the rules that start applying with it.
    pub fn annotate(&mut self, call: &ToolCall, content: String) -> String {
        let blocks = self.on_paths(&touched_paths(call));
        if blocks.is_empty() {
            return content;
        }
        format!("{content}\n\n{}", blocks.join("\n\n"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn write(root: &Path, rel: &str, text: &str) {
        let p = root.join(rel);
        if let Some(d) = p.parent() {
            std::fs::create_dir_all(d).unwrap_or_else(|e| panic!("{e}"));
        }
        std::fs::write(p, text).unwrap_or_else(|e| panic!("{e}"));
    }

    fn call(name: &str, args: Value) -> ToolCall {
        ToolCall {
            id: "c".into(),
            name: name.into(),
            arguments: args,
        }
    }

    #[test]
    fn nested_rules_apply_once_from_the_first_file_under_their_directory() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        write(dir.path(), "web/AGENTS.md", "Use pnpm here.\n");
        write(
            dir.path(),
            "web/ui/CLAUDE.md",
            "Components are PascalCase.\n",
        );
        let mut rules = TailRules::new(dir.path());
        assert!(rules.on_paths(&["src/main.rs".into()]).is_empty());
        let first = rules.annotate(
            &call("read_file", json!({"path": "./web/ui/a.tsx"})),
            "x".into(),
        );
        let pnpm = first.find("Use pnpm here.").unwrap_or(usize::MAX);
        let pascal = first.find("PascalCase").unwrap_or(0);
        assert!(first.starts_with("x\n\n<rules source=\"web/AGENTS.md\">"));
        assert!(pnpm < pascal, "outer directory first: {first}");
        let again = rules.annotate(&call("edit_file", json!({"path": "web/b.ts"})), "y".into());
        assert_eq!(again, "y");
        // Non-file tools never trigger.
        let mut fresh = TailRules::new(dir.path());
        assert!(touched_paths(&call("grep", json!({"path": "web/a"}))).is_empty());
        assert!(fresh.on_paths(&[]).is_empty());
    }

    #[test]
    fn rule_files_split_into_head_and_glob_rules() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        write(dir.path(), ".keel/rules/b.md", "Always explain.\n");
        write(
            dir.path(),
            ".keel/rules/a.md",
            "---\nglobs: [\"**/*.sql\"]\n---\nUse snake_case columns.\n",
        );
        let head = head_rules(dir.path()).unwrap_or_default();
        assert!(head.contains("Always explain.") && !head.contains("snake_case"));
        let mut rules = TailRules::new(dir.path());
        assert!(rules.on_paths(&["src/a.rs".into()]).is_empty());
        let blocks = rules.on_paths(&["db/m/1.sql".into()]);
        assert_eq!(blocks.len(), 1);
        assert!(blocks[0].contains("snake_case"));
        assert!(rules.on_paths(&["db/2.sql".into()]).is_empty());
    }

    #[test]
    fn patches_name_their_files() {
        let c = call(
            "apply_patch",
            json!({"patch": "*** Begin Patch\n*** Add File: pkg/x.py\n+a\n*** End Patch\n"}),
        );
        assert_eq!(touched_paths(&c), vec!["pkg/x.py".to_string()]);
        assert!(touched_paths(&call("read_file", json!({"path": "/etc/passwd"}))).is_empty());
    }
}
