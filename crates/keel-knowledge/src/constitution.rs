//! The repository constitution: `.keel/constitution.json`, durable local law.
//!
//! ```json
//! {
//!   "protected_paths": ["migrations/", "secrets/**", "LICENSE"],
//!   "forbidden_commands": ["git push", "terraform apply"],
//!   "required_gates": ["cargo test --workspace"],
//!   "conventions": ["Public functions have doc comments."]
//! }
//! ```
//!
//! Every field is optional and is a list of strings; any other key or type is an error at
//! start-up naming the field. Authority runs base rules → constitution → task → runtime
//! policy, and the user's current request outranks the constitution where they conflict.
//! The enforceable parts are enforced before a tool runs ([`Constitution::check_call`]):
//! no tool writes a protected path (`edit_file`, `create_file`, `insert_lines`,
//! `apply_patch`, and any `run_command` that is not read-only and names one — `sed -i`,
//! `>` …), and a forbidden command is refused. The rest (gates, conventions) is stated in
//! the byte-stable head ([`Constitution::head_text`]), which depends only on the file.

use std::path::Path;

use globset::{Glob, GlobSet, GlobSetBuilder};
use keel_protocol::ToolCall;
use keel_tools::project::{CONFIG_LIMIT, ProjectDir};
use keel_tools::shell::RuleMatch;
use serde_json::Value;

use keel_config::ConfigError;

/// Where the constitution lives, relative to the workspace root.
pub const CONSTITUTION_FILE: &str = ".keel/constitution.json";
/// The fields a constitution may have.
pub const FIELDS: &[&str] = &[
    "protected_paths",
    "forbidden_commands",
    "required_gates",
    "conventions",
];
/// Tools that write the files they name.
const WRITE_TOOLS: &[&str] = &["edit_file", "create_file", "insert_lines", "apply_patch"];
/// Tools that run shell commands from a `command` argument.
const COMMAND_TOOLS: &[&str] = &["run_command"];

/// A validated constitution (empty when the file does not exist).
#[derive(Debug, Clone, Default)]
pub struct Constitution {
    pub protected_paths: Vec<String>,
    pub forbidden_commands: Vec<String>,
    pub required_gates: Vec<String>,
    pub conventions: Vec<String>,
    globs: Option<GlobSet>,
    /// The globs that do not stand for a whole directory (`config/*.yml`, `**/*.sql`): the
    /// files they match are looked up at start ([`Constitution::protected_files`]).
    file_globs: Option<GlobSet>,
    /// The literal directory each of those globs starts with (`config` for `config/*.yml`;
    /// none for `**/*.sql`).
    file_glob_dirs: Vec<std::path::PathBuf>,
    /// Whether one of those globs has no literal directory (`**/*.sql`: anywhere).
    file_glob_anywhere: bool,
}

mod protect;
pub use protect::{MAX_PROTECTED_MATCHES, MAX_PROTECTED_WALK, Protected};

fn error(message: String) -> ConfigError {
    ConfigError {
        source_name: CONSTITUTION_FILE.into(),
        message,
    }
}

/// The most entries one field of a constitution may list.
const MAX_ENTRIES: usize = 200;

/// The most text all entries of a constitution may hold together, in bytes.
const MAX_TEXT: usize = 16 * 1024;

impl Constitution {
    /// Reads the workspace's constitution. No file is an empty constitution; a file that is
    /// not valid JSON or breaks the schema is an error naming the field, and so is one that
    /// must not be read (a symlink out of the workspace, a FIFO or device, over 256 KB).
    pub fn load(workspace: &Path) -> Result<Self, ConfigError> {
        let project = ProjectDir::open(workspace)
            .map_err(|e| error(format!("cannot open the workspace to read it: {e}")))?;
        match project.read(CONSTITUTION_FILE, CONFIG_LIMIT) {
            Ok(Some(text)) => Self::parse(&text),
            Ok(None) => Ok(Self::default()),
            Err(e) => Err(error(format!("not read: it {}", e.problem))),
        }
    }

