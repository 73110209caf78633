//! `keel eval` end to end with the scripted provider: a 3-task suite (one check fails) →
//! 2/3 with per-task numbers; a second run with a fixed script → `compare` shows the change;
//! `promote` stores nothing without `--accept` and a rule with provenance with it; a task
//! cloned from a local bare git repository at a commit.

// Tests start programs of their own (the keel binary, git fixtures, tmux, servers): allowed
// here, outside Keel's one spawn path (docs/SECURITY.md, "One way to start a process").
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

mod common;

use std::path::Path;
use std::process::{Command, Output};

use common::*;
use serde_json::Value;

fn run(env: &Env, args: &[&str]) -> Output {
    env.keel().args(args).output().unwrap()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// A script whose one tool call creates `path` with `content`.
fn create_script(path: &str, content: &str) -> String {
    format!(
        "turns:\n  - text: \"Creating {path}.\"\n    tool_calls:\n      - name: create_file\n        arguments:\n          path: \"{path}\"\n          content: \"{content}\"\n  - text: \"Done.\"\n"
    )
}

/// The suite under `dir`: three tasks on one fixture; `c`'s script writes the wrong text.
fn suite(dir: &Path) -> std::path::PathBuf {
    write(&dir.join("fixture/README.md"), "# fixture\n");
    write(
        &dir.join("scripts/a.yaml"),
        &create_script("a.txt", "alpha"),
    );
    write(&dir.join("scripts/b.yaml"), &create_script("b.txt", "beta"));
    write(
        &dir.join("scripts/c.yaml"),
        &create_script("c.txt", "wrong"),
    );
    let suite = dir.join("suite.toml");
    write(
        &suite,
        r#"name = "trio"
max_steps = 5

[[task]]
id = "a"
repo = "fixture"
task = "Create a.txt holding alpha."
check = "grep -qx alpha a.txt && test -f README.md"
script = "scripts/a.yaml"

[[task]]
id = "b"
repo = "fixture"
task = "Create b.txt holding beta."
check = "grep -qx beta b.txt"
script = "scripts/b.yaml"

[[task]]
id = "c"
repo = "fixture"
task = "Create c.txt holding gamma."
check = "echo \"c.txt says: $(cat c.txt)\"; grep -qx gamma c.txt"
script = "scripts/c.yaml"
"#,
    );
    suite
}

#[test]
fn a_suite_runs_compares_and_promotes() {
    let env = Env::with_repo(tempfile::tempdir().unwrap().path());
    let dir = env.home.join("suite");
    let suite = suite(&dir);
    let suite = suite.to_str().unwrap();

    // Run 1: 2/3, failures first with the check's output and the session to inspect.
    let out = run(&env, &["eval", suite, "-j", "2"]);
    assert_exit(&out, 1);
    let report = stdout(&out);
    assert!(report.contains("Eval run #1 · suite trio"), "{report}");
    assert!(report.contains("2/3 passed (67%)"), "{report}");
    assert!(report.contains("c.txt says: wrong"), "{report}");
    assert!(report.contains("inspect: keel sessions show "), "{report}");
    let failed_at = report.find("\nc ").unwrap();
    let passed_at = report.find("\na ").unwrap();
    assert!(failed_at < passed_at, "failures come first:\n{report}");

    let show = run(&env, &["eval", "show", "1", "--json"]);
    assert_exit(&show, 0);
    let first: Value = serde_json::from_str(&stdout(&show)).unwrap();
    let results = first["results"].as_array().unwrap();
    let ids: Vec<&str> = results.iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["a", "b", "c"]);
    let passed: Vec<bool> = results
        .iter()
        .map(|r| r["success"].as_bool().unwrap())
        .collect();
    assert_eq!(passed, [true, true, false]);
    for r in results {
        assert_eq!(r["steps"], 2, "{r}");
        assert!(r["input_tokens"].as_u64().unwrap() > 0, "{r}");
        assert!(r["output_tokens"].as_u64().unwrap() > 0, "{r}");
        assert_eq!(r["status"], "completed");
    }
    assert_eq!(results[2]["check_exit"], 1);
    assert_eq!(first["provider"], "scripted");

    // Each task was a stored session.
    let sessions = stdout(&run(&env, &["sessions", "--all", "--json"]));
    for r in results {
        assert!(
            sessions.contains(r["session_id"].as_str().unwrap()),
            "{sessions}"
        );
    }

    // Run 2 with a fixed script for `c`.
    write(
        &dir.join("scripts/c.yaml"),
        &create_script("c.txt", "gamma"),
    );
    let out = run(&env, &["eval", suite, "--json"]);
    assert_exit(&out, 0);
    let second: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(second["id"], 2);

    let runs = stdout(&run(&env, &["eval", "runs"]));
    assert!(runs.contains("#2") && runs.contains("3/3"), "{runs}");
    assert!(runs.contains("#1") && runs.contains("2/3"), "{runs}");

    let out = run(&env, &["eval", "compare", "1", "2"]);
    assert_exit(&out, 0);
    let cmp = stdout(&out);
    assert!(cmp.contains("fixed in B"), "{cmp}");
    assert!(
        cmp.contains("2/3 (67%)") && cmp.contains("3/3 (100%)"),
        "{cmp}"
    );
    assert!(cmp.contains("exact McNemar"), "{cmp}");
    assert!(cmp.contains("p = 1.0000"), "{cmp}");
    assert!(cmp.contains("Mean per task, B − A: steps +0.0"), "{cmp}");
    let json: Value = serde_json::from_str(&stdout(&run(
        &env,
        &["eval", "compare", "1", "2", "--json"],
    )))
    .unwrap();
    assert_eq!(
        (json["fixed"].as_u64(), json["broken"].as_u64()),
        (Some(1), Some(0))
    );

    // Promote: the scripted model drafts a rule from task a's trace.
    let draft = env.script(
        "draft.yaml",
        "turns:\n  - text: '{\"name\": \"Text Files\", \"description\": \"d\", \"body\": \"- Create files with create_file.\"}'\n",
    );
    let draft = draft.to_str().unwrap();
    let rules = env.work.join(".keel/rules");
    let out = run(
        &env,
        &[
            "eval", "promote", "1", "--task", "a", "--as", "rule", "--script", draft,
        ],
    );
    assert_exit(&out, 0);
    let text = stdout(&out);
    assert!(
        text.contains("Draft rule for .keel/rules/text-files.md"),
        "{text}"
    );
    assert!(text.contains("Nothing stored"), "{text}");
    assert!(!rules.exists(), "nothing is stored without --accept");

    // A failed task is refused.
    let out = run(
        &env,
        &[
            "eval", "promote", "1", "--task", "c", "--as", "rule", "--script", draft,
        ],
    );
    assert_exit(&out, 2);
    assert!(String::from_utf8_lossy(&out.stderr).contains("failed its check"));

    let out = run(
        &env,
        &[
            "eval", "promote", "1", "--task", "a", "--as", "rule", "--script", draft, "--accept",
        ],
    );
    assert_exit(&out, 0);
    let rule = std::fs::read_to_string(rules.join("text-files.md")).unwrap();
    let session = results[0]["session_id"].as_str().unwrap();
    assert!(
        rule.contains(&format!(
            "promoted_from: keel eval run #1 task a session {session}"
        )),
        "{rule}"
    );
    assert!(rule.contains("- Create files with create_file."), "{rule}");

    // A lesson goes through the memory overlay with the same provenance.
    let out = run(
        &env,
        &[
            "eval", "promote", "1", "--task", "a", "--as", "memory", "--script", draft, "--accept",
        ],
    );
    assert_exit(&out, 0);
    let lessons = stdout(&run(
        &env,
        &["memory", "list", "--kind", "lesson", "--json"],
    ));
    assert!(lessons.contains("keel eval run #1 task a"), "{lessons}");
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .current_dir(dir)
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-c",
            "init.defaultBranch=main",
        ])
        .args(args)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn a_task_can_come_from_a_local_bare_repository_at_a_commit() {
    let env = Env::with_repo(tempfile::tempdir().unwrap().path());
    let dir = env.home.join("suite");
    let src = dir.join("src");
    write(&src.join("VERSION"), "1\n");
    git(&src, &["init", "-q"]);
    git(&src, &["add", "."]);
    git(&src, &["commit", "-qm", "one"]);
    let first = git(&src, &["rev-parse", "HEAD"]);
    write(&src.join("VERSION"), "2\n");
    git(&src, &["commit", "-qam", "two"]);
    git(&dir, &["clone", "-q", "--bare", "src", "repo.git"]);
    write(&dir.join("s.yaml"), &create_script("done.txt", "yes"));
    let suite = dir.join("git.toml");
    write(
        &suite,
        &format!(
            "[[task]]\nid = \"from-git\"\ngit = \"repo.git\"\ncommit = \"{first}\"\ntask = \"Write done.txt.\"\ncheck = \"grep -qx 1 VERSION && grep -qx yes done.txt\"\nscript = \"s.yaml\"\n"
        ),
    );
    let out = run(&env, &["eval", suite.to_str().unwrap()]);
    assert_exit(&out, 0);
    assert!(stdout(&out).contains("1/1 passed"), "{}", stdout(&out));

    // A commit that does not exist fails that task with git's reason.
    std::fs::write(
        &suite,
        "[[task]]\nid = \"bad\"\ngit = \"repo.git\"\ncommit = \"0123456789abcdef0123456789abcdef01234567\"\ntask = \"x\"\ncheck = \"true\"\nscript = \"s.yaml\"\n",
    )
    .unwrap();
    let out = run(&env, &["eval", suite.to_str().unwrap()]);
    assert_exit(&out, 1);
    let report = stdout(&out);
    assert!(
        report.contains("why: workspace: git could not check out"),
        "{report}"
    );
}

