//! The `keel` binary end to end: real process, temp workspace, temp data directory.

// Tests start programs of their own (the keel binary, git fixtures, tmux, servers): allowed
// here, outside Keel's one spawn path (docs/SECURITY.md, "One way to start a process").
#![allow(
    clippy::disallowed_macros,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::disallowed_methods
)]

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

mod common;
use common::*;

#[test]
fn demo_run_emits_the_event_stream_creates_the_file_and_is_listed() {
    let env = Env::new();
    let out = env
        .keel()
        .args(["run", "--provider", "scripted", "--json", "--script"])
        .arg(repo_root().join("examples/demo.yaml"))
        .arg("add tests for the demo library")
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let events = json_lines(&out.stdout);

    // seq strictly increasing from 1, one session id throughout.
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e["seq"].as_u64(), Some(i as u64 + 1));
        assert_eq!(e["session_id"], events[0]["session_id"]);
    }
    let created = std::fs::read_to_string(env.work.join("tests/arith.rs")).unwrap();
    assert!(created.contains("assert_eq!(mul(4, 5), 20);"));

    insta::assert_json_snapshot!("demo_events", events, {
        "[].session_id" => "[session]",
        "[].ts" => "[ts]",
        "[].run_id" => "[run]",
        "[].workspace" => "[workspace]",
        "[].usage.input_tokens" => "[estimate]",
        "[].commit" => "[commit]",
    });

    let list = env.keel().args(["sessions"]).output().unwrap();
    assert_eq!(list.status.code(), Some(0));
    let listing = String::from_utf8_lossy(&list.stdout);
    let id = events[0]["session_id"].as_str().unwrap();
    assert!(listing.contains(id), "{listing}");
    assert!(listing.contains("completed"), "{listing}");
}

#[test]
fn iteration_cap_on_a_progressing_run_exits_3_and_resumes() {
    let env = Env::new();
    let script = env.script(
        "loop.yaml",
        "turns:\n  - tool_calls: [{name: list_files, arguments: {}}]\n  - tool_calls: [{name: list_files, arguments: {max_depth: 1}}]\n  - tool_calls: [{name: read_file, arguments: {path: README.md}}]\n",
    );
    let out = env
        .keel()
        .args(["run", "--json", "--max-iterations", "2", "--script"])
        .arg(&script)
        .arg("never finishes")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    let events = json_lines(&out.stdout);
    // Every turn ends with turn_finished, as on the server.
    let end = events.last().unwrap();
    assert_eq!(end["type"], "turn_finished");
    assert_eq!(end["status"], "blocked");
    let last = &events[events.len() - 2];
    assert_eq!(last["type"], "session_finished");
    assert_eq!(last["status"], "blocked");
    assert_eq!(last["iterations"], 2);
    let blocker = &events[events.len() - 3];
    assert_eq!(blocker["type"], "blocker");
    assert_eq!(blocker["source"], "budget");

    // Looping instead: the same two reads over and over are answered with their earlier
    // results; three such answers that go unused, with nothing new done since, stop the run
    // with a blocker naming the loop (exit 3), before the iteration cap.
    let env = Env::new();
    let mut turns = String::from("turns:\n");
    for i in 0..30 {
        let p = if i % 2 == 0 {
            "README.md"
        } else {
            "src/lib.rs"
        };
        turns.push_str(&format!(
            "  - tool_calls: [{{name: read_file, arguments: {{path: {p}}}}}]\n"
        ));
    }
    let script = env.script("cycle.yaml", &turns);
    let out = env
        .keel()
        .env("KEEL_FALLBACK_CHAIN__RECOVERY__ENABLED", "false")
        .args(["run", "--json", "--max-iterations", "8", "--script"])
        .arg(&script)
        .arg("cycle")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    let events = json_lines(&out.stdout);
    assert_eq!(events.last().unwrap()["type"], "turn_finished");
    assert_eq!(events[events.len() - 2]["status"], "blocked");
    let blocker = &events[events.len() - 3];
    assert_eq!(blocker["type"], "blocker");
    assert!(
        blocker["question"]
            .as_str()
            .is_some_and(|q| q.contains("loop") && q.contains("read_file")),
        "{blocker}"
    );
    assert!(
        events[events.len() - 2]["iterations"].as_u64() < Some(8),
        "{}",
        events[events.len() - 2]
    );
}

