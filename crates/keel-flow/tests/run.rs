//! The executor: DAG order, the parallelism bound, review loop-back, branch, deliver,
//! failure → dependents failed with validation/rollback/checkpoint ordering, resume without
//! re-running finished nodes, and replay reproducing outputs and the tree.

// Tests start programs of their own (the keel binary, git fixtures, tmux, servers): allowed
// here, outside Keel's one spawn path (docs/SECURITY.md, "One way to start a process").
#![allow(clippy::disallowed_methods)]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use keel_flow::exec::{AgentRequest, AgentResult, AgentRunner, EventSink};
use keel_flow::state::NodeStatus;
use keel_flow::store::FlowStore;
use keel_flow::{Executor, FlowEvent, compile};
use keel_store::SqliteStore;
use tokio_util::sync::CancellationToken;

type Reply = Box<dyn Fn(&AgentRequest, usize) -> (String, Vec<(String, String)>) + Send + Sync>;

/// A fake model: per node, a reply (final text, files to write) by call number.
struct FakeAgents {
    replies: BTreeMap<String, Reply>,
    calls: Mutex<Vec<(String, String)>>,
}

impl AgentRunner for FakeAgents {
    fn run(&self, req: AgentRequest) -> BoxFuture<'_, AgentResult> {
        Box::pin(async move {
            let n = {
                let mut calls = self.calls.lock().unwrap_or_else(|e| e.into_inner());
                calls.push((req.node.clone(), req.task.clone()));
                calls.iter().filter(|(id, _)| *id == req.node).count() - 1
            };
            let Some(reply) = self.replies.get(&req.node) else {
                return AgentResult {
                    error: Some("no reply".into()),
                    ..AgentResult::default()
                };
            };
            let (text, files) = reply(&req, n);
            for (path, body) in files {
                std::fs::write(req.workspace.join(path), body).unwrap_or_else(|e| panic!("{e}"));
            }
            AgentResult {
                completed: true,
                text,
                ..AgentResult::default()
            }
        })
    }
}

fn agents(replies: Vec<(&str, Reply)>) -> Arc<FakeAgents> {
    Arc::new(FakeAgents {
        replies: replies
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
        calls: Mutex::new(Vec::new()),
    })
}

struct Setup {
    exec: Executor,
    events: Arc<Mutex<Vec<FlowEvent>>>,
}

fn setup(agents: Arc<FakeAgents>, store: Arc<SqliteStore>, cancel: CancellationToken) -> Setup {
    let events: Arc<Mutex<Vec<FlowEvent>>> = Arc::default();
    let sink_events = events.clone();
    let sink: EventSink = Arc::new(move |e: &FlowEvent| {
        sink_events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(e.clone())
    });
    Setup {
        exec: Executor {
            store: FlowStore::new(store),
            agents,
            shell: keel_tools::shell::ShellSettings::default(),
            build_dirs: Default::default(),
            events: Some(sink),
            cancel,
            approvals: None,
        },
        events,
    }
}

fn store() -> Arc<SqliteStore> {
    Arc::new(SqliteStore::open_in_memory().unwrap_or_else(|e| panic!("{e}")))
}

async fn run(s: &Setup, yaml: &str, ws: &Path) -> keel_flow::RunSummary {
    let flow = compile(yaml, Path::new("flow.yaml")).unwrap_or_else(|e| panic!("{e}"));
    let inputs = flow.resolve_inputs(&[]).unwrap_or_else(|e| panic!("{e}"));
    s.exec
        .start(flow, yaml, ws, inputs)
        .await
        .unwrap_or_else(|e| panic!("{e}"))
}

fn status(sum: &keel_flow::RunSummary, id: &str) -> NodeStatus {
    sum.state
        .nodes
        .get(id)
        .map(|s| s.status)
        .unwrap_or_default()
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_default()
}

