//! The runner's post-command checks run however Keel itself ends while a command runs
//! (red-team pass 6, R6-7's rest): SIGHUP (the terminal closed) and SIGTERM (`kill`) end every
//! running command and run its check before Keel goes; SIGKILL leaves a journal entry in
//! Keel's data directory, which Keel's watchdog process checks the moment Keel is gone
//! (red-team pass 7, R7-3's rest: the user's commit before the next start ran the plant), and
//! failing that (the watchdog killed too) the next Keel process when it loads its
//! configuration. Before, each of them left the planted `core.fsmonitor` for the user's next
//! `git status`.
//! "Keel" here is this test binary run again as a child ([`fake_keel`]), running one
//! planting command through the one runner. As root and as uid 65534.

// Tests start programs of their own (git, this binary): allowed here.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

#[path = "shared/nobody.rs"]
mod nobody;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use keel_tools::shell;

/// Set in the child that plays Keel: the test's directory.
const FAKE_KEEL: &str = "KEEL_TEST_FAKE_KEEL_DIR";

/// The child playing Keel: opens the journal in `<dir>/data`, then runs a command that plants
/// a repository with a `core.fsmonitor` and waits, until it is killed.
#[test]
fn fake_keel() {
    let Some(dir) = std::env::var_os(FAKE_KEEL).map(std::path::PathBuf::from) else {
        return;
    };
    let reports = shell::pending::open(&dir.join("data"));
    assert!(reports.is_empty(), "{reports:?}");
    let ws = dir.join("ws");
    let cmd = format!(
        "git init -q vendor/lib && git -C vendor/lib config core.fsmonitor 'echo PLANTED >> {}; false' && touch planted && sleep 60",
        dir.join("canary").display(),
    );
    let req = shell::exec::ExecRequest::new(vec!["sh".into(), "-c".into(), cmd.into()], &ws);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let out = runtime.block_on(shell::exec::run(req));
    panic!("the command ended by itself: {out:?}");
}

fn have_git() -> bool {
    let git = Command::new("git").arg("--version").output();
    if git.is_ok_and(|o| o.status.success()) {
        return true;
    }
    assert!(std::env::var_os("CI").is_none(), "CI needs git on PATH");
    println!("SKIPPED: git is not installed");
    false
}

/// Starts the fake Keel in `dir`, waits until its command planted the repository, sends
/// `signal` and waits for the fake Keel to end.
fn plant_and_kill(dir: &Path, signal: rustix::process::Signal) {
    plant_and_kill_with(dir, signal, false);
}

/// The watchdog process of the Keel `pid` (its child running `--watch-pending`).
fn watchdog_of(pid: u32) -> Option<rustix::process::Pid> {
    for e in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(child) = e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        if ppid == Some(pid) && String::from_utf8_lossy(&cmdline).contains("--watch-pending") {
            return rustix::process::Pid::from_raw(child);
        }
    }
    None
}

/// [`plant_and_kill`]; with `watchdog_too`, Keel's watchdog gets SIGKILL first.
fn plant_and_kill_with(dir: &Path, signal: rustix::process::Signal, watchdog_too: bool) {
    std::fs::create_dir(dir.join("ws")).unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "fake_keel", "--nocapture", "--test-threads=1"])
        .env(FAKE_KEEL, dir)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !dir.join("ws/planted").exists() {
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            use std::io::Read;
            child
                .stderr
                .take()
                .unwrap()
                .read_to_string(&mut err)
                .unwrap();
            panic!("the fake Keel ended early ({status}): {err}");
        }
        assert!(Instant::now() < deadline, "the command did not plant");
        std::thread::sleep(Duration::from_millis(50));
    }
    let pid = rustix::process::Pid::from_raw(i32::try_from(child.id()).unwrap()).unwrap();
    let watchdog = watchdog_of(child.id());
    assert!(watchdog.is_some(), "Keel started no watchdog");
    if watchdog_too && let Some(w) = watchdog {
        rustix::process::kill_process(w, rustix::process::Signal::KILL).unwrap();
    }
    rustix::process::kill_process(pid, signal).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() {
        assert!(
            Instant::now() < deadline,
            "Keel did not end after {signal:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        dir.join("ws/vendor/lib").is_dir(),
        "the command did not get to plant the repository"
    );
}

