//! Skills: folders holding a `SKILL.md` (front matter compatible with Anthropic's Agent
//! Skills — `name`, `description` — plus Keel's `activation`, `globs`, `tools`).
//!
//! Found in, by precedence (a name seen first wins): `.keel/skills/`, the user's config
//! directory (`<config dir>/skills/`), then read-only in `.claude/skills/` and
//! `.agents/skills/`. Activation:
//! - `always` — the body is injected in every session's first message;
//! - `model` (the default) — listed by name and one line in the first message; the model
//!   loads one with the `skill` tool;
//! - `glob` — injected when the first matching file is read or edited (like glob rules);
//! - `manual` — only by `$name` (or `$ns:name`) in the user's message, parsed at submit
//!   time by the engine, so every front end (CLI, chat, REST, WebSocket) gets it.
//!
//! A skill with `tools` restricts the tool surface while it is active: any other tool is
//! refused with a message naming the skill (enforced before dispatch). Everything skills add
//! rides in the tail, so the cached head never changes with them.

mod tool;

pub use tool::{SKILL_TOOL, SkillState, SkillTool, annotate};

use std::path::{Path, PathBuf};

use keel_tools::fs::FileKind;
use keel_tools::project::{INSTRUCTIONS_LIMIT, ProjectDir, join_rel};

use crate::frontmatter;

/// Skill roots inside the workspace, in precedence order, with whether Keel may write there.
pub const WORKSPACE_ROOTS: &[(&str, bool)] = &[
    (".keel/skills", true),
    (".claude/skills", false),
    (".agents/skills", false),
];
/// Longest skill body injected whole.
const MAX_BODY_CHARS: usize = 20_000;
/// Longest one-line description in the listing.
const MAX_LISTED_CHARS: usize = 160;

/// When a skill applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Activation {
    Always,
    Glob,
    Model,
    Manual,
}

impl Activation {
    pub fn as_str(self) -> &'static str {
        match self {
            Activation::Always => "always",
            Activation::Glob => "glob",
            Activation::Model => "model",
            Activation::Manual => "manual",
        }
    }
}

/// One discovered skill.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Skill {
    pub name: String,
    pub description: String,
    pub activation: Activation,
    pub globs: Vec<String>,
    /// Tools the skill restricts the session to while active (empty: no restriction).
    pub tools: Vec<String>,
    /// The folder (absolute).
    pub dir: PathBuf,
    /// Where it was found: `.keel/skills`, `user`, `.claude/skills`, `.agents/skills`.
    pub origin: String,
    /// Extra files shipped in the folder (relative to it), sorted.
    pub files: Vec<String>,
    pub body: String,
}

/// A skill folder that could not be used, and why.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SkillProblem {
    pub path: String,
    pub message: String,
}

/// Every usable skill, sorted by name, and the folders that were skipped with why.
#[derive(Debug, Clone, Default)]
pub struct SkillSet {
    pub skills: Vec<Skill>,
    pub problems: Vec<SkillProblem>,
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '_' | ':'))
}

/// The files shipped beside `SKILL.md` in the skill folder `rel` of `project`, relative to
/// the folder, sorted (at most 200).
fn extra_files(project: &ProjectDir, rel: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![String::new()];
    while let Some(prefix) = stack.pop() {
        let dir = if prefix.is_empty() {
            rel.to_string()
        } else {
            format!("{rel}/{}", prefix.trim_end_matches('/'))
        };
        for e in project.list(&dir) {
            let name = format!("{prefix}{}", e.name);
            match e.kind {
                FileKind::Dir if out.len() < 200 => stack.push(format!("{name}/")),
                FileKind::File if name != "SKILL.md" => out.push(name),
                _ => {}
            }
        }
    }
    out.sort();
    out.truncate(200);
    out
}

/// Reads one skill folder (its `SKILL.md` must be a regular file inside the folder, at most
/// [`INSTRUCTIONS_LIMIT`]).
pub fn read_skill(dir: &Path, origin: &str) -> Result<Skill, String> {
    let project = ProjectDir::open(dir).map_err(|e| format!("cannot open the folder: {e}"))?;
    read_skill_at(&project, "", origin)?.ok_or_else(|| "there is no SKILL.md".to_string())
}

