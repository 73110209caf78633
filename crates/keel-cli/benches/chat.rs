//! `keel chat` responsiveness, measured on the real binary in a real terminal (tmux), each
//! figure beside a baseline from the same run:
//!
//! - start-up to a ready composer, against `keel --version` printing in the same kind of pane;
//! - keystroke → frame latency (p50/p99): a key sent with `send-keys` until the pane shows it,
//!   against `cat` echoing the same keys (the terminal and polling cost on its own) — on an
//!   empty chat, after a long session (60 tool calls with created files, command output and
//!   diffs, tables and code in the answers), and in that session scrolled up (where each frame
//!   lays out the whole transcript so the view stays put);
//! - CPU while a long answer streams from a local paced SSE server (400 chunks, 10 ms apart)
//!   and while idle, against `keel run` streaming the same answer.
//!
//! Run: `cargo bench -p keel-cli --bench chat` (needs tmux; says so and exits without it).

// Benchmarks start programs of their own (the keel binary, baselines such as `bash -c true`):
// allowed here, outside Keel's one spawn path (docs/SECURITY.md, "One way to start a process").
#![allow(
    clippy::disallowed_macros,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::disallowed_methods
)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const STARTS: usize = 8;
const KEYS: usize = 100;
/// Keys typed before the composer is emptied (the pane is 100 columns wide).
const CLEAR_EVERY: usize = 50;
/// Tool-call turns of the long session.
const LONG_TURNS: usize = 60;
const CHUNKS: usize = 400;
const CHUNK_GAP: Duration = Duration::from_millis(10);

fn keel() -> PathBuf {
    // The bench binary lives in target/<profile>/deps; keel one level up.
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().unwrap().parent().unwrap();
    let keel = dir.join("keel");
    assert!(keel.exists(), "build keel first: {}", keel.display());
    keel
}

struct Pane {
    socket: String,
}

impl Pane {
    fn start(tag: &str, line: &str) -> Self {
        let pane = Self {
            socket: format!("keel-chat-bench-{}-{tag}", std::process::id()),
        };
        let ok = pane
            .tmux()
            .args([
                "new-session",
                "-d",
                "-s",
                "b",
                "-x",
                "100",
                "-y",
                "30",
                line,
            ])
            .status()
            .unwrap();
        assert!(ok.success());
        pane
    }

    fn tmux(&self) -> Command {
        let mut c = Command::new("tmux");
        c.args(["-L", &self.socket, "-f", "/dev/null"]);
        c
    }

    fn screen(&self) -> String {
        let out = self
            .tmux()
            .args(["capture-pane", "-p", "-t", "b"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn send(&self, keys: &[&str]) {
        self.tmux()
            .args(["send-keys", "-t", "b"])
            .args(keys)
            .status()
            .unwrap();
    }

    /// Polls until `done(screen)`; the time it took.
    fn wait(&self, what: &str, done: impl Fn(&str) -> bool) -> Duration {
        let t = Instant::now();
        loop {
            let s = self.screen();
            if done(&s) {
                return t.elapsed();
            }
            assert!(
                t.elapsed() < Duration::from_secs(30),
                "{what} never came:\n{s}"
            );
        }
    }

    fn pid(&self) -> u32 {
        let out = self
            .tmux()
            .args(["list-panes", "-t", "b", "-F", "#{pane_pid}"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
    }
}

impl Drop for Pane {
    fn drop(&mut self) {
        let _ = self.tmux().arg("kill-server").output();
    }
}

/// CPU time (user + system) a process has used so far.
fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = after.split(' ').collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    Duration::from_millis(ticks * 10) // USER_HZ is 100 on Linux
}

fn percentile(v: &mut [Duration], p: f64) -> Duration {
    v.sort();
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn env_line(work: &Path, home: &Path, rest: &str) -> String {
    format!(
        "cd '{}' && exec env -i PATH=\"$PATH\" TERM=xterm-256color HOME='{}' KEEL_HOME='{}/data' \
         OPENAI_API_KEY=bench KEEL_SHELL__LINT__ENABLED=false KEEL_VERIFY__ENABLED=false {rest}",
        work.display(),
        home.display(),
        home.display()
    )
}

/// An OpenAI-compatible endpoint answering every request with a long answer streamed in
/// `CHUNKS` pieces `CHUNK_GAP` apart.
fn paced_server() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut s) = stream else { continue };
            std::thread::spawn(move || {
                let mut reader = BufReader::new(s.try_clone().unwrap());
                let mut len = 0usize;
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                        len = v.trim().parse().unwrap_or(0);
                    }
                    if line == "\r\n" {
                        break;
                    }
                }
                let mut body = vec![0; len];
                let _ = reader.read_exact(&mut body);
                let _ = s.write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n");
                let chunk = |delta: &str, finish: &str| {
                    format!(
                        "data: {{\"id\":\"b\",\"object\":\"chat.completion.chunk\",\"model\":\"mock\",\"choices\":[{{\"index\":0,\"delta\":{delta},\"finish_reason\":{finish}}}]}}\n\n"
                    )
                };
                for i in 0..CHUNKS {
                    let text = if i % 40 == 0 {
                        format!("\\n\\n## Part {}\\n\\nSome **words** and `code` ", i / 40)
                    } else {
                        format!("word{i} ")
                    };
                    let ev = chunk(&format!("{{\"content\":\"{text}\"}}"), "null");
                    if s.write_all(ev.as_bytes()).is_err() {
                        return;
                    }
                    std::thread::sleep(CHUNK_GAP);
                }
                let _ = s.write_all(chunk("{\"content\":\" THE-END\"}", "null").as_bytes());
                let _ = s.write_all(chunk("{}", "\"stop\"").as_bytes());
                let _ = s.write_all(b"data: {\"id\":\"b\",\"object\":\"chat.completion.chunk\",\"model\":\"mock\",\"choices\":[],\"usage\":{\"prompt_tokens\":1000,\"completion_tokens\":800}}\n\ndata: [DONE]\n\n");
            });
        }
    });
    format!("http://{addr}/v1")
}

