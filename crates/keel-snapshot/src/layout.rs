//! What Keel checks of a snapshot repository's git directory before git writes into it, and
//! the deadline every snapshot git command runs under.
//!
//! The git directory belongs to the repository, and so to whoever shipped it: git follows
//! symlinks in it (a `refs/keel` or `objects/xx` linked out gets refs and objects written
//! wherever it points), a `.git` *file* may name any other repository on the disk, and its
//! config may include a FIFO that blocks git forever. So before each write:
//! - the git directory must be the workspace's own: `<top>/.git` as a real directory, or a
//!   `.git` file naming a linked worktree whose `gitdir` back-link names that same `.git`
//!   file ([`own_git_dir`]); anything else gets the private repository instead;
//! - no directory git writes into for Keel (`refs/keel/**`, `objects/`, `objects/xx`,
//!   `logs/refs/keel/**`, …) and no file Keel writes (`keel/index`, …) may be a
//!   symlink or anything but a directory/regular file ([`check_writable`]); if one is,
//!   snapshots are refused with a message naming it (the run goes on without them);
//! - every git command has a deadline and is killed past it ([`output_within`]), so a FIFO (or
//!   a device) the configuration names fails the snapshot instead of hanging Keel.
//!
//! The sandbox mounts the workspace's `.git` read-only for commands, so what is checked here
//! cannot be changed by the model between the check and git's write.

use std::io::{Read, Write};
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The deadline of a command that only reads the configuration or discovers the repository.
pub(super) const PROBE_DEADLINE: Duration = Duration::from_secs(20);
/// The deadline of a snapshot command (staging a large tree takes a while).
pub(super) const WORK_DEADLINE: Duration = Duration::from_secs(600);
/// The longest pause between two looks at a running git command.
const MAX_POLL: Duration = Duration::from_millis(50);
/// The most entries looked at under `refs/keel` (and its reflogs) per check.
const MAX_ENTRIES: usize = 200_000;

/// Runs `cmd` with `input` on its stdin, collecting its output, and kills it once `limit`
/// has passed (an error of kind `TimedOut` saying so).
pub(super) fn output_within(
    mut cmd: Command,
    input: Option<&[u8]>,
    limit: Duration,
) -> std::io::Result<Output> {
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    cmd.stdin(if input.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    });
    let mut child = cmd.spawn()?;
    let writer = match (input, child.stdin.take()) {
        (Some(data), Some(mut stdin)) => {
            let data = data.to_vec();
            // Written by a thread: git may not read it (blocked elsewhere) and a full pipe must
            // not keep Keel from enforcing the deadline.
            Some(std::thread::spawn(move || stdin.write_all(&data)))
        }
        _ => None,
    };
    let out = drain(child.stdout.take());
    let err = drain(child.stderr.take());
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if started.elapsed() >= limit {
            let _ = child.kill();
            let _ = child.wait();
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!(
                    "git did not finish within {} s and was stopped (does the repository's configuration include a FIFO or a device?)",
                    limit.as_secs()
                ),
            ));
        }
        std::thread::sleep(pause(started));
    };
    let write_result = writer.map(|w| w.join());
    let stdout = out.join().unwrap_or_default();
    let stderr = err.join().unwrap_or_default();
    if let Some(Ok(Err(e))) = write_result
        && e.kind() != std::io::ErrorKind::BrokenPipe
    {
        return Err(e);
    }
    Ok(Output {
        status,
        stdout,
        stderr,
    })
}

/// Runs `first` with `input` on its stdin and its stdout on `second`'s stdin, collecting
/// both's stderr and `second`'s stdout; kills both once `limit` has passed (an error of kind
/// `TimedOut`). Returns each one's output (`first`'s stdout is empty: it went to `second`).
pub(super) fn pipe_within(
    mut first: Command,
    input: &[u8],
    mut second: Command,
    limit: Duration,
) -> std::io::Result<(Output, Output)> {
    first
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut a = first.spawn()?;
    let Some(pipe) = a.stdout.take() else {
        let _ = a.kill();
        let _ = a.wait();
        return Err(std::io::Error::other(
            "no pipe between the two git commands",
        ));
    };
    second
        .stdin(Stdio::from(pipe))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let spawned = second.spawn();
    // The read end of the pipe lives only in `second`'s process from here on.
    drop(second);
    let mut b = match spawned {
        Ok(b) => b,
        Err(e) => {
            let _ = a.kill();
            let _ = a.wait();
            return Err(e);
        }
    };
    let writer = a.stdin.take().map(|mut stdin| {
        let data = input.to_vec();
        std::thread::spawn(move || stdin.write_all(&data))
    });
    let a_err = drain(a.stderr.take());
    let b_out = drain(b.stdout.take());
    let b_err = drain(b.stderr.take());
    let started = Instant::now();
    let (mut a_status, mut b_status) = (None, None);
    while a_status.is_none() || b_status.is_none() {
        if a_status.is_none() {
            a_status = a.try_wait()?;
        }
        if b_status.is_none() {
            b_status = b.try_wait()?;
        }
        if a_status.is_some() && b_status.is_some() {
            break;
        }
        if started.elapsed() >= limit {
            for child in [&mut a, &mut b] {
                let _ = child.kill();
                let _ = child.wait();
            }
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!(
                    "git did not finish within {} s and was stopped",
                    limit.as_secs()
                ),
            ));
        }
        std::thread::sleep(pause(started));
    }
    if let Some(w) = writer {
        let _ = w.join();
    }
    let (Some(a_status), Some(b_status)) = (a_status, b_status) else {
        return Err(std::io::Error::other("a git command's status was lost"));
    };
    Ok((
        Output {
            status: a_status,
            stdout: Vec::new(),
            stderr: a_err.join().unwrap_or_default(),
        },
        Output {
            status: b_status,
            stdout: b_out.join().unwrap_or_default(),
            stderr: b_err.join().unwrap_or_default(),
        },
    ))
}

