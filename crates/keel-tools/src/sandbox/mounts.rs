//! The command's private view of the file system, built in its own mount namespace
//! (propagation to the host cut), which the child inherits and Landlock (applied next) forbids
//! it to change:
//!
//! - each protected path is bind-mounted onto itself and remounted read-only, and each
//!   directory between the workspace and a protected path (its *chain*) is bind-mounted onto
//!   itself read-write: a mount point cannot be renamed or removed, so `mv docs x; mkdir docs`
//!   cannot move `docs/api.md`'s protection out of the way;
//! - each hidden directory (Keel's data and config, the user's secret stores) is covered by an
//!   empty read-only tmpfs, each hidden file (`$KEEL_CONFIG`, `~/.netrc`…) by `/dev/null`
//!   (it reads as empty), read-only; a hidden directory that holds the workspace (a worker's
//!   checkout under `$KEEL_HOME/checkouts`) is covered the same way with the workspace — a
//!   copy of its mount, protected paths and all — put back at its place on top;
//! - every inherited mount but the writable trees becomes read-only (metadata changes —
//!   `chmod`, `chown`, `utime` — outside them fail; Landlock does not govern those);
//! - device files on every inherited mount stop working (`nodev`), a minimal `/dev` replaces
//!   the host's, and (inside a new PID namespace) a fresh `/proc` shows only the command's own
//!   processes ([`super::devices`]).
//!
//! Two ways in: with `CAP_SYS_ADMIN` (Keel running as root) the namespaces are unshared
//! directly; without it, the [`super::helper`] process enters a new *user* namespace that maps
//! only the caller's own uid and gid, which grants the others to a normal user. [`probe`] says
//! whether the first works on a throw-away thread.

use std::path::PathBuf;

/// The view a command gets (see the module documentation).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct View {
    /// Made read-only.
    pub protected: Vec<PathBuf>,
    /// Directories on the way to a protected path, pinned (bind-mounted onto themselves).
    pub anchors: Vec<PathBuf>,
    /// Directories covered by an empty read-only directory.
    pub hidden: Vec<PathBuf>,
    /// Files covered by an empty read-only file.
    pub hidden_files: Vec<PathBuf>,
    /// Files covered, read-only, by another file: `(file, what it shows)` (the user's git
    /// configuration without its credentials).
    pub replaced_files: Vec<(PathBuf, PathBuf)>,
    /// Directories inside hidden ones put back at their places on top of the cover (the
    /// workspace and writable trees).
    pub carve: Vec<PathBuf>,
    /// Mount a fresh `/proc` (only in a new PID namespace, by a process inside it).
    pub proc_fs: bool,
    /// Replace `/dev` with a minimal one.
    pub dev: bool,
    /// Make device files on every inherited mount unusable, and every inherited mount but
    /// `writable`'s read-only (both need `mount_setattr`).
    pub nodev: bool,
    /// The trees the command may write (Landlock's writable roots), kept writable.
    pub writable: Vec<PathBuf>,
}

/// Which optional parts of a [`View`] were built (all requested ones, when strict).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Built {
    pub proc_fs: bool,
    pub dev: bool,
    pub nodev: bool,
}

#[cfg(target_os = "linux")]
mod imp {
    use std::io;
    use std::path::{Path, PathBuf};

    use rustix::fs::{StatVfsMountFlags, statvfs};
    use rustix::mount::{
        MountFlags, MountPropagationFlags, MoveMountFlags, OpenTreeFlags, mount_bind_recursive,
        mount_change, mount_remount, move_mount, open_tree,
    };
    use rustix::thread::UnshareFlags;

    use super::super::devices;
    use super::{Built, View};

    /// Moves the calling thread into new namespaces (`flags`).
    #[allow(unsafe_code)]
    pub(in crate::sandbox) fn unshare(flags: UnshareFlags) -> io::Result<()> {
        // SAFETY: `unshare_unsafe` is unsafe because of `CLONE_FILES`, which would leave this
        // thread unable to use descriptors of other threads. Only `CLONE_NEWNS` (which implies
        // `CLONE_FS`: cwd, root and umask), `CLONE_NEWUSER`, `CLONE_NEWPID` and `CLONE_NEWIPC`
        // are unshared, on a throw-away thread that shares no descriptors with the rest of the
        // process afterwards, or in the single-threaded helper process.
        unsafe { rustix::thread::unshare_unsafe(flags) }.map_err(io::Error::from)
    }

