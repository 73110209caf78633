//! Writing files: the atomic writer every file-changing tool uses (a temp file in the same
//! open directory, fsync, `renameat`) and sets of changes applied all or nothing — from
//! keel-fs, which resolves every path beneath the workspace's open directory handle.

pub use keel_fs::atomic::{FileChange, WriteAllError, atomic_write_all};
pub use keel_fs::beneath::{FileInfo, FileKind, WriteMode};
