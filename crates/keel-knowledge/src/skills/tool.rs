//! The `skill` tool and a session's skill state: which skills are loaded, which one
//! restricts the tools, and the glob skills still waiting for their first file.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use globset::{Glob, GlobSet, GlobSetBuilder};
use schemars::JsonSchema;
use serde::Deserialize;

use keel_tools::{ToolContext, ToolEffect, ToolError, ToolOutput, TypedTool};

use super::{Activation, Skill, SkillSet, activation_block, restriction};

/// The tool's name.
pub const SKILL_TOOL: &str = "skill";

/// Arguments of `skill`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SkillArgs {
    /// The skill's name, as listed in <skills>.
    pub name: String,
}

/// Loads a skill's instructions into the session. The loop answers it (the loaded skills
/// belong to the session).
#[derive(Debug, Clone, Copy, Default)]
pub struct SkillTool;

impl TypedTool for SkillTool {
    type Args = SkillArgs;
    const NAME: &'static str = SKILL_TOOL;

    fn description(&self) -> &str {
        "Load one of the listed skills: its instructions (and the files it ships) for the task at hand."
    }

    fn effect(&self) -> ToolEffect {
        ToolEffect::ReadOnly
    }

    async fn run(&self, _args: SkillArgs, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        Err(ToolError::model(
            "skill only works inside a session; there is no session here",
        ))
    }
}

/// A session's skills.
#[derive(Debug)]
pub struct SkillState {
    set: Arc<SkillSet>,
    root: PathBuf,
    loaded: BTreeSet<String>,
    /// The latest loaded skill that restricts tools.
    restricting: Option<Skill>,
    globs: Vec<(String, GlobSet)>,
}

impl SkillState {
    pub fn new(set: Arc<SkillSet>, root: &Path) -> Self {
        let globs = set
            .with(Activation::Glob)
            .filter_map(|s| {
                let mut b = GlobSetBuilder::new();
                for g in &s.globs {
                    b.add(Glob::new(g).ok()?);
                }
                Some((s.name.clone(), b.build().ok()?))
            })
            .collect();
        Self {
            set,
            root: root.to_path_buf(),
            loaded: BTreeSet::new(),
            restricting: None,
            globs,
        }
    }

    /// Activates `name` (once); its block, or `None` if unknown or already loaded.
    fn activate(&mut self, name: &str, why: &str) -> Option<String> {
        let skill = self.set.get(name)?.clone();
        if !self.loaded.insert(skill.name.clone()) {
            return None;
        }
        let block = activation_block(&skill, &self.root, why);
        if !skill.tools.is_empty() {
            self.restricting = Some(skill);
        }
        Some(block)
    }

    /// The first message's skill blocks: `always` skills, the `model` listing, then skills
    /// the task names with `$name`.
    pub fn first_message(&mut self, task: &str) -> Vec<String> {
        let always: Vec<String> = self
            .set
            .with(Activation::Always)
            .map(|s| s.name.clone())
            .collect();
        let mut out: Vec<String> = always
            .iter()
            .filter_map(|n| self.activate(n, "always on in this repository"))
            .collect();
        out.extend(self.set.listing());
        out.extend(self.mentioned(task));
        out
    }

    /// Blocks for skills a user's message names with `$name` / `$ns:name`.
    pub fn mentioned(&mut self, message: &str) -> Vec<String> {
        let names: Vec<String> = self
            .set
            .mentioned(message)
            .into_iter()
            .map(|s| s.name.clone())
            .collect();
        names
            .iter()
            .filter_map(|n| self.activate(n, &format!("the user asked for ${n}")))
            .collect()
    }

    /// Blocks for glob skills matching files just read or edited.
    pub fn on_paths(&mut self, paths: &[String]) -> Vec<String> {
        let hits: Vec<String> = self
            .globs
            .iter()
            .filter(|(name, set)| {
                !self.loaded.contains(name) && paths.iter().any(|p| set.is_match(p))
            })
            .map(|(n, _)| n.clone())
            .collect();
        hits.iter()
            .filter_map(|n| self.activate(n, "a file it covers was touched"))
            .collect()
    }

    /// A `skill` call: the skill's block, or why not.
    pub fn call(&mut self, arguments: &serde_json::Value) -> Result<ToolOutput, ToolError> {
        let args: SkillArgs = serde_json::from_value(arguments.clone())
            .map_err(|e| ToolError::model(format!("skill takes {{\"name\": \"…\"}}: {e}")))?;
        let Some(skill) = self.set.get(&args.name) else {
            let names: Vec<&str> = self.set.skills.iter().map(|s| s.name.as_str()).collect();
            return Err(ToolError::model(format!(
                "no skill `{}`; available: {}",
                args.name,
                if names.is_empty() {
                    "none".into()
                } else {
                    names.join(", ")
                }
            )));
        };
        if skill.activation == Activation::Manual {
            return Err(ToolError::model(format!(
                "skill `{}` is manual: only the user can start it (with ${} in a message)",
                skill.name, skill.name
            )));
        }
        let name = skill.name.clone();
        Ok(ToolOutput::text(
            self.activate(&name, "loaded with the skill tool")
                .unwrap_or_else(|| format!("Skill `{name}` is already loaded in this session.")),
        ))
    }

    /// Why `tool` may not run under the active skill's restriction.
    pub fn check(&self, tool: &str) -> Option<String> {
        restriction(self.restricting.as_ref(), tool)
    }

    /// Marks skills loaded earlier in a resumed transcript (restoring a restriction).
    pub fn mark_loaded(&mut self, messages: &[keel_protocol::Message]) {
        let marker = "<skill name=\"";
        for m in messages {
            for block in &m.content {
                let text = match block {
                    keel_protocol::ContentBlock::ToolResult { content, .. } => content,
                    keel_protocol::ContentBlock::Text { text } => text,
                    _ => continue,
                };
                for (i, _) in text.match_indices(marker) {
                    let rest = &text[i + marker.len()..];
                    let Some(end) = rest.find('"') else { continue };
                    if let Some(s) = self.set.get(&rest[..end]).cloned() {
                        self.loaded.insert(s.name.clone());
                        if !s.tools.is_empty() {
                            self.restricting = Some(s);
                        }
                    }
                }
            }
        }
    }

    /// Names of the skills loaded so far.
    pub fn loaded(&self) -> &BTreeSet<String> {
        &self.loaded
    }
}

/// `content` of a successful `call`, followed by the glob skills it activates.
pub fn annotate(state: &mut SkillState, call: &keel_protocol::ToolCall, content: String) -> String {
    let blocks = state.on_paths(&crate::rules::touched_paths(call));
    if blocks.is_empty() {
        return content;
    }
    format!("{content}\n\n{}", blocks.join("\n\n"))
}
