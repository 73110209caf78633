//! A session's workspace as a git remote + ref, end to end: `keel serve --database` and
//! `keel worker`s as real processes on one PostgreSQL database (a fresh one per test; needs
//! `KEEL_TEST_DATABASE_URL` — skipped visibly without it, a failure in CI), and a local bare
//! repository as the remote:
//! - turn 1 on one worker creates a file; that worker stops; turn 2 on another worker (its
//!   own checkout directory) sees the file and edits it; the remote's `keel/<session id>`
//!   has both changes, one commit per turn, and the original branch is untouched;
//! - an unknown ref and an unreachable remote fail the turn with a message naming them (no
//!   retries, no hang), and a hostile url or ref is refused at creation with a 400.

// Tests start programs of their own (the keel binary, git fixtures, tmux, servers): allowed
// here, outside Keel's one spawn path (docs/SECURITY.md, "One way to start a process").
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

mod cluster_common;

use cluster_common::*;

const SCRIPT: &str = r#"
turns:
  - tool_calls:
      - {name: create_file, arguments: {path: notes.txt, content: "one\n"}}
  - text: "Created notes.txt."
  - tool_calls:
      - {name: read_file, arguments: {path: notes.txt}}
  - tool_calls:
      - name: edit_file
        arguments:
          path: notes.txt
          edits:
            - {search: "one\n", replace: "one\ntwo\n"}
  - text: "Edited notes.txt."
"#;

/// `git ARGS` in `dir` (plain git: the test's own repositories); its trimmed stdout.
fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .current_dir(dir)
        .args(["-c", "user.name=Test", "-c", "user.email=test@localhost"])
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A bare repository at `dir/remote.git` whose `main` has one commit (README.md); returns its
/// path and that commit.
fn seeded_remote(dir: &Path) -> (String, String) {
    let remote = dir.join("remote.git");
    let seed = dir.join("seed");
    std::fs::create_dir_all(&seed).unwrap();
    git(
        dir,
        &["init", "--quiet", "--bare", "-b", "main", "remote.git"],
    );
    git(&seed, &["init", "--quiet", "-b", "main"]);
    std::fs::write(seed.join("README.md"), "# app\n").unwrap();
    git(&seed, &["add", "README.md"]);
    git(&seed, &["commit", "--quiet", "-m", "seed"]);
    let remote_s = remote.display().to_string();
    git(&seed, &["push", "--quiet", &remote_s, "main"]);
    let head = git(&seed, &["rev-parse", "HEAD"]);
    (remote_s, head)
}

fn create_repo_session(addr: &str, repo: Value) -> (u16, Value) {
    request(
        addr,
        "POST",
        "/api/v1/sessions",
        Some(&json!({"provider": "scripted", "script": "script.yaml", "repo": repo})),
    )
}

