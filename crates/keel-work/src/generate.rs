//! `keel task generate`: the model breaks a PRD into tasks as structured output (JSON), and
//! this module checks the answer before anything is stored.
//!
//! Repaired silently (the intent is unambiguous): JSON wrapped in prose or a code fence, a
//! `{"tasks": […]}` object instead of a bare list, sizes written as words (`small`, `Medium`),
//! ids and dependencies given as strings (`"2"`, `"#2"`, `"G1"`: any id unique in the list is a
//! key the dependencies refer to), a criterion given as one string. Refused with
//! the reason — and the model asked once more with that reason — anything else: not JSON, a
//! field of the wrong type, a dependency on a task that does not exist, a cycle, a size out of
//! bounds, no tasks at all. A second bad answer is a clear error, and nothing is stored.

use std::collections::BTreeMap;

use futures::StreamExt;
use keel_llm::{ChatRequest, Provider, TurnAssembler};
use keel_protocol::Message;
use keel_store::work::{NewTask, TASK_SIZES, find_cycle};
use serde_json::Value;

/// Most tasks one generation may produce.
pub const MAX_TASKS: usize = 50;

/// The instructions for the generation request (system prompt).
pub const GENERATE_SYSTEM: &str = "You are a senior engineer planning work for a coding agent. \
Break the product requirements document you are given into small, independently verifiable \
implementation tasks, in the order they should be built. Answer with JSON only: an array of \
objects, each with \"id\" (1, 2, 3 … in order), \"title\" (short imperative), \"description\" \
(what to build and where), \"acceptance_criteria\" (an array of checkable statements, each one \
provable by a test, a command's output or a file), \"depends_on\" (an array of ids of tasks that \
must be done first; [] when none) and \"size\" (one of xs, s, m, l, xl). No cycles; depend only \
on ids in the list.";

/// What went wrong with a generation.
#[derive(Debug, thiserror::Error)]
pub enum GenerateError {
    #[error("the model's task list was invalid twice; nothing was stored. Last problem: {0}")]
    Invalid(String),
    #[error("the model request failed: {0}")]
    Model(String),
}

/// The user message asking for tasks for `prd` (given the tasks that already exist).
pub fn generate_request(prd_title: &str, prd_body: &str, existing: &[String]) -> String {
    let mut out = format!("# PRD: {prd_title}\n\n{}\n", prd_body.trim());
    if !existing.is_empty() {
        out.push_str("\nTasks that already exist (do not repeat them):\n");
        for t in existing {
            out.push_str(&format!("- {t}\n"));
        }
    }
    out.push_str("\nAnswer with the JSON array of tasks only.\n");
    out
}

/// Asks `provider` for tasks; re-asks once with the problem when the answer is invalid.
/// Returns the tasks in dependency order (each task's `after` names earlier tasks).
pub async fn generate_tasks(
    provider: &dyn Provider,
    request: &str,
) -> Result<Vec<NewTask>, GenerateError> {
    let mut messages = vec![Message::user_text(request)];
    let mut last = String::new();
    for attempt in 0..2 {
        let reply = ask(provider, &messages).await?;
        match parse_tasks(&reply) {
            Ok(tasks) => return Ok(tasks),
            Err(problem) => {
                if attempt == 0 {
                    messages.push(Message::assistant_text(reply));
                    messages.push(Message::user_text(format!(
                        "That task list cannot be used: {problem}. Answer again with the corrected JSON array only."
                    )));
                }
                last = problem;
            }
        }
    }
    Err(GenerateError::Invalid(last))
}

