//! From a PRD to working code with a scripted model: `keel init`, `keel prd add`, `keel task
//! generate`, `keel work batch`; a blocked task answered and re-run; bad structured output;
//! a batch killed with SIGKILL and re-run.

// Tests start programs of their own (the keel binary, git fixtures, tmux, servers): allowed
// here, outside Keel's one spawn path (docs/SECURITY.md, "One way to start a process").
#![allow(
    clippy::disallowed_macros,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::disallowed_methods
)]

mod common;

use std::path::Path;
use std::process::Output;
use std::time::{Duration, Instant};

use common::*;
use serde_json::{Value, json};

/// Every `tests/*.sh` must pass (none yet passes vacuously).
const TEST_COMMAND: &str =
    r#"for t in tests/*.sh; do [ -e "$t" ] || continue; sh "$t" || exit 1; done"#;

const PRD: &str = "# Greeter\n\nA tiny shell program: `sh greet.sh NAME` prints `Hello, NAME!`; \
`sh bye.sh NAME` prints `Bye, NAME!`. Every script has a test in tests/.\n";

/// An empty directory (not a copy of the demo repository).
fn empty_env() -> Env {
    let src = tempfile::tempdir().unwrap();
    Env::with_repo(src.path())
}

fn run(env: &Env, args: &[&str]) -> Output {
    env.keel().args(args).output().unwrap()
}

