//! The kernel policy with no root powers left, and secrets out of reach: each attempt runs
//! through the one command runner, then the test checks the effect — a loop device's backing
//! file, a file's inode flags, another terminal's input queue, a System V segment, another
//! process's priority and limits, the keyrings, the process table, the protected tree, what a
//! command printed of a secret. Each test runs as whoever runs the tests and, when that is
//! root (CI), again as uid 65534 through the user-namespace helper. A test that needs a
//! program or mechanism the machine lacks skips loudly (failing in CI).

// Tests start programs of their own (the keel binary, setpriv, losetup, python3, sleep):
// allowed explicitly (clippy.toml's `disallowed-methods`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

#[macro_use]
#[path = "shared/nobody.rs"]
mod nobody;

#[path = "shared/skip.rs"]
mod skip;

use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use keel_tools::sandbox::{self, SandboxPolicy, WritableRoots};
use keel_tools::shell::exec::{self, ExecRequest};
use skip::{have, namespaces, python};

async fn run_with(ws: &Path, policy: SandboxPolicy, roots: WritableRoots, script: &str) -> String {
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
        ..roots
    };
    req.timeout = Duration::from_secs(20);
    exec::run(req).await.unwrap().combined_text()
}

/// A shell line running the Python program `src` with `args`.
fn py(src: &str, args: &str) -> String {
    format!(
        "S='{}'\npython3 -c \"$S\" {args}",
        src.replace('\'', "'\\''")
    )
}

async fn run(ws: &Path, policy: SandboxPolicy, script: &str) -> String {
    run_with(ws, policy, WritableRoots::default(), script).await
}

/// A canary directory outside the workspace (beside it).
fn outside(ws: &Path) -> PathBuf {
    let o = ws.parent().unwrap().join("outside");
    std::fs::create_dir_all(&o).unwrap();
    o
}

// ---------------------------------------------------------------------------------------------
// Devices.

/// A loop device over a backing file holding `canary`, detached on drop.
struct Loop {
    device: PathBuf,
    backing: PathBuf,
}

impl Loop {
    fn new(dir: &Path, canary: &str) -> Option<Self> {
        let backing = dir.join("loop-backing.img");
        let mut data = canary.as_bytes().to_vec();
        data.resize(64 * 1024, 0);
        std::fs::write(&backing, data).unwrap();
        let out = Command::new("losetup")
            .args(["-f", "--show"])
            .arg(&backing)
            .output()
            .ok()?;
        let device = String::from_utf8_lossy(&out.stdout).trim().to_string();
        (out.status.success() && !device.is_empty()).then(|| Loop {
            device: PathBuf::from(device),
            backing,
        })
    }

    fn major_minor(&self) -> (u64, u64) {
        use std::os::unix::fs::MetadataExt;
        let rdev = std::fs::metadata(&self.device).unwrap().rdev();
        (
            rustix::fs::major(rdev) as u64,
            rustix::fs::minor(rdev) as u64,
        )
    }
}

impl Drop for Loop {
    fn drop(&mut self) {
        let _ = Command::new("losetup").arg("-d").arg(&self.device).status();
    }
}

