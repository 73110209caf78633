//! `keel flow` and `keel eval` on PostgreSQL: with `KEEL_DATABASE_URL` set, a flow run (the
//! implement-review-deliver example on the scripted provider) stores its run, checkpoints and
//! agent sessions in the database, `keel flow runs` / `status` read them back from there (and
//! the local SQLite store stays empty), and a run killed with SIGKILL resumes from its
//! PostgreSQL checkpoint; an eval run, its sessions and a promoted lesson are stored there
//! too. Needs `KEEL_TEST_DATABASE_URL` (a fresh database per test), e.g.
//! what `.ci/run` exports — skipped visibly without it, a failure in CI.

// Tests start programs of their own (the keel binary, git fixtures, tmux, servers): allowed
// here, outside Keel's one spawn path (docs/SECURITY.md, "One way to start a process").
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

mod common;

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::*;
use serde_json::Value;
use sqlx::Connection;

/// The test server's URL, or `None` after saying why this is skipped (a failure in CI).
fn test_database_url() -> Option<String> {
    postgres_test_url("`keel flow` and `keel eval`")
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

/// A new, empty database on the test server, dropped with the value.
struct Db {
    base: String,
    name: String,
    url: String,
}

impl Db {
    fn create(base: &str, tag: &str) -> Self {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let name = format!("keel_flow_{tag}_{}_{nanos}", std::process::id());
        block_on(async {
            let mut conn = sqlx::PgConnection::connect(base).await.unwrap();
            sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
                .execute(&mut conn)
                .await
                .unwrap();
        });
        let (prefix, _) = base.rsplit_once('/').unwrap();
        Self {
            base: base.to_string(),
            url: format!("{prefix}/{name}"),
            name,
        }
    }

    fn count(&self, sql: &str) -> i64 {
        block_on(async {
            let mut conn = sqlx::PgConnection::connect(&self.url).await.unwrap();
            sqlx::query_scalar(sqlx::AssertSqlSafe(sql.to_string()))
                .fetch_one(&mut conn)
                .await
                .unwrap()
        })
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        let (base, name) = (self.base.clone(), self.name.clone());
        block_on(async move {
            if let Ok(mut conn) = sqlx::PgConnection::connect(&base).await {
                let _ = sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
                    "DROP DATABASE IF EXISTS {name} WITH (FORCE)"
                )))
                .execute(&mut conn)
                .await;
            }
        });
    }
}

fn pg(env: &Env, db: &Db) -> Command {
    let mut cmd = env.keel();
    cmd.env("KEEL_DATABASE_URL", &db.url);
    cmd
}

fn ok(mut cmd: Command, args: &[&str]) -> String {
    let out = cmd.args(args).output().unwrap();
    assert_exit(&out, 0);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn status(env: &Env, db: &Db) -> Value {
    serde_json::from_str(&ok(pg(env, db), &["flow", "status", "--json"])).unwrap()
}

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .current_dir(dir)
        .args(args)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@t")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@t")
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}");
}

fn empty_env() -> Env {
    let src = tempfile::tempdir().unwrap();
    Env::with_repo(src.path())
}

#[test]
fn flow_runs_checkpoints_and_agent_sessions_live_in_postgres() {
    let Some(base) = test_database_url() else {
        return;
    };
    let db = Db::create(&base, "run");
    let env = empty_env();
    git(&env.work, &["init", "-q", "-b", "main"]);
    std::fs::write(env.work.join("README.md"), "demo\n").unwrap();
    git(&env.work, &["add", "-A"]);
    git(&env.work, &["commit", "-qm", "init"]);
    let flow = repo_root()
        .join("examples/flows/implement-review-deliver.yaml")
        .display()
        .to_string();

    // Before `keel db migrate` the command says what to do.
    let out: Output = pg(&env, &db).args(["flow", "runs"]).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("keel db migrate"), "{err}");

    ok(pg(&env, &db), &["db", "migrate"]);
    let out = ok(pg(&env, &db), &["flow", "run", &flow]);
    assert!(out.contains("✓ deliver"), "{out}");

    let rec = status(&env, &db);
    assert_eq!(rec["status"], "completed", "{rec}");
    assert_eq!(rec["flow"], "implement-review-deliver", "{rec}");
    assert_eq!(rec["nodes"]["test"]["outputs"]["passed"], true, "{rec}");
    let id = rec["id"].as_str().unwrap().to_string();
    let runs = ok(pg(&env, &db), &["flow", "runs"]);
    assert!(
        runs.contains(&id) && runs.contains("implement-review-deliver"),
        "{runs}"
    );
    // By id prefix too.
    let by_id: Value =
        serde_json::from_str(&ok(pg(&env, &db), &["flow", "status", &id[..8], "--json"])).unwrap();
    assert_eq!(by_id["id"], id.as_str());

    // Everything is in PostgreSQL: the run, a checkpoint per node, the agents' sessions.
    assert_eq!(db.count("SELECT COUNT(*) FROM flow_runs"), 1);
    assert!(db.count("SELECT COUNT(*) FROM flow_checkpoints") >= 4);
    assert!(db.count("SELECT COUNT(*) FROM sessions") >= 2);
    assert!(db.count("SELECT COUNT(*) FROM events") > 0);
    // …and nothing in the local SQLite store.
    let local = ok(env.keel(), &["flow", "runs"]);
    assert!(local.contains("No flow runs"), "{local}");
}