    /// Parses and validates constitution JSON.
    pub fn parse(text: &str) -> Result<Self, ConfigError> {
        let value: Value = serde_json::from_str(text)
            .map_err(|e| error(format!("not valid JSON: {e}; fix the syntax")))?;
        let Value::Object(map) = value else {
            return Err(error(
                "the top level must be a JSON object with the fields protected_paths, forbidden_commands, required_gates, conventions".into(),
            ));
        };
        let mut c = Constitution::default();
        for (key, v) in &map {
            let list = match key.as_str() {
                "protected_paths" => &mut c.protected_paths,
                "forbidden_commands" => &mut c.forbidden_commands,
                "required_gates" => &mut c.required_gates,
                "conventions" => &mut c.conventions,
                other => {
                    return Err(error(format!(
                        "unknown field `{other}`; the fields are {}",
                        FIELDS.join(", ")
                    )));
                }
            };
            let Value::Array(items) = v else {
                return Err(error(format!("`{key}` must be a list of strings")));
            };
            // A repository's constitution costs every command (a mount per protected path)
            // and every request (it is in the prompt): 15,000 paths made each command take
            // two minutes and each request 45k tokens (red-team pass 6, R6-16).
            if items.len() > MAX_ENTRIES {
                return Err(error(format!(
                    "`{key}` lists {} entries; a constitution holds at most {MAX_ENTRIES} per field (protect a common directory or a glob instead of many files)",
                    items.len()
                )));
            }
            for (i, item) in items.iter().enumerate() {
                match item.as_str().map(str::trim) {
                    Some(s) if !s.is_empty() => list.push(s.to_string()),
                    Some(_) => return Err(error(format!("`{key}[{i}]` is empty"))),
                    None => return Err(error(format!("`{key}[{i}]` must be a string"))),
                }
            }
        }
        let text: usize = [
            &c.protected_paths,
            &c.forbidden_commands,
            &c.required_gates,
            &c.conventions,
        ]
        .iter()
        .flat_map(|l| l.iter())
        .map(String::len)
        .sum();
        if text > MAX_TEXT {
            return Err(error(format!(
                "its entries hold {text} bytes of text; a constitution holds at most {MAX_TEXT} (it goes into every request): shorten it"
            )));
        }
        let mut builder = GlobSetBuilder::new();
        let mut files = GlobSetBuilder::new();
        let mut any_file_glob = false;
        for (i, p) in c.protected_paths.iter().enumerate() {
            if p.starts_with('/') || p.split('/').any(|s| s == "..") {
                return Err(error(format!(
                    "`protected_paths[{i}]` (`{p}`) must be relative to the workspace root, without `..`"
                )));
            }
            if p.contains(['*', '?', '[', '{']) {
                let glob = Glob::new(p).map_err(|e| {
                    error(format!("`protected_paths[{i}]` is not a valid glob: {e}"))
                })?;
                builder.add(glob.clone());
                if whole_dir(p).is_none() {
                    files.add(glob);
                    any_file_glob = true;
                    let literal: std::path::PathBuf = p
                        .trim_start_matches("./")
                        .split('/')
                        .take_while(|s| !s.contains(['*', '?', '[', '{']))
                        .collect();
                    if literal.as_os_str().is_empty() {
                        c.file_glob_anywhere = true;
                    } else {
                        c.file_glob_dirs.push(literal);
                    }
                }
            }
        }
        c.globs = builder.build().ok();
        c.file_globs = any_file_glob.then(|| files.build().ok()).flatten();
        Ok(c)
    }

    /// The protected paths that are plain paths (no glob characters), for the file tools'
    /// and the kernel sandbox's read-only lists.
    /// A glob that stands for a whole directory (`dir/**`, `dir/**/*`) counts as `dir`
    /// (red-team pass 8, R8-16: `db/migrations/**` was left to the file tools, and a command
    /// rewrote `db/migrations/001.sql` after `mv db x`).
    pub fn plain_protected(&self) -> Vec<std::path::PathBuf> {
        self.protected_paths
            .iter()
            .filter_map(|p| whole_dir(p).map(std::path::PathBuf::from))
            .collect()
    }

    /// Nothing to enforce or state.
    pub fn is_empty(&self) -> bool {
        self.protected_paths.is_empty()
            && self.forbidden_commands.is_empty()
            && self.required_gates.is_empty()
            && self.conventions.is_empty()
    }

    /// The protected entry covering `path` (workspace-relative), if any. The constitution
    /// file itself is always protected once it exists.
    pub fn protecting(&self, path: &str) -> Option<String> {
        let path = path.trim_start_matches("./");
        if !self.is_empty() && path == CONSTITUTION_FILE {
            return Some(CONSTITUTION_FILE.into());
        }
        for p in &self.protected_paths {
            let plain = p.trim_start_matches("./").trim_end_matches('/');
            if path == plain || path.starts_with(&format!("{plain}/")) {
                return Some(p.clone());
            }
        }
        if self.globs.as_ref().is_some_and(|g| g.is_match(path)) {
            return self
                .protected_paths
                .iter()
                .find(|p| Glob::new(p).is_ok_and(|g| g.compile_matcher().is_match(path)))
                .cloned();
        }
        None
    }