#[test]
fn a_blocker_is_listed_answered_and_the_session_resumes() {
    let env = Env::new();
    let ask = env.script(
        "ask.yaml",
        "turns:\n  - tool_calls: [{name: ask_user, arguments: {question: \"Which license should the crate use?\"}}]\n",
    );
    let out = env
        .keel()
        .args(["run", "--json", "--script"])
        .arg(&ask)
        .arg("add a license file")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "blocked exits 3");
    let first = json_lines(&out.stdout);
    let session = first[0]["session_id"].as_str().unwrap().to_string();
    let blocker = first.iter().find(|e| e["type"] == "blocker").unwrap();
    let id = blocker["id"].as_str().unwrap().to_string();

    let list = env.keel().args(["blocker", "list"]).output().unwrap();
    assert_eq!(list.status.code(), Some(0));
    let text = String::from_utf8_lossy(&list.stdout);
    assert!(text.contains(&id), "{text}");
    assert!(
        text.contains("Which license should the crate use?"),
        "{text}"
    );
    assert!(text.contains("open"), "{text}");

    let answered = env
        .keel()
        .args(["blocker", "answer", &id[..8], "MIT"])
        .output()
        .unwrap();
    assert_eq!(answered.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&answered.stdout).contains(&format!("--resume {session}")));
    let empty = env.keel().args(["blocker", "list"]).output().unwrap();
    assert!(String::from_utf8_lossy(&empty.stdout).contains("No open blockers."));

    // Resume from another directory: the session's workspace is used.
    let finish = env.script(
        "finish.yaml",
        "turns:\n  - tool_calls: [{name: create_file, arguments: {path: LICENSE, content: MIT}}]\n  - text: \"Added the MIT license.\"\n",
    );
    let out = env
        .keel()
        .current_dir(&env.home)
        .args(["run", "--json", "--resume", &session, "--script"])
        .arg(&finish)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(env.work.join("LICENSE")).unwrap(),
        "MIT"
    );
    let second = json_lines(&out.stdout);
    assert_eq!(second[0]["type"], "session_resumed");
    assert_eq!(second[0]["answered_blockers"][0], id.as_str());
    assert_eq!(
        second[0]["seq"].as_u64(),
        Some(first.len() as u64 + 1),
        "numbering continues"
    );
    assert!(second.iter().all(|e| e["session_id"] == session.as_str()));

    let all = env
        .keel()
        .args(["blocker", "list", "--all", "--json"])
        .output()
        .unwrap();
    let rows: Value = serde_json::from_slice(&all.stdout).unwrap();
    assert_eq!(rows[0]["status"], "delivered");
    assert_eq!(rows[0]["answer"], "MIT");

    let missing = env
        .keel()
        .args(["run", "--resume", "nope", "--script"])
        .arg(&finish)
        .output()
        .unwrap();
    assert_eq!(missing.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("no session matches `nope`"));
}

#[test]
fn failures_are_one_structured_error_event_in_json_mode() {
    let env = Env::new();
    let script = env.script(
        "down.yaml",
        "turns:\n  - error: server\n  - error: server\n  - error: server\n  - error: server\n  - error: server\n  - error: server\n  - error: server\n  - error: server\n  - error: server\n  - error: server\n",
    );
    let out = env
        .keel()
        .env("KEEL_LLM__MAX_RETRIES", "0")
        .args(["run", "--json", "--script"])
        .arg(&script)
        .arg("x")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let events = json_lines(&out.stdout);
    let errors: Vec<&Value> = events.iter().filter(|e| e["type"] == "error").collect();
    assert_eq!(errors.len(), 1);
    let e = errors[0];
    assert_eq!(e["error_code"], "llm_failure");
    assert!(e["suggestions"].as_array().is_some_and(|s| !s.is_empty()));
    assert_eq!(e["retryable"], true);
    assert!(e["original_error"].is_string());
    assert!(events.iter().any(|e| e["type"] == "recovery"));
    assert_eq!(events.last().unwrap()["status"], "failed");
}

