//! From what the model sent to a call Keel can run: name lookup (exact, spelling, alias,
//! intent verb), argument repair and schema fitting, with every change recorded.

use std::path::Path;

use serde_json::{Map, Value};

use super::alias::{ALIASES, Args};
use super::coerce::{fit_to_schema, schema_help};
use super::intent::route_intent;
use super::json::{CLOSED_BRACKETS, HTML_QUOTES, decode_html_quotes, repair_json};
use crate::ToolRegistry;

/// One visible change Keel made to a call before running it (the `tool_repaired` event).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repair {
    /// What the model sent (a name, or argument text).
    pub from: String,
    /// What runs instead.
    pub to: String,
    /// How and why, briefly.
    pub how: String,
}

/// A call ready to run.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolved {
    /// The registered tool that runs.
    pub tool: String,
    /// Arguments that fit its schema.
    pub args: Value,
    /// What was changed to get here (empty for a clean call).
    pub repairs: Vec<Repair>,
}

impl Resolved {
    /// A one-line note for the tool result, when anything was repaired.
    pub fn note(&self) -> Option<String> {
        if self.repairs.is_empty() {
            return None;
        }
        let parts: Vec<String> = self
            .repairs
            .iter()
            .map(|r| {
                if r.how.starts_with("name:") {
                    format!("ran `{}` as `{}`", r.from, r.to)
                } else {
                    format!("arguments repaired ({})", r.how)
                }
            })
            .collect();
        Some(format!("[keel: {}]", parts.join("; ")))
    }
}

/// Said only when the finish reason was the output limit.
const CUT_OFF: &str = "your reply was cut off at the output token limit in the middle of this call's arguments, so it was not run. Send it again with less text: split a large file into create_file with the first part, then edit_file to add the rest.";

/// Longest argument text quoted in a repair's `from`.
const QUOTE_CHARS: usize = 400;

/// Maps a call as the model sent it onto a registered tool and arguments that fit its schema.
/// `arguments` is the parsed JSON, or — when the provider's text was not JSON — that text as a
/// JSON string. `cut_off` says the reply stopped at the output limit (finish reason `length`).
/// An `Err` is a message for the model (it quotes the schema when the tool is known); nothing
/// ran.
///
/// With `workspace`, an absolute `path` inside it becomes workspace-relative (models trained on
/// harnesses that want absolute paths send them); any other path is left for the tool's own
/// confinement to judge.
pub fn resolve_call(
    registry: &ToolRegistry,
    name: &str,
    arguments: &Value,
    cut_off: bool,
    workspace: Option<&Path>,
) -> Result<Resolved, String> {
    if let Some((inner, inner_args)) = wrapped_call(registry, name, arguments) {
        // `{"name": "read_file", "arguments": {…}}` sent as the arguments of a generic
        // `tool_call`/`function` call, or of the same tool: resolve the inner call.
        let mut resolved = resolve_call(registry, &inner, &inner_args, cut_off, workspace)?;
        resolved.repairs.insert(
            0,
            Repair {
                from: name.to_string(),
                to: inner.clone(),
                how: format!("name: the call `{inner}` was wrapped in `{name}`'s arguments"),
            },
        );
        return Ok(resolved);
    }
    let mut repairs = Vec::new();
    let target = lookup(registry, name)?;
    let mut notes: Vec<String> = Vec::new();
    let mut args: Args = match parse_arguments(arguments, &target, cut_off, &mut notes) {
        Ok(map) => map,
        // A call cut off needs less text, not its schema: in a small window the schema costs
        // hundreds of tokens (SmolLM2's tokenizer reads JSON schemas at about two bytes a
        // token).
        Err(msg) if msg == CUT_OFF => return Err(msg),
        Err(msg) => {
            let help = target
                .direct()
                .and_then(|t| registry.get(t))
                .map(|t| format!("\n{}", schema_help(t.name(), &t.input_schema())))
                .unwrap_or_default();
            return Err(format!("{msg}{help}"));
        }
    };
    let before = Value::Object(args.clone());
    // A mapping that cannot be done says why, with the schema of the tool it was for.
    let with_schema = |tool: &str, msg: String| match registry.get(tool) {
        Some(t) => format!("{msg}\n{}", schema_help(t.name(), &t.input_schema())),
        None => msg,
    };
    let tool = match &target {
        Target::Registered(t) => {
            canonical_fields(t, &mut args).map_err(|m| with_schema(t, m))?;
            t.clone()
        }
        Target::Renamed { to, how } => {
            canonical_fields(to, &mut args).map_err(|m| with_schema(to, m))?;
            repairs.push(Repair {
                from: name.to_string(),
                to: to.clone(),
                how: format!("name: {how}"),
            });
            to.clone()
        }
        Target::Mapped {
            map,
            how,
            target: target_hint,
        } => {
            let to = map(&mut args).map_err(|m| {
                let msg = format!("`{name}` ({how}): {m}");
                match target_hint {
                    Some(t) => with_schema(t, msg),
                    None => msg,
                }
            })?;
            repairs.push(Repair {
                from: name.to_string(),
                to: to.to_string(),
                how: format!("name: {how}"),
            });
            to.to_string()
        }
    };
    let mapped_note = match &target {
        Target::Mapped { .. } => format!("arguments mapped onto {tool}'s fields"),
        _ => "renamed fields to the tool's own".to_string(),
    };
    let Some(runner) = registry.get(&tool).filter(|_| registry.dispatchable(&tool)) else {
        return Err(format!(
            "`{name}` maps to `{tool}`, which is not available in this session. Available tools: {}.",
            registry.listed_names().join(", ")
        ));
    };
    if Value::Object(args.clone()) != before {
        notes.push(mapped_note);
    }
    let schema = runner.input_schema();
    fit_to_schema(&tool, &mut args, &schema, &mut notes)?;
    if let (Some(root), Some(Value::String(path))) = (workspace, args.get_mut("path"))
        && let Some(rel) = relative_to(root, path)
    {
        notes.push(format!(
            "`path`: the absolute path → `{rel}` in the workspace"
        ));
        *path = rel;
    }
    let args = Value::Object(args);
    if !notes.is_empty() {
        repairs.push(Repair {
            from: quote(arguments),
            to: args.to_string(),
            how: notes.join("; "),
        });
    }
    Ok(Resolved {
        tool,
        args,
        repairs,
    })
}