/// Whether `git_dir` (as `git rev-parse --absolute-git-dir` gave it) is the repository of the
/// work tree `top` itself: `<top>/.git` a real directory that is `git_dir`, or `<top>/.git` a
/// file naming a linked worktree's git directory whose `gitdir` file points back at it.
/// A `.git` symlink, or a `.git` file naming any other repository (a hostile repository can
/// name any repository of the user's), is not.
///
/// `common` is where git keeps refs and objects (`--git-common-dir`): for a real `.git`
/// directory it must be that directory itself (a `commondir` file there would send git's
/// writes into any repository it names — red-team pass 2, R1); for a linked worktree it must
/// be the repository whose `worktrees/` holds the worktree's git directory.
pub(super) fn own_git_dir(top: &Path, git_dir: &Path, common: &Path) -> bool {
    let dot_git = top.join(".git");
    let Ok(meta) = std::fs::symlink_metadata(&dot_git) else {
        return false;
    };
    let same = |a: &Path, b: &Path| match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    };
    if meta.file_type().is_dir() {
        return same(&dot_git, git_dir) && same(git_dir, common);
    }
    if !meta.file_type().is_file() {
        return false;
    }
    // `<common>/worktrees/<name>` is the worktree's git directory.
    let registered = git_dir
        .canonicalize()
        .ok()
        .and_then(|g| {
            let parent = g.parent()?;
            (parent.file_name()? == "worktrees").then(|| parent.parent().map(Path::to_path_buf))
        })
        .flatten()
        .is_some_and(|repo| same(&repo, common));
    if !registered {
        return false;
    }
    // A linked worktree: `<git_dir>/gitdir` names this `.git` file.
    let Ok(back) = keel_tools::project::read_in_dir(&git_dir.join("gitdir"), 64 * 1024) else {
        return false;
    };
    back.is_some_and(|b| {
        let b = PathBuf::from(b.trim());
        !b.as_os_str().is_empty() && same(&b, &dot_git)
    })
}

/// Refuses the git directory when git would write for Keel through a symlink or into
/// something that is not a directory/regular file. `git_dir`: the (per-worktree) git
/// directory, which holds Keel's index file; `common`: where refs and objects live (the same
/// directory except in a linked worktree). The message names the entry.
pub(super) fn check_writable(git_dir: &Path, common: &Path) -> Result<(), String> {
    for dir in [git_dir, common] {
        expect(dir, Want::Dir, false)?;
    }
    // The files Keel itself writes (its index file, the build directories' excludes) and
    // its staging directory.
    expect(&git_dir.join("keel"), Want::Dir, true)?;
    for file in ["keel/index", "keel-build-dirs", "keel-max-file-mb"] {
        expect(&git_dir.join(file), Want::File, true)?;
    }
    expect(&common.join("packed-refs"), Want::File, true)?;
    for dir in [
        "refs",
        "objects",
        "objects/pack",
        "objects/info",
        "logs",
        "logs/refs",
    ] {
        expect(&common.join(dir), Want::Dir, true)?;
    }
    // Loose objects go to `objects/xx/`.
    if let Ok(entries) = std::fs::read_dir(common.join("objects")) {
        for entry in entries.flatten() {
            let name = entry.file_name();
            let is_fanout = name.len() == 2
                && name
                    .to_str()
                    .is_some_and(|n| n.bytes().all(|b| b.is_ascii_hexdigit()));
            if is_fanout {
                expect(&entry.path(), Want::Dir, true)?;
            }
        }
    }
    let mut budget = MAX_ENTRIES;
    for tree in ["refs/keel", "logs/refs/keel", "reftable"] {
        walk(&common.join(tree), &mut budget)?;
    }
    Ok(())
}

#[derive(Clone, Copy, PartialEq)]
enum Want {
    Dir,
    File,
}