async fn device_nodes(test: &str, ws: &Path) {
    if !namespaces(test) {
        return;
    }
    // Everyone: no device node can be made, FIFOs can.
    let out = run(
        ws,
        SandboxPolicy::WorkspaceWrite,
        "mknod null c 1 3; mknod disk b 7 0; mkfifo fifo && echo fifo-ok",
    )
    .await;
    for name in ["null", "disk"] {
        let made = std::fs::symlink_metadata(ws.join(name))
            .is_ok_and(|m| m.file_type().is_char_device() || m.file_type().is_block_device());
        assert!(!made, "a device node `{name}` was made: {out}");
    }
    assert!(out.contains("fifo-ok"), "mkfifo must keep working: {out}");
    // No terminal of the host's /dev and no disk is there; the minimal devices work.
    let out = run(
        ws,
        SandboxPolicy::WorkspaceWrite,
        "ls /dev; head -c 4 /dev/zero | od -An -tx1; echo x > /dev/null && echo null-ok; \
         head -c 8 /dev/urandom | wc -c; test -e /dev/tty0 && echo HAVE-TTY0; \
         ls /dev/pts; python3 -c 'import pty; m, s = pty.openpty(); print(\"pty-ok\")'",
    )
    .await;
    assert!(
        out.contains("null-ok") && out.contains(" 00 00 00 00"),
        "{out}"
    );
    assert!(!out.contains("HAVE-TTY0"), "{out}");
    for gone in ["vda", "sda", "nvme0n1", "loop0", "console", "kmsg", "mem"] {
        assert!(
            !out.lines().any(|l| l.trim() == gone),
            "/dev/{gone} is reachable: {out}"
        );
    }
    if exec::find_program("python3").is_some() {
        assert!(out.contains("pty-ok"), "its own terminals work: {out}");
    }
    if !nobody::is_root() {
        return;
    }
    // Root: a loop device over a canary file can be neither read nor written, by /dev or by a
    // node made in the workspace.
    let canary = format!("keel-loop-canary-{}", std::process::id());
    let Some(lo) = Loop::new(ws.parent().unwrap(), &canary) else {
        have(false, test, "losetup cannot attach a loop device here");
        return;
    };
    let (major, minor) = lo.major_minor();
    let script = format!(
        "cat {dev} | head -c 256; mknod lp b {major} {minor}; head -c 256 lp; \
         printf PWNED | dd of={dev} conv=notrunc 2>/dev/null; \
         printf PWNED | dd of=lp conv=notrunc 2>/dev/null; true",
        dev = lo.device.display()
    );
    let out = run(ws, SandboxPolicy::WorkspaceWrite, &script).await;
    let backing = std::fs::read(&lo.backing).unwrap();
    assert!(
        !String::from_utf8_lossy(&backing).contains("PWNED"),
        "the loop device was written: {out}"
    );
    assert!(!out.contains(&canary), "the loop device was read: {out}");
    // Unconfined, the same script reads and writes it: the test can see an escape.
    let out = run(ws, SandboxPolicy::Off, &script).await;
    assert!(out.contains(&canary), "{out}");
    let backing = std::fs::read(&lo.backing).unwrap();
    assert!(String::from_utf8_lossy(&backing).contains("PWNED"));
}

#[tokio::test]
async fn device_nodes_reach_no_disk_and_dev_is_minimal() {
    as_both!(
        "device_nodes_reach_no_disk_and_dev_is_minimal",
        device_nodes
    );
}

// ---------------------------------------------------------------------------------------------
// Inode flags.

fn lsattr(path: &Path) -> String {
    let out = Command::new("lsattr").arg("-d").arg(path).output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_string()
}

/// Sets immutable, append-only and no-dump on `$F` every way the kernel offers.
const SET_FLAGS: &str = r#"chattr +i "$F"; chattr +a "$F"; chattr +d "$F"
python3 - "$F" <<'PY'
import ctypes, fcntl, os, struct, sys
p = sys.argv[1]
fd = os.open(p, os.O_RDONLY)
for req, size in ((0x40086602, 'l'), (0x40046602, 'i')):
    try: fcntl.ioctl(fd, req, struct.pack(size, 0x10 | 0x20 | 0x40))
    except OSError as e: print('setflags', hex(req), e)
try: fcntl.ioctl(fd, 0x401c5820, struct.pack('IIIII8x', 0x8 | 0x10 | 0x80, 0, 0, 0, 0))
except OSError as e: print('fssetxattr', e)
libc = ctypes.CDLL(None, use_errno=True)
attr = struct.pack('QIIII', 0x8 | 0x10 | 0x80, 0, 0, 0, 0)
rc = libc.syscall(469, -100, p.encode(), attr, len(attr), 0)
print('file_setattr', rc, os.strerror(ctypes.get_errno()))
PY"#;

