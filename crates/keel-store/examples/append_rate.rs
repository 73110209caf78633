//! Events appended per second and append latency (p50, p99), SQLite vs PostgreSQL, in one
//! run: one writer appending in sequence, then 8 writers on 8 sessions at once.
//!
//! `cargo run -p keel-store --features postgres --example append_rate -- [N] [POSTGRES_URL]`
//! (URL default: `KEEL_TEST_DATABASE_URL`; without one only SQLite is measured).

use std::sync::Arc;
use std::time::{Duration, Instant};

use keel_protocol::{Event, EventKind};
use keel_store::{NewSession, PgStore, SqliteStore, Store, StoreError};

fn session(id: &str) -> NewSession {
    NewSession {
        id: id.into(),
        workspace: "/w".into(),
        task: "bench".into(),
        provider: "scripted".into(),
        model: "scripted".into(),
        mode: "react".into(),
        base_url: String::new(),
        script: String::new(),
        repo: None,
    }
}

fn event(id: &str, i: u32) -> Event {
    Event {
        session_id: id.into(),
        seq: 0,
        ts: 1,
        run_id: "r".into(),
        parent_run_id: None,
        kind: EventKind::AssistantDelta {
            text: format!("a token of streamed text {i}"),
            channel: keel_protocol::DeltaChannel::Text,
        },
    }
}

fn unique(tag: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("bench-{tag}-{nanos}")
}

fn pct(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted.get(i).copied().unwrap_or_default()
}

async fn measure(name: &str, store: Arc<dyn Store>, n: u32) -> Result<(), StoreError> {
    let id = unique(name);
    store.create_session(&session(&id)).await?;
    let mut lat = Vec::with_capacity(n as usize);
    let start = Instant::now();
    for i in 0..n {
        let t = Instant::now();
        store.append_event(&event(&id, i)).await?;
        lat.push(t.elapsed());
    }
    let total = start.elapsed();
    lat.sort_unstable();
    println!(
        "{name:8} 1 writer : {:7.0} events/s  p50 {:?}  p99 {:?}",
        f64::from(n) / total.as_secs_f64(),
        pct(&lat, 0.5),
        pct(&lat, 0.99)
    );

    const WRITERS: u32 = 8;
    let start = Instant::now();
    let mut tasks = Vec::new();
    for w in 0..WRITERS {
        let store = store.clone();
        let id = unique(&format!("{name}-{w}"));
        tasks.push(tokio::spawn(async move {
            store.create_session(&session(&id)).await?;
            for i in 0..n / WRITERS {
                store.append_event(&event(&id, i)).await?;
            }
            Ok::<_, StoreError>(())
        }));
    }
    for t in tasks {
        t.await.map_err(|e| StoreError::Internal(e.to_string()))??;
    }
    let total = start.elapsed();
    println!(
        "{name:8} {WRITERS} writers: {:7.0} events/s",
        f64::from(n / WRITERS * WRITERS) / total.as_secs_f64()
    );
    Ok(())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 4)]
async fn main() -> Result<(), StoreError> {
    let mut args = std::env::args().skip(1);
    let n: u32 = args.next().and_then(|s| s.parse().ok()).unwrap_or(2000);
    let url = args
        .next()
        .or_else(|| std::env::var("KEEL_TEST_DATABASE_URL").ok());
    let dir = std::env::temp_dir().join(unique("sqlite"));
    let sqlite = Arc::new(SqliteStore::open(&dir.join("keel.db"))?);
    measure("sqlite", sqlite, n).await?;
    let _ = std::fs::remove_dir_all(&dir);
    match url {
        Some(url) => {
            let pg = PgStore::connect(&url).await?;
            pg.migrate().await?;
            measure("postgres", Arc::new(pg), n).await?;
        }
        None => println!("postgres: skipped (no URL; set KEEL_TEST_DATABASE_URL)"),
    }
    Ok(())
}
