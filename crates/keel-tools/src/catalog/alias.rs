//! Foreign tool names and the intent verbs, mapped onto Keel's canonical tools with their
//! arguments. The tables are the documentation's source (`docs/TOOL_CATALOG.md`): every entry
//! is deterministic and depends only on the name and the argument keys, never on files.

use serde_json::{Map, Value, json};

use super::edits::{edit_one, multi_edit, replace_in_file, write};

/// Arguments being mapped.
pub type Args = Map<String, Value>;

/// A foreign or legacy name for a canonical tool.
#[derive(Debug, Clone, Copy)]
pub struct Alias {
    /// The name as other harnesses spell it (matched exactly first, then case-insensitively).
    pub name: &'static str,
    /// Where the name comes from (`Claude Code`, `Codex`, …).
    pub family: &'static str,
    /// The canonical tool(s) it maps to, for the documentation.
    pub target: &'static str,
    /// Rewrites the arguments in place and returns the canonical tool, or a message for the
    /// model when the call cannot be mapped without guessing.
    pub map: fn(&mut Args) -> Result<&'static str, String>,
}

const CC: &str = "Claude Code";
const OC: &str = "opencode";
const AT: &str = "Anthropic text editor";
const CX: &str = "Codex";
const GM: &str = "Gemini CLI";
const CL: &str = "Cline";
const CU: &str = "Cursor";
const GS: &str = "goose";
const GN: &str = "generic";

/// Every alias, in documentation order.
pub const ALIASES: &[Alias] = &[
    a("Read", CC, "read_file", read_one_based),
    a("Write", CC, "create_file", write),
    a("Edit", CC, "edit_file", edit_one),
    a("MultiEdit", CC, "edit_file", multi_edit),
    a("Bash", CC, "run_command", bash_ms),
    a("Grep", CC, "grep", grep_like),
    a("Glob", CC, "list_files", glob),
    a("LS", CC, "list_files", list),
    a("TodoWrite", CC, "update_plan", todos),
    a(
        "str_replace_editor",
        AT,
        "read_file / create_file / edit_file / insert_lines",
        text_editor,
    ),
    a(
        "str_replace_based_edit_tool",
        AT,
        "read_file / create_file / edit_file / insert_lines",
        text_editor,
    ),
    a(
        "text_editor",
        GS,
        "read_file / create_file / edit_file / insert_lines",
        text_editor,
    ),
    a("shell", CX, "run_command", codex_shell),
    a("local_shell", CX, "run_command", codex_shell),
    a("container.exec", CX, "run_command", codex_shell),
    a("exec_command", CX, "run_command", codex_shell),
    a("list_dir", CX, "list_files", list),
    a("grep_files", CX, "grep", grep_like),
    a("read", OC, "read_file", read_zero_based),
    a("write", OC, "create_file", write),
    a("bash", OC, "run_command", bash_ms),
    a("glob", OC, "list_files", glob),
    a("list", OC, "list_files", list),
    a("ls", OC, "list_files", list),
    a("todowrite", OC, "update_plan", todos),
    a("patch", OC, "apply_patch", patch),
    a("write_file", GM, "create_file", write),
    a("replace", GM, "edit_file", edit_one),
    a("run_shell_command", GM, "run_command", command),
    a("list_directory", GM, "list_files", list),
    a("search_file_content", GM, "grep", grep_like),
    a("write_to_file", CL, "create_file", write),
    a("replace_in_file", CL, "edit_file", replace_in_file),
    a("execute_command", CL, "run_command", command),
    a("search_files", CL, "grep", grep_like),
    a("ask_followup_question", CL, "ask_user", ask),
    a("run_terminal_cmd", CU, "run_command", command),
    a("grep_search", CU, "grep", grep_like),
    a("create_file_with_content", GN, "create_file", write),
    a("new_file", GN, "create_file", write),
    a("view_file", GN, "read_file", read_one_based),
    a("open_file", GN, "read_file", read_one_based),
    a("cat", GN, "read_file", read_one_based),
    a("str_replace", GN, "edit_file", edit_one),
    a("replace_in_files", GN, "edit_file", edit_one),
    a("run", GN, "run_command", command),
    a("exec", GN, "run_command", command),
    a("execute", GN, "run_command", command),
    a("terminal", GN, "run_command", command),
    a("run_bash", GN, "run_command", command),
    a("bash_command", GN, "run_command", command),
    a("run_test", GN, "run_tests", tests),
    a("find_files", GN, "list_files", glob),
    a("search_code", GN, "codebase_search", search),
    a("git", GN, "git_status / git_diff", git),
    a("todo_write", GN, "update_plan", todos),
    a("ask_human", GN, "ask_user", ask),
    a("ask_question", GN, "ask_user", ask),
];

