//! `keel chat` end to end: the real binary in a real terminal (tmux), driven by keystrokes.
//! A scripted session asks to run a destructive command (approved with `y`), edits a file
//! (its diff shows), then `/undo` restores the file, Ctrl-D quits, and `keel -c` reopens
//! the session with its transcript. Needs tmux: skipped (visibly) without it outside CI,
//! a failure in CI (`.ci/run` installs it).

// Tests start programs of their own (the keel binary, git fixtures, tmux, servers): allowed
// here, outside Keel's one spawn path (docs/SECURITY.md, "One way to start a process").
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

mod common;
#[path = "shared/tmux.rs"]
mod tmux;

use common::*;
use tmux::{Tmux, keel_line};

const SCRIPT: &str = r###"
turns:
  - text: "I'll remove the old readme first."
    tool_calls:
      - {id: rm1, name: run_command, arguments: {command: "rm README.md"}}
  - tool_calls:
      - {id: rd1, name: read_file, arguments: {path: src/lib.rs}}
  - tool_calls:
      - name: edit_file
        arguments:
          path: src/lib.rs
          edits:
            - {search: "a + b", replace: "a.wrapping_add(b)"}
  - text: "## Done\n\n- removed **README.md**\n- `add` now wraps\n"
"###;

#[test]
fn a_whole_session_in_keel_chat_ask_approve_diff_undo_quit_resume() {
    if !Tmux::required("keel chat tmux test") {
        return;
    }
    let env = Env::new();
    let script = env.script("chat.yaml", SCRIPT);
    let original = std::fs::read_to_string(env.work.join("src/lib.rs")).unwrap();
    let term = Tmux::new("a");
    term.start(&keel_line(
        &env,
        &format!("chat --provider scripted --script '{}'", script.display()),
    ));
    term.wait_for("Enter sends");

    term.type_line("tidy up the repo");
    let screen = term.wait_for("[y] yes once");
    assert!(
        screen.contains("? approve run_command (destructive): rm README.md\n  `rm` deletes files"),
        "the approval says why it asks:\n{screen}"
    );
    assert!(
        env.work.join("README.md").exists(),
        "nothing runs before the approval"
    );
    term.send(&["y"]);

    let screen = term.wait_for("now wraps");
    assert!(screen.contains("✓ approved once"), "{screen}");
    assert!(
        screen.contains("-    a + b"),
        "the diff shows the removed line:\n{screen}"
    );
    assert!(screen.contains("+    a.wrapping_add(b)"), "{screen}");
    assert!(screen.contains("## Done"), "{screen}");
    assert!(!env.work.join("README.md").exists());
    let edited = std::fs::read_to_string(env.work.join("src/lib.rs")).unwrap();
    assert!(edited.contains("a.wrapping_add(b)"));

    term.wait_for("Enter sends"); // the turn is over
    term.type_line("/undo");
    term.wait_for("undo: workspace restored");
    assert_eq!(
        std::fs::read_to_string(env.work.join("src/lib.rs")).unwrap(),
        original,
        "/undo restores the edited file"
    );

    term.send(&["C-d"]);
    term.wait_exit();

    // `keel -c` reopens the latest session of the workspace with its transcript.
    let term = Tmux::new("b");
    term.start(&keel_line(&env, "-c"));
    let screen = term.wait_for("resumed session");
    assert!(screen.contains("undo: workspace restored"), "{screen}");
    term.send(&["PageUp"]); // the first message has scrolled off: scroll back to it
    term.wait_for("› tidy up the repo");
    term.type_line("/quit");
    term.wait_exit();
}

/// A workspace without git: the model's command runs `git init`, commits and sets
/// `core.fsmonitor` (and a pager and textconv) to a script outside the workspace; then the user
/// types `/diff`. The diff shows, and the script never runs (Keel's own git is hardened).
#[test]
fn diff_in_keel_chat_runs_nothing_a_command_planted_in_a_new_git_dir() {
    if !Tmux::required("keel chat /diff tmux test") {
        return;
    }
    let env = Env::new();
    assert!(!env.work.join(".git").exists(), "the demo repo has no git");
    // Without Keel's own snapshot repository, /diff asks the repository the command made.
    env.user_config("[snapshots]\nenabled = false\n");
    let ran = env.home.join("fsmonitor-ran");
    let evil = env.script(
        "evil.sh",
        &format!("#!/bin/sh\necho \"$0 $*\" >> '{}'\ncat\n", ran.display()),
    );
    std::fs::set_permissions(&evil, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let plant = format!(
        "git init -q && git add -A && git -c user.email=a@b -c user.name=n commit -qm init && git config core.fsmonitor '{0}' && git config core.pager '{0}' && git config diff.external '{0}' && echo changed >> README.md",
        evil.display()
    );
    let script = env.script(
        "plant.yaml",
        &format!(
            "turns:\n  - tool_calls:\n      - {{id: p1, name: run_command, arguments: {{command: {}}}}}\n  - text: \"Planted.\"\n",
            serde_json::to_string(&plant).unwrap()
        ),
    );
    let term = Tmux::new("diff");
    term.start(&keel_line(
        &env,
        &format!(
            "chat --approval never --provider scripted --script '{}'",
            script.display()
        ),
    ));
    term.wait_for("Enter sends");
    term.type_line("set things up");
    term.wait_for("Planted.");
    // The first layer: a repository a command leaves with program-running config is
    // quarantined (red-team B16). Put it back, as if it had been planted some other way, to
    // check the second layer: Keel's own git runs nothing it configures.
    let quarantined = env.work.join(".git-quarantined-by-keel");
    assert!(
        quarantined.exists() && !env.work.join(".git").exists(),
        "the command's repository was quarantined: {}",
        term.screen()
    );
    std::fs::rename(&quarantined, env.work.join(".git")).unwrap();
    assert!(env.work.join(".git/config").exists());
    term.wait_for("Enter sends");
    term.type_line("/diff");
    let screen = term.wait_for("+changed");
    assert!(screen.contains("git diff"), "{screen}");
    assert!(
        !ran.exists(),
        "/diff ran the program the command planted: {}\n{screen}",
        std::fs::read_to_string(&ran).unwrap_or_default()
    );
    term.type_line("/quit");
    term.wait_exit();
}

#[test]
fn without_a_terminal_keel_prints_its_usage_and_chat_points_to_run() {
    let env = Env::new();
    let out = env.keel().output().unwrap();
    assert_exit(&out, 2);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("Usage: keel"), "{err}");
    assert!(err.contains("keel chat"), "{err}");

    let out = env.keel().args(["chat", "hello"]).output().unwrap();
    assert_exit(&out, 2);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("keel chat needs a terminal"), "{err}");
    assert!(err.contains("keel run"), "{err}");
    assert!(
        !env.home.join("data").join("history").exists(),
        "nothing was recorded"
    );

    let out = env.keel().arg("--help").output().unwrap();
    assert_exit(&out, 0);
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains("chat"), "{help}");
}

