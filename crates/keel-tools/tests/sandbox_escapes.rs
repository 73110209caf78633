//! Effect-based sandbox tests: each attempt runs for real through the one command runner, and
//! the test checks what changed — the fixture tree (content, mode, mtime), a canary outside
//! it, a loopback listener — not what the command printed. They hold as root (CI) and as a
//! normal user; what needs a mechanism the machine lacks is skipped loudly (failing in CI).

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "shared/skip.rs"]
mod skip;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::Read;
use std::net::TcpListener;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use keel_tools::sandbox::{self, SandboxPolicy, WritableRoots};
use keel_tools::shell::exec::{self, ExecRequest};
use skip::have;

fn landlock(test: &str) -> bool {
    have(sandbox::is_available(), test, &sandbox::describe_support())
}

async fn run(dir: &Path, policy: SandboxPolicy, network: bool, script: &str) -> exec::ExecOutput {
    let mut req = ExecRequest::new(
        vec![
            OsString::from("bash"),
            OsString::from("-c"),
            OsString::from(script),
        ],
        dir,
    );
    req.policy = policy;
    req.roots = WritableRoots {
        workspace: Some(dir.to_path_buf()),
        network,
        ..WritableRoots::default()
    };
    req.timeout = Duration::from_secs(20);
    exec::run(req).await.unwrap()
}

/// A workspace with files, a `.git` with a config and hooks, a `.keel` config, and a canary
/// directory outside it (not under any temp dir the sandbox could grant).
struct World {
    ws: tempfile::TempDir,
    outside: tempfile::TempDir,
}

impl World {
    fn new() -> Self {
        let ws = tempfile::tempdir().unwrap();
        let root = ws.path();
        std::fs::create_dir_all(root.join("src")).unwrap();
        std::fs::create_dir_all(root.join(".git/hooks")).unwrap();
        std::fs::create_dir_all(root.join(".keel")).unwrap();
        std::fs::write(root.join("src/lib.rs"), "pub fn f() {}\n").unwrap();
        std::fs::write(root.join("README.md"), "# fixture\n").unwrap();
        std::fs::write(root.join(".git/config"), "[core]\n\tbare = false\n").unwrap();
        std::fs::write(root.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(root.join(".keel/config.toml"), "[shell]\n").unwrap();
        // Outside: beside the target dir, never under /tmp (a temp dir would be the same kind
        // of place as the command's private one).
        let base = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
        let outside = tempfile::tempdir_in(base).unwrap();
        std::fs::write(outside.path().join("canary.txt"), "canary\n").unwrap();
        Self { ws, outside }
    }

    fn root(&self) -> &Path {
        self.ws.path()
    }

    /// Every entry under the workspace and the outside dir: (content or "dir", mode, mtime).
    fn state(&self) -> BTreeMap<PathBuf, (Vec<u8>, u32, i64, i64)> {
        let mut out = BTreeMap::new();
        for base in [self.ws.path(), self.outside.path()] {
            walk(base, &mut out);
        }
        out
    }
}

fn walk(dir: &Path, out: &mut BTreeMap<PathBuf, (Vec<u8>, u32, i64, i64)>) {
    let meta = std::fs::symlink_metadata(dir).unwrap();
    out.insert(
        dir.to_path_buf(),
        (
            b"dir".to_vec(),
            meta.mode(),
            meta.mtime(),
            meta.mtime_nsec(),
        ),
    );
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let p = entry.path();
        let m = std::fs::symlink_metadata(&p).unwrap();
        if m.is_dir() {
            walk(&p, out);
        } else {
            let content = std::fs::read(&p).unwrap_or_default();
            out.insert(p, (content, m.mode(), m.mtime(), m.mtime_nsec()));
        }
    }
}

/// A loopback listener that records whether anything connected.
struct Listener {
    inner: TcpListener,
}

impl Listener {
    fn new() -> Self {
        let inner = TcpListener::bind("127.0.0.1:0").unwrap();
        inner.set_nonblocking(true).unwrap();
        Self { inner }
    }
    fn port(&self) -> u16 {
        self.inner.local_addr().unwrap().port()
    }
    fn connected(&self) -> bool {
        match self.inner.accept() {
            Ok((mut s, _)) => {
                let mut buf = [0u8; 16];
                let _ = s.read(&mut buf);
                true
            }
            Err(_) => false,
        }
    }
}