#[tokio::test]
async fn runs_in_dependency_order_within_the_parallelism_bound() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let s = setup(agents(vec![]), store(), CancellationToken::new());
    let yaml = "name: order\nmax_parallel: 2\nnodes:\n  - id: a\n    type: shell\n    command: sleep 0.3; echo a >> log\n  - id: b\n    type: shell\n    command: sleep 0.3; echo b >> log\n  - id: c\n    type: shell\n    command: sleep 0.3; echo c >> log\n  - id: d\n    type: shell\n    needs: [a, b, c]\n    command: echo d >> log; cat log | wc -l\n";
    let sum = run(&s, yaml, dir.path()).await;
    assert_eq!(sum.status, "completed", "{:?}", sum.error);
    let log = read(&dir.path().join("log"));
    assert_eq!(log.lines().last(), Some("d"), "{log}");
    let mut live = 0i32;
    let mut peak = 0i32;
    for e in s.events.lock().unwrap_or_else(|e| e.into_inner()).iter() {
        match e {
            FlowEvent::NodeStarted { .. } => live += 1,
            FlowEvent::NodeFinished { .. } => live -= 1,
            _ => {}
        }
        peak = peak.max(live);
    }
    assert_eq!(
        peak, 2,
        "at most max_parallel nodes at once, and the bound is used"
    );
    let d = sum
        .state
        .nodes
        .get("d")
        .map(|s| s.outputs.clone())
        .unwrap_or_default();
    assert_eq!(
        d.get("output").map(|v| v.to_string()),
        Some("4".to_string())
    );
}

#[tokio::test]
async fn failure_marks_dependents_then_validates_rolls_back_and_checkpoints() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let store = store();
    let s = setup(agents(vec![]), store.clone(), CancellationToken::new());
    let yaml = "name: fail\nnodes:\n  - id: bad\n    type: shell\n    command: touch broken; exit 3\n    validation_command: test ! -f broken\n    rollback_command: rm broken\n  - id: after\n    type: shell\n    command: echo never\n    needs: [bad]\n  - id: later\n    type: shell\n    command: echo ${nodes.after.output}\n  - id: free\n    type: shell\n    command: echo free\n";
    let sum = run(&s, yaml, dir.path()).await;
    assert_eq!(sum.status, "failed");
    assert_eq!(status(&sum, "bad"), NodeStatus::Failed);
    assert_eq!(status(&sum, "after"), NodeStatus::Failed);
    assert_eq!(status(&sum, "later"), NodeStatus::Failed);
    assert_eq!(status(&sum, "free"), NodeStatus::Completed);
    assert!(!dir.path().join("broken").exists(), "rolled back");
    let steps: Vec<&str> = sum
        .trace
        .steps
        .iter()
        .map(String::as_str)
        .filter(|s| s.contains("bad"))
        .collect();
    assert_eq!(
        steps,
        [
            "failed:bad",
            "dependents_failed:bad:after,later",
            "validate:bad:fail",
            "rollback:bad:ok",
            "validate_after_rollback:bad:pass",
            "checkpoint:bad",
        ]
    );
    let cps = s
        .exec
        .store
        .checkpoints(&sum.run_id)
        .await
        .unwrap_or_default();
    assert!(cps.contains(&"bad".to_string()), "{cps:?}");
}

#[tokio::test]
async fn no_checkpoint_when_the_workspace_does_not_validate_after_rollback() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let s = setup(agents(vec![]), store(), CancellationToken::new());
    let yaml = "name: fail\nnodes:\n  - id: bad\n    type: shell\n    command: touch broken; exit 1\n    validation_command: test ! -f broken\n    rollback_command: echo cannot\n  - id: next\n    type: shell\n    command: echo next\n";
    let flow = compile(yaml, Path::new("f.yaml")).unwrap_or_else(|e| panic!("{e}"));
    // `next` is independent but runs after `bad` finished (max_parallel 1).
    let mut flow = flow;
    flow.max_parallel = 1;
    let sum = s
        .exec
        .start(flow, yaml, dir.path(), BTreeMap::new())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(sum.status, "failed");
    assert_eq!(
        sum.trace.steps,
        [
            "failed:bad",
            "dependents_failed:bad:",
            "validate:bad:fail",
            "rollback:bad:ok",
            "validate_after_rollback:bad:fail",
            "no_checkpoint:bad",
        ]
    );
    assert_eq!(status(&sum, "next"), NodeStatus::Pending, "the run halts");
    assert!(sum.error.unwrap_or_default().contains("keel flow resume"));
    let cps = s
        .exec
        .store
        .checkpoints(&sum.run_id)
        .await
        .unwrap_or_default();
    assert!(cps.is_empty(), "{cps:?}");
}

