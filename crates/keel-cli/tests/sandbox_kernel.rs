//! `keel run`'s commands through the whole product, as root and as uid 65534 (through
//! `setpriv`; the user-namespace helper then confines them): nothing a command starts outlives
//! it or the run (`setsid -f`), nor a `keel` that is killed mid-command; renaming the parent of
//! a constitution-protected path cannot defeat its protection; the user's SSH key reads as
//! empty; `keel doctor` lists the hidden stores and the process isolation.
//!
//! As root without `setpriv` (util-linux) the unprivileged half fails with a clear message; if
//! the kernel forbids unprivileged user namespaces it skips loudly (failing in CI).

// Tests start programs of their own (the keel binary, setpriv, losetup, python3, sleep):
// allowed explicitly (clippy.toml's `disallowed-methods`).
#![allow(
    clippy::disallowed_macros,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::disallowed_methods
)]

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use serde_json::Value;

const NOBODY: u32 = 65534;

fn is_root() -> bool {
    std::fs::metadata("/proc/self")
        .unwrap_or_else(|e| panic!("{e}"))
        .uid()
        == 0
}

use std::os::unix::fs::MetadataExt;

fn chown_tree(path: &Path) {
    std::os::unix::fs::lchown(path, Some(NOBODY), Some(NOBODY)).unwrap();
    if path.is_dir() && !path.is_symlink() {
        for e in std::fs::read_dir(path).unwrap() {
            chown_tree(&e.unwrap().path());
        }
    }
}

/// How `keel` is started: as is, or as uid 65534 (the binary alone in a directory, so it
/// re-executes itself as the sandbox helper).
struct Runner {
    as_nobody: bool,
    _bin_dir: Option<tempfile::TempDir>,
    keel: PathBuf,
}

impl Runner {
    fn new(env: &Env, as_nobody: bool, test: &str) -> Self {
        if !as_nobody {
            return Self {
                as_nobody,
                _bin_dir: None,
                keel: PathBuf::from(env!("CARGO_BIN_EXE_keel")),
            };
        }
        assert!(
            ["/usr/bin/setpriv", "/bin/setpriv"]
                .iter()
                .any(|p| Path::new(p).exists()),
            "{test}: `setpriv` (util-linux) is needed to run keel as an unprivileged user when \
             the tests run as root; install util-linux"
        );
        let bin_dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
        std::fs::set_permissions(bin_dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let keel = bin_dir.path().join("keel");
        if std::fs::hard_link(env!("CARGO_BIN_EXE_keel"), &keel).is_err() {
            std::fs::copy(env!("CARGO_BIN_EXE_keel"), &keel).unwrap();
        }
        let top = env.work.parent().unwrap();
        std::fs::set_permissions(top, std::fs::Permissions::from_mode(0o755)).unwrap();
        chown_tree(top);
        Self {
            as_nobody,
            _bin_dir: Some(bin_dir),
            keel,
        }
    }

    /// `keel ARGS` in the workspace with the environment `env.keel()` sets.
    fn command(&self, env: &Env, args: &[&str]) -> Command {
        let template = env.keel();
        let mut cmd = if self.as_nobody {
            let mut c = Command::new("setpriv");
            c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
                .arg(&self.keel);
            c
        } else {
            Command::new(&self.keel)
        };
        cmd.args(args).current_dir(&env.work).env_clear();
        for (k, v) in template.get_envs() {
            if let Some(v) = v {
                cmd.env(k, v);
            }
        }
        cmd
    }

    fn who(&self) -> &'static str {
        if self.as_nobody {
            "uid 65534"
        } else {
            "the test's user"
        }
    }
}

/// `keel doctor`'s line for `name`.
fn doctor_line(runner: &Runner, env: &Env, name: &str) -> String {
    let out = runner.command(env, &["doctor"]).output().unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    text.lines()
        .find(|l| l.contains(name))
        .unwrap_or_else(|| panic!("doctor says nothing of `{name}`:\n{text}"))
        .to_string()
}

/// False (after a loud skip, or a failure in CI) when commands get no namespaces here.
fn namespaces(runner: &Runner, env: &Env, test: &str) -> bool {
    let line = doctor_line(runner, env, "sandbox: processes");
    if line.contains("NO PID namespace") {
        assert!(
            std::env::var_os("CI").is_none(),
            "{test} as {}: {line} — CI machines must allow it",
            runner.who()
        );
        println!("SKIPPED {test} as {}: {line}", runner.who());
        return false;
    }
    true
}

