//! Distilling a successful eval task's trace into a rule, a skill or a memory-overlay lesson:
//! the model drafts it from the session's stored events; the caller shows the draft and stores
//! it only on an explicit accept ([`store_draft`]), always with its provenance (eval run, task,
//! session).

use std::path::{Path, PathBuf};

use futures::StreamExt;
use keel_llm::{ChatRequest, Provider, TurnAssembler};
use keel_protocol::{Event, EventKind, Message};
use keel_store::{MAX_MEMORY_CHARS, MemoryKind, SqliteDb};
use serde::{Deserialize, Serialize};

use keel_engine::rules::RULES_DIR;

/// What a trace is distilled into.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PromoteKind {
    /// `.keel/rules/NAME.md`: repository law every session gets.
    Rule,
    /// `.keel/skills/NAME/SKILL.md`: a procedure loaded when relevant.
    Skill,
    /// A promoted lesson in the memory overlay (`keel memory list --kind lesson`).
    Memory,
}

impl PromoteKind {
    pub fn as_str(self) -> &'static str {
        match self {
            PromoteKind::Rule => "rule",
            PromoteKind::Skill => "skill",
            PromoteKind::Memory => "memory lesson",
        }
    }
}

/// Where a draft came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Provenance {
    pub run: i64,
    pub task: String,
    pub session_id: String,
}

impl Provenance {
    /// One line naming the eval run, task and session.
    pub fn line(&self) -> String {
        format!(
            "keel eval run #{} task {} session {}",
            self.run, self.task, self.session_id
        )
    }
}

/// The model's draft.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Draft {
    /// Lowercase letters, digits and `-` (file or skill name).
    pub name: String,
    /// One line: what it is for.
    #[serde(default)]
    pub description: String,
    /// The rule, the skill's instructions, or the lesson.
    pub body: String,
}

/// Most characters of trace sent to the model.
const MAX_TRACE_CHARS: usize = 12_000;
/// Most characters kept of one tool result or argument list.
const MAX_ITEM_CHARS: usize = 400;

fn clip(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_string()
    } else {
        format!("{}…", text.chars().take(max).collect::<String>())
    }
}

/// A compact, readable trace of a session: the task, the model's messages, its tool calls and
/// their (clipped) results, in order.
pub fn trace_text(events: &[Event]) -> String {
    let mut out = String::new();
    for e in events {
        let line = match &e.kind {
            EventKind::SessionStarted { task, .. } => format!("TASK: {task}"),
            EventKind::AssistantMessage { text, .. } if !text.trim().is_empty() => {
                format!("ASSISTANT: {}", clip(text.trim(), MAX_ITEM_CHARS * 2))
            }
            EventKind::ToolCall {
                name, arguments, ..
            } => format!(
                "CALL {name} {}",
                clip(&arguments.to_string(), MAX_ITEM_CHARS)
            ),
            EventKind::ToolResult {
                name,
                is_error,
                content,
                ..
            } => format!(
                "RESULT {name}{}: {}",
                if *is_error { " (error)" } else { "" },
                clip(content.trim(), MAX_ITEM_CHARS)
            ),
            _ => continue,
        };
        out.push_str(&line);
        out.push('\n');
    }
    if out.chars().count() > MAX_TRACE_CHARS {
        let skip = out.chars().count() - MAX_TRACE_CHARS;
        out = format!(
            "…(earlier steps cut)\n{}",
            out.chars().skip(skip).collect::<String>()
        );
    }
    out
}

const SYSTEM: &str = "You distill what a coding agent's successful run teaches into reusable guidance for future runs on this repository. Be specific and short; state guidance, not a story of the run. Answer with one JSON object only: {\"name\": \"kebab-case-name\", \"description\": \"one line\", \"body\": \"markdown\"}.";

/// The request asking the model for a draft of `kind` from `trace`.
pub fn draft_request(kind: PromoteKind, task: &str, trace: &str) -> String {
    let what = match kind {
        PromoteKind::Rule => {
            "a repository rule: a few imperative bullet points every future session on this repository must follow"
        }
        PromoteKind::Skill => {
            "a skill: a step-by-step procedure (with the commands that worked) for tasks like this one; `description` says when to use it"
        }
        PromoteKind::Memory => {
            "a lesson for the memory overlay: one or two sentences (under 400 characters) of advice learned from this run"
        }
    };
    format!(
        "The task was:\n{task}\n\nThe run succeeded (its check passed). Its trace:\n<trace>\n{trace}</trace>\n\nDraft {what}."
    )
}

