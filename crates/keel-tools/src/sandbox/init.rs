//! The confined command's processes, started by the [`super::helper`] (single-threaded):
//!
//! ```text
//! Keel ─ helper (host PID namespace: waits, relays the status, watches Keel)
//!          └─ init (pid 1 of a new PID namespace: builds the view, confines itself, reaps)
//!               └─ the command (its own session: no controlling terminal)
//! ```
//!
//! The helper enters a new PID namespace (inside a new user namespace when not root) and forks
//! its first process, *init*. Init enters new mount and IPC namespaces, builds the command's
//! view of the file system
//! ([`super::mounts`], a fresh `/proc` included) and forks the command, which drops
//! capabilities, applies Landlock and seccomp, calls `setsid` (so `/dev/tty` reaches no
//! terminal) and `exec`s. Init reaps every orphan until the command ends, kills and reaps
//! everything left in the namespace — nothing the command started (`setsid -f`, `nohup … &`)
//! outlives it —, then sends the command's wait status to the helper and exits. The helper
//! exits the way the command did (same code, or the same signal) without waiting for the
//! namespaces' teardown. If the helper dies, init gets `SIGKILL` (parent-death signal) and the
//! kernel kills the rest of the namespace; if Keel dies, the helper kills init (it polls a
//! pidfd of Keel).

#[cfg(target_os = "linux")]
mod imp {
    use std::ffi::{OsStr, OsString};
    use std::io::{self, Read, Write};
    use std::os::fd::{AsFd, OwnedFd};
    use std::os::unix::net::UnixStream;
    use std::process::ExitCode;

    use rustix::event::{PollFd, PollFlags, poll};
    use rustix::process::{Pid, Signal, WaitOptions};
    use rustix::thread::UnshareFlags;

    use super::super::helper::{HelperPolicy, POLICY_ENV};
    use super::super::{limits, mounts, privileges, rules, seccomp};

    /// The first byte of init's report: the command exited (second byte: its code) or was
    /// killed (second byte: the signal).
    const EXITED: u8 = 0;
    const SIGNALLED: u8 = 1;

    fn say(msg: &str) {
        eprintln!("keel-sandbox-exec: {msg}");
    }

    /// `fork()`: `Some(pid)` in the parent, `None` in the child.
    #[allow(unsafe_code)]
    fn fork() -> io::Result<Option<Pid>> {
        // SAFETY: the helper process is single-threaded (it dispatches first thing in `main`,
        // before any thread exists), so the child may use the allocator and everything else.
        let pid = unsafe { libc::fork() };
        match pid {
            -1 => Err(io::Error::last_os_error()),
            0 => Ok(None),
            p => Ok(Pid::from_raw(p)),
        }
    }

    /// Ends this process by `signal` (default action, no core file), else with 128 + signal.
    #[allow(unsafe_code)]
    fn die_by(signal: i32) -> ExitCode {
        let _ = rustix::process::setrlimit(
            rustix::process::Resource::Core,
            rustix::process::Rlimit {
                current: Some(0),
                maximum: Some(0),
            },
        );
        // SAFETY: resetting a signal's disposition to the default and raising it in this
        // single-threaded process has no memory effects.
        unsafe {
            libc::signal(signal, libc::SIG_DFL);
            libc::raise(signal);
        }
        ExitCode::from(u8::try_from(128 + signal).unwrap_or(255))
    }

