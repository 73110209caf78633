//! `keel serve` as a real process: start-up output, the token rule, graceful stop, and the web
//! UI driven in headless chromium (web/tests/ui.test.mjs).

// Tests start programs of their own (the keel binary, git fixtures, tmux, servers): allowed
// here, outside Keel's one spawn path (docs/SECURITY.md, "One way to start a process").
#![allow(
    clippy::disallowed_macros,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::disallowed_methods
)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::repo_root;

/// A `keel serve` process in a temp workspace with its own data directory.
struct Served {
    child: Child,
    url: String,
    /// Lines printed after the first one (the token line, when generated).
    extra: Vec<String>,
    _tmp: tempfile::TempDir,
    workspace: PathBuf,
    /// Keel's data directory (`KEEL_HOME`).
    data: PathBuf,
}

impl Served {
    fn start(args: &[&str]) -> Self {
        Self::start_with_env(args, &[])
    }

    fn start_with_env(args: &[&str], envs: &[(&str, &str)]) -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let workspace = tmp.path().join("repo");
        let home = tmp.path().join("home");
        std::fs::create_dir_all(workspace.join("src")).unwrap();
        std::fs::create_dir_all(&home).unwrap();
        std::fs::write(
            workspace.join("src/lib.rs"),
            "pub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n",
        )
        .unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_keel"))
            .arg("serve")
            .args(["--port", "0", "-w"])
            .arg(&workspace)
            .args(args)
            .current_dir(&workspace)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &home)
            .env("KEEL_HOME", home.join("data"))
            .env("KEEL_SHELL__LINT__ENABLED", "false")
            .env("KEEL_VERIFY__ENABLED", "false")
            .envs(envs.iter().copied())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut first = String::new();
        out.read_line(&mut first).unwrap();
        let url = first
            .split_whitespace()
            .find(|w| w.starts_with("http://"))
            .unwrap_or_else(|| panic!("no URL in `{first}`"))
            .to_string();
        let mut extra = Vec::new();
        loop {
            let mut line = String::new();
            if out.read_line(&mut line).unwrap() == 0 || line.starts_with("Press Ctrl-C") {
                break;
            }
            extra.push(line.trim().to_string());
        }
        Self {
            child,
            url,
            extra,
            _tmp: tmp,
            workspace,
            data: home.join("data"),
        }
    }

    /// The token in the printed URL (`#token=…`).
    fn token(&self) -> Option<String> {
        self.url
            .split_once("#token=")
            .map(|(_, t)| t.trim().to_string())
    }

    fn addr(&self) -> String {
        self.url
            .trim_start_matches("http://")
            .split(['/', '#'])
            .next()
            .unwrap()
            .to_string()
    }

    /// A GET with optional bearer token: the status code and the response as text.
    fn get(&self, path: &str, token: Option<&str>) -> (u16, String) {
        let mut s = TcpStream::connect(self.addr()).unwrap();
        let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
        write!(
            s,
            "GET {path} HTTP/1.1\r\nHost: {}\r\n{auth}Connection: close\r\n\r\n",
            self.addr()
        )
        .unwrap();
        let mut text = String::new();
        s.read_to_string(&mut text).unwrap();
        let status = text
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        (status, text)
    }

    /// A GET with optional bearer token; returns the status code.
    fn get_status(&self, path: &str, token: Option<&str>) -> u16 {
        self.get(path, token).0
    }

    /// A GET with the token; the JSON body.
    fn get_json(&self, path: &str) -> serde_json::Value {
        let (_, text) = self.get(path, self.token().as_deref());
        let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
        serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {text}"))
    }

    /// A JSON POST; returns the status code and the body.
    fn post(&self, path: &str, body: &serde_json::Value) -> (u16, serde_json::Value) {
        let mut s = TcpStream::connect(self.addr()).unwrap();
        let body = body.to_string();
        let auth = self
            .token()
            .map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
        write!(
            s,
            "POST {path} HTTP/1.1\r\nHost: {}\r\n{auth}Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            self.addr(),
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

    /// Sends SIGTERM and waits for a clean exit.
    fn stop(mut self) -> (Option<i32>, String) {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
        let started = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                let mut err = String::new();
                if let Some(mut e) = self.child.stderr.take() {
                    e.read_to_string(&mut err).unwrap();
                }
                return (status.code(), err);
            }
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "keel serve did not stop within 20 s of SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn serve_on_loopback_generates_a_private_token_and_stops_cleanly_on_sigterm() {
    let served = Served::start(&[]);
    assert!(
        served.url.starts_with("http://127.0.0.1:"),
        "{}",
        served.url
    );
    let token = served.token().expect("the URL carries the token");
    assert_eq!(token.len(), 64, "{}", served.url);
    let file = served.data.join("server-token");
    assert!(
        served
            .extra
            .iter()
            .any(|l| l.contains(&file.display().to_string())),
        "the token line names the file: {:?}",
        served.extra
    );
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "readable only by the user");
        assert_eq!(std::fs::read_to_string(&file).unwrap().trim(), token);
    }
    // Another local process without the token cannot drive it.
    assert_eq!(served.get_status("/api/v1/sessions", None), 401);
    let (status, _) = {
        let mut s = TcpStream::connect(served.addr()).unwrap();
        let body = r#"{"workspace": "/", "script": "/etc/passwd"}"#;
        write!(
            s,
            "POST /api/v1/sessions HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            served.addr(),
            body.len()
        )
        .unwrap();
        let mut text = String::new();
        s.read_to_string(&mut text).unwrap();
        (text.split_whitespace().nth(1).map(str::to_string), text)
    };
    assert_eq!(status.as_deref(), Some("401"));
    assert_eq!(served.get_status("/api/v1/sessions", Some(&token)), 200);
    assert_eq!(
        served.get_status("/", None),
        200,
        "the page itself is public"
    );
    // With the token, still only the workspace it was started in.
    let (status, body) = served.post("/api/v1/sessions", &serde_json::json!({"workspace": "/"}));
    assert_eq!(status, 403, "{body}");
    let (code, err) = served.stop();
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("stopping"), "{err}");
}

