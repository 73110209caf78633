//! The runner's post-command checks ([`super::nested_git::Watch`]: planted repositories,
//! program paths the user's git would run) survive every way a command can end — Keel's own
//! death included (red-team pass 6, R6-7's rest: Keel got SIGHUP when its terminal closed, or
//! SIGTERM from `kill`, while a command ran; the command died with it, the check never ran, and
//! the planted `core.fsmonitor` waited for the user's next `git status`).
//!
//! Three layers, one record per running command:
//! - **In the process**, every check waiting for its command is registered here with the
//!   command's process group; whoever claims it first runs it: the call when the command ends
//!   or is dropped ([`super::exec::run`]), or Keel's exit.
//! - **Keel's exit**: SIGTERM, SIGHUP and SIGQUIT are caught (a thread, installed with the
//!   first command); every running command's group is killed, every waiting check runs, then
//!   the signal's default action ends Keel. [`exit_after_checks`] does the same for Keel's own
//!   early exits (a second Ctrl-C).
//! - **A journal**, for what no code of a dying Keel can do (SIGKILL, the OOM killer, a power
//!   cut after the command wrote): before the command starts, what the check needs (the tree,
//!   the start time, the program paths that existed) is written to
//!   `<data dir>/pending-checks/<pid>-<start>-<n>.json` — Keel's data directory is hidden from
//!   commands, so the model cannot forge or remove an entry — and removed once the check ran.
//!   The next Keel process that loads its configuration ([`open`]) runs every entry whose
//!   process is gone, and says what it moved.
//! - **A watchdog** closes the window between a Keel killed outright and the next start
//!   (red-team pass 7, R7-3's rest: the user's `git commit` in between ran the planted hook).
//!   With the first journaled command Keel starts one small process of its own (the sandbox
//!   helper in [`watchdog_main`]'s mode: no repository content runs), in its own session,
//!   blocked on a pipe only Keel holds open. However Keel ends, the kernel closes the pipe; the
//!   watchdog then runs that Keel's remaining entries at once — its commands died with it (a
//!   parent-death signal) — and prints what it moved. A Keel that ended normally left none.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use super::nested_git::Watch;

/// The journal's directory in Keel's data directory.
pub const DIR: &str = "pending-checks";
/// The most of one entry read (an entry lists the program paths of one workspace).
const MAX_ENTRY: u64 = 4 * 1024 * 1024;
/// How long before its entry file a check's `since` may lie.
const ENTRY_SLACK: Duration = Duration::from_secs(2);
/// The most entries replayed by one process start.
const MAX_REPLAY: usize = 1_000;
const NOFOLLOW: i32 = rustix::fs::OFlags::NOFOLLOW.bits() as i32;

/// The journal directory of this process ([`open`]); `None`: checks are in-process only.
static JOURNAL: Mutex<Option<PathBuf>> = Mutex::new(None);
/// The checks waiting for their command, by ticket number.
static LIVE: Mutex<BTreeMap<u64, Live>> = Mutex::new(BTreeMap::new());
static NEXT: AtomicU64 = AtomicU64::new(1);

struct Live {
    watch: Option<Watch>,
    pgid: Option<i32>,
    file: Option<PathBuf>,
}

fn live() -> std::sync::MutexGuard<'static, BTreeMap<u64, Live>> {
    LIVE.lock().unwrap_or_else(|e| e.into_inner())
}

/// One registered check: claimed and run once, by whoever gets there first.
#[derive(Debug)]
pub(crate) struct Ticket(u64);

/// Registers the check of a command about to start: in the process, and in the journal
/// when one is open. Installs the exit handling once.
pub(crate) fn register(watch: Watch) -> Ticket {
    on_exit_signals();
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    let file = journal_dir().and_then(|dir| {
        let file = write_entry(&dir, id, &watch);
        if file.is_some() {
            ensure_watchdog(&dir);
        }
        file
    });
    live().insert(
        id,
        Live {
            watch: Some(watch),
            pgid: None,
            file,
        },
    );
    Ticket(id)
}

impl Ticket {
    /// The command's process group, killed before the check when Keel exits.
    pub(crate) fn set_group(&self, pgid: Option<i32>) {
        if let Some(l) = live().get_mut(&self.0) {
            l.pgid = pgid;
        }
    }

    /// Runs the check (off the async runtime) unless it was already run; the report.
    pub(crate) async fn finish(self) -> Option<String> {
        let (watch, file) = claim(self.0)?;
        let report = tokio::task::spawn_blocking(move || watch.check_and_report())
            .await
            .unwrap_or_default();
        remove(file.as_deref());
        report
    }