fn ok(env: &Env, args: &[&str]) -> String {
    let out = run(env, args);
    assert_exit(&out, 0);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn tasks(env: &Env) -> Vec<Value> {
    serde_json::from_str::<Value>(&ok(env, &["task", "list", "--json"]))
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

/// `keel init`, the test command set, the PRD added.
fn prepared() -> Env {
    let env = initialised();
    std::fs::write(env.work.join("prd.md"), PRD).unwrap();
    assert!(ok(&env, &["prd", "add", "prd.md"]).contains("PRD #1 \"Greeter\""));
    env
}

/// `keel init` (twice more: idempotent) with the test command set.
fn initialised() -> Env {
    let env = empty_env();
    let first = ok(&env, &["init"]);
    assert!(
        first.contains("wrote .keel/config.toml, .keel/project.md"),
        "{first}"
    );
    let project = std::fs::read_to_string(env.work.join(".keel/project.md")).unwrap();
    assert!(project.contains("new project"), "{project}");
    let config = std::fs::read_to_string(env.work.join(".keel/config.toml")).unwrap();
    let config = config.replace(
        "# test_command = \"pytest -q\"",
        &format!("test_command = {}", toml_str(TEST_COMMAND)),
    );
    std::fs::write(env.work.join(".keel/config.toml"), config).unwrap();
    ok(&env, &["init"]);
    assert!(
        ok(&env, &["init"]).contains("nothing changed"),
        "init is idempotent"
    );
    env
}

fn toml_str(s: &str) -> String {
    format!("'{s}'")
}

fn generation(tasks: &Value) -> String {
    serde_json::to_string(&json!({"turns": [{"text": tasks.to_string()}]})).unwrap()
}

fn three_tasks() -> Value {
    json!([
        {"id": 1, "title": "Write greet.sh", "description": "sh greet.sh NAME prints Hello, NAME!",
         "acceptance_criteria": ["greet.sh exists and prints Hello, NAME!"], "depends_on": [], "size": "s"},
        {"id": 2, "title": "Test greet.sh", "description": "tests/test_greet.sh checks the greeting",
         "acceptance_criteria": ["a test checks greet.sh"], "depends_on": [1], "size": "xs"},
        {"id": 3, "title": "Write bye.sh with a test", "description": "sh bye.sh NAME prints Bye, NAME!",
         "acceptance_criteria": ["bye.sh prints Bye, NAME!", "a test checks bye.sh"], "depends_on": [2], "size": "s"}
    ])
}

fn create(path: &str, content: &str) -> Value {
    json!({"name": "create_file", "arguments": {"path": path, "content": content}})
}

const GREET: &str = "echo \"Hello, $1!\"\n";
const TEST_GREET: &str =
    "[ \"$(sh greet.sh Ada)\" = \"Hello, Ada!\" ] || { echo greet broken; exit 1; }\n";
const BYE: &str = "echo \"Bye, $1!\"\n";
const TEST_BYE: &str = "[ \"$(sh bye.sh Ada)\" = \"Bye, Ada!\" ] || { echo bye broken; exit 1; }\n";

fn task1_turns() -> Vec<Value> {
    vec![
        json!({"tool_calls": [create("greet.sh", GREET)]}),
        json!({"text": "greet.sh written.\nCRITERION 1: met — evidence: file `greet.sh`"}),
    ]
}

fn task2_turns(delay_ms: Option<u64>) -> Vec<Value> {
    let mut first = json!({"tool_calls": [create("tests/test_greet.sh", TEST_GREET)]});
    if let Some(d) = delay_ms {
        first["delay_ms"] = json!(d);
    }
    vec![
        first,
        json!({"tool_calls": [{"name": "run_command", "arguments": {"command": "sh tests/test_greet.sh"}}]}),
        json!({"text": "Test added.\nCRITERION 1: met — evidence: test tests/test_greet.sh"}),
    ]
}

fn task3_turns() -> Vec<Value> {
    vec![
        json!({"tool_calls": [create("bye.sh", BYE), create("tests/test_bye.sh", TEST_BYE)]}),
        json!({"tool_calls": [{"name": "run_command", "arguments": {"command": "sh bye.sh Ada"}}]}),
        json!({"text": "bye.sh done.\nCRITERION 1: met — evidence: command `sh bye.sh`\nCRITERION 2: met — evidence: test tests/test_bye.sh"}),
    ]
}

fn script(env: &Env, name: &str, turns: Vec<Value>) -> String {
    let body = serde_json::to_string(&json!({ "turns": turns })).unwrap();
    env.script(name, &body).display().to_string()
}

/// A script file inside the workspace (where `keel serve` accepts scripts from).
fn workspace_script(env: &Env, name: &str, body: &str) -> String {
    let p = env.work.join(name);
    std::fs::write(&p, body).unwrap();
    p.display().to_string()
}

fn sessions_created(env: &Env) -> Vec<(String, u64)> {
    let v: Value = serde_json::from_str(&ok(env, &["sessions", "--json"])).unwrap();
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["id"].as_str().unwrap().to_string(),
                s["created_at"].as_u64().unwrap(),
            )
        })
        .collect()
}

fn batch_turns() -> Vec<Value> {
    let mut turns = task1_turns();
    turns.extend(task2_turns(None));
    turns.extend(task3_turns());
    turns
}