#[test]
fn serve_refuses_to_start_in_the_root_directory() {
    let out = Command::new(env!("CARGO_BIN_EXE_keel"))
        .args(["serve", "--port", "0", "-w", "/"])
        .env("KEEL_HOME", tempfile::tempdir().unwrap().path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("system directory"), "{err}");
}

#[test]
fn serve_on_a_public_address_generates_and_requires_a_token() {
    let served = Served::start(&["--host", "0.0.0.0"]);
    let token_line = served
        .extra
        .iter()
        .find(|l| l.starts_with("API token"))
        .unwrap_or_else(|| panic!("the token is printed: {:?}", served.extra));
    let token = token_line.rsplit(' ').next().unwrap().to_string();
    assert_eq!(token.len(), 64, "{token_line}");
    assert!(
        served.url.contains(&format!("#token={token}")),
        "{}",
        served.url
    );
    assert_eq!(served.get_status("/api/v1/sessions", None), 401);
    assert_eq!(served.get_status("/api/v1/sessions", Some(&token)), 200);
    let (code, _) = served.stop();
    assert_eq!(code, Some(0));
}

#[test]
fn serve_with_a_given_token_prints_the_address_that_opens_the_ui_with_it() {
    const TOKEN: &str = "my-own-token-0123456789";
    let served = Served::start(&["--token", TOKEN]);
    assert!(
        served.url.ends_with(&format!("/#token={TOKEN}")),
        "the printed address carries the token, as the token dialog says: {}",
        served.url
    );
    assert_eq!(served.token().as_deref(), Some(TOKEN));
    assert!(
        served
            .extra
            .iter()
            .any(|l| l.contains("the one you configured")),
        "{:?}",
        served.extra
    );
    assert_eq!(served.get_status("/api/v1/sessions", Some(TOKEN)), 200);
    assert_eq!(served.get_status("/api/v1/sessions", None), 401);
    let (code, _) = served.stop();
    assert_eq!(code, Some(0));
}

#[test]
fn serve_refuses_a_token_too_short_to_be_safe() {
    let out = Command::new(env!("CARGO_BIN_EXE_keel"))
        .args(["serve", "--port", "0", "--token", "short"])
        .env("KEEL_HOME", tempfile::tempdir().unwrap().path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("at least 16"), "{err}");
}