#[test]
fn configuration_errors_exit_2_and_name_the_key() {
    let env = Env::new();
    std::fs::create_dir_all(env.work.join(".keel")).unwrap();
    std::fs::write(
        env.work.join(".keel/config.toml"),
        "[agent]\nmax_iteratons = 5\n",
    )
    .unwrap();
    let out = env
        .keel()
        .args(["run", "--provider", "scripted", "--script"])
        .arg(repo_root().join("examples/demo.yaml"))
        .arg("x")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("max_iteratons"), "{err}");
    assert!(err.contains(".keel/config.toml"), "{err}");
    assert!(out.stdout.is_empty());

    let env = Env::new();
    let out = env.keel().args(["run", "do it"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no model provider is configured"));

    let out = env
        .keel()
        .env("KEEL_AGENT__MAX_ITERATIONS", "lots")
        .args(["run", "--script"])
        .arg(repo_root().join("examples/demo.yaml"))
        .arg("x")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("environment"));

    let out = env.keel().args(["run"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "missing task is a usage error");
}

#[test]
fn human_output_shows_tools_and_the_outcome() {
    let env = Env::new();
    let out = env
        .keel()
        .args(["run", "--script"])
        .arg(repo_root().join("examples/demo.yaml"))
        .arg("add tests")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("→ create_file tests/arith.rs"), "{text}");
    assert!(text.contains("✓ completed after 4 iterations"), "{text}");
    assert!(!text.contains('\x1b'), "NO_COLOR respected");
}

#[test]
fn events_survive_a_kill_between_turns() {
    let env = Env::new();
    // A killed run's lease expires after a second here (15 by default).
    env.user_config("[store]\nlease_ttl_secs = 1\n");
    let script = env.script(
        "slow.yaml",
        r#"
turns:
  - text: "Reading first."
    tool_calls:
      - name: read_file
        arguments: {path: "src/lib.rs"}
  - text: "never arrives"
    delay_ms: 60000
"#,
    );
    let mut child = env
        .keel()
        .args(["run", "--json", "--script"])
        .arg(&script)
        .arg("survive a kill")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    let mut seen: Vec<Value> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        assert!(Instant::now() < deadline, "no second turn within 30 s");
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap() == 0 {
            panic!("keel exited early");
        }
        let v: Value = serde_json::from_str(&line).unwrap();
        let second_turn = v["type"] == "turn_started" && v["iteration"] == 2;
        seen.push(v);
        if second_turn {
            break;
        }
    }
    child.kill().unwrap(); // SIGKILL: no chance to clean up
    child.wait().unwrap();

    let id = seen[0]["session_id"].as_str().unwrap().to_string();
    let stored = env
        .keel()
        .args(["sessions", "show", &id, "--json"])
        .output()
        .unwrap();
    assert_eq!(stored.status.code(), Some(0));
    let stored = json_lines(&stored.stdout);
    assert_eq!(
        stored, seen,
        "every published event was stored before it was published"
    );

    // No heartbeat since the kill: once the lease expires the session shows as interrupted.
    std::thread::sleep(Duration::from_millis(1_300));
    let shown = env.keel().args(["sessions", "show", &id]).output().unwrap();
    let text = String::from_utf8_lossy(&shown.stdout);
    assert!(text.contains("status    interrupted"), "{text}");
    assert!(text.contains("→ read_file src/lib.rs"), "{text}");
    assert!(text.contains("Reading first."), "{text}");
    let list = env.keel().args(["sessions"]).output().unwrap();
    assert!(String::from_utf8_lossy(&list.stdout).contains("interrupted"));
}

#[test]
fn version_is_printed() {
    let env = Env::new();
    let out = env.keel().arg("--version").output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("keel "));
}

