//! The web UI's Markdown renderer (web/markdown.js, served by `keel serve`) in node: what it
//! makes of a reply, and that a hostile reply renders in bounded time (red-team R5-5: a line of
//! a few thousand backticks froze the tab for minutes under the old backtracking regex).
#![allow(clippy::disallowed_methods)] // starts node, a test tool

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn markdown_renderer_is_correct_and_linear() {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../web/tests/markdown.test.mjs");
    let spawned = Command::new("node")
        .arg(&script)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match spawned {
        Ok(child) => child,
        Err(e) if std::env::var_os("CI").is_none() => {
            println!("SKIPPED: node is not installed ({e})");
            return;
        }
        Err(e) => panic!("node is needed for the web UI's renderer test: {e}"),
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the Markdown renderer test ran over 60 s: a hostile reply hangs the renderer");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    assert!(
        status.success(),
        "web/markdown.js failed:\n{stdout}\n{stderr}"
    );
}