const fn a(
    name: &'static str,
    family: &'static str,
    target: &'static str,
    map: fn(&mut Args) -> Result<&'static str, String>,
) -> Alias {
    Alias {
        name,
        family,
        target,
        map,
    }
}

pub(super) const PATH_KEYS: &[&str] = &[
    "path",
    "file_path",
    "filePath",
    "absolute_path",
    "target_file",
    "file",
    "filename",
    "dir_path",
    "relative_workspace_path",
];

pub(super) fn has_any(args: &Args, keys: &[&str]) -> bool {
    keys.iter()
        .any(|k| args.get(*k).is_some_and(|v| !v.is_null()))
}

/// Removes the first of `keys` present (with a non-null value) and returns its value.
pub(super) fn take(args: &mut Args, keys: &[&str]) -> Option<Value> {
    for k in keys {
        if let Some(v) = args.remove(*k)
            && !v.is_null()
        {
            return Some(v);
        }
    }
    None
}

/// Moves the first present synonym of `path` into `path`.
pub(super) fn rename_path(args: &mut Args) {
    if !args.contains_key("path")
        && let Some(p) = take(args, PATH_KEYS)
    {
        args.insert("path".into(), p);
    }
}

fn int(v: &Value) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

fn read_lines(args: &mut Args, zero_based: bool) -> Result<&'static str, String> {
    rename_path(args);
    let offset = take(args, &["offset"]);
    let limit = take(args, &["limit"]);
    if let Some(o) = offset {
        let o = int(&o).ok_or("`offset` must be a line number")?;
        // Saturating: a model's `offset`/`limit` near i64::MAX must not overflow (R25).
        let start = if zero_based { o.saturating_add(1) } else { o }.max(1);
        args.insert("start_line".into(), json!(start));
        if let Some(l) = limit {
            let l = int(&l).ok_or("`limit` must be a number of lines")?;
            args.insert("end_line".into(), json!(start.saturating_add(l.max(1) - 1)));
        }
    } else if let Some(l) = limit {
        let l = int(&l).ok_or("`limit` must be a number of lines")?;
        args.insert("start_line".into(), json!(1));
        args.insert("end_line".into(), json!(l.max(1)));
    }
    Ok("read_file")
}

pub(super) fn read_one_based(args: &mut Args) -> Result<&'static str, String> {
    read_lines(args, false)
}

fn read_zero_based(args: &mut Args) -> Result<&'static str, String> {
    read_lines(args, true)
}

/// The command string, plus a timeout in seconds from `timeout_ms`/ms-valued `timeout`.
fn command_with(args: &mut Args, timeout_in_ms: bool) -> Result<&'static str, String> {
    let cmd = take(args, &["command", "cmd", "script", "commandLine"])
        .ok_or("the call needs `command`: the shell command to run")?;
    let cmd = match cmd {
        Value::String(s) => s,
        Value::Array(argv) => join_argv(&argv)?,
        other => return Err(format!("`command` must be a string, got {other}")),
    };
    let dir = take(args, &["workdir", "cwd", "directory", "working_directory"]);
    let cmd = match dir.as_ref().and_then(Value::as_str) {
        Some(d) if !matches!(d.trim(), "" | "." | "./") => format!("cd {} && {cmd}", quote(d)),
        _ => cmd,
    };
    args.insert("command".into(), json!(cmd));
    let ms = take(args, &["timeout_ms"]);
    let timeout = match (ms, args.remove("timeout")) {
        (Some(ms), _) => Some(int(&ms).ok_or("`timeout_ms` must be a number")?),
        (None, Some(t)) if timeout_in_ms => Some(int(&t).ok_or("`timeout` must be a number")?),
        (None, Some(t)) => {
            args.insert("timeout".into(), t);
            None
        }
        (None, None) => None,
    };
    if let Some(ms) = timeout {
        let secs = (ms.max(0) as u64).div_ceil(1000).max(1);
        args.insert("timeout".into(), json!(secs));
    }
    for k in [
        "description",
        "justification",
        "with_escalated_permissions",
        "requires_approval",
        "is_background",
        "yield_time_ms",
        "max_output_tokens",
        "login",
        "shell",
        "tty",
        "sandbox_permissions",
    ] {
        args.remove(k);
    }
    if take(args, &["run_in_background"]) == Some(json!(true)) {
        return Err("background commands are not supported: run it in the foreground with a `timeout`, or start it with `&` and redirect its output to a file".into());
    }
    Ok("run_command")
}

