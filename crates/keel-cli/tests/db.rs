//! `keel db migrate` end to end: against PostgreSQL (a fresh database per run; needs
//! `KEEL_TEST_DATABASE_URL`, e.g. what `.ci/run` exports — skipped visibly without it, a
//! failure in CI) the first run applies every migration and the next ones apply nothing,
//! whether the URL comes from `--database`, `[database] url` or `KEEL_DATABASE_URL`; without a
//! URL it migrates the local SQLite session database. `keel doctor` reports the database's
//! schema before and after.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use sqlx::Connection;

mod common;
use common::*;

fn run(env: &Env, args: &[&str], extra_env: Option<(&str, &str)>) -> (String, String) {
    let mut cmd = env.keel();
    cmd.args(args);
    if let Some((k, v)) = extra_env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    assert_exit(&out, 0);
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The test server's URL, or `None` after saying why this is skipped (a failure in CI).
fn test_database_url() -> Option<String> {
    postgres_test_url("`keel db migrate`")
}

/// A new, empty database on the test server; returns its URL and name.
fn fresh_database(base_url: &str) -> (String, String) {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let name = format!("keel_db_test_{}_{nanos}", std::process::id());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut conn = sqlx::PgConnection::connect(base_url).await.unwrap();
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
            .execute(&mut conn)
            .await
            .unwrap();
    });
    let (prefix, _) = base_url.rsplit_once('/').unwrap();
    (format!("{prefix}/{name}"), name)
}

fn drop_database(base_url: &str, name: &str) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut conn = sqlx::PgConnection::connect(base_url).await.unwrap();
        let _ = sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
            "DROP DATABASE IF EXISTS {name} WITH (FORCE)"
        )))
        .execute(&mut conn)
        .await;
    });
}

#[test]
fn migrate_applies_each_postgres_migration_once() {
    let Some(base) = test_database_url() else {
        return;
    };
    let (url, name) = fresh_database(&base);
    let env = Env::new();
    let doctor = |env: &Env| {
        let out = env
            .keel()
            .args(["doctor", "--provider", "scripted"])
            .env("KEEL_DATABASE_URL", &url)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let before = doctor(&env);
    assert!(
        before.contains("schema is behind; run `keel db migrate`"),
        "doctor sees the unmigrated database:\n{before}"
    );
    assert!(
        before.contains("the job queue's tables are missing; run `keel db migrate`"),
        "doctor sees the queue missing:\n{before}"
    );

    let (first, _) = run(&env, &["db", "migrate", "--database", &url], None);
    assert!(
        first.contains("applied migration 1: sessions"),
        "the first run applies the schema:\n{first}"
    );
    let applied = first.matches("applied migration").count();
    assert!(applied >= 3, "{first}");
    assert!(
        first.contains(&format!("({applied} migrations applied)")),
        "{first}"
    );

    // Again, from the user's configuration: nothing to apply.
    env.user_config(&format!("[database]\nurl = \"{url}\"\n"));
    let (second, _) = run(&env, &["db", "migrate"], None);
    assert!(!second.contains("applied migration"), "{second}");
    assert!(second.contains("is up to date"), "{second}");

    // And from KEEL_DATABASE_URL.
    let (third, _) = run(&env, &["db", "migrate"], Some(("KEEL_DATABASE_URL", &url)));
    assert!(third.contains("is up to date"), "{third}");
    let after = doctor(&env);
    assert!(after.contains("reachable, schema version"), "{after}");
    assert!(
        after.contains("0 turns waiting, 0 running, 0 live workers"),
        "{after}"
    );
    drop_database(&base, &name);
}

#[test]
fn a_project_cannot_choose_the_database() {
    let env = Env::new();
    env.config("[database]\nurl = \"postgres://elsewhere/db\"\n");
    let (out, err) = run(&env, &["db", "migrate"], None);
    assert!(err.contains("database"), "the ignored key is named: {err}");
    assert!(
        out.contains("keel.db"),
        "the local SQLite database was migrated: {out}"
    );
}

#[test]
fn migrate_without_a_url_migrates_the_local_sqlite_database() {
    let env = Env::new();
    let (first, _) = run(&env, &["db", "migrate"], None);
    assert!(
        first.contains("keel.db: applied migrations 1 to"),
        "{first}"
    );
    let (second, _) = run(&env, &["db", "migrate"], None);
    assert!(second.contains("is up to date"), "{second}");
}

#[test]
fn a_url_that_is_not_postgres_is_a_usage_error() {
    let env = Env::new();
    let out = env
        .keel()
        .args(["db", "migrate", "--database", "mysql://u:secret@h/d"])
        .output()
        .unwrap();
    assert_exit(&out, 2);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not a PostgreSQL URL"), "{err}");
    assert!(!err.contains("secret"), "the password never shows: {err}");
}