/// The user's `git status` in the planted repository ran nothing.
fn fsmonitor_never_runs(dir: &Path) {
    let _ = Command::new("git")
        .arg("status")
        .current_dir(dir.join("ws/vendor/lib"))
        .env("GIT_CEILING_DIRECTORIES", dir)
        .output();
    assert!(!dir.join("canary").exists(), "the planted fsmonitor ran");
}

fn journal_entries(dir: &Path) -> usize {
    std::fs::read_dir(dir.join("data").join(shell::pending::DIR))
        .map(|d| d.count())
        .unwrap_or(0)
}

fn on_exit_signal(dir: &Path, signal: rustix::process::Signal) {
    if !have_git() {
        return;
    }
    plant_and_kill(dir, signal);
    assert!(
        !dir.join("ws/vendor/lib/.git").exists(),
        "{signal:?}: the planted repository was not quarantined before Keel ended"
    );
    assert!(dir.join("ws/vendor/lib/.git-quarantined-by-keel").is_dir());
    assert_eq!(
        journal_entries(dir),
        0,
        "the checked entry stays in the journal"
    );
    fsmonitor_never_runs(dir);
}

fn on_sigkill(dir: &Path) {
    if !have_git() {
        return;
    }
    plant_and_kill(dir, rustix::process::Signal::KILL);
    // Keel's watchdog runs the check as soon as Keel is gone, before any next start.
    let deadline = Instant::now() + Duration::from_secs(20);
    while dir.join("ws/vendor/lib/.git").exists() || journal_entries(dir) > 0 {
        assert!(
            Instant::now() < deadline,
            "the watchdog did not check the killed Keel's command (journal entries: {})",
            journal_entries(dir)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(dir.join("ws/vendor/lib/.git-quarantined-by-keel").is_dir());
    fsmonitor_never_runs(dir);
    assert!(shell::pending::replay(&dir.join("data").join(shell::pending::DIR)).is_empty());
}

fn on_sigkill_of_keel_and_watchdog(dir: &Path) {
    if !have_git() {
        return;
    }
    plant_and_kill_with(dir, rustix::process::Signal::KILL, true);
    // Nothing of a Keel killed outright runs: the journal holds the check.
    assert!(dir.join("ws/vendor/lib/.git").exists());
    assert_eq!(
        journal_entries(dir),
        1,
        "no journal entry for the killed Keel"
    );
    // The next Keel, loading its configuration, checks it.
    let reports = shell::pending::replay(&dir.join("data").join(shell::pending::DIR));
    assert_eq!(reports.len(), 1, "{reports:?}");
    assert!(
        reports[0].contains("vendor/lib") && reports[0].contains("core.fsmonitor"),
        "{reports:?}"
    );
    assert!(!dir.join("ws/vendor/lib/.git").exists());
    assert_eq!(journal_entries(dir), 0);
    fsmonitor_never_runs(dir);
    // Run once: a second start finds nothing.
    assert!(shell::pending::replay(&dir.join("data").join(shell::pending::DIR)).is_empty());
}

macro_rules! both {
    ($root:ident, $nobody:ident, $body:expr) => {
        #[test]
        fn $root() {
            if std::env::var_os(FAKE_KEEL).is_some() {
                return;
            }
            let dir = tempfile::tempdir().unwrap();
            ($body)(dir.path());
        }

        #[test]
        fn $nobody() {
            if std::env::var_os(FAKE_KEEL).is_some() {
                return;
            }
            let Some(dir) = nobody::child_dir() else {
                nobody::run_child(stringify!($nobody), false);
                return;
            };
            let dir = dir.join("t");
            std::fs::create_dir(&dir).unwrap();
            ($body)(&dir);
        }
    };
}

both!(
    sighup_runs_the_check_before_keel_ends,
    sighup_runs_the_check_before_keel_ends_as_nobody,
    |d: &Path| on_exit_signal(d, rustix::process::Signal::HUP)
);
both!(
    sigterm_runs_the_check_before_keel_ends,
    sigterm_runs_the_check_before_keel_ends_as_nobody,
    |d: &Path| on_exit_signal(d, rustix::process::Signal::TERM)
);
both!(
    after_sigkill_the_watchdog_runs_the_check,
    after_sigkill_the_watchdog_runs_the_check_as_nobody,
    on_sigkill
);
both!(
    after_sigkill_of_the_watchdog_too_the_next_keel_runs_the_check,
    after_sigkill_of_the_watchdog_too_the_next_keel_runs_the_check_as_nobody,
    on_sigkill_of_keel_and_watchdog
);

/// Red-team pass 8, R8-15: a forged journal entry (written through a re-pointed data
/// directory) named a file outside every workspace as a "link to put back" and another as a
/// program path that appeared; the replay replaced the first by a link of the forger's choice.
/// A replay acts only on what a note could have made: links on the way to a store, program
/// paths the workspace's git configuration names.
#[test]
fn a_forged_journal_entry_moves_nothing() {
    if std::env::var_os(FAKE_KEEL).is_some() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let outside = dir.path().canonicalize().unwrap().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("victim.txt"), "mine\n").unwrap();
    std::fs::write(outside.join("victim2.txt"), "mine\n").unwrap();
    // A repository outside every workspace whose configuration runs a program (the user's
    // own): a replay walking the forged root renamed its `.git`.
    let repo_ok = have_git()
        && Command::new("git")
            .args(["init", "-q", "repo"])
            .current_dir(&outside)
            .status()
            .is_ok_and(|s| s.success())
        && Command::new("git")
            .args(["-C", "repo", "config", "core.fsmonitor", "true"])
            .current_dir(&outside)
            .status()
            .is_ok_and(|s| s.success());
    let journal = dir.path().join("data").join(shell::pending::DIR);
    std::fs::create_dir_all(&journal).unwrap();
    let bytes = |p: &Path| serde_json::json!(p.as_os_str().as_encoded_bytes());
    let entry = serde_json::json!({
        "root": bytes(&outside),
        "since_secs": 1,
        "since_nanos": 0,
        "sealed_top": null,
        "confined": true,
        "programs": [[bytes(Path::new("victim2.txt")), "core.hookspath", false, false]],
        "links": [[bytes(&outside), bytes(&outside.join("victim.txt")), bytes(Path::new("/tmp/EVIL-TARGET"))]],
    });
    std::fs::write(journal.join("999999-1-1.json"), entry.to_string()).unwrap();
    let _ = shell::pending::replay(&journal);
    assert_eq!(
        std::fs::read_to_string(outside.join("victim.txt")).unwrap(),
        "mine\n"
    );
    assert!(
        !std::fs::symlink_metadata(outside.join("victim.txt"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(
        std::fs::read_to_string(outside.join("victim2.txt")).unwrap(),
        "mine\n"
    );
    if repo_ok {
        assert!(
            outside.join("repo/.git").is_dir(),
            "the user's repository was renamed"
        );
    }
}

/// A forged entry for a recorded workspace cannot reach back before its own file: with
/// `since` at 1970, a repository older than the entry by more than the slack stays.
#[test]
fn a_journal_entry_reaches_back_no_further_than_its_file() {
    if std::env::var_os(FAKE_KEEL).is_some() || !have_git() {
        assert!(
            std::env::var_os("CI").is_none() || std::env::var_os(FAKE_KEEL).is_some(),
            "CI needs git"
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().canonicalize().unwrap().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let git = |args: &[&str]| {
        assert!(
            Command::new("git")
                .args(args)
                .current_dir(&ws)
                .status()
                .unwrap()
                .success()
        );
    };
    git(&["init", "-q", "old"]);
    git(&["-C", "old", "config", "core.fsmonitor", "true"]);
    // Past the entry's slack (2 s) and the walk's own second.
    std::thread::sleep(Duration::from_millis(3_500));
    let data = dir.path().join("data");
    let journal = data.join(shell::pending::DIR);
    std::fs::create_dir_all(&journal).unwrap();
    let mut record = ws.as_os_str().as_encoded_bytes().to_vec();
    record.push(b'\n');
    std::fs::write(data.join("command-writable-dirs"), record).unwrap();
    let bytes = |p: &Path| serde_json::json!(p.as_os_str().as_encoded_bytes());
    let entry = serde_json::json!({
        "root": bytes(&ws),
        "since_secs": 1,
        "since_nanos": 0,
        "sealed_top": null,
        "confined": true,
        "programs": [],
        "links": [],
    });
    std::fs::write(journal.join("999999-1-1.json"), entry.to_string()).unwrap();
    git(&["init", "-q", "new"]);
    git(&["-C", "new", "config", "core.fsmonitor", "true"]);
    let reports = shell::pending::replay(&journal);
    assert!(ws.join("old/.git").is_dir(), "{reports:?}");
    assert!(
        !ws.join("new/.git").exists(),
        "a recorded root's entry still runs: {reports:?}"
    );
}
