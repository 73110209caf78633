//! The Landlock part of the sandbox: file-system rights, TCP rules and scoping.

#[cfg(target_os = "linux")]
pub(super) use imp::{prepare, probe, restrict_current_thread, restrict_with};

#[cfg(target_os = "linux")]
mod imp {
    use std::io;
    use std::os::fd::OwnedFd;
    use std::path::PathBuf;

    use landlock::{
        ABI, Access, AccessFs, AccessNet, BitFlags, LandlockStatus, PathBeneath, PathFd, Ruleset,
        RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope,
    };

    /// The ABI whose rights Keel handles (newer kernels are fine; older ones get best effort:
    /// what they lack is reported by `keel doctor`).
    const TARGET_ABI: ABI = ABI::V6;

    /// Device files every command may write (sinks that hold no data).
    const WRITABLE_DEVICES: &[&str] = &["/dev/null", "/dev/zero", "/dev/full"];

    /// Directories of the command's own minimal `/dev` it may use fully: its own terminals
    /// and its own shared memory (never the host's, which [`super::super::devices`] replaced).
    const PRIVATE_DEV_DIRS: &[&str] = &["/dev/pts", "/dev/shm"];

    fn ruleset(
        writable: &[PathBuf],
        network: bool,
        private_dev: bool,
    ) -> Result<landlock::RulesetCreated, landlock::RulesetError> {
        let all = AccessFs::from_all(TARGET_ABI);
        let read = AccessFs::from_read(TARGET_ABI);
        let mut ruleset = Ruleset::default()
            .handle_access(all)?
            .scope(Scope::Signal | Scope::AbstractUnixSocket)?;
        if !network {
            // Handled and never granted: no TCP bind or connect at all.
            ruleset = ruleset.handle_access(AccessNet::from_all(TARGET_ABI))?;
        }
        let mut rules = ruleset.create()?;
        if let Ok(fd) = PathFd::new("/") {
            rules = rules.add_rule(PathBeneath::new(fd, read))?;
        }
        // Terminal and device queries (isatty and friends) are not writes.
        if let Ok(fd) = PathFd::new("/dev") {
            rules = rules.add_rule(PathBeneath::new(fd, read | AccessFs::IoctlDev))?;
        }
        let file_write: BitFlags<AccessFs> =
            AccessFs::WriteFile | AccessFs::Truncate | AccessFs::ReadFile;
        for dev in WRITABLE_DEVICES {
            if let Ok(fd) = PathFd::new(dev) {
                rules = rules.add_rule(PathBeneath::new(fd, file_write))?;
            }
        }
        let private: &[&str] = if private_dev { PRIVATE_DEV_DIRS } else { &[] };
        for dir in private {
            if let Ok(fd) = PathFd::new(dir) {
                rules = rules.add_rule(PathBeneath::new(fd, all))?;
            }
        }
        for path in writable {
            if let Ok(fd) = PathFd::new(path) {
                let rights = if path.is_dir() {
                    all
                } else {
                    AccessFs::from_file(TARGET_ABI)
                };
                rules = rules.add_rule(PathBeneath::new(fd, rights))?;
            }
        }
        Ok(rules)
    }

    /// Restricts the calling thread: `writable` and, with `private_dev` (the command's own
    /// minimal `/dev` is in place), its terminals and shared memory.
    pub(in crate::sandbox) fn restrict_current_thread(
        writable: &[PathBuf],
        network: bool,
        private_dev: bool,
    ) -> io::Result<()> {
        let status = ruleset(writable, network, private_dev)
            .and_then(|r| r.restrict_self())
            .map_err(|e| io::Error::other(format!("cannot apply the Landlock sandbox: {e}")))?;
        if status.ruleset == RulesetStatus::NotEnforced {
            return Err(io::Error::other(
                "the Landlock sandbox was not enforced by the kernel",
            ));
        }
        Ok(())
    }

    /// The ruleset for `writable`, `network` and `private_dev`, created but not applied: its
    /// descriptor, for [`restrict_with`] between `fork` and `exec`.
    pub(in crate::sandbox) fn prepare(
        writable: &[PathBuf],
        network: bool,
        private_dev: bool,
    ) -> io::Result<Option<OwnedFd>> {
        ruleset(writable, network, private_dev)
            .map(Option::<OwnedFd>::from)
            .map_err(|e| io::Error::other(format!("cannot build the Landlock sandbox: {e}")))
    }

    /// Restricts the calling thread by a [`prepare`]d ruleset (`no_new_privs` first). System
    /// calls only, no allocation.
    #[allow(unsafe_code)]
    pub(in crate::sandbox) fn restrict_with(ruleset: &OwnedFd) -> io::Result<()> {
        use std::os::fd::AsRawFd;
        rustix::thread::set_no_new_privs(true)?;
        // SAFETY: `landlock_restrict_self(fd, 0)` takes a descriptor and flags; no memory is
        // passed.
        let rc = unsafe { libc::syscall(libc::SYS_landlock_restrict_self, ruleset.as_raw_fd(), 0) };
        if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }

    /// (ABI, enforced, detail).
    pub(in crate::sandbox) fn probe() -> (u32, bool, String) {
        let outcome = std::thread::Builder::new()
            .name("keel-sandbox-probe".into())
            .spawn(|| {
                let tmp = std::env::temp_dir();
                ruleset(&[tmp], false, false).and_then(|r| r.restrict_self())
            })
            .map_err(|e| e.to_string())
            .and_then(|h| {
                h.join()
                    .map_err(|_| "the probe thread panicked".to_string())
            });
        match outcome {
            Ok(Ok(status)) => {
                let abi = match status.landlock {
                    LandlockStatus::Available {
                        effective_abi,
                        kernel_abi,
                    } => kernel_abi
                        .and_then(|k| u32::try_from(k).ok())
                        .unwrap_or(effective_abi as u32),
                    _ => 0,
                };
                let (enforced, detail) = match (&status.ruleset, &status.landlock) {
                    (RulesetStatus::FullyEnforced, _) => (true, "fully enforced".to_string()),
                    (RulesetStatus::PartiallyEnforced, _) => (
                        true,
                        "partially enforced (an older Landlock ABI: some rights are not confined)"
                            .to_string(),
                    ),
                    (RulesetStatus::NotEnforced, LandlockStatus::NotEnabled) => (
                        false,
                        "the kernel has Landlock but it is not enabled (add `landlock` to the \
                         `lsm=` boot parameter)"
                            .to_string(),
                    ),
                    (RulesetStatus::NotEnforced, _) => (
                        false,
                        "the kernel does not support Landlock (Linux 5.13 or newer with \
                         CONFIG_SECURITY_LANDLOCK is needed)"
                            .to_string(),
                    ),
                };
                (if enforced { abi } else { 0 }, enforced, detail)
            }
            Ok(Err(e)) => (0, false, format!("the Landlock probe failed: {e}")),
            Err(e) => (0, false, format!("the Landlock probe could not run: {e}")),
        }
    }
}

#[cfg(not(target_os = "linux"))]
pub(super) fn restrict_current_thread(
    _writable: &[std::path::PathBuf],
    _network: bool,
    _private_dev: bool,
) -> std::io::Result<()> {
    Ok(())
}

#[cfg(not(target_os = "linux"))]
pub(super) fn probe() -> (u32, bool, String) {
    (0, false, "Landlock exists only on Linux".into())
}