    pub(in crate::sandbox) fn make_private() -> io::Result<()> {
        mount_change(
            "/",
            MountPropagationFlags::DOWNSTREAM | MountPropagationFlags::REC,
        )
        .map_err(|e| io::Error::other(format!("cannot make the mount namespace private: {e}")))
    }

    /// The flags a read-only remount of the mount holding `path` must keep: in a user
    /// namespace, `nosuid`, `nodev` and `noexec` of a mount inherited from the host are locked
    /// and a remount that drops them fails.
    pub(in crate::sandbox) fn locked_flags(path: &Path) -> MountFlags {
        let mut out = MountFlags::empty();
        if let Ok(st) = statvfs(path) {
            let f = st.f_flag;
            for (have, keep) in [
                (StatVfsMountFlags::NOSUID, MountFlags::NOSUID),
                (StatVfsMountFlags::NODEV, MountFlags::NODEV),
                (StatVfsMountFlags::NOEXEC, MountFlags::NOEXEC),
            ] {
                if f.contains(have) {
                    out |= keep;
                }
            }
        }
        out
    }

    /// Bind-mounts `source` onto `target` and, when `read_only`, remounts it read-only.
    pub(in crate::sandbox) fn bind(
        source: &Path,
        target: &Path,
        read_only: bool,
        what: &str,
    ) -> io::Result<()> {
        let fail = |step: &str, e: rustix::io::Errno| {
            io::Error::other(format!(
                "cannot {what} `{}` for the command ({step}): {e}",
                target.display()
            ))
        };
        mount_bind_recursive(source, target).map_err(|e| fail("bind mount", e))?;
        if read_only {
            let keep = locked_flags(target);
            mount_remount(target, MountFlags::BIND | MountFlags::RDONLY | keep, "")
                .map_err(|e| fail("read-only remount", e))?;
        }
        Ok(())
    }

    /// Pins the chain and makes the protected paths read-only, shallowest first (a pinned
    /// directory mounted after a protected path below it would cover that path's mount).
    fn protect(view: &View) -> io::Result<()> {
        let mut all: Vec<(&PathBuf, bool)> = view
            .anchors
            .iter()
            .filter(|a| !view.protected.contains(a))
            .map(|a| (a, false))
            .chain(view.protected.iter().map(|p| (p, true)))
            .collect();
        all.sort_by_key(|(p, _)| p.components().count());
        for (path, read_only) in all {
            let what = if read_only { "make read-only" } else { "pin" };
            bind(path, path, read_only, what)?;
        }
        Ok(())
    }

    /// Covers each hidden directory with an empty read-only tmpfs (outermost first), and each
    /// hidden file with `/dev/null` (the minimal `/dev`'s when it is built: it reads as
    /// empty), read-only.
    fn hide(view: &View) -> io::Result<()> {
        for dir in &view.hidden {
            let inside: Vec<&PathBuf> = view
                .carve
                .iter()
                .filter(|k| k.starts_with(dir) && *k != dir)
                .collect();
            let covered = if inside.is_empty() {
                cover(dir, 1, true)
            } else {
                cover_around(dir, &inside)
            };
            if let Err(e) = covered
                && !gone(dir)
            {
                return Err(e);
            }
        }
        for file in &view.hidden_files {
            if let Err(e) = bind(Path::new("/dev/null"), file, true, "hide")
                && !gone(file)
            {
                return Err(e);
            }
        }
        for (file, shown) in &view.replaced_files {
            if let Err(e) = bind(shown, file, true, "replace")
                && !gone(file)
            {
                return Err(e);
            }
        }
        Ok(())
    }

    /// True when `path` no longer exists: a store removed between making the view and
    /// mounting it (another session's temporary `keel.db` deleted as it ended) has nothing
    /// left to hide, and failing there turned a session's snapshots off for the whole run.
    /// Nothing the command does can cause this: it has not started yet.
    fn gone(path: &Path) -> bool {
        matches!(path.symlink_metadata(), Err(e) if e.kind() == io::ErrorKind::NotFound)
    }

    fn hide_error(dir: &Path, step: &str, e: impl std::fmt::Display) -> io::Error {
        io::Error::other(format!(
            "cannot hide `{}` from the command ({step}): {e}",
            dir.display()
        ))
    }

    /// Mounts an empty tmpfs with room for `inodes` entries over `dir`.
    fn cover(dir: &Path, inodes: usize, read_only: bool) -> io::Result<()> {
        let mut flags = MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC;
        if read_only {
            flags |= MountFlags::RDONLY;
        }
        // Read-only from the start, nobody can add to it; otherwise the caller makes way for
        // what it puts back, then turns it read-only.
        let mode = if read_only { "0555" } else { "0755" };
        let data = format!("size=64k,nr_inodes={inodes},mode={mode}");
        let data = std::ffi::CString::new(data).map_err(|e| hide_error(dir, "tmpfs", e))?;
        rustix::mount::mount("keel-hidden", dir, "tmpfs", flags, Some(data.as_c_str()))
            .map_err(|e| hide_error(dir, "tmpfs mount", e))
    }