/// An alias's or intent's argument mapping: rewrites the arguments, returns the tool.
type ArgsMapper = dyn Fn(&mut Args) -> Result<&'static str, String>;

enum Target {
    /// A registered, dispatchable name.
    Registered(String),
    /// Another spelling of a registered name.
    Renamed { to: String, how: String },
    /// An alias or intent verb, with its argument mapping.
    Mapped {
        map: Box<ArgsMapper>,
        how: String,
        /// The one tool it maps to, when there is one (for error messages).
        target: Option<&'static str>,
    },
}

impl Target {
    /// The registered tool when known before the arguments are mapped.
    fn direct(&self) -> Option<&str> {
        match self {
            Target::Registered(t) | Target::Renamed { to: t, .. } => Some(t),
            Target::Mapped { .. } => None,
        }
    }

    fn is_patch(&self) -> bool {
        self.direct() == Some("apply_patch")
    }
}

fn lookup(registry: &ToolRegistry, name: &str) -> Result<Target, String> {
    if let Some(state) = registry.state(name) {
        if state.dispatchable() {
            return Ok(Target::Registered(name.to_string()));
        }
        if let super::ToolState::Removed { replacement } = state {
            let instead = replacement
                .as_deref()
                .and_then(|r| registry.get(r))
                .map(|t| {
                    format!(
                        " Use `{}` instead: {}\n{}",
                        t.name(),
                        t.description(),
                        schema_help(t.name(), &t.input_schema())
                    )
                })
                .unwrap_or_default();
            return Err(format!("the tool `{name}` was removed.{instead}"));
        }
    }
    let normal = normalise(name);
    let alias = |a: &super::alias::Alias| Target::Mapped {
        map: Box::new(a.map),
        how: format!("{} alias", a.family),
        target: (!a.target.contains(' ')).then_some(a.target),
    };
    if let Some(a) = ALIASES.iter().find(|a| a.name == name) {
        return Ok(alias(a));
    }
    if route_intent(&normal, &mut Map::new()).is_some() {
        let verb = normal.clone();
        return Ok(Target::Mapped {
            map: Box::new(move |args: &mut Args| {
                route_intent(&verb, args).unwrap_or_else(|| Err("unknown intent".into()))
            }),
            how: format!("intent verb `{normal}`"),
            target: None,
        });
    }
    if let Some(a) = ALIASES.iter().find(|a| a.name.to_lowercase() == normal) {
        return Ok(alias(a));
    }
    if normal != name && registry.state(&normal).is_some_and(|s| s.dispatchable()) {
        return Ok(Target::Renamed {
            to: normal,
            how: "spelling normalised".into(),
        });
    }
    if matches!(
        normal.as_str(),
        "attempt_completion" | "finish" | "submit" | "done" | "complete" | "final_answer"
    ) {
        return Err(format!(
            "`{name}` is not a tool here: to finish, reply with a short summary of what you did and make no tool call"
        ));
    }
    Err(unknown_tool(registry, name, &normal))
}

