//! The sandbox as a normal user: without `CAP_SYS_ADMIN`, commands start through the
//! user-namespace helper (`keel-sandbox-exec`), which must still make `.git`/`.keel` read-only,
//! hide Keel's data directory and config file, and leave the workspace writable.
//!
//! Each test re-executes this test binary as a child process running only itself: through
//! `setpriv --reuid=65534 --regid=65534 --clear-groups` when run as root (CI), directly
//! otherwise. The child does the work in a fresh directory the parent prepared. When the
//! kernel forbids unprivileged user namespaces the child skips loudly (failing in CI).

// Tests start programs of their own (the keel binary, git fixtures, tmux, servers): allowed
// here, outside Keel's one spawn path (docs/SECURITY.md, "One way to start a process").
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use keel_tools::sandbox::{self, MountMode, SandboxPolicy, WritableRoots};
use keel_tools::shell::exec::{self, ExecRequest};
use keel_tools::shell::{self, LintSettings, ShellSettings};
use keel_tools::{ToolContext, ToolRegistry, Workspace};

/// Set in the child: the directory prepared by the parent.
const CHILD_DIR: &str = "KEEL_USERNS_TEST_DIR";
const NOBODY: u32 = 65534;

fn in_ci() -> bool {
    std::env::var_os("CI").is_some()
}

/// In the parent: prepares a directory, runs `test` as an unprivileged child and checks it
/// passed. Returns `None`. In the child: returns the prepared directory.
fn child_dir(test: &str, with_config: bool) -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os(CHILD_DIR) {
        return Some(PathBuf::from(dir));
    }
    let root = rustix::process::geteuid().is_root();
    let dir = tempfile::Builder::new()
        .prefix("keel-userns-")
        .tempdir_in("/tmp")
        .unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let work = dir.path().join("w");
    std::fs::create_dir(&work).unwrap();
    let config = work.join("user-config.toml");
    std::fs::write(&config, "# user-config-secret\n").unwrap();
    let exe = std::env::current_exe().unwrap();
    let mut cmd = if root {
        let setpriv = ["/usr/bin/setpriv", "/bin/setpriv"]
            .into_iter()
            .find(|p| Path::new(p).exists())
            .unwrap_or_else(|| {
                panic!(
                    "{test}: `setpriv` (util-linux) is needed to run this test as an unprivileged \
                     user when the tests run as root; install util-linux"
                )
            });
        chown_tree(&work, NOBODY);
        let mut c = Command::new(setpriv);
        c.args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
        ])
        .arg(&exe);
        c
    } else {
        Command::new(&exe)
    };
    let out = cmd
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env(CHILD_DIR, &work)
        .env("HOME", &work)
        .env(
            "KEEL_CONFIG",
            if with_config {
                config.as_os_str()
            } else {
                "".as_ref()
            },
        )
        .env_remove("KEEL_HOME")
        .env_remove("XDG_DATA_HOME")
        .env_remove("XDG_CONFIG_HOME")
        .output()
        .unwrap_or_else(|e| panic!("{test}: cannot run {} as a child: {e}", exe.display()));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // Relay the child's report (figures, a visible skip).
    for line in text
        .lines()
        .filter(|l| l.contains("SKIPPED") || l.contains("p50"))
    {
        println!("{line}");
    }
    assert!(
        out.status.success(),
        "{test} failed as uid {} (as root, the test binary and its directories must be \
         executable by uid 65534):\n{text}",
        if root {
            NOBODY
        } else {
            rustix::process::geteuid().as_raw()
        }
    );
    assert!(
        text.contains("1 passed"),
        "{test}: the child did not run the test:\n{text}"
    );
    None
}

fn chown_tree(path: &Path, uid: u32) {
    let id = Some(rustix::process::Uid::from_raw(uid));
    let gid = Some(rustix::process::Gid::from_raw(uid));
    rustix::fs::chown(path, id, gid).unwrap();
    if path.is_dir() {
        for e in std::fs::read_dir(path).unwrap() {
            chown_tree(&e.unwrap().path(), uid);
        }
    }
}

/// In the child: the helper is in use, or the test skips (failing in CI).
fn helper_in_use(test: &str) -> bool {
    match &sandbox::support().mount_namespace {
        Ok(MountMode::UserNamespace(_)) => true,
        Ok(MountMode::InProcess) => panic!("{test}: an unprivileged child holds CAP_SYS_ADMIN"),
        Err(e) => {
            assert!(!in_ci(), "{test}: {e} — CI machines must allow it");
            println!("SKIPPED {test}: {e}");
            false
        }
    }
}

async fn run(ws: &Path, policy: SandboxPolicy, hidden: &[PathBuf], script: &str) -> String {
    let mut req = ExecRequest::new(
        vec![
            OsString::from("bash"),
            OsString::from("-c"),
            OsString::from(script),
        ],
        ws,
    );
    req.policy = policy;
    req.roots = WritableRoots {
        workspace: Some(ws.to_path_buf()),
        hidden: hidden.to_vec(),
        ..WritableRoots::default()
    };
    req.timeout = Duration::from_secs(20);
    let out = exec::run(req).await.unwrap();
    out.combined_text()
}