#[test]
fn ctrl_c_cancels_the_turn_and_marks_the_session_cancelled() {
    let env = Env::new();
    let script = env.script(
        "slow.yaml",
        "turns:\n  - text: \"thinking\"\n    delay_ms: 60000\n",
    );
    let mut child = env
        .keel()
        .args(["run", "--json", "--script"])
        .arg(&script)
        .arg("wait for me")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    // session_started, then turn_started: the model request is now in flight.
    reader.read_line(&mut first).unwrap();
    let mut second = String::new();
    reader.read_line(&mut second).unwrap();
    assert!(second.contains("turn_started"), "{second}");
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let started = Instant::now();
    let out = child.wait_with_output().unwrap();
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(out.status.code(), Some(130));
    let rest: Vec<Value> = reader
        .lines()
        .map(|l| serde_json::from_str(&l.unwrap()).unwrap())
        .collect();
    let end = rest.last().unwrap();
    assert_eq!(end["type"], "turn_finished");
    assert_eq!(end["status"], "cancelled");
    let last = &rest[rest.len() - 2];
    assert_eq!(last["type"], "session_finished");
    assert_eq!(last["status"], "cancelled");
    let id = serde_json::from_str::<Value>(&first).unwrap()["session_id"]
        .as_str()
        .unwrap()
        .to_string();
    let list = env.keel().args(["sessions", "--json"]).output().unwrap();
    let sessions: Value = serde_json::from_slice(&list.stdout).unwrap();
    assert_eq!(sessions[0]["id"], id.as_str());
    assert_eq!(sessions[0]["status"], "cancelled");
}

#[test]
fn sandbox_check_prints_one_json_object_and_runs_nothing() {
    let env = Env::new();
    let out = env
        .keel()
        .args(["sandbox", "--check", "touch made && rm -rf src"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text.lines().count(), 1, "{text}");
    let v: Value = serde_json::from_str(text.trim()).unwrap();
    let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["class", "reasons"]);
    assert_eq!(v["class"], "destructive");
    assert!(v["reasons"][0].as_str().unwrap().contains("`rm`"), "{v}");
    assert!(!env.work.join("made").exists(), "--check runs nothing");

    let out = env
        .keel()
        .args(["sandbox", "--check", "ls | wc -l"])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["class"], "read_only");

    let out = env.keel().args(["sandbox"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "nothing to do is a usage error");
}

#[test]
fn sandbox_check_survives_ten_thousand_nested_parentheses() {
    let env = Env::new();
    let deep = format!("{}ls{}", "(".repeat(10_000), ")".repeat(10_000));
    let out = env
        .keel()
        .args(["sandbox", "--check", &deep])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["class"], "unknown", "{v}");
}