fn command(args: &mut Args) -> Result<&'static str, String> {
    command_with(args, false)
}

fn bash_ms(args: &mut Args) -> Result<&'static str, String> {
    command_with(args, true)
}

pub(super) fn codex_shell(args: &mut Args) -> Result<&'static str, String> {
    command_with(args, false)
}

/// `["bash", "-lc", "script"]` → `script`; any other argv → its words shell-quoted.
fn join_argv(argv: &[Value]) -> Result<String, String> {
    let words: Vec<&str> = argv
        .iter()
        .map(|w| w.as_str().ok_or("`command` must be a list of strings"))
        .collect::<Result<_, _>>()?;
    if let [shell, flag, script] = words.as_slice()
        && matches!(*shell, "bash" | "sh" | "zsh" | "/bin/bash" | "/bin/sh")
        && matches!(*flag, "-c" | "-lc" | "-ic")
    {
        return Ok((*script).to_string());
    }
    if words.is_empty() {
        return Err("`command` is an empty list".into());
    }
    Ok(words.iter().map(|w| quote(w)).collect::<Vec<_>>().join(" "))
}

/// A word quoted for bash only when it needs it.
fn quote(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c));
    if plain {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

pub(super) fn grep_like(args: &mut Args) -> Result<&'static str, String> {
    if !args.contains_key("pattern")
        && let Some(p) = take(args, &["regex", "query", "search", "pattern_regex"])
    {
        args.insert("pattern".into(), p);
    }
    let insensitive = take(args, &["-i", "case_insensitive", "ignore_case"]) == Some(json!(true))
        || take(args, &["case_sensitive"]) == Some(json!(false));
    if insensitive && let Some(Value::String(p)) = args.get_mut("pattern") {
        *p = format!("(?i){p}");
    }
    let glob = take(
        args,
        &[
            "glob",
            "include",
            "file_pattern",
            "include_pattern",
            "includes",
        ],
    );
    let ty = take(args, &["type"]).and_then(|t| t.as_str().and_then(type_glob));
    let glob = glob
        .and_then(|g| g.as_str().map(str::to_string))
        .or(ty.map(str::to_string));
    let path = take(args, &["path", "dir_path", "directory", "dir"])
        .and_then(|p| p.as_str().map(|s| s.trim_end_matches('/').to_string()))
        .filter(|p| !matches!(p.as_str(), "" | "."));
    let glob = match (path, glob) {
        (Some(p), Some(g)) if !g.contains('/') => Some(format!("{p}/**/{g}")),
        (Some(_), Some(g)) => Some(g),
        // A file or a directory: match either.
        (Some(p), None) => Some(format!("{{{p},{p}/**}}")),
        (None, g) => g,
    };
    if let Some(g) = glob {
        args.insert("glob".into(), json!(g));
    }
    if let Some(n) = take(args, &["head_limit", "limit", "max_count"]) {
        args.insert("max_results".into(), n);
    }
    for k in [
        "output_mode",
        "-n",
        "-A",
        "-B",
        "-C",
        "multiline",
        "recursive",
    ] {
        args.remove(k);
    }
    Ok("grep")
}