/// The JSON object in `text`: all of it, a fenced block, or the outermost `{…}`.
fn json_object(text: &str) -> Option<serde_json::Value> {
    let t = text.trim();
    if let Ok(v) = serde_json::from_str(t) {
        return Some(v);
    }
    let start = t.find('{')?;
    let end = t.rfind('}')?;
    serde_json::from_str(t.get(start..=end)?).ok()
}

/// `text` as a name: lowercase letters, digits and single dashes, at most 48 characters.
pub fn slug(text: &str) -> String {
    let mut out = String::new();
    for c in text.trim().chars().flat_map(char::to_lowercase) {
        if c.is_ascii_alphanumeric() {
            out.push(c);
        } else if !out.is_empty() && !out.ends_with('-') {
            out.push('-');
        }
        if out.len() >= 48 {
            break;
        }
    }
    out.trim_end_matches('-').to_string()
}

/// Parses the model's answer into a draft (name made safe).
pub fn parse_draft(text: &str) -> Result<Draft, String> {
    let value = json_object(text).ok_or_else(|| {
        format!(
            "the model's draft is not the JSON object asked for: {}",
            clip(text.trim(), 200)
        )
    })?;
    let mut draft: Draft = serde_json::from_value(value)
        .map_err(|e| format!("the model's draft lacks a field: {e}"))?;
    draft.name = slug(&draft.name);
    if draft.name.is_empty() {
        draft.name = "eval-lesson".into();
    }
    draft.description = draft.description.trim().replace('\n', " ");
    draft.body = draft.body.trim().to_string();
    if draft.body.is_empty() {
        return Err("the model's draft has an empty body".into());
    }
    Ok(draft)
}

/// Asks `provider` for a draft of `kind` from the task and its trace.
pub async fn draft(
    provider: &dyn Provider,
    kind: PromoteKind,
    task: &str,
    events: &[Event],
) -> Result<Draft, String> {
    let request = ChatRequest {
        system: SYSTEM.to_string(),
        tools: Vec::new(),
        messages: vec![Message::user_text(draft_request(
            kind,
            task,
            &trace_text(events),
        ))],
        max_tokens: Some(4_000),
    };
    let mut stream = provider
        .stream(&request)
        .await
        .map_err(|e| format!("the model could not draft: {e}"))?;
    let mut turn = TurnAssembler::new();
    while let Some(event) = stream.next().await {
        turn.push(event.map_err(|e| format!("the model could not draft: {e}"))?);
    }
    let turn = turn
        .finish()
        .map_err(|e| format!("the model could not draft: {e}"))?;
    parse_draft(&turn.text)
}

/// The text that would be stored for `draft` (a file's content, or the lesson).
pub fn rendered(kind: PromoteKind, draft: &Draft, from: &Provenance) -> String {
    match kind {
        PromoteKind::Rule => format!(
            "---\npromoted_from: {}\n---\n# {}\n\n{}\n",
            from.line(),
            draft.name,
            draft.body
        ),
        PromoteKind::Skill => format!(
            "---\nname: {}\ndescription: {}\npromoted_from: {}\n---\n{}\n",
            draft.name,
            if draft.description.is_empty() {
                "Learned from a successful eval run"
            } else {
                &draft.description
            },
            from.line(),
            draft.body
        ),
        PromoteKind::Memory => clip(&draft.body.replace('\n', " "), MAX_MEMORY_CHARS - 1),
    }
}

/// Where an accepted draft was stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "stored")]
pub enum Stored {
    File { path: PathBuf },
    Memory { id: i64 },
}

/// Stores an accepted draft: a rule or skill file under `root` (refusing to overwrite one), or
/// a lesson in `db`'s memory overlay, each with its provenance.
pub fn store_draft(
    kind: PromoteKind,
    draft: &Draft,
    from: &Provenance,
    root: &Path,
    db: &SqliteDb,
) -> Result<Stored, String> {
    store_draft_with(kind, draft, from, root, |text, source| {
        db.add_memory(MemoryKind::Lesson, text, source)
            .map(|entry| entry.id)
            .map_err(|e| e.to_string())
    })
}

