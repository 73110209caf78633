//! `keel db migrate`: applies the store's schema migrations and prints what ran — to the
//! PostgreSQL database named by `--database`, `KEEL_DATABASE_URL` or `[database] url`, else
//! to the local SQLite session database.

use clap::{Args, Subcommand};
use keel_config::Layer;
use keel_store::{PgStore, SqliteDb};

use crate::{exit, setup};

#[derive(Debug, Args)]
pub struct DbArgs {
    #[command(subcommand)]
    pub command: DbCommand,
}

#[derive(Debug, Subcommand)]
pub enum DbCommand {
    /// Apply the schema migrations the database has not had yet and print them (safe to run
    /// again, and from several machines at once).
    Migrate {
        /// PostgreSQL database: postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE. Default:
        /// `[database] url` in the user configuration; none: the local SQLite session database.
        #[arg(
            long,
            value_name = "URL",
            env = "KEEL_DATABASE_URL",
            hide_env_values = true
        )]
        database: Option<String>,
    },
}

pub fn execute(args: DbArgs) -> anyhow::Result<u8> {
    match args.command {
        DbCommand::Migrate { database } => migrate(database),
    }
}

fn migrate(flag: Option<String>) -> anyhow::Result<u8> {
    let cwd = setup::workspace_dir(None)?;
    let config = setup::load_config(&cwd, Layer::from_overrides(&[]))?;
    let url = flag
        .filter(|u| !u.trim().is_empty())
        .or_else(|| config.database.url.clone());
    match url {
        Some(url) => migrate_postgres(url.trim()),
        None => migrate_sqlite(&config),
    }
}

/// `keel doctor`'s database line, when a PostgreSQL URL is configured (`KEEL_DATABASE_URL` or
/// `[database] url`): reachable, and migrated to this keel's schema.
pub fn health_check(config: &keel_engine::Config) -> Option<crate::check::Check> {
    use crate::check::{Check, Status};
    let url = setup::env_var("KEEL_DATABASE_URL")
        .filter(|u| !u.trim().is_empty())
        .or_else(|| config.database.url.clone())?;
    let url = url.trim().to_string();
    let shown = keel_store::redact_url(&url);
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => return Some(Check::new("database", Status::Fail, e.to_string())),
    };
    let result = runtime.block_on(async {
        let store = PgStore::connect(&url).await?;
        store.is_current().await
    });
    Some(match result {
        Ok(true) => Check::new(
            "database",
            Status::Ok,
            format!(
                "{shown}: reachable, schema version {}",
                PgStore::schema_version()
            ),
        ),
        Ok(false) => Check::new(
            "database",
            Status::Fail,
            format!("{shown}: reachable, but its schema is behind; run `keel db migrate`"),
        ),
        Err(e) => Check::new("database", Status::Fail, e.to_string()),
    })
}

/// `keel doctor`'s queue line, beside the database line: the turn queue's tables, waiting and
/// running turns, live workers.
pub fn queue_check(config: &keel_engine::Config) -> Option<crate::check::Check> {
    use crate::check::{Check, Status};
    let url = setup::env_var("KEEL_DATABASE_URL")
        .filter(|u| !u.trim().is_empty())
        .or_else(|| config.database.url.clone())?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .ok()?;
    Some(match runtime.block_on(keel_queue::status(url.trim())) {
        Ok(Some(s)) => Check::new(
            "queue",
            if s.pending > 0 && s.live_workers == 0 {
                Status::Warn
            } else {
                Status::Ok
            },
            format!(
                "{} waiting, {} running, {}{}",
                keel_tools::text::count(s.pending as usize, "turn", "turns"),
                s.running,
                keel_tools::text::count(s.live_workers as usize, "live worker", "live workers"),
                if s.pending > 0 && s.live_workers == 0 {
                    "; start one with `keel worker`"
                } else {
                    ""
                }
            ),
        ),
        Ok(None) => Check::new(
            "queue",
            Status::Fail,
            "the job queue's tables are missing; run `keel db migrate`",
        ),
        Err(e) => Check::new("queue", Status::Fail, e.to_string()),
    })
}

fn migrate_postgres(url: &str) -> anyhow::Result<u8> {
    if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
        return Err(setup::UsageError(format!(
            "`{}` is not a PostgreSQL URL; write it as postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE (without --database, `keel db migrate` migrates the local SQLite database)",
            keel_store::redact_url(url)
        ))
        .into());
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let (shown, applied) = runtime.block_on(async {
        let store = PgStore::connect(url).await?;
        let applied = store.migrate().await?;
        // The job queue's tables (schema `apalis`), for `keel serve --database` and workers.
        keel_queue::connect(url).await?;
        Ok::<_, anyhow::Error>((store.display_url().to_string(), applied))
    })?;
    if applied.is_empty() {
        say!(
            "{shown} is up to date (schema version {}); no migration to apply.",
            PgStore::schema_version()
        );
    } else {
        for m in &applied {
            say!("applied migration {}: {}", m.version, m.name);
        }
        say!(
            "{shown} is at schema version {} ({} migration{} applied).",
            PgStore::schema_version(),
            applied.len(),
            if applied.len() == 1 { "" } else { "s" }
        );
    }
    Ok(exit::COMPLETED)
}

fn migrate_sqlite(config: &keel_engine::Config) -> anyhow::Result<u8> {
    let path = match config.store.path.clone() {
        Some(p) => p,
        None => {
            let dir = keel_config::data_dir(&setup::env_var);
            keel_store::private::tighten_private_dir(&dir)?;
            dir.join("keel.db")
        }
    };
    let before = SqliteDb::schema_version_at(&path)?.unwrap_or(0);
    // Opening migrates.
    let after = SqliteDb::open(&path)?.schema_version()?;
    if after == before {
        say!(
            "{} is up to date (schema version {after}); no migration to apply.",
            path.display()
        );
    } else {
        say!(
            "{}: applied migrations {} to {after} (schema version {after}).",
            path.display(),
            before + 1
        );
    }
    Ok(exit::COMPLETED)
}