/// Commands that must change nothing under the read-only policy: writes, metadata changes,
/// network, signals, and the classifier's known disguises. `{out}` is the outside dir, `{port}`
/// the listener.
const READ_ONLY_CORPUS: &[&str] = &[
    "echo x > README.md",
    "echo x >> src/lib.rs",
    "rm -f README.md",
    "mkdir newdir",
    "mv README.md R.md",
    "ln -s src s",
    "touch src/lib.rs",
    "touch -d 2001-01-01 README.md",
    "chmod 000 src/lib.rs",
    "chmod -R 777 .",
    "chown nobody README.md",
    "setfattr -n user.x -v 1 README.md || python3 -c \"import os; os.setxattr('README.md','user.x',b'1')\"",
    "python3 -c \"import os; os.utime('README.md', (0, 0))\"",
    "echo x > .git/config",
    "echo x > .keel/config.toml",
    "echo x > {out}/canary.txt",
    "touch {out}/new",
    "chmod 000 {out}/canary.txt",
    "sed --expr='w pwned' README.md",
    "sed -i s/fixture/pwned/ README.md",
    "sed --in-pl s/fixture/pwned/ README.md",
    "sort --out=sorted README.md",
    "awk 'BEGIN { print \"x\" > \"awk.txt\" }'",
    "env -S'chmod 000 src/lib.rs'",
    "git grep --open-files-in-pager='touch pager' fixture",
    "tar --checkpoint=1 --checkpoint-action=exec='touch tarx' -cf /dev/null README.md",
    "exec 3<>/dev/tcp/127.0.0.1/{port}; echo hi >&3",
    "python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), 2)\"",
    "curl -s -m 2 http://127.0.0.1:{port}/ ",
    "python3 -c \"import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.sendto(b'x', ('127.0.0.1', {port}))\"",
    "kill -0 $PPID",
    "f() { touch fn.txt; }; f",
    "trap 'touch trap.txt' EXIT",
    "let 'x=a[$(touch let.txt)]'",
    "cp README.md {out}/copy",
];

#[tokio::test]
async fn read_only_corpus_changes_nothing_and_connects_nowhere() {
    if !landlock("read_only_corpus_changes_nothing_and_connects_nowhere") {
        return;
    }
    let world = World::new();
    let listener = Listener::new();
    let before = world.state();
    let mut escaped = Vec::new();
    for cmd in READ_ONLY_CORPUS {
        let cmd = cmd
            .replace("{out}", &world.outside.path().display().to_string())
            .replace("{port}", &listener.port().to_string());
        let _ = run(world.root(), SandboxPolicy::ReadOnly, false, &cmd).await;
        if world.state() != before {
            escaped.push(format!("{cmd}: changed the tree"));
            break;
        }
        if listener.connected() {
            escaped.push(format!("{cmd}: reached the loopback listener"));
        }
    }
    assert!(escaped.is_empty(), "{escaped:#?}");
    // The runner is really running things: the same harness sees a permitted read.
    let out = run(
        world.root(),
        SandboxPolicy::ReadOnly,
        false,
        "cat README.md",
    )
    .await;
    assert_eq!(out.stdout.text(), "# fixture\n");
}

#[tokio::test]
async fn network_is_off_by_default_and_on_by_configuration() {
    if !landlock("network_is_off_by_default_and_on_by_configuration") {
        return;
    }
    let world = World::new();
    let listener = Listener::new();
    let script = format!(
        "exec 3<>/dev/tcp/127.0.0.1/{}; echo hi >&3",
        listener.port()
    );
    for policy in [SandboxPolicy::ReadOnly, SandboxPolicy::WorkspaceWrite] {
        let out = run(world.root(), policy, false, &script).await;
        assert!(!out.success(), "{policy:?}: {}", out.combined_text());
        assert!(!listener.connected(), "{policy:?} reached the listener");
    }
    let out = run(world.root(), SandboxPolicy::WorkspaceWrite, true, &script).await;
    assert!(out.success(), "{}", out.combined_text());
    std::thread::sleep(Duration::from_millis(100));
    assert!(listener.connected(), "network = true must connect");
    // Pipes and socketpairs keep working with the network off.
    let out = run(
        world.root(),
        SandboxPolicy::ReadOnly,
        false,
        "echo piped | cat && python3 -c \"import socket; a, b = socket.socketpair(); a.send(b'ok'); print(b.recv(2).decode())\"",
    )
    .await;
    assert_eq!(out.stdout.text(), "piped\nok\n", "{}", out.combined_text());
}