#[test]
fn a_prd_becomes_a_tested_program() {
    let env = prepared();
    let gen_script = env.script("gen.json", &generation(&three_tasks()));
    let out = ok(
        &env,
        &["task", "generate", "--script", gen_script.to_str().unwrap()],
    );
    assert!(out.contains("Generated 3 tasks from PRD #1"), "{out}");
    let listed = tasks(&env);
    assert_eq!(listed.len(), 3);
    assert_eq!(listed[1]["depends_on"], json!([1]));
    assert_eq!(listed[2]["depends_on"], json!([2]));
    // Only #1 can start: the others wait for their dependencies, and say so.
    let table = ok(&env, &["task", "list"]);
    let status_of = |id: &str| {
        table
            .lines()
            .find(|l| l.starts_with(&format!("{id} ")))
            .and_then(|l| l.split_whitespace().nth(1))
            .unwrap_or_default()
            .to_string()
    };
    assert_eq!(
        [status_of("1"), status_of("2"), status_of("3")],
        ["ready", "waiting", "waiting"],
        "{table}"
    );
    let shown = ok(&env, &["task", "show", "3"]);
    assert!(shown.contains("Status: waiting"), "{shown}");
    assert!(shown.contains("(waiting for #2 to be done)"), "{shown}");

    // Dependencies stay acyclic and nothing depended on can be removed.
    let cycle = run(&env, &["task", "edit", "1", "--deps", "3"]);
    assert_exit(&cycle, 2);
    assert!(String::from_utf8_lossy(&cycle.stderr).contains("cycle: #1 → #3 → #2 → #1"));
    let rm = run(&env, &["task", "rm", "1"]);
    assert_exit(&rm, 2);
    assert!(String::from_utf8_lossy(&rm.stderr).contains("#2 depend on task #1"));
    // PRD versions: an edit stores version 2; version 1 stays readable.
    std::fs::write(
        env.work.join("prd2.md"),
        format!("{PRD}\nNo other scripts.\n"),
    )
    .unwrap();
    assert!(ok(&env, &["prd", "edit", "1", "prd2.md"]).contains("version 2"));
    let v1: Value =
        serde_json::from_str(&ok(&env, &["prd", "show", "1", "--version", "1", "--json"])).unwrap();
    assert_eq!(v1["body"], PRD);

    // The intent preview: the task layer with criteria and the PRD, nothing run.
    let preview = ok(&env, &["work", "start", "3"]);
    assert!(preview.contains("1. bye.sh prints Bye, NAME!"), "{preview}");
    assert!(
        preview.contains("`sh bye.sh NAME` prints `Bye, NAME!`"),
        "the PRD excerpt"
    );
    assert!(
        preview.contains("version=\"2\""),
        "the latest PRD version: {preview}"
    );
    // Dependencies are enforced.
    let early = run(
        &env,
        &[
            "work",
            "start",
            "3",
            "--execute",
            "--script",
            &gen_script.display().to_string(),
        ],
    );
    assert_exit(&early, 2);
    assert!(String::from_utf8_lossy(&early.stderr).contains("depends on #2"));

    let batch = script(&env, "batch.json", batch_turns());
    let out = ok(&env, &["work", "batch", "--script", &batch]);
    assert!(
        out.contains("Task #3 \"Write bye.sh with a test\": done"),
        "{out}"
    );

    // The program's tests pass.
    let check = std::process::Command::new("sh")
        .args(["-c", TEST_COMMAND])
        .current_dir(&env.work)
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stdout)
    );

    // Every task done, in dependency order, each with one session and a proof.
    let listed = tasks(&env);
    let created = sessions_created(&env);
    let mut starts = Vec::new();
    for t in &listed {
        assert_eq!(t["status"], "done", "{t}");
        let sessions = t["sessions"].as_array().unwrap();
        assert_eq!(sessions.len(), 1);
        let id = sessions[0].as_str().unwrap();
        starts.push(created.iter().find(|(s, _)| s == id).unwrap().1);
    }
    assert!(
        starts.windows(2).all(|w| w[0] <= w[1]),
        "tasks ran in order: {starts:?}"
    );
    let show: Value = serde_json::from_str(&ok(&env, &["task", "show", "3", "--json"])).unwrap();
    let proof = &show["proofs"][0]["body"];
    assert_eq!(proof["tests_after"]["passed"], true, "{proof}");
    assert_eq!(proof["criteria"][0]["status"], "met", "{proof}");
    assert_eq!(proof["criteria"][1]["status"], "met", "{proof}");
    let files: Vec<&str> = proof["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    assert_eq!(files, ["bye.sh", "tests/test_bye.sh"]);
    assert_eq!(
        proof["tests_before"]["passed"], true,
        "task 2's test passed before task 3"
    );
    // The human view shows the proof.
    let human = ok(&env, &["task", "show", "3"]);
    assert!(human.contains("[met] a test checks bye.sh"), "{human}");
    assert!(human.contains("added    bye.sh (+1 -0)"), "{human}");
    assert!(ok(&env, &["work", "status"]).contains("3 tasks: 3 done"));
}

