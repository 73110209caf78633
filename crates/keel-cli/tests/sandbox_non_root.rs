//! `keel run` as a normal user: the model's `run_command` runs through the user-namespace
//! sandbox helper (`keel __keel-sandbox-exec`), so it cannot write `.git/hooks`, cannot read
//! Keel's session database or server token, while the workspace stays writable.
//!
//! As root (CI) the run happens as uid 65534 through `setpriv` (util-linux; the test fails
//! clearly without it); as a normal user it runs directly. If the kernel forbids
//! unprivileged user namespaces the test skips loudly outside CI and fails in CI.

// Tests start programs of their own (the keel binary, git fixtures, tmux, servers): allowed
// here, outside Keel's one spawn path (docs/SECURITY.md, "One way to start a process").
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

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
    // `/proc/self` belongs to the effective uid.
    let root = std::fs::metadata("/proc/self").unwrap().uid() == 0;
    // `keel` alone in a directory (hard-linked: no copy), so no `keel-sandbox-exec` sits next
    // to it and Keel re-executes itself (`/proc/self/exe __keel-sandbox-exec`).
    let bin_dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    std::fs::set_permissions(bin_dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let keel_bin = bin_dir.path().join("keel");
    let keel = env.keel();
    if std::fs::hard_link(keel.get_program(), &keel_bin).is_err() {
        std::fs::copy(keel.get_program(), &keel_bin).unwrap();
    }
    let mut cmd = if root {
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
        let mut c = Command::new(setpriv);
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(&keel_bin);
        c
    } else {
        Command::new(&keel_bin)
    };
    cmd.current_dir(&env.work).env_clear();
    for (k, v) in keel.get_envs() {
        if let Some(v) = v {
            cmd.env(k, v);
        }
    }
    let doctor = {
        let mut d = Command::new(cmd.get_program());
        d.args(cmd.get_args()).arg("doctor").current_dir(&env.work);
        d.env_clear();
        for (k, v) in cmd.get_envs() {
            if let Some(v) = v {
                d.env(k, v);
            }
        }
        d.output().unwrap()
    };
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
        return;
    }
    assert!(line.contains("user namespace"), "{line}");
    assert!(
        line.contains("`keel __keel-sandbox-exec`"),
        "Keel re-executes itself as the helper: {line}"
    );

    let out = cmd
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