async fn ask(provider: &dyn Provider, messages: &[Message]) -> Result<String, GenerateError> {
    let request = ChatRequest {
        system: GENERATE_SYSTEM.to_string(),
        tools: Vec::new(),
        messages: messages.to_vec(),
        max_tokens: Some(8_000),
    };
    let mut stream = provider
        .stream(&request)
        .await
        .map_err(|e| GenerateError::Model(e.to_string()))?;
    let mut turn = TurnAssembler::new();
    while let Some(event) = stream.next().await {
        turn.push(event.map_err(|e| GenerateError::Model(e.to_string()))?);
    }
    let turn = turn
        .finish()
        .map_err(|e| GenerateError::Model(e.to_string()))?;
    Ok(turn.text)
}

/// The JSON value in `text`: the whole text, a fenced block, or the outermost `[…]`/`{…}`.
fn extract_json(text: &str) -> Option<Value> {
    let t = text.trim();
    if let Ok(v) = serde_json::from_str(t) {
        return Some(v);
    }
    if let Some(start) = t.find("```") {
        let body = &t[start + 3..];
        let body = body.trim_start_matches(|c: char| c.is_ascii_alphabetic());
        if let Some(end) = body.find("```")
            && let Ok(v) = serde_json::from_str(body[..end].trim())
        {
            return Some(v);
        }
    }
    for (open, close) in [('[', ']'), ('{', '}')] {
        if let (Some(a), Some(b)) = (t.find(open), t.rfind(close))
            && a < b
            && let Ok(v) = serde_json::from_str(&t[a..=b])
        {
            return Some(v);
        }
    }
    None
}

fn size_of(v: Option<&Value>, n: usize) -> Result<String, String> {
    let Some(Value::String(s)) = v else {
        return Err(format!(
            "task {n}: \"size\" must be a string, one of {}",
            TASK_SIZES.join(", ")
        ));
    };
    let s = s.trim().to_ascii_lowercase();
    let s = match s.as_str() {
        "extra small" | "extra-small" | "tiny" => "xs",
        "small" => "s",
        "medium" => "m",
        "large" => "l",
        "extra large" | "extra-large" | "huge" => "xl",
        other => other,
    };
    if TASK_SIZES.contains(&s) {
        Ok(s.to_string())
    } else {
        Err(format!(
            "task {n}: size `{s}` is out of bounds; use one of {}",
            TASK_SIZES.join(", ")
        ))
    }
}