#[tokio::test]
async fn workspace_write_keeps_git_and_keel_read_only_and_the_outside_untouched() {
    if !landlock("workspace_write_keeps_git_and_keel_read_only") {
        return;
    }
    let world = World::new();
    let mounts = sandbox::support().mount_namespace.is_ok();
    let out = run(
        world.root(),
        SandboxPolicy::WorkspaceWrite,
        false,
        "echo new > new.txt && mkdir -p build && echo o > build/o && chmod 600 new.txt",
    )
    .await;
    assert!(out.success(), "{}", out.combined_text());
    assert_eq!(
        std::fs::read_to_string(world.root().join("new.txt")).unwrap(),
        "new\n"
    );
    std::fs::remove_file(world.root().join("new.txt")).unwrap();
    std::fs::remove_dir_all(world.root().join("build")).unwrap();
    let before = world.state();
    let attempts = [
        "git config core.fsmonitor 'touch {out}/pwned'".to_string(),
        "printf '[core]\\n\\tfsmonitor = touch pwned\\n' >> .git/config".to_string(),
        "echo 'touch pwned' > .git/hooks/pre-commit; chmod +x .git/hooks/pre-commit".to_string(),
        "rm -rf .git/HEAD".to_string(),
        "mv .git .git-moved".to_string(),
        "printf '[shell]\\nsandbox = false\\n' > .keel/config.toml".to_string(),
        "rm -rf .keel".to_string(),
        "echo x > {out}/canary.txt; touch {out}/new".to_string(),
        "touch /tmp/keel-shared-tmp-{pid}".to_string(),
        // Signals to Keel (here the test process) outside the sandbox (PID namespace,
        // Landlock scoping): the file appears only if it worked.
        "kill -0 {pid} && touch signalled".to_string(),
    ];
    let pid = std::process::id().to_string();
    for attempt in &attempts {
        let cmd = attempt
            .replace("{out}", &world.outside.path().display().to_string())
            .replace("{pid}", &pid);
        let protected_only = cmd.contains(".git") || cmd.contains(".keel");
        if protected_only
            && !have(
                mounts,
                "workspace_write_keeps_git_and_keel_read_only",
                "no mount namespace (Keel not root and no unprivileged user namespaces): .git/.keel are protected by the file tools only",
            )
        {
            continue;
        }
        let _ = run(world.root(), SandboxPolicy::WorkspaceWrite, false, &cmd).await;
        assert_eq!(world.state(), before, "`{cmd}` changed the tree");
    }
    let shared = PathBuf::from(format!("/tmp/keel-shared-tmp-{pid}"));
    assert!(!shared.exists(), "the shared /tmp is not writable");
    // The private temp dir is.
    let out = run(
        world.root(),
        SandboxPolicy::ReadOnly,
        false,
        "echo t > \"$TMPDIR/t\" && cat \"$TMPDIR/t\"",
    )
    .await;
    assert_eq!(out.stdout.text(), "t\n", "{}", out.combined_text());
}

/// A workspace without `.keel` (a git repository with the index off: nothing of Keel's lives
/// there yet) gets one before its first command, so no command can write the project
/// configuration, rules or flows later sessions load as the repository's own (R5-7).
#[tokio::test]
async fn a_workspace_without_keel_cannot_get_one_from_a_command() {
    if !landlock("a_workspace_without_keel_cannot_get_one_from_a_command")
        || !have(
            sandbox::support().mount_namespace.is_ok(),
            "a_workspace_without_keel_cannot_get_one_from_a_command",
            "no mount namespace (Keel not root and no unprivileged user namespaces): .keel is protected by the file tools only",
        )
    {
        return;
    }
    let world = World::new();
    std::fs::remove_dir_all(world.root().join(".keel")).unwrap();
    let out = run(
        world.root(),
        SandboxPolicy::WorkspaceWrite,
        false,
        "mkdir -p .keel/flows && printf 'name: x\\n' > .keel/flows/x.yaml; \
         echo '[agent]' > .keel/config.toml; mkdir -p .keel/rules && echo r > .keel/rules/a.md; \
         echo ok > new.txt",
    )
    .await;
    assert_eq!(
        std::fs::read_to_string(world.root().join("new.txt")).unwrap(),
        "ok\n",
        "the workspace stays writable: {}",
        out.combined_text()
    );
    let keel = world.root().join(".keel");
    assert!(keel.is_dir(), "Keel made .keel before the command");
    let inside: Vec<_> = std::fs::read_dir(&keel).unwrap().collect();
    assert!(
        inside.is_empty(),
        "a command wrote into .keel: {inside:?}\n{}",
        out.combined_text()
    );
}

