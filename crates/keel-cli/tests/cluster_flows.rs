//! Flow runs as jobs (real `keel worker` processes, a fresh PostgreSQL database; needs
//! `KEEL_TEST_DATABASE_URL` — skipped visibly without it, a failure in CI): `keel flow run FILE
//! --queue` stores the run as queued and returns; a worker runs it (an agent node on the
//! scripted provider, shell nodes), checkpointing every node in the database; the worker is
//! killed with SIGKILL mid-run and another worker resumes the run from its last checkpoint,
//! without running finished nodes again.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cluster_common;

use std::process::Command;
use std::time::{Duration, Instant};

use cluster_common::*;
use serde_json::Value;

const FLOW: &str = "name: queued\nmax_parallel: 1\nnodes:\n  - id: look\n    type: agent\n    task: \"Read the library.\"\n  - id: count\n    type: shell\n    needs: [look]\n    command: echo x >> count.txt\n  - id: wait\n    type: shell\n    needs: [count]\n    command: while [ ! -f go ]; do sleep 0.1; done; echo waited\n  - id: after\n    type: shell\n    needs: [wait]\n    command: cat count.txt\n";

fn flow_cmd(cluster: &Cluster, args: &[&str]) -> Command {
    let mut cmd = cluster.keel();
    cmd.env("KEEL_DATABASE_URL", &cluster.url)
        .arg("flow")
        .args(args);
    cmd
}

fn status(cluster: &Cluster, run: &str) -> Value {
    let out = flow_cmd(cluster, &["status", run, "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "keel flow status: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn a_queued_flow_runs_on_a_worker_and_resumes_on_another_after_a_kill() {
    let Some(base) = test_database_url() else {
        return;
    };
    let url = tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(fresh_database(&base, "flows"));
    let script = "turns:\n  - text: \"reading\"\n    tool_calls:\n      - name: read_file\n        arguments: {path: src/lib.rs}\n  - text: \"done\"\n";
    let mut cluster = Cluster::new(url, script);
    std::fs::write(cluster.workspace.join("queued.yaml"), FLOW).unwrap();

    // Without a database URL, --queue says what it needs.
    let out = cluster
        .keel()
        .args(["flow", "run", "queued.yaml", "--queue"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("KEEL_DATABASE_URL") && err.contains("keel worker"),
        "{err}"
    );

    // Queued before any worker runs: it waits.
    // The model is the user's choice (a flow in the workspace may not pick one).
    let out = flow_cmd(
        &cluster,
        &[
            "run",
            "queued.yaml",
            "--queue",
            "--json",
            "--provider",
            "scripted",
            "--script",
            "script.yaml",
        ],
    )
    .output()
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let queued: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(queued["status"], "queued", "{queued}");
    let run = queued["run_id"].as_str().unwrap().to_string();
    assert_eq!(status(&cluster, &run)["status"], "queued");

    cluster.start_worker();
    cluster.start_worker();
    // Once `count` has checkpointed (`wait` then blocks until `go` exists), kill the worker
    // running the flow.
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let rec = status(&cluster, &run);
        if rec["nodes"]["count"]["status"] == "completed" {
            assert_eq!(rec["nodes"]["look"]["status"], "completed", "{rec}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the flow never reached `wait`: {rec}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    cluster.kill_busy_worker(deadline, "the flow");
    std::fs::write(cluster.workspace.join("go"), "").unwrap();

    // The other worker takes the job over once the dead one's heartbeats and the run's lease
    // have expired, and finishes the run from its checkpoint.
    let rec = loop {
        let rec = status(&cluster, &run);
        if rec["status"] == "completed" || rec["status"] == "failed" {
            break rec;
        }
        assert!(Instant::now() < deadline, "the run did not finish: {rec}");
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(rec["status"], "completed", "{rec}");
    assert_eq!(rec["nodes"]["after"]["outputs"]["output"], "x", "{rec}");
    // `look` and `count` ran once: one line, and one agent session.
    assert_eq!(
        std::fs::read_to_string(cluster.workspace.join("count.txt")).unwrap(),
        "x\n"
    );
    let (_, health) = request(&cluster.workers[0].addr, "GET", "/health", None);
    assert_eq!(health["completed"], 1, "{health}");
    assert_eq!(health["running"], 0, "{health}");
}
