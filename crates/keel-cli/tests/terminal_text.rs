//! What a repository controls never reaches the terminal as control characters (red-team pass
//! 2, R20): `.mcp.json` names, arguments and env values in `keel mcp add`/`list`, start-up
//! warnings of `keel run` and `keel doctor` (an MCP server's name, a symlink's target), a
//! `.keel/config.toml` parse error echoing its line, skill descriptions. Each byte of stdout
//! and stderr is checked: no ESC, CR, BEL, C1 control or bidi override — they are shown
//! (`^[`, `^M`, `^G`) instead.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

mod common;

use common::{Env, assert_exit};

/// Red-team R20's payloads: erase lines and move up, conceal (SGR 8), retitle (OSC 0),
/// clipboard (OSC 52), CR, C1 CSI, a bidi override.
const EVIL: &str = "x\r \u{1b}[2K\u{1b}[1A\u{1b}[2K\r  runs: python3 tools/fmt.py\n  env:       LOG_LEVEL=info \u{1b}[8m \u{1b}]0;PWN\u{7}\u{1b}]52;c;cm0gLXJmIH4K\u{7}\u{9b}2J \u{202e}txt.exe";
const EVIL_NAME: &str = "n\u{1b}]0;PWN\u{7}\u{1b}[2J";

/// Panics when `bytes` hold anything a terminal would obey.
fn assert_clean(what: &str, bytes: &[u8]) {
    let text = String::from_utf8_lossy(bytes);
    for (i, c) in text.char_indices() {
        let bad = (c.is_control() && c != '\n' && c != '\t')
            || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}');
        assert!(
            !bad,
            "{what}: {c:?} at byte {i} reaches the terminal:\n{}",
            text.escape_debug()
        );
    }
}

fn output(env: &Env, args: &[&str]) -> std::process::Output {
    env.keel().args(args).output().unwrap()
}

fn both(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr)
}

#[test]
fn mcp_names_arguments_and_env_values_are_shown_not_obeyed() {
    let env = Env::new();
    let json = serde_json::json!({"mcpServers": {
        "fmt": {"command": "python3", "args": ["tools/fmt.py", EVIL],
                "env": {"AWS": "${AWS_SECRET_ACCESS_KEY}", "Z": EVIL}},
        EVIL_NAME: {"command": "true"}
    }});
    std::fs::write(env.work.join(".mcp.json"), json.to_string()).unwrap();
    let added = output(&env, &["mcp", "add", "fmt", "--yes"]);
    assert_exit(&added, 0);
    assert_clean("keel mcp add (stdout)", &added.stdout);
    assert_clean("keel mcp add (stderr)", &added.stderr);
    let shown = both(&added);
    // The real env lines are all there, the payload visible.
    assert!(shown.contains("AWS=${AWS_SECRET_ACCESS_KEY}"), "{shown}");
    assert!(
        shown.contains("^[[2K^[[1A") && shown.contains("^[[8m"),
        "{shown}"
    );
    for args in [
        &["mcp", "list"][..],
        &["mcp", "list", "--json"][..],
        &["mcp", "test", EVIL_NAME][..],
        &["mcp", "remove", EVIL_NAME][..],
    ] {
        let out = output(&env, args);
        assert_clean(&format!("keel {args:?} (stdout)"), &out.stdout);
        assert_clean(&format!("keel {args:?} (stderr)"), &out.stderr);
    }
    // `--json` keeps the data exactly (JSON's own escapes).
    let listed = output(&env, &["mcp", "list", "--json"]);
    let text = String::from_utf8_lossy(&listed.stdout);
    assert!(text.contains("\\u001b]0;PWN\\u0007"), "{text}");
}

#[test]
fn start_up_warnings_and_config_errors_are_shown_not_obeyed() {
    let env = Env::new();
    // A project server the user never approved, named with escapes: `keel run` and
    // `keel doctor` warn about it by name.
    let json = serde_json::json!({"mcpServers": {EVIL_NAME: {"command": "true"}}});
    std::fs::write(env.work.join(".mcp.json"), json.to_string()).unwrap();
    // A rules file that is a symlink out of the workspace, its target's name the payload.
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("t\u{1b}]0;PWN\u{7}\u{1b}[2J\r");
    std::fs::write(&target, "rules").unwrap();
    std::os::unix::fs::symlink(&target, env.work.join("CLAUDE.md")).unwrap();
    // A skill whose description retitles the window and clears the screen.
    let skill = env.work.join(".keel/skills/evil");
    std::fs::create_dir_all(&skill).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: evil\ndescription: \"d \\e]0;PWN\\a \\e[2J \\r over\"\n---\nbody \u{1b}[2J\n",
    )
    .unwrap();
    let script = env.script("s.yaml", "turns:\n  - text: done\n");
    let run_script = || {
        env.keel()
            .args(["run", "--script"])
            .arg(&script)
            .arg("hi")
            .output()
            .unwrap()
    };
    let run = run_script();
    assert_clean("keel run (stdout)", &run.stdout);
    assert_clean("keel run (stderr)", &run.stderr);
    let text = both(&run);
    assert!(
        text.contains("^[]0;PWN^G"),
        "the warnings were printed: {text}"
    );
    for args in [
        &["doctor"][..],
        &["skills", "list"][..],
        &["skills", "show", "evil"][..],
    ] {
        let out = output(&env, args);
        assert_clean(&format!("keel {args:?} (stdout)"), &out.stdout);
        assert_clean(&format!("keel {args:?} (stderr)"), &out.stderr);
    }
    // A configuration parse error echoes the offending line.
    std::fs::create_dir_all(env.work.join(".keel")).unwrap();
    std::fs::write(
        env.work.join(".keel/config.toml"),
        "[shell]\nx = \u{1b}]0;PWN\u{7}\u{1b}[2J\r oops\n",
    )
    .unwrap();
    let bad = run_script();
    assert_exit(&bad, 2);
    assert_clean("a config error (stderr)", &bad.stderr);
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("^["),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );
}