fn processes_with(marker: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        if String::from_utf8_lossy(&cmdline).contains(marker) {
            out.push(pid);
        }
    }
    out
}

/// Waits up to `limit` for `want(processes carrying marker)`; returns the last list.
fn wait_for(marker: &str, limit: Duration, want: impl Fn(&[u32]) -> bool) -> Vec<u32> {
    let start = Instant::now();
    loop {
        let found = processes_with(marker);
        if want(&found) || start.elapsed() > limit {
            return found;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn kill_all(pids: &[u32]) {
    for pid in pids {
        let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
    }
}

fn result(events: &[Value], id: &str) -> String {
    events
        .iter()
        .find(|e| e["type"] == "tool_result" && e["id"] == id)
        .and_then(|e| e["content"].as_str())
        .unwrap_or_else(|| panic!("no result for {id} in {events:?}"))
        .to_string()
}

fn run_is_contained(as_nobody: bool) {
    let test = "a_keel_run_leaves_nothing_behind_and_reaches_no_secret";
    let env = Env::new();
    std::fs::create_dir_all(env.work.join("docs")).unwrap();
    std::fs::write(env.work.join("docs/api.md"), "protected api\n").unwrap();
    std::fs::create_dir_all(env.work.join("db/migrations")).unwrap();
    std::fs::write(env.work.join("db/migrations/001.sql"), "CREATE TABLE t;\n").unwrap();
    std::fs::create_dir_all(env.work.join("config/env")).unwrap();
    std::fs::write(env.work.join("config/env/prod.yml"), "replicas: 3\n").unwrap();
    std::fs::create_dir_all(env.work.join(".keel")).unwrap();
    // A glob for a whole directory is protected as that directory (red-team pass 8, R8-16).
    std::fs::write(
        env.work.join(".keel/constitution.json"),
        r#"{"protected_paths": ["docs/api.md", "db/migrations/**", "config/**/*.yml"]}"#,
    )
    .unwrap();
    std::fs::create_dir_all(env.home.join(".ssh")).unwrap();
    std::fs::write(env.home.join(".ssh/id_ed25519"), "FAKE-PRIVATE-KEY\n").unwrap();
    let marker = format!("keel-run-survivor-{}-{as_nobody}", std::process::id());
    let script = env.script(
        "attack.yaml",
        &format!(
            r#"
turns:
  - tool_calls:
      - {{id: c1, name: run_command, arguments: {{command: "setsid -f bash -c 'exec -a {marker} sleep 300'; nohup bash -c 'exec -a {marker}-b sleep 300' >/dev/null 2>&1 & echo started"}}}}
      - {{id: c2, name: run_command, arguments: {{command: "mv docs moved; mkdir -p docs && echo evil > docs/api.md; echo rc=$?"}}}}
      - {{id: c4, name: run_command, arguments: {{command: "p=d; p=${{p}}b; mv $p ${{p}}x; mkdir -p $p/migrations; echo evil > $p/migrations/001.sql; echo rc=$?"}}}}
      - {{id: c5, name: run_command, arguments: {{command: "c=conf; c=${{c}}ig; cd $c/env && echo evil > prod.yml; cd ../..; mv $c ${{c}}x; mkdir -p $c/env; echo evil > $c/env/prod.yml; echo rc=$?"}}}}
      - {{id: c3, name: run_command, arguments: {{command: "cat ~/.ssh/id_ed25519; ls -A ~/.ssh | sed 's/^/listed: /'; echo done"}}}}
  - text: done
"#
        ),
    );
    let runner = Runner::new(&env, as_nobody, test);
    if !namespaces(&runner, &env, test) {
        return;
    }
    let out = runner
        .command(&env, &["run", "--json", "--script"])
        .arg(&script)
        .arg("look around")
        .output()
        .unwrap();
    let left = wait_for(&marker, Duration::from_secs(3), |f| f.is_empty());
    kill_all(&left);
    assert_exit(&out, 0);
    let events = json_lines(&out.stdout);
    let started = result(&events, "c1");
    assert!(started.contains("started"), "{started}");
    assert!(
        left.is_empty(),
        "as {}: processes outlived the command and the run: {left:?}",
        runner.who()
    );
    let moved = result(&events, "c2");
    assert_eq!(
        std::fs::read_to_string(env.work.join("docs/api.md")).unwrap(),
        "protected api\n",
        "as {}: {moved}",
        runner.who()
    );
    assert!(!env.work.join("moved").exists(), "{moved}");
    let glob = result(&events, "c4");
    assert!(glob.contains("rc="), "the command did not run: {glob}");
    assert_eq!(
        std::fs::read_to_string(env.work.join("db/migrations/001.sql")).unwrap(),
        "CREATE TABLE t;\n",
        "as {}: {glob}",
        runner.who()
    );
    assert!(!env.work.join("dbx").exists(), "{glob}");
    // A glob for files: each file it matches is held like a plain protected path (R8-16).
    let files = result(&events, "c5");
    assert!(files.contains("rc="), "the command did not run: {files}");
    assert_eq!(
        std::fs::read_to_string(env.work.join("config/env/prod.yml")).unwrap(),
        "replicas: 3\n",
        "as {}: {files}",
        runner.who()
    );
    assert!(!env.work.join("configx").exists(), "{files}");
    let key = result(&events, "c3");
    assert!(!key.contains("FAKE-PRIVATE-KEY"), "the key leaked: {key}");
    assert!(!key.contains("listed: "), "~/.ssh was listed: {key}");
    assert!(key.contains("done"), "{key}");
    // The doctor names the hidden store that exists here and the process isolation.
    let stores = doctor_line(&runner, &env, "sandbox: secret stores");
    assert!(stores.contains("present here: ~/.ssh"), "{stores}");
    let processes = doctor_line(&runner, &env, "sandbox: processes");
    assert!(processes.contains("own PID"), "{processes}");
}

#[test]
fn a_keel_run_leaves_nothing_behind_and_reaches_no_secret() {
    run_is_contained(false);
    if is_root() {
        run_is_contained(true);
    }
}

fn killed_keel(as_nobody: bool) {
    let test = "a_killed_keel_takes_its_running_command_along";
    let env = Env::new();
    let marker = format!("keel-orphan-{}-{as_nobody}", std::process::id());
    let script = env.script(
        "long.yaml",
        &format!(
            r#"
turns:
  - tool_calls:
      - {{id: c1, name: run_command, arguments: {{command: "exec -a {marker} sleep 300", timeout: 300}}}}
  - text: done
"#
        ),
    );
    let runner = Runner::new(&env, as_nobody, test);
    if !namespaces(&runner, &env, test) {
        return;
    }
    let mut keel = runner
        .command(&env, &["run", "--json", "--script"])
        .arg(&script)
        .arg("wait")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let running = wait_for(&marker, Duration::from_secs(20), |f| !f.is_empty());
    assert!(!running.is_empty(), "the command never started");
    // The test kills keel itself (setpriv execs it: same pid).
    let _ = Command::new("kill")
        .args(["-9", &keel.id().to_string()])
        .status();
    let _ = keel.wait();
    let left = wait_for(&marker, Duration::from_secs(3), |f| f.is_empty());
    kill_all(&left);
    assert!(
        left.is_empty(),
        "as {}: the command outlived the killed keel: {left:?}",
        runner.who()
    );
}

#[test]
fn a_killed_keel_takes_its_running_command_along() {
    killed_keel(false);
    if is_root() {
        killed_keel(true);
    }
}

// ---------------------------------------------------------------------------------------------
// Protected stores inside and around the workspace (red team B8, B15, B21, B22): one list
// (`keel_fs::stores`) that the sandbox hides and the file tools refuse.

/// Every tool result of a run, joined.
fn all_results(events: &[Value]) -> String {
    events
        .iter()
        .filter(|e| e["type"] == "tool_result")
        .filter_map(|e| e["content"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

fn home_is_the_workspace(as_nobody: bool) {
    let test = "a_workspace_that_is_the_home_keeps_its_stores_out_of_reach";
    let env = Env::new();
    // The workspace is the user's home: it holds their keys, Keel's data and (soon) config.
    let home = &env.work;
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::write(home.join(".ssh/id_ed25519"), "FAKE-PRIVATE-KEY\n").unwrap();
    std::fs::write(home.join(".netrc"), "machine x password FAKE-NETRC\n").unwrap();
    std::fs::create_dir_all(home.join(".claude")).unwrap();
    std::fs::write(home.join(".claude/.credentials.json"), "FAKE-CLAUDE\n").unwrap();
    let data = home.join(".local/share/keel");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(data.join("server-token"), "FAKE-SERVER-TOKEN\n").unwrap();
    std::os::unix::fs::symlink(".ssh", home.join("keys")).unwrap();
    std::fs::hard_link(home.join(".netrc"), home.join("notes.txt")).unwrap();
    let script = env.script(
        "home.yaml",
        r#"
turns:
  - tool_calls:
      - {id: r1, name: read_file, arguments: {path: ".ssh/id_ed25519"}}
      - {id: r2, name: read_file, arguments: {path: "keys/id_ed25519"}}
      - {id: r3, name: read_file, arguments: {path: ".SSH/id_ed25519"}}
      - {id: r4, name: read_file, arguments: {path: "notes.txt"}}
      - {id: r5, name: read_file, arguments: {path: ".local/share/keel/server-token"}}
      - {id: w1, name: create_file, arguments: {path: ".ssh/authorized_keys", content: "ssh-ed25519 AAAA attacker\n"}}
      - {id: w2, name: create_file, arguments: {path: ".config/keel/config.toml", content: "[shell]\nsandbox = false\n"}}
      - {id: l1, name: list_files, arguments: {path: "."}}
      - {id: l2, name: list_files, arguments: {path: ".ssh"}}
      - {id: g1, name: grep, arguments: {pattern: "FAKE-"}}
      - {id: c1, name: run_command, arguments: {command: "cat .ssh/id_ed25519 .netrc .claude/.credentials.json .local/share/keel/server-token; ls -A .ssh | sed 's/^/listed: /'; ls -A .local/share/keel | sed 's/^/listed: /'; echo planted >> .ssh/authorized_keys; mkdir -p .config/keel; echo '[shell]' > .config/keel/config.toml; echo done"}}
  - text: done
"#,
    );
    let runner = Runner::new(&env, as_nobody, test);
    if !namespaces(&runner, &env, test) {
        return;
    }
    let out = runner
        .command(&env, &["run", "--json", "--script"])
        .arg(&script)
        .env("HOME", home)
        .env("KEEL_HOME", &data)
        .arg("look around")
        .output()
        .unwrap();
    // 4: the run says its writes were refused.
    assert_exit(&out, 4);
    let events = json_lines(&out.stdout);
    let results = all_results(&events);
    for secret in [
        "FAKE-PRIVATE-KEY",
        "FAKE-NETRC",
        "FAKE-CLAUDE",
        "FAKE-SERVER-TOKEN",
    ] {
        assert!(
            !results.contains(secret),
            "as {}: {secret} reached the model:\n{results}",
            runner.who()
        );
    }
    for id in ["r1", "r2", "r3", "r5", "w1", "w2", "l2"] {
        let r = result(&events, id);
        assert!(
            r.contains("secret stores") || r.contains("Keel's own") || r.contains("not found"),
            "{id}: {r}"
        );
    }
    let listing = result(&events, "l1");
    assert!(listing.contains("README"), "{listing}");
    assert!(
        !listing.contains(".ssh") && !listing.contains("notes.txt"),
        "{listing}"
    );
    assert!(!result(&events, "c1").contains("listed: "), "{results}");
    assert!(!home.join(".ssh/authorized_keys").exists(), "{results}");
    assert!(!home.join(".config/keel/config.toml").exists(), "{results}");
    // The notice says what a home workspace means.
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("your home directory"), "{stderr}");
}

#[test]
fn a_workspace_that_is_the_home_keeps_its_stores_out_of_reach() {
    home_is_the_workspace(false);
    if is_root() {
        home_is_the_workspace(true);
    }
}

/// The home as workspace (red team pass 3, R3-2): Keel's own snapshots, taken unconfined,
/// must not copy the stores into `.keel/snapshots`, where a command dumps every object; and
/// `keel undo` must not put a store back as it was (rotated keys reverted).
fn home_snapshots(as_nobody: bool) {
    let test = "a_home_workspaces_snapshots_hold_no_store";
    let env = Env::new();
    let home = &env.work;
    for (rel, text) in [
        (".ssh/id_ed25519", "FAKE-PRIVATE-KEY\n"),
        (
            ".aws/credentials",
            "aws_secret_access_key = FAKE-AWS-SECRET\n",
        ),
        (".git-credentials", "https://u:FAKE-GITCRED@example.com\n"),
        (".config/keel/config.toml", "# FAKE-KEEL-CONFIG\n"),
    ] {
        std::fs::create_dir_all(home.join(rel).parent().unwrap()).unwrap();
        std::fs::write(home.join(rel), text).unwrap();
    }
    let data = home.join(".local/share/keel");
    std::fs::create_dir_all(&data).unwrap();
    let dump = "for d in .keel/snapshots .git; do [ -d $d ] && git --git-dir=$d cat-file --batch-all-objects --batch; done | grep -a -c FAKE- | sed 's/^/hits: /'; git --git-dir=.keel/snapshots for-each-ref --format='%(objectname)' | while read c; do git --git-dir=.keel/snapshots ls-tree -r --name-only $c; done | sed 's/^/recorded: /'";
    let script = env.script(
        "homesnap.yaml",
        &format!(
            r#"
turns:
  - tool_calls:
      - {{id: c1, name: run_command, arguments: {{command: "echo hi > note.txt; echo written"}}}}
      - {{id: w1, name: create_file, arguments: {{path: note2.txt, content: "two\n"}}}}
  - tool_calls:
      - {{id: c2, name: run_command, arguments: {{command: "{dump}"}}}}
  - text: done
"#
        ),
    );
    let runner = Runner::new(&env, as_nobody, test);
    if !namespaces(&runner, &env, test) {
        return;
    }
    let out = runner
        .command(&env, &["run", "--json", "--script"])
        .arg(&script)
        .env("HOME", home)
        .env("KEEL_HOME", &data)
        .arg("take notes")
        .output()
        .unwrap();
    // A home workspace is read-only to the agent: nothing changed (exit 4).
    assert_exit(&out, 4);
    assert!(!home.join("note.txt").exists() && !home.join("note2.txt").exists());
    let events = json_lines(&out.stdout);
    let dumped = result(&events, "c2");
    assert!(
        dumped.contains("hits: 0") && dumped.contains("recorded: README.md"),
        "as {}: a command read the stores out of the snapshots:\n{dumped}",
        runner.who()
    );
    for store in [
        ".ssh",
        ".aws",
        ".git-credentials",
        ".config/keel",
        ".local/share/keel",
    ] {
        assert!(
            !dumped.contains(&format!("recorded: {store}")),
            "as {}: {store} was recorded:\n{dumped}",
            runner.who()
        );
    }
    // The user rotates a key, then undoes the session: the store keeps the new key.
    std::fs::write(
        home.join(".aws/credentials"),
        "aws_secret_access_key = FAKE-AWS-ROTATED\n",
    )
    .unwrap();
    let undo = runner
        .command(&env, &["undo", "--to", "0"])
        .env("HOME", home)
        .env("KEEL_HOME", &data)
        .output()
        .unwrap();
    assert_exit(&undo, 0);
    assert!(!home.join("note.txt").exists() && !home.join("note2.txt").exists());
    assert_eq!(
        std::fs::read_to_string(home.join(".aws/credentials")).unwrap(),
        "aws_secret_access_key = FAKE-AWS-ROTATED\n",
        "as {}: undo wrote into ~/.aws",
        runner.who()
    );
}

#[test]
fn a_home_workspaces_snapshots_hold_no_store() {
    home_snapshots(false);
    if is_root() {
        home_snapshots(true);
    }
}

fn checkout_in_keel_home(as_nobody: bool) {
    let test = "a_checkout_under_keel_home_sees_nothing_else_of_it";
    let env = Env::new();
    // The worker's layout: `$KEEL_HOME/checkouts/<session>`.
    let data = env.home.join("data");
    let mine = data.join("checkouts/sess-a");
    let other = data.join("checkouts/sess-b");
    std::fs::create_dir_all(mine.parent().unwrap()).unwrap();
    copy_tree(&env.work, &mine);
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join("secret.rs"), "FAKE-OTHER-TENANT\n").unwrap();
    std::fs::write(data.join("server-token"), "FAKE-SERVER-TOKEN\n").unwrap();
    // A session database at a configured `store.path` outside `$KEEL_HOME` (B21).
    let store = env.home.join("elsewhere/keel.db");
    let script = env.script(
        "checkout.yaml",
        &format!(
            r#"
turns:
  - tool_calls:
      - {{id: c1, name: run_command, arguments: {{command: "cat ../../server-token ../sess-b/secret.rs; ls -A ../.. ../ | sed 's/^/listed: /'; grep -a -o 'FAKE-TRANSCRIPT-[A-Z]*' {store}* ; head -c 40 README.md; echo; echo mine > mine.txt; cat mine.txt"}}}}
  - text: done
"#,
            store = store.display()
        ),
    );
    let runner = Runner::new(&env, as_nobody, test);
    if !namespaces(&runner, &env, test) {
        return;
    }
    let out = runner
        .command(&env, &["run", "--json", "--script"])
        .arg(&script)
        .current_dir(&mine)
        .env("KEEL_STORE__PATH", &store)
        .arg("FAKE-TRANSCRIPT-SECRET of another project")
        .output()
        .unwrap();
    assert_exit(&out, 0);
    let events = json_lines(&out.stdout);
    let r = result(&events, "c1");
    for secret in [
        "FAKE-OTHER-TENANT",
        "FAKE-SERVER-TOKEN",
        "FAKE-TRANSCRIPT-SECRET",
    ] {
        assert!(
            !r.contains(secret),
            "as {}: {secret} leaked:\n{r}",
            runner.who()
        );
    }
    for gone in ["listed: server-token", "listed: keel.db", "listed: sess-b"] {
        assert!(!r.contains(gone), "as {}: {gone}:\n{r}", runner.who());
    }
    // The session's own checkout is all there, and writable.
    assert!(r.contains("listed: sess-a") && r.contains("mine"), "{r}");
    assert_eq!(
        std::fs::read_to_string(mine.join("mine.txt")).unwrap(),
        "mine\n"
    );
    assert!(store.exists(), "the run used the configured store");
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), dest).unwrap();
        }
    }
}