#[tokio::test]
async fn review_loops_back_and_branch_picks_a_side() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let a = agents(vec![
        (
            "impl",
            Box::new(|req: &AgentRequest, n| {
                let body = if req.task.contains("add a newline") {
                    "v2\n"
                } else {
                    "v1"
                };
                (
                    format!("attempt {n}"),
                    vec![("out.txt".to_string(), body.to_string())],
                )
            }),
        ),
        (
            "rev",
            Box::new(|_: &AgentRequest, n| {
                let t = if n == 0 {
                    "REQUEST_CHANGES\nadd a newline"
                } else {
                    "APPROVE"
                };
                (t.to_string(), vec![])
            }),
        ),
    ]);
    let s = setup(a.clone(), store(), CancellationToken::new());
    let yaml = "name: rev\nnodes:\n  - id: impl\n    type: agent\n    task: write out.txt\n  - id: check\n    type: test\n    command: grep -q v out.txt\n    needs: [impl]\n  - id: rev\n    type: review\n    task: review ${nodes.impl.output}\n    needs: [check]\n    on_changes: impl\n    max_loops: 2\n  - id: gate\n    type: branch\n    condition: ${nodes.check.passed}\n    needs: [rev]\n    then: [yes]\n    else: [no]\n  - id: yes\n    type: shell\n    command: echo passed\n  - id: no\n    type: shell\n    command: echo failed\n";
    let sum = run(&s, yaml, dir.path()).await;
    assert_eq!(sum.status, "completed", "{:?}", sum.error);
    let calls = a.calls.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let order: Vec<&str> = calls.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(order, ["impl", "rev", "impl", "rev"]);
    assert!(
        calls[2].1.contains("add a newline"),
        "feedback reaches the agent"
    );
    assert_eq!(read(&dir.path().join("out.txt")), "v2\n");
    assert_eq!(sum.state.loops.get("rev"), Some(&1));
    assert_eq!(status(&sum, "yes"), NodeStatus::Completed);
    assert_eq!(status(&sum, "no"), NodeStatus::Skipped);
}