fn type_glob(t: &str) -> Option<&'static str> {
    Some(match t {
        "rust" | "rs" => "*.rs",
        "py" | "python" => "*.py",
        "js" | "javascript" => "*.js",
        "ts" | "typescript" => "*.ts",
        "go" => "*.go",
        "java" => "*.java",
        "c" => "*.c",
        "cpp" => "*.cpp",
        "rb" | "ruby" => "*.rb",
        "md" | "markdown" => "*.md",
        _ => return None,
    })
}

fn glob(args: &mut Args) -> Result<&'static str, String> {
    if let Some(p) = take(args, &["path", "dir_path", "directory", "dir"]) {
        args.insert("path".into(), p);
    }
    if !args.contains_key("pattern")
        && let Some(p) = take(args, &["glob", "query", "name"])
    {
        args.insert("pattern".into(), p);
    }
    Ok("list_files")
}

pub(super) fn list(args: &mut Args) -> Result<&'static str, String> {
    rename_path(args);
    if let Some(d) = take(args, &["depth"]) {
        args.insert("max_depth".into(), d);
    }
    if take(args, &["recursive"]) == Some(json!(false)) {
        args.insert("max_depth".into(), json!(1));
    }
    for k in ["ignore", "offset", "limit"] {
        args.remove(k);
    }
    Ok("list_files")
}

fn todos(args: &mut Args) -> Result<&'static str, String> {
    let Some(Value::Array(items)) = take(args, &["todos", "plan", "steps", "items"]) else {
        return Err("the plan needs `todos`: a list of {content, status}".into());
    };
    let steps = items
        .into_iter()
        .map(|item| match item {
            Value::Object(mut m) => {
                let step = take(&mut m, &["step", "content", "text", "title", "task"])
                    .unwrap_or(Value::Null);
                let status = take(&mut m, &["status", "state"]).unwrap_or(json!("pending"));
                json!({"step": step, "status": plan_status(status)})
            }
            Value::String(s) => json!({"step": s, "status": "pending"}),
            other => other,
        })
        .collect();
    let explanation = take(args, &["explanation", "reason"]);
    args.clear();
    args.insert("steps".into(), Value::Array(steps));
    if let Some(e) = explanation {
        args.insert("explanation".into(), e);
    }
    Ok("update_plan")
}

/// Other harnesses' step statuses in Keel's words (unknown ones are left for the tool to
/// report).
fn plan_status(status: Value) -> Value {
    let Some(s) = status.as_str() else {
        return status;
    };
    let norm = s.trim().to_lowercase().replace(['-', ' '], "_");
    match norm.as_str() {
        "completed" | "complete" | "done" | "finished" => json!("done"),
        "in_progress" | "inprogress" | "active" | "doing" | "started" => json!("in_progress"),
        "pending" | "todo" | "not_started" | "open" => json!("pending"),
        _ => status,
    }
}

pub(super) fn patch(args: &mut Args) -> Result<&'static str, String> {
    if !args.contains_key("patch")
        && let Some(p) = take(args, &["patchText", "input", "diff"])
    {
        args.insert("patch".into(), p);
    }
    Ok("apply_patch")
}

pub(super) fn ask(args: &mut Args) -> Result<&'static str, String> {
    if !args.contains_key("question")
        && let Some(q) = take(args, &["prompt", "message", "text", "query"])
    {
        args.insert("question".into(), q);
    }
    if let Some(Value::Array(options)) = args.remove("options") {
        let opts: Vec<String> = options
            .iter()
            .filter_map(|o| o.as_str().map(str::to_string))
            .collect();
        if !opts.is_empty() && !args.contains_key("context") {
            args.insert(
                "context".into(),
                json!(format!("Options: {}", opts.join(" / "))),
            );
        }
    }
    Ok("ask_user")
}

pub(super) fn tests(args: &mut Args) -> Result<&'static str, String> {
    if let Some(p) = take(args, &["path", "file", "test_path", "target"]) {
        args.insert("path".into(), p);
    }
    Ok("run_tests")
}

pub(super) fn search(args: &mut Args) -> Result<&'static str, String> {
    if !args.contains_key("query")
        && let Some(q) = take(args, &["q", "text", "search", "search_query", "pattern"])
    {
        args.insert("query".into(), q);
    }
    Ok("codebase_search")
}