#[test]
fn a_blocked_task_gets_its_answer_in_the_next_run() {
    let env = prepared();
    ok(
        &env,
        &[
            "task",
            "add",
            "Write greet.sh",
            "--criterion",
            "greet.sh greets",
            "--size",
            "s",
        ],
    );
    let ask = script(
        &env,
        "ask.json",
        vec![
            json!({"tool_calls": [{"name": "ask_user", "arguments": {"question": "Which greeting word?"}}]}),
        ],
    );
    let out = run(&env, &["work", "start", "1", "--execute", "--script", &ask]);
    assert_exit(&out, 3);
    let t = &tasks(&env)[0];
    assert_eq!(t["status"], "blocked");
    assert_eq!(t["question"], "Which greeting word?");
    let blockers: Value = serde_json::from_str(&ok(&env, &["blocker", "list", "--json"])).unwrap();
    let id = blockers[0]["id"].as_str().unwrap().to_string();
    let answered = ok(&env, &["blocker", "answer", &id, "Use Howdy"]);
    assert!(answered.contains("Task #1 is ready again"), "{answered}");
    assert_eq!(tasks(&env)[0]["status"], "ready");

    let mut turns = vec![json!({"tool_calls": [create("greet.sh", "echo \"Howdy, $1!\"\n")]})];
    turns.push(json!({"text": "Done.\nCRITERION 1: met — evidence: file greet.sh"}));
    let rerun = script(&env, "rerun.json", turns);
    ok(
        &env,
        &["work", "start", "1", "--execute", "--script", &rerun],
    );
    let t = &tasks(&env)[0];
    assert_eq!(t["status"], "done");
    let second = t["sessions"][1].as_str().unwrap();
    let events = ok(&env, &["sessions", "show", second, "--json"]);
    let started = json_lines(events.as_bytes())
        .into_iter()
        .find(|e| e["type"] == "session_started")
        .unwrap();
    let prompt = started["task"].as_str().unwrap();
    assert!(
        prompt.contains("Q (") && prompt.contains("A: Use Howdy"),
        "{prompt}"
    );
    // Delivered once: the blocker is no longer merely answered.
    let all: Value =
        serde_json::from_str(&ok(&env, &["blocker", "list", "--all", "--json"])).unwrap();
    assert_eq!(all[0]["status"], "delivered");
}

#[test]
fn bad_structured_output_is_re_asked_once_then_refused_with_nothing_stored() {
    let env = prepared();
    let mut cycle = three_tasks();
    cycle[0]["depends_on"] = json!([3]);
    let mut dangling = three_tasks();
    dangling[1]["depends_on"] = json!([9]);
    let mut wrong = three_tasks();
    wrong[2]["acceptance_criteria"] = json!(42);

    for (bad, says) in [
        (&cycle, "cycle"),
        (&dangling, "task 9, which is not in the list"),
        (&wrong, "must be an array of strings"),
    ] {
        let body =
            json!({"turns": [{"text": bad.to_string()}, {"text": format!("Sorry:\n{bad}")}]});
        let s = env.script("bad.json", &body.to_string());
        let out = run(&env, &["task", "generate", "--script", s.to_str().unwrap()]);
        assert_exit(&out, 1);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("nothing was stored") && err.contains(says),
            "{err}"
        );
        assert!(tasks(&env).is_empty(), "nothing half-stored");
    }

    // A bad first answer repaired by the second.
    let body = json!({"turns": [{"text": cycle.to_string()}, {"text": format!("```json\n{}\n```", three_tasks())}]});
    let s = env.script("fixed.json", &body.to_string());
    ok(&env, &["task", "generate", "--script", s.to_str().unwrap()]);
    assert_eq!(tasks(&env).len(), 3);
}

