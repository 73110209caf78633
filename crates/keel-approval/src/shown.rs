//! How a call is shown to a person, which is also what a session approval of it remembers:
//! the command with the project files it was judged by, a file tool's path, every argument of
//! a tool Keel does not know, and a fingerprint wherever the text shown leaves something out.

use keel_protocol::ToolCall;
use keel_tools::{ToolEffect, Workspace};

/// A resolved command as a person should see it: the command, the project files it was read
/// from, and their fingerprint (an approval remembered for the session holds only while they
/// stay the same). Why it asks is the summary's `reason`.
pub(crate) fn describe_planned(command: &str, a: &keel_tools::shell::Analysis) -> String {
    format!("{command}{}", a.sources_note())
}

/// Characters of a call's arguments shown to a person when no main argument names it.
const SHOWN_ARGS: usize = 200;

/// The call's main argument, for a person to read. The summary is also what an approval "for
/// the session" remembers, so it never stands for more than the person saw: a built-in file
/// tool's summary names its path (the approval covers that tool on that path, whatever it
/// writes there), and any other call whose text does not show every argument carries a
/// fingerprint of all of them (the approval covers exactly that call — never a later one that
/// only shares the shown part, such as a patch with one more file).
///
/// A path is named as the file it resolves to in `workspace` — `edit_file src/main.rs (via
/// notes.md)` when `notes.md` links there — so a person sees, and a session approval
/// remembers, the file written rather than the link's name (red-team pass 2, R16).
pub(crate) fn describe(
    call: &ToolCall,
    effect: Option<ToolEffect>,
    workspace: Option<&Workspace>,
) -> String {
    // A tool Keel does not know (an MCP tool) is shown with every argument: its `path` alone
    // hid that the call sends the model's text to a repository the model chose, with the
    // user's own server and token (red-team pass 4, R4-6).
    if matches!(effect, None | Some(ToolEffect::Unknown)) {
        return format!(
            "{} {} [#{}]",
            call.name,
            every_argument(&call.arguments),
            fingerprint(&call.arguments)
        );
    }
    let only_one = call.arguments.as_object().is_some_and(|o| o.len() <= 1);
    for key in ["path", "file", "query", "pattern"] {
        if let Some(v) = call.arguments.get(key).and_then(|v| v.as_str()) {
            let resolved = match (key, workspace) {
                ("path" | "file", Some(ws)) => ws.locate(v).ok().map(|r| r.rel_string()),
                _ => None,
            };
            let v = &match resolved {
                Some(real) if real != v.trim_start_matches("./") => format!("{real} (via {v})"),
                _ => v.to_string(),
            };
            if only_one || effect == Some(ToolEffect::WritesFiles) {
                return format!("{} {v}", call.name);
            }
            return format!("{} {v} [#{}]", call.name, fingerprint(&call.arguments));
        }
    }
    let args = call.arguments.to_string();
    if args.chars().count() <= SHOWN_ARGS {
        return format!("{} {args}", call.name);
    }
    let short: String = args.chars().take(SHOWN_ARGS).collect();
    format!("{} {short}… [#{}]", call.name, fingerprint(&call.arguments))
}

/// Characters of one argument's value shown before it is cut.
const SHOWN_VALUE: usize = 160;
/// Characters of all arguments shown before the rest are only counted.
const SHOWN_ALL: usize = 1_200;

/// Every argument of a call, by name in sorted order (`owner=attacker-org, path=README.md,
/// repo=exfil-drop`), each value cut past [`SHOWN_VALUE`] characters with how much was left
/// out; past [`SHOWN_ALL`] characters the remaining arguments are counted. The fingerprint
/// beside it covers the whole call.
fn every_argument(args: &serde_json::Value) -> String {
    let cut = |text: String| -> String {
        let n = text.chars().count();
        if n <= SHOWN_VALUE {
            return text;
        }
        let head: String = text.chars().take(SHOWN_VALUE).collect();
        format!("{head}…(+{} chars)", n - SHOWN_VALUE)
    };
    let Some(map) = args.as_object() else {
        return cut(args.to_string());
    };
    if map.is_empty() {
        return "{}".into();
    }
    let mut keys: Vec<&String> = map.keys().collect();
    keys.sort();
    let mut out = String::new();
    for (i, key) in keys.iter().enumerate() {
        if out.chars().count() > SHOWN_ALL {
            out.push_str(&format!(", … and {} more arguments", keys.len() - i));
            break;
        }
        let value = match &map[key.as_str()] {
            serde_json::Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        if i > 0 {
            out.push_str(", ");
        }
        out.push_str(&format!("{key}={}", cut(value)));
    }
    out
}

/// A short fingerprint of a call's whole arguments (SHA-256 of their canonical JSON).
pub(crate) fn fingerprint(args: &serde_json::Value) -> String {
    let mut hex = keel_tools::trust::sha256_hex(keel_protocol::canonical_args(args).as_bytes());
    hex.truncate(16);
    hex
}

/// `text` as a person is shown it in an approval request, wherever it is displayed (the
/// terminal, the web UI, the REST API): control characters, bidi controls and marks, and
/// zero-width characters written as `<U+XXXX>` / caret notation, so a command cannot reorder
/// or hide what it asks for (red-team pass 9, R9-15: `rm -rf src #\u{202e} …` reached the
/// web UI raw). The remembered approval keeps the text as it is.
pub fn displayed(text: &str) -> String {
    keel_tools::text::visible(text)
        .chars()
        .fold(String::with_capacity(text.len()), |mut out, c| {
            if matches!(c, '\u{200b}'..='\u{200f}' | '\u{2060}'..='\u{2064}' | '\u{061c}' | '\u{feff}') {
                out.push_str(&format!("<U+{:04X}>", c as u32));
            } else {
                out.push(c);
            }
            out
        })
}

#[cfg(test)]
mod displayed_tests {
    #[test]
    fn what_a_person_is_asked_cannot_be_reordered_or_hidden() {
        let asked = super::displayed("rm -rf src #\u{202e} cod eht daer\u{200b}\u{1b}[2K");
        assert_eq!(asked, "rm -rf src #<U+202E> cod eht daer<U+200B>^[[2K");
        assert_eq!(super::displayed("cargo test -p keel"), "cargo test -p keel");
    }
}
