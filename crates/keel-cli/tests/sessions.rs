//! `keel sessions` as a user with several workspaces sees it: this workspace's sessions by
//! default with workspace, title, status, model, cost and age; `--all` for every workspace;
//! `rm` and `prune` delete sessions together with their snapshot refs.

// Tests start programs of their own (the keel binary, git fixtures, tmux, servers): allowed
// here, outside Keel's one spawn path (docs/SECURITY.md, "One way to start a process").
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use std::path::Path;
use std::process::Output;

use serde_json::Value;

mod common;
use common::*;

fn text(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Runs the demo script in `workspace`; returns the session id.
fn demo_run(env: &Env, workspace: &Path, task: &str) -> String {
    let out = env
        .keel()
        .args(["run", "--json", "--provider", "scripted", "--script"])
        .arg(repo_root().join("examples/demo.yaml"))
        .arg("-w")
        .arg(workspace)
        .arg(task)
        .output()
        .unwrap();
    assert_exit(&out, 0);
    json_lines(&out.stdout)[0]["session_id"]
        .as_str()
        .unwrap()
        .to_string()
}

fn snapshot_sessions(env: &Env, workspace: &Path) -> Vec<String> {
    let out = env
        .keel()
        .args(["snapshots", "--json", "-w"])
        .arg(workspace)
        .output()
        .unwrap();
    assert_exit(&out, 0);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut ids: Vec<String> = v
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["session"].as_str().map(str::to_string))
        .collect();
    ids.dedup();
    ids
}

#[test]
fn sessions_are_listed_per_workspace_and_removed_with_their_snapshots() {
    assert!(
        std::process::Command::new("git")
            .arg("--version")
            .output()
            .is_ok(),
        "this test needs git on PATH (CI installs it)"
    );
    let env = Env::new();
    let other = env.home.join("other");
    copy_dir(&repo_root().join("examples/demo-repo"), &other);
    let here = demo_run(
        &env,
        &env.work,
        "add tests for the demo library\nmore detail",
    );
    let there = demo_run(&env, &other, "a task in the other workspace");

    // Default: this workspace only, full ids, the task's first line as the title.
    let out = env.keel().arg("sessions").output().unwrap();
    assert_exit(&out, 0);
    let listed = text(&out);
    assert!(
        listed.contains(&here) && !listed.contains(&there),
        "{listed}"
    );
    let header = listed.lines().next().unwrap();
    for column in ["ID", "STATUS", "MODEL", "COST", "AGE", "TITLE"] {
        assert!(header.contains(column), "{header}");
    }
    assert!(!header.contains("WORKSPACE"));
    let row = listed.lines().nth(1).unwrap();
    assert!(
        row.contains("completed") && row.contains("scripted/"),
        "{row}"
    );
    assert!(row.ends_with("add tests for the demo library"), "{row}");
    assert!(listed.contains(&format!("latest: {here}")), "{listed}");

    // --all: both, with the workspace column.
    let out = env.keel().args(["sessions", "--all"]).output().unwrap();
    let listed = text(&out);
    assert!(
        listed.contains(&here) && listed.contains(&there),
        "{listed}"
    );
    assert!(listed.lines().next().unwrap().contains("WORKSPACE"));
    assert!(listed.contains("other"), "{listed}");

    // rm by a unique prefix: the session and its snapshot refs go; the other stays.
    assert_eq!(snapshot_sessions(&env, &env.work), vec![here.clone()]);
    let out = env
        .keel()
        .args(["sessions", "rm", &here[..here.len() - 2]])
        .output()
        .unwrap();
    assert_exit(&out, 0);
    assert!(
        text(&out).contains(&format!("removed {here} and")),
        "{}",
        text(&out)
    );
    assert!(snapshot_sessions(&env, &env.work).is_empty());
    let out = env
        .keel()
        .args(["sessions", "show", &here])
        .output()
        .unwrap();
    assert_exit(&out, 2);
    let out = env
        .keel()
        .args(["sessions", "rm", "no-such-id"])
        .output()
        .unwrap();
    assert_exit(&out, 2);

    // prune: --dry-run deletes nothing; scoped to the workspace given; then it deletes.
    let out = env
        .keel()
        .args(["sessions", "prune", "--older-than", "0s", "--dry-run", "-w"])
        .arg(&other)
        .output()
        .unwrap();
    assert_exit(&out, 0);
    assert!(
        text(&out).contains(&format!("would remove {there}")),
        "{}",
        text(&out)
    );
    assert_eq!(snapshot_sessions(&env, &other), vec![there.clone()]);
    let out = env
        .keel()
        .args(["sessions", "prune", "--older-than", "30d", "--all"])
        .output()
        .unwrap();
    assert!(
        text(&out).contains("No sessions older than 30d"),
        "{}",
        text(&out)
    );
    let out = env
        .keel()
        .args(["sessions", "prune", "--older-than", "0s", "--all"])
        .output()
        .unwrap();
    assert_exit(&out, 0);
    assert!(
        text(&out).contains("removed 1 session older than"),
        "{}",
        text(&out)
    );
    assert!(snapshot_sessions(&env, &other).is_empty());
    let out = env
        .keel()
        .args(["sessions", "prune", "--older-than", "30 days"])
        .output()
        .unwrap();
    assert_exit(&out, 2);
}

/// A transcript shows what the user said: the task, the answer to a blocker and a follow-up
/// message (none of them is an event of its own).
#[test]
fn show_includes_the_users_messages_and_blocker_answers() {
    let env = Env::new();
    let script = env.script(
        "ask.yaml",
        "turns:\n  - tool_calls:\n      - name: ask_user\n        arguments: {question: \"Which greeting, formal or casual?\"}\n  - text: \"Casual it is.\"\n",
    );
    let out = env
        .keel()
        .args(["run", "--json", "--script"])
        .arg(&script)
        .arg("write a greeting")
        .output()
        .unwrap();
    assert_exit(&out, 3);
    let id = json_lines(&out.stdout)[0]["session_id"]
        .as_str()
        .unwrap()
        .to_string();
    let blockers = env
        .keel()
        .args(["blocker", "list", "--json"])
        .output()
        .unwrap();
    let blockers: Value = serde_json::from_slice(&blockers.stdout).unwrap();
    let blk = blockers[0]["id"].as_str().unwrap().to_string();
    let out = env
        .keel()
        .args(["blocker", "answer", &blk, "casual, please"])
        .output()
        .unwrap();
    assert_exit(&out, 0);
    let out = env
        .keel()
        .args(["run", "--resume", &id, "and keep it short"])
        .output()
        .unwrap();
    assert_exit(&out, 0);
    let shown = text(&env.keel().args(["sessions", "show", &id]).output().unwrap());
    assert!(shown.contains("> you: write a greeting"), "{shown}");
    assert!(
        shown.contains("Which greeting, formal or casual?")
            && shown.contains("> you (answer): casual, please"),
        "{shown}"
    );
    assert!(shown.contains("> you: and keep it short"), "{shown}");
}
