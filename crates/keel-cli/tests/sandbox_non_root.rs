//! `keel run` as a normal user: the model's `run_command` runs through the user-namespace
//! sandbox helper (`keel __keel-sandbox-exec`), so it cannot write `.git/hooks`, cannot read
//! Keel's session database or server token, while the workspace stays writable.
//!
//! As root (CI) the run happens as uid 65534 through `setpriv` (util-linux; the test fails
//! clearly without it); as a normal user it runs directly. If the kernel forbids
//! unprivileged user namespaces the test skips loudly outside CI and fails in CI.

// Tests start programs of their own (the keel binary, git fixtures, tmux, servers): allowed
// here, outside Keel's one spawn path (docs/SECURITY.md, "One way to start a process").
#![allow(
    clippy::disallowed_macros,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::disallowed_methods
)]

mod common;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::Command;

use common::*;
use serde_json::Value;

const NOBODY: u32 = 65534;

fn chown_tree(path: &Path) {
    std::os::unix::fs::lchown(path, Some(NOBODY), Some(NOBODY)).unwrap();
    if path.is_dir() && !path.is_symlink() {
        for e in std::fs::read_dir(path).unwrap() {
            chown_tree(&e.unwrap().path());
        }
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

/// `keel` as a normal user with a test's environment: itself when the tests run as a normal
/// user, else through `setpriv` as uid 65534 (the test's directories handed to that user).
struct NormalUser {
    program: std::ffi::OsString,
    args: Vec<std::ffi::OsString>,
    envs: Vec<(std::ffi::OsString, std::ffi::OsString)>,
    work: std::path::PathBuf,
    /// Holds `keel` alone in a directory (hard-linked: no copy), so no `keel-sandbox-exec`
    /// sits next to it and Keel re-executes itself (`/proc/self/exe __keel-sandbox-exec`).
    _bin: tempfile::TempDir,
}

impl NormalUser {
    /// A fresh `keel` command as that user, in the workspace, with only the test's variables.
    fn keel(&self) -> Command {
        let mut c = Command::new(&self.program);
        c.args(&self.args)
            .current_dir(&self.work)
            .env_clear()
            .envs(self.envs.iter().map(|(k, v)| (k, v)));
        c
    }
}

/// [`NormalUser`] for `env`, after checking with `keel doctor` that the user-namespace helper
/// protects paths; `None` (after a loud skip) when the kernel forbids unprivileged user
/// namespaces outside CI.
fn normal_user(env: &Env, test: &str) -> Option<NormalUser> {
    // `/proc/self` belongs to the effective uid.
    let root = std::fs::metadata("/proc/self").unwrap().uid() == 0;
    let bin_dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    std::fs::set_permissions(bin_dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let keel_bin = bin_dir.path().join("keel");
    let keel = env.keel();
    if std::fs::hard_link(keel.get_program(), &keel_bin).is_err() {
        std::fs::copy(keel.get_program(), &keel_bin).unwrap();
    }
    let (program, args) = if root {
        let setpriv = ["/usr/bin/setpriv", "/bin/setpriv"]
            .into_iter()
            .find(|p| Path::new(p).exists())
            .unwrap_or_else(|| {
                panic!(
                    "{test}: `setpriv` (util-linux) is needed to run keel as an unprivileged user \
                     when the tests run as root; install util-linux"
                )
            });
        let top = env.work.parent().unwrap();
        std::fs::set_permissions(top, std::fs::Permissions::from_mode(0o755)).unwrap();
        chown_tree(top);
        let args = ["--reuid=65534", "--regid=65534", "--clear-groups"]
            .into_iter()
            .map(std::ffi::OsString::from)
            .chain([keel_bin.clone().into_os_string()])
            .collect();
        (setpriv.into(), args)
    } else {
        (keel_bin.clone().into_os_string(), Vec::new())
    };
    let user = NormalUser {
        program,
        args,
        envs: keel
            .get_envs()
            .filter_map(|(k, v)| v.map(|v| (k.to_os_string(), v.to_os_string())))
            .collect(),
        work: env.work.clone(),
        _bin: bin_dir,
    };
    let doctor = user.keel().arg("doctor").output().unwrap();
    let doctor = String::from_utf8_lossy(&doctor.stdout).to_string()
        + &String::from_utf8_lossy(&doctor.stderr);
    let line = doctor
        .lines()
        .find(|l| l.contains("protected paths"))
        .unwrap_or_else(|| panic!("{test}: doctor says nothing of protected paths:\n{doctor}"))
        .to_string();
    if line.contains("NOT read-only") {
        assert!(
            std::env::var_os("CI").is_none(),
            "{test}: {line} — CI machines must allow unprivileged user namespaces"
        );
        println!("SKIPPED {test}: {line}");
        return None;
    }
    assert!(line.contains("user namespace"), "{line}");
    assert!(
        line.contains("`keel __keel-sandbox-exec`"),
        "Keel re-executes itself as the helper: {line}"
    );
    Some(user)
}

#[test]
fn run_command_as_a_normal_user_cannot_touch_git_hooks_or_keel_secrets() {
    let test = "run_command_as_a_normal_user_cannot_touch_git_hooks_or_keel_secrets";
    let env = Env::new();
    let git = Command::new("git")
        .args(["init", "-q"])
        .current_dir(&env.work)
        .status()
        .unwrap();
    assert!(git.success());
    let data = env.home.join("data");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(data.join("server-token"), "s3cret-token\n").unwrap();
    std::fs::set_permissions(
        data.join("server-token"),
        std::fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    // The model disguises its writes from the command analysis; only the kernel stops them.
    let script = env.script(
        "attack.yaml",
        &format!(
            r#"
turns:
  - tool_calls:
      - {{id: c1, name: run_command, arguments: {{command: "python3 -c \"open('.git/hooks/pre-commit','w').write('evil')\"; echo hooks-rc=$?"}}}}
      - {{id: c2, name: run_command, arguments: {{command: "ls -A {data} | sed 's/^/listed: /'; cat {data}/server-token {data}/keel.db | head -c 200; echo"}}}}
      - {{id: c3, name: run_command, arguments: {{command: "python3 -c \"open('made.txt','w').write('ok')\""}}}}
  - text: done
"#,
            data = data.display()
        ),
    );
    let Some(user) = normal_user(&env, test) else {
        return;
    };
    let out = user
        .keel()
        .args(["run", "--json", "--script"])
        .arg(&script)
        .arg("look around")
        .output()
        .unwrap();
    assert_exit(&out, 0);
    let events = json_lines(&out.stdout);
    let hooks = result(&events, "c1");
    assert!(
        !env.work.join(".git/hooks/pre-commit").exists(),
        "a hook was planted: {hooks}"
    );
    assert!(hooks.contains("Read-only file system"), "{hooks}");
    let secrets = result(&events, "c2");
    assert!(!secrets.contains("s3cret"), "the token leaked: {secrets}");
    assert!(
        !secrets.contains("listed: "),
        "the data dir was listed: {secrets}"
    );
    assert!(
        !secrets.contains("SQLite"),
        "the session DB was read: {secrets}"
    );
    assert!(
        data.join("keel.db").exists(),
        "the session database lives in the data dir this test guards"
    );
    let made = result(&events, "c3");
    println!("c1: {hooks}\nc2: {secrets}\nc3: {made}");
    assert_eq!(
        std::fs::read_to_string(env.work.join("made.txt")).unwrap_or_default(),
        "ok",
        "the workspace stays writable: {made}"
    );
}

/// A project's MCP stdio server, approved, run by a normal user (uid 65534 under root): it goes
/// through the user-namespace helper under the read-only policy, so the script it runs can
/// neither reach a loopback listener nor write outside its temp dir.
#[test]
fn a_project_mcp_server_as_a_normal_user_runs_confined() {
    use std::io::Read;
    let test = "a_project_mcp_server_as_a_normal_user_runs_confined";
    let python = ["/usr/bin/python3", "/bin/python3"]
        .into_iter()
        .find(|p| Path::new(p).exists());
    let Some(python) = python else {
        assert!(
            std::env::var_os("CI").is_none(),
            "{test}: CI must install python3"
        );
        println!("SKIPPED {test}: no /usr/bin/python3");
        return;
    };
    let env = Env::new();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    let marker = env.home.join("server-wrote-here");
    std::fs::create_dir_all(env.work.join("tools")).unwrap();
    std::fs::write(
        env.work.join("tools/mcp_server.py"),
        format!(
            r#"import socket, sys
report = []
try:
    s = socket.create_connection(("127.0.0.1", {port}), timeout=3)
    s.sendall(b"reached")
    s.close()
    report.append("net=sent")
except Exception:
    report.append("net=blocked")
try:
    open({marker:?}, "w").write("x")
    report.append("write=done")
except Exception:
    report.append("write=blocked")
sys.stderr.write("REPORT " + " ".join(report) + "\n")
sys.exit(1)
"#,
            marker = marker.display().to_string()
        ),
    )
    .unwrap();
    let json = serde_json::json!({"mcpServers": {"helper": {"command": python, "args": ["tools/mcp_server.py"]}}});
    std::fs::write(env.work.join(".mcp.json"), json.to_string()).unwrap();
    let Some(user) = normal_user(&env, test) else {
        return;
    };
    let added = user
        .keel()
        .args(["mcp", "add", "helper", "--yes"])
        .output()
        .unwrap();
    assert_exit(&added, 0);
    let out = user
        .keel()
        .args(["mcp", "test", "helper"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    println!("{text}");
    assert!(text.contains("REPORT"), "the server ran: {text}");
    assert!(
        text.contains("net=blocked") && text.contains("write=blocked"),
        "{text}"
    );
    std::thread::sleep(std::time::Duration::from_millis(200));
    let reached = match listener.accept() {
        Ok((mut s, _)) => {
            let mut got = String::new();
            let _ = s.read_to_string(&mut got);
            format!("a connection ({got})")
        }
        Err(_) => String::new(),
    };
    assert_eq!(reached, "", "the confined server reached the listener");
    assert!(!marker.exists(), "the confined server wrote outside");
}

fn set_tree_mode(path: &Path, dir: u32, file: u32) {
    if path.is_dir() && !path.is_symlink() {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(dir)).unwrap();
        for e in std::fs::read_dir(path).unwrap() {
            set_tree_mode(&e.unwrap().path(), dir, file);
        }
    } else if !path.is_symlink() {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(file)).unwrap();
    }
}

/// A read-only workspace (a checkout the user cannot write): the model's writes fail, it says
/// it is done anyway, and `keel run` exits 4 — CI must not count that as a pass.
#[test]
fn a_run_in_a_read_only_workspace_is_not_a_pass() {
    let test = "a_run_in_a_read_only_workspace_is_not_a_pass";
    let env = Env::new();
    let script = env.script(
        "write.yaml",
        "turns:\n  - tool_calls:\n      - name: create_file\n        arguments: {path: src/extra.rs, content: \"pub fn extra() {}\\n\"}\n  - text: \"Done: added src/extra.rs.\"\n  - text: \"Done: the write was refused.\"\n",
    );
    let Some(user) = normal_user(&env, test) else {
        return;
    };
    set_tree_mode(&env.work, 0o555, 0o444);
    let out = user
        .keel()
        .args(["run", "--script"])
        .arg(&script)
        .arg("add an extra module")
        .output()
        .unwrap();
    set_tree_mode(&env.work, 0o755, 0o644);
    assert_exit(&out, 4);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("! completed, but a write was refused and not redone (create_file:"),
        "{text}"
    );
    assert!(!text.contains("✓ completed"), "{text}");
    assert!(!env.work.join("src/extra.rs").exists());
}