/// [`store_draft`] with any memory store: `add_lesson(text, source)` stores a lesson and
/// returns its id (the PostgreSQL store's is async; the caller waits for it).
pub fn store_draft_with(
    kind: PromoteKind,
    draft: &Draft,
    from: &Provenance,
    root: &Path,
    add_lesson: impl FnOnce(&str, &str) -> Result<i64, String>,
) -> Result<Stored, String> {
    let path = match kind {
        PromoteKind::Rule => root.join(RULES_DIR).join(format!("{}.md", draft.name)),
        PromoteKind::Skill => root.join(".keel/skills").join(&draft.name).join("SKILL.md"),
        PromoteKind::Memory => {
            let id = add_lesson(&rendered(kind, draft, from), &from.line())
                .map_err(|e| format!("cannot store the lesson: {e}"))?;
            return Ok(Stored::Memory { id });
        }
    };
    // Written beneath the open workspace, never through a link on the way: a repository's
    // `.keel/skills -> ~/.config/keel/skills` must not put the draft among the user's own
    // skills (red-team pass 2, R13); an existing file is never replaced.
    let rel = path.strip_prefix(root).unwrap_or(&path).to_path_buf();
    let handle = keel_tools::beneath::DirHandle::open(root)
        .map_err(|e| format!("cannot open {}: {e}", root.display()))?;
    let target = handle
        .resolve(&rel)
        .map_err(|e| format!("cannot write {}: {e}", rel.display()))?;
    target
        .write_atomic(
            rendered(kind, draft, from).as_bytes(),
            keel_tools::fs::WriteMode::CreateNew,
            None,
        )
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::AlreadyExists => format!(
                "{} exists already; choose another name with --name",
                path.display()
            ),
            _ => format!("cannot write {}: {e}", path.display()),
        })?;
    Ok(Stored::File { path })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn from() -> Provenance {
        Provenance {
            run: 3,
            task: "fix".into(),
            session_id: "s1".into(),
        }
    }

    #[test]
    fn drafts_parse_from_prose_and_fences() {
        let d = parse_draft(
            "Here it is:\n```json\n{\"name\": \"Run Tests First!\", \"body\": \"- run `make test`\"}\n```",
        )
        .unwrap();
        assert_eq!(d.name, "run-tests-first");
        assert!(parse_draft("no json").unwrap_err().contains("not the JSON"));
        assert!(
            parse_draft("{\"name\": \"x\", \"body\": \" \"}")
                .unwrap_err()
                .contains("empty body")
        );
    }

    #[test]
    fn accepted_drafts_carry_provenance() {
        let tmp = tempfile::tempdir().unwrap();
        let db = SqliteDb::open_in_memory().unwrap();
        let d = Draft {
            name: "tests".into(),
            description: "when testing".into(),
            body: "Run the tests.".into(),
        };
        let Stored::File { path } =
            store_draft(PromoteKind::Rule, &d, &from(), tmp.path(), &db).unwrap()
        else {
            panic!("a rule is a file")
        };
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("promoted_from: keel eval run #3 task fix session s1"));
        assert!(
            store_draft(PromoteKind::Rule, &d, &from(), tmp.path(), &db)
                .unwrap_err()
                .contains("exists already")
        );
        store_draft(PromoteKind::Skill, &d, &from(), tmp.path(), &db).unwrap();
        let skill =
            std::fs::read_to_string(tmp.path().join(".keel/skills/tests/SKILL.md")).unwrap();
        assert!(skill.starts_with("---\nname: tests\ndescription: when testing\n"));
        let Stored::Memory { id } =
            store_draft(PromoteKind::Memory, &d, &from(), tmp.path(), &db).unwrap()
        else {
            panic!("a lesson is memory")
        };
        let lessons = db.list_memory(Some(MemoryKind::Lesson)).unwrap();
        assert_eq!(lessons[0].id, id);
        assert_eq!(lessons[0].source, from().line());
    }

    #[test]
    fn a_draft_never_lands_through_a_link_out_of_the_workspace() {
        // Red-team pass 2, R13: a repository's `.keel/skills` linked to the user's skills.
        let tmp = tempfile::tempdir().unwrap();
        let ws = tmp.path().join("ws");
        let user_skills = tmp.path().join("user-skills");
        std::fs::create_dir_all(ws.join(".keel")).unwrap();
        std::fs::create_dir_all(&user_skills).unwrap();
        std::os::unix::fs::symlink(&user_skills, ws.join(".keel/skills")).unwrap();
        let db = SqliteDb::open_in_memory().unwrap();
        let d = Draft {
            name: "planted".into(),
            description: "d".into(),
            body: "b".into(),
        };
        assert!(store_draft(PromoteKind::Skill, &d, &from(), &ws, &db).is_err());
        assert!(std::fs::read_dir(&user_skills).unwrap().next().is_none());
    }
}
