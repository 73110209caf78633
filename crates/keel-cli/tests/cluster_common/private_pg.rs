//! A private PostgreSQL cluster for one test (initdb into a temp dir, a free loopback port),
//! which the test may stop and start again — never the shared server other tests use. As
//! root it runs as the unprivileged user `keelpg` (`.ci/postgres.sh` creates it) through
//! `runuser`; skipped visibly when PostgreSQL's programs are missing outside CI.

// Tests start programs of their own (the keel binary, git fixtures, tmux, servers): allowed
// here, outside Keel's one spawn path (docs/SECURITY.md, "One way to start a process").
#![allow(clippy::disallowed_macros, clippy::disallowed_methods)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A running private cluster; stopped (immediately) and removed on drop.
pub struct PrivatePg {
    bin: PathBuf,
    /// `runuser -u keelpg --` as root, else nothing.
    run_as: Vec<String>,
    _dir: tempfile::TempDir,
    data: PathBuf,
    log: PathBuf,
    socket_dir: PathBuf,
    pub port: u16,
}

/// The directory with `initdb` and `pg_ctl` (the newest `/usr/lib/postgresql/*/bin`, or the
/// one on `PATH`).
fn pg_bin() -> Option<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("bin"))
        .filter(|b| b.join("initdb").is_file() && b.join("pg_ctl").is_file())
        .collect();
    found.sort_by_key(|b| {
        b.parent()
            .and_then(|v| v.file_name())
            .and_then(|v| v.to_str())
            .and_then(|v| v.parse::<u32>().ok())
            .unwrap_or(0)
    });
    if let Some(b) = found.pop() {
        return Some(b);
    }
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .find(|d| d.join("initdb").is_file() && d.join("pg_ctl").is_file())
}

fn skip_or_fail(what: &str) -> Option<PrivatePg> {
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "the database restart test must run in CI: {what}"
    );
    eprintln!("SKIPPED: database restart test: {what}");
    None
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

fn check(what: &str, out: std::io::Result<Output>, log: &Path) {
    let out = out.unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        out.status.success(),
        "{what}: {}{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        std::fs::read_to_string(log).unwrap_or_default()
    );
}

impl PrivatePg {
    /// initdb + start on a free port; `None` (skipped) without PostgreSQL outside CI.
    pub fn start() -> Option<Self> {
        let Some(bin) = pg_bin() else {
            return skip_or_fail(
                "initdb and pg_ctl were not found (install PostgreSQL, e.g. `apt-get install postgresql`)",
            );
        };
        let run_as = if is_root() {
            let known = Command::new("id")
                .args(["-u", "keelpg"])
                .output()
                .is_ok_and(|o| o.status.success());
            if !known {
                return skip_or_fail(
                    "PostgreSQL refuses to run as root and the user `keelpg` does not exist (`source .ci/postgres.sh` creates it)",
                );
            }
            vec!["runuser".into(), "-u".into(), "keelpg".into(), "--".into()]
        } else {
            Vec::new()
        };
        let dir = tempfile::Builder::new()
            .prefix("keel-private-pg")
            .tempdir()
            .unwrap();
        if !run_as.is_empty() {
            let out = Command::new("chown")
                .args(["-R", "keelpg"])
                .arg(dir.path())
                .output();
            check("chown keelpg", out, Path::new("/dev/null"));
        }
        let data = dir.path().join("data");
        let log = dir.path().join("server.log");
        let socket_dir = dir.path().to_path_buf();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let pg = Self {
            bin,
            run_as,
            _dir: dir,
            data,
            log,
            socket_dir,
            port,
        };
        let out = pg
            .command("initdb")
            .arg("-D")
            .arg(&pg.data)
            .args([
                "-U",
                "keelpg",
                "--auth-local=trust",
                "--auth-host=trust",
                "-E",
                "UTF8",
                "--no-sync",
            ])
            .output();
        check("initdb", out, &pg.log);
        pg.start_again();
        Some(pg)
    }

    fn command(&self, program: &str) -> Command {
        let exe = self.bin.join(program);
        let mut cmd = match self.run_as.split_first() {
            Some((first, rest)) => {
                let mut c = Command::new(first);
                c.args(rest).arg(&exe);
                c
            }
            None => Command::new(&exe),
        };
        // pg_ctl must not inherit the test's working directory if keelpg cannot read it.
        cmd.current_dir(&self.socket_dir);
        cmd
    }

    /// `postgres://keelpg@127.0.0.1:PORT/DB`.
    pub fn url(&self, db: &str) -> String {
        format!("postgres://keelpg@127.0.0.1:{}/{db}", self.port)
    }

    /// Starts the server (again, on the same port and data directory), waiting until it
    /// accepts connections.
    pub fn start_again(&self) {
        let opts = format!(
            "-c listen_addresses=127.0.0.1 -p {} -k {} -c max_connections=200 -c fsync=off",
            self.port,
            self.socket_dir.display()
        );
        let out = self
            .command("pg_ctl")
            .arg("-D")
            .arg(&self.data)
            .arg("-l")
            .arg(&self.log)
            .args(["-w", "-t", "120", "-o", &opts, "start"])
            .output();
        check("pg_ctl start", out, &self.log);
    }

    /// `pg_ctl stop -m fast`: open connections are cut, running statements roll back.
    pub fn stop_fast(&self) {
        let out = self
            .command("pg_ctl")
            .arg("-D")
            .arg(&self.data)
            .args(["-w", "-t", "120", "-m", "fast", "stop"])
            .output();
        check("pg_ctl stop", out, &self.log);
    }

    /// A new database on this cluster.
    pub async fn create_database(&self, name: &str) -> String {
        use sqlx::Connection;
        let mut conn = sqlx::PgConnection::connect(&self.url("postgres"))
            .await
            .unwrap();
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
            .execute(&mut conn)
            .await
            .unwrap();
        let _ = conn.close().await;
        self.url(name)
    }
}

impl Drop for PrivatePg {
    fn drop(&mut self) {
        let _ = self
            .command("pg_ctl")
            .arg("-D")
            .arg(&self.data)
            .args(["-m", "immediate", "stop"])
            .output();
    }
}