/// Reads the skill folder `rel` (`""`: the root itself) of `project`; `Ok(None)` when it has
/// no `SKILL.md`.
fn read_skill_at(project: &ProjectDir, rel: &str, origin: &str) -> Result<Option<Skill>, String> {
    let file = join_rel(rel, "SKILL.md");
    let text = match project.read(&file, INSTRUCTIONS_LIMIT) {
        Ok(Some(text)) => text,
        Ok(None) => return Ok(None),
        Err(e) => return Err(format!("SKILL.md not read: it {}", e.problem)),
    };
    let dir = project.root().join(rel);
    let doc = frontmatter::parse(&text);
    let folder = dir
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default()
        .to_string();
    let name = doc
        .get("name")
        .map(frontmatter::Value::as_text)
        .unwrap_or(folder);
    if !valid_name(&name) {
        return Err(format!(
            "`name: {name}` must be lowercase letters, digits, `-`, `_` or `:` (at most 64)"
        ));
    }
    let description = doc
        .get("description")
        .map(frontmatter::Value::as_text)
        .unwrap_or_default();
    if description.trim().is_empty() {
        return Err("`description` is missing; say in one line when to use the skill".into());
    }
    let activation = match doc
        .get("activation")
        .map(frontmatter::Value::as_text)
        .as_deref()
    {
        None | Some("model") => Activation::Model,
        Some("always") => Activation::Always,
        Some("glob") => Activation::Glob,
        Some("manual") => Activation::Manual,
        Some(other) => {
            return Err(format!(
                "`activation: {other}` is not one of always, glob, model, manual"
            ));
        }
    };
    let globs = doc
        .get("globs")
        .map(frontmatter::Value::as_list)
        .unwrap_or_default();
    if activation == Activation::Glob && globs.is_empty() {
        return Err("`activation: glob` needs `globs` (like [\"**/*.sql\"])".into());
    }
    for g in &globs {
        globset::Glob::new(g).map_err(|e| format!("`globs` entry `{g}` is not a glob: {e}"))?;
    }
    let body = doc.body.trim();
    let body = if body.chars().count() > MAX_BODY_CHARS {
        let c: String = body.chars().take(MAX_BODY_CHARS).collect();
        format!("{c}\n[… SKILL.md cut at {MAX_BODY_CHARS} characters]")
    } else {
        body.to_string()
    };
    Ok(Some(Skill {
        name,
        description: description.split_whitespace().collect::<Vec<_>>().join(" "),
        activation,
        globs,
        tools: doc
            .get("tools")
            .or_else(|| doc.get("allowed-tools"))
            .map(frontmatter::Value::as_list)
            .unwrap_or_default(),
        files: extra_files(project, rel),
        dir,
        origin: origin.to_string(),
        body,
    }))
}

/// The skill roots for `workspace` (and the user's config dir), in precedence order.
pub fn roots(workspace: &Path, config_dir: Option<&Path>) -> Vec<(PathBuf, String)> {
    let mut out: Vec<(PathBuf, String)> = Vec::new();
    out.push((
        workspace.join(WORKSPACE_ROOTS[0].0),
        WORKSPACE_ROOTS[0].0.into(),
    ));
    if let Some(c) = config_dir {
        out.push((c.join("skills"), "user".into()));
    }
    for (r, _) in &WORKSPACE_ROOTS[1..] {
        out.push((workspace.join(r), (*r).into()));
    }
    out
}

/// Discovers the skills of `workspace` (and the user's config dir). Skill files are read as
/// project files: beneath the workspace (or the config dir), regular, bounded.
pub fn discover(workspace: &Path, config_dir: Option<&Path>) -> SkillSet {
    let mut set = SkillSet::default();
    let in_workspace = ProjectDir::open(workspace).ok();
    for (root, origin) in roots(workspace, config_dir) {
        // The user's own skills: each folder opened where its path leads (dotfile managers
        // link them), its SKILL.md read inside it. The repository's: beneath the workspace.
        let found: Vec<(PathBuf, Result<Option<Skill>, String>)> = if origin == "user" {
            let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
                .into_iter()
                .flatten()
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.is_dir())
                .collect();
            dirs.sort();
            dirs.into_iter()
                .map(|dir| {
                    let skill = ProjectDir::open(&dir)
                        .map_err(|e| format!("cannot open the folder: {e}"))
                        .and_then(|p| read_skill_at(&p, "", &origin));
                    (dir, skill)
                })
                .collect()
        } else {
            let Some(project) = in_workspace.as_ref() else {
                continue;
            };
            project
                .list(&origin)
                .into_iter()
                .filter(|e| matches!(e.kind, FileKind::Dir | FileKind::Symlink))
                .map(|e| {
                    let rel = format!("{origin}/{}", e.name);
                    (root.join(&e.name), read_skill_at(project, &rel, &origin))
                })
                .collect()
        };
        for (dir, skill) in found {
            match skill {
                Ok(None) => {}
                Ok(Some(s)) if set.skills.iter().any(|k| k.name == s.name) => {
                    set.problems.push(SkillProblem {
                        path: dir.display().to_string(),
                        message: format!("`{}` is already defined earlier; skipped", s.name),
                    });
                }
                Ok(Some(s)) => set.skills.push(s),
                Err(message) => set.problems.push(SkillProblem {
                    path: dir.join("SKILL.md").display().to_string(),
                    message,
                }),
            }
        }
    }
    set.skills.sort_by(|a, b| a.name.cmp(&b.name));
    set
}

impl SkillSet {
    pub fn get(&self, name: &str) -> Option<&Skill> {
        let name = name.trim().trim_start_matches('$');
        self.skills.iter().find(|s| s.name == name).or_else(|| {
            // `$ns:name` also finds a skill named `name` found under namespace `ns`.
            let (_, bare) = name.split_once(':')?;
            self.skills.iter().find(|s| s.name == bare)
        })
    }