fn text_field(obj: &serde_json::Map<String, Value>, key: &str, n: usize) -> Result<String, String> {
    match obj.get(key) {
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(s.trim().to_string()),
        Some(Value::String(_)) | None => Err(format!("task {n}: \"{key}\" is missing or empty")),
        Some(other) => Err(format!(
            "task {n}: \"{key}\" must be a string, not {}",
            kind(other)
        )),
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Parses and validates a task list; the tasks come back in dependency order.
pub fn parse_tasks(text: &str) -> Result<Vec<NewTask>, String> {
    let value = extract_json(text).ok_or("the answer is not JSON")?;
    let list = match value {
        Value::Array(a) => a,
        Value::Object(mut o) => match o.remove("tasks") {
            Some(Value::Array(a)) => a,
            _ => return Err("expected a JSON array of tasks".into()),
        },
        other => {
            return Err(format!(
                "expected a JSON array of tasks, not {}",
                kind(&other)
            ));
        }
    };
    if list.is_empty() {
        return Err("the list has no tasks".into());
    }
    if list.len() > MAX_TASKS {
        return Err(format!(
            "{} tasks is more than the {MAX_TASKS} allowed; make them coarser",
            list.len()
        ));
    }
    // Ids as the model gave them (default: position), mapped to positions. Any id is a key:
    // `1`, `"1"` and `"#1"` are the same; `"G1"` is just a name.
    let mut ids: BTreeMap<String, usize> = BTreeMap::new();
    let mut tasks = Vec::new();
    let mut raw_deps = Vec::new();
    for (i, item) in list.iter().enumerate() {
        let n = i + 1;
        let Value::Object(obj) = item else {
            return Err(format!("task {n} must be an object, not {}", kind(item)));
        };
        let id = match obj.get("id") {
            None => n.to_string(),
            Some(v) => dep_id(v).ok_or_else(|| {
                format!("task {n}: \"id\" must be a number or a short string, not {v}")
            })?,
        };
        if ids.insert(id.clone(), i).is_some() {
            return Err(format!("two tasks have id {id}; every id must be unique"));
        }
        let criteria = match obj
            .get("acceptance_criteria")
            .or_else(|| obj.get("criteria"))
        {
            Some(Value::Array(a)) => a
                .iter()
                .map(|c| match c {
                    Value::String(s) if !s.trim().is_empty() => Ok(s.trim().to_string()),
                    other => Err(format!(
                        "task {n}: each acceptance criterion must be a non-empty string, not {}",
                        kind(other)
                    )),
                })
                .collect::<Result<Vec<_>, _>>()?,
            Some(Value::String(s)) if !s.trim().is_empty() => vec![s.trim().to_string()],
            Some(other) => {
                return Err(format!(
                    "task {n}: \"acceptance_criteria\" must be an array of strings, not {}",
                    kind(other)
                ));
            }
            None => return Err(format!("task {n}: \"acceptance_criteria\" is missing")),
        };
        if criteria.is_empty() {
            return Err(format!("task {n} has no acceptance criteria"));
        }
        let deps = match obj.get("depends_on").or_else(|| obj.get("dependencies")) {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(a)) => a
                .iter()
                .map(|d| {
                    dep_id(d).ok_or_else(|| {
                        format!("task {n}: dependencies must be task ids (as in \"id\"), not {d}")
                    })
                })
                .collect::<Result<Vec<_>, _>>()?,
            Some(other) => {
                return Err(format!(
                    "task {n}: \"depends_on\" must be an array of task ids, not {}",
                    kind(other)
                ));
            }
        };
        raw_deps.push(deps);
        tasks.push(NewTask {
            title: text_field(obj, "title", n)?,
            description: text_field(obj, "description", n)?,
            criteria,
            size: size_of(obj.get("size"), n)?,
            depends_on: Vec::new(),
            after: Vec::new(),
        });
    }
    let mut edges: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for (i, deps) in raw_deps.iter().enumerate() {
        let mut positions = Vec::new();
        for d in deps {
            let p = *ids.get(d).ok_or_else(|| {
                format!(
                    "task {} (`{}`) depends on task {d}, which is not in the list",
                    i + 1,
                    tasks[i].title
                )
            })?;
            if !positions.contains(&p) {
                positions.push(p);
            }
        }
        edges.insert(i, positions);
    }
    if let Some(cycle) = find_cycle(&edges) {
        let names: Vec<String> = cycle
            .iter()
            .map(|p| format!("`{}`", tasks[*p].title))
            .collect();
        return Err(format!(
            "the dependencies form a cycle: {}",
            names.join(" → ")
        ));
    }
    // Dependency order (stable: the model's order wherever it allows).
    let mut order: Vec<usize> = Vec::new();
    while order.len() < tasks.len() {
        let next = (0..tasks.len()).find(|i| {
            !order.contains(i)
                && edges
                    .get(i)
                    .is_none_or(|d| d.iter().all(|p| order.contains(p)))
        });
        match next {
            Some(i) => order.push(i),
            None => return Err("the dependencies cannot be ordered".into()),
        }
    }
    let position: BTreeMap<usize, usize> = order
        .iter()
        .enumerate()
        .map(|(new, old)| (*old, new))
        .collect();
    Ok(order
        .iter()
        .map(|old| {
            let mut t = tasks[*old].clone();
            t.after = edges
                .get(old)
                .map(|d| d.iter().filter_map(|p| position.get(p).copied()).collect())
                .unwrap_or_default();
            t.after.sort_unstable();
            t
        })
        .collect())
}

/// A task id as a key: a number or a non-empty string (`#` and blanks around it dropped, so
/// `2`, `"2"` and `"#2"` are one id).
fn dep_id(v: &Value) -> Option<String> {
    match v {
        Value::Number(n) => n.as_i64().map(|i| i.to_string()),
        Value::String(s) => {
            let key = s.trim().trim_start_matches('#').trim();
            (!key.is_empty() && key.chars().count() <= 64).then(|| key.to_string())
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fenced_list_with_loose_types_is_repaired() {
        let text = r##"Here you go:
```json
{"tasks": [
 {"id": 2, "title": "Add tests", "description": "pytest", "acceptance_criteria": "tests pass", "depends_on": ["#1"], "size": "Small"},
 {"id": 1, "title": "Write greet.py", "description": "the CLI", "acceptance_criteria": ["prints hello"], "depends_on": [], "size": "m"}
]}
```"##;
        let tasks = parse_tasks(text).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(tasks[0].title, "Write greet.py", "dependencies come first");
        assert_eq!(tasks[1].after, vec![0]);
        assert_eq!(tasks[1].size, "s");
        assert_eq!(tasks[1].criteria, vec!["tests pass".to_string()]);
    }

    #[test]
    fn string_ids_are_keys() {
        let text = r##"[
 {"id": "G2", "title": "Test it", "description": "d", "acceptance_criteria": ["c"], "depends_on": ["G1"], "size": "s"},
 {"id": "G1", "title": "Build it", "description": "d", "acceptance_criteria": ["c"], "depends_on": [], "size": "m"},
 {"id": 3, "title": "Ship it", "description": "d", "acceptance_criteria": ["c"], "depends_on": ["#G2", "G1"], "size": "xs"}
]"##;
        let tasks = parse_tasks(text).unwrap_or_else(|e| panic!("{e}"));
        let titles: Vec<&str> = tasks.iter().map(|t| t.title.as_str()).collect();
        assert_eq!(titles, ["Build it", "Test it", "Ship it"]);
        assert_eq!(tasks[1].after, vec![0]);
        assert_eq!(tasks[2].after, vec![0, 1]);
        let twice = r#"[{"id": "A", "title": "a", "description": "d", "acceptance_criteria": ["c"], "size": "s"},
 {"id": "A", "title": "b", "description": "d", "acceptance_criteria": ["c"], "size": "s"}]"#;
        assert!(
            parse_tasks(twice)
                .err()
                .unwrap_or_default()
                .contains("two tasks have id A")
        );
        let dangling = r#"[{"id": "A", "title": "a", "description": "d", "acceptance_criteria": ["c"], "depends_on": ["B"], "size": "s"}]"#;
        assert!(
            parse_tasks(dangling)
                .err()
                .unwrap_or_default()
                .contains("depends on task B")
        );
    }

    #[test]
    fn cycles_unknown_dependencies_and_wrong_types_are_refused() {
        let task = |id: u32, deps: &str, size: &str| {
            format!(
                r#"{{"id": {id}, "title": "t{id}", "description": "d", "acceptance_criteria": ["c"], "depends_on": {deps}, "size": {size}}}"#
            )
        };
        let cycle = format!("[{}, {}]", task(1, "[2]", "\"s\""), task(2, "[1]", "\"s\""));
        assert!(
            parse_tasks(&cycle)
                .err()
                .unwrap_or_default()
                .contains("cycle")
        );
        let dangling = format!("[{}]", task(1, "[7]", "\"s\""));
        assert!(
            parse_tasks(&dangling)
                .err()
                .unwrap_or_default()
                .contains("task 7")
        );
        let wrong = format!("[{}]", task(1, "[]", "3"));
        assert!(
            parse_tasks(&wrong)
                .err()
                .unwrap_or_default()
                .contains("\"size\" must be a string")
        );
        let big = format!("[{}]", task(1, "[]", "\"xxl\""));
        assert!(
            parse_tasks(&big)
                .err()
                .unwrap_or_default()
                .contains("out of bounds")
        );
        assert!(parse_tasks("I think we should start with…").is_err());
    }
}