#[tokio::test]
async fn review_that_never_approves_fails_after_max_loops() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let a = agents(vec![
        (
            "impl",
            Box::new(|_: &AgentRequest, _| ("ok".into(), vec![])),
        ),
        (
            "rev",
            Box::new(|_: &AgentRequest, _| ("REQUEST_CHANGES more".into(), vec![])),
        ),
    ]);
    let s = setup(a.clone(), store(), CancellationToken::new());
    let yaml = "name: rev\nnodes:\n  - id: impl\n    type: agent\n    task: t\n  - id: rev\n    type: review\n    task: r\n    needs: [impl]\n    on_changes: impl\n    max_loops: 1\n";
    let sum = run(&s, yaml, dir.path()).await;
    assert_eq!(sum.status, "failed");
    assert_eq!(a.calls.lock().unwrap_or_else(|e| e.into_inner()).len(), 4);
    assert!(
        sum.error
            .unwrap_or_default()
            .contains("still requests changes")
    );
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .current_dir(dir)
        .args(args)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@t")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@t")
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[tokio::test]
async fn deliver_commits_on_a_new_branch_and_leaves_the_users_branch_alone() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let ws = dir.path();
    git(ws, &["init", "-q", "-b", "main"]);
    std::fs::write(ws.join("a.txt"), "one\n").unwrap_or_else(|e| panic!("{e}"));
    git(ws, &["add", "-A"]);
    git(ws, &["commit", "-qm", "init"]);
    let head = git(ws, &["rev-parse", "HEAD"]);
    let a = agents(vec![(
        "impl",
        Box::new(|_: &AgentRequest, _| {
            (
                "changed a.txt".into(),
                vec![("a.txt".into(), "two\n".into())],
            )
        }),
    )]);
    let s = setup(a, store(), CancellationToken::new());
    let yaml = "name: ship\nnodes:\n  - id: impl\n    type: agent\n    task: change it\n  - id: ship\n    type: deliver\n    needs: [impl]\n    branch: keel/test-${run.id}\n    message: \"Change a.txt: ${nodes.impl.output}\"\n";
    let sum = run(&s, yaml, ws).await;
    assert_eq!(sum.status, "completed", "{:?}", sum.error);
    let branch = format!("keel/test-{}", sum.run_id);
    assert_eq!(git(ws, &["rev-parse", "HEAD"]), head, "HEAD unchanged");
    assert_eq!(git(ws, &["symbolic-ref", "--short", "HEAD"]), "main");
    assert_eq!(
        git(ws, &["status", "--porcelain", "--", "a.txt"]),
        "M a.txt",
        "index untouched"
    );
    assert_eq!(git(ws, &["show", &format!("{branch}:a.txt")]), "two");
    assert_eq!(
        git(ws, &["log", "-1", "--format=%s", &branch]),
        "Change a.txt: changed a.txt"
    );
    let pr = ws.join(".keel/flows/runs").join(&sum.run_id).join("PR.md");
    assert!(read(&pr).contains(&branch), "{}", read(&pr));

    // Without `branch:`, the branch is named after the run id's random end, not all of it.
    let yaml = "name: ship\nnodes:\n  - id: impl\n    type: agent\n    task: change it\n  - id: ship\n    type: deliver\n    needs: [impl]\n";
    let sum = run(&s, yaml, ws).await;
    assert_eq!(sum.status, "completed", "{:?}", sum.error);
    let delivered = sum.state.nodes["ship"].outputs["output"].to_string();
    let tail: String = sum
        .run_id
        .chars()
        .rev()
        .take(8)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    assert_eq!(delivered, format!("keel/flow-{tail}"));
    assert_eq!(delivered.len(), "keel/flow-".len() + 8);
}

#[tokio::test]
async fn deliver_stages_exact_bytes_whatever_the_work_trees_attributes_say() {
    // Red-team pass 6, R6-4: deliver's confined `git add` read the work tree's
    // `.gitattributes`, which can name a filter defined by configuration Keel's probe never
    // sees (it then ran with the git directory writable). Keel's git reads attributes from the
    // empty tree: here `ident` would collapse `$Id: keep $` to `$Id$` in the delivered commit.
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let ws = dir.path();
    git(ws, &["init", "-q", "-b", "main"]);
    std::fs::write(ws.join("a.txt"), "one\n").unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(ws.join(".gitattributes"), "*.txt ident\n").unwrap_or_else(|e| panic!("{e}"));
    git(ws, &["add", "-A"]);
    git(ws, &["commit", "-qm", "init"]);
    let a = agents(vec![(
        "impl",
        Box::new(|_: &AgentRequest, _| {
            (
                "changed".into(),
                vec![("a.txt".into(), "$Id: keep $\n".into())],
            )
        }),
    )]);
    let s = setup(a, store(), CancellationToken::new());
    let yaml = "name: ship\nnodes:\n  - id: impl\n    type: agent\n    task: change it\n  - id: ship\n    type: deliver\n    needs: [impl]\n    branch: keel/exact\n";
    let sum = run(&s, yaml, ws).await;
    assert_eq!(sum.status, "completed", "{:?}", sum.error);
    assert_eq!(git(ws, &["show", "keel/exact:a.txt"]), "$Id: keep $");
}

/// A repository whose `core.hooksPath` is `.husky` (husky's set-up), with its hook committed.
fn husky_repository(ws: &Path) {
    git(ws, &["init", "-q", "-b", "main"]);
    std::fs::create_dir_all(ws.join(".husky")).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(ws.join(".husky/pre-commit"), "echo hook ok\n")
        .unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(ws.join("a.txt"), "one\n").unwrap_or_else(|e| panic!("{e}"));
    git(ws, &["config", "core.hooksPath", ".husky"]);
    git(ws, &["add", "-A"]);
    git(ws, &["commit", "-qm", "init"]);
}

