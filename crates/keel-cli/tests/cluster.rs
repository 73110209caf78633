//! Stateless `keel serve --database` and `keel worker` end to end, as real processes on
//! loopback ports sharing one PostgreSQL database (a fresh one per test; needs
//! `KEEL_TEST_DATABASE_URL`, e.g. what `.ci/run` exports — skipped visibly without it, a
//! failure in CI):
//! - two servers and three workers: scripted sessions created and sent through both servers
//!   all complete, and a WebSocket client attached to the *other* server receives every event
//!   of each session exactly once, in seq order;
//! - a worker killed with SIGKILL mid-turn: another worker takes the job over once the dead
//!   one's heartbeats stop, resumes the session from its last stored event, and the session
//!   completes with no event lost or duplicated.

#![allow(clippy::disallowed_macros, clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use serde_json::json;

mod cluster_common;

use cluster_common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_servers_three_workers_run_every_session_and_stream_each_event_once() {
    let Some(base) = test_database_url() else {
        return;
    };
    let url = fresh_database(&base, "many").await;
    let script = "turns:\n  - text: \"step one\"\n    delay_ms: 50\n    tool_calls:\n      - name: read_file\n        arguments: {path: src/lib.rs}\n  - text: \"done\"\n";
    let mut cluster = Cluster::new(url, script);
    cluster.start_server();
    cluster.start_server();
    // KEEL_CLUSTER_WORKERS and KEEL_CLUSTER_SESSIONS change the shape for the figures.
    let workers = env_count("KEEL_CLUSTER_WORKERS", 3);
    for _ in 0..workers {
        cluster.start_worker();
    }
    let a = cluster.servers[0].addr.clone();
    let b = cluster.servers[1].addr.clone();
    let n = env_count("KEEL_CLUSTER_SESSIONS", 30);
    let started = Instant::now();
    let mut watchers = Vec::new();
    let mut ids = Vec::new();
    for i in 0..n {
        // Created and sent through one server, watched on the other.
        let (via, other) = if i % 2 == 0 { (&a, &b) } else { (&b, &a) };
        let id = create_session(via);
        let watcher = tokio::spawn(watch(other.clone(), id.clone(), Duration::from_secs(600)));
        // The socket subscribes from seq 0, so sending before it is attached loses nothing.
        let (via, id2) = (via.clone(), id.clone());
        tokio::task::spawn_blocking(move || send(&via, &id2, "read the library"))
            .await
            .unwrap();
        watchers.push(watcher);
        ids.push((id, other.clone()));
    }
    let mut latencies = Vec::new();
    for (w, (id, other)) in watchers.into_iter().zip(&ids) {
        let events = w.await.unwrap();
        latencies.extend(events.iter().filter_map(|e| e["_latency_ms"].as_u64()));
        let last = events.last().unwrap();
        assert_eq!(last["status"], "completed", "session {id}: {last}");
        let (other, id) = (other.clone(), id.clone());
        tokio::task::spawn_blocking(move || assert_exactly_once(&other, &id, &events))
            .await
            .unwrap();
    }
    let elapsed = started.elapsed();
    latencies.sort_unstable();
    let pct = |p: usize| latencies[(latencies.len() * p / 100).min(latencies.len() - 1)];
    eprintln!(
        "{n} sessions through 2 servers and {workers} workers in {:.1} s ({:.2} turns/s); event delivery p50 {} ms, p99 {} ms over {} events",
        elapsed.as_secs_f64(),
        n as f64 / elapsed.as_secs_f64(),
        pct(50),
        pct(99),
        latencies.len()
    );
    // Every worker's /health answers; together they ran every turn.
    let mut completed = 0;
    for w in &cluster.workers {
        let (status, health) = request(&w.addr, "GET", "/health", None);
        assert_eq!(status, 200);
        assert_eq!(health["status"], "ok");
        assert_eq!(health["running"], 0);
        completed += health["completed"].as_u64().unwrap();
    }
    assert_eq!(completed, n as u64);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_killed_mid_turn_hands_its_job_to_another_and_the_session_completes() {
    let Some(after) = takeover_after_kill(&[]).await else {
        return;
    };
    println!("killed worker's turn taken over after {after} ms (1 s heartbeats)");
    assert!(after <= 6_000, "taken over only {after} ms after the kill");
}

/// The same run's baseline for PERFORMANCE.md (issue 34): the previous defaults, 5 s
/// heartbeats and 15 s run leases. Run with `--include-ignored --nocapture` beside the test
/// above.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a benchmark baseline (takes ~30 s): run with --include-ignored"]
async fn baseline_a_worker_killed_with_the_previous_heartbeat_settings() {
    let old = [
        ("KEEL_WORKER__HEARTBEAT_SECS", "5".to_string()),
        ("KEEL_STORE__LEASE_TTL_SECS", "15".to_string()),
    ];
    if let Some(after) = takeover_after_kill(&old).await {
        println!(
            "baseline: killed worker's turn taken over after {after} ms (5 s heartbeats, 15 s leases)"
        );
    }
}

/// Kills the worker running a turn (workers started with `env`); how long after the kill
/// another worker's run of the session began, in ms. `None` without a test database.
async fn takeover_after_kill(env: &[(&str, String)]) -> Option<u64> {
    let base = test_database_url()?;
    let url = fresh_database(&base, "kill").await;
    // The first reply takes long enough to kill its worker while it waits.
    let script = "turns:\n  - text: \"thinking\"\n    delay_ms: 3000\n    tool_calls:\n      - name: read_file\n        arguments: {path: src/lib.rs}\n  - text: \"done\"\n";
    let mut cluster = Cluster::new(url, script);
    cluster.start_server();
    cluster.start_worker_env(env);
    cluster.start_worker_env(env);
    let server = cluster.servers[0].addr.clone();
    let id = create_session(&server);
    let watcher = tokio::spawn(watch(server.clone(), id.clone(), Duration::from_secs(300)));
    let (s2, id2) = (server.clone(), id.clone());
    tokio::task::spawn_blocking(move || send(&s2, &id2, "read the library"))
        .await
        .unwrap();
    // Once the turn has stored its first events, find the worker running it (its /health
    // says so) and kill it.
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let (_, stored) = request(
            &server,
            "GET",
            &format!("/api/v1/sessions/{id}/events"),
            None,
        );
        if kinds(stored.as_array().unwrap()).contains(&"turn_started".to_string()) {
            break;
        }
        assert!(Instant::now() < deadline, "the turn did not start");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    cluster.kill_busy_worker(deadline, "the turn");
    let killed_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let events = watcher.await.unwrap();
    let last = events.last().unwrap();
    assert_eq!(last["status"], "completed", "{last}");
    // The other worker took the session over within seconds: its run's first event.
    let first_run = events
        .iter()
        .find(|e| e["type"] == "turn_started")
        .map(|e| e["run_id"].clone())
        .unwrap();
    let taken_ms = events
        .iter()
        .find(|e| {
            e["run_id"].is_string()
                && e["run_id"] != first_run
                && e["ts"].as_u64().unwrap_or(0) >= killed_ms
        })
        .and_then(|e| e["ts"].as_u64())
        .unwrap();
    let (s3, id3) = (server.clone(), id.clone());
    tokio::task::spawn_blocking(move || assert_exactly_once(&s3, &id3, &events))
        .await
        .unwrap();
    let (_, health) = request(&cluster.workers[0].addr, "GET", "/health", None);
    assert_eq!(health["completed"], 1, "{health}");
    Some(taken_ms.saturating_sub(killed_ms))
}

/// The baseline for the figures (run with `--ignored`): the same sessions on one `keel serve`
/// with its SQLite store, turns in the server, watched on the same server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: cargo test -p keel-cli --test cluster -- --ignored --nocapture"]
async fn baseline_sqlite_single_process() {
    let script = "turns:\n  - text: \"step one\"\n    delay_ms: 50\n    tool_calls:\n      - name: read_file\n        arguments: {path: src/lib.rs}\n  - text: \"done\"\n";
    let mut cluster = Cluster::new(String::new(), script);
    let ws = cluster.workspace.display().to_string();
    let p = cluster.spawn(
        &["serve", "--port", "0", "--token", TOKEN, "-w", &ws],
        "Keel is serving",
        "Press Ctrl-C",
    );
    cluster.servers.push(p);
    let a = cluster.servers[0].addr.clone();
    let n = env_count("KEEL_CLUSTER_SESSIONS", 30);
    let started = Instant::now();
    let mut watchers = Vec::new();
    let mut senders = Vec::new();
    for _ in 0..n {
        let id = create_session(&a);
        watchers.push(tokio::spawn(watch(
            a.clone(),
            id.clone(),
            Duration::from_secs(600),
        )));
        let a = a.clone();
        senders.push(tokio::task::spawn_blocking(move || {
            let (status, body) = request(
                &a,
                "POST",
                &format!("/api/v1/sessions/{id}/messages"),
                Some(&json!({"content": "read the library"})),
            );
            assert_eq!(status, 200, "{body}");
        }));
    }
    let mut latencies = Vec::new();
    for w in watchers {
        let events = w.await.unwrap();
        assert_eq!(events.last().unwrap()["status"], "completed");
        latencies.extend(events.iter().filter_map(|e| e["_latency_ms"].as_u64()));
    }
    for s in senders {
        s.await.unwrap();
    }
    let elapsed = started.elapsed();
    latencies.sort_unstable();
    let pct = |p: usize| latencies[(latencies.len() * p / 100).min(latencies.len() - 1)];
    eprintln!(
        "{n} sessions on one SQLite server in {:.1} s ({:.2} turns/s); event delivery p50 {} ms, p99 {} ms over {} events",
        elapsed.as_secs_f64(),
        n as f64 / elapsed.as_secs_f64(),
        pct(50),
        pct(99),
        latencies.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_stopped_with_sigterm_finishes_its_running_turn_first() {
    let Some(base) = test_database_url() else {
        return;
    };
    let url = fresh_database(&base, "term").await;
    let script = "turns:\n  - text: \"slow\"\n    delay_ms: 2000\n";
    let mut cluster = Cluster::new(url, script);
    cluster.start_server();
    cluster.start_worker();
    let server = cluster.servers[0].addr.clone();
    let id = create_session(&server);
    let watcher = tokio::spawn(watch(server.clone(), id.clone(), Duration::from_secs(300)));
    let (s2, id2) = (server.clone(), id.clone());
    tokio::task::spawn_blocking(move || send(&s2, &id2, "go"))
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    while request(&cluster.workers[0].addr, "GET", "/health", None).1["running"] != 1 {
        assert!(
            Instant::now() < deadline,
            "the worker did not take the turn"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut worker = cluster.workers.remove(0);
    let pid = nix::unistd::Pid::from_raw(worker.child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    let status = tokio::task::spawn_blocking(move || worker.child.wait().unwrap())
        .await
        .unwrap();
    assert_eq!(status.code(), Some(0), "the worker stops cleanly");
    // The turn had finished before the worker exited: no other worker is running.
    let events = watcher.await.unwrap();
    assert_eq!(events.last().unwrap()["status"], "completed");
    tokio::task::spawn_blocking(move || assert_exactly_once(&server, &id, &events))
        .await
        .unwrap();
}
