//! One workspace handle for a whole session (issue 33). A one-turn `keel run` used to open
//! its workspace 12 times — the tools' workspace, the attached files, rules, the rules hook,
//! the constitution, skills, `.mcp.json`, the prompt, the index's ignore rules, walker and
//! state directory — and each open listed the ~190 protected stores and looked at every one
//! of them again to build the same [`super::Fence`]: ~0.75M instructions and ~190 `statx`
//! per open, most of what `keel run` did before its first request.
//!
//! A front end that knows its session's workspace opens it once and shares it
//! ([`super::DirHandle::share`]); while the returned [`Shared`] guard lives,
//! [`super::DirHandle::open`] of that same directory returns a clone of the shared handle —
//! the same open descriptor and the same fence — instead of opening and fencing anew.
//!
//! Every handle still refuses every protected store: the fence is the one the tools' own
//! workspace handle always used for the whole session (computed when it was opened). A shared
//! handle is given out only while nothing its fence was built from has changed:
//! - the directory at that path is still the one that was opened (device and inode), so a
//!   workspace renamed away and replaced is opened afresh; a path spelled exactly as the
//!   shared handle's canonical path is compared so before it is canonicalised, any other
//!   spelling after;
//! - the environment variables the store list is built from
//!   ([`crate::stores::environment_fingerprint`]) are the same;
//! - a path registered as Keel's own since ([`crate::stores::register_keel_path`]: the
//!   session database, named by the configuration read through the shared handle) is added to
//!   the shared handle's fence at the next open — its link targets and identity looked at
//!   then, as a fresh open would — before the handle is given out.
//!
//! `keel run` shares its workspace before it reads the configuration (right after the
//! commands an earlier Keel could not check are checked, keel-tools' `shell::pending`, so the
//! fence is built from where the stores really are): the stores are looked at once per run,
//! not once for the configuration and again for the session.

use std::os::fd::AsFd;
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use super::DirHandle;

/// One shared handle.
struct Entry {
    token: u64,
    /// Device and inode of the directory when it was shared.
    id: (u64, u64),
    /// [`crate::stores::environment_fingerprint`] when it was shared.
    env: u64,
    /// [`crate::stores::registered_count`] its fence covers.
    registered: usize,
    handle: DirHandle,
}

/// The handles shared in this process (a front end shares one; a server none).
static SHARED: Mutex<Vec<Entry>> = Mutex::new(Vec::new());
static NEXT: AtomicU64 = AtomicU64::new(1);

/// While alive, opening the shared directory again yields the shared handle
/// ([`DirHandle::share`]). Dropping it ends the sharing; handles already given out stay open.
#[derive(Debug)]
#[must_use = "the handle is shared only while the guard lives"]
pub struct Shared {
    token: u64,
}

impl Drop for Shared {
    fn drop(&mut self) {
        let mut list = SHARED.lock().unwrap_or_else(|e| e.into_inner());
        list.retain(|e| e.token != self.token);
    }
}

pub(super) fn share(handle: &DirHandle) -> Shared {
    let token = NEXT.fetch_add(1, Ordering::Relaxed);
    // A handle that cannot be identified is simply not shared.
    if let Ok(st) = rustix::fs::fstat(handle.fd.as_fd()) {
        let mut list = SHARED.lock().unwrap_or_else(|e| e.into_inner());
        // The fence was built from the stores registered by now (or fewer: opened earlier).
        // A handle shared later than it was opened may miss some: added at the next `find`.
        list.push(Entry {
            token,
            id: (st.st_dev, st.st_ino),
            env: crate::stores::environment_fingerprint(),
            registered: handle.registered,
            handle: handle.clone(),
        });
    }
    Shared { token }
}

/// The shared handle of the directory at `canonical` (a shared handle's canonical path, or
/// the same spelling of it), when one is shared and still good.
pub(super) fn find(canonical: &Path) -> Option<DirHandle> {
    let handle = {
        let mut list = SHARED.lock().unwrap_or_else(|e| e.into_inner());
        if list.is_empty() {
            return None;
        }
        let env = crate::stores::environment_fingerprint();
        let entry = list
            .iter_mut()
            .rev()
            .find(|e| e.handle.path == canonical && e.env == env)?;
        if entry.registered != crate::stores::registered_count() {
            let (more, now) = crate::stores::registered_since(entry.registered);
            if now < entry.registered || now == usize::MAX {
                return None;
            }
            let h = &entry.handle;
            let fence = h.fence.and_stores(&h.path, &h.fd, more);
            entry.handle = DirHandle {
                fd: h.fd.clone(),
                path: h.path.clone(),
                fence: std::sync::Arc::new(fence),
                registered: now,
            };
            entry.registered = now;
        }
        (entry.id, entry.handle.clone())
    };
    let (id, handle) = handle;
    let st = rustix::fs::stat(canonical).ok()?;
    ((st.st_dev, st.st_ino) == id).then_some(handle)
}