#[tokio::test]
async fn read_only_metadata_changes_are_refused_even_in_the_private_temp_dir() {
    if !landlock("read_only_metadata_changes_are_refused") {
        return;
    }
    if !have(
        sandbox::support().seccomp.is_ok(),
        "read_only_metadata_changes_are_refused",
        "no seccomp",
    ) {
        return;
    }
    let world = World::new();
    let out = run(
        world.root(),
        SandboxPolicy::ReadOnly,
        false,
        "touch \"$TMPDIR/f\" && chmod 600 \"$TMPDIR/f\"",
    )
    .await;
    assert!(!out.success(), "{}", out.combined_text());
    assert!(
        out.stderr.text().contains("Operation not permitted"),
        "{}",
        out.combined_text()
    );
    let mode = std::fs::metadata(world.root().join("README.md"))
        .unwrap()
        .permissions()
        .mode();
    assert_ne!(mode & 0o777, 0);
}

/// A user-configured rollback (`git checkout -- .`) may update the index and refs, never the
/// config or hooks.
#[tokio::test]
async fn rollback_protection_keeps_git_config_and_hooks_read_only() {
    if !landlock("rollback_protection_keeps_git_config_and_hooks_read_only")
        || !have(
            sandbox::support().mount_namespace.is_ok(),
            "rollback_protection_keeps_git_config_and_hooks_read_only",
            "no mount namespace (Keel not root and no unprivileged user namespaces)",
        )
    {
        return;
    }
    let world = World::new();
    let mut req = ExecRequest::new(
        vec![
            OsString::from("bash"),
            OsString::from("-c"),
            OsString::from(
                "echo idx > .git/index; echo evil >> .git/config; echo x > .git/hooks/post-checkout; true",
            ),
        ],
        world.root(),
    );
    req.roots = WritableRoots {
        workspace: Some(world.root().to_path_buf()),
        git: sandbox::GitProtection::CodePaths,
        ..WritableRoots::default()
    };
    let out = exec::run(req).await.unwrap();
    assert!(out.success(), "{}", out.combined_text());
    assert_eq!(
        std::fs::read_to_string(world.root().join(".git/index")).unwrap(),
        "idx\n"
    );
    assert_eq!(
        std::fs::read_to_string(world.root().join(".git/config")).unwrap(),
        "[core]\n\tbare = false\n"
    );
    assert!(!world.root().join(".git/hooks/post-checkout").exists());
}

/// A configured `~/.cargo` cache never makes `~/.cargo/bin` writable: a planted `cargo` there
/// would run outside the sandbox the next time the user builds.
#[tokio::test]
async fn a_writable_cargo_home_keeps_its_bin_dir_read_only() {
    if !landlock("a_writable_cargo_home_keeps_its_bin_dir_read_only") {
        return;
    }
    let cargo_home = sandbox::expand_home("~/.cargo");
    let bin = cargo_home.join("bin");
    if !bin.is_dir() || !cargo_home.join("registry").is_dir() {
        println!("SKIPPED: no {} with a registry here", bin.display());
        return;
    }
    let world = World::new();
    let canary = format!("keel-canary-{}", std::process::id());
    let mut req = ExecRequest::new(
        vec![
            OsString::from("bash"),
            OsString::from("-c"),
            OsString::from(format!(
                "touch {bin}/{canary}; mv {bin} {home}/bin-moved; mkdir -p {home}/registry && touch {home}/registry/{canary} && rm {home}/registry/{canary}",
                bin = bin.display(),
                home = cargo_home.display(),
            )),
        ],
        world.root(),
    );
    req.roots = WritableRoots {
        workspace: Some(world.root().to_path_buf()),
        extra: vec![cargo_home.clone()],
        ..WritableRoots::default()
    };
    let out = exec::run(req).await.unwrap();
    let planted = bin.join(&canary);
    let _ = std::fs::remove_file(&planted);
    assert!(!planted.exists() && bin.is_dir(), "{}", out.combined_text());
    assert!(!cargo_home.join("bin-moved").exists());
    // The rest of the cache stays writable (the last step succeeded): its directories are
    // granted one by one, without `bin`.
    assert!(out.success(), "{}", out.combined_text());
}

