//! Keel's own process stays out of reach of its commands.
//!
//! Landlock on current kernels does not stop a sandboxed process from reading
//! `/proc/<pid>/environ` of its (unsandboxed) parent. So Keel marks itself non-dumpable
//! (`PR_SET_DUMPABLE = 0`): the kernel then lets only holders of `CAP_SYS_PTRACE` read its
//! `/proc` memory files (`environ`, `mem`, `maps`…) — and a confined command never holds it,
//! because the spawning thread drops it (with the other capabilities that reach outside the
//! sandbox) from its bounding, effective, permitted and inheritable sets before spawning. That
//! matters when Keel runs as root; for other users those capabilities are absent anyway.

#[cfg(target_os = "linux")]
mod imp {
    use std::io;
    use std::sync::Once;

    use rustix::process::{DumpableBehavior, set_dumpable_behavior};
    use rustix::thread::{
        CapabilitySet, CapabilitySets, capabilities, remove_capability_from_bounding_set,
        set_capabilities,
    };

    static HIDDEN: Once = Once::new();

    /// Capabilities a confined command never gets: they read other processes (ptrace), bypass
    /// path checks (open_by_handle_at), act on the kernel, the network, devices and other
    /// processes, or leave something behind that outlives the command with root's powers
    /// (immutable files, file capabilities). What root keeps (file ownership and permission
    /// overrides, setuid) acts only through the file system Landlock confines.
    const DROPPED: &[CapabilitySet] = &[
        CapabilitySet::SYS_PTRACE,
        CapabilitySet::DAC_READ_SEARCH,
        CapabilitySet::SYS_ADMIN,
        CapabilitySet::SYS_MODULE,
        CapabilitySet::SYS_RAWIO,
        CapabilitySet::NET_ADMIN,
        CapabilitySet::NET_RAW,
        CapabilitySet::BPF,
        CapabilitySet::PERFMON,
        CapabilitySet::SYS_BOOT,
        CapabilitySet::SYS_TIME,
        CapabilitySet::MAC_ADMIN,
        CapabilitySet::MAC_OVERRIDE,
        // Device nodes (a disk or a terminal reached through the workspace).
        CapabilitySet::MKNOD,
        // chattr +i / +a on any file.
        CapabilitySet::LINUX_IMMUTABLE,
        // Priorities, limits, memory locks and IPC objects of other processes.
        CapabilitySet::SYS_NICE,
        CapabilitySet::SYS_RESOURCE,
        CapabilitySet::IPC_LOCK,
        CapabilitySet::IPC_OWNER,
        CapabilitySet::KILL,
        CapabilitySet::CHECKPOINT_RESTORE,
        // File capabilities planted on a program someone runs later.
        CapabilitySet::SETFCAP,
        // The kernel log, terminals, accounting, audit and power.
        CapabilitySet::SYSLOG,
        CapabilitySet::SYS_TTY_CONFIG,
        CapabilitySet::SYS_PACCT,
        CapabilitySet::AUDIT_CONTROL,
        CapabilitySet::AUDIT_READ,
        CapabilitySet::AUDIT_WRITE,
        CapabilitySet::WAKE_ALARM,
        CapabilitySet::BLOCK_SUSPEND,
    ];

    /// Marks Keel's process non-dumpable, once.
    pub(in crate::sandbox) fn hide_keel_process() {
        HIDDEN.call_once(|| {
            // Failing only weakens /proc protection; the doctor's probe reports it.
            let _ = set_dumpable_behavior(DumpableBehavior::NotDumpable);
        });
    }

    /// The capabilities a confined command keeps, computed beforehand so that applying them
    /// ([`apply_drop`]) makes system calls only (it runs between `fork` and `exec`).
    #[derive(Debug)]
    pub(in crate::sandbox) struct Dropped(Option<CapabilitySets>);

    /// What [`drop_capabilities`] would leave of the calling thread's capabilities.
    pub(in crate::sandbox) fn prepare_drop() -> io::Result<Dropped> {
        let sets = capabilities(None)
            .map_err(|e| io::Error::other(format!("cannot read the capabilities: {e}")))?;
        let mut mask = CapabilitySet::empty();
        for set in DROPPED {
            mask |= *set;
        }
        if !(sets.permitted | sets.inheritable | sets.effective).intersects(mask) {
            return Ok(Dropped(None));
        }
        Ok(Dropped(Some(CapabilitySets {
            effective: sets.effective - mask,
            permitted: sets.permitted - mask,
            inheritable: sets.inheritable - mask,
        })))
    }

    /// Applies a [`Dropped`]: [`DROPPED`] leaves the bounding set (so a root `exec` cannot
    /// regain them) and the thread's sets. System calls only, no allocation.
    pub(in crate::sandbox) fn apply_drop(dropped: &Dropped) -> io::Result<()> {
        let Some(sets) = dropped.0 else {
            return Ok(());
        };
        for cap in DROPPED {
            // Needs CAP_SETPCAP: without it the set cannot hold these for a root exec anyway
            // (checked below through the permitted set).
            let _ = remove_capability_from_bounding_set(*cap);
        }
        set_capabilities(None, sets).map_err(io::Error::from)
    }

    /// Drops [`DROPPED`] from the calling thread, so a child it spawns cannot regain them.
    pub(in crate::sandbox) fn drop_capabilities() -> io::Result<()> {
        apply_drop(&prepare_drop()?)
            .map_err(|e| io::Error::other(format!("cannot drop capabilities: {e}")))
    }

    /// True when the process is non-dumpable (so `/proc/<keel>/environ` is protected).
    pub(in crate::sandbox) fn keel_hidden() -> bool {
        hide_keel_process();
        rustix::process::dumpable_behavior().is_ok_and(|d| d == DumpableBehavior::NotDumpable)
    }
}

#[cfg(target_os = "linux")]
pub(super) use imp::{
    Dropped, apply_drop, drop_capabilities, hide_keel_process, keel_hidden, prepare_drop,
};

#[cfg(not(target_os = "linux"))]
pub(super) fn hide_keel_process() {}

#[cfg(not(target_os = "linux"))]
pub(super) fn drop_capabilities() -> std::io::Result<()> {
    Ok(())
}

#[cfg(not(target_os = "linux"))]
pub(super) fn keel_hidden() -> bool {
    false
}