#[test]
fn a_checkout_under_keel_home_sees_nothing_else_of_it() {
    checkout_in_keel_home(false);
    if is_root() {
        checkout_in_keel_home(true);
    }
}

fn moved_and_new_stores(as_nobody: bool) {
    let test = "stores_moved_by_the_environment_and_other_agents_logins_are_hidden";
    let env = Env::new();
    let moved = env.home.join("moved");
    let files = [
        (moved.join("cargo/credentials.toml"), "FAKE-CARGO-TOKEN"),
        (moved.join("gnupg/private-keys"), "FAKE-GPG"),
        (moved.join("kube/config"), "FAKE-KUBE"),
        (moved.join("docker/config.json"), "FAKE-DOCKER"),
        (env.home.join(".claude/.credentials.json"), "FAKE-CLAUDE"),
        (env.home.join(".codex/auth.json"), "FAKE-CODEX"),
        (env.home.join(".cache/huggingface/token"), "FAKE-HF"),
        (env.home.join(".config/containers/auth.json"), "FAKE-PODMAN"),
        (env.home.join(".m2/settings.xml"), "FAKE-MAVEN"),
        (env.home.join(".gradle/gradle.properties"), "FAKE-GRADLE"),
        (env.home.join(".config/gh/hosts.yml"), "FAKE-GH"),
        // Key files a variable names (red-team pass 3, R3-6).
        (moved.join("gcp/sa.json"), "FAKE-GCP-SA"),
        (moved.join("kaggle/kaggle.json"), "FAKE-KAGGLE"),
        (moved.join("rclone.conf"), "FAKE-RCLONE"),
        (moved.join("pulumi/credentials.json"), "FAKE-PULUMI"),
        (moved.join("oci/config"), "FAKE-OCI"),
    ];
    for (path, secret) in &files {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, secret).unwrap();
    }
    let cmd: String = files
        .iter()
        .map(|(p, _)| format!("cat '{}'; echo; ", p.display()))
        .collect();
    let script = env.script(
        "moved.yaml",
        &format!(
            r#"
turns:
  - tool_calls:
      - {{id: c1, name: run_command, arguments: {{command: "{cmd}echo done"}}}}
  - text: done
"#
        ),
    );
    let runner = Runner::new(&env, as_nobody, test);
    if !namespaces(&runner, &env, test) {
        return;
    }
    let out = runner
        .command(&env, &["run", "--json", "--script"])
        .arg(&script)
        .env("CARGO_HOME", moved.join("cargo"))
        .env("GNUPGHOME", moved.join("gnupg"))
        .env("KUBECONFIG", moved.join("kube/config"))
        .env("DOCKER_CONFIG", moved.join("docker"))
        .env("GOOGLE_APPLICATION_CREDENTIALS", moved.join("gcp/sa.json"))
        .env("KAGGLE_CONFIG_DIR", moved.join("kaggle"))
        .env("RCLONE_CONFIG", moved.join("rclone.conf"))
        .env("PULUMI_HOME", moved.join("pulumi"))
        .env("OCI_CLI_CONFIG_FILE", moved.join("oci/config"))
        .arg("look")
        .output()
        .unwrap();
    assert_exit(&out, 0);
    let r = result(&json_lines(&out.stdout), "c1");
    assert!(r.contains("done"), "{r}");
    for (path, secret) in &files {
        assert!(
            !r.contains(secret),
            "as {}: {} leaked:\n{r}",
            runner.who(),
            path.display()
        );
    }
}