    /// Why `call` may not run under this constitution, or `None`.
    pub fn check_call(&self, call: &ToolCall) -> Option<String> {
        self.check_call_in(call, None)
    }

    /// Why `call` may not run under this constitution, or `None`; with the workspace `root`,
    /// a command is judged with the scripts it runs read (`sh x.sh`, `npm test`, `make
    /// deploy`), so a forbidden command inside one is refused too.
    ///
    /// A forbidden command is matched against the simple commands the line runs, as the
    /// shell will see them (red-team pass 8, R8-26): quotes and escapes removed (`c\url`),
    /// through wrappers (`env`, `command`, `exec`, `nice`, `timeout`, `xargs`, `sh -c`, a
    /// function), past global options (`git -c a=b push`), and options by meaning (`rm -r -f`
    /// is `rm -rf`). A line whose commands are not all known before it runs — a variable or
    /// a substitution as a command name, `eval "$x"`, code given to an interpreter that names
    /// the command — is refused where a forbidden command could hide in it.
    pub fn check_call_in(&self, call: &ToolCall, root: Option<&Path>) -> Option<String> {
        if self.is_empty() {
            return None;
        }
        let refuse = |path: &str, entry: &str| {
            format!(
                "not run: `{path}` is protected by the repository constitution ({CONSTITUTION_FILE}, protected_paths `{entry}`); no tool may write it. Leave it unchanged; if the user's request needs this change, tell them so they can make it themselves."
            )
        };
        if WRITE_TOOLS.contains(&call.name.as_str()) {
            for path in crate::rules::touched_paths(call) {
                if let Some(entry) = self.protecting(&path) {
                    return Some(refuse(&path, &entry));
                }
            }
        }
        if COMMAND_TOOLS.contains(&call.name.as_str())
            && let Some(command) = call.arguments.get("command").and_then(Value::as_str)
        {
            let safety = keel_tools::shell::CommandSafety::new();
            let analysis = match root {
                Some(root) => safety.classify_in_project(command, root),
                None => safety.classify(command),
            };
            for f in &self.forbidden_commands {
                match analysis.rule_match(f) {
                    RuleMatch::Yes => {
                        return Some(format!(
                            "not run: `{f}` is a forbidden command in the repository constitution ({CONSTITUTION_FILE}, forbidden_commands); do the task without it, or tell the user it is needed."
                        ));
                    }
                    RuleMatch::Maybe => {
                        return Some(format!(
                            "not run: this command may run `{f}`, a forbidden command in the repository constitution ({CONSTITUTION_FILE}, forbidden_commands): a command of it is not known before it runs (a variable or substitution as a command name, `eval`, code given to a program). Write the commands it runs as plain words, without `{f}`."
                        ));
                    }
                    RuleMatch::No => {}
                }
            }
            if !analysis.is_read_only()
                && let Some((word, entry)) = self.protected_in_command(command)
            {
                return Some(refuse(&word, &entry));
            }
        }
        None
    }

    /// A protected path named by a word of `command` (quotes, `>` and `=` stripped).
    fn protected_in_command(&self, command: &str) -> Option<(String, String)> {
        command
            .split(|c: char| c.is_whitespace() || matches!(c, '>' | '<' | '|' | ';' | '&' | '='))
            .map(|w| w.trim_matches(|c| matches!(c, '"' | '\'' | '(' | ')')))
            .filter(|w| !w.is_empty() && !w.starts_with('-'))
            .find_map(|w| self.protecting(w).map(|e| (w.to_string(), e)))
    }

    /// The head section: stable text from the file alone, or `None` for no constitution.
    pub fn head_text(&self) -> Option<String> {
        if self.is_empty() {
            return None;
        }
        let mut out = format!(
            "# Repository constitution\nDurable local law from {CONSTITUTION_FILE}. Authority, lowest to highest: Keel's base rules, this constitution, the task, runtime policy; where the user's current request conflicts with the constitution, the request wins — say that you are departing from it. Protected paths and forbidden commands are enforced by the tools."
        );
        let mut section = |title: &str, items: &[String]| {
            if !items.is_empty() {
                out.push_str(&format!("\n{title}:"));
                for i in items {
                    out.push_str(&format!("\n- {i}"));
                }
            }
        };
        section(
            "Protected paths (no tool may write them)",
            &self.protected_paths,
        );
        section("Forbidden commands", &self.forbidden_commands);
        section(
            "Required gates (run them and see them pass before you say you are done)",
            &self.required_gates,
        );
        section("Conventions", &self.conventions);
        Some(out)
    }
}