/// A scripted session of `LONG_TURNS` tool calls — created files (their content shown),
/// commands (their output's tail), edits (diffs) — with Markdown tables and code in between,
/// then a final answer. JSON, which the script reader takes as YAML.
fn long_script() -> String {
    let mut turns = Vec::new();
    for i in 0..LONG_TURNS {
        let call = match i % 3 {
            0 => serde_json::json!({"name": "create_file", "arguments": {
                "path": format!("src/m{i}.rs"),
                "content": (0..20).map(|l| format!("pub fn f{i}_{l}(x: i32) -> i32 {{ x + {l} }}\n")).collect::<String>(),
            }}),
            1 => serde_json::json!({"name": "run_command", "arguments": {"command": "seq 1 40"}}),
            _ => serde_json::json!({"name": "edit_file", "arguments": {
                "path": format!("src/m{}.rs", i - 2),
                "edits": [{"search": "x + 1 }", "replace": "x + 100 }"}],
            }}),
        };
        turns.push(serde_json::json!({
            "text": format!("Step {i}:\n\n| file | change |\n|---|---|\n| src/m{i}.rs | `f{i}` |\n\n```rust\nfn main() {{ println!(\"{i}\"); }}\n```\n"),
            "tool_calls": [call],
        }));
    }
    turns.push(serde_json::json!({"text": "## ALL-DONE\n\nEvery step is done."}));
    serde_json::json!({"turns": turns}).to_string()
}

