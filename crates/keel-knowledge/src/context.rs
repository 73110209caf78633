//! What the model is told, layer by layer, for `keel context` and `/context`: each layer's
//! source, size (bytes and estimated tokens), whether it sits in the cached head or the
//! tail, and how to view or clear it. The texts are computed by the same functions the
//! engine uses to build requests, so the sizes are the sizes sent.

use std::path::Path;

use keel_store::MemoryEntry;
use keel_tools::fs::FileKind;
use keel_tools::project::{INSTRUCTIONS_LIMIT, ProjectDir, join_rel};
use serde::Serialize;

use crate::constitution::Constitution;
use crate::skills::{Activation, SkillSet};
use crate::{memory, prompt, rules};
use keel_config::IndexConfig;

/// Where a layer sits in a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Placement {
    /// The byte-stable system prompt, cached across turns, runs and days.
    Head,
    /// The first user message of a session.
    FirstMessage,
    /// Injected later, in a tool result, when it starts to apply.
    OnDemand,
}

/// One layer of the context.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Layer {
    pub name: String,
    pub source: String,
    pub placement: Placement,
    /// UTF-8 bytes of the text as sent (0 for a layer not present).
    pub bytes: usize,
    pub tokens: u64,
    /// How many entries (files, skills, facts) it holds.
    pub items: usize,
    pub view: String,
    pub clear: String,
}

/// The whole dashboard.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Dashboard {
    pub workspace: String,
    /// Bytes of the system prompt (the head's text part) as sent.
    pub system_prompt_bytes: usize,
    pub system_prompt_tokens: u64,
    pub layers: Vec<Layer>,
    /// Project files left out because they must not be read (a symlink out of the workspace,
    /// a FIFO or device, over the size limit), each naming the file and what to do.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<String>,
}

fn sized(text: Option<&str>) -> (usize, u64) {
    text.map_or((0, 0), |t| (t.len(), keel_llm::tokens::estimate_text(t)))
}

#[allow(clippy::too_many_arguments)]
fn layer(
    name: &str,
    source: impl Into<String>,
    placement: Placement,
    text: Option<&str>,
    items: usize,
    view: &str,
    clear: &str,
) -> Layer {
    let (bytes, tokens) = sized(text);
    Layer {
        name: name.into(),
        source: source.into(),
        placement,
        bytes,
        tokens,
        items,
        view: view.into(),
        clear: clear.into(),
    }
}

/// Nested instruction files under `root` (not the root's own), at most a few levels deep,
/// skipping hidden and dependency directories. Listed beneath the open workspace directory:
/// a symlinked directory is not descended into.
pub fn nested_rule_files(root: &Path) -> Vec<String> {
    const SKIP: &[&str] = &["node_modules", "target", "vendor", "dist", "build"];
    let Ok(project) = ProjectDir::open(root) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut stack = vec![(String::new(), 0usize)];
    let mut visited = 0usize;
    while let Some((rel, depth)) = stack.pop() {
        visited += 1;
        if visited > 5_000 {
            break;
        }
        for e in project.list(&rel) {
            let child = join_rel(&rel, &e.name);
            match e.kind {
                FileKind::Dir
                    if depth < 6
                        && !e.name.starts_with('.')
                        && !SKIP.contains(&e.name.as_str()) =>
                {
                    stack.push((child, depth + 1));
                }
                FileKind::File | FileKind::Symlink
                    if !rel.is_empty() && prompt::PROJECT_FILES.contains(&e.name.as_str()) =>
                {
                    out.push(child)
                }
                _ => {}
            }
        }
    }
    out.sort();
    out
}

/// The codemap layer as a run here would send it now: the `<codemap>` block built from the
/// workspace's existing index, exactly as the session builds it (the same cached map and
/// wrapper), or why there is none.
pub fn codemap_layer(workspace: &Path, index: &IndexConfig) -> Result<String, String> {
    if !index.enabled {
        return Err("off (index.enabled = false)".into());
    }
    if index.codemap_tokens == 0 {
        return Err("off (index.codemap_tokens = 0)".into());
    }
    let not_built = || {
        "none yet: the index is not built (the first run builds it, or `keel index`)".to_string()
    };
    if !keel_index::Index::exists(workspace) {
        return Err(not_built());
    }
    let idx = keel_index::Index::open(workspace, index.settings())
        .map_err(|e| format!("none: the index cannot be opened ({e}); `keel index` rebuilds it"))?;
    if !idx.is_built() {
        return Err(not_built());
    }
    match idx.codemap_cached(index.codemap_tokens) {
        Ok(map) if !map.is_empty() => Ok(prompt::codemap_block(&map)),
        Ok(_) => Err("none: the index has nothing to map".into()),
        Err(e) => Err(format!("none: {e}")),
    }
}

