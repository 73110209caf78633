//! The argument mappers for file-writing tools: other harnesses' spellings of a new file
//! (`Write`, `write_to_file`…), of search/replace edits (`Edit`, `MultiEdit`, `str_replace`,
//! opencode's `edit`, with `replace_all`/`replaceAll`), and of SEARCH/REPLACE blocks (Cline's
//! `replace_in_file`, Aider's format), onto create_file and edit_file.

use serde_json::{Value, json};

use super::alias::{Args, rename_path, take};

pub(super) fn write(args: &mut Args) -> Result<&'static str, String> {
    rename_path(args);
    if !args.contains_key("content")
        && let Some(c) = take(args, &["file_text", "contents", "text", "code"])
    {
        args.insert("content".into(), c);
    }
    Ok("create_file")
}

/// One search/replace pair from the foreign spellings.
fn pair(e: &mut Args) -> Result<Value, String> {
    let search = take(
        e,
        &["search", "old_string", "oldString", "old_str", "old_text"],
    );
    let replace = take(
        e,
        &["replace", "new_string", "newString", "new_str", "new_text"],
    )
    .unwrap_or_else(|| json!(""));
    let Some(search) = search else {
        return Err("each edit needs the exact text to replace (`old_string`)".into());
    };
    let mut edit = json!({"search": search, "replace": replace});
    // `replace_all: true` carries over; `false` is edit_file's default (exactly one match).
    if let Some(all) = take(e, REPLACE_ALL_KEYS).filter(|v| !is_false(v)) {
        edit["replace_all"] = all;
    }
    Ok(edit)
}

/// The spellings of "replace every occurrence".
pub(super) const REPLACE_ALL_KEYS: &[&str] = &["replace_all", "replaceAll"];

fn is_false(v: &Value) -> bool {
    matches!(v, Value::Bool(false) | Value::Null) || v.as_str() == Some("false")
}

pub(super) fn edit_one(args: &mut Args) -> Result<&'static str, String> {
    rename_path(args);
    // An empty `old_string` means "create this file" in Claude Code and opencode.
    let empty_search = ["old_string", "oldString", "old_str", "old_text", "search"]
        .iter()
        .find_map(|k| args.get(*k))
        .is_some_and(|v| v.as_str() == Some(""));
    if empty_search {
        let content = take(
            args,
            &["new_string", "newString", "new_str", "new_text", "replace"],
        )
        .unwrap_or_else(|| json!(""));
        let _ = take(
            args,
            &["old_string", "oldString", "old_str", "old_text", "search"],
        );
        let _ = take(args, REPLACE_ALL_KEYS);
        args.insert("content".into(), content);
        return Ok("create_file");
    }
    let edit = pair(args)?;
    args.remove("expected_replacements");
    args.insert("edits".into(), json!([edit]));
    Ok("edit_file")
}

/// Keel's own `edit_file` with foreign spellings inside it: a top-level `replace_all` applies
/// to every edit, and each edit's `old_string`/`replaceAll`… become `search`/`replace_all`.
pub(super) fn edit_file_fields(args: &mut Args) -> Result<(), String> {
    rename_path(args);
    let all = take(args, REPLACE_ALL_KEYS).filter(|v| !is_false(v));
    const FOREIGN: &[&str] = &[
        "old_string",
        "oldString",
        "old_str",
        "old_text",
        "new_string",
        "newString",
        "new_str",
        "new_text",
        "replaceAll",
    ];
    if let Some(Value::Array(edits)) = args.get_mut("edits") {
        for e in edits.iter_mut() {
            let Value::Object(map) = e else { continue };
            if let Some(all) = &all {
                map.entry("replace_all").or_insert_with(|| all.clone());
            }
            if FOREIGN.iter().any(|k| map.contains_key(*k)) {
                let Value::Object(mut edit) = pair(map)? else {
                    continue;
                };
                // Anything else stays, for the schema check to report.
                edit.extend(std::mem::take(map));
                *map = edit;
            }
        }
    } else if let Some(all) = all {
        args.insert("replace_all".into(), all);
    }
    Ok(())
}

pub(super) fn multi_edit(args: &mut Args) -> Result<&'static str, String> {
    rename_path(args);
    let Some(Value::Array(edits)) = args.remove("edits") else {
        return Err("MultiEdit needs `edits`: a list of {old_string, new_string}".into());
    };
    let mut out = Vec::with_capacity(edits.len());
    for e in edits {
        let Value::Object(mut e) = e else {
            return Err("each edit must be an object {old_string, new_string}".into());
        };
        out.push(pair(&mut e)?);
    }
    args.insert("edits".into(), Value::Array(out));
    Ok("edit_file")
}

/// Cline's `replace_in_file {path, diff}` with `<<<<<<< SEARCH … ======= … >>>>>>> REPLACE`
/// blocks, or an Aider-style reply of them (file names, fences, prose: see [`edit_blocks`]);
/// `path` may be left out when the reply names the file. One block with an empty SEARCH
/// creates the file. A block written for another file than the call's is refused.
///
/// [`edit_blocks`]: super::edit_blocks
pub(super) fn replace_in_file(args: &mut Args) -> Result<&'static str, String> {
    rename_path(args);
    let Some(Value::String(diff)) = take(args, &["diff"]) else {
        return Err("replace_in_file needs `diff` with SEARCH/REPLACE blocks".into());
    };
    let blocks = super::edit_blocks::parse(&diff)?;
    if blocks.is_empty() {
        return Err("no `<<<<<<< SEARCH` block found in `diff`".into());
    }
    let path = args.get("path").and_then(Value::as_str);
    let file = super::edit_blocks::assign_files(&blocks, path)?;
    args.insert("path".into(), json!(file));
    match &blocks[..] {
        [b] if b.search.is_empty() => {
            let content = if b.replace.is_empty() {
                String::new()
            } else {
                format!("{}\n", b.replace)
            };
            args.insert("content".into(), json!(content));
            Ok("create_file")
        }
        _ => {
            let edits = blocks
                .iter()
                .map(|b| json!({"search": b.search, "replace": b.replace}))
                .collect();
            args.insert("edits".into(), Value::Array(edits));
            Ok("edit_file")
        }
    }
}
