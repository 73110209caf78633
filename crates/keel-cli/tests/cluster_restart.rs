//! The shared database restarts during a run (`keel serve --database` and `keel worker` as
//! real processes on a private PostgreSQL cluster of this test, never the shared one other
//! tests use): two servers, two workers and six scripted sessions whose turns take seconds;
//! PostgreSQL is stopped (`pg_ctl stop -m fast`) while turns are in flight and started again
//! a few seconds later on the same port and data directory. Meanwhile the workers' /health
//! says the database is down, API calls answer 503 at once and `keel doctor` fails its
//! database check; afterwards every session
//! completes and a WebSocket attached to the other server receives each of its events
//! exactly once, in seq order — no job lost, no event duplicated, `seq` gap-free.

#![allow(clippy::disallowed_macros, clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

mod cluster_common;

use cluster_common::private_pg::PrivatePg;
use cluster_common::*;

/// `GET path` on `addr` in a blocking thread.
async fn get(addr: &str, path: &str) -> (u16, serde_json::Value) {
    let (addr, path) = (addr.to_string(), path.to_string());
    tokio::task::spawn_blocking(move || request(&addr, "GET", &path, None))
        .await
        .unwrap()
}

/// Polls `/health` of every worker until `pred` holds for all of them.
async fn wait_workers(
    cluster: &Cluster,
    what: &str,
    limit: Duration,
    pred: impl Fn(&serde_json::Value) -> bool,
) {
    let deadline = Instant::now() + limit;
    loop {
        let mut all = true;
        let mut seen = Vec::new();
        for w in &cluster.workers {
            let (_, h) = get(&w.addr, "/health").await;
            all &= pred(&h);
            seen.push(h);
        }
        if all {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "workers: {what} not within {limit:?}; /health: {seen:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_restart_mid_run_loses_no_job_and_no_event() {
    let Some(pg) = PrivatePg::start() else {
        return;
    };
    let url = pg.create_database("keel_restart").await;
    // Each turn: a slow first reply with a tool call, then a slower answer, so turns are in
    // flight (waiting on the model, or storing events) when the database goes away.
    let script = "turns:\n  - text: \"looking\"\n    delay_ms: 1500\n    tool_calls:\n      - name: read_file\n        arguments: {path: src/lib.rs}\n  - text: \"done\"\n    delay_ms: 1500\n";
    let mut cluster = Cluster::new(url, script);
    cluster.start_server();
    cluster.start_server();
    cluster.start_worker();
    cluster.start_worker();
    let a = cluster.servers[0].addr.clone();
    let b = cluster.servers[1].addr.clone();
    let mut watchers = Vec::new();
    let mut ids = Vec::new();
    for i in 0..6 {
        // Created and sent through one server, watched on the other.
        let (via, other) = if i % 2 == 0 { (&a, &b) } else { (&b, &a) };
        let (v, o) = (via.clone(), other.clone());
        let id = tokio::task::spawn_blocking(move || create_session(&v))
            .await
            .unwrap();
        // Attached before the database goes away (a new socket then would get 503).
        let socket = attach(&o, &id).await;
        watchers.push(tokio::spawn(watch_socket(
            socket,
            id.clone(),
            Duration::from_secs(600),
        )));
        let (v, id2) = (via.clone(), id.clone());
        tokio::task::spawn_blocking(move || send(&v, &id2, "read the library"))
            .await
            .unwrap();
        ids.push((id, o));
    }
    // Turns are in flight: both workers busy if that shows within a few seconds (on a loaded
    // machine one may still be starting), at least one in any case.
    let deadline = Instant::now() + Duration::from_secs(120);
    let both_by = Instant::now() + Duration::from_secs(10);
    loop {
        let mut busy = 0;
        for w in &cluster.workers {
            busy += usize::from(get(&w.addr, "/health").await.1["running"] == 1);
        }
        if busy == 2 || (busy == 1 && Instant::now() > both_by) {
            break;
        }
        assert!(Instant::now() < deadline, "no worker took a turn");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    pg.stop_fast();
    let stopped = Instant::now();
    // Meanwhile, all at once (the outage stays short): `keel doctor` fails its database
    // check, an API call answers 503 with a clear message instead of hanging, and the
    // workers notice and say so (they do not exit).
    let mut doctor = cluster.keel();
    doctor
        .args([
            "doctor",
            "--provider",
            "scripted",
            "--script",
            "script.yaml",
        ])
        .env("KEEL_DATABASE_URL", &cluster.url);
    let doctor = tokio::task::spawn_blocking(move || doctor.output().unwrap());
    let api = {
        let path = format!("/api/v1/sessions/{}/events", ids[0].0);
        let a = a.clone();
        tokio::spawn(async move {
            let asked = Instant::now();
            let answer = get(&a, &path).await;
            (answer, asked.elapsed())
        })
    };
    wait_workers(&cluster, "database down", Duration::from_secs(60), |h| {
        h["database"] == "down" && h["status"] == "degraded"
    })
    .await;
    let ((status, body), took) = api.await.unwrap();
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error_code"], "database_unavailable", "{body}");
    assert!(
        body["message"].as_str().unwrap().contains("unreachable"),
        "{body}"
    );
    assert!(took < Duration::from_secs(30), "the 503 took {took:?}");
    let out = doctor.await.unwrap();
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{report}");
    let line = report
        .lines()
        .find(|l| l.split_whitespace().nth(1) == Some("database"))
        .unwrap_or_default();
    assert!(
        line.starts_with('✗') && line.contains("check that PostgreSQL is running"),
        "{report}"
    );
    // Down for a few seconds in all (KEEL_RESTART_DOWN_SECS tries longer outages).
    let down = env_count("KEEL_RESTART_DOWN_SECS", 4) as u64;
    let pause = Duration::from_secs(down).saturating_sub(stopped.elapsed());
    tokio::time::sleep(pause).await;
    pg.start_again();
    let down_for = stopped.elapsed();
    let restarted = Instant::now();
    for w in &mut cluster.workers {
        assert!(
            w.child.try_wait().unwrap().is_none(),
            "a worker exited while the database was down"
        );
    }

    for (w, (id, other)) in watchers.into_iter().zip(&ids) {
        let events = w.await.unwrap();
        let last = events.last().unwrap();
        let seen: Vec<String> = events
            .iter()
            .map(|e| format!("{} {} {}", e["seq"], e["type"], e["run_id"]))
            .collect();
        assert_eq!(
            last["status"], "completed",
            "session {id}: {last}; {seen:#?}"
        );
        let (other, id) = (other.clone(), id.clone());
        tokio::task::spawn_blocking(move || assert_exactly_once(&other, &id, &events))
            .await
            .unwrap();
    }
    eprintln!(
        "database down for {:.1} s; every session completed {:.1} s after it was back",
        down_for.as_secs_f64(),
        restarted.elapsed().as_secs_f64()
    );
    // The workers are healthy again and idle; every turn was run (a turn finished during
    // the outage is not run twice: its job, handed back, finds it finished).
    wait_workers(
        &cluster,
        "healthy and idle",
        Duration::from_secs(120),
        |h| h["database"] == "up" && h["status"] == "ok" && h["running"] == 0,
    )
    .await;
    let mut completed = 0;
    for w in &cluster.workers {
        let (_, h) = get(&w.addr, "/health").await;
        completed += h["completed"].as_u64().unwrap();
    }
    assert_eq!(completed, 6, "turns run to their end");
    // Every session's turn ran once (no job re-run after its turn had finished): one
    // session_started and one turn_finished each, with nothing after it.
    for (id, other) in &ids {
        let (_, stored) = get(other, &format!("/api/v1/sessions/{id}/events")).await;
        let kinds = kinds(stored.as_array().unwrap());
        let count = |k: &str| kinds.iter().filter(|x| *x == k).count();
        assert_eq!(count("session_started"), 1, "session {id}: {kinds:?}");
        assert_eq!(count("turn_finished"), 1, "session {id}: {kinds:?}");
        assert_eq!(kinds.last().unwrap(), "turn_finished", "session {id}");
    }
}
