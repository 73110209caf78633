//! Devices and processes in the command's mount namespace (see [`super::mounts`]):
//!
//! - **`nodev` everywhere**: every mount inherited from the host gets `nodev`
//!   (`mount_setattr(AT_RECURSIVE)`, Linux 5.12), so a device file found anywhere on disk —
//!   a disk, a loop device, a terminal — cannot be opened.
//! - **Read-only outside the writable trees**: every inherited mount but the command's
//!   writable directories (the workspace, its temp dir, granted caches) is made read-only, so
//!   `chmod`, `chown`, `utime` and xattr changes — which Landlock does not govern — fail with
//!   `EROFS` outside them.
//! - **A minimal `/dev`**: a read-only tmpfs with `null`, `zero`, `full`, `random`,
//!   `urandom` and `tty` (bind mounts of the host's, taken before `nodev`), its own `pts`
//!   (a new devpts instance: only terminals the command opens itself, never another
//!   terminal's `/dev/pts/N`), `ptmx`, a private `shm`, and the `fd`/`stdin`/`stdout`/
//!   `stderr` links. No disk, loop device, console or other terminal is there.
//! - **A fresh `/proc`** mounted by the PID namespace's first process: only the command's own
//!   processes are listed and reachable; `/proc/sys` and `/proc/sysrq-trigger` read-only.

#[cfg(target_os = "linux")]
mod imp {
    use std::io;
    use std::os::fd::OwnedFd;
    use std::path::{Path, PathBuf};

    use rustix::fs::CWD;
    use rustix::mount::{
        MountFlags, MoveMountFlags, OpenTreeFlags, mount, mount_remount, move_mount, open_tree,
    };

    /// The device files of the minimal `/dev`.
    const DEVICES: &[&str] = &["null", "zero", "full", "random", "urandom", "tty"];

    /// Detached copies of the host's device mounts for [`DEVICES`], taken before anything
    /// covers or restricts `/dev`.
    pub(in crate::sandbox) struct Captured(Vec<(&'static str, OwnedFd)>);

    pub(in crate::sandbox) fn capture() -> io::Result<Captured> {
        let mut out = Vec::new();
        for name in DEVICES {
            let path = format!("/dev/{name}");
            let fd = open_tree(
                CWD,
                path.as_str(),
                OpenTreeFlags::OPEN_TREE_CLONE | OpenTreeFlags::OPEN_TREE_CLOEXEC,
            )
            .map_err(|e| {
                io::Error::other(format!("cannot take `{path}` for the command's /dev: {e}"))
            })?;
            out.push((*name, fd));
        }
        Ok(Captured(out))
    }

    #[repr(C)]
    struct MountAttr {
        attr_set: u64,
        attr_clr: u64,
        propagation: u64,
        userns_fd: u64,
    }

    const AT_RECURSIVE: libc::c_uint = 0x8000;
    const MOUNT_ATTR_RDONLY: u64 = 0x1;
    const MOUNT_ATTR_NODEV: u64 = 0x4;

    /// `mount_setattr(AT_RECURSIVE)` setting `set` on every mount at and below `/` in the
    /// calling thread's mount namespace.
    #[allow(unsafe_code)]
    fn set_everywhere(set: u64) -> io::Result<()> {
        let attr = MountAttr {
            attr_set: set,
            attr_clr: 0,
            propagation: 0,
            userns_fd: 0,
        };
        // SAFETY: `mount_setattr(dirfd, path, flags, attr, size)` reads `size` bytes from
        // `attr`, a live, correctly laid-out `struct mount_attr`; the path is a NUL-terminated
        // literal. Nothing is written to our memory.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_mount_setattr,
                libc::AT_FDCWD,
                c"/".as_ptr(),
                AT_RECURSIVE,
                &attr as *const MountAttr,
                std::mem::size_of::<MountAttr>(),
            )
        };
        if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }

    /// `nodev` on every mount of the calling thread's mount namespace.
    pub(in crate::sandbox) fn nodev_everywhere() -> io::Result<()> {
        set_everywhere(MOUNT_ATTR_NODEV).map_err(|e| {
            io::Error::other(format!(
                "cannot make device files unusable (mount_setattr nodev, Linux 5.12+): {e}"
            ))
        })
    }