#[test]
fn sandbox_runs_commands_under_the_chosen_policy() {
    if !keel_tools::sandbox::is_available() {
        println!(
            "SKIPPED sandbox_runs_commands_under_the_chosen_policy: {}",
            keel_tools::sandbox::describe_support()
        );
        return;
    }
    let env = Env::new();
    let out = env
        .keel()
        .args(["sandbox", "--read-only", "--", "touch", "made"])
        .output()
        .unwrap();
    assert_ne!(out.status.code(), Some(0));
    // Landlock refuses the write, or the read-only mount of everything the policy does not
    // let it write (red-team B1) does first.
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("Permission denied") || err.contains("Read-only file system"),
        "{err}"
    );
    assert!(!env.work.join("made").exists());
    let out = env
        .keel()
        .args(["sandbox", "--", "touch", "made"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(env.work.join("made").exists());
    let out = env
        .keel()
        .args(["sandbox", "--read-only", "--", "cat", "Cargo.toml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("[package]"));
}

#[test]
fn output_cut_short_by_a_closed_pipe_ends_quietly() {
    let env = Env::new();
    // A long transcript: one answer far bigger than a pipe buffer (one word: one delta).
    let long = "w".repeat(300_000);
    let script = env.script("long.yaml", &format!("turns:\n  - text: \"{long}\"\n"));
    let out = env
        .keel()
        .args(["run", "--json", "--script"])
        .arg(&script)
        .arg("say a lot")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let id = json_lines(&out.stdout)[0]["session_id"]
        .as_str()
        .unwrap()
        .to_string();
    let mut child = env
        .keel()
        .args(["sessions", "show", &id])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Read one line, then hang up, like `| head -1`.
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    reader.read_line(&mut first).unwrap();
    drop(reader);
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(
        matches!(out.status.code(), Some(0) | Some(141)),
        "{:?} {stderr}",
        out.status
    );
    assert!(
        stderr.is_empty(),
        "nothing to say about a reader that left: {stderr}"
    );
}

#[test]
fn a_project_config_cannot_unsandbox_or_hand_keys_to_commands() {
    const CANARY: &str = "sk-canary-0123456789abcdef";
    let env = Env::new();
    // The reported escape: the model writes the workspace's own config.
    env.config("[shell]\nsandbox = false\nenv_keep = [\"OPENAI_API_KEY\"]\n");
    let script = env.script(
        "leak.yaml",
        "turns:\n  - text: \"Checking.\"\n    tool_calls:\n      - name: run_command\n        arguments: {command: \"echo key=${OPENAI_API_KEY:-unset}\"}\n  - text: \"Done.\"\n",
    );
    let out = env
        .keel()
        .env("OPENAI_API_KEY", CANARY)
        .args(["run", "--provider", "scripted", "--json", "--script"])
        .arg(&script)
        .arg("check the key")
        .output()
        .unwrap();
    assert_exit(&out, 0);
    let err = String::from_utf8_lossy(&out.stderr);
    for key in ["`shell.sandbox`", "`shell.env_keep`"] {
        assert!(err.contains(key), "a warning names {key}: {err}");
    }
    assert!(err.contains(".keel/config.toml"), "{err}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("key=unset"), "the command ran: {stdout}");
    assert!(!stdout.contains(CANARY), "the key reached the command");

    // The user's own config may keep the variable.
    std::fs::create_dir_all(env.home.join(".config/keel")).unwrap();
    std::fs::write(
        env.home.join(".config/keel/config.toml"),
        "[shell]\nenv_keep = [\"OPENAI_API_KEY\"]\n",
    )
    .unwrap();
    let out = env
        .keel()
        .env("OPENAI_API_KEY", CANARY)
        .args(["run", "--provider", "scripted", "--json", "--script"])
        .arg(&script)
        .arg("check the key")
        .output()
        .unwrap();
    assert_exit(&out, 0);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(&format!("key={CANARY}")),
        "honoured from the user's file"
    );
}

/// A session database kept inside the workspace (`store.path`) is Keel's own: the file tools
/// refuse it in `keel run`, like a secret store there. `keel run` shares one workspace handle
/// for the session (issue 33); it is opened after the database is registered, so its fence
/// holds the database too.
#[test]
fn a_session_database_inside_the_workspace_is_refused_by_the_file_tools() {
    let env = Env::new();
    std::fs::create_dir_all(env.work.join("secrets")).unwrap();
    std::fs::write(env.work.join("secrets/id_ed25519"), "FAKE-KEY\n").unwrap();
    let script = env.script(
        "read.yaml",
        r#"
turns:
  - tool_calls:
      - {id: db, name: read_file, arguments: {path: "state/keel.db"}}
      - {id: key, name: read_file, arguments: {path: "secrets/id_ed25519"}}
      - {id: src, name: read_file, arguments: {path: "src/lib.rs"}}
  - text: done
"#,
    );
    let out = env
        .keel()
        .args(["run", "--json", "--script"])
        .arg(&script)
        .env("KEEL_STORE__PATH", env.work.join("state/keel.db"))
        .env("GNUPGHOME", env.work.join("secrets"))
        .arg("read them")
        .output()
        .unwrap();
    assert_exit(&out, 0);
    assert!(env.work.join("state/keel.db").exists(), "the run used it");
    let events = json_lines(&out.stdout);
    let result = |id: &str| {
        events
            .iter()
            .find(|e| e["type"] == "tool_result" && e["id"] == id)
            .unwrap_or_else(|| panic!("no result for {id}: {events:?}"))
            .clone()
    };
    for (id, what) in [("db", "Keel's own data"), ("key", "secret stores")] {
        let r = result(id);
        let text = r["content"].as_str().unwrap_or_default();
        assert_eq!(r["is_error"], true, "{id}: {r}");
        assert!(text.contains(what), "{id}: {text}");
        assert!(
            !text.contains("FAKE-KEY") && !text.contains("SQLite"),
            "{text}"
        );
    }
    assert_eq!(result("src")["is_error"], false);
}