/// `functions.ReadFile` → `read_file`; `developer__shell` → `shell`.
fn normalise(name: &str) -> String {
    let mut n = name.trim();
    for prefix in [
        "functions.",
        "functions:",
        "default_api.",
        "default_api:",
        "tools.",
        "tool:",
        "developer__",
        "keel.",
        "keel__",
    ] {
        if let Some(rest) = n.strip_prefix(prefix) {
            n = rest;
        }
    }
    let mut out = String::with_capacity(n.len() + 4);
    let mut prev_lower = false;
    for c in n.chars() {
        if c.is_uppercase() {
            if prev_lower {
                out.push('_');
            }
            out.extend(c.to_lowercase());
            prev_lower = false;
        } else if c == '-' || c == ' ' {
            out.push('_');
            prev_lower = false;
        } else {
            out.push(c);
            prev_lower = c.is_lowercase() || c.is_ascii_digit();
        }
    }
    out
}

fn unknown_tool(registry: &ToolRegistry, name: &str, normal: &str) -> String {
    if let Some(why) = registry.late_missing(name) {
        return why;
    }
    let names = registry.searchable_names();
    let nearest = names
        .iter()
        .map(|n| (crate::registry::edit_distance(normal, n), n.as_str()))
        .min()
        .map(|(_, n)| n);
    let mut msg = format!("unknown tool `{name}`.");
    if let Some(t) = nearest.and_then(|n| registry.get(n)) {
        msg.push_str(&format!(
            " The nearest tool is `{}`: {}\n{}",
            t.name(),
            t.description(),
            schema_help(t.name(), &t.input_schema())
        ));
    }
    msg.push_str(&format!(
        "\nAvailable tools: {}.",
        registry.listed_names().join(", ")
    ));
    msg
}

fn parse_arguments(
    arguments: &Value,
    target: &Target,
    cut_off: bool,
    notes: &mut Vec<String>,
) -> Result<Args, String> {
    let mut args = parse_argument_value(arguments, target, cut_off, notes)?;
    let mut value = Value::Object(std::mem::take(&mut args));
    if decode_html_quotes(&mut value) && !notes.iter().any(|n| n == HTML_QUOTES) {
        notes.push(HTML_QUOTES.to_string());
    }
    match value {
        Value::Object(map) => Ok(map),
        _ => Ok(args),
    }
}

fn parse_argument_value(
    arguments: &Value,
    target: &Target,
    cut_off: bool,
    notes: &mut Vec<String>,
) -> Result<Args, String> {
    match arguments {
        Value::Object(map) => Ok(map.clone()),
        Value::Null => Ok(Map::new()),
        Value::String(raw) => {
            // Codex sends apply_patch's patch as the raw arguments, not JSON.
            if target.is_patch() && raw.trim_start().starts_with("*** Begin Patch") {
                notes.push("took the raw patch text as `patch`".into());
                let mut m = Map::new();
                m.insert("patch".into(), Value::String(raw.clone()));
                return Ok(m);
            }
            match repair_json(raw) {
                // Cut off at the output limit: closing the brackets would drop what was lost.
                Ok(r) if cut_off && r.fixes.contains(&CLOSED_BRACKETS) => Err(CUT_OFF.to_string()),
                Ok(r) => {
                    if r.fixes.is_empty() {
                        // Valid JSON text inside a JSON string: the model encoded it twice.
                        notes.push("decoded arguments sent as a JSON string".into());
                    }
                    notes.extend(r.fixes.iter().map(|f| f.to_string()));
                    match r.value {
                        Value::Object(map) => Ok(map),
                        other => Err(format!(
                            "expected a JSON object of named arguments, got {}; nothing was run.",
                            short(&other.to_string())
                        )),
                    }
                }
                Err(e) if cut_off && e.ends_early => Err(CUT_OFF.to_string()),
                Err(e) => Err(format!(
                    "the arguments are not valid JSON and cannot be repaired without guessing: {}; nothing was run. Send one JSON object with double-quoted keys and strings.",
                    e.message
                )),
            }
        }
        other => Err(format!(
            "expected a JSON object of named arguments, got {}; nothing was run.",
            short(&other.to_string())
        )),
    }
}