#[tokio::test]
async fn network_off_blocks_datagrams_to_named_unix_sockets() {
    let test = "network_off_blocks_datagrams_to_named_unix_sockets";
    let seccomp = sandbox::support().seccomp.clone();
    if !have(seccomp.is_ok(), test, &format!("{seccomp:?}"))
        || !have(
            exec::find_program("python3").is_some(),
            test,
            "python3 not found",
        )
    {
        return;
    }
    let world = World::new();
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let path = dir.path().join("s.sock");
    let listener = std::os::unix::net::UnixDatagram::bind(&path).unwrap();
    listener.set_nonblocking(true).unwrap();
    let received = || {
        let mut buf = [0u8; 16];
        listener.recv(&mut buf).is_ok()
    };
    let sock = path.display().to_string();
    let attempts = [
        format!(
            "python3 -c \"import socket; s=socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); s.sendmsg([b'x'], [], 0, '{sock}')\""
        ),
        format!(
            "python3 -c \"import socket; s=socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_NONBLOCK); s.sendto(b'x', '{sock}')\""
        ),
        format!(
            "python3 -c \"import socket; a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM); a.sendmsg([b'x'], [], 0, '{sock}')\""
        ),
        format!(
            "python3 -c \"import socket; s=socket.socket(socket.AF_UNIX, socket.SOCK_RAW); s.sendmsg([b'x'], [], 0, '{sock}')\""
        ),
    ];
    // With the network on too: it turns on TCP and UDP, never the user's UNIX sockets (B20).
    for network in [false, true] {
        for policy in [SandboxPolicy::ReadOnly, SandboxPolicy::WorkspaceWrite] {
            for cmd in &attempts {
                let out = run(world.root(), policy, network, cmd).await;
                assert!(
                    !received(),
                    "{policy:?}, network {network}: `{cmd}` reached the socket: {}",
                    out.combined_text()
                );
            }
        }
    }
    // The same datagram arrives unconfined: the test can see an escape.
    let out = run(world.root(), SandboxPolicy::Off, true, &attempts[0]).await;
    assert!(out.success(), "{}", out.combined_text());
    assert!(received(), "unconfined, the datagram must arrive");
}

#[tokio::test]
async fn keel_home_secrets_are_hidden_from_commands() {
    let test = "keel_home_secrets_are_hidden_from_commands";
    let mounts = sandbox::support().mount_namespace.clone();
    if !have(mounts.is_ok(), test, &format!("{mounts:?}")) {
        return;
    }
    let world = World::new();
    let home = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let token = home.path().join("server-token");
    std::fs::write(&token, "s3cret-token\n").unwrap();
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).unwrap();
    let script = format!(
        "cat {0}/server-token; ls -A {0}; echo planted > {0}/x",
        home.path().display()
    );
    for policy in [SandboxPolicy::ReadOnly, SandboxPolicy::WorkspaceWrite] {
        let mut req = ExecRequest::new(
            vec![
                OsString::from("bash"),
                OsString::from("-c"),
                OsString::from(&script),
            ],
            world.root(),
        );
        req.policy = policy;
        req.roots = WritableRoots {
            workspace: Some(world.root().to_path_buf()),
            hidden: vec![home.path().to_path_buf()],
            ..WritableRoots::default()
        };
        let out = exec::run(req).await.unwrap();
        let text = out.combined_text();
        assert!(!text.contains("s3cret"), "{policy:?}: {text}");
        assert!(
            !text.contains("server-token\n"),
            "{policy:?} listed it: {text}"
        );
        assert!(!home.path().join("x").exists(), "{policy:?} wrote into it");
        // The rest of the command's world is unchanged.
        let out = run(world.root(), policy, false, "cat README.md").await;
        assert_eq!(out.stdout.text(), "# fixture\n", "{policy:?}");
    }
    // Unconfined, the same script reads it: the test can see a leak.
    let out = run(world.root(), SandboxPolicy::Off, false, &script).await;
    assert!(out.combined_text().contains("s3cret"));
    std::fs::remove_file(home.path().join("x")).unwrap();
}