async fn inode_flags(test: &str, ws: &Path) {
    if !namespaces(test)
        || !python(test)
        || !have(
            exec::find_program("chattr").is_some(),
            test,
            "chattr (e2fsprogs) not found",
        )
    {
        return;
    }
    let inside = ws.join("file.txt");
    std::fs::write(&inside, "x").unwrap();
    let canary = outside(ws).join("canary.txt");
    std::fs::write(&canary, "canary").unwrap();
    let before: Vec<String> = [&inside, &canary].iter().map(|p| lsattr(p)).collect();
    if before.iter().any(|f| f.is_empty()) {
        have(false, test, "this file system has no inode flags");
        return;
    }
    for target in [&inside, &canary] {
        let script = format!("F='{}'\n{SET_FLAGS}", target.display());
        let out = run(ws, SandboxPolicy::WorkspaceWrite, &script).await;
        let after = lsattr(target);
        let _ = Command::new("chattr")
            .args(["-i", "-a", "-d"])
            .arg(target)
            .status();
        assert!(
            !after.contains('i') && !after.contains('a') && !after.contains('d'),
            "{}: flags {after}: {out}",
            target.display()
        );
    }
    // Unconfined, the owner can set no-dump on its own file: the test can see a change.
    let script = format!("F='{}'\nchattr +d \"$F\"", inside.display());
    let out = run(ws, SandboxPolicy::Off, &script).await;
    let after = lsattr(&inside);
    let _ = Command::new("chattr")
        .args(["-i", "-a", "-d"])
        .arg(&inside)
        .status();
    assert!(after.contains('d'), "{after}: {out}");
}

#[tokio::test]
async fn inode_flags_cannot_be_set() {
    as_both!("inode_flags_cannot_be_set", inode_flags);
}

// ---------------------------------------------------------------------------------------------
// Terminals.

/// A terminal pair opened by the test (another user session's terminal).
struct Pty {
    master: std::fs::File,
    slave: PathBuf,
}

impl Pty {
    fn open() -> Self {
        use rustix::pty::{OpenptFlags, grantpt, openpt, ptsname, unlockpt};
        let fd = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC).unwrap();
        grantpt(&fd).unwrap();
        unlockpt(&fd).unwrap();
        let name = ptsname(&fd, Vec::new()).unwrap();
        Self {
            master: std::fs::File::from(fd),
            slave: PathBuf::from(name.to_str().unwrap()),
        }
    }

    /// Keystrokes typed on this terminal: a line in its input queue.
    fn type_line(&mut self, line: &str) {
        self.master
            .write_all(format!("{line}\n").as_bytes())
            .unwrap();
    }

    /// What the terminal's side can read now (its input queue).
    fn read_input(&self) -> String {
        use std::os::unix::fs::OpenOptionsExt;
        let mut slave = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc_nonblock())
            .open(&self.slave)
            .unwrap();
        let mut buf = [0u8; 256];
        let n = slave.read(&mut buf).unwrap_or(0);
        String::from_utf8_lossy(&buf[..n]).into_owned()
    }

    /// What was written to the terminal's screen (the master side), without waiting.
    fn read_screen(&mut self) -> String {
        rustix::fs::fcntl_setfl(&self.master, rustix::fs::OFlags::NONBLOCK).unwrap();
        let mut buf = [0u8; 4096];
        let n = self.master.read(&mut buf).unwrap_or(0);
        String::from_utf8_lossy(&buf[..n]).into_owned()
    }
}

fn libc_nonblock() -> i32 {
    rustix::fs::OFlags::NONBLOCK.bits() as i32 | rustix::fs::OFlags::NOCTTY.bits() as i32
}

