//! What the `keel` binary's end-to-end tests share: an isolated environment (temp workspace,
//! temp home and data directory, a cleared process environment) and small JSON/exit helpers.

// Tests start programs of their own (the keel binary, git fixtures, tmux, servers): allowed
// here, outside Keel's one spawn path (docs/SECURITY.md, "One way to start a process").
#![allow(clippy::disallowed_methods)]
#![allow(dead_code)] // each test file uses a different subset

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

#[path = "../shared/pg_url.rs"]
mod pg_url;
#[allow(unused_imports)] // the files that test on PostgreSQL use it
pub use pg_url::postgres_test_url;

/// The repository root (for `examples/` and fixtures).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// Copies a directory tree.
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// One JSON value per stdout line (`keel run --json`, `keel sessions show --json`).
pub fn json_lines(stdout: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l:?}: {e}")))
        .collect()
}

/// Asserts an exit code, showing both streams when it differs.
pub fn assert_exit(out: &Output, code: i32) {
    assert_eq!(
        out.status.code(),
        Some(code),
        "stdout: {}\nstderr: {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A temp copy of a repository and an isolated home and data directory.
pub struct Env {
    _tmp: tempfile::TempDir,
    pub work: PathBuf,
    pub home: PathBuf,
}

impl Env {
    /// A copy of `examples/demo-repo`.
    pub fn new() -> Self {
        Self::with_repo(&repo_root().join("examples/demo-repo"))
    }

    /// A copy of the repository at `source`.
    pub fn with_repo(source: &Path) -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let work = tmp.path().join("repo");
        let home = tmp.path().join("home");
        std::fs::create_dir_all(&home).unwrap();
        copy_dir(source, &work);
        Self {
            _tmp: tmp,
            work,
            home,
        }
    }

    /// The `keel` binary in the workspace with nothing from the caller's environment but
    /// `PATH`. The per-edit check and final verification are off: they would run the
    /// toolchain, which the temp HOME cannot reach, and they make event streams vary.
    pub fn keel(&self) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_keel"));
        cmd.current_dir(&self.work)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &self.home)
            .env("KEEL_HOME", self.home.join("data"))
            .env("KEEL_SHELL__LINT__ENABLED", "false")
            .env("KEEL_VERIFY__ENABLED", "false")
            .env("NO_COLOR", "1");
        cmd
    }

    /// [`Env::keel`] with rustup's and cargo's homes reachable, for runs that build or test.
    pub fn keel_with_toolchain(&self) -> Command {
        let mut cmd = self.keel();
        let real_home = std::env::var_os("HOME")
            .map(PathBuf::from)
            .unwrap_or_default();
        for (var, default) in [("RUSTUP_HOME", ".rustup"), ("CARGO_HOME", ".cargo")] {
            let dir = std::env::var_os(var)
                .map(PathBuf::from)
                .unwrap_or_else(|| real_home.join(default));
            if dir.exists() {
                cmd.env(var, dir);
            }
        }
        cmd
    }

    /// Writes a script (or any file) into the temp home and returns its path.
    pub fn script(&self, name: &str, body: &str) -> PathBuf {
        let p = self.home.join(name);
        std::fs::write(&p, body).unwrap();
        p
    }

    /// Writes the user's own config (`$HOME/.config/keel/config.toml`), trusted unlike the
    /// workspace's.
    pub fn user_config(&self, text: &str) {
        let dir = self.home.join(".config/keel");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("config.toml"), text).unwrap();
    }

    /// Writes the workspace's `.keel/config.toml`.
    pub fn config(&self, text: &str) {
        std::fs::create_dir_all(self.work.join(".keel")).unwrap();
        std::fs::write(self.work.join(".keel/config.toml"), text).unwrap();
    }
}

/// Where a `keel serve` listens and the bearer token its URL carries (`#token=…`).
pub struct Rest {
    pub addr: String,
    pub token: String,
}

pub fn http(rest: &Rest, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
    use std::io::{Read, Write};
    let Rest { addr, token } = rest;
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    let body = body.map(Value::to_string).unwrap_or_default();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    (status, serde_json::from_str(body).unwrap_or_default())
}

/// `keel serve --port 0` in the workspace: the process, its URL and its address with token.
pub fn serve(env: &Env) -> (std::process::Child, String, Rest) {
    let mut cmd = env.keel();
    cmd.args(["serve", "--port", "0"]);
    serve_by(cmd)
}

/// Starts `cmd`, a `keel serve` printing its URL first: the process, the URL and its
/// address with token.
pub fn serve_by(mut cmd: Command) -> (std::process::Child, String, Rest) {
    use std::io::BufRead;
    let mut child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    out.read_line(&mut first).unwrap();
    // Keep reading: a closed pipe would end the server at its next line of output.
    std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
    let url = first
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap()
        .to_string();
    let (base, token) = url
        .split_once("#token=")
        .expect("the URL carries the token");
    let addr = base
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_string();
    let rest = Rest {
        addr,
        token: token.to_string(),
    };
    (child, url, rest)
}