    /// [`Self::finish`] on the calling thread (a dropped call).
    pub(crate) fn finish_blocking(self) -> Option<String> {
        let (watch, file) = claim(self.0)?;
        let report = watch.check_and_report();
        remove(file.as_deref());
        report
    }
}

fn claim(id: u64) -> Option<(Watch, Option<PathBuf>)> {
    let mut all = live();
    let l = all.remove(&id)?;
    Some((l.watch?, l.file))
}

fn remove(file: Option<&Path>) {
    if let Some(f) = file {
        let _ = std::fs::remove_file(f);
    }
}

/// Before Keel ends: kills every running command's process group and runs every check still
/// waiting, on this thread. What an exit path calls first (the signal thread, a second Ctrl-C).
pub fn finish_all() {
    let claimed: Vec<(Option<i32>, Watch, Option<PathBuf>)> = {
        let mut all = live();
        std::mem::take(&mut *all)
            .into_values()
            .filter_map(|l| Some((l.pgid, l.watch?, l.file)))
            .collect()
    };
    for (pgid, _, _) in &claimed {
        if let Some(pid) = pgid.and_then(rustix::process::Pid::from_raw) {
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        }
    }
    if !claimed.is_empty() {
        // SIGKILL is acted on when a process next leaves the kernel: a write in progress ends.
        std::thread::sleep(Duration::from_millis(50));
    }
    for (_, watch, file) in claimed {
        if let Some(report) = watch.check_and_report() {
            eprintln!("{report}");
        }
        remove(file.as_deref());
    }
}

/// Ends Keel with `code` after [`finish_all`]: the way out for Keel's own early exits.
pub fn exit_after_checks(code: i32) -> ! {
    finish_all();
    std::process::exit(code)
}

/// Set by a process that shuts down gracefully on SIGTERM itself (`keel serve`, `keel
/// worker`): it calls [`finish_all`] once its turns are done, and the signal thread leaves
/// SIGTERM to it.
static TERM_HANDLED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Says this process handles SIGTERM itself (a graceful shutdown that ends with
/// [`finish_all`]). Call before the first command starts.
pub fn termination_handled_by_caller() {
    TERM_HANDLED.store(true, Ordering::Relaxed);
}

/// Catches SIGTERM (unless [`termination_handled_by_caller`]), SIGHUP and SIGQUIT once per
/// process: [`finish_all`], then the signal's default action (Keel ends as it would have, a
/// moment later).
fn on_exit_signals() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        use signal_hook::consts::{SIGHUP, SIGQUIT, SIGTERM};
        let mut wanted = vec![SIGHUP, SIGQUIT];
        if !TERM_HANDLED.load(Ordering::Relaxed) {
            wanted.push(SIGTERM);
        }
        let Ok(mut signals) = signal_hook::iterator::Signals::new(wanted) else {
            return;
        };
        let _ = std::thread::Builder::new()
            .name("keel-exit-checks".into())
            .spawn(move || {
                if let Some(sig) = signals.forever().next() {
                    finish_all();
                    let _ = signal_hook::low_level::emulate_default_handler(sig);
                    std::process::exit(128 + sig);
                }
            });
    });
}

/// Opens the journal in Keel's data directory `data_dir` for this process (the first call
/// wins) and runs the checks of every entry whose process is gone. Returns their reports, for
/// the user.
pub fn open(data_dir: &Path) -> Vec<String> {
    if !data_dir.is_absolute() {
        return Vec::new();
    }
    let dir = data_dir.join(DIR);
    {
        let mut slot = JOURNAL.lock().unwrap_or_else(|e| e.into_inner());
        if slot.is_some() {
            return Vec::new();
        }
        *slot = Some(dir.clone());
    }
    // The roots of this process's entries are recorded where a replay looks them up.
    super::lookup::keep_record(data_dir);
    replay(&dir)
}