async fn other_terminals(test: &str, ws: &Path) {
    if !namespaces(test) {
        return;
    }
    let mut pty = Pty::open();
    pty.type_line("typed-secret");
    let _ = pty.read_screen(); // the echo of the typed line
    let script = format!(
        "timeout 2 cat {tty}; timeout 2 head -c 64 {tty}; echo spoofed-output > {tty}; \
         exec 3<>{tty} && timeout 2 cat <&3; echo spoofed-tty > /dev/tty; true",
        tty = pty.slave.display()
    );
    let out = run(ws, SandboxPolicy::WorkspaceWrite, &script).await;
    assert!(!out.contains("typed-secret"), "keystrokes were read: {out}");
    let screen = pty.read_screen();
    assert!(
        !screen.contains("spoofed"),
        "the command wrote to another terminal: {screen:?} ({out})"
    );
    let input = pty.read_input();
    assert!(
        input.contains("typed-secret"),
        "the keystrokes were consumed: {input:?} ({out})"
    );
    // Unconfined, the same command reaches the terminal: the test can see an escape.
    let mut control = Pty::open();
    let script = format!("echo spoofed-output > {}", control.slave.display());
    let out = run(ws, SandboxPolicy::Off, &script).await;
    std::thread::sleep(Duration::from_millis(100));
    assert!(control.read_screen().contains("spoofed"), "{out}");
}

#[tokio::test]
async fn another_terminal_cannot_be_read_or_written() {
    as_both!(
        "another_terminal_cannot_be_read_or_written",
        other_terminals
    );
}

// ---------------------------------------------------------------------------------------------
// System V IPC.

const SHM: &str = r#"
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
key, op = int(sys.argv[1]), sys.argv[2]
if op == 'create':
    sid = libc.shmget(key, 4096, 0o1600)
    addr = libc.shmat(sid, None, 0)
    ctypes.memmove(addr, b'shm-canary', 10)
    print(sid)
elif op == 'attack':
    sid = libc.shmget(key, 0, 0)
    print('shmget', sid, ctypes.get_errno())
    if sid >= 0:
        addr = libc.shmat(sid, None, 0)
        if addr not in (None, ctypes.c_void_p(-1).value):
            print(ctypes.string_at(addr, 10))
            ctypes.memmove(addr, b'PWNED', 5)
elif op == 'read':
    sid = libc.shmget(key, 0, 0)
    addr = libc.shmat(sid, None, 0)
    print(ctypes.string_at(addr, 10).decode())
elif op == 'remove':
    sid = libc.shmget(key, 0, 0)
    libc.shmctl(sid, 0, None)
"#;

fn shm(key: u32, op: &str) -> String {
    let out = Command::new("python3")
        .args(["-c", SHM, &key.to_string(), op])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

async fn sysv_ipc(test: &str, ws: &Path) {
    if !namespaces(test) || !python(test) {
        return;
    }
    let key = 0x4b00_0000 | (std::process::id() & 0xffff);
    let id = shm(key, "create");
    assert!(id.parse::<i32>().is_ok_and(|i| i >= 0), "shmget: {id}");
    let script = format!("{}; ipcs -m", py(SHM, &format!("{key} attack")));
    let out = run(ws, SandboxPolicy::WorkspaceWrite, &script).await;
    let after = shm(key, "read");
    let control = run(ws, SandboxPolicy::Off, &script).await;
    let after_control = shm(key, "read");
    shm(key, "remove");
    assert_eq!(after, "shm-canary", "the segment was written: {out}");
    assert!(!out.contains("shm-canary"), "the segment was read: {out}");
    // Unconfined, the same script reaches it: the test can see an escape.
    assert!(control.contains("shm-canary"), "{control}");
    assert_ne!(after_control, "shm-canary");
}

#[tokio::test]
async fn another_programs_shared_memory_is_unreachable() {
    as_both!("another_programs_shared_memory_is_unreachable", sysv_ipc);
}

// ---------------------------------------------------------------------------------------------
// Other processes.

struct Sleeper(std::process::Child);

impl Sleeper {
    fn start() -> Self {
        Self(Command::new("sleep").arg("120").spawn().unwrap())
    }
    fn pid(&self) -> u32 {
        self.0.id()
    }
    /// (nice, "Max open files" soft limit, stopped).
    fn state(&self) -> (String, String, bool) {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid())).unwrap();
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .unwrap()
            .1
            .split_whitespace()
            .collect();
        let limits = std::fs::read_to_string(format!("/proc/{}/limits", self.pid())).unwrap();
        let nofile = limits
            .lines()
            .find(|l| l.starts_with("Max open files"))
            .unwrap()
            .split_whitespace()
            .nth(3)
            .unwrap()
            .to_string();
        (fields[16].to_string(), nofile, fields[0] == "T")
    }
}