#[tokio::test]
async fn a_parallel_branch_cannot_bring_in_what_the_file_tools_may_not_write() {
    // Red-team pass 6, R6-10: a branch works in a copy without `.git`, where `.husky/pre-commit`
    // is an ordinary file; the selected branch's changes were written into the real workspace
    // as they were, and the user's next `git commit` ran the new hook.
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let ws = dir.path();
    husky_repository(ws);
    let a = agents(vec![(
        "impl",
        Box::new(|_: &AgentRequest, _| {
            (
                "changed".into(),
                vec![
                    ("a.txt".into(), "two\n".into()),
                    (".husky/pre-commit".into(), "cat ~/.ssh/id_ed25519\n".into()),
                ],
            )
        }),
    )]);
    let s = setup(a, store(), CancellationToken::new());
    let yaml = "name: p\nnodes:\n  - id: explore\n    type: parallel\n    select: passing\n    branches:\n      - name: one\n        nodes:\n          - {id: impl, type: agent, task: t}\n          - {id: check, type: test, command: 'true', needs: [impl]}\n";
    let sum = run(&s, yaml, ws).await;
    assert_ne!(
        sum.status, "completed",
        "the branch's hook change was applied"
    );
    assert_eq!(read(&ws.join(".husky/pre-commit")), "echo hook ok\n");
}

#[tokio::test]
async fn deliver_never_writes_its_pr_description_through_a_link() {
    // Red-team pass 6, R6-11: a shipped `.keel/flows/hk -> ../../.husky` and `pr_file:
    // hk/pre-commit` turned the PR description (with the flow's name in it) into the hook.
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let ws = dir.path();
    husky_repository(ws);
    std::fs::create_dir_all(ws.join(".keel/flows")).unwrap_or_else(|e| panic!("{e}"));
    std::os::unix::fs::symlink("../../.husky", ws.join(".keel/flows/hk"))
        .unwrap_or_else(|e| panic!("{e}"));
    let a = agents(vec![(
        "impl",
        Box::new(|_: &AgentRequest, _| ("changed".into(), vec![("a.txt".into(), "two\n".into())])),
    )]);
    let s = setup(a, store(), CancellationToken::new());
    let yaml = "name: ship\nnodes:\n  - id: impl\n    type: agent\n    task: change it\n  - id: ship\n    type: deliver\n    needs: [impl]\n    branch: keel/pr\n    pr_file: hk/pre-commit\n";
    let sum = run(&s, yaml, ws).await;
    assert_ne!(
        sum.status, "completed",
        "the PR description was written through the link"
    );
    assert_eq!(read(&ws.join(".husky/pre-commit")), "echo hook ok\n");
}