#[test]
fn stores_moved_by_the_environment_and_other_agents_logins_are_hidden() {
    moved_and_new_stores(false);
    if is_root() {
        moved_and_new_stores(true);
    }
}

/// A dotfile manager's layout (R11): files of a store, and a store itself, are symlinks to a
/// directory elsewhere in the home. The targets read as empty to commands, as root and as uid
/// 65534, and `keel doctor` names them.
fn linked_stores(as_nobody: bool) {
    let test = "a_stores_symlinks_lead_to_hidden_targets";
    let env = Env::new();
    let dot = env.home.join("dotfiles");
    for (path, secret) in [
        ("ssh/id_ed25519", "RT-DOTFILE-KEY"),
        ("keel/config.toml", "# RT-KEEL-CONFIG\n"),
        ("aws/credentials", "RT-AWS-DOT"),
        ("gh/hosts.yml", "RT-GH-DIR"),
    ] {
        std::fs::create_dir_all(dot.join(path).parent().unwrap()).unwrap();
        std::fs::write(dot.join(path), secret).unwrap();
    }
    let link = |target: &Path, at: &Path| {
        std::fs::create_dir_all(at.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(target, at).unwrap();
    };
    link(
        &dot.join("ssh/id_ed25519"),
        &env.home.join(".ssh/id_ed25519"),
    );
    link(
        &dot.join("keel/config.toml"),
        &env.home.join(".config/keel/config.toml"),
    );
    link(&dot.join("aws"), &env.home.join(".aws"));
    // A directory link inside a store.
    link(&dot.join("gh"), &env.home.join(".config/gh/hosts"));
    let script = env.script(
        "links.yaml",
        r#"
turns:
  - tool_calls:
      - {id: c1, name: run_command, arguments: {command: "cat ~/dotfiles/ssh/id_ed25519 ~/dotfiles/keel/config.toml ~/dotfiles/aws/credentials ~/dotfiles/gh/hosts.yml ~/.aws/credentials; ls ~/dotfiles/gh | sed 's/^/listed: /'; echo done"}}
  - text: done
"#,
    );
    let runner = Runner::new(&env, as_nobody, test);
    if !namespaces(&runner, &env, test) {
        return;
    }
    let out = runner
        .command(&env, &["run", "--json", "--script"])
        .arg(&script)
        .arg("look")
        .output()
        .unwrap();
    assert_exit(&out, 0);
    let r = result(&json_lines(&out.stdout), "c1");
    assert!(r.contains("done"), "{r}");
    for secret in [
        "RT-DOTFILE-KEY",
        "RT-KEEL-CONFIG",
        "RT-AWS-DOT",
        "RT-GH-DIR",
        "listed: ",
    ] {
        assert!(
            !r.contains(secret),
            "as {}: {secret} leaked:\n{r}",
            runner.who()
        );
    }
    let line = doctor_line(&runner, &env, "sandbox: secret stores");
    for target in [
        "dotfiles/ssh/id_ed25519",
        "dotfiles/keel/config.toml",
        "dotfiles/aws",
        "dotfiles/gh",
    ] {
        assert!(line.contains(target), "{target}: {line}");
    }
}

#[test]
fn a_stores_symlinks_lead_to_hidden_targets() {
    linked_stores(false);
    if is_root() {
        linked_stores(true);
    }
}