/// `path` is absent (when `may_miss`) or of the kind wanted — never a symlink.
fn expect(path: &Path, want: Want, may_miss: bool) -> Result<(), String> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && may_miss => return Ok(()),
        Err(e) => return Err(format!("cannot inspect {}: {e}", path.display())),
    };
    let ft = meta.file_type();
    let what = if ft.is_symlink() {
        "a symlink"
    } else if ft.is_fifo() {
        "a FIFO"
    } else if ft.is_socket() {
        "a socket"
    } else if ft.is_block_device() || ft.is_char_device() {
        "a device"
    } else if ft.is_dir() {
        if want == Want::Dir {
            return Ok(());
        }
        "a directory"
    } else {
        if want == Want::File {
            return Ok(());
        }
        "a file"
    };
    Err(format!(
        "{} is {what}, where git would write Keel's snapshots; Keel writes snapshots only into a git directory with no links in it (check the repository's `.git`, or set `[snapshots] enabled = false`)",
        path.display()
    ))
}

/// Every entry below `dir` (if it exists) is a real directory or regular file, and `dir` names
/// no other repository (`commondir`): for a private repository directory the workspace shipped
/// before Keel created its repository there, and for the private repository before each use.
pub(super) fn check_no_links(dir: &Path) -> Result<(), String> {
    if std::fs::symlink_metadata(dir.join("commondir")).is_ok() {
        return Err(format!(
            "{} holds a `commondir` file, which would send git's writes into another repository; delete {} (Keel recreates its snapshot repository)",
            dir.display(),
            dir.display()
        ));
    }
    let mut budget = MAX_ENTRIES;
    walk(dir, &mut budget)
}

/// For Keel's other writes into the workspace's own repository (a flow's `deliver` commits a
/// branch): the repository of `workspace` if it is the work tree's own (see [`own_git_dir`])
/// and nothing git will write through for a new branch — objects, `refs/heads/**`, its reflog,
/// `packed-refs` — is a link or special file. Returns the git directory, or why not.
pub fn checked_repository(workspace: &Path) -> Result<PathBuf, String> {
    let mut probe = keel_tools::safe_git::bare();
    probe
        .args([
            "rev-parse",
            "--absolute-git-dir",
            "--show-toplevel",
            "--git-common-dir",
        ])
        .current_dir(workspace);
    let out = output_within(probe, None, PROBE_DEADLINE)
        .map_err(|e| format!("cannot run git in {}: {e}", workspace.display()))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    let (Some(git_dir), Some(top), Some(common)) = (lines.first(), lines.get(1), lines.get(2))
    else {
        return Err(format!(
            "{} is not inside a git repository: {}",
            workspace.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    };
    if !out.status.success() {
        return Err(format!("git rev-parse failed in {}", workspace.display()));
    }
    let git_dir = PathBuf::from(git_dir);
    let common = workspace.join(common);
    if !own_git_dir(Path::new(top), &git_dir, &common) {
        return Err(format!(
            "the repository of {} is not its own (`.git` is a link, a file naming another repository, or names another through `commondir`); Keel writes only into a work tree's own repository",
            workspace.display()
        ));
    }
    check_writable(&git_dir, &common)?;
    let mut budget = MAX_ENTRIES;
    for tree in ["refs/heads", "logs/refs/heads"] {
        walk(&common.join(tree), &mut budget)?;
    }
    Ok(git_dir)
}

/// Every entry below `dir` is a real directory or regular file.
fn walk(dir: &Path, budget: &mut usize) -> Result<(), String> {
    match std::fs::symlink_metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        _ => expect(dir, Want::Dir, true)?,
    }
    let entries =
        std::fs::read_dir(dir).map_err(|e| format!("cannot list {}: {e}", dir.display()))?;
    for entry in entries.flatten() {
        *budget = budget.saturating_sub(1);
        if *budget == 0 {
            return Err(format!(
                "{} holds too many entries to check; delete old snapshots (`keel sessions rm`) or set `[snapshots] enabled = false`",
                dir.display()
            ));
        }
        let path = entry.path();
        let meta = std::fs::symlink_metadata(&path)
            .map_err(|e| format!("cannot inspect {}: {e}", path.display()))?;
        if meta.file_type().is_dir() {
            walk(&path, budget)?;
        } else {
            expect(&path, Want::File, false)?;
        }
    }
    Ok(())
}

/// Reads `pipe` to its end on a thread of its own (git may fill one pipe while Keel waits on
/// another); the bytes it gave.
fn drain<R: Read + Send + 'static>(pipe: Option<R>) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        if let Some(mut p) = pipe {
            let _ = p.read_to_end(&mut bytes);
        }
        bytes
    })
}

/// How long to wait before polling a child again: finely at first — a snapshot's git commands
/// take a few milliseconds each, and a fixed 5 ms pause added about half that to every one (11
/// per turn's snapshot) — then about a tenth of the time waited so far.
fn pause(started: Instant) -> Duration {
    (started.elapsed() / 10).clamp(Duration::from_micros(100), MAX_POLL)
}