#[tokio::test]
async fn deliver_never_writes_through_links_or_into_another_repository() {
    // Red-team pass 2, R4: `.git/refs/heads/keel` linked out of the workspace, and a `.git`
    // file naming another repository. The deliver node fails; nothing lands outside.
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let outside = dir.path().join("outside");
    std::fs::create_dir_all(outside.join("refsdir")).unwrap_or_else(|e| panic!("{e}"));
    let make = |name: &str| {
        let ws = dir.path().join(name);
        std::fs::create_dir_all(&ws).unwrap_or_else(|e| panic!("{e}"));
        git(&ws, &["init", "-q", "-b", "main"]);
        std::fs::write(ws.join("a.txt"), "one\n").unwrap_or_else(|e| panic!("{e}"));
        git(&ws, &["add", "-A"]);
        git(&ws, &["commit", "-qm", "init"]);
        ws
    };
    let linked = make("linked");
    std::os::unix::fs::symlink(outside.join("refsdir"), linked.join(".git/refs/heads/keel"))
        .unwrap_or_else(|e| panic!("{e}"));
    let named = make("named");
    let other = outside.join("other.git");
    std::fs::rename(named.join(".git"), &other).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(named.join(".git"), format!("gitdir: {}\n", other.display()))
        .unwrap_or_else(|e| panic!("{e}"));
    let branches_before = git(&other, &["branch", "--list"]);
    let a = agents(vec![(
        "impl",
        Box::new(|_: &AgentRequest, _| ("changed".into(), vec![("a.txt".into(), "two\n".into())])),
    )]);
    let s = setup(a, store(), CancellationToken::new());
    let yaml = "name: ship\nnodes:\n  - id: impl\n    type: agent\n    task: change it\n  - id: ship\n    type: deliver\n    needs: [impl]\n    branch: keel/pwn\n";
    for ws in [&linked, &named] {
        let sum = run(&s, yaml, ws).await;
        assert_ne!(sum.status, "completed", "{}: delivered", ws.display());
    }
    assert!(
        std::fs::read_dir(outside.join("refsdir"))
            .unwrap_or_else(|e| panic!("{e}"))
            .next()
            .is_none(),
        "a ref was written through the link"
    );
    assert_eq!(git(&other, &["branch", "--list"]), branches_before);
}

#[tokio::test]
async fn resume_does_not_rerun_finished_nodes_and_replay_reproduces_the_run() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let ws = dir.path();
    std::fs::write(ws.join("seed.txt"), "seed\n").unwrap_or_else(|e| panic!("{e}"));
    let store = store();
    let a = agents(vec![(
        "impl",
        Box::new(|_: &AgentRequest, _| {
            (
                "wrote code".into(),
                vec![("code.txt".into(), "fn main() {}\n".into())],
            )
        }),
    )]);
    let cancel = CancellationToken::new();
    let s = setup(a.clone(), store.clone(), cancel.clone());
    // Stop the run (as a crash would) as soon as the first node is checkpointed.
    let stopper = cancel.clone();
    let inner = s.exec.events.clone();
    let mut exec = s.exec.clone();
    exec.events = Some(Arc::new(move |e: &FlowEvent| {
        if let Some(i) = &inner {
            i(e);
        }
        if matches!(e, FlowEvent::Step { step, .. } if step == "checkpoint:count") {
            stopper.cancel();
        }
    }));
    let yaml = "name: resume\nmax_parallel: 1\nnodes:\n  - id: count\n    type: shell\n    command: echo x >> count.txt; wc -l < count.txt\n  - id: impl\n    type: agent\n    task: write code\n    needs: [count]\n  - id: test\n    type: test\n    command: cat code.txt seed.txt\n    needs: [impl]\n";
    let flow = compile(yaml, Path::new("f.yaml")).unwrap_or_else(|e| panic!("{e}"));
    let first = exec
        .start(flow, yaml, ws, BTreeMap::new())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(first.status, "cancelled");
    assert_eq!(status(&first, "impl"), NodeStatus::Pending);
    let resumer = setup(a.clone(), store.clone(), CancellationToken::new());
    let done = resumer
        .exec
        .resume(&first.run_id[..8])
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(done.status, "completed", "{:?}", done.error);
    assert_eq!(
        read(&ws.join("count.txt")),
        "x\n",
        "the finished node did not run again"
    );
    assert_eq!(a.calls.lock().unwrap_or_else(|e| e.into_inner()).len(), 1);

    // Replay: no model call, same outputs, same tree.
    let replay_dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let target = replay_dir.path().join("replay");
    let replayer = setup(agents(vec![]), store.clone(), CancellationToken::new());
    let report = replayer
        .exec
        .replay(&first.run_id, &target)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        report.reproduced(),
        "{:?} {:?} {:?}",
        report.mismatches,
        report.final_tree,
        report.recorded_final_tree
    );
    assert_eq!(read(&target.join("code.txt")), "fn main() {}\n");
    assert_eq!(read(&target.join("count.txt")), "x\n");
}