#[test]
fn workflow_in_chat_lists_the_flows_and_runs_one_with_live_node_lines() {
    if !Tmux::required("keel chat /workflow tmux test") {
        return;
    }
    let env = Env::new();
    let script = env.script("chat.yaml", SCRIPT);
    std::fs::create_dir_all(env.work.join(".keel/flows")).unwrap();
    std::fs::write(
        env.work.join(".keel/flows/greet.yaml"),
        "name: greet\ndescription: Say hello twice.\ninputs:\n  who: {type: string, default: world}\nnodes:\n  - id: first\n    type: shell\n    command: echo hello ${inputs.who} > hello.txt\n  - id: second\n    type: shell\n    needs: [first]\n    command: cat hello.txt\n",
    )
    .unwrap();
    let term = Tmux::new("w");
    term.start(&keel_line(
        &env,
        &format!("chat --provider scripted --script '{}'", script.display()),
    ));
    term.wait_for("Enter sends");
    term.type_line("/workflow");
    let screen = term.wait_for(".keel/flows/greet.yaml");
    assert!(screen.contains("Say hello twice."), "{screen}");
    term.type_line("/workflow greet who=keel");
    let screen = term.wait_for("shows its nodes");
    assert!(screen.contains("✓ first completed"), "{screen}");
    assert!(screen.contains("✓ second completed"), "{screen}");
    assert!(screen.contains("completed · `keel flow status"), "{screen}");
    assert_eq!(
        std::fs::read_to_string(env.work.join("hello.txt")).unwrap(),
        "hello keel\n"
    );
    // One flow at a time: a second `/workflow` while one runs is refused with a notice.
    std::fs::write(
        env.work.join(".keel/flows/hold.yaml"),
        "name: hold\nnodes:\n  - id: hold\n    type: shell\n    command: while [ ! -f go ]; do sleep 0.1; done\n",
    )
    .unwrap();
    term.type_line("/workflow hold");
    term.wait_for("▶ hold");
    term.type_line("/workflow greet");
    term.wait_for("flow hold is still running");
    // `/workflow stop` cancels it; `keel flow resume` can continue it.
    term.type_line("/workflow stop");
    let screen = term.wait_for("continues it");
    assert!(screen.contains("stopping flow hold"), "{screen}");
    assert!(screen.contains("cancelled"), "{screen}");
    assert!(screen.contains("`keel flow resume"), "{screen}");
    term.type_line("/workflow stop");
    term.wait_for("no flow is running");
    term.type_line("/quit");
    term.wait_exit();
}

/// One running session per workspace holds for the chat too: while a `keel run` works in the
/// workspace, a message typed in `keel chat` there is refused with the other session's id
/// (nothing runs, the chat stays usable), and once that run has ended the same message runs.
#[test]
fn chat_in_a_busy_workspace_names_the_running_session_and_runs_once_it_is_free() {
    if !Tmux::required("keel chat workspace lease test") {
        return;
    }
    let env = Env::new();
    let slow = env.script(
        "slow.yaml",
        "turns:\n  - text: \"Slow answer.\"\n    delay_ms: 6000\n",
    );
    let quick = env.script("quick.yaml", "turns:\n  - text: \"Quick answer.\"\n");
    let mut run = env
        .keel()
        .args(["run", "--json", "--script"])
        .arg(&slow)
        .arg("take your time")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // The run holds the workspace once its session is stored.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let running = loop {
        let out = env.keel().args(["sessions", "--json"]).output().unwrap();
        let list: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        if let Some(id) = list
            .as_array()
            .and_then(|l| l.iter().find(|s| s["status"] == "running"))
            .and_then(|s| s["id"].as_str())
        {
            break id.to_string();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the run never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    let term = Tmux::new("lease");
    term.start(&keel_line(
        &env,
        &format!("chat --provider scripted --script '{}'", quick.display()),
    ));
    term.wait_for("Enter sends");
    term.type_line("hello");
    // The refusal wraps at the terminal's width: compare with the lines joined.
    let flat = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    let screen = term.wait_until("the workspace-busy refusal", |s| {
        flat(s).contains("is running in this workspace")
    });
    assert!(
        flat(&screen).contains(&format!("✗ another session ({running}) is running")),
        "the refusal names the running session:\n{screen}"
    );
    assert!(!screen.contains("Quick answer."), "nothing ran:\n{screen}");
    assert!(run.wait().unwrap().success());
    term.wait_for("Enter sends");
    term.type_line("hello again");
    term.wait_for("Quick answer.");
    term.type_line("/quit");
    term.wait_exit();
}