/// The path a protected entry stands for as a whole, when it is one: a plain path, or a glob
/// for a whole directory (`dir/**`, `dir/**/*` stand for `dir`). `None` for other globs.
fn whole_dir(p: &str) -> Option<&str> {
    let p = p.trim_start_matches("./");
    let p = p
        .strip_suffix("/**/*")
        .or_else(|| p.strip_suffix("/**"))
        .unwrap_or(p)
        .trim_end_matches('/');
    (!p.contains(['*', '?', '[', '{']) && !p.is_empty()).then_some(p)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(name: &str, args: Value) -> ToolCall {
        ToolCall {
            id: "c".into(),
            name: name.into(),
            arguments: args,
        }
    }

    fn sample() -> Constitution {
        Constitution::parse(
            r#"{"protected_paths": ["migrations/", "**/*.lock"], "forbidden_commands": ["git push"],
                "required_gates": ["make test"], "conventions": ["Tabs."]}"#,
        )
        .unwrap_or_else(|e| panic!("{}", e.message))
    }

    #[test]
    fn invalid_constitutions_name_the_field() {
        let cases = [
            (r#"{"protected": []}"#, "unknown field `protected`"),
            (r#"{"conventions": "tabs"}"#, "`conventions` must be a list"),
            (
                r#"{"protected_paths": ["a", 3]}"#,
                "`protected_paths[1]` must be a string",
            ),
            (r#"{"protected_paths": ["../x"]}"#, "`protected_paths[0]`"),
            ("[1]", "top level must be a JSON object"),
            ("{", "not valid JSON"),
        ];
        for (text, want) in cases {
            let e = Constitution::parse(text)
                .err()
                .map(|e| e.message)
                .unwrap_or_default();
            assert!(e.contains(want), "{text}: {e}");
        }
    }

    #[test]
    fn a_constitution_that_would_cost_every_command_and_request_is_refused() {
        // Red-team pass 6, R6-16: 15,000 protected paths made each command take two minutes.
        let many: Vec<String> = (0..15_000).map(|i| format!("p/{i}/f")).collect();
        let e = Constitution::parse(&json!({ "protected_paths": many }).to_string())
            .err()
            .map(|e| e.message)
            .unwrap_or_default();
        assert!(
            e.contains("lists 15000 entries") && e.contains("at most 200"),
            "{e}"
        );
        let long = vec!["x".repeat(200); 100];
        let e = Constitution::parse(&json!({ "conventions": long }).to_string())
            .err()
            .map(|e| e.message)
            .unwrap_or_default();
        assert!(e.contains("20000 bytes"), "{e}");
        let fine: Vec<String> = (0..200).map(|i| format!("p/{i}/f")).collect();
        assert!(Constitution::parse(&json!({ "protected_paths": fine }).to_string()).is_ok());
    }

    #[test]
    fn a_glob_for_a_whole_directory_is_protected_as_that_directory() {
        let c = Constitution::parse(
            r#"{"protected_paths": ["docs/api/", "db/migrations/**", "secrets/**/*", "**/*.lock", "src/*.gen.rs", "README.md"]}"#,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let plain: Vec<String> = c
            .plain_protected()
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        assert_eq!(plain, ["docs/api", "db/migrations", "secrets", "README.md"]);
    }

    #[test]
    fn protected_paths_refuse_writes_but_not_reads() {
        let c = sample();
        let edit = call("edit_file", json!({"path": "migrations/001.sql"}));
        assert!(c.check_call(&edit).is_some_and(|m| m.contains("protected")));
        assert!(
            c.check_call(&call("create_file", json!({"path": "a/Cargo.lock"})))
                .is_some()
        );
        assert!(
            c.check_call(&call("read_file", json!({"path": "migrations/001.sql"})))
                .is_none()
        );
        assert!(
            c.check_call(&call("edit_file", json!({"path": "src/migrations.rs"})))
                .is_none()
        );
        let patch =
            "*** Begin Patch\n*** Update File: migrations/001.sql\n@@\n-a\n+b\n*** End Patch\n";
        assert!(
            c.check_call(&call("apply_patch", json!({"patch": patch})))
                .is_some()
        );
        assert!(
            c.check_call(&call("edit_file", json!({"path": CONSTITUTION_FILE})))
                .is_some()
        );
    }

    #[test]
    fn commands_writing_protected_paths_or_forbidden_are_refused() {
        let c = sample();
        let run = |cmd: &str| c.check_call(&call("run_command", json!({"command": cmd})));
        assert!(run("sed -i 's/a/b/' migrations/001.sql").is_some());
        assert!(run("echo x > migrations/002.sql").is_some());
        assert!(run("echo x >migrations/002.sql").is_some());
        assert!(run("git  push origin main").is_some_and(|m| m.contains("forbidden")));
        assert!(run("cat migrations/001.sql").is_none());
        assert!(run("cargo test").is_none());
        // Not git's own command: an alias (or `git-push-helper`) may be `git push` (R8-26).
        assert!(run("git push-helper").is_some_and(|m| m.contains("may run")));
        assert!(run("git status").is_none());
    }

    #[test]
    fn forbidden_commands_are_matched_as_the_shell_runs_them() {
        // Red-team pass 8, R8-26: each RAN under `["curl", "git push", "rm -rf"]`.
        let c = Constitution::parse(r#"{"forbidden_commands": ["curl", "git push", "rm -rf"]}"#)
            .unwrap_or_else(|e| panic!("{}", e.message));
        let run = |cmd: &str| c.check_call(&call("run_command", json!({"command": cmd})));
        for cmd in [
            "c\\url --version",
            "git -c a.b=c push --dry-run nowhere",
            "rm -r -f src",
            "rm -fr src",
            "rm --recursive --force src",
            "\"curl\" x",
            "env curl x",
            "command curl x",
            "exec curl x",
            "nice -n 5 curl x",
            "timeout 5 curl x",
            "echo u | xargs curl",
            "sh -c 'cu\"rl\" x'",
            "/usr/bin/curl x",
            "f() { curl x; }; f",
            // R8-26's rest: an alias the line defines, push's plumbing.
            "git -c alias.p=push p",
            "git send-pack origin main",
            "git http-push https://example.com/r.git main",
        ] {
            let why = run(cmd).unwrap_or_default();
            assert!(why.contains("forbidden"), "{cmd}: {why:?}");
        }
        // What the parser cannot see through may hide one.
        for cmd in [
            "$(echo curl) x",
            "`echo curl` x",
            "eval \"$X\"",
            "$CMD x",
            "cu$@rl x",
            "sh -c \"$X\"",
            "python3 -c \"import os; os.system('curl x')\"",
            // An alias from the environment or the configuration: may be `git push`.
            "git -c alias.p='!git push' p",
            "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=alias.q GIT_CONFIG_VALUE_0=push git q",
            "git p",
        ] {
            let why = run(cmd).unwrap_or_default();
            assert!(why.contains("may run"), "{cmd}: {why:?}");
        }
        // Words that are not commands are not refused.
        for cmd in [
            "grep -rn curl src",
            "echo 'do not git push'",
            "rm -r build",
            "git pull",
            "cargo test",
        ] {
            assert_eq!(run(cmd), None, "{cmd}");
        }
    }

    #[test]
    fn a_forbidden_command_inside_a_script_the_line_runs_is_refused() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(dir.path().join("up.sh"), "#!/bin/sh\ncurl -s x\n")
            .unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(dir.path().join("ok.sh"), "#!/bin/sh\necho fine\n")
            .unwrap_or_else(|e| panic!("{e}"));
        let c = Constitution::parse(r#"{"forbidden_commands": ["curl"]}"#)
            .unwrap_or_else(|e| panic!("{}", e.message));
        let run = |cmd: &str| {
            c.check_call_in(
                &call("run_command", json!({"command": cmd})),
                Some(dir.path()),
            )
        };
        assert!(run("sh up.sh").is_some());
        assert_eq!(run("sh ok.sh"), None);
    }

    #[test]
    fn head_text_is_stable_and_states_the_authority_order() {
        let a = sample().head_text().unwrap_or_default();
        assert_eq!(a, sample().head_text().unwrap_or_default());
        assert!(
            a.contains("the request wins") && a.contains("- make test") && a.contains("- Tabs.")
        );
        assert!(Constitution::default().head_text().is_none());
    }
}