    /// Watches Keel: a pidfd of the parent, which must be `expected` (Keel's pid). `Err` when
    /// Keel is already gone. `Ok(None)` on kernels without pidfds (no watch).
    fn watch_keel(expected: Option<u32>) -> Result<Option<OwnedFd>, String> {
        let Some(expected) = expected else {
            return Ok(None);
        };
        let parent = rustix::process::getppid();
        let alive = || parent.is_some_and(|p| p.as_raw_nonzero().get() as u32 == expected);
        if !alive() {
            return Err("Keel exited before the command started".into());
        }
        let Some(pid) = parent else {
            return Ok(None);
        };
        match rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()) {
            // The parent could have died and its pid been reused between the two calls: ask
            // again now that the pidfd pins the process.
            Ok(fd) if rustix::process::getppid() == parent => Ok(Some(fd)),
            Ok(_) => Err("Keel exited before the command started".into()),
            Err(_) => Ok(None),
        }
    }

    /// Runs the command confined by `policy`; returns the helper's exit code (or ends it by
    /// the command's signal).
    pub(in crate::sandbox) fn run(
        policy: &HelperPolicy,
        program: &OsStr,
        args: &[OsString],
    ) -> ExitCode {
        let keel = match watch_keel(policy.parent) {
            Ok(w) => w,
            Err(e) => {
                say(&e);
                return ExitCode::from(126);
            }
        };
        // Only the PID namespace (and the user namespace it needs) here: the rest belongs to
        // init alone, so that tearing them down is init's exit, not the helper's.
        let entered = if policy.user_namespace {
            mounts::enter_user_namespace(UnshareFlags::NEWPID)
        } else {
            mounts::unshare(UnshareFlags::NEWPID)
                .map_err(|e| io::Error::other(format!("cannot create the namespaces: {e}")))
        };
        if let Err(e) = entered {
            say(&format!("cannot confine the command: {e}"));
            return ExitCode::from(126);
        }
        let (ours, theirs) = match UnixStream::pair() {
            Ok(p) => p,
            Err(e) => {
                say(&format!("cannot create the status channel: {e}"));
                return ExitCode::from(126);
            }
        };
        match fork() {
            Err(e) => {
                say(&format!("cannot start the command's namespace: {e}"));
                ExitCode::from(126)
            }
            Ok(None) => {
                drop(ours);
                drop(keel);
                init(policy, program, args, theirs)
            }
            Ok(Some(init_pid)) => {
                drop(theirs);
                supervise(init_pid, ours, keel)
            }
        }
    }

    /// The helper after the fork: waits for init's report (killing init if Keel dies), then
    /// exits the way the command did — without waiting for init to finish: tearing the
    /// namespaces down (the kernel kills what is left in them) is init's own exit, which need
    /// not delay Keel.
    fn supervise(init: Pid, mut status: UnixStream, keel: Option<OwnedFd>) -> ExitCode {
        loop {
            let mut fds = vec![PollFd::new(&status, PollFlags::IN)];
            if let Some(k) = &keel {
                fds.push(PollFd::from_borrowed_fd(k.as_fd(), PollFlags::IN));
            }
            match poll(&mut fds, None) {
                Ok(_) => {}
                Err(rustix::io::Errno::INTR) => continue,
                Err(_) => break,
            }
            let keel_gone = fds.get(1).is_some_and(|f| !f.revents().is_empty());
            let init_done = !fds[0].revents().is_empty();
            if keel_gone {
                let _ = rustix::process::kill_process(init, Signal::KILL);
            }
            if keel_gone || init_done {
                break;
            }
        }
        let mut report = [0u8; 2];
        match (status.read_exact(&mut report).is_ok(), report) {
            (true, [EXITED, code]) => return ExitCode::from(code),
            (true, [SIGNALLED, sig]) => return die_by(i32::from(sig)),
            _ => {}
        }
        let waited = loop {
            match rustix::process::waitpid(Some(init), WaitOptions::empty()) {
                Err(rustix::io::Errno::INTR) => continue,
                other => break other,
            }
        };
        // Init ended without a report: its setup failed (it said why) or it was killed.
        match waited {
            Ok(Some((_, s))) => match (s.exit_status(), s.terminating_signal()) {
                (Some(code), _) => ExitCode::from(code as u8),
                (None, Some(sig)) => die_by(sig),
                _ => ExitCode::from(126),
            },
            _ => ExitCode::from(126),
        }
    }

    /// `--probe DIR`: enters the namespaces (a user namespace only when plain `unshare` is
    /// refused) and, in a new PID namespace's first process, builds a view with a read-only
    /// directory, a hidden directory and file and every optional part. `Ok` with the words
    /// for what works: `userns` (a user namespace was needed), `proc`, `dev`, `nodev`.
    pub(in crate::sandbox) fn probe(dir: &std::path::Path) -> io::Result<String> {
        let protected = dir.join("protected");
        let hidden = dir.join("hidden");
        let hidden_file = dir.join("hidden-file");
        for d in [&protected, &hidden] {
            std::fs::create_dir_all(d)?;
        }
        std::fs::write(&hidden_file, b"secret")?;
        let userns = match mounts::unshare(UnshareFlags::NEWPID) {
            Ok(()) => false,
            Err(_) => {
                mounts::enter_user_namespace(UnshareFlags::NEWPID)?;
                true
            }
        };
        let view = mounts::View {
            protected: vec![protected.clone()],
            hidden: vec![hidden],
            hidden_files: vec![hidden_file.clone()],
            proc_fs: true,
            dev: true,
            nodev: true,
            writable: vec![dir.to_path_buf()],
            ..mounts::View::default()
        };
        let (mut ours, mut theirs) = UnixStream::pair()?;
        let Some(child) = fork()? else {
            drop(ours);
            let report = (|| -> io::Result<String> {
                mounts::unshare(UnshareFlags::NEWNS | UnshareFlags::NEWIPC)?;
                mounts::make_private()?;
                let built = mounts::build(&view, false, &limits::Prepared::default())?;
                match std::fs::write(protected.join("probe"), "x") {
                    Err(e) if super::super::helper::is_read_only_error(&e) => {}
                    Err(e) => {
                        return Err(io::Error::other(format!(
                            "unexpected error writing the read-only probe: {e}"
                        )));
                    }
                    Ok(()) => {
                        return Err(io::Error::other(
                            "the read-only bind mount did not stop a write",
                        ));
                    }
                }
                // The probe's own temporary file, not a project file.
                #[allow(clippy::disallowed_methods)]
                let still_readable = std::fs::read(&hidden_file).is_ok_and(|b| !b.is_empty());
                if still_readable {
                    return Err(io::Error::other("a hidden file was still readable"));
                }
                let mut words = Vec::new();
                for (on, word) in [
                    (userns, "userns"),
                    (
                        built.proc_fs && rustix::process::getpid().as_raw_nonzero().get() == 1,
                        "proc",
                    ),
                    (built.dev, "dev"),
                    (built.nodev, "nodev"),
                ] {
                    if on {
                        words.push(word);
                    }
                }
                Ok(words.join(" "))
            })();
            let line = match report {
                Ok(words) => format!("ok {words}"),
                Err(e) => format!("error {e}"),
            };
            let _ = theirs.write_all(line.as_bytes());
            std::process::exit(0);
        };
        drop(theirs);
        let mut line = String::new();
        let read = ours.read_to_string(&mut line);
        let _ = rustix::process::waitpid(Some(child), WaitOptions::empty());
        read?;
        if let Some(words) = line.strip_prefix("ok ") {
            Ok(words.trim().to_string())
        } else if let Some(e) = line.strip_prefix("error ") {
            Err(io::Error::other(e.to_string()))
        } else {
            Err(io::Error::other(
                "the probe's namespace process ended without a report",
            ))
        }
    }

    /// Pid 1 of the new PID namespace.
    fn init(
        policy: &HelperPolicy,
        program: &OsStr,
        args: &[OsString],
        mut status: UnixStream,
    ) -> ExitCode {
        // Die with the helper; if it is already gone, its end of the channel is closed.
        let _ = rustix::process::set_parent_process_death_signal(Some(Signal::KILL));
        let mut probe = [PollFd::new(&status, PollFlags::IN)];
        if poll(
            &mut probe,
            Some(&rustix::event::Timespec {
                tv_sec: 0,
                tv_nsec: 0,
            }),
        )
        .is_ok()
            && probe[0].revents().contains(PollFlags::HUP)
        {
            return ExitCode::from(126);
        }
        // Init is the PID namespace's first process: it writes the namespace's process limit.
        let limits = limits::Prepared::new(policy.limits, policy.view.proc_fs, true);
        let namespaces = mounts::unshare(UnshareFlags::NEWNS | UnshareFlags::NEWIPC)
            .map_err(|e| io::Error::other(format!("cannot create the namespaces: {e}")))
            .and_then(|()| mounts::make_private())
            .and_then(|()| mounts::build(&policy.view, true, &limits));
        if let Err(e) = namespaces {
            say(&format!("cannot confine the command: {e}"));
            return ExitCode::from(126);
        }
        let command = match fork() {
            Err(e) => {
                say(&format!("cannot start the command: {e}"));
                return ExitCode::from(126);
            }
            Ok(None) => {
                drop(status);
                if let Err(e) = confine(policy, &limits) {
                    say(&format!("cannot confine the command: {e}"));
                    std::process::exit(126);
                }
                exec(program, args, policy.env.as_deref())
            }
            Ok(Some(pid)) => pid,
        };
        // Reap orphans until the command itself ends.
        let report = loop {
            match rustix::process::wait(WaitOptions::empty()) {
                Ok(Some((pid, s))) if pid == command => {
                    break match (s.exit_status(), s.terminating_signal()) {
                        (Some(code), _) => [EXITED, code as u8],
                        (None, Some(sig)) => [SIGNALLED, sig as u8],
                        _ => [EXITED, 126],
                    };
                }
                Ok(Some(_)) | Err(rustix::io::Errno::INTR) => continue,
                Ok(None) | Err(_) => break [EXITED, 126],
            }
        };
        // Nothing the command started may run once Keel hears it ended.
        kill_all_others();
        while let Ok(Some(_)) | Err(rustix::io::Errno::INTR) =
            rustix::process::wait(WaitOptions::empty())
        {}
        let _ = status.write_all(&report);
        ExitCode::SUCCESS
    }

    /// `kill(-1, SIGKILL)` from init: every other process of the namespace. Init keeps its
    /// capabilities (only the command drops them), so a process that changed its uid dies too.
    #[allow(unsafe_code)]
    fn kill_all_others() {
        // SAFETY: a plain system call with integer arguments.
        unsafe {
            libc::kill(-1, libc::SIGKILL);
        }
    }

    /// In the command's process, before `exec`: the capability drop, Landlock and seccomp.
    /// (Init keeps its capabilities: it runs only this code, and the command can neither
    /// signal, trace nor read it.)
    fn confine(policy: &HelperPolicy, limits: &limits::Prepared) -> io::Result<()> {
        privileges::drop_capabilities()?;
        limits.apply_to_command()?;
        if policy.landlock {
            rules::restrict_current_thread(&policy.writable, policy.network, policy.view.dev)?;
        }
        if policy.seccomp {
            seccomp::apply(seccomp::Filter {
                network: policy.network,
                metadata: policy.metadata,
                pid_namespace: true,
                ipc_namespace: true,
            })?;
        }
        Ok(())
    }

    /// The command's process: a session of its own, then `exec`.
    fn exec(program: &OsStr, args: &[OsString], env: Option<&[(OsString, OsString)]>) -> ! {
        use std::os::unix::process::CommandExt;
        let _ = rustix::process::setsid();
        // Only stdin, stdout and stderr reach the command (Keel's runner already saw to it
        // when it started the helper; this covers a helper started some other way).
        if let Err(e) = super::super::fds::close_on_exec_above_stderr() {
            say(&format!("cannot close inherited descriptors: {e}"));
            std::process::exit(126);
        }
        // The helper's init becomes the command the runner asked for, confined just before.
        #[allow(clippy::disallowed_methods)]
        let mut command = std::process::Command::new(program);
        command.args(args);
        match env {
            // The command's own environment, which the helper never had (R4-16).
            Some(env) => command.env_clear().envs(env.iter().map(|(k, v)| (k, v))),
            None => command.env_remove(POLICY_ENV),
        };
        let err = command.exec();
        say(&format!(
            "cannot run `{}`: {err}",
            program.to_string_lossy()
        ));
        let code = if err.kind() == io::ErrorKind::NotFound {
            127
        } else {
            126
        };
        std::process::exit(code)
    }
}

#[cfg(target_os = "linux")]
pub(super) use imp::{probe, run};

#[cfg(not(target_os = "linux"))]
pub(super) fn probe(_dir: &std::path::Path) -> std::io::Result<String> {
    Err(std::io::Error::other(
        "the sandbox helper exists only on Linux",
    ))
}

#[cfg(not(target_os = "linux"))]
pub(super) fn run(
    _policy: &super::helper::HelperPolicy,
    _program: &std::ffi::OsStr,
    _args: &[std::ffi::OsString],
) -> std::process::ExitCode {
    eprintln!("keel-sandbox-exec: the sandbox helper exists only on Linux");
    std::process::ExitCode::from(126)
}