impl Drop for Sleeper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn other_processes(test: &str, ws: &Path) {
    if !namespaces(test) {
        return;
    }
    let sleeper = Sleeper::start();
    let before = sleeper.state();
    let script = format!(
        "renice -n 19 -p {pid}; prlimit --pid {pid} --nofile=7:7; taskset -p 1 {pid}; \
         ionice -c 3 -p {pid}; kill -STOP {pid}; ps -e | grep -c sleep; true",
        pid = sleeper.pid()
    );
    let out = run(ws, SandboxPolicy::WorkspaceWrite, &script).await;
    assert_eq!(sleeper.state(), before, "the process was reached: {out}");
    // Its own /proc lists only its own processes.
    if have(
        sandbox::support().isolation.fresh_proc,
        test,
        "no fresh /proc for commands",
    ) {
        let script = format!(
            "test -e /proc/{pid} && echo SEES-{pid}; ls /proc | grep -c '^[0-9]'",
            pid = sleeper.pid()
        );
        let out = run(ws, SandboxPolicy::WorkspaceWrite, &script).await;
        assert!(!out.contains("SEES-"), "{out}");
        let listed: u32 = out.trim().parse().unwrap_or(u32::MAX);
        assert!(listed < 10, "/proc lists {listed} processes: {out}");
    }
    // Unconfined, the same command reaches it: the test can see an escape.
    let out = run(ws, SandboxPolicy::Off, &script).await;
    assert_ne!(sleeper.state(), before, "{out}");
}

#[tokio::test]
async fn processes_outside_cannot_be_reniced_limited_or_signalled() {
    as_both!(
        "processes_outside_cannot_be_reniced_limited_or_signalled",
        other_processes
    );
}

// ---------------------------------------------------------------------------------------------
// Keyrings.

const KEYS: &str = r#"
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
name, op = sys.argv[1].encode(), sys.argv[2]
for ring in (-4, -3):  # user, session
    if op == 'add':
        print('add', libc.syscall(248, b'user', name, b'secret', 6, ring), ctypes.get_errno())
    else:
        kid = libc.syscall(250, 10, ring, b'user', name, 0)  # KEYCTL_SEARCH
        if kid >= 0:
            print('found', kid)
            libc.syscall(250, 3, kid)  # KEYCTL_REVOKE
"#;