#[cfg(unix)]
#[test]
fn a_killed_batch_resumes_without_running_a_task_twice() {
    let env = prepared();
    // A killed run's lease expires after a second here (15 by default; the store is the
    // user's to configure, not the project's).
    env.user_config("[store]\nlease_ttl_secs = 1\n");
    let gen_script = env.script("gen.json", &generation(&three_tasks()));
    ok(
        &env,
        &["task", "generate", "--script", gen_script.to_str().unwrap()],
    );
    let mut turns = task1_turns();
    turns.extend(task2_turns(Some(20_000)));
    let first = script(&env, "first.json", turns);
    let mut child = env
        .keel()
        .args(["work", "batch", "--script", &first])
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let t = tasks(&env);
        if t[1]["status"] == "in_progress" {
            break;
        }
        assert!(Instant::now() < deadline, "task 2 never started: {t:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    // Let the task's first model request start, then SIGKILL.
    std::thread::sleep(Duration::from_millis(300));
    child.kill().unwrap();
    child.wait().unwrap();
    let t = tasks(&env);
    assert_eq!(
        (t[0]["status"].as_str(), t[1]["status"].as_str()),
        (Some("done"), Some("in_progress"))
    );
    assert!(ok(&env, &["task", "list"]).contains("interrupted"));
    // The killed run's session lease expires (no heartbeat since the kill).
    std::thread::sleep(Duration::from_millis(1_300));

    // Re-run: task 2 continues in its own session, task 3 follows; task 1 is not run again.
    let mut turns = task2_turns(None);
    turns.extend(task3_turns());
    let second = script(&env, "second.json", turns);
    let out = ok(&env, &["work", "batch", "--script", &second]);
    assert!(!out.contains("Task #1"), "{out}");
    let t = tasks(&env);
    for task in &t {
        assert_eq!(task["status"], "done", "{task}");
        assert_eq!(task["sessions"].as_array().unwrap().len(), 1, "{task}");
    }
    let show: Value = serde_json::from_str(&ok(&env, &["task", "show", "2", "--json"])).unwrap();
    let proofs = show["proofs"].as_array().unwrap();
    assert_eq!(proofs.len(), 1);
    assert_eq!(proofs[0]["body"]["resumed"], true);
    assert!(Path::new(&env.work.join("bye.sh")).is_file());
}

#[test]
fn an_interrupted_task_resumes_with_the_provider_it_started_with() {
    let env = prepared();
    env.user_config("[store]\nlease_ttl_secs = 1\n");
    let gen_script = env.script("gen.json", &generation(&three_tasks()));
    ok(
        &env,
        &["task", "generate", "--script", gen_script.to_str().unwrap()],
    );
    // The first reply takes long: the run is killed while it waits.
    let mut turns = task1_turns();
    turns[0]["delay_ms"] = json!(20_000);
    let s = script(&env, "task1.json", turns);
    let mut child = env
        .keel()
        .args(["work", "start", "1", "--execute", "--script", &s])
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while tasks(&env)[0]["status"] != "in_progress" {
        assert!(Instant::now() < deadline, "task 1 never started");
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(300));
    child.kill().unwrap();
    child.wait().unwrap();
    std::thread::sleep(Duration::from_millis(1_300));
    // The session stored the script's path: the same file, now without the delay.
    script(&env, "task1.json", task1_turns());

    // No provider flag: the interrupted session resumes with the script it started with.
    let out = ok(&env, &["work", "start", "1", "--execute"]);
    assert!(out.contains("Task #1 \"Write greet.sh\": done"), "{out}");
    let t = tasks(&env);
    assert_eq!(t[0]["status"], "done", "{}", t[0]);
    assert_eq!(t[0]["sessions"].as_array().unwrap().len(), 1, "{}", t[0]);
    let show: Value = serde_json::from_str(&ok(&env, &["task", "show", "1", "--json"])).unwrap();
    assert_eq!(show["proofs"][0]["body"]["resumed"], true);
    assert!(env.work.join("greet.sh").is_file());

    // A new task with no provider anywhere still says how to configure one.
    let out = run(&env, &["work", "start", "2", "--execute"]);
    assert_exit(&out, 2);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no model provider is configured"), "{err}");
}

/// What a run produced, without ids, times and paths that differ between two runs.
fn essence(tasks: &[Value], proofs: &[Value]) -> Value {
    let tasks: Vec<Value> = tasks
        .iter()
        .map(|t| {
            json!([
                t["id"],
                t["title"],
                t["status"],
                t["depends_on"],
                t["criteria"],
                t["size"]
            ])
        })
        .collect();
    let proofs: Vec<Value> = proofs
        .iter()
        .map(|p| {
            let criteria: Vec<Value> = p["criteria"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| json!([c["status"], c["evidence"]]))
                .collect();
            json!([
                p["task"],
                p["run_status"],
                p["tests_before"]["passed"],
                p["tests_after"]["passed"],
                p["files"],
                criteria
            ])
        })
        .collect();
    json!({"tasks": tasks, "proofs": proofs})
}

#[test]
fn rest_gives_the_same_result_as_the_cli() {
    // The CLI run.
    let cli = prepared();
    let gen_script = cli.script("gen.json", &generation(&three_tasks()));
    ok(
        &cli,
        &["task", "generate", "--script", gen_script.to_str().unwrap()],
    );
    let batch = script(&cli, "batch.json", batch_turns());
    ok(&cli, &["work", "batch", "--script", &batch]);
    let cli_tasks = tasks(&cli);
    let cli_proofs: Vec<Value> = (1..=3)
        .map(|i| {
            let v: Value =
                serde_json::from_str(&ok(&cli, &["task", "show", &i.to_string(), "--json"]))
                    .unwrap();
            v["proofs"][0]["body"].clone()
        })
        .collect();

    // The same run over REST.
    let rest = initialised();
    // The server takes scripts only from inside its workspace roots (as for sessions).
    let gen_script = workspace_script(&rest, "gen.json", &generation(&three_tasks()));
    let batch = workspace_script(
        &rest,
        "batch.json",
        &serde_json::to_string(&json!({ "turns": batch_turns() })).unwrap(),
    );
    let (mut child, _, addr) = serve(&rest);
    let (code, prd) = http(&addr, "POST", "/api/v1/prds", Some(&json!({"body": PRD})));
    assert_eq!(
        (code, prd["title"].as_str()),
        (201, Some("Greeter")),
        "{prd}"
    );
    let outside = rest.script("outside.json", &generation(&three_tasks()));
    let (code, refused) = http(
        &addr,
        "POST",
        "/api/v1/tasks/generate",
        Some(&json!({"script": outside.display().to_string()})),
    );
    assert_eq!(
        (code, refused["error_code"].as_str()),
        (403, Some("outside_workspace_roots")),
        "{refused}"
    );
    let (code, generated) = http(
        &addr,
        "POST",
        "/api/v1/tasks/generate",
        Some(&json!({"script": gen_script})),
    );
    assert_eq!(code, 201, "{generated}");
    let (code, preview) = http(
        &addr,
        "POST",
        "/api/v1/work/start",
        Some(&json!({"task": 3})),
    );
    assert_eq!(code, 200);
    assert!(
        preview["task_layer"]
            .as_str()
            .unwrap()
            .contains("1. bye.sh prints Bye, NAME!")
    );
    let (code, report) = http(
        &addr,
        "POST",
        "/api/v1/work/batch",
        Some(&json!({"script": batch})),
    );
    assert_eq!(code, 200, "{report}");
    assert_eq!(report["runs"].as_array().unwrap().len(), 3);
    let (_, rest_tasks) = http(&addr, "GET", "/api/v1/tasks", None);
    let rest_proofs: Vec<Value> = (1..=3)
        .map(|i| {
            http(&addr, "GET", &format!("/api/v1/tasks/{i}"), None).1["proofs"][0]["body"].clone()
        })
        .collect();
    let (_, status) = http(&addr, "GET", "/api/v1/work/status", None);
    assert_eq!(status["counts"]["done"], 3);
    let (_, doc) = http(&addr, "GET", "/api/v1/openapi.json", None);
    // A task added by hand takes its criteria under the name generated tasks use, and the
    // document says so.
    let (code, added) = http(
        &addr,
        "POST",
        "/api/v1/tasks",
        Some(
            &json!({"title": "Write a changelog", "acceptance_criteria": ["CHANGELOG.md lists bye.sh"], "size": "xs"}),
        ),
    );
    assert_eq!(code, 201, "{added}");
    assert_eq!(
        added["criteria"],
        json!(["CHANGELOG.md lists bye.sh"]),
        "{added}"
    );
    let schema = &doc["components"]["schemas"]["AddTaskRequest"]["properties"];
    for field in [
        "title",
        "description",
        "acceptance_criteria",
        "size",
        "depends_on",
    ] {
        assert!(schema.get(field).is_some(), "{field} in {schema}");
    }
    for path in [
        "/api/v1/prds",
        "/api/v1/tasks/{id}",
        "/api/v1/tasks/generate",
        "/api/v1/work/start",
        "/api/v1/work/batch",
        "/api/v1/work/status",
    ] {
        assert!(
            doc["paths"].get(path).is_some(),
            "{path} is in the OpenAPI document"
        );
    }
    let _ = child.kill();
    let _ = child.wait();

    assert_eq!(
        essence(rest_tasks.as_array().unwrap(), &rest_proofs),
        essence(&cli_tasks, &cli_proofs)
    );
}

/// Why the browser test cannot run here, if it cannot.
fn browser_missing(tests_dir: &Path) -> Option<String> {
    let node = std::process::Command::new("node").arg("--version").output();
    if !node.is_ok_and(|o| o.status.success()) {
        return Some("node is not installed".into());
    }
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    if !Path::new(&chromium).exists() {
        return Some(format!("chromium is not at {chromium}"));
    }
    if !tests_dir.join("node_modules/playwright-core").is_dir() {
        return Some(format!(
            "playwright-core is not installed: npm ci --prefix {}",
            tests_dir.display()
        ));
    }
    None
}

#[test]
fn the_tasks_board_runs_a_batch_and_shows_proofs_in_a_browser() {
    let tests_dir = repo_root().join("web/tests");
    if let Some(why) = browser_missing(&tests_dir) {
        if std::env::var_os("CI").is_none() {
            use std::io::Write;
            let _ = writeln!(
                std::io::stderr(),
                "SKIPPED the_tasks_board_runs_a_batch_and_shows_proofs_in_a_browser: {why}"
            );
            return;
        }
        panic!("the browser test cannot run in CI: {why}; .ci/run installs everything it needs");
    }
    let env = prepared();
    let gen_script = env.script("gen.json", &generation(&three_tasks()));
    ok(
        &env,
        &["task", "generate", "--script", gen_script.to_str().unwrap()],
    );
    // The board sends the script to the server, which takes scripts only from its roots.
    let batch = workspace_script(
        &env,
        "batch.json",
        &serde_json::to_string(&json!({ "turns": batch_turns() })).unwrap(),
    );
    let (mut child, url, _) = serve(&env);
    let shots = Path::new(env!("CARGO_TARGET_TMPDIR")).join("board");
    let out = std::process::Command::new("node")
        .arg(tests_dir.join("board.test.mjs"))
        .arg(&url)
        .arg(&batch)
        .arg(&shots)
        .output()
        .unwrap();
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        out.status.success(),
        "the board test failed (screenshots in {}):\n{}\n{}",
        shots.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(tasks(&env).iter().all(|t| t["status"] == "done"));
}

/// The README's scripted PRD tour, command by command as written there (with its workspace
/// moved into a temp directory): every command succeeds and the three tasks end done.
#[test]
fn the_readme_prd_tour_runs_as_written() {
    let readme = std::fs::read_to_string(repo_root().join("README.md")).unwrap();
    let start = readme
        .find("rm -rf /tmp/keel-prd && mkdir /tmp/keel-prd")
        .expect("the README has the scripted PRD tour");
    let block = &readme[start..readme[start..].find("```").unwrap() + start];
    let env = empty_env();
    let ws = env.home.join("keel-prd");
    std::fs::create_dir_all(&ws).unwrap();
    let mut ran = 0;
    for line in block.lines().filter(|l| l.starts_with("keel ")) {
        let command = line.split('#').next().unwrap().trim();
        let args: Vec<String> = command
            .split_whitespace()
            .skip(1)
            .map(|a| a.replace("/tmp/keel-prd", ws.to_str().unwrap()))
            .collect();
        let out = env
            .keel()
            .current_dir(repo_root())
            .args(&args)
            .output()
            .unwrap();
        assert_exit(&out, 0);
        ran += 1;
        if args[0] == "task" {
            let table = String::from_utf8_lossy(&out.stdout);
            assert!(table.contains("Generated 3 tasks"), "{table}");
            assert_eq!(table.matches("waiting").count(), 2, "{table}");
        }
        if args[..2] == ["work", "batch"] {
            let batch = String::from_utf8_lossy(&out.stdout);
            assert!(
                batch.contains("criteria met 1/1; 1 file changed;")
                    && batch.contains("criteria met 2/2; 2 files changed;"),
                "{batch}"
            );
        }
        if args[..2] == ["work", "status"] {
            let status = String::from_utf8_lossy(&out.stdout);
            assert!(status.starts_with("3 tasks: 3 done"), "{status}");
        }
    }
    assert_eq!(ran, 5, "{block}");
    assert_eq!(
        std::fs::read_to_string(ws.join("bye.sh")).unwrap(),
        "echo \"Bye, $1!\"\n"
    );
}

/// `keel work` runs the project's tests before and after a task: judged by what they run and
/// by the user's approval policy, like the session's tests gate — nobody answers a task's run,
/// so a test script that deletes is not run (it was run unjudged before); the task's own
/// session is under the same policy (a `rm` the policy asks about is denied).
#[test]
fn work_runs_the_tests_and_the_task_under_the_approval_policy() {
    let env = empty_env();
    env.user_config("[approval]\npolicy = \"on-request\"\n[shell]\ntest_command = \"sh t.sh\"\n");
    std::fs::create_dir_all(env.work.join("src")).unwrap();
    std::fs::write(env.work.join("src/keep.txt"), "user's work\n").unwrap();
    std::fs::write(env.work.join("README.md"), "readme\n").unwrap();
    std::fs::write(env.work.join("t.sh"), "rm -rf src\n").unwrap();
    ok(
        &env,
        &[
            "task",
            "add",
            "Tidy up",
            "--criterion",
            "done",
            "--size",
            "xs",
        ],
    );
    let turns = script(
        &env,
        "rm.json",
        vec![
            json!({"tool_calls": [{"name": "run_command", "arguments": {"command": "rm README.md"}}]}),
            json!({"text": "Done.\nCRITERION 1: met — evidence: it ran"}),
        ],
    );
    let out = run(
        &env,
        &[
            "work",
            "start",
            "1",
            "--execute",
            "--json",
            "--script",
            &turns,
        ],
    );
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        env.work.join("src/keep.txt").exists(),
        "the test script ran unjudged: {said}"
    );
    assert!(
        env.work.join("README.md").exists(),
        "the task's session ran `rm` under on-request with nobody to ask: {said}"
    );
    assert!(
        said.contains("not run: the test command runs t.sh"),
        "{said}"
    );
    assert_eq!(tasks(&env)[0]["status"], "failed", "{said}");
}