#[test]
fn the_shipped_example_suite_runs() {
    let env = Env::with_repo(tempfile::tempdir().unwrap().path());
    let out = env
        .keel()
        .current_dir(repo_root())
        .args(["eval", "examples/eval/suite.toml", "-j", "3"])
        .output()
        .unwrap();
    assert_exit(&out, 1);
    let report = stdout(&out);
    assert!(report.contains("2/3 passed"), "{report}");
    assert!(report.contains("got: Hi, Bo!"), "{report}");
}

#[test]
fn suite_mistakes_are_usage_errors() {
    let env = Env::with_repo(tempfile::tempdir().unwrap().path());
    let suite = env.home.join("bad.toml");
    std::fs::write(
        &suite,
        "[[task]]\nid = \"x\"\ntask = \"t\"\ncheck = \"true\"\n",
    )
    .unwrap();
    let out = run(&env, &["eval", suite.to_str().unwrap()]);
    assert_exit(&out, 2);
    assert!(String::from_utf8_lossy(&out.stderr).contains("say where the repository comes from"));
    let out = run(&env, &["eval", "show", "9"]);
    assert_exit(&out, 2);
    assert!(String::from_utf8_lossy(&out.stderr).contains("no eval run #9"));
}

#[test]
fn the_step_cap_stops_a_task_and_keep_leaves_its_workspace() {
    let env = Env::with_repo(tempfile::tempdir().unwrap().path());
    let dir = env.home.join("suite");
    write(&dir.join("fixture/README.md"), "# fixture\n");
    write(&dir.join("s.yaml"), &create_script("x.txt", "x"));
    let suite = dir.join("cap.toml");
    write(
        &suite,
        "[[task]]\nid = \"capped\"\nrepo = \"fixture\"\ntask = \"Write x.txt.\"\ncheck = \"test -f x.txt && test -f README.md\"\nscript = \"s.yaml\"\nmax_steps = 1\n",
    );
    let out = run(&env, &["eval", suite.to_str().unwrap(), "--keep", "--json"]);
    assert_exit(&out, 0);
    let record: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let r = &record["results"][0];
    // The cap ends the run early (the engine reports it as max_steps or blocked on it).
    assert_ne!(r["status"], "completed", "{r}");
    assert_eq!(r["steps"], 1, "{r}");
    // The one step created the file, so the check itself passes: success is the check's.
    assert_eq!(r["success"], true, "{r}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let kept = stderr
        .lines()
        .find_map(|l| l.strip_prefix("keel: task workspaces kept in "))
        .unwrap();
    assert!(Path::new(kept).join("capped/x.txt").exists(), "{stderr}");
    std::fs::remove_dir_all(kept).unwrap();
}

/// Every file's text under `dir`, following symlinks (as a command in the task would).
fn all_text_under(dir: &Path) -> String {
    let mut out = String::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.push_str(&all_text_under(&p));
        } else {
            out.push_str(&std::fs::read_to_string(&p).unwrap_or_default());
        }
    }
    out
}