#[test]
fn server_sessions_use_the_cli_provider_setup_real_providers_included() {
    use keel_llm::mock::{MockReply, MockServer, bodies};
    const KEY: &str = "sk-serve-SECRET-0a1b2c3d";
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mock = rt
        .block_on(MockServer::queue(vec![
            MockReply::sse(bodies::openai(
                "",
                "Let me look.",
                &[("call_1", "list_files", "{}")],
                (1200, 15),
            )),
            MockReply::sse(bodies::openai("", "It holds src/lib.rs.", &[], (1400, 9))),
        ]))
        .unwrap();
    let base_url = format!("{}/v1", mock.url());
    let served = Served::start_with_env(
        &[
            "--provider",
            "openai",
            "--model",
            "gpt-4o",
            "--base-url",
            &base_url,
        ],
        &[("OPENAI_API_KEY", KEY)],
    );
    // The serve flags are the defaults of a session that names no provider.
    let (status, session) = served.post("/api/v1/sessions", &serde_json::json!({}));
    assert_eq!(status, 201, "{session}");
    assert_eq!(session["provider"], "openai");
    assert_eq!(session["model"], "gpt-4o");
    let id = session["id"].as_str().unwrap();
    let (status, turn) = served.post(
        &format!("/api/v1/sessions/{id}/messages"),
        &serde_json::json!({"content": "what is in this repository?"}),
    );
    assert_eq!(status, 200, "{turn}");
    assert_eq!(turn["status"], "completed", "{turn}");
    assert_eq!(turn["final_text"], "It holds src/lib.rs.");
    assert_eq!(turn["usage"]["requests"], 2);
    assert!(
        turn["usage"]["cost_usd"].as_f64().unwrap() > 0.0,
        "priced like keel run"
    );
    assert!(
        !turn.to_string().contains(KEY),
        "the key never reaches a client"
    );
    let sent = mock.requests();
    assert_eq!(sent.len(), 2);
    assert_eq!(sent[0].json()["model"], "gpt-4o");

    // A provider without its key is refused when the session is created, naming the variable.
    let (status, err) = served.post(
        "/api/v1/sessions",
        &serde_json::json!({"provider": "anthropic", "model": "claude-sonnet-4-5"}),
    );
    assert_eq!(status, 422, "{err}");
    assert_eq!(err["error_code"], "provider_error");
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .contains("ANTHROPIC_API_KEY"),
        "{err}"
    );
    let (code, stderr) = served.stop();
    assert_eq!(code, Some(0), "{stderr}");
    assert!(!stderr.contains(KEY));
}

/// The shape of an event stream: each event's type and what identifies it beyond ids and
/// clocks (a tool's name and error flag, a status).
fn shape(events: &[serde_json::Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| {
            let t = e["type"].as_str().unwrap_or("?");
            match t {
                "tool_call" => format!("{t}:{}", e["name"]),
                "tool_result" => format!("{t}:{}:{}", e["name"], e["is_error"]),
                "session_finished" | "turn_finished" => format!("{t}:{}", e["status"]),
                _ => t.to_string(),
            }
        })
        .collect()
}

#[test]
fn keel_run_and_keel_serve_emit_the_same_turn() {
    let served = Served::start(&[]);
    std::fs::write(
        served.workspace.join("s.yaml"),
        "turns:\n  - text: \"Looking.\"\n    tool_calls: [{name: list_files, arguments: {}}]\n  - text: \"It holds src/lib.rs.\"\n",
    )
    .unwrap();
    let (status, session) =
        served.post("/api/v1/sessions", &serde_json::json!({"script": "s.yaml"}));
    assert_eq!(status, 201, "{session}");
    let id = session["id"].as_str().unwrap();
    let (status, turn) = served.post(
        &format!("/api/v1/sessions/{id}/messages"),
        &serde_json::json!({"content": "what is here?"}),
    );
    assert_eq!(status, 200, "{turn}");
    let over_http = shape(turn["events"].as_array().unwrap());

    let out = Command::new(env!("CARGO_BIN_EXE_keel"))
        .args(["run", "--json", "--script", "s.yaml", "what is here?"])
        .current_dir(&served.workspace)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", served.data.parent().unwrap())
        .env("KEEL_HOME", &served.data)
        .env("KEEL_SHELL__LINT__ENABLED", "false")
        .env("KEEL_VERIFY__ENABLED", "false")
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let from_cli: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        shape(&from_cli),
        over_http,
        "one session runtime, one event sequence"
    );
    assert_eq!(over_http.last().unwrap(), "turn_finished:\"completed\"");
    let (code, stderr) = served.stop();
    assert_eq!(code, Some(0), "{stderr}");
}

