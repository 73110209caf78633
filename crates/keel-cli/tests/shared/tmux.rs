//! A real terminal for `keel chat` end-to-end tests: a private tmux server, keys sent with
//! `send-keys`, the screen (and its scrollback, with colours if asked) read back with
//! `capture-pane`.

// Tests start programs of their own (the keel binary, git fixtures, tmux, servers): allowed
// here, outside Keel's one spawn path (docs/SECURITY.md, "One way to start a process").
#![allow(clippy::disallowed_macros, dead_code, clippy::disallowed_methods)]

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use super::common::Env;

/// A tmux server of its own (its own socket), killed when dropped.
pub struct Tmux {
    socket: String,
}

impl Tmux {
    pub fn available() -> bool {
        Command::new("tmux")
            .arg("-V")
            .output()
            .is_ok_and(|o| o.status.success())
    }

    /// Whether the test can run: without tmux it is skipped visibly, except in CI (where
    /// `.ci/run` installs it) where that is a failure.
    pub fn required(what: &str) -> bool {
        if Self::available() {
            return true;
        }
        assert!(
            std::env::var_os("CI").is_none(),
            "tmux is missing; CI must install it (.ci/run)"
        );
        eprintln!("SKIPPED {what}: tmux is not installed");
        false
    }

    pub fn new(tag: &str) -> Self {
        Self {
            socket: format!("keel-chat-test-{}-{tag}", std::process::id()),
        }
    }

    fn tmux(&self) -> Command {
        let mut c = Command::new("tmux");
        c.args(["-L", &self.socket, "-f", "/dev/null"]);
        c
    }

    /// Starts `command` (a shell line) in a 100×30 window.
    pub fn start(&self, command: &str) {
        self.start_sized(command, 100, 30);
    }

    /// Starts `command` (a shell line) in a `width`×`height` window.
    pub fn start_sized(&self, command: &str, width: u16, height: u16) {
        let ok = self
            .tmux()
            .args([
                "new-session",
                "-d",
                "-s",
                "t",
                "-x",
                &width.to_string(),
                "-y",
                &height.to_string(),
                command,
            ])
            .status()
            .unwrap();
        assert!(ok.success(), "tmux could not start");
    }

    pub fn send(&self, keys: &[&str]) {
        let ok = self
            .tmux()
            .args(["send-keys", "-t", "t"])
            .args(keys)
            .status()
            .unwrap();
        assert!(ok.success());
    }

    /// Types `text` literally (no Enter).
    pub fn type_text(&self, text: &str) {
        let ok = self
            .tmux()
            .args(["send-keys", "-t", "t", "-l", text])
            .status()
            .unwrap();
        assert!(ok.success());
    }

    pub fn type_line(&self, text: &str) {
        self.type_text(text);
        self.send(&["Enter"]);
    }

    /// The visible screen as text.
    pub fn screen(&self) -> String {
        self.capture(&["-p"])
    }

    /// The visible screen with its colours and attributes (ANSI escapes).
    pub fn screen_ansi(&self) -> String {
        self.capture(&["-p", "-e"])
    }

    /// The scrollback and the screen, as text.
    pub fn history(&self) -> String {
        self.capture(&["-p", "-S", "-"])
    }

    fn capture(&self, args: &[&str]) -> String {
        let out = self
            .tmux()
            .args(["capture-pane", "-t", "t"])
            .args(args)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    pub fn alive(&self) -> bool {
        self.tmux()
            .args(["has-session", "-t", "t"])
            .output()
            .is_ok_and(|o| o.status.success())
    }

    /// Waits until the screen shows `needle`; the screen is in the failure message.
    pub fn wait_for(&self, needle: &str) -> String {
        self.wait_until(needle, |s| s.contains(needle))
    }

    /// Waits until `done(screen)`; `what` names it in the failure message.
    pub fn wait_until(&self, what: &str, done: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let screen = self.screen();
            if done(&screen) {
                return screen;
            }
            assert!(
                Instant::now() < deadline,
                "`{what}` never appeared; the screen:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn wait_exit(&self) {
        let deadline = Instant::now() + Duration::from_secs(15);
        while self.alive() {
            assert!(
                Instant::now() < deadline,
                "keel chat did not quit; the screen:\n{}",
                self.screen()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.tmux().arg("kill-server").output();
    }
}

/// The shell line that runs keel in `env`'s workspace with only `env`'s variables (no colour).
pub fn keel_line(env: &Env, args: &str) -> String {
    format!(
        "cd {} && exec {}",
        quoted(&env.work),
        keel_env(env, args, false)
    )
}

/// `cd WORKSPACE && env -i … keel ARGS`, coloured or not: for a shell line that goes on after
/// keel exits.
pub fn keel_command(env: &Env, args: &str, color: bool) -> String {
    format!("cd {} && {}", quoted(&env.work), keel_env(env, args, color))
}

fn quoted(p: &Path) -> String {
    format!("'{}'", p.display())
}

fn keel_env(env: &Env, args: &str, color: bool) -> String {
    format!(
        "env -i PATH=\"$PATH\" TERM=xterm-256color HOME={} KEEL_HOME={} \
         KEEL_SHELL__LINT__ENABLED=false KEEL_VERIFY__ENABLED=false {}{} {args}",
        quoted(&env.home),
        quoted(&env.home.join("data")),
        if color { "" } else { "NO_COLOR=1 " },
        quoted(Path::new(env!("CARGO_BIN_EXE_keel"))),
    )
}