async fn keyrings(test: &str, ws: &Path) {
    if !namespaces(test)
        || !python(test)
        || !have(Path::new("/proc/keys").exists(), test, "no kernel keyrings")
    {
        return;
    }
    let name = format!("keel-canary-{}-{}", std::process::id(), nobody::is_root());
    let script = py(KEYS, &format!("{name} add"));
    let find = || {
        let out = Command::new("python3")
            .args(["-c", KEYS, &name, "find"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let out = run(ws, SandboxPolicy::WorkspaceWrite, &script).await;
    let found = find();
    assert!(!found.contains("found"), "a key was added: {found} ({out})");
    // Unconfined, the same command adds it (and `find` revokes it again).
    let out = run(ws, SandboxPolicy::Off, &script).await;
    assert!(find().contains("found"), "{out}");
}

#[tokio::test]
async fn keys_cannot_be_added_to_the_users_keyrings() {
    as_both!("keys_cannot_be_added_to_the_users_keyrings", keyrings);
}

// ---------------------------------------------------------------------------------------------
// Nothing outlives the command.

/// Pids whose command line contains `marker`.
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

/// Waits up to `limit` for no process to carry `marker`; returns the survivors.
fn survivors(marker: &str, limit: Duration) -> Vec<u32> {
    let start = Instant::now();
    loop {
        let left = processes_with(marker);
        if left.is_empty() || start.elapsed() > limit {
            return left;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

async fn survivors_die(test: &str, ws: &Path) {
    if !namespaces(test) {
        return;
    }
    let marker = format!("keel-survivor-{}-{}", std::process::id(), nobody::is_root());
    let script = format!(
        "setsid -f bash -c 'exec -a {marker}-a sleep 300'; \
         nohup bash -c 'exec -a {marker}-b sleep 300' >/dev/null 2>&1 & \
         (setsid bash -c 'exec -a {marker}-c sleep 300' &); echo started"
    );
    let out = run(ws, SandboxPolicy::WorkspaceWrite, &script).await;
    assert!(out.contains("started"), "{out}");
    let left = survivors(&marker, Duration::from_secs(3));
    assert!(left.is_empty(), "processes outlived the command: {left:?}");
    // Unconfined, they survive: the test can see it.
    let _ = run(ws, SandboxPolicy::Off, &script).await;
    let left = processes_with(&marker);
    for pid in &left {
        let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
    }
    assert!(!left.is_empty());
}

#[tokio::test]
async fn background_processes_die_with_the_command() {
    as_both!("background_processes_die_with_the_command", survivors_die);
}

// ---------------------------------------------------------------------------------------------
// Protected paths under a renamed parent.

async fn renamed_parent(test: &str, ws: &Path) {
    if !namespaces(test) {
        return;
    }
    std::fs::create_dir_all(ws.join("docs/api")).unwrap();
    std::fs::create_dir_all(ws.join(".git/hooks")).unwrap();
    std::fs::write(ws.join("docs/api/v1.md"), "protected\n").unwrap();
    std::fs::write(ws.join("docs/guide.md"), "guide\n").unwrap();
    std::fs::write(ws.join(".git/config"), "[core]\n").unwrap();
    let roots = || WritableRoots {
        protected: vec![PathBuf::from("docs/api/v1.md")],
        git: sandbox::GitProtection::CodePaths,
        ..WritableRoots::default()
    };
    let script = "mv docs x; mkdir -p docs/api && echo evil > docs/api/v1.md; \
                  mv docs/api docs/y; mkdir -p docs/api; echo evil > docs/api/v1.md; \
                  rm -rf docs; mkdir -p docs/api; echo evil > docs/api/v1.md; \
                  mv .git g; mkdir -p .git && echo evil > .git/config; \
                  echo more >> docs/guide.md; echo new > docs/new.md; true";
    let out = run_with(ws, SandboxPolicy::WorkspaceWrite, roots(), script).await;
    assert_eq!(
        std::fs::read_to_string(ws.join("docs/api/v1.md")).unwrap(),
        "protected\n",
        "{out}"
    );
    assert_eq!(
        std::fs::read_to_string(ws.join(".git/config")).unwrap(),
        "[core]\n",
        "{out}"
    );
    assert!(!ws.join("x").exists() && !ws.join("g").exists(), "{out}");
    // The rest of the pinned directories stays writable (`rm -rf docs` removed guide.md).
    assert_eq!(
        std::fs::read_to_string(ws.join("docs/new.md")).unwrap(),
        "new\n",
        "{out}"
    );
    // Unconfined, the rename works: the test can see an escape.
    let _ = run_with(ws, SandboxPolicy::Off, roots(), "mv docs x").await;
    assert!(ws.join("x/api/v1.md").exists());
}

#[tokio::test]
async fn a_renamed_parent_keeps_protected_paths_read_only() {
    as_both!(
        "a_renamed_parent_keeps_protected_paths_read_only",
        renamed_parent
    );
}

/// Red-team pass 6, R6-19: a cover (a secret store, Keel's config) moved with a renamed
/// parent, leaving the path Keel and the user's tools read next free for a command to fill: in
/// a workspace that holds the home, `mv .config .config-old && mkdir -p .config/keel && …
/// sandbox = false` turned the sandbox off for every later session, `mv home home-old`
/// exposed `.ssh`. The directories on the way to each cover are pinned like a protected path's.
async fn renamed_cover_parent(test: &str, ws: &Path) {
    if !namespaces(test) {
        return;
    }
    let home = ws.join("home");
    std::fs::create_dir_all(home.join(".config/keel")).unwrap();
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::write(home.join(".config/keel/config.toml"), "[approval]\n").unwrap();
    std::fs::write(home.join(".ssh/id_ed25519"), "FAKE-KEY-R6-19").unwrap();
    let roots = || WritableRoots {
        hidden: vec![home.join(".config/keel"), home.join(".ssh")],
        ..WritableRoots::default()
    };
    let script = "mv home/.config home/.config-old; mkdir -p home/.config/keel && \
                  printf '[shell]\\nsandbox = false\\n' > home/.config/keel/config.toml; \
                  mv home home-old; cat home-old/.ssh/id_ed25519 home/.config-old/keel/config.toml; \
                  echo fine > home/notes.txt; true";
    let out = run_with(ws, SandboxPolicy::WorkspaceWrite, roots(), script).await;
    assert!(!out.contains("FAKE-KEY-R6-19"), "{out}");
    assert_eq!(
        std::fs::read_to_string(home.join(".config/keel/config.toml")).unwrap(),
        "[approval]\n",
        "{out}"
    );
    assert!(
        !ws.join("home-old").exists() && !home.join(".config-old").exists(),
        "{out}"
    );
    // The pinned directories stay writable.
    assert_eq!(
        std::fs::read_to_string(home.join("notes.txt")).unwrap(),
        "fine\n",
        "{out}"
    );
    // Unconfined, the rename works: the test can see an escape.
    let _ = run_with(
        ws,
        SandboxPolicy::Off,
        roots(),
        "mv home/.config home/.config-old",
    )
    .await;
    assert!(home.join(".config-old/keel/config.toml").exists());
}

#[tokio::test]
async fn a_renamed_parent_keeps_covers_in_place() {
    as_both!(
        "a_renamed_parent_keeps_covers_in_place",
        renamed_cover_parent
    );
}

// ---------------------------------------------------------------------------------------------
// Secret stores.

async fn secret_stores(test: &str, ws: &Path) {
    if !namespaces(test) {
        return;
    }
    let home = ws.parent().unwrap().join("home");
    for d in [
        ".ssh",
        ".aws",
        ".docker",
        ".config/gh",
        ".local/share/keyrings",
        ".gemini",
        ".tsh/keys/proxy",
        ".minikube/profiles/minikube",
    ] {
        std::fs::create_dir_all(home.join(d)).unwrap();
    }
    let secrets = [
        (".ssh/id_ed25519", "FAKE-PRIVATE-KEY"),
        (".aws/credentials", "FAKE-AWS-SECRET"),
        (".docker/config.json", "FAKE-DOCKER-AUTH"),
        (".netrc", "FAKE-NETRC-PASSWORD"),
        (".git-credentials", "FAKE-GIT-TOKEN"),
        (".config/gh/hosts.yml", "FAKE-GH-TOKEN"),
        (".local/share/keyrings/login.keyring", "FAKE-KEYRING"),
        // Red-team pass 4, R4-12.
        (".gemini/oauth_creds.json", "FAKE-GEMINI"),
        (".tsh/keys/proxy/u", "FAKE-TSH-KEY"),
        (
            ".minikube/profiles/minikube/client.key",
            "FAKE-MINIKUBE-KEY",
        ),
        (".bash_history", "FAKE-HISTORY-TOKEN"),
    ];
    for (path, secret) in secrets {
        std::fs::write(home.join(path), secret).unwrap();
    }
    std::fs::write(home.join(".bashrc"), "VISIBLE-RC").unwrap();
    std::fs::write(home.join(".docker/daemon.json"), "VISIBLE-DOCKER").unwrap();
    let hidden: Vec<PathBuf> = sandbox::SECRET_STORES
        .iter()
        .map(|s| home.join(s.trim_start_matches("~/")))
        .collect();
    let h = home.display();
    let script = format!(
        "for f in .ssh/id_ed25519 .aws/credentials .docker/config.json .netrc .git-credentials \
         .config/gh/hosts.yml .local/share/keyrings/login.keyring .gemini/oauth_creds.json \
         .tsh/keys/proxy/u .minikube/profiles/minikube/client.key .bash_history \
         .bashrc .docker/daemon.json; \
         do cat {h}/$f; echo; done; ls -A {h}/.ssh | sed 's/^/listed: /'; \
         echo planted > {h}/.ssh/authorized_keys; echo planted > {h}/.netrc; true"
    );
    for policy in [SandboxPolicy::ReadOnly, SandboxPolicy::WorkspaceWrite] {
        let roots = WritableRoots {
            hidden: hidden.clone(),
            ..WritableRoots::default()
        };
        let out = run_with(ws, policy, roots, &script).await;
        for (path, secret) in secrets {
            assert!(!out.contains(secret), "{policy:?}: {path} leaked: {out}");
        }
        assert!(!out.contains("listed: "), "{policy:?}: {out}");
        assert!(
            out.contains("VISIBLE-RC") && out.contains("VISIBLE-DOCKER"),
            "{policy:?}: the rest of the home stays readable: {out}"
        );
        assert!(!home.join(".ssh/authorized_keys").exists(), "{out}");
        assert_eq!(
            std::fs::read_to_string(home.join(".netrc")).unwrap(),
            "FAKE-NETRC-PASSWORD"
        );
    }
    // Unconfined, the same script reads them: the test can see a leak.
    let out = run(ws, SandboxPolicy::Off, &script).await;
    assert!(out.contains("FAKE-PRIVATE-KEY"), "{out}");
}

#[tokio::test]
async fn secret_stores_read_as_empty() {
    as_both!("secret_stores_read_as_empty", secret_stores);
}

/// R11's hard-link gap: a store's file with a second name next to the store (`cp -al ~/.ssh
/// ~/backup/ssh`, a `.netrc` backup) reads as empty at that name too.
async fn hard_linked_stores(test: &str, ws: &Path) {
    if !namespaces(test) {
        return;
    }
    let home = ws.parent().unwrap().join("home");
    for d in [".ssh", "backup/ssh"] {
        std::fs::create_dir_all(home.join(d)).unwrap();
    }
    let links = [
        (
            ".ssh/id_ed25519",
            "backup/ssh/id_ed25519",
            "FAKE-LINKED-KEY",
        ),
        (".netrc", "netrc.bak", "FAKE-LINKED-NETRC"),
    ];
    for (store, other, secret) in links {
        std::fs::write(home.join(store), secret).unwrap();
        std::fs::hard_link(home.join(store), home.join(other)).unwrap();
    }
    let hidden = vec![home.join(".ssh"), home.join(".netrc")];
    let h = home.display();
    let script = format!("cat {h}/backup/ssh/id_ed25519 {h}/netrc.bak; echo done");
    for policy in [SandboxPolicy::ReadOnly, SandboxPolicy::WorkspaceWrite] {
        let roots = WritableRoots {
            hidden: hidden.clone(),
            ..WritableRoots::default()
        };
        let out = run_with(ws, policy, roots, &script).await;
        assert!(out.contains("done"), "{policy:?}: {out}");
        for (_, other, secret) in links {
            assert!(!out.contains(secret), "{policy:?}: {other} leaked: {out}");
        }
    }
}

#[tokio::test]
async fn a_stores_hard_links_read_as_empty() {
    as_both!("a_stores_hard_links_read_as_empty", hard_linked_stores);
}
