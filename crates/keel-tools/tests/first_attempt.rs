//! The first-attempt benchmark: a corpus of tool calls as real models emit them (foreign names,
//! broken JSON, coerced types, deferred tools, and calls that must be refused) with the
//! expected outcome of each. It measures, in the same run, the share that runs correctly on the
//! first attempt on the old path (exact name in the old ten-tool catalog + strict JSON + strict
//! schema) and through the catalog's resolver, and checks that no repair changes a call's
//! meaning.
//!
//! `cargo test -p keel-tools --test first_attempt -- --nocapture` prints the figures.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use keel_tools::shell::{LintSettings, ShellSettings};
use keel_tools::{ToolRegistry, builtin, resolve_call, shell};
use serde_json::Value;
use std::path::Path;

const CORPUS: &str = include_str!("corpus/tool_calls.jsonl");

/// The workspace the corpus's absolute paths refer to.
const WORKSPACE: &str = "/work/app";

/// The catalog before this issue: every tool listed, nothing else dispatchable.
const OLD_TOOLS: &[&str] = &[
    "apply_patch",
    "ask_user",
    "codebase_search",
    "create_file",
    "edit_file",
    "grep",
    "list_files",
    "read_file",
    "run_command",
    "run_tests",
];

fn registry() -> ToolRegistry {
    let mut r = ToolRegistry::new();
    builtin::register_defaults(&mut r);
    shell::register(&mut r, ShellSettings::default(), LintSettings::default());
    r
}

/// What the provider layer hands the loop: parsed JSON, or the raw text as a JSON string.
fn as_received(raw: &str) -> Value {
    if raw.trim().is_empty() {
        return Value::Object(Default::default());
    }
    serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.to_string()))
}

/// A strict JSON-Schema check (types, required, no unknown fields, enums), as serde's
/// `deny_unknown_fields` argument types enforce it.
fn strictly_valid(v: &Value, schema: &Value) -> bool {
    if let Some(options) = schema.get("enum").and_then(Value::as_array) {
        return options.contains(v);
    }
    match schema.get("type").and_then(Value::as_str) {
        Some("string") => v.is_string(),
        Some("integer") => v.is_i64() || v.is_u64(),
        Some("number") => v.is_number(),
        Some("boolean") => v.is_boolean(),
        Some("array") => v.as_array().is_some_and(|items| {
            let item = schema.get("items").cloned().unwrap_or(Value::Null);
            items.iter().all(|i| strictly_valid(i, &item))
        }),
        Some("object") => {
            let Some(map) = v.as_object() else {
                return false;
            };
            let props = schema.get("properties").and_then(Value::as_object);
            let known = map
                .iter()
                .all(|(k, val)| match props.and_then(|p| p.get(k)) {
                    Some(p) => val.is_null() || strictly_valid(val, p),
                    None => false,
                });
            let required = schema
                .get("required")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .all(|r| map.get(r).is_some_and(|v| !v.is_null()));
            known && required
        }
        _ => true,
    }
}

#[derive(Default)]
struct Tally {
    total: usize,
    before: usize,
    after: usize,
    meaning_changed: Vec<String>,
    misses: Vec<String>,
}

#[test]
fn first_attempt_success_before_and_after_with_no_meaning_changed() {
    let reg = registry();
    let mut t = Tally::default();
    for (n, line) in CORPUS.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let entry: Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("corpus line {}: {e}", n + 1));
        let id = entry["id"].as_u64().unwrap();
        let name = entry["name"].as_str().unwrap();
        let raw = entry["arguments"].as_str().unwrap();
        let cut_off = entry["finish"].as_str() == Some("length");
        let expect = &entry["expect"];
        t.total += 1;

        // The expected arguments themselves must be valid for the expected tool.
        if let Some(tool) = expect["tool"].as_str() {
            let schema = reg
                .get(tool)
                .unwrap_or_else(|| panic!("#{id}: no tool {tool}"))
                .input_schema();
            assert!(
                strictly_valid(&expect["args"], &schema),
                "#{id}: the expected arguments do not fit {tool}'s schema: {}",
                expect["args"]
            );
        }

        // Before: exact name in the old catalog, strict JSON, strict schema, no repair.
        let text = if raw.trim().is_empty() { "{}" } else { raw };
        let old_accepts = OLD_TOOLS
            .contains(&name)
            .then(|| serde_json::from_str::<Value>(text).ok())
            .flatten()
            .filter(|v| strictly_valid(v, &reg.get(name).unwrap().input_schema()));
        let before_ok = match expect.get("error") {
            Some(_) => old_accepts.is_none(),
            None => {
                expect["tool"].as_str() == Some(name)
                    && old_accepts.as_ref() == Some(&expect["args"])
            }
        };

        // After: the catalog's resolver.
        let resolved = resolve_call(
            &reg,
            name,
            &as_received(raw),
            cut_off,
            Some(Path::new(WORKSPACE)),
        );
        let after_ok = match (&resolved, expect.get("error").and_then(Value::as_str)) {
            (Ok(r), None) => {
                let same =
                    Some(r.tool.as_str()) == expect["tool"].as_str() && r.args == expect["args"];
                if !same {
                    t.meaning_changed.push(format!(
                        "#{id} {name}: ran {} {} — expected {} {}",
                        r.tool, r.args, expect["tool"], expect["args"]
                    ));
                }
                same
            }
            (Ok(r), Some(_)) => {
                t.meaning_changed.push(format!(
                    "#{id} {name}: must be refused, but ran {} {}",
                    r.tool, r.args
                ));
                false
            }
            (Err(msg), Some(want)) => {
                let ok = msg.contains(want);
                if !ok {
                    t.misses
                        .push(format!("#{id} {name}: message lacks {want:?}: {msg}"));
                }
                ok
            }
            (Err(msg), None) => {
                t.misses.push(format!("#{id} {name}: refused: {msg}"));
                false
            }
        };
        t.before += usize::from(before_ok);
        t.after += usize::from(after_ok);
    }
    let pct = |n: usize| 100.0 * n as f64 / t.total as f64;
    println!(
        "first-attempt success on {} calls: before {} ({:.1}%), after {} ({:.1}%)",
        t.total,
        t.before,
        pct(t.before),
        t.after,
        pct(t.after)
    );
    for m in &t.misses {
        println!("  miss: {m}");
    }
    assert!(t.total >= 200, "the corpus has {} calls", t.total);
    assert!(
        t.meaning_changed.is_empty(),
        "repairs that change a call's meaning:\n{}",
        t.meaning_changed.join("\n")
    );
    assert!(
        pct(t.after) >= 95.0,
        "after: {:.1}% < 95%\n{}",
        pct(t.after),
        t.misses.join("\n")
    );
    assert!(t.after > t.before);
}