    /// Every inherited mount read-only but the `writable` trees: Landlock decides which files
    /// a command may *write*, but it does not govern `chmod`, `chown`, `utime` or xattrs, so
    /// without this a root command could `chmod u+s` or `chown` any file on the disk (and a
    /// normal user any of their own). Copies of the writable trees are taken first (with
    /// their own flags, read-only submounts staying read-only), then everything is made
    /// read-only, then the copies are put back over their places. Metadata changes outside
    /// the writable trees then fail with `EROFS`. Mounts made afterwards (the minimal `/dev`,
    /// `/proc`, hidden stores) are not affected.
    pub(in crate::sandbox) fn read_only_outside(writable: &[PathBuf]) -> io::Result<()> {
        let fail = |what: String, e: &dyn std::fmt::Display| {
            io::Error::other(format!(
                "cannot make the disk outside the writable directories read-only for the \
                 command ({what}): {e}"
            ))
        };
        // The outermost writable trees only (an inner one travels with its parent's copy).
        let mut roots: Vec<&PathBuf> = writable.iter().collect();
        roots.sort_by_key(|p| p.components().count());
        let mut outer: Vec<&PathBuf> = Vec::new();
        for r in roots {
            if !outer.iter().any(|o| r.starts_with(o)) {
                outer.push(r);
            }
        }
        let mut copies = Vec::with_capacity(outer.len());
        for root in &outer {
            let fd = open_tree(
                CWD,
                root.as_path(),
                OpenTreeFlags::OPEN_TREE_CLONE
                    | OpenTreeFlags::OPEN_TREE_CLOEXEC
                    | OpenTreeFlags::AT_RECURSIVE,
            )
            .map_err(|e| fail(format!("copy `{}`", root.display()), &e))?;
            copies.push((root, fd));
        }
        set_everywhere(MOUNT_ATTR_RDONLY).map_err(|e| fail("mount_setattr ro".into(), &e))?;
        for (root, fd) in copies {
            move_mount(
                &fd,
                "",
                CWD,
                root.as_path(),
                MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH,
            )
            .map_err(|e| fail(format!("mount `{}` back", root.display()), &e))?;
        }
        Ok(())
    }

    fn fail(what: &str, e: impl std::fmt::Display) -> io::Error {
        io::Error::other(format!("cannot {what} for the command: {e}"))
    }

    /// A fresh `/proc` for the calling process's PID namespace (it must be inside it), with
    /// `/proc/sys` and `/proc/sysrq-trigger` read-only — after the namespace's process limit
    /// is written there. System calls only, no allocation (it also runs between `fork` and
    /// `exec`).
    pub(in crate::sandbox) fn fresh_proc(
        limits: &super::super::limits::Prepared,
    ) -> io::Result<()> {
        let hidden = MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC;
        mount(c"proc", c"/proc", c"proc", hidden, None)?;
        limits.apply_pid_max()?;
        for path in [c"/proc/sys", c"/proc/sysrq-trigger"] {
            match rustix::mount::mount_bind_recursive(path, path) {
                Ok(()) => mount_remount(path, MountFlags::BIND | MountFlags::RDONLY | hidden, c"")?,
                Err(rustix::io::Errno::NOENT) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    /// Replaces `/dev` with the minimal one, using the devices [`capture`]d earlier.
    pub(in crate::sandbox) fn minimal_dev(devices: Captured) -> io::Result<()> {
        let hidden = MountFlags::NOSUID | MountFlags::NOEXEC;
        mount(
            "keel-dev",
            "/dev",
            "tmpfs",
            hidden,
            Some(c"size=64k,nr_inodes=64,mode=0755"),
        )
        .map_err(|e| fail("mount a tmpfs on /dev", e))?;
        for (name, fd) in devices.0 {
            let target = Path::new("/dev").join(name);
            std::fs::File::create(&target)
                .map_err(|e| fail(&format!("create {}", target.display()), e))?;
            move_mount(
                &fd,
                "",
                CWD,
                &target,
                MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH,
            )
            .map_err(|e| fail(&format!("mount {}", target.display()), e))?;
        }
        std::fs::create_dir("/dev/pts").map_err(|e| fail("create /dev/pts", e))?;
        mount(
            "devpts",
            "/dev/pts",
            "devpts",
            hidden,
            Some(c"newinstance,ptmxmode=0666,mode=0620"),
        )
        .map_err(|e| fail("mount a new devpts instance on /dev/pts", e))?;
        std::fs::create_dir("/dev/shm").map_err(|e| fail("create /dev/shm", e))?;
        mount(
            "keel-shm",
            "/dev/shm",
            "tmpfs",
            hidden | MountFlags::NODEV,
            Some(c"mode=1777"),
        )
        .map_err(|e| fail("mount a private /dev/shm", e))?;
        for (link, target) in [
            ("/dev/ptmx", "pts/ptmx"),
            ("/dev/fd", "/proc/self/fd"),
            ("/dev/stdin", "/proc/self/fd/0"),
            ("/dev/stdout", "/proc/self/fd/1"),
            ("/dev/stderr", "/proc/self/fd/2"),
        ] {
            std::os::unix::fs::symlink(target, link)
                .map_err(|e| fail(&format!("link {link}"), e))?;
        }
        // Seen once under a loaded parallel test run: EBUSY from this remount. It is retried a
        // few times before the command fails (it never runs with a writable /dev).
        let mut tries = 0;
        loop {
            match mount_remount("/dev", MountFlags::BIND | MountFlags::RDONLY | hidden, "") {
                Ok(()) => return Ok(()),
                Err(rustix::io::Errno::BUSY) if tries < 5 => {
                    tries += 1;
                    std::thread::sleep(std::time::Duration::from_millis(10 * tries));
                }
                Err(e) => return Err(fail("remount /dev read-only", e)),
            }
        }
    }
}

#[cfg(target_os = "linux")]
pub(super) use imp::{capture, fresh_proc, minimal_dev, nodev_everywhere, read_only_outside};