fn journal_dir() -> Option<PathBuf> {
    JOURNAL.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// Keel's data directory, once [`open`] named it (`None` before, and in tests that never do).
pub(crate) fn data_dir() -> Option<PathBuf> {
    journal_dir().and_then(|j| j.parent().map(Path::to_path_buf))
}

/// The write end of the watchdog's pipe, held open until this process ends (`None`: no
/// watchdog could be started; the next start replays instead).
static WATCHDOG: std::sync::OnceLock<Option<std::io::PipeWriter>> = std::sync::OnceLock::new();

/// Starts the watchdog for this process's entries in `dir`, once.
fn ensure_watchdog(dir: &Path) {
    WATCHDOG.get_or_init(|| {
        let pid = std::process::id();
        let start = start_time(pid)?;
        let (read, write) = std::io::pipe().ok()?;
        let args = [
            dir.as_os_str().to_os_string(),
            pid.to_string().into(),
            start.to_string().into(),
        ];
        crate::sandbox::spawn_watchdog(&args, read).ok()?;
        Some(write)
    });
}

/// The watchdog ([`crate::sandbox::helper_main`] with `--watch-pending DIR PID START`): leaves
/// Keel's session (the terminal's Ctrl-C and hang-up are Keel's), waits until Keel's end
/// closes its standard input, then runs Keel's entries left in `DIR` and prints their
/// reports.
pub fn watchdog_main(args: &[std::ffi::OsString]) -> std::process::ExitCode {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGQUIT};
    let _ = rustix::process::setsid();
    let ignored = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    for sig in [SIGHUP, SIGINT, SIGQUIT] {
        let _ = signal_hook::flag::register(sig, ignored.clone());
    }
    let (Some(dir), Some(pid), Some(start)) = (
        args.first().map(PathBuf::from),
        args.get(1)
            .and_then(|a| a.to_str())
            .and_then(|a| a.parse::<u32>().ok()),
        args.get(2)
            .and_then(|a| a.to_str())
            .and_then(|a| a.parse::<u64>().ok()),
    ) else {
        eprintln!("keel: usage: --watch-pending DIR PID START (started by Keel)");
        return std::process::ExitCode::from(2);
    };
    let mut buf = [0u8; 64];
    let mut stdin = std::io::stdin().lock();
    loop {
        match stdin.read(&mut buf) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    // Keel's commands get SIGKILL when it dies: let the kernel finish them.
    std::thread::sleep(Duration::from_millis(100));
    for report in replay_owned(&dir, Some((pid, start))) {
        eprintln!("{report}");
    }
    std::process::ExitCode::SUCCESS
}

/// Runs every entry in `dir` whose process is gone; their reports.
pub fn replay(dir: &Path) -> Vec<String> {
    replay_owned(dir, None)
}

/// [`replay`]; with `owner`, only that process's entries — known to be gone (its pipe
/// closed), even while it is not yet reaped.
fn replay_owned(dir: &Path, owner_only: Option<(u32, u64)>) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in entries.flatten().take(MAX_REPLAY) {
        let name = entry.file_name();
        let Some((pid, start)) = owner(&name.to_string_lossy()) else {
            continue;
        };
        match owner_only {
            Some(o) if o != (pid, start) => continue,
            Some(_) => {}
            None if alive(pid, start) => continue,
            None => {}
        }
        let path = entry.path();
        let watch = read_entry(&path);
        // Claimed by removing it: two Keels starting at once run it once.
        if std::fs::remove_file(&path).is_err() {
            continue;
        }
        let Some(watch) = watch else {
            continue;
        };
        // Only a root Keel recorded as a workspace (R8-15): a forged entry's root outside
        // every workspace is not walked, nothing in it renamed.
        let known = dir
            .parent()
            .is_some_and(|data| super::lookup::is_recorded(data, watch.root()));
        if !known {
            continue;
        }
        let root = watch.root().display().to_string();
        if let Some(report) = watch.check_and_report() {
            out.push(format!(
                "keel: a command an earlier Keel ran in {root} was not checked when it ended (Keel was killed); checked now:\n{report}"
            ));
        }
    }
    out
}

/// `<pid>-<start>-<n>.json` → (pid, start time in clock ticks).
fn owner(name: &str) -> Option<(u32, u64)> {
    let stem = name.strip_suffix(".json")?;
    let mut parts = stem.splitn(3, '-');
    let pid = parts.next()?.parse().ok()?;
    let start = parts.next()?.parse().ok()?;
    parts.next()?;
    Some((pid, start))
}

/// The start time (clock ticks after boot) of process `pid`: field 22 of `/proc/<pid>/stat`.
#[allow(clippy::disallowed_methods)] // not a project file: the kernel's process table
fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// Whether process `pid` started at `start` still runs (a reused pid is another process).
fn alive(pid: u32, start: u64) -> bool {
    start_time(pid) == Some(start)
}