#[test]
fn a_suite_cannot_copy_the_users_ssh_keys_into_a_task_workspace() {
    let env = Env::with_repo(tempfile::tempdir().unwrap().path());
    // A fake HOME with a fake key; the suite ships with the (hostile) repository.
    let ssh = env.home.join(".ssh");
    write(
        &ssh.join("id_ed25519"),
        "-----BEGIN OPENSSH PRIVATE KEY-----\nFAKE-KEY-0451\n",
    );
    let dir = env.work.join("evals");
    write(
        &dir.join("scripts/a.yaml"),
        &create_script("a.txt", "alpha"),
    );
    write(&dir.join("fx/README.md"), "# fixture\n");
    std::os::unix::fs::symlink(ssh.join("id_ed25519"), dir.join("fx/key")).unwrap();
    std::os::unix::fs::symlink(&ssh, dir.join("keys")).unwrap();
    let tmp = env.home.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let ssh_abs = ssh.display().to_string();
    for repo in [ssh_abs.as_str(), "../../home/.ssh", "keys", "fx"] {
        let suite = dir.join("suite.toml");
        write(
            &suite,
            &format!(
                "[[task]]\nid = \"a\"\nrepo = \"{repo}\"\ntask = \"Create a.txt.\"\ncheck = \"true\"\nscript = \"scripts/a.yaml\"\n"
            ),
        );
        let out = env
            .keel()
            .env("TMPDIR", &tmp)
            .args(["eval", suite.to_str().unwrap(), "--keep"])
            .output()
            .unwrap();
        let text = format!("{}{}", stdout(&out), String::from_utf8_lossy(&out.stderr));
        assert!(!out.status.success(), "{repo}: the suite ran:\n{text}");
        assert!(
            text.contains("own fixtures") || text.contains("outside"),
            "{repo}: the refusal says why:\n{text}"
        );
        assert!(!text.contains("FAKE-KEY"), "{repo}:\n{text}");
        assert!(
            !all_text_under(&tmp).contains("FAKE-KEY"),
            "{repo}: the key reached a task workspace"
        );
    }
}
