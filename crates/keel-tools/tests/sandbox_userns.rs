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
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use keel_tools::sandbox::{self, MountMode, SandboxPolicy, WritableRoots};
use keel_tools::shell::exec::{self, ExecRequest};
use keel_tools::shell::{self, LintSettings, ShellSettings};
use keel_tools::{ToolContext, ToolRegistry, Workspace};

#[path = "shared/nobody.rs"]
mod nobody;

fn in_ci() -> bool {
    std::env::var_os("CI").is_some()
}

/// In the parent: runs `test` as an unprivileged child and checks it passed; returns `None`.
/// In the child: returns the prepared directory.
fn child_dir(test: &str, with_config: bool) -> Option<PathBuf> {
    if let Some(dir) = nobody::child_dir() {
        return Some(dir);
    }
    nobody::run_child(test, with_config);
    None
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
    // The hook was written; the repository, whose config now names a program, was then moved
    // out of git's sight by the runner's quarantine (red-team pass 4, R4-2).
    let quarantined = ws.join(shell::nested_git::QUARANTINE_NAME);
    assert!(quarantined.join("hooks/x").exists(), "{text}");
    assert!(!ws.join(".git").exists(), "{text}");
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
/// user-namespace helper next to plain `bash -c true`, the two interleaved in the same run.
#[tokio::test]
async fn helper_latency_next_to_plain_bash() {
    let test = "helper_latency_next_to_plain_bash";
    let Some(dir) = child_dir(test, false) else {
        return;
    };
    if !helper_in_use(test) {
        return;
    }
    let ws = dir.join("ws");
    std::fs::create_dir_all(ws.join(".git")).unwrap();
    let mut tools = ToolRegistry::new();
    shell::register(
        &mut tools,
        ShellSettings::default(),
        LintSettings {
            enabled: false,
            ..LintSettings::default()
        },
    );
    let ctx = ToolContext::new(Workspace::new(&ws).unwrap());
    let mut helper = Vec::new();
    let mut bash = Vec::new();
    for _ in 0..40 {
        let start = Instant::now();
        let res = tools
            .execute("run_command", serde_json::json!({"command": "true"}), &ctx)
            .await
            .unwrap();
        helper.push(start.elapsed());
        assert!(res.content.starts_with("exit code: 0"), "{}", res.content);
        let start = Instant::now();
        let status = tokio::process::Command::new("bash")
            .args(["-c", "true"])
            .status()
            .await
            .unwrap();
        bash.push(start.elapsed());
        assert!(status.success());
    }
    println!(
        "p50 run_command `true` via the user-namespace helper {:?}, plain `bash -c true` {:?} \
         (40 interleaved runs each, debug build)",
        p50(helper),
        p50(bash)
    );
}

/// Red-team pass 4, R4-16: an approved project MCP server's `env` (any command's environment)
/// held `LD_PRELOAD` naming the repository's library; the unprivileged helper was started with
/// that environment, so `ld.so` ran the library in the helper — unconfined, as the user —
/// before it built any sandbox. The helper now starts with no variable of the command's: the
/// environment travels in the policy and is set at the command's own `exec`.
#[tokio::test]
async fn the_commands_environment_never_reaches_the_unconfined_helper() {
    let test = "the_commands_environment_never_reaches_the_unconfined_helper";
    let Some(dir) = child_dir(test, false) else {
        return;
    };
    if !helper_in_use(test) {
        return;
    }
    // Rust links with `cc`: wherever these tests build, it is there.
    let Some(cc) = ["/usr/bin/cc", "/usr/bin/gcc", "/usr/local/bin/cc"]
        .into_iter()
        .find(|p| Path::new(p).exists())
    else {
        assert!(!in_ci(), "{test}: no C compiler — CI machines have one");
        println!("SKIPPED {test}: no C compiler");
        return;
    };
    let ws = dir.join("ws");
    let outside = dir.join("outside");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    let src = dir.join("preload.c");
    std::fs::write(
        &src,
        format!(
            "#include <stdio.h>\n\
             __attribute__((constructor)) static void ran(void) {{\n\
               FILE *f = fopen(\"{}\", \"a\"); if (f) {{ fputs(\"ran\\n\", f); fclose(f); }}\n\
               FILE *g = fopen(\"{}\", \"a\"); if (g) {{ fputs(\"ran\\n\", g); fclose(g); }}\n\
             }}\n",
            outside.join("unconfined.txt").display(),
            ws.join("confined.txt").display()
        ),
    )
    .unwrap();
    let lib = dir.join("libfast.so");
    let built = std::process::Command::new(cc)
        .args(["-shared", "-fPIC", "-o"])
        .arg(&lib)
        .arg(&src)
        .output()
        .unwrap();
    assert!(built.status.success(), "{test}: {built:?}");
    let mut req = ExecRequest::new(
        vec![
            OsString::from("bash"),
            OsString::from("-c"),
            OsString::from("echo \"value=$PROBE_VALUE\"; env | grep -c KEEL_SANDBOX_POLICY"),
        ],
        &ws,
    );
    req.policy = SandboxPolicy::WorkspaceWrite;
    req.roots = WritableRoots {
        workspace: Some(ws.clone()),
        ..WritableRoots::default()
    };
    req.env_set = vec![
        ("LD_PRELOAD".into(), lib.display().to_string()),
        ("PROBE_VALUE".into(), "a b=c".into()),
    ];
    req.timeout = Duration::from_secs(20);
    let text = exec::run(req).await.unwrap().combined_text();
    assert!(
        !outside.join("unconfined.txt").exists(),
        "the library ran outside the sandbox: {text}"
    );
    // The command itself still got its whole environment (and not the policy).
    assert!(text.contains("value=a b=c"), "{text}");
    assert!(text.lines().any(|l| l.trim() == "0"), "{text}");
    assert!(ws.join("confined.txt").exists(), "{text}");
}