/// The session's stored events once it has `n` `turn_finished` events (polled; bounded).
fn wait_for_turns(addr: &str, id: &str, n: usize, limit: Duration) -> Vec<Value> {
    let deadline = Instant::now() + limit;
    loop {
        let (status, events) = request(addr, "GET", &format!("/api/v1/sessions/{id}/events"), None);
        assert_eq!(status, 200, "{events}");
        let events = events.as_array().cloned().unwrap_or_default();
        let done = events
            .iter()
            .filter(|e| e["type"] == "turn_finished")
            .count();
        if done >= n {
            return events;
        }
        assert!(
            Instant::now() < deadline,
            "session {id}: {done} of {n} turns finished within {limit:?}: {:?}",
            kinds(&events)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn finished(events: &[Value]) -> Vec<&Value> {
    events
        .iter()
        .filter(|e| e["type"] == "turn_finished")
        .collect()
}

fn pushes(events: &[Value]) -> Vec<&Value> {
    events
        .iter()
        .filter(|e| e["type"] == "workspace_pushed")
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repo_session_continues_on_another_worker_from_its_pushed_branch() {
    let Some(base) = test_database_url() else {
        return;
    };
    let url = fresh_database(&base, "git").await;
    let mut cluster = Cluster::new(url, SCRIPT);
    let tmp = tempfile::tempdir().unwrap();
    let (remote, seed) = seeded_remote(tmp.path());
    let (dir_a, dir_b) = (
        tmp.path().join("checkouts-a"),
        tmp.path().join("checkouts-b"),
    );
    cluster.start_server();
    cluster.start_worker_env(&[("KEEL_WORKER__CHECKOUT_DIR", dir_a.display().to_string())]);
    let server = cluster.servers[0].addr.clone();

    let (status, created) = create_repo_session(&server, json!({"url": remote, "ref": "main"}));
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["repo"], json!({"url": remote, "ref": "main"}));
    let id = created["id"].as_str().unwrap().to_string();
    let branch = format!("keel/{id}");

    // Turn 1 on worker A: creates notes.txt, committed and pushed before turn_finished.
    send(&server, &id, "create notes.txt");
    let events = wait_for_turns(&server, &id, 1, Duration::from_secs(120));
    let turns = finished(&events);
    assert_eq!(turns[0]["status"], "completed", "{:?}", kinds(&events));
    let pushed = pushes(&events);
    assert_eq!(pushed.len(), 1, "{:?}", kinds(&events));
    assert_eq!(pushed[0]["branch"], branch);
    assert_eq!(pushed[0]["url"], remote);
    assert!(
        pushed[0]["seq"].as_u64() < turns[0]["seq"].as_u64(),
        "pushed within the turn"
    );
    let first = pushed[0]["commit"].as_str().unwrap().to_string();
    let remote_dir = Path::new(&remote);
    assert_eq!(git(remote_dir, &["rev-parse", &branch]), first);
    assert_eq!(
        std::fs::read_to_string(dir_a.join(&id).join("notes.txt")).unwrap(),
        "one\n"
    );

    // Worker A stops; turn 2 runs on worker B, in a checkout of its own.
    let mut a = cluster.workers.remove(0);
    a.child.kill().unwrap();
    a.child.wait().unwrap();
    cluster.start_worker_env(&[("KEEL_WORKER__CHECKOUT_DIR", dir_b.display().to_string())]);
    send(&server, &id, "add a second line to notes.txt");
    let events = wait_for_turns(&server, &id, 2, Duration::from_secs(120));
    let turns = finished(&events);
    assert_eq!(turns[1]["status"], "completed", "{:?}", kinds(&events));
    // The edit matched the file turn 1 wrote (it would fail on a missing file).
    assert!(
        events
            .iter()
            .filter(|e| e["type"] == "tool_result")
            .all(|e| e["is_error"] != true),
        "{events:?}"
    );
    let pushed = pushes(&events);
    assert_eq!(pushed.len(), 2, "{:?}", kinds(&events));
    let second = pushed[1]["commit"].as_str().unwrap().to_string();
    assert_eq!(
        std::fs::read_to_string(dir_b.join(&id).join("notes.txt")).unwrap(),
        "one\ntwo\n"
    );
    assert_eq!(
        std::fs::read_to_string(dir_a.join(&id).join("notes.txt")).unwrap(),
        "one\n",
        "worker A's checkout is its own"
    );

    // The remote: keel/<id> is seed → turn 1 → turn 2; main is untouched.
    assert_eq!(git(remote_dir, &["rev-parse", &branch]), second);
    assert_eq!(
        git(remote_dir, &["rev-list", "--reverse", &branch]),
        format!("{seed}\n{first}\n{second}")
    );
    assert_eq!(
        git(remote_dir, &["show", &format!("{first}:notes.txt")]),
        "one"
    );
    assert_eq!(
        git(remote_dir, &["show", &format!("{branch}:notes.txt")]),
        "one\ntwo"
    );
    assert_eq!(git(remote_dir, &["rev-parse", "main"]), seed);
    assert_eq!(
        git(remote_dir, &["for-each-ref", "--format=%(refname)"]),
        format!("refs/heads/{branch}\nrefs/heads/main")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_ref_or_remote_fails_the_turn_and_hostile_input_is_refused() {
    let Some(base) = test_database_url() else {
        return;
    };
    let url = fresh_database(&base, "gitbad").await;
    let mut cluster = Cluster::new(url, SCRIPT);
    let tmp = tempfile::tempdir().unwrap();
    let (remote, seed) = seeded_remote(tmp.path());
    cluster.start_server();
    cluster.start_worker_env(&[(
        "KEEL_WORKER__CHECKOUT_DIR",
        tmp.path().join("checkouts").display().to_string(),
    )]);
    let server = cluster.servers[0].addr.clone();

    // Hostile or malformed input: 400, saying what is wrong.
    for (repo, code, says) in [
        (
            json!({"url": "--upload-pack=touch /tmp/pwned", "ref": "main"}),
            400,
            "starts with `-`",
        ),
        (
            json!({"url": "ext::sh -c id", "ref": "main"}),
            400,
            "remote helper",
        ),
        (json!({"url": "", "ref": "main"}), 400, "repo.url is empty"),
        (
            json!({"url": remote, "ref": "--output=/tmp/x"}),
            400,
            "repo.ref",
        ),
        (json!({"url": remote, "ref": "a..b"}), 400, "repo.ref"),
        (
            json!({"url": remote, "branch": "main"}),
            422,
            "unknown field `branch`",
        ),
    ] {
        let (status, body) = create_repo_session(&server, repo.clone());
        assert_eq!(status, code, "{repo}: {body}");
        let message = body["message"].as_str().unwrap_or_default();
        assert!(message.contains(says), "{repo}: {body}");
    }

    // An unknown ref: the turn fails at once, naming the url and the ref.
    let (status, created) =
        create_repo_session(&server, json!({"url": remote, "ref": "no-such-branch"}));
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_str().unwrap().to_string();
    let started = Instant::now();
    send(&server, &id, "create notes.txt");
    let events = wait_for_turns(&server, &id, 1, Duration::from_secs(60));
    let last = events.last().unwrap();
    assert_eq!(last["type"], "turn_finished");
    assert_eq!(last["status"], "failed", "{last}");
    let message = last["message"].as_str().unwrap();
    assert!(
        message.contains(&remote) && message.contains("no-such-branch"),
        "{message}"
    );
    assert_eq!(kinds(&events), ["turn_finished"], "no run started");
    assert!(started.elapsed() < Duration::from_secs(30), "not retried");
    let (_, session) = request(&server, "GET", &format!("/api/v1/sessions/{id}"), None);
    assert_eq!(session["status"], "failed", "{session}");

    // An unreachable remote: the same, naming the url.
    let missing = tmp.path().join("nowhere.git").display().to_string();
    let (status, created) = create_repo_session(&server, json!({"url": missing}));
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_str().unwrap().to_string();
    send(&server, &id, "create notes.txt");
    let events = wait_for_turns(&server, &id, 1, Duration::from_secs(60));
    let last = events.last().unwrap();
    assert_eq!(last["status"], "failed", "{last}");
    assert!(
        last["message"].as_str().unwrap().contains(&missing),
        "{last}"
    );

    // Nothing was written to the remote.
    let remote_dir = Path::new(&remote);
    assert_eq!(git(remote_dir, &["rev-parse", "main"]), seed);
    assert_eq!(
        git(remote_dir, &["for-each-ref", "--format=%(refname)"]),
        "refs/heads/main"
    );
}
