//! Protected paths made read-only to commands: the spawning thread moves into a private mount
//! namespace (propagation to the host cut), bind-mounts each protected path onto itself and
//! remounts it read-only, and covers Keel's own data and config directories (server token,
//! session database) with an empty read-only tmpfs; the child inherits that view, and Landlock
//! (applied next) forbids it to change mounts. Creating a mount namespace needs `CAP_SYS_ADMIN`; [`probe`] says whether
//! this process has it.

#[cfg(target_os = "linux")]
mod imp {
    use std::io;
    use std::path::PathBuf;

    use rustix::mount::mount_remount;
    use rustix::mount::{MountFlags, MountPropagationFlags, mount_bind_recursive, mount_change};
    use rustix::thread::UnshareFlags;

    /// Moves the calling thread into a new mount namespace.
    #[allow(unsafe_code)]
    fn unshare_mount_namespace() -> io::Result<()> {
        // SAFETY: `unshare_unsafe` is unsafe because of `CLONE_FILES`, which would leave this
        // thread unable to use descriptors of other threads. Only `CLONE_NEWNS` (which implies
        // `CLONE_FS`: cwd, root and umask) is unshared, on a throw-away thread that shares no
        // descriptors with the rest of the process afterwards.
        unsafe { rustix::thread::unshare_unsafe(UnshareFlags::NEWNS) }
            .map_err(|e| io::Error::other(format!("cannot create a mount namespace: {e}")))
    }

    /// In a private mount namespace of the calling thread, makes each of `paths` read-only and
    /// each of `hidden` an empty read-only directory.
    pub(in crate::sandbox) fn protect(paths: &[PathBuf], hidden: &[PathBuf]) -> io::Result<()> {
        unshare_mount_namespace()?;
        mount_change(
            "/",
            MountPropagationFlags::DOWNSTREAM | MountPropagationFlags::REC,
        )
        .map_err(|e| io::Error::other(format!("cannot make the mount namespace private: {e}")))?;
        for path in paths {
            let fail = |what: &str, e: rustix::io::Errno| {
                io::Error::other(format!(
                    "cannot make `{}` read-only for the command ({what}): {e}",
                    path.display()
                ))
            };
            mount_bind_recursive(path, path).map_err(|e| fail("bind mount", e))?;
            mount_remount(path, MountFlags::BIND | MountFlags::RDONLY, "")
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
        Ok(())
    }

    /// `Ok` when this process may create mount namespaces (tried on a throw-away thread).
    pub(in crate::sandbox) fn probe() -> Result<(), String> {
        std::thread::Builder::new()
            .name("keel-sandbox-probe".into())
            .spawn(|| {
                unshare_mount_namespace().map_err(|_| {
                    "no CAP_SYS_ADMIN to create a mount namespace (Keel is not running as root)"
                        .to_string()
                })?;
                mount_change(
                    "/",
                    MountPropagationFlags::DOWNSTREAM | MountPropagationFlags::REC,
                )
                .map_err(|e| format!("cannot make a mount namespace private: {e}"))
            })
            .map_err(|e| e.to_string())
            .and_then(|h| {
                h.join()
                    .map_err(|_| "the probe thread panicked".to_string())
            })?
    }
}

#[cfg(target_os = "linux")]
pub(super) use imp::{probe, protect};

#[cfg(not(target_os = "linux"))]
pub(super) fn protect(
    _paths: &[std::path::PathBuf],
    _hidden: &[std::path::PathBuf],
) -> std::io::Result<()> {
    Ok(())
}

#[cfg(not(target_os = "linux"))]
pub(super) fn probe() -> Result<(), String> {
    Err("mount namespaces exist only on Linux".into())
}