/// What an entry holds: enough to rebuild the [`Watch`].
#[derive(serde::Serialize, serde::Deserialize)]
pub(crate) struct Entry {
    /// The tree the command could write (bytes of the path).
    pub root: Vec<u8>,
    pub since_secs: u64,
    pub since_nanos: u32,
    pub sealed_top: Option<(u64, u64)>,
    pub confined: bool,
    #[serde(default)]
    pub approved: bool,
    /// The program paths before the command: (path bytes, key, is a tree, existed).
    pub programs: Vec<(Vec<u8>, String, bool, bool)>,
    /// The links on the way to protected stores: (tree, link, target), as path bytes
    /// ([`super::store_links`]).
    #[serde(default)]
    pub links: Vec<(Vec<u8>, Vec<u8>, Vec<u8>)>,
    /// The dependency trees that were read-only while it ran, as path bytes
    /// ([`super::dependency_trees`]).
    #[serde(default)]
    pub trees: Vec<Vec<u8>>,
}

pub(crate) fn path_bytes(p: &Path) -> Vec<u8> {
    p.as_os_str().as_bytes().to_vec()
}

pub(crate) fn bytes_path(b: &[u8]) -> PathBuf {
    PathBuf::from(std::ffi::OsString::from_vec(b.to_vec()))
}

pub(crate) fn since_parts(t: SystemTime) -> (u64, u32) {
    let d = t.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
    (d.as_secs(), d.subsec_nanos())
}

fn write_entry(dir: &Path, id: u64, watch: &Watch) -> Option<PathBuf> {
    let pid = std::process::id();
    let start = start_time(pid)?;
    let text = serde_json::to_vec(&watch.entry()).ok()?;
    let mut b = std::fs::DirBuilder::new();
    b.recursive(true);
    std::os::unix::fs::DirBuilderExt::mode(&mut b, 0o700);
    b.create(dir).ok()?;
    let file = dir.join(format!("{pid}-{start}-{id}.json"));
    let mut o = std::fs::OpenOptions::new();
    o.write(true).create_new(true);
    std::os::unix::fs::OpenOptionsExt::mode(&mut o, 0o600);
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut o, NOFOLLOW);
    // Keel's own journal in its data directory (hidden from commands): created new, no link
    // followed.
    #[allow(clippy::disallowed_methods)]
    let mut f = o.open(&file).ok()?;
    f.write_all(&text).ok()?;
    Some(file)
}

fn read_entry(path: &Path) -> Option<Watch> {
    let mut o = std::fs::OpenOptions::new();
    o.read(true);
    std::os::unix::fs::OpenOptionsExt::custom_flags(
        &mut o,
        (rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::NONBLOCK).bits() as i32,
    );
    // Keel's own journal (hidden from commands): no link followed, non-blocking, regular,
    // bounded.
    #[allow(clippy::disallowed_methods)]
    let f = o.open(path).ok()?;
    if !f.metadata().is_ok_and(|m| m.is_file()) {
        return None;
    }
    let written = f.metadata().ok()?.created().ok();
    let changed = std::os::unix::fs::MetadataExt::ctime(&f.metadata().ok()?);
    let mut bytes = Vec::new();
    f.take(MAX_ENTRY).read_to_end(&mut bytes).ok()?;
    let mut entry: Entry = serde_json::from_slice(&bytes).ok()?;
    // The entry is written just after its `since` was read: a `since` long before the file
    // itself (a forged one, R8-15: every file of the tree "changed since") is taken no earlier
    // than a little before the file was made.
    let made = written.unwrap_or_else(|| {
        SystemTime::UNIX_EPOCH + Duration::from_secs(u64::try_from(changed).unwrap_or(0))
    });
    let earliest = made.checked_sub(ENTRY_SLACK).unwrap_or(made);
    let since = SystemTime::UNIX_EPOCH + Duration::new(entry.since_secs, entry.since_nanos);
    if since < earliest {
        (entry.since_secs, entry.since_nanos) = since_parts(earliest);
    }
    Some(Watch::from_entry(entry))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_names_name_their_process() {
        assert_eq!(owner("12-3456-7.json"), Some((12, 3456)));
        assert_eq!(owner("12-3456.json"), None);
        assert_eq!(owner("x-1-2.json"), None);
        let me = std::process::id();
        let start = start_time(me).unwrap_or_default();
        assert!(alive(me, start));
        assert!(!alive(me, start + 1), "a reused pid is another process");
    }
}