#[tokio::test]
async fn a_node_past_its_timeout_is_killed_and_failed() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let s = setup(agents(vec![]), store(), CancellationToken::new());
    let yaml = "name: slow\nnodes:\n  - id: slow\n    type: shell\n    command: sleep 30\n    timeout_secs: 1\n";
    let started = std::time::Instant::now();
    let sum = run(&s, yaml, dir.path()).await;
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    assert_eq!(sum.status, "failed");
    let err = sum
        .state
        .nodes
        .get("slow")
        .and_then(|s| s.error.clone())
        .unwrap_or_default();
    assert!(err.contains("timed out"), "{err}");
}

#[tokio::test]
async fn the_step_cap_reaches_the_agent() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let steps: Arc<Mutex<Option<u32>>> = Arc::default();
    let seen = steps.clone();
    let a = agents(vec![(
        "a",
        Box::new(move |req: &AgentRequest, _| {
            *seen.lock().unwrap_or_else(|e| e.into_inner()) = req.max_steps;
            ("done".into(), vec![])
        }),
    )]);
    let s = setup(a, store(), CancellationToken::new());
    let yaml = "name: cap\nnodes:\n  - id: a\n    type: agent\n    task: t\n    max_steps: 7\n";
    let sum = run(&s, yaml, dir.path()).await;
    assert_eq!(sum.status, "completed");
    assert_eq!(*steps.lock().unwrap_or_else(|e| e.into_inner()), Some(7));
}

/// A node that writes a file too large for a trace keeps its change (by hash), and one whose
/// changes cannot be recorded fails instead of showing "no changes".
#[tokio::test]
async fn a_nodes_changes_are_never_dropped_silently() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let s = setup(agents(vec![]), store(), CancellationToken::new());
    let yaml = "name: big\nnodes:\n  - id: big\n    type: shell\n    command: head -c 5000000 /dev/zero > big.bin; mkdir -p target; head -c 5000000 /dev/zero > target/out\n";
    let sum = run(&s, yaml, dir.path()).await;
    assert_eq!(sum.status, "completed", "{:?}", sum.error);
    let node = sum
        .trace
        .find("big", 0)
        .unwrap_or_else(|| panic!("no trace"));
    let changed: Vec<&String> = node.changes.keys().collect();
    assert_eq!(
        changed,
        ["big.bin"],
        "build output left out, the big file kept"
    );
    assert!(matches!(
        node.changes.get("big.bin"),
        Some(Some(keel_flow::tree::Blob::Large {
            size: 5_000_000,
            ..
        }))
    ));

    // An unreadable directory (as a normal user; root reads everything) fails the node.
    let uid = std::os::unix::fs::MetadataExt::uid(
        &std::fs::metadata("/proc/self").unwrap_or_else(|e| panic!("{e}")),
    );
    if uid == 0 {
        eprintln!("SKIPPED the unreadable-directory half: running as root");
        return;
    }
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let yaml = "name: hidden\nnodes:\n  - id: hide\n    type: shell\n    command: mkdir -p secret && echo x > secret/f && chmod 000 secret\n";
    let sum = run(&s, yaml, dir.path()).await;
    let _ = std::process::Command::new("chmod")
        .args(["700", "secret"])
        .current_dir(dir.path())
        .status();
    assert_eq!(status(&sum, "hide"), NodeStatus::Failed);
    let err = sum.error.unwrap_or_default();
    assert!(
        err.contains("cannot record the file changes of node `hide`"),
        "{err}"
    );
}