fn git(args: &mut Args) -> Result<&'static str, String> {
    let sub = take(args, &["subcommand", "command", "action"])
        .and_then(|s| s.as_str().map(str::to_string))
        .unwrap_or_else(|| "status".into());
    match sub.split_whitespace().next().unwrap_or("status") {
        "status" => {
            args.clear();
            Ok("git_status")
        }
        "diff" => Ok("git_diff"),
        other => Err(format!(
            "only read-only git is available as a tool (`git_status`, `git_diff`); `git {other}` can run through run_command"
        )),
    }
}

/// `str_replace_editor` / `str_replace_based_edit_tool` / goose's `text_editor`.
fn text_editor(args: &mut Args) -> Result<&'static str, String> {
    let command = take(args, &["command"])
        .and_then(|c| c.as_str().map(str::to_string))
        .ok_or("the editor call needs `command`: view, create, str_replace or insert")?;
    rename_path(args);
    match command.as_str() {
        "view" => {
            if let Some(Value::Array(range)) = args.remove("view_range") {
                let start = range.first().and_then(int);
                let end = range.get(1).and_then(int).filter(|e| *e > 0);
                if let Some(s) = start {
                    args.insert("start_line".into(), json!(s.max(1)));
                }
                if let Some(e) = end {
                    args.insert("end_line".into(), json!(e));
                }
            }
            Ok("read_file")
        }
        "create" | "write" => write(args),
        "str_replace" => edit_one(args),
        "insert" => {
            let line = take(args, &["insert_line"]).ok_or("insert needs `insert_line`")?;
            let text = take(args, &["new_str", "insert_text", "text"])
                .ok_or("insert needs `new_str`: the text to insert")?;
            args.insert("after_line".into(), line);
            args.insert("text".into(), text);
            Ok("insert_lines")
        }
        "undo_edit" => Err("undo_edit is not available: change the file back with edit_file (Keel snapshots every turn; the user can run `keel undo`)".into()),
        other => Err(format!(
            "unknown editor command `{other}`: use view, create, str_replace or insert"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(name: &str, args: Value) -> (String, Value) {
        let alias = ALIASES
            .iter()
            .find(|a| a.name == name)
            .unwrap_or_else(|| panic!("no alias {name}"));
        let mut m = args.as_object().cloned().unwrap_or_default();
        let tool = (alias.map)(&mut m).unwrap_or_else(|e| panic!("{name}: {e}"));
        (tool.to_string(), Value::Object(m))
    }

    /// Red-team R25: `offset`/`limit` at i64::MAX crashed the engine (`o + 1` overflowed); they
    /// map to the last representable line, which read_file reports as past the end.
    #[test]
    fn huge_offsets_and_limits_never_overflow() {
        let max = i64::MAX;
        for (name, args, start, end) in [
            (
                "Read",
                json!({"file_path": "a", "offset": max, "limit": max}),
                max,
                max,
            ),
            (
                "read",
                json!({"filePath": "a", "offset": max, "limit": max}),
                max,
                max,
            ),
            (
                "read",
                json!({"filePath": "a", "offset": max - 1, "limit": 5}),
                max,
                max,
            ),
            (
                "Read",
                json!({"file_path": "a", "offset": 2, "limit": max}),
                2,
                max,
            ),
            (
                "read",
                json!({"filePath": "a", "offset": i64::MIN, "limit": 3}),
                1,
                3,
            ),
        ] {
            let (tool, out) = map(name, args);
            assert_eq!(tool, "read_file");
            assert_eq!(out["start_line"], json!(start), "{name}: {out}");
            assert_eq!(out["end_line"], json!(end), "{name}: {out}");
        }
    }

    /// A reply's file names are honoured, never overridden: a block written for another file
    /// is refused (the call does not run), whatever `path` says.
    #[test]
    fn replace_in_file_never_sends_a_block_to_another_file() {
        let alias = ALIASES
            .iter()
            .find(|a| a.name == "replace_in_file")
            .unwrap();
        let block = "<<<<<<< SEARCH\na\n=======\nb\n>>>>>>> REPLACE\n";
        for (args, want) in [
            (
                json!({"path": "a.py", "diff": format!("b.py\n{block}")}),
                "`path` is `a.py`",
            ),
            (
                json!({"path": "src/a.py", "diff": format!("# test_a.py\n{block}")}),
                "`path` is `src/a.py`",
            ),
            (
                json!({"diff": format!("a.py\n{block}\nb.py\n{block}")}),
                "one call edits one file",
            ),
            (json!({"diff": block}), "missing filename"),
        ] {
            let mut m = args.as_object().cloned().unwrap();
            let err = (alias.map)(&mut m).unwrap_err();
            assert!(err.contains(want), "{args}: {err}");
        }
        // Named only in the reply, inside its fence: that file.
        assert_eq!(
            map(
                "replace_in_file",
                json!({"diff": format!("src/b.py\n```python\n{block}```\n")})
            ),
            (
                "edit_file".into(),
                json!({"path": "src/b.py", "edits": [{"search": "a", "replace": "b"}]})
            )
        );
    }

    #[test]
    fn alias_names_are_unique() {
        let mut names: Vec<&str> = ALIASES.iter().map(|a| a.name).collect();
        names.sort_unstable();
        let before = names.len();
        names.dedup();
        assert_eq!(before, names.len());
    }

    #[test]
    fn claude_code_and_codex_arguments_map() {
        assert_eq!(
            map(
                "Read",
                json!({"file_path": "a.rs", "offset": 10, "limit": 5})
            ),
            (
                "read_file".into(),
                json!({"path": "a.rs", "start_line": 10, "end_line": 14})
            )
        );
        assert_eq!(
            map("read", json!({"filePath": "a.rs", "offset": 0, "limit": 5})),
            (
                "read_file".into(),
                json!({"path": "a.rs", "start_line": 1, "end_line": 5})
            )
        );
        assert_eq!(
            map(
                "Bash",
                json!({"command": "ls", "timeout": 120000, "description": "list"})
            ),
            (
                "run_command".into(),
                json!({"command": "ls", "timeout": 120})
            )
        );
        assert_eq!(
            map(
                "shell",
                json!({"command": ["bash", "-lc", "cargo test"], "workdir": "crates/a", "timeout_ms": 1500})
            ),
            (
                "run_command".into(),
                json!({"command": "cd crates/a && cargo test", "timeout": 2})
            )
        );
        assert_eq!(
            map("shell", json!({"command": ["rg", "-n", "fn main", "src"]})).1["command"],
            "rg -n 'fn main' src"
        );
        assert_eq!(
            map(
                "TodoWrite",
                json!({"todos": [{"content": "a", "status": "completed", "activeForm": "x"}]})
            ),
            (
                "update_plan".into(),
                json!({"steps": [{"step": "a", "status": "done"}]})
            )
        );
        assert_eq!(
            map(
                "Grep",
                json!({"pattern": "Foo", "path": "src", "-i": true, "output_mode": "content"})
            ),
            (
                "grep".into(),
                json!({"pattern": "(?i)Foo", "glob": "{src,src/**}"})
            )
        );
    }

    #[test]
    fn editor_commands_map() {
        assert_eq!(
            map(
                "str_replace_editor",
                json!({"command": "str_replace", "path": "a", "old_str": "x", "new_str": "y"})
            ),
            (
                "edit_file".into(),
                json!({"path": "a", "edits": [{"search": "x", "replace": "y"}]})
            )
        );
        assert_eq!(
            map(
                "str_replace_based_edit_tool",
                json!({"command": "view", "path": "a", "view_range": [3, -1]})
            ),
            ("read_file".into(), json!({"path": "a", "start_line": 3}))
        );
        assert_eq!(
            map(
                "replace_in_file",
                json!({"path": "a", "diff": "<<<<<<< SEARCH\nold\n=======\nnew\n>>>>>>> REPLACE\n"})
            ),
            (
                "edit_file".into(),
                json!({"path": "a", "edits": [{"search": "old", "replace": "new"}]})
            )
        );
        // Aider's new-file block: an empty SEARCH.
        assert_eq!(
            map(
                "replace_in_file",
                json!({"path": "n.txt", "diff": "n.txt\n<<<<<<< SEARCH\n=======\nhello\n>>>>>>> REPLACE\n"})
            ),
            (
                "create_file".into(),
                json!({"path": "n.txt", "content": "hello\n"})
            )
        );
    }
}
