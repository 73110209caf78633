//! `keel run --mode plan_exec`, `keel undo` and `keel snapshots` end to end: the real binary,
//! a temp workspace, a temp data directory.

// Tests start programs of their own (the keel binary, git fixtures, tmux, servers): allowed
// here, outside Keel's one spawn path (docs/SECURITY.md, "One way to start a process").
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

mod common;
use common::*;

fn ok(out: &Output) {
    assert_exit(out, 0);
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-c",
            "commit.gpgSign=false",
        ])
        .args(args)
        .current_dir(dir)
        .output()
        .expect("git must be installed for these tests (CI installs it)");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn the_plan_exec_demo_shows_the_whole_lifecycle_in_json() {
    let env = Env::new();
    let out = env
        .keel_with_toolchain()
        .args(["run", "--mode", "plan_exec", "--json", "--script"])
        .arg(repo_root().join("examples/plan_exec.yaml"))
        .arg("add tests for the demo library")
        .output()
        .unwrap();
    ok(&out);
    let events = json_lines(&out.stdout);
    let of = |t: &str| -> Vec<&Value> { events.iter().filter(|e| e["type"] == t).collect() };

    assert_eq!(events[0]["mode"], "plan_exec");
    assert_eq!(events[0]["phase"], "planning");
    let changes: Vec<(String, String)> = of("phase_changed")
        .iter()
        .map(|e| {
            (
                e["previous"].as_str().unwrap().to_string(),
                e["phase"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        changes,
        [
            ("planning".to_string(), "building".to_string()),
            ("building".into(), "verification".into()),
            ("verification".into(), "delivery".into()),
        ]
    );
    let violations = of("phase_violation");
    assert_eq!(violations.len(), 1);
    assert_eq!(violations[0]["tool"], "create_file");
    assert_eq!(violations[0]["phase"], "planning");

    // The early write never ran; the building one did; the tests ran in verification.
    let created = std::fs::read_to_string(env.work.join("tests/arith.rs")).unwrap();
    assert!(created.contains("assert_eq!(mul(4, 5), 20);"), "{created}");
    let tests = of("tool_result")
        .into_iter()
        .find(|e| e["name"] == "run_tests")
        .unwrap();
    assert_eq!(tests["is_error"], false, "{tests}");
    assert!(
        tests["content"].as_str().unwrap().contains("2 passed"),
        "{tests}"
    );
    assert_eq!(events.last().unwrap()["type"], "turn_finished");
    let last = &events[events.len() - 2];
    assert_eq!(last["type"], "session_finished");
    assert_eq!(last["status"], "completed");
    assert_eq!(last["iterations"], 8);
}

#[test]
fn a_resumed_plan_exec_session_keeps_its_mode() {
    let env = Env::new();
    let script = env.script(
        "s.yaml",
        "turns:\n  - tool_calls: [{name: list_files, arguments: {}}]\n  - tool_calls: [{name: advance_phase, arguments: {summary: \"plan: write x.txt with one line\"}}]\n  - text: paused\n  - text: paused\n",
    );
    let resumed = env.script(
        "r.yaml",
        "turns:\n  - tool_calls: [{name: create_file, arguments: {path: x.txt, content: \"x\\n\"}}]\n  - text: done\n  - text: done\n",
    );
    let first = env
        .keel_with_toolchain()
        .args(["run", "--mode", "plan_exec", "--json", "--script"])
        .arg(&script)
        .arg("t")
        .output()
        .unwrap();
    ok(&first);
    let id = json_lines(&first.stdout)[0]["session_id"]
        .as_str()
        .unwrap()
        .to_string();
    let again = env
        .keel_with_toolchain()
        .args(["run", "--json", "--script"])
        .arg(&resumed)
        .args(["--resume", &id, "go on"])
        .output()
        .unwrap();
    ok(&again);
    let events = json_lines(&again.stdout);
    assert!(events.iter().all(|e| e["type"] != "phase_violation"));
    assert!(env.work.join("x.txt").exists(), "still in building");
}

/// Every file under `root` except `.git` and `.keel`: path → (bytes, executable).
fn tree(root: &Path) -> BTreeMap<String, (Vec<u8>, bool)> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, (Vec<u8>, bool)>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let path = e.unwrap().path();
            let rel = path
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            if rel == ".git" || rel == ".keel" {
                continue;
            }
            let meta = std::fs::symlink_metadata(&path).unwrap();
            if meta.is_dir() {
                out.insert(format!("{rel}/"), (Vec::new(), false));
                walk(root, &path, out);
            } else {
                use std::os::unix::fs::PermissionsExt;
                let exec = meta.permissions().mode() & 0o111 != 0;
                out.insert(rel, (std::fs::read(&path).unwrap(), exec));
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
}

const CHANGES: &str = r#"
turns:
  - tool_calls:
      - {name: create_file, arguments: {path: "new/notes.md", content: "notes\n"}}
  - tool_calls:
      - {name: read_file, arguments: {path: "src/lib.rs"}}
  - tool_calls:
      - name: edit_file
        arguments: {path: "src/lib.rs", edits: [{search: "a + b", replace: "a + b + 0"}]}
  - tool_calls:
      - {name: run_command, arguments: {command: "chmod +x Cargo.toml && rm README.md"}}
  - text: "Done."
"#;

#[test]
fn undo_to_turn_zero_restores_the_exact_tree_and_leaves_git_alone() {
    let env = Env::new();
    git(&env.work, &["init", "-q", "-b", "main"]);
    git(&env.work, &["add", "."]);
    git(&env.work, &["commit", "-qm", "demo"]);
    // Work in progress the user has staged: the undo must not touch the index.
    std::fs::write(env.work.join("README.md"), "# demo, staged edit\n").unwrap();
    git(&env.work, &["add", "README.md"]);
    let index = std::fs::read(env.work.join(".git/index")).unwrap();
    let head = git(&env.work, &["rev-parse", "HEAD"]);
    let before = tree(&env.work);

    let script = env.script("changes.yaml", CHANGES);
    let out = env
        .keel_with_toolchain()
        .args(["run", "--json", "--script"])
        .arg(&script)
        .arg("change things")
        .output()
        .unwrap();
    ok(&out);
    let events = json_lines(&out.stdout);
    let id = events[0]["session_id"].as_str().unwrap().to_string();
    let snaps: Vec<u64> = events
        .iter()
        .filter(|e| e["type"] == "snapshot")
        .map(|e| e["turn"].as_u64().unwrap())
        .collect();
    // Turn 2 only read: no snapshot before it; the others wrote.
    assert_eq!(snaps, [0, 2, 3], "one snapshot before each writing turn");
    assert!(
        std::fs::read_to_string(env.work.join("src/lib.rs"))
            .unwrap()
            .contains("a + b + 0")
    );
    assert!(!env.work.join("README.md").exists());
    assert_ne!(tree(&env.work), before);

    let listing = env
        .keel_with_toolchain()
        .args(["snapshots"])
        .output()
        .unwrap();
    ok(&listing);
    let listing = String::from_utf8_lossy(&listing.stdout);
    assert!(listing.contains(&id), "{listing}");
    assert_eq!(listing.matches(&id).count(), 3, "{listing}");

    let undo = env
        .keel_with_toolchain()
        .args(["undo", "--to", "0"])
        .output()
        .unwrap();
    ok(&undo);
    let report = String::from_utf8_lossy(&undo.stdout);
    assert!(report.contains("end of turn 0"), "{report}");
    assert!(report.contains("modified   Cargo.toml"), "{report}");
    assert!(report.contains("modified   src/lib.rs"), "{report}");
    assert!(report.contains("recreated  README.md"), "{report}");
    assert!(report.contains("removed    new/notes.md"), "{report}");

    assert_eq!(tree(&env.work), before, "the exact original tree");
    assert_eq!(std::fs::read(env.work.join(".git/index")).unwrap(), index);
    assert_eq!(git(&env.work, &["rev-parse", "HEAD"]), head);
    assert_eq!(git(&env.work, &["symbolic-ref", "HEAD"]), "refs/heads/main");

    // Nothing left to undo at turn 0; the undo is in the session log.
    let again = env
        .keel_with_toolchain()
        .args(["undo", "--session", &id, "--to", "0", "--json"])
        .output()
        .unwrap();
    ok(&again);
    let json: Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(json["changes"]["removed"], serde_json::json!([]));
    let log = env
        .keel_with_toolchain()
        .args(["sessions", "show", &id, "--json"])
        .output()
        .unwrap();
    let log = json_lines(&log.stdout);
    let undos: Vec<&Value> = log.iter().filter(|e| e["type"] == "undo").collect();
    assert_eq!(undos.len(), 2);
    assert_eq!(undos[0]["removed"], serde_json::json!(["new/notes.md"]));

    // Past the last snapshot there is nothing to undo: a usage error.
    let none = env
        .keel_with_toolchain()
        .args(["undo", "--to", "9"])
        .output()
        .unwrap();
    assert_eq!(none.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&none.stderr).contains("changed no files after turn 9"));
}

#[test]
fn without_git_the_run_goes_on_and_says_undo_is_unavailable() {
    let env = Env::new();
    let script = env.script(
        "w.yaml",
        "turns:\n  - tool_calls: [{name: create_file, arguments: {path: a.txt, content: \"a\\n\"}}]\n  - tool_calls: [{name: create_file, arguments: {path: b.txt, content: \"b\\n\"}}]\n  - text: done\n",
    );
    let empty = env.home.join("empty-path");
    std::fs::create_dir_all(&empty).unwrap();
    let out = env
        .keel_with_toolchain()
        .env("PATH", &empty)
        .args(["run", "--json", "--script"])
        .arg(&script)
        .arg("t")
        .output()
        .unwrap();
    ok(&out);
    let events = json_lines(&out.stdout);
    let failed: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "snapshot_failed")
        .collect();
    assert_eq!(failed.len(), 1, "reported once, then snapshots stay off");
    assert!(
        failed[0]["message"]
            .as_str()
            .unwrap()
            .contains("git is not installed"),
        "{}",
        failed[0]
    );
    assert!(env.work.join("a.txt").exists() && env.work.join("b.txt").exists());
    assert_eq!(events.last().unwrap()["status"], "completed");
}

/// A one-turn script writing `path` with `content`.
fn writes(path: &str, content: &str) -> String {
    format!(
        "turns:\n  - text: \"Writing.\"\n    tool_calls:\n      - name: create_file\n        arguments: {{path: \"{path}\", content: \"{content}\\n\"}}\n  - text: \"Done.\"\n"
    )
}

#[test]
fn repeated_undo_walks_back_three_writing_turns_and_redo_walks_forward() {
    let env = Env::new();
    git(&env.work, &["init", "-q", "-b", "main"]);
    git(&env.work, &["add", "."]);
    git(&env.work, &["commit", "-qm", "demo"]);
    let mut trees = vec![tree(&env.work)];
    let mut snapshot_numbers = Vec::new();
    let mut id = String::new();
    for (n, content) in ["one", "two", "three"].iter().enumerate() {
        let script = env.script(
            &format!("w{n}.yaml"),
            &writes(&format!("notes/{content}.txt"), content),
        );
        let mut cmd = env.keel_with_toolchain();
        cmd.args(["run", "--json", "--script"]).arg(&script);
        if n > 0 {
            cmd.args(["--resume", &id]);
        }
        let out = cmd.arg(format!("write {content}")).output().unwrap();
        ok(&out);
        let events = json_lines(&out.stdout);
        id = events[0]["session_id"].as_str().unwrap().to_string();
        snapshot_numbers.extend(
            events
                .iter()
                .filter(|e| e["type"] == "snapshot")
                .map(|e| e["turn"].as_u64().unwrap()),
        );
        trees.push(tree(&env.work));
    }
    assert_eq!(snapshot_numbers.len(), 3, "one snapshot per writing turn");
    for pair in trees.windows(2) {
        assert_ne!(pair[0], pair[1], "each turn wrote");
    }

    // `keel undo --list` shows the numbers the events carry.
    let listed = env
        .keel_with_toolchain()
        .args(["undo", "--list", "--json"])
        .output()
        .unwrap();
    ok(&listed);
    let listed: Value = serde_json::from_slice(&listed.stdout).unwrap();
    let numbers: Vec<u64> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["turn"].as_u64().unwrap())
        .collect();
    assert_eq!(numbers, snapshot_numbers);
    assert_eq!(listed[2]["next_undo"], true, "{listed:#}");

    for back in (0..3).rev() {
        let out = env.keel_with_toolchain().args(["undo"]).output().unwrap();
        ok(&out);
        assert_eq!(
            tree(&env.work),
            trees[back],
            "undo {} restores the tree before writing turn {}",
            3 - back,
            back + 1
        );
    }
    let out = env.keel_with_toolchain().args(["undo"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "nothing older");
    assert!(String::from_utf8_lossy(&out.stderr).contains("first snapshot"));

    let out = env
        .keel_with_toolchain()
        .args(["undo", "--redo"])
        .output()
        .unwrap();
    ok(&out);
    assert_eq!(
        tree(&env.work),
        trees[1],
        "redo brings back the last undone turn"
    );
    let to = snapshot_numbers[2].to_string();
    let out = env
        .keel_with_toolchain()
        .args(["undo", "--to", &to])
        .output()
        .unwrap();
    ok(&out);
    assert_eq!(tree(&env.work), trees[2], "--to takes the listed number");
}
