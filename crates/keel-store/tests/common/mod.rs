//! Helpers shared by the store's integration tests: unique names and a fresh PostgreSQL
//! database per test (`KEEL_TEST_DATABASE_URL`; skipped visibly without it, a failure in CI).

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

/// A session id unique to this process and moment (runs may share a Postgres database).
pub fn unique(tag: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{tag}-{}-{nanos}", std::process::id())
}

/// The Postgres URL, or `None` after saying why the Postgres half is skipped (a failure in CI).
pub fn test_database_url() -> Option<String> {
    match std::env::var("KEEL_TEST_DATABASE_URL") {
        Ok(url) if !url.trim().is_empty() => Some(url),
        _ => {
            let what = "KEEL_TEST_DATABASE_URL is not set: start PostgreSQL and set it, e.g. \
                        `source .ci/postgres.sh` (as root) exports \
                        postgres://keelpg@127.0.0.1:55432/keel_test";
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "the Postgres store suite must run in CI: {what}"
            );
            eprintln!("SKIPPED: the Postgres store suite: {what}");
            None
        }
    }
}

/// A new, empty database on the test server, so every run starts from an empty schema.
#[cfg(feature = "postgres")]
pub struct FreshDb {
    base: String,
    name: String,
    pub url: String,
}

#[cfg(feature = "postgres")]
impl FreshDb {
    pub async fn create(base: &str) -> Self {
        use sqlx::Connection;
        let name = unique("keel_suite").replace('-', "_");
        let mut conn = sqlx::PgConnection::connect(base).await.unwrap();
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
            .execute(&mut conn)
            .await
            .unwrap();
        let (prefix, _) = base.rsplit_once('/').expect("a database URL ends in /NAME");
        let url = format!("{prefix}/{name}");
        Self {
            base: base.to_string(),
            name,
            url,
        }
    }

    pub async fn drop_now(self) {
        use sqlx::Connection;
        let mut conn = sqlx::PgConnection::connect(&self.base).await.unwrap();
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
            "DROP DATABASE IF EXISTS {} WITH (FORCE)",
            self.name
        )))
        .execute(&mut conn)
        .await
        .unwrap();
    }
}

/// A migrated PostgreSQL store on a fresh database (drop it with `FreshDb::drop_now`), or
/// `None` after saying why the Postgres half is skipped.
#[cfg(feature = "postgres")]
pub async fn migrated_store() -> Option<(FreshDb, std::sync::Arc<keel_store::PgStore>)> {
    let base = test_database_url()?;
    let db = FreshDb::create(&base).await;
    let store = std::sync::Arc::new(keel_store::PgStore::connect(&db.url).await.unwrap());
    store.migrate().await.unwrap();
    Some((db, store))
}

/// Says that the Postgres half of `suite` (test file `file`) did not run because keel-store
/// was built without the `postgres` feature (a failure in CI).
pub fn skipped_without_postgres_feature(suite: &str, file: &str) {
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "the Postgres {suite} must run in CI: build with `--features postgres`"
    );
    eprintln!(
        "SKIPPED: the Postgres {suite}: keel-store was built without the `postgres` feature; \
         run `cargo test -p keel-store --features postgres --test {file}`"
    );
}

/// The three tests of a suite that runs on both backends: `run_suite(name, store)` on a fresh
/// SQLite store, on a migrated PostgreSQL store (skipped without a test database), and the
/// skip notice when keel-store is built without the `postgres` feature.
#[macro_export]
macro_rules! on_both_backends {
    ($run_suite:ident, $suite:literal, $file:literal, $workers:literal) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = $workers)]
        async fn sqlite_passes_the_suite() {
            let dir = tempfile::tempdir().unwrap();
            let store = std::sync::Arc::new(
                keel_store::SqliteStore::open(&dir.path().join("keel.db")).unwrap(),
            );
            $run_suite("sqlite", store).await;
        }

        #[cfg(feature = "postgres")]
        #[tokio::test(flavor = "multi_thread", worker_threads = $workers)]
        async fn postgres_passes_the_suite() {
            let Some((db, store)) = migrated_store().await else {
                return;
            };
            $run_suite("postgres", store).await;
            db.drop_now().await;
        }

        #[cfg(not(feature = "postgres"))]
        #[test]
        fn postgres_passes_the_suite() {
            skipped_without_postgres_feature($suite, $file);
        }
    };
}