/// The user-memory layer as a session sends it (`agent.memory_tokens` = `budget`): every
/// fact when they all fit; else, for `task`, the block that session's first message holds
/// (the relevant facts within the budget); with no task, the budget itself, the most any
/// session sends, since which facts go in depends on the task.
pub fn memory_layer(entries: &[MemoryEntry], task: Option<&str>, budget: usize) -> Layer {
    let saved = entries
        .iter()
        .filter(|e| e.kind == keel_store::MemoryKind::Fact)
        .count();
    let all = memory::user_memory_block(entries);
    let all_tokens = all.as_deref().map_or(0, keel_llm::tokens::estimate_text);
    let (view, clear) = (
        "keel memory list --kind fact",
        "keel memory rm ID / keel memory clear --kind fact",
    );
    if all_tokens as usize <= budget {
        return layer(
            "user memory",
            format!(
                "session database (keel memory): every fact, all within agent.memory_tokens ({budget})"
            ),
            Placement::FirstMessage,
            all.as_deref(),
            saved,
            view,
            clear,
        );
    }
    match task {
        Some(task) => {
            let block = memory::relevant_memory_block(entries, task, budget);
            let shown = block.as_deref().map_or(0, |b| b.matches("\n- [m").count());
            layer(
                "user memory",
                format!(
                    "session database (keel memory): {shown} of {saved} facts relevant to the task, within agent.memory_tokens ({budget}; all would be {all_tokens}); memory_search finds the rest"
                ),
                Placement::FirstMessage,
                block.as_deref(),
                shown,
                view,
                clear,
            )
        }
        None => Layer {
            name: "user memory".into(),
            source: format!(
                "session database (keel memory): at most agent.memory_tokens ({budget}) of the {all_tokens} tokens {saved} facts take, the facts relevant to the task (`keel context --task TEXT` shows which); memory_search finds the rest"
            ),
            placement: Placement::FirstMessage,
            bytes: 0,
            tokens: budget as u64,
            items: 0,
            view: view.into(),
            clear: clear.into(),
        },
    }
}