fn main() {
    if Command::new("tmux").arg("-V").output().is_err() {
        println!("chat bench: tmux is not installed; nothing measured");
        return;
    }
    let keel = keel();
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("work");
    let home = tmp.path().join("home");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(work.join("README.md"), "bench\n").unwrap();
    let script = home.join("idle.yaml");
    std::fs::write(&script, "turns:\n  - text: \"ok\"\n").unwrap();
    let k = keel.display();
    let scripted = format!(
        "'{k}' chat --provider scripted --script '{}'",
        script.display()
    );

    // Start-up.
    let mut version = Vec::new();
    let mut chat = Vec::new();
    for i in 0..STARTS {
        let p = Pane::start(
            &format!("v{i}"),
            &env_line(
                &work,
                &home,
                &format!("sh -c '\"{k}\" --version; sleep 30'"),
            ),
        );
        version.push(p.wait("keel --version", |s| s.contains("keel ")));
        drop(p);
        let p = Pane::start(&format!("c{i}"), &env_line(&work, &home, &scripted));
        chat.push(p.wait("the composer", |s| s.contains("Enter sends")));
    }
    let (v50, c50) = (percentile(&mut version, 0.5), percentile(&mut chat, 0.5));
    println!(
        "start-up to a ready composer: {:.1} ms median  (baseline `keel --version` shown: {:.1} ms; ratio {:.2})",
        ms(c50),
        ms(v50),
        c50.as_secs_f64() / v50.as_secs_f64()
    );

    // Keystroke → frame. A composer line longer than the pane scrolls sideways (its count stops
    // growing): Ctrl-U empties it every `CLEAR_EVERY` keys, outside the measured time.
    let latency = |pane: &Pane, count: &dyn Fn(&str) -> usize| {
        let mut samples = Vec::new();
        for i in 0..KEYS {
            if i > 0 && i % CLEAR_EVERY == 0 && count(&pane.screen()) >= CLEAR_EVERY {
                pane.send(&["C-u"]);
                pane.wait("an empty line", |s| count(s) == 0);
            }
            let before = count(&pane.screen());
            let t = Instant::now();
            pane.send(&["-l", if i % 2 == 0 { "a" } else { "b" }]);
            pane.wait("the key", |s| count(s) > before);
            samples.push(t.elapsed());
        }
        samples
    };
    let typed = |s: &str| s.matches(['a', 'b']).count();
    let p = Pane::start("cat", "cat");
    std::thread::sleep(Duration::from_millis(200));
    let mut base = latency(&p, &typed);
    drop(p);
    let p = Pane::start("keys", &env_line(&work, &home, &scripted));
    p.wait("the composer", |s| s.contains("Enter sends"));
    // The composer is the last line starting with `›` (a user message above starts so too).
    let composer = |s: &str| {
        s.lines()
            .rev()
            .find(|l| l.starts_with('›'))
            .map_or(0, |l| l.matches(['a', 'b']).count())
    };
    let mut keys = latency(&p, &composer);
    drop(p);
    println!(
        "keystroke → frame: p50 {:.1} ms, p99 {:.1} ms  (baseline `cat` echo in the same terminal: p50 {:.1} ms, p99 {:.1} ms)",
        ms(percentile(&mut keys, 0.5)),
        ms(percentile(&mut keys, 0.99)),
        ms(percentile(&mut base, 0.5)),
        ms(percentile(&mut base, 0.99)),
    );

    // Keystroke → frame after a long session, following it and scrolled up.
    let long = home.join("long.yaml");
    std::fs::write(&long, long_script()).unwrap();
    let p = Pane::start(
        "long",
        &env_line(
            &work,
            &home,
            &format!(
                "KEEL_AGENT__MAX_ITERATIONS={} '{k}' chat --approval never --provider scripted --script '{}'",
                LONG_TURNS + 10,
                long.display()
            ),
        ),
    );
    p.wait("the composer", |s| s.contains("Enter sends"));
    p.send(&["-l", "do the long task"]);
    p.send(&["Enter"]);
    p.wait("the end of the long session", |s| {
        s.contains("ALL-DONE") && s.contains("Enter sends")
    });
    let mut long_keys = latency(&p, &composer);
    p.send(&["C-u"]);
    for _ in 0..3 {
        p.send(&["PageUp"]);
    }
    p.wait("the view scrolled up", |s| s.contains("more lines below"));
    let mut scrolled_keys = latency(&p, &composer);
    drop(p);
    let mut cat2 = {
        let p = Pane::start("cat2", "cat");
        std::thread::sleep(Duration::from_millis(200));
        latency(&p, &typed)
    };
    println!(
        "keystroke → frame after a {LONG_TURNS}-call session: p50 {:.1} ms, p99 {:.1} ms; scrolled up: p50 {:.1} ms, p99 {:.1} ms  (baseline `cat` echo, same run: p50 {:.1} ms, p99 {:.1} ms)",
        ms(percentile(&mut long_keys, 0.5)),
        ms(percentile(&mut long_keys, 0.99)),
        ms(percentile(&mut scrolled_keys, 0.5)),
        ms(percentile(&mut scrolled_keys, 0.99)),
        ms(percentile(&mut cat2, 0.5)),
        ms(percentile(&mut cat2, 0.99)),
    );

    // CPU while a long answer streams, and idle.
    let base_url = paced_server();
    let flags = format!("--provider openai --model gpt-4o --base-url {base_url}");
    let p = Pane::start(
        "stream",
        &env_line(&work, &home, &format!("'{k}' chat {flags}")),
    );
    p.wait("the composer", |s| s.contains("Enter sends"));
    let pid = p.pid();
    let idle0 = cpu_time(pid);
    std::thread::sleep(Duration::from_secs(2));
    let idle = cpu_time(pid) - idle0;
    let cpu0 = cpu_time(pid);
    let t = Instant::now();
    p.send(&["-l", "explain the design in a long answer"]);
    p.send(&["Enter"]);
    p.wait("the end of the answer", |s| s.contains("THE-END"));
    let (chat_cpu, chat_wall) = (cpu_time(pid) - cpu0, t.elapsed());
    drop(p);

    let t = Instant::now();
    let mut cmd = Command::new(&keel);
    cmd.current_dir(&work)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", &home)
        .env("KEEL_HOME", home.join("data"))
        .env("OPENAI_API_KEY", "bench")
        .env("KEEL_SHELL__LINT__ENABLED", "false")
        .env("KEEL_VERIFY__ENABLED", "false")
        .args([
            "run",
            "--provider",
            "openai",
            "--model",
            "gpt-4o",
            "--base-url",
            &base_url,
        ])
        .arg("explain the design in a long answer")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let before =
        nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_CHILDREN).unwrap();
    let status = cmd.status().unwrap();
    let after =
        nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_CHILDREN).unwrap();
    assert!(status.success());
    let tv =
        |t: nix::sys::time::TimeVal| Duration::new(t.tv_sec() as u64, t.tv_usec() as u32 * 1000);
    let run_cpu = (tv(after.user_time()) + tv(after.system_time()))
        - (tv(before.user_time()) + tv(before.system_time()));
    let run_wall = t.elapsed();
    println!(
        "CPU while a {CHUNKS}-chunk answer streams: keel chat {:.0} ms over {:.1} s ({:.1}% of a core)  (baseline keel run, same stream: {:.0} ms over {:.1} s, {:.1}%)",
        ms(chat_cpu),
        chat_wall.as_secs_f64(),
        100.0 * chat_cpu.as_secs_f64() / chat_wall.as_secs_f64(),
        ms(run_cpu),
        run_wall.as_secs_f64(),
        100.0 * run_cpu.as_secs_f64() / run_wall.as_secs_f64(),
    );
    println!(
        "CPU of keel chat idle at the composer: {:.0} ms over 2 s",
        ms(idle)
    );
}
