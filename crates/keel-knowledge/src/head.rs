//! The head for a small window. Keel's full head (the system prompt and the first-turn tool
//! catalog) takes about 1,900 tokens: a model with a 2,048-token window could not answer a
//! single request. When the full head would take more than half the window, a run uses the
//! compact head instead — a short base prompt (the project's instructions and constitution
//! kept whole), the few tools a small model needs (read, list, grep, edit, create, run), no
//! codemap in the first message. It is fixed for the run (byte-stable across its turns); a
//! window learned smaller mid-run switches to it once. When even the compact head does not
//! leave room, the run fails naming both sizes.

use keel_protocol::ToolSpec;

use crate::prompt::BASE_PROMPT;

/// The compact base layer.
pub const COMPACT_BASE_PROMPT: &str = include_str!("prompts/base_compact.md");

/// The tools of the compact head (those registered and listed; the rest stay callable by
/// exact name).
pub const COMPACT_TOOLS: &[&str] = &[
    "read_file",
    "list_files",
    "grep",
    "edit_file",
    "create_file",
    "run_command",
    keel_phase::ADVANCE_PHASE,
    crate::skills::SKILL_TOOL,
];

/// Whether a head of `head_tokens` is too big for a `window`-token context: more than half of
/// it, leaving too little for the task, the results and the reply.
pub fn needs_compact(head_tokens: u64, window: u64) -> bool {
    head_tokens.saturating_mul(2) > window
}

/// `system` (a full system prompt) with the compact base layer in place of the full one.
pub fn compact_system(system: &str) -> String {
    let base = BASE_PROMPT.trim_end();
    let rest = system.strip_prefix(base).unwrap_or(system);
    format!("{}{rest}", COMPACT_BASE_PROMPT.trim_end())
}

/// The compact catalog: `tools` narrowed to [`COMPACT_TOOLS`], in their order, each lean: its
/// description's first sentence, only its required parameters, no parameter descriptions.
/// The six schemas took 3,848 bytes (~900 of SmolLM2's 2,048 tokens); lean, under half. The
/// tools still accept every parameter (they validate against their own schemas).
pub fn compact_tools(tools: &[ToolSpec]) -> Vec<ToolSpec> {
    tools
        .iter()
        .filter(|t| COMPACT_TOOLS.contains(&t.name.as_str()))
        .map(lean)
        .collect()
}

/// `tool` with its first sentence and a schema of only the required parameters, undescribed.
fn lean(tool: &ToolSpec) -> ToolSpec {
    let mut schema = tool.input_schema.clone();
    lean_schema(&mut schema);
    let description = match tool.description.find(". ") {
        Some(end) => tool.description[..=end].to_string(),
        None => tool.description.clone(),
    };
    ToolSpec {
        name: tool.name.clone(),
        description,
        input_schema: schema,
    }
}

fn lean_schema(schema: &mut serde_json::Value) {
    let serde_json::Value::Object(map) = schema else {
        return;
    };
    map.remove("description");
    let required: Vec<String> = map
        .get("required")
        .and_then(|r| r.as_array())
        .map(|r| {
            r.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    if let Some(serde_json::Value::Object(props)) = map.get_mut("properties") {
        props.retain(|name, _| required.contains(name));
        for p in props.values_mut() {
            lean_schema(p);
        }
    }
    if let Some(items) = map.get_mut("items") {
        lean_schema(items);
    }
}

/// The head for a `window`-token context: `(system, tools, compact)`.
pub fn for_window(system: &str, tools: &[ToolSpec], window: u64) -> (String, Vec<ToolSpec>, bool) {
    let full = keel_llm::tokens::estimate_request(system, tools, &[]);
    if needs_compact(full, window) {
        (compact_system(system), compact_tools(tools), true)
    } else {
        (system.to_string(), tools.to_vec(), false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_compact_prompt_keeps_the_project_layers() {
        let full = format!(
            "{}\n\n# Project instructions\nuse tabs\n",
            BASE_PROMPT.trim_end()
        );
        let compact = compact_system(&full);
        assert!(
            compact.starts_with("You are Keel")
                && compact.ends_with("# Project instructions\nuse tabs\n")
        );
        assert!(compact.len() * 2 < full.len());
        assert!(needs_compact(1_900, 2_048) && !needs_compact(1_900, 8_192));
    }
}
