//! Slash commands: one name, one job. Each does what the `keel` command of the same name does
//! (`/init` is `keel init`, `/mcp add NAME` is `keel mcp add NAME`) or says in one line why it
//! cannot; none is a silent no-op.

/// Every command with its one-line description (what `/help` prints and completion offers).
pub const COMMANDS: &[(&str, &str)] = &[
    ("help", "list the commands and keys"),
    ("new", "start a new session in this workspace"),
    (
        "resume",
        "pick a session of this workspace to continue (/resume ID)",
    ),
    ("sessions", "list the recent sessions of this workspace"),
    (
        "model",
        "show the model, or use another from the next turn (/model NAME)",
    ),
    (
        "mode",
        "show the mode, or set it before the first message (/mode react|plan_exec)",
    ),
    ("phase", "show the plan_exec phase"),
    ("approval", "show the approval policy"),
    (
        "undo",
        "restore the workspace to before the last turn that changed files (/undo TURN)",
    ),
    (
        "diff",
        "show the changes: uncommitted ones in a git repository, else this session's",
    ),
    ("compact", "compact the conversation's context now"),
    ("cost", "show tokens and cost of this session"),
    (
        "context",
        "show how full the model's context window is and every layer of the prompt",
    ),
    ("memory", "list the memory kept across sessions"),
    ("skills", "list the skills the agent can load here"),
    ("rules", "list the project's rules files (.keel/rules)"),
    (
        "workflow",
        "list the flows here, run one in the background (/workflow NAME [k=v …]), /workflow stop",
    ),
    (
        "mcp",
        "MCP servers, as keel mcp: /mcp [list], /mcp add|remove|test NAME",
    ),
    (
        "init",
        "prepare this workspace, as keel init (.keel/config.toml, .keel/project.md)",
    ),
    (
        "quit",
        "leave keel chat (the session stays stored: keel -c continues it)",
    ),
];

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Slash {
    Help,
    New,
    Resume(Option<String>),
    Sessions,
    Model(Option<String>),
    Mode(Option<String>),
    Phase,
    Approval(Option<String>),
    Undo(Option<u32>),
    Diff,
    Compact,
    Cost,
    Context,
    Memory,
    Skills,
    Rules,
    /// `/workflow [NAME-or-PATH k=v …]`.
    Workflow(Option<String>),
    /// `/mcp …`: the words of a `keel mcp` command (empty: `list`).
    Mcp(Vec<String>),
    Init,
    Quit,
}

/// Parses a line starting with `/`; the error says what is wrong and what to do.
pub fn parse(line: &str) -> Result<Slash, String> {
    let line = line.trim();
    let body = line.strip_prefix('/').unwrap_or(line);
    let (name, arg) = match body.split_once(char::is_whitespace) {
        Some((n, a)) => (n, Some(a.trim().to_string()).filter(|a| !a.is_empty())),
        None => (body, None),
    };
    let no_arg = |cmd: Slash| match &arg {
        Some(a) => Err(format!("/{name} takes no argument (got `{a}`)")),
        None => Ok(cmd),
    };
    match name {
        "help" | "?" => no_arg(Slash::Help),
        "new" => no_arg(Slash::New),
        "resume" => Ok(Slash::Resume(arg)),
        "sessions" => no_arg(Slash::Sessions),
        "model" => Ok(Slash::Model(arg)),
        "mode" => Ok(Slash::Mode(arg)),
        "phase" => no_arg(Slash::Phase),
        "approval" => Ok(Slash::Approval(arg)),
        "undo" => match arg {
            None => Ok(Slash::Undo(None)),
            Some(a) => a
                .parse()
                .map(|t| Slash::Undo(Some(t)))
                .map_err(|_| format!("/undo takes a turn number (got `{a}`)")),
        },
        "diff" => no_arg(Slash::Diff),
        "compact" => no_arg(Slash::Compact),
        "cost" => no_arg(Slash::Cost),
        "context" => no_arg(Slash::Context),
        "memory" => no_arg(Slash::Memory),
        "skills" => no_arg(Slash::Skills),
        "rules" => no_arg(Slash::Rules),
        "workflow" | "flow" => Ok(Slash::Workflow(arg)),
        "mcp" => split_words(arg.as_deref().unwrap_or("")).map(Slash::Mcp),
        "init" => no_arg(Slash::Init),
        "quit" | "exit" | "q" => no_arg(Slash::Quit),
        "" => Err("type a command after `/`; /help lists them".into()),
        other => {
            let near: Vec<&str> = completions(other).into_iter().map(|(n, _)| n).collect();
            Err(if near.is_empty() {
                format!("unknown command /{other}; /help lists them")
            } else {
                format!(
                    "unknown command /{other}; did you mean /{}?",
                    near.join(", /")
                )
            })
        }
    }
}