#[tokio::test]
async fn a_normal_user_gets_read_only_git_and_keel_and_hidden_keel_data() {
    let test = "a_normal_user_gets_read_only_git_and_keel_and_hidden_keel_data";
    let Some(dir) = child_dir(test, true) else {
        return;
    };
    if !helper_in_use(test) {
        return;
    }
    let ws = dir.join("ws");
    for d in [".git/hooks", ".keel", "src"] {
        std::fs::create_dir_all(ws.join(d)).unwrap();
    }
    std::fs::write(ws.join(".git/config"), "[core]\n").unwrap();
    std::fs::write(ws.join(".keel/config.toml"), "# project\n").unwrap();
    let data = dir.join("keel-data");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(data.join("server-token"), "s3cret-token\n").unwrap();
    let config = std::env::var("KEEL_CONFIG").unwrap();

    let script = format!(
        "echo '[core] fsmonitor = evil' >> .git/config; echo 'sandbox = false' >> \
         .keel/config.toml; echo x > .git/hooks/x; ls -A {data} | sed 's/^/listed: /'; cat {data}/server-token; \
         cat {config}; echo planted > {data}/x; echo made > src/new.txt; id -u",
        data = data.display()
    );
    let text = run(
        &ws,
        SandboxPolicy::WorkspaceWrite,
        std::slice::from_ref(&data),
        &script,
    )
    .await;
    assert_eq!(
        std::fs::read_to_string(ws.join(".git/config")).unwrap(),
        "[core]\n",
        "{text}"
    );
    assert_eq!(
        std::fs::read_to_string(ws.join(".keel/config.toml")).unwrap(),
        "# project\n",
        "{text}"
    );
    assert!(!ws.join(".git/hooks/x").exists(), "{text}");
    assert!(text.contains("Read-only file system"), "{text}");
    assert!(!text.contains("s3cret"), "the token leaked: {text}");
    assert!(
        !text.contains("listed: "),
        "the data dir was listed: {text}"
    );
    assert!(
        !text.contains("user-config-secret"),
        "KEEL_CONFIG leaked: {text}"
    );
    assert!(!data.join("x").exists(), "{text}");
    assert_eq!(
        std::fs::read_to_string(ws.join("src/new.txt")).unwrap(),
        "made\n",
        "the workspace stays writable: {text}"
    );
    let uid = rustix::process::geteuid().as_raw().to_string();
    assert!(
        text.lines().any(|l| l == uid),
        "the command runs as the same user: {text}"
    );
    // The policy never reaches the command.
    let text = run(
        &ws,
        SandboxPolicy::WorkspaceWrite,
        std::slice::from_ref(&data),
        "env; cat /proc/self/environ | tr '\\0' '\\n'",
    )
    .await;
    assert!(!text.contains(sandbox::POLICY_ENV), "{text}");

    // Read-only: the data stays hidden, and nothing is written.
    let text = run(
        &ws,
        SandboxPolicy::ReadOnly,
        std::slice::from_ref(&data),
        &script,
    )
    .await;
    assert!(!text.contains("s3cret"), "{text}");
    assert!(!ws.join(".git/hooks/x").exists(), "{text}");
    assert_eq!(
        std::fs::read_to_string(ws.join("src/new.txt")).unwrap(),
        "made\n",
        "{text}"
    );

    // Unconfined, the same script reaches all of it: the test can see a leak.
    let text = run(
        &ws,
        SandboxPolicy::Off,
        std::slice::from_ref(&data),
        &script,
    )
    .await;
    assert!(text.contains("s3cret"), "{text}");
    assert!(ws.join(".git/hooks/x").exists(), "{text}");
}

#[tokio::test]
async fn the_helper_mounts_cannot_be_undone_by_the_command() {
    let test = "the_helper_mounts_cannot_be_undone_by_the_command";
    let Some(dir) = child_dir(test, true) else {
        return;
    };
    if !helper_in_use(test) {
        return;
    }
    let ws = dir.join("ws");
    std::fs::create_dir_all(ws.join(".git")).unwrap();
    std::fs::write(ws.join(".git/config"), "[core]\n").unwrap();
    let script = "umount .git; umount -l .git; \
                  unshare -Urm sh -c 'umount -l .git; echo x >> .git/config'; \
                  echo x >> .git/config; true";
    let text = run(&ws, SandboxPolicy::WorkspaceWrite, &[], script).await;
    assert_eq!(
        std::fs::read_to_string(ws.join(".git/config")).unwrap(),
        "[core]\n",
        "{text}"
    );
}

fn p50(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// A figure, not a limit: p50 of `run_command {"command": "true"}` end to end through the
/// helper (a workspace with `.git`: mount namespace needed) next to the in-process sandbox
/// (Landlock and seccomp on the spawning thread; a workspace without protected paths), the two
/// interleaved in the same run.
#[tokio::test]
async fn helper_latency_next_to_in_process() {
    let test = "helper_latency_next_to_in_process";
    let Some(dir) = child_dir(test, false) else {
        return;
    };
    if !helper_in_use(test) {
        return;
    }
    let with_git = dir.join("with-git");
    std::fs::create_dir_all(with_git.join(".git")).unwrap();
    let plain = dir.join("plain");
    std::fs::create_dir_all(&plain).unwrap();
    let mut tools = ToolRegistry::new();
    shell::register(
        &mut tools,
        ShellSettings::default(),
        LintSettings {
            enabled: false,
            ..LintSettings::default()
        },
    );
    let helper_ctx = ToolContext::new(Workspace::new(&with_git).unwrap());
    let direct_ctx = ToolContext::new(Workspace::new(&plain).unwrap());
    let mut helper = Vec::new();
    let mut direct = Vec::new();
    for _ in 0..40 {
        for (ctx, out) in [(&helper_ctx, &mut helper), (&direct_ctx, &mut direct)] {
            let start = Instant::now();
            let res = tools
                .execute("run_command", serde_json::json!({"command": "true"}), ctx)
                .await
                .unwrap();
            out.push(start.elapsed());
            assert!(res.content.starts_with("exit code: 0"), "{}", res.content);
        }
    }
    println!(
        "p50 run_command `true`: via the user-namespace helper {:?}, in-process sandbox {:?} \
         (40 interleaved runs each, debug build)",
        p50(helper),
        p50(direct)
    );
}
