//! Slash commands: one name, one job. Each either does its job or says in one line why it
//! cannot (a feature Keel does not have yet); none is a silent no-op.

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
        "show the workspace's uncommitted changes (git diff)",
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
    ("mcp", "MCP servers (not in Keel yet)"),
    ("init", "a starter project-rules file (not in Keel yet)"),
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
    /// A command whose feature Keel does not have yet.
    Unavailable(&'static str, &'static str),
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
        "mcp" => Ok(Slash::Unavailable("mcp", "Keel has no MCP client yet")),
        "init" => Ok(Slash::Unavailable(
            "init",
            "Keel cannot write a starter rules file yet; create .keel/rules/NAME.md by hand (/rules lists them)",
        )),
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
         \x20     Esc or Ctrl-C interrupt (twice: quit) · Ctrl-D quit on an empty line\n\
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
    }
}