/// What the browser test needs, or why it cannot run.
fn browser_prerequisites(tests_dir: &Path) -> Result<(), String> {
    let node = Command::new("node").arg("--version").output();
    if !node.is_ok_and(|o| o.status.success()) {
        return Err("node is not installed (apt-get install nodejs npm)".into());
    }
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    if !Path::new(&chromium).exists() {
        return Err(format!(
            "chromium is not at {chromium} (apt-get install chromium, or set CHROMIUM)"
        ));
    }
    if !tests_dir.join("node_modules/playwright-core").is_dir() {
        return Err(format!(
            "playwright-core is not installed: run `npm ci --prefix {}`",
            tests_dir.display()
        ));
    }
    Ok(())
}

#[test]
fn the_web_ui_works_in_a_real_browser() {
    let root = repo_root();
    let tests_dir = root.join("web/tests");
    if let Err(why) = browser_prerequisites(&tests_dir) {
        // Outside CI (a developer's fresh machine) a missing browser skips the test loudly;
        // in CI, where .ci/run installs everything, it is a failure.
        if std::env::var_os("CI").is_none() {
            use std::io::Write;
            // Written to the real stderr: cargo's output capture would hide an eprintln!.
            let _ = writeln!(
                std::io::stderr(),
                "SKIPPED the_web_ui_works_in_a_real_browser: {why} (.ci/run installs chromium, node and playwright-core)"
            );
            return;
        }
        panic!("the browser test cannot run in CI: {why}. .ci/run installs everything it needs");
    }
    // plan_exec reaches delivery only after a change and a passing check: the project's tests
    // are a script that passes.
    let served = Served::start_with_env(&[], &[("KEEL_SHELL__TEST_COMMAND", "sh tests.sh")]);
    std::fs::write(served.workspace.join("tests.sh"), "echo '1 passed'\n").unwrap();
    let shots = Path::new(env!("CARGO_TARGET_TMPDIR")).join("browser");
    // Scripts must come from under the server's workspace roots: copy them in.
    let fixtures = served.workspace.join("fixtures");
    std::fs::create_dir_all(&fixtures).unwrap();
    for name in ["react.yaml", "plan_exec.yaml", "approval.yaml"] {
        std::fs::copy(tests_dir.join("fixtures").join(name), fixtures.join(name)).unwrap();
    }
    // A session stored by `keel run` outside the server's roots (as evals do, in temp
    // directories), in the same store: neither the API nor the sidebar lists it.
    const OUTSIDE_TASK: &str = "a session outside the roots";
    let elsewhere = served.workspace.parent().unwrap().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::fs::write(elsewhere.join("s.yaml"), "turns:\n  - text: done\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_keel"))
        .args([
            "run",
            "--provider",
            "scripted",
            "--script",
            "s.yaml",
            OUTSIDE_TASK,
        ])
        .current_dir(&elsewhere)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", served.data.parent().unwrap())
        .env("KEEL_HOME", &served.data)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let listed = served.get_json("/api/v1/sessions?limit=100");
    assert!(
        !listed.to_string().contains(OUTSIDE_TASK),
        "GET /sessions lists only the roots' sessions: {listed}"
    );
    let out = Command::new("node")
        .env("OUTSIDE_TASK", OUTSIDE_TASK)
        .arg(tests_dir.join("ui.test.mjs"))
        .arg(&served.url)
        .arg(&served.workspace)
        .arg(fixtures.join("react.yaml"))
        .arg(fixtures.join("plan_exec.yaml"))
        .arg(&shots)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    assert!(
        out.status.success(),
        "the browser test failed (screenshots in {}):\n{stdout}\n{stderr}",
        shots.display()
    );
    for shot in [
        "plan_exec.png",
        "wide.png",
        "narrow.png",
        "session-1280.png",
        "session-400.png",
    ] {
        assert!(
            shots.join(shot).is_file(),
            "the screenshot {shot} was saved"
        );
    }
    // The screenshots the repository keeps (docs/screenshots), refreshed on request.
    if std::env::var_os("KEEL_UPDATE_SCREENSHOTS").is_some() {
        for shot in ["session-1280.png", "session-400.png", "token-1280.png"] {
            std::fs::copy(
                shots.join(shot),
                root.join("docs/screenshots").join(format!("web-{shot}")),
            )
            .unwrap();
        }
    }
    let (code, err) = served.stop();
    assert_eq!(code, Some(0), "{err}");
}