/// The tool catalog's layer: the schemas of the tools the first request lists (part of the
/// cached head), sized as the request estimate counts them.
pub fn tools_layer(tools: &[keel_protocol::ToolSpec]) -> Layer {
    let text = serde_json::to_string(tools).unwrap_or_default();
    let tokens = tools
        .iter()
        .map(|t| {
            keel_llm::tokens::estimate_text(&t.name)
                + keel_llm::tokens::estimate_text(&t.description)
                + keel_llm::tokens::estimate_text(&t.input_schema.to_string())
        })
        .sum();
    Layer {
        name: "tool schemas".into(),
        source: format!(
            "{}: {}",
            keel_tools::text::count(tools.len(), "tool", "tools"),
            tools
                .iter()
                .map(|t| t.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
        placement: Placement::Head,
        bytes: text.len(),
        tokens,
        items: tools.len(),
        view: "keel context --json; docs/TOOL_CATALOG.md".into(),
        clear: "[shell] enabled = false or [index] enabled = false drop their tools; others are deferred (tool_search)".into(),
    }
}

/// The environment block every first message ends with (workspace, date, platform).
pub fn environment_layer(workspace: &Path) -> Layer {
    let env = prompt::Environment::current(workspace);
    let text = prompt::task_message("", &[], &env);
    layer(
        "environment",
        "the workspace, today's date, the platform",
        Placement::FirstMessage,
        Some(text.trim()),
        1,
        "keel context --json",
        "cannot be cleared",
    )
}

/// The dashboard of `workspace` (the user's config dir, memory entries and skills as the
/// engine would see them; `codemap` is [`codemap_layer`]'s answer; the user-memory layer as
/// [`memory_layer`] sizes it for `task` within `memory_tokens`).
#[allow(clippy::too_many_arguments)]
pub fn dashboard(
    workspace: &Path,
    config_dir: Option<&Path>,
    constitution: &Constitution,
    skills: &SkillSet,
    entries: &[MemoryEntry],
    codemap: &Result<String, String>,
    task: Option<&str>,
    memory_tokens: usize,
) -> Dashboard {
    let system = prompt::system_prompt_with(workspace, constitution);
    let (system_prompt_bytes, system_prompt_tokens) = sized(Some(&system));
    let mut layers = Vec::new();
    layers.push(layer(
        "base prompt",
        "built into Keel",
        Placement::Head,
        Some(prompt::BASE_PROMPT.trim_end()),
        1,
        "keel context --json (fixed per Keel version)",
        "cannot be cleared",
    ));
    let (project, mut skipped) = prompt::project_layer_checked(workspace);
    let readable = ProjectDir::open(workspace).ok();
    let root_files: Vec<String> = prompt::PROJECT_FILES
        .iter()
        .filter(|f| {
            readable
                .as_ref()
                .is_some_and(|p| p.read(f, INSTRUCTIONS_LIMIT).is_ok_and(|t| t.is_some()))
        })
        .map(|f| f.to_string())
        .chain(
            rules::rule_files(workspace)
                .into_iter()
                .filter(|r| r.globs.is_empty())
                .map(|r| r.source),
        )
        .collect();
    layers.push(layer(
        "root rules",
        if root_files.is_empty() {
            "none".to_string()
        } else {
            root_files.join(", ")
        },
        Placement::Head,
        project.as_deref(),
        root_files.len(),
        "open the files",
        "edit or delete the files",
    ));
    let constitution_text = constitution.head_text();
    layers.push(layer(
        "constitution",
        crate::constitution::CONSTITUTION_FILE,
        Placement::Head,
        constitution_text.as_deref(),
        usize::from(constitution_text.is_some()),
        "open .keel/constitution.json",
        "edit or delete .keel/constitution.json",
    ));
    let nested = nested_rule_files(workspace);
    let mut nested_text = String::new();
    if let Some(project) = &readable {
        for f in &nested {
            match project.read(f, INSTRUCTIONS_LIMIT) {
                Ok(text) => nested_text.extend(text),
                Err(e) => skipped.push(e.to_string()),
            }
        }
    }
    let glob_rules: Vec<rules::RuleFile> = rules::rule_files(workspace)
        .into_iter()
        .filter(|r| !r.globs.is_empty())
        .collect();
    let glob_text: String = glob_rules.iter().map(|r| r.body.as_str()).collect();
    layers.push(layer(
        "nested rules",
        if nested.is_empty() { "none".to_string() } else { nested.join(", ") },
        Placement::OnDemand,
        (!nested.is_empty()).then_some(nested_text.as_str()),
        nested.len(),
        "open the files; each is injected once, with the first file read or edited under its directory",
        "edit or delete the files",
    ));
    layers.push(layer(
        "glob rules",
        if glob_rules.is_empty() {
            "none".to_string()
        } else {
            glob_rules
                .iter()
                .map(|r| r.source.clone())
                .collect::<Vec<_>>()
                .join(", ")
        },
        Placement::OnDemand,
        (!glob_rules.is_empty()).then_some(glob_text.as_str()),
        glob_rules.len(),
        "open the files; each is injected with the first matching file",
        "edit or delete the files",
    ));
    let user = rules::user_rules(config_dir);
    layers.push(layer(
        "user rules",
        config_dir.map_or("none".into(), |d| d.join("AGENTS.md").display().to_string()),
        Placement::FirstMessage,
        user.as_deref(),
        usize::from(user.is_some()),
        "open the file",
        "edit or delete the file",
    ));
    let listing = skills.listing();
    layers.push(layer(
        "skills (listed)",
        keel_tools::text::count(
            skills.with(Activation::Model).count(),
            "model skill",
            "model skills",
        ),
        Placement::FirstMessage,
        listing.as_deref(),
        skills.with(Activation::Model).count(),
        "keel skills list / keel skills show NAME",
        "delete the skill folder, or set another activation",
    ));
    let always: Vec<String> = skills
        .with(Activation::Always)
        .map(|s| crate::skills::activation_block(s, workspace, "always on in this repository"))
        .collect();
    let always_text = always.join("\n");
    layers.push(layer(
        "skills (always active)",
        skills
            .with(Activation::Always)
            .map(|s| s.name.clone())
            .collect::<Vec<_>>()
            .join(", "),
        Placement::FirstMessage,
        (!always.is_empty()).then_some(always_text.as_str()),
        always.len(),
        "keel skills show NAME",
        "delete the skill folder, or set another activation",
    ));
    let on_demand = skills.skills.len() - always.len();
    layers.push(layer(
        "skills (on demand)",
        "glob, manual ($name) and model skills once loaded",
        Placement::OnDemand,
        None,
        on_demand,
        "keel skills list",
        "delete the skill folder",
    ));
    layers.push(memory_layer(entries, task, memory_tokens));
    let lessons = memory::lessons_block(entries);
    layers.push(layer(
        "overlay (promoted lessons)",
        "session database (keel memory promote)",
        Placement::FirstMessage,
        lessons.as_deref(),
        entries
            .iter()
            .filter(|e| e.kind == keel_store::MemoryKind::Lesson)
            .count(),
        "keel memory list --kind lesson",
        "keel memory rm ID / keel memory clear --kind lesson",
    ));
    layers.push(layer(
        "codemap",
        match codemap {
            Ok(_) => ".keel/index.db (index.codemap_tokens)".to_string(),
            Err(why) => why.clone(),
        },
        Placement::FirstMessage,
        codemap.as_deref().ok(),
        usize::from(codemap.is_ok()),
        "keel map",
        "set `codemap_tokens = 0` under [index] in .keel/config.toml",
    ));
    layers.push(layer(
        "session working memory",
        "tool results over agent.max_output_chars, per session",
        Placement::OnDemand,
        None,
        0,
        "read_result {handle, offset} inside the session",
        "ends with the session",
    ));
    Dashboard {
        workspace: workspace.display().to_string(),
        system_prompt_bytes,
        system_prompt_tokens,
        layers,
        skipped,
    }
}
