//! Protected paths made read-only to commands: the command gets a private mount namespace
//! (propagation to the host cut) in which each protected path is bind-mounted onto itself and
//! remounted read-only, Keel's own data and config directories (server token, session database)
//! are covered by an empty read-only tmpfs, and Keel's config file (`$KEEL_CONFIG`) by an empty
//! read-only file. The child inherits that view, and Landlock (applied next) forbids it to
//! change mounts.
//!
//! Two ways in: with `CAP_SYS_ADMIN` (Keel running as root) the spawning thread unshares the
//! mount namespace itself ([`protect`]); without it, the [`super::helper`] process enters a new
//! *user* namespace that maps only the caller's own uid and gid, which grants a mount namespace
//! to a normal user ([`protect_in_user_namespace`]). [`probe`] says whether the first works.

#[cfg(target_os = "linux")]
mod imp {
    use std::io;
    use std::path::{Path, PathBuf};

    use rustix::fs::{StatVfsMountFlags, statvfs};
    use rustix::mount::mount_remount;
    use rustix::mount::{MountFlags, MountPropagationFlags, mount_bind_recursive, mount_change};
    use rustix::thread::UnshareFlags;

    /// Moves the calling thread into new namespaces (`flags`).
    #[allow(unsafe_code)]
    fn unshare(flags: UnshareFlags) -> io::Result<()> {
        // SAFETY: `unshare_unsafe` is unsafe because of `CLONE_FILES`, which would leave this
        // thread unable to use descriptors of other threads. Only `CLONE_NEWNS` (which implies
        // `CLONE_FS`: cwd, root and umask) and `CLONE_NEWUSER` are unshared, on a throw-away
        // thread that shares no descriptors with the rest of the process afterwards, or in the
        // single-threaded helper process.
        unsafe { rustix::thread::unshare_unsafe(flags) }.map_err(io::Error::from)
    }

    fn make_private() -> io::Result<()> {
        mount_change(
            "/",
            MountPropagationFlags::DOWNSTREAM | MountPropagationFlags::REC,
        )
        .map_err(|e| io::Error::other(format!("cannot make the mount namespace private: {e}")))
    }

    /// The flags a read-only remount of the mount holding `path` must keep: in a user
    /// namespace, `nosuid`, `nodev` and `noexec` of a mount inherited from the host are locked
    /// and a remount that drops them fails.
    fn locked_flags(path: &Path) -> MountFlags {
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

    /// In the calling thread's (private) mount namespace: makes each of `paths` read-only,
    /// each of `hidden` an empty read-only directory and each of `hidden_files` an empty file.
    fn apply(paths: &[PathBuf], hidden: &[PathBuf], hidden_files: &[PathBuf]) -> io::Result<()> {
        for path in paths {
            let fail = |what: &str, e: rustix::io::Errno| {
                io::Error::other(format!(
                    "cannot make `{}` read-only for the command ({what}): {e}",
                    path.display()
                ))
            };
            mount_bind_recursive(path, path).map_err(|e| fail("bind mount", e))?;
            let keep = locked_flags(path);
            mount_remount(path, MountFlags::BIND | MountFlags::RDONLY | keep, "")
                .map_err(|e| fail("read-only remount", e))?;
        }
        for dir in hidden {
            // An empty, read-only tmpfs over the directory: the command sees nothing of it.
            rustix::mount::mount(
                "tmpfs",
                dir,
                "tmpfs",
                MountFlags::RDONLY | MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC,
                Some(c"size=4k,mode=0555"),
            )
            .map_err(|e| {
                io::Error::other(format!(
                    "cannot hide `{}` from the command (tmpfs mount): {e}",
                    dir.display()
                ))
            })?;
        }
        for file in hidden_files {
            let fail = |what: &str, e: rustix::io::Errno| {
                io::Error::other(format!(
                    "cannot hide `{}` from the command ({what}): {e}",
                    file.display()
                ))
            };
            // `/dev/null` reads as an empty file; the read-only remount stops writes reaching it.
            rustix::mount::mount_bind(Path::new("/dev/null"), file)
                .map_err(|e| fail("bind mount", e))?;
            let keep = locked_flags(file);
            mount_remount(file, MountFlags::BIND | MountFlags::RDONLY | keep, "")
                .map_err(|e| fail("read-only remount", e))?;
        }
        Ok(())
    }

    /// With `CAP_SYS_ADMIN`: moves the calling thread into a private mount namespace and
    /// applies the protections there.
    pub(in crate::sandbox) fn protect(
        paths: &[PathBuf],
        hidden: &[PathBuf],
        hidden_files: &[PathBuf],
    ) -> io::Result<()> {
        unshare(UnshareFlags::NEWNS)
            .map_err(|e| io::Error::other(format!("cannot create a mount namespace: {e}")))?;
        make_private()?;
        apply(paths, hidden, hidden_files)
    }

    /// Without privileges, in a single-threaded process (the helper): enters a new user
    /// namespace mapping only the caller's uid and gid (so files keep their owners and the
    /// command runs as the same user), with a private mount namespace, and applies the
    /// protections there. The capabilities the process holds inside that user namespace reach
    /// nothing outside it, and are lost at `exec` (a non-root uid) or dropped by the caller.
    pub(in crate::sandbox) fn protect_in_user_namespace(
        paths: &[PathBuf],
        hidden: &[PathBuf],
        hidden_files: &[PathBuf],
    ) -> io::Result<()> {
        enter_user_namespace()?;
        make_private()?;
        apply(paths, hidden, hidden_files)
    }

    fn enter_user_namespace() -> io::Result<()> {
        let uid = rustix::process::geteuid().as_raw();
        let gid = rustix::process::getegid().as_raw();
        unshare(UnshareFlags::NEWUSER | UnshareFlags::NEWNS).map_err(|e| {
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

    /// `Ok` when this process may create mount namespaces itself (tried on a throw-away
    /// thread).
    pub(in crate::sandbox) fn probe() -> Result<(), String> {
        std::thread::Builder::new()
            .name("keel-sandbox-probe".into())
            .spawn(|| {
                unshare(UnshareFlags::NEWNS).map_err(|_| {
                    "no CAP_SYS_ADMIN to create a mount namespace (Keel is not running as root)"
                        .to_string()
                })?;
                make_private().map_err(|e| e.to_string())
            })
            .map_err(|e| e.to_string())
            .and_then(|h| {
                h.join()
                    .map_err(|_| "the probe thread panicked".to_string())
            })?
    }
}

#[cfg(target_os = "linux")]
pub(super) use imp::{probe, protect, protect_in_user_namespace};

#[cfg(not(target_os = "linux"))]
pub(super) fn protect(
    _paths: &[std::path::PathBuf],
    _hidden: &[std::path::PathBuf],
    _hidden_files: &[std::path::PathBuf],
) -> std::io::Result<()> {
    Ok(())
}

#[cfg(not(target_os = "linux"))]
pub(super) fn protect_in_user_namespace(
    _paths: &[std::path::PathBuf],
    _hidden: &[std::path::PathBuf],
    _hidden_files: &[std::path::PathBuf],
) -> std::io::Result<()> {
    Err(std::io::Error::other("user namespaces exist only on Linux"))
}

#[cfg(not(target_os = "linux"))]
pub(super) fn probe() -> Result<(), String> {
    Err("mount namespaces exist only on Linux".into())
}