/// Field spellings of other harnesses on Keel's own tool names (`file_path` on `read_file`).
fn canonical_fields(tool: &str, args: &mut Args) -> Result<(), String> {
    let mapped = match tool {
        "read_file" => {
            if let Some(v) = args.remove("start_line_one_indexed") {
                args.entry("start_line").or_insert(v);
            }
            if let Some(v) = args.remove("end_line_one_indexed_inclusive") {
                args.entry("end_line").or_insert(v);
            }
            args.remove("should_read_entire_file");
            ALIASES.iter().find(|a| a.name == "Read")
        }
        "create_file" => ALIASES.iter().find(|a| a.name == "Write"),
        "edit_file"
            if !args.contains_key("edits")
                && ["old_string", "oldString", "old_str", "search"]
                    .iter()
                    .any(|k| args.contains_key(*k)) =>
        {
            ALIASES.iter().find(|a| a.name == "Edit")
        }
        "edit_file" => {
            super::edits::edit_file_fields(args)?;
            None
        }
        "grep" => ALIASES.iter().find(|a| a.name == "Grep"),
        "list_files" => ALIASES.iter().find(|a| a.name == "LS"),
        "run_command" => ALIASES.iter().find(|a| a.name == "run_shell_command"),
        "apply_patch" => ALIASES.iter().find(|a| a.name == "patch"),
        "ask_user" => ALIASES.iter().find(|a| a.name == "ask_followup_question"),
        "update_plan" => ALIASES.iter().find(|a| a.name == "TodoWrite"),
        "run_tests" => ALIASES.iter().find(|a| a.name == "run_test"),
        "codebase_search" => ALIASES.iter().find(|a| a.name == "search_code"),
        _ => None,
    };
    if let Some(alias) = mapped {
        let got = (alias.map)(args)?;
        if got != tool {
            return Err(format!(
                "these arguments are for `{got}`, not `{tool}`: call `{got}` instead"
            ));
        }
    }
    Ok(())
}

/// Names small models use for "call a tool" instead of the tool's own name.
const DISPATCHER_NAMES: &[&str] = &[
    "tool_call",
    "tool_use",
    "function",
    "function_call",
    "call",
    "call_tool",
    "use_tool",
    "invoke",
];

/// A call wrapped as `{"name"|"tool": N, "arguments"|"parameters"|"args"|"input": {…}}` — and
/// nothing else — in the arguments of a dispatcher name or of `N` itself: the inner name and
/// arguments. Tools whose schema has a `name` or `tool` field are never unwrapped.
fn wrapped_call(registry: &ToolRegistry, name: &str, arguments: &Value) -> Option<(String, Value)> {
    let parsed;
    let map = match arguments {
        Value::Object(m) => m,
        Value::String(raw) => {
            parsed = repair_json(raw).ok()?.value;
            parsed.as_object()?
        }
        _ => return None,
    };
    if map.len() != 2 {
        return None;
    }
    let inner = ["name", "tool", "tool_name", "function"]
        .iter()
        .find_map(|k| map.get(*k).and_then(Value::as_str))?;
    let args = ["arguments", "parameters", "args", "input"]
        .iter()
        .find_map(|k| map.get(*k))?;
    if !(args.is_object() || args.is_string()) {
        return None;
    }
    let normal = normalise(name);
    let same = normalise(inner) == normal;
    if !(DISPATCHER_NAMES.contains(&normal.as_str()) || same) {
        return None;
    }
    let has_own_field = registry
        .get(name)
        .and_then(|t| t.input_schema().get("properties").cloned())
        .is_some_and(|p| p.get("name").is_some() || p.get("tool").is_some());
    if has_own_field {
        return None;
    }
    Some((inner.to_string(), args.clone()))
}

/// `path` relative to `root` when it is absolute and inside it (`.` for the root itself).
pub(crate) fn relative_to(root: &Path, path: &str) -> Option<String> {
    let p = Path::new(path);
    if !p.is_absolute() {
        return None;
    }
    let canonical = root.canonicalize().ok();
    let rest = p
        .strip_prefix(root)
        .ok()
        .or_else(|| canonical.as_deref().and_then(|c| p.strip_prefix(c).ok()))?;
    // Only plain components: `..` stays for the workspace to refuse.
    if rest
        .components()
        .any(|c| !matches!(c, std::path::Component::Normal(_)))
    {
        return None;
    }
    let rel = rest.to_str()?.to_string();
    Some(if rel.is_empty() { ".".into() } else { rel })
}

fn quote(arguments: &Value) -> String {
    match arguments {
        Value::String(raw) => short(raw),
        other => short(&other.to_string()),
    }
}

fn short(text: &str) -> String {
    if text.chars().count() <= QUOTE_CHARS {
        return text.to_string();
    }
    let head: String = text.chars().take(QUOTE_CHARS).collect();
    format!("{head}…")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_normalise() {
        assert_eq!(normalise("functions.ReadFile"), "read_file");
        assert_eq!(normalise("readFile"), "read_file");
        assert_eq!(normalise("read-file"), "read_file");
        assert_eq!(normalise("developer__shell"), "shell");
        assert_eq!(normalise("LS"), "ls");
        assert_eq!(normalise("run_tests"), "run_tests");
    }
}