    /// Covers `dir` like [`cover`], then puts each of `inside` (a directory below it the
    /// command works in) back at its place: copies of their mounts are taken first
    /// (`open_tree`, recursive: the workspace's read-only `.git` goes along), the cover gets
    /// the directories leading to them and turns read-only, and the copies are moved on top.
    fn cover_around(dir: &Path, inside: &[&PathBuf]) -> io::Result<()> {
        let mut copies = Vec::with_capacity(inside.len());
        for k in inside {
            let fd = open_tree(
                rustix::fs::CWD,
                k.as_path(),
                OpenTreeFlags::OPEN_TREE_CLONE
                    | OpenTreeFlags::OPEN_TREE_CLOEXEC
                    | OpenTreeFlags::AT_RECURSIVE,
            )
            .map_err(|e| hide_error(dir, &format!("copy `{}`", k.display()), e))?;
            copies.push((*k, fd));
        }
        let dirs: usize = inside
            .iter()
            .filter_map(|k| k.strip_prefix(dir).ok())
            .map(|r| r.components().count())
            .sum();
        cover(dir, dirs + 2, false)?;
        let mut builder = std::fs::DirBuilder::new();
        builder.recursive(true);
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o755);
        for (k, _) in &copies {
            builder
                .create(k)
                .map_err(|e| hide_error(dir, &format!("make way for `{}`", k.display()), e))?;
        }
        mount_remount(
            dir,
            MountFlags::BIND
                | MountFlags::RDONLY
                | MountFlags::NOSUID
                | MountFlags::NODEV
                | MountFlags::NOEXEC,
            "",
        )
        .map_err(|e| hide_error(dir, "read-only remount", e))?;
        for (k, fd) in copies {
            move_mount(
                &fd,
                "",
                rustix::fs::CWD,
                k.as_path(),
                MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH,
            )
            .map_err(|e| hide_error(dir, &format!("put `{}` back", k.display()), e))?;
        }
        Ok(())
    }

    /// Builds `view` in the calling thread's (private) mount namespace. With `strict`, any
    /// failure is an error; otherwise the optional parts that fail are left out and reported
    /// missing in the result (the probe).
    pub(in crate::sandbox) fn build(
        view: &View,
        strict: bool,
        limits: &super::super::limits::Prepared,
    ) -> io::Result<Built> {
        let mut built = Built::default();
        // Taken before `nodev` reaches the host's /dev.
        let devices = if view.dev {
            match devices::capture() {
                Ok(d) => Some(d),
                Err(e) if strict => return Err(e),
                Err(_) => None,
            }
        } else {
            None
        };
        if view.nodev {
            match devices::nodev_everywhere()
                .and_then(|()| devices::read_only_outside(&view.writable))
            {
                Ok(()) => built.nodev = true,
                Err(e) if strict => return Err(e),
                Err(_) => {}
            }
        }
        protect(view)?;
        if let Some(devices) = devices {
            match devices::minimal_dev(devices) {
                Ok(()) => built.dev = true,
                Err(e) if strict => return Err(e),
                Err(_) => {}
            }
        }
        // After /dev: hidden files are covered by its `null`.
        hide(view)?;
        // The working directory was entered before the writable trees were mounted back
        // over their places: enter it again by path, so relative paths reach the mount on
        // top (the writable copy), not the read-only one below.
        if let Ok(cwd) = std::env::current_dir() {
            let _ = std::env::set_current_dir(cwd);
        }
        if view.proc_fs {
            match devices::fresh_proc(limits)
                .map_err(|e| io::Error::other(format!("cannot mount a fresh /proc: {e}")))
            {
                Ok(()) => built.proc_fs = true,
                Err(e) if strict => return Err(e),
                Err(_) => {}
            }
        }
        Ok(built)
    }

    /// Without privileges, in a single-threaded process (the helper): enters a new user
    /// namespace mapping only the caller's uid and gid (so files keep their owners and the
    /// command runs as the same user), with `also` (mount, PID, IPC namespaces). The
    /// capabilities the process holds inside that user namespace reach nothing outside it, and
    /// are lost at `exec` (a non-root uid) or dropped by the caller.
    pub(in crate::sandbox) fn enter_user_namespace(also: UnshareFlags) -> io::Result<()> {
        let uid = rustix::process::geteuid().as_raw();
        let gid = rustix::process::getegid().as_raw();
        unshare(UnshareFlags::NEWUSER | also).map_err(|e| {
            io::Error::other(format!(
                "cannot create a user namespace ({e}); the kernel or a security module \
                 forbids unprivileged user namespaces"
            ))
        })?;
        let write = |file: &str, text: String| {
            std::fs::write(file, text).map_err(|e| {
                io::Error::other(format!("cannot write {file} in the user namespace: {e}"))
            })
        };
        // An unprivileged process may map its own ids only, and its gid only after giving up
        // setgroups.
        write("/proc/self/setgroups", "deny".into())?;
        write("/proc/self/uid_map", format!("{uid} {uid} 1"))?;
        write("/proc/self/gid_map", format!("{gid} {gid} 1"))?;
        Ok(())
    }

    /// The namespaces every confined command gets besides the user namespace.
    pub(in crate::sandbox) fn command_namespaces() -> UnshareFlags {
        UnshareFlags::NEWNS | UnshareFlags::NEWPID | UnshareFlags::NEWIPC
    }

    /// With `CAP_SYS_ADMIN`, on the calling (throw-away) thread: new mount, PID and IPC
    /// namespaces, and `view` built in the mount namespace (`view.proc_fs` must be false: the
    /// first process of the PID namespace mounts `/proc`). The PID namespace takes effect for
    /// the next child, which becomes its first process.
    pub(in crate::sandbox) fn enter_in_process(view: &View) -> io::Result<()> {
        unshare(command_namespaces())
            .map_err(|e| io::Error::other(format!("cannot create the namespaces: {e}")))?;
        make_private()?;
        build(view, true, &super::super::limits::Prepared::default()).map(|_| ())
    }

    /// `Ok` with what the calling process may build itself (root), tried on a throw-away
    /// thread; a fresh `/proc` is tried by a child of it that fails to `exec` on purpose.
    pub(in crate::sandbox) fn probe() -> Result<Built, String> {
        let dir = tempfile::Builder::new()
            .prefix("keel-ns-probe-")
            .tempdir()
            .map_err(|e| format!("cannot create a probe directory: {e}"))?;
        let protected = dir.path().join("protected");
        std::fs::create_dir(&protected).map_err(|e| e.to_string())?;
        let view = View {
            protected: vec![protected],
            dev: true,
            nodev: true,
            writable: vec![dir.path().to_path_buf()],
            ..View::default()
        };
        // The namespaces die with the thread; the directory is removed outside them.
        std::thread::Builder::new()
            .name("keel-sandbox-probe".into())
            .spawn(move || {
                unshare(command_namespaces()).map_err(|_| {
                    "no CAP_SYS_ADMIN to create a mount namespace (Keel is not running as root)"
                        .to_string()
                })?;
                make_private().map_err(|e| e.to_string())?;
                let none = super::super::limits::Prepared::default();
                let mut built = build(&view, false, &none).map_err(|e| e.to_string())?;
                built.proc_fs = proc_in_child();
                Ok(built)
            })
            .map_err(|e| e.to_string())
            .and_then(|h| {
                h.join()
                    .map_err(|_| "the probe thread panicked".to_string())
            })?
    }

    /// True when the first child of the calling thread's new PID namespace can mount a fresh
    /// `/proc`: the child mounts it, then `exec`s a program that does not exist.
    #[allow(unsafe_code)]
    fn proc_in_child() -> bool {
        use std::os::unix::process::CommandExt;
        // Nothing runs: the probe's `exec` fails on purpose after the pre-exec step.
        #[allow(clippy::disallowed_methods)]
        let mut cmd = std::process::Command::new("/nonexistent/keel-proc-probe");
        // SAFETY: the closure runs between `fork` and `exec`; `fresh_proc` makes system calls
        // only, without allocating.
        let none = super::super::limits::Prepared::default();
        unsafe {
            cmd.pre_exec(move || devices::fresh_proc(&none));
        }
        matches!(cmd.spawn(), Err(e) if e.kind() == io::ErrorKind::NotFound)
    }
}

#[cfg(target_os = "linux")]
pub(super) use imp::{build, enter_in_process, enter_user_namespace, make_private, probe, unshare};

#[cfg(not(target_os = "linux"))]
pub(super) fn enter_in_process(_view: &View) -> std::io::Result<()> {
    Ok(())
}

#[cfg(not(target_os = "linux"))]
pub(super) fn probe() -> Result<Built, String> {
    Err("mount namespaces exist only on Linux".into())
}