    /// Skills of one activation mode.
    pub fn with(&self, a: Activation) -> impl Iterator<Item = &Skill> {
        self.skills.iter().filter(move |s| s.activation == a)
    }

    /// The first-message listing of `model` skills (name + one line), or `None`.
    pub fn listing(&self) -> Option<String> {
        let lines: Vec<String> = self
            .with(Activation::Model)
            .map(|s| {
                let d: String = s.description.chars().take(MAX_LISTED_CHARS).collect();
                format!("- {}: {d}", s.name)
            })
            .collect();
        (!lines.is_empty()).then(|| {
            format!(
                "<skills>\nSkills you can load with the `skill` tool ({{\"name\": \"…\"}}) when one fits the task:\n{}\n</skills>",
                lines.join("\n")
            )
        })
    }

    /// Skills named with `$name` / `$ns:name` in a user's message (any activation; manual
    /// ones only this way), in order of appearance, without repeats.
    pub fn mentioned(&self, message: &str) -> Vec<&Skill> {
        let mut out: Vec<&Skill> = Vec::new();
        for (i, _) in message.match_indices('$') {
            if i > 0
                && message[..i]
                    .chars()
                    .next_back()
                    .is_some_and(|c| c.is_alphanumeric() || c == '$')
            {
                continue;
            }
            let word: String = message[i + 1..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | ':'))
                .collect();
            let word = word.trim_end_matches([':', '-']);
            if let Some(s) = self.get(word)
                && !out.iter().any(|k| k.name == s.name)
            {
                out.push(s);
            }
        }
        out
    }
}

/// The block that activates `skill`: its instructions, folder and extra files.
pub fn activation_block(skill: &Skill, workspace: &Path, why: &str) -> String {
    let folder = skill
        .dir
        .strip_prefix(workspace)
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| skill.dir.display().to_string());
    let mut out = format!(
        "<skill name=\"{}\" activation=\"{}\">\nSkill `{}` is active ({why}). Folder: {folder}\n",
        skill.name,
        skill.activation.as_str(),
        skill.name
    );
    if !skill.tools.is_empty() {
        out.push_str(&format!(
            "While it is active only these tools run: {}.\n",
            skill.tools.join(", ")
        ));
    }
    if !skill.files.is_empty() {
        out.push_str(&format!(
            "Files it ships (read them with read_file under its folder when needed): {}\n",
            skill.files.join(", ")
        ));
    }
    out.push_str(&skill.body);
    out.push_str("\n</skill>");
    out
}

/// Tools that stay available whatever a skill restricts (the loop's own: `read_result` is
/// keel-results' `READ_RESULT`, which a test there checks).
pub const ALWAYS_ALLOWED: &[&str] = &[SKILL_TOOL, "read_result", "tool_search"];

/// The refusal for `tool` under the active restriction of `skill`, if it applies.
pub fn restriction(skill: Option<&Skill>, tool: &str) -> Option<String> {
    let skill = skill?;
    if skill.tools.is_empty()
        || ALWAYS_ALLOWED.contains(&tool)
        || skill.tools.iter().any(|t| t == tool)
    {
        return None;
    }
    Some(format!(
        "not run: skill `{}` is active and restricts tools to {}; `{tool}` is not one of them. Use one of those, or finish the skill's work first.",
        skill.name,
        skill.tools.join(", ")
    ))
}

/// A new skill's `SKILL.md`.
pub fn template(name: &str, description: &str) -> String {
    format!(
        "---\nname: {name}\ndescription: {description}\n# activation: model | always | glob | manual (default model)\nactivation: model\n# globs: [\"**/*.sql\"]     (for activation: glob)\n# tools: [read_file, grep]  (restricts the tools while the skill is active)\n---\n\n# {name}\n\nWhat to do, step by step, when this skill applies.\n"
    )
}

/// Creates `.keel/skills/<name>/SKILL.md`; an existing skill is an error.
pub fn create(workspace: &Path, name: &str, description: &str) -> Result<PathBuf, String> {
    if !valid_name(name) || name.contains(':') {
        return Err(format!(
            "`{name}` is not a skill name: use lowercase letters, digits, `-` or `_`"
        ));
    }
    // Written beneath the open workspace directory: a `.keel/skills` that is a symlink out
    // of the workspace is refused, not followed.
    let rel = format!("{}/{name}/SKILL.md", WORKSPACE_ROOTS[0].0);
    let file = workspace.join(&rel);
    let ws = keel_tools::Workspace::new(workspace).map_err(|e| e.to_string())?;
    let target = ws.locate(&rel).map_err(|e| e.to_string())?;
    target
        .write_atomic(
            template(name, description).as_bytes(),
            keel_tools::fs::WriteMode::CreateNew,
            None,
        )
        .map_err(|e| {
            if e.kind() == std::io::ErrorKind::AlreadyExists {
                format!("{} already exists", file.display())
            } else {
                format!("cannot write {}: {e}", file.display())
            }
        })?;
    Ok(file)
}

#[cfg(test)]
mod tests;