const SLOW: &str = "name: slow\nmax_parallel: 1\nnodes:\n  - id: count\n    type: shell\n    command: echo x >> count.txt\n  - id: wait\n    type: shell\n    needs: [count]\n    command: while [ ! -f go ]; do sleep 0.1; done; echo waited\n  - id: after\n    type: shell\n    needs: [wait]\n    command: cat count.txt\n";

#[test]
fn a_run_killed_mid_flow_resumes_from_its_postgres_checkpoint() {
    let Some(base) = test_database_url() else {
        return;
    };
    let db = Db::create(&base, "resume");
    let env = empty_env();
    ok(pg(&env, &db), &["db", "migrate"]);
    std::fs::write(env.work.join("slow.yaml"), SLOW).unwrap();
    let mut child = pg(&env, &db)
        .args(["flow", "run", "slow.yaml"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    loop {
        let out = pg(&env, &db)
            .args(["flow", "status", "--json"])
            .output()
            .unwrap();
        if out.status.success() {
            let v: Value = serde_json::from_slice(&out.stdout).unwrap();
            if v["nodes"]["count"]["status"] == "completed" {
                break;
            }
        }
        if start.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("the first node never finished");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    std::fs::write(env.work.join("go"), "").unwrap();
    let id = status(&env, &db)["id"].as_str().unwrap().to_string();
    let out = ok(pg(&env, &db), &["flow", "resume", &id]);
    assert!(
        !out.contains("▶ count"),
        "finished nodes are not run again: {out}"
    );
    let rec = status(&env, &db);
    assert_eq!(rec["status"], "completed", "{rec}");
    assert_eq!(rec["nodes"]["after"]["outputs"]["output"], "x", "{rec}");
    assert_eq!(
        std::fs::read_to_string(env.work.join("count.txt")).unwrap(),
        "x\n"
    );
    // The killed run's shell node sees `go` and ends before the directory is removed.
    std::thread::sleep(Duration::from_millis(500));
}

#[test]
fn eval_runs_and_promoted_lessons_live_in_postgres() {
    let Some(base) = test_database_url() else {
        return;
    };
    let db = Db::create(&base, "eval");
    let env = empty_env();
    ok(pg(&env, &db), &["db", "migrate"]);
    let dir = env.home.join("suite");
    std::fs::create_dir_all(dir.join("fixture")).unwrap();
    std::fs::write(dir.join("fixture/README.md"), "# fixture\n").unwrap();
    std::fs::write(
        dir.join("a.yaml"),
        "turns:\n  - text: \"Creating a.txt.\"\n    tool_calls:\n      - name: create_file\n        arguments: {path: a.txt, content: \"alpha\"}\n  - text: \"Done.\"\n",
    )
    .unwrap();
    let suite = dir.join("suite.toml");
    std::fs::write(
        &suite,
        "name = \"solo\"\nmax_steps = 5\n\n[[task]]\nid = \"a\"\nrepo = \"fixture\"\ntask = \"Create a.txt holding alpha.\"\ncheck = \"grep -qx alpha a.txt\"\nscript = \"a.yaml\"\n",
    )
    .unwrap();
    let run: Value = serde_json::from_str(&ok(
        pg(&env, &db),
        &["eval", suite.to_str().unwrap(), "--json"],
    ))
    .unwrap();
    assert_eq!(run["id"], 1, "{run}");
    assert_eq!(run["results"][0]["success"], true, "{run}");

    let runs = ok(pg(&env, &db), &["eval", "runs"]);
    assert!(runs.contains("#1") && runs.contains("solo"), "{runs}");
    let shown: Value =
        serde_json::from_str(&ok(pg(&env, &db), &["eval", "show", "1", "--json"])).unwrap();
    assert_eq!(shown, run);
    assert_eq!(db.count("SELECT COUNT(*) FROM eval_runs"), 1);
    assert_eq!(
        db.count("SELECT COUNT(*) FROM sessions"),
        1,
        "the task's session"
    );
    let local = ok(env.keel(), &["eval", "runs"]);
    assert!(local.contains("No eval runs"), "{local}");

    // A lesson promoted from the run's trace goes to PostgreSQL's memory.
    let draft = env.script(
        "draft.yaml",
        "turns:\n  - text: '{\"name\": \"Text Files\", \"description\": \"d\", \"body\": \"Create files with create_file.\"}'\n",
    );
    ok(
        pg(&env, &db),
        &[
            "eval",
            "promote",
            "1",
            "--as",
            "memory",
            "--script",
            draft.to_str().unwrap(),
            "--accept",
        ],
    );
    assert_eq!(
        db.count("SELECT COUNT(*) FROM memory WHERE kind = 'lesson' AND source LIKE 'keel eval run #1 task a%'"),
        1
    );
}