/// `text` split into words as a shell would: spaces separate, single and double quotes group,
/// a backslash escapes the next character.
pub fn split_words(text: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut quote: Option<char> = None;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some('"') | None, '\\') => {
                if let Some(next) = chars.next() {
                    word.push(next);
                }
                in_word = true;
            }
            (Some(_), c) => word.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                in_word = true;
            }
            (None, c) if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            (None, c) => {
                word.push(c);
                in_word = true;
            }
        }
    }
    if let Some(q) = quote {
        return Err(format!("a {q} quote is not closed"));
    }
    if in_word {
        words.push(word);
    }
    Ok(words)
}

/// Commands whose name starts with `prefix`.
pub fn completions(prefix: &str) -> Vec<(&'static str, &'static str)> {
    COMMANDS
        .iter()
        .filter(|(n, _)| n.starts_with(prefix))
        .copied()
        .collect()
}

/// `/help`'s text: the commands, then the keys.
pub fn help() -> String {
    let mut out = String::from("commands:\n");
    for (name, what) in COMMANDS {
        out.push_str(&format!("  /{name:<9} {what}\n"));
    }
    out.push_str(
        "keys: Enter send · Shift-Enter or Ctrl-J new line · Up/Down history · Tab complete\n\
         \x20     Esc or Ctrl-C interrupt a turn · Ctrl-C clears the message (Up brings it back)\n\
         \x20     quit: /quit, Ctrl-D on an empty line, or Ctrl-C twice on an empty line\n\
         \x20     End on an empty line: back to the latest output\n\
         \x20     Ctrl-O expand output · Ctrl-T show reasoning · PgUp/PgDn scroll\n\
         \x20     @path attach a file · !command run a shell command (its output goes with your next message)",
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_command_parses_and_bad_input_is_explained() {
        for (name, _) in COMMANDS {
            assert!(parse(&format!("/{name}")).is_ok(), "/{name}");
        }
        assert_eq!(parse("/undo 2"), Ok(Slash::Undo(Some(2))));
        assert_eq!(
            parse("/model  gpt-x "),
            Ok(Slash::Model(Some("gpt-x".into())))
        );
        assert!(parse("/undo two").unwrap_err().contains("turn number"));
        assert_eq!(
            parse("/re").unwrap_err(),
            "unknown command /re; did you mean /resume?"
        );
        assert!(
            parse("/cost now")
                .unwrap_err()
                .contains("takes no argument")
        );
        assert!(help().contains("/quit"));
        // Issue 17's features are real commands now, not "not in Keel yet".
        assert_eq!(parse("/memory"), Ok(Slash::Memory));
        assert_eq!(parse("/skills"), Ok(Slash::Skills));
        assert_eq!(parse("/rules"), Ok(Slash::Rules));
        assert_eq!(parse("/context"), Ok(Slash::Context));
        assert_eq!(parse("/workflow"), Ok(Slash::Workflow(None)));
        assert_eq!(
            parse("/workflow  hypotheses n=3 who=me "),
            Ok(Slash::Workflow(Some("hypotheses n=3 who=me".into())))
        );
        assert!(completions("wo").iter().any(|(n, _)| *n == "workflow"));
        assert!(help().contains("/workflow"));
        // `/mcp` and `/init` are the `keel mcp` and `keel init` commands, not "not yet".
        assert_eq!(parse("/init"), Ok(Slash::Init));
        assert_eq!(parse("/mcp"), Ok(Slash::Mcp(vec![])));
        assert_eq!(
            parse(
                r#"/mcp add web --url http://127.0.0.1:8000/mcp --header 'Authorization: Bearer ${T}'"#
            ),
            Ok(Slash::Mcp(
                [
                    "add",
                    "web",
                    "--url",
                    "http://127.0.0.1:8000/mcp",
                    "--header",
                    "Authorization: Bearer ${T}"
                ]
                .map(String::from)
                .to_vec()
            ))
        );
        assert_eq!(
            split_words(r#"a "b c" d\ e ''"#),
            Ok(["a", "b c", "d e", ""].map(String::from).to_vec())
        );
        assert!(parse("/mcp add 'x").unwrap_err().contains("not closed"));
        assert!(
            COMMANDS
                .iter()
                .all(|(_, what)| !what.contains("not in Keel"))
        );
    }
}