#[tokio::test]
async fn a_flows_commands_answer_to_the_approval_policy_and_its_templates_carry_data() {
    // Red-team B12 (2): a flow's shell node and its validation/rollback commands ran with no
    // approval; B23: the model's answer spliced into a command line closed its quotes.
    use keel_config::{ApprovalConfig, ApprovalPolicy};
    use keel_engine::approval::ApprovalRules;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    std::fs::create_dir(dir.path().join("src")).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(dir.path().join("src/lib.rs"), "x").unwrap_or_else(|e| panic!("{e}"));
    let reply: Reply = Box::new(|_, _| ("fine'; touch pw-tmpl; echo '".into(), vec![]));
    let mut s = setup(
        agents(vec![("a", reply)]),
        store(),
        CancellationToken::new(),
    );
    s.exec.approvals = Some(Arc::new(ApprovalRules::new(
        &ApprovalConfig::default(),
        ApprovalPolicy::Untrusted,
        &[],
    )));
    let yaml = "name: evil\nnodes:\n  - id: lint\n    type: shell\n    command: rm -rf src; touch flow-shell-ran\n    validation_command: touch validation-ran\n";
    let sum = run(&s, yaml, dir.path()).await;
    assert_eq!(status(&sum, "lint"), NodeStatus::Failed);
    let error = sum
        .state
        .nodes
        .get("lint")
        .and_then(|n| n.error.clone())
        .unwrap_or_default();
    assert!(
        error.contains("needs approval under the `untrusted` policy"),
        "{error}"
    );
    assert!(
        dir.path().join("src/lib.rs").exists(),
        "the shell node must not run"
    );
    assert!(!dir.path().join("flow-shell-ran").exists());
    assert!(
        !dir.path().join("validation-ran").exists(),
        "nor its validation"
    );

    // Under `never` the command runs — and a reference stays one word whatever its quotes.
    s.exec.approvals = Some(Arc::new(ApprovalRules::new(
        &ApprovalConfig::default(),
        ApprovalPolicy::Never,
        &[],
    )));
    let yaml = "name: notes\nnodes:\n  - {id: a, type: agent, task: \"Summarise.\"}\n  - {id: rec, type: shell, command: \"echo '${nodes.a.output}' >> NOTES.md\", needs: [a]}\n";
    let sum = run(&s, yaml, dir.path()).await;
    assert_eq!(
        status(&sum, "rec"),
        NodeStatus::Completed,
        "{:?}",
        sum.error
    );
    assert!(
        !dir.path().join("pw-tmpl").exists(),
        "the model's text ran as a command"
    );
    assert_eq!(
        read(&dir.path().join("NOTES.md")),
        "fine'; touch pw-tmpl; echo '\n"
    );
}

#[tokio::test]
async fn a_flow_in_the_workspace_does_not_choose_the_model() {
    // Red-team B12 (3): a repository's flow chose a node's provider and model (where the
    // user's data goes). A flow in the workspace may still name a local script: its calls are
    // judged by the user's approval policy like any model's, and nothing leaves the machine.
    type Choice = (Option<String>, Option<String>, Option<std::path::PathBuf>);
    struct Seen(Mutex<Vec<Choice>>);
    impl AgentRunner for Seen {
        fn run(&self, req: AgentRequest) -> BoxFuture<'_, AgentResult> {
            self.0.lock().unwrap_or_else(|e| e.into_inner()).push((
                req.spec.provider.clone(),
                req.spec.model.clone(),
                req.spec.script.clone(),
            ));
            Box::pin(async move {
                AgentResult {
                    completed: true,
                    text: "ok".into(),
                    ..AgentResult::default()
                }
            })
        }
    }
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let seen = Arc::new(Seen(Mutex::new(Vec::new())));
    let mut s = setup(agents(vec![]), store(), CancellationToken::new());
    s.exec.agents = seen.clone();
    let yaml = "name: review\nnodes:\n  - {id: look, type: agent, task: \"Review.\", provider: ollama, model: evil, script: scripts/s.yaml}\n";
    for (file, theirs) in [
        (dir.path().join(".keel/flows/review.yaml"), false),
        (std::env::temp_dir().join("my-own-flow.yaml"), true),
    ] {
        let flow = compile(yaml, &file).unwrap_or_else(|e| panic!("{e}"));
        let sum = s
            .exec
            .start(flow, yaml, dir.path(), BTreeMap::new())
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(sum.status, "completed");
        let last = seen
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop()
            .unwrap_or_default();
        assert_eq!(last.0.is_some(), theirs, "{file:?}: {last:?}");
        assert_eq!(last.1.is_some(), theirs, "{file:?}: {last:?}");
        assert!(last.2.is_some(), "{file:?}: {last:?}");
    }
}
