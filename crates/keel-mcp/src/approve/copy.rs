//! The private copy a network-granted project server runs on (red-team pass 5, R5-2 and
//! R5-8). Checking the workspace's files and then starting the server on them leaves a gap:
//! the interpreter reads them afterwards — at start, and again whenever the server imports a
//! module lazily inside a tool call, by which time the model may have changed it. So the
//! server never reads the live workspace: at start Keel copies exactly the files the user
//! approved, from the very bytes it checks against the approval, into a fresh directory
//! outside the workspace (0700, in Keel's temp directory — commands cannot write there, the
//! sandbox lets them write only the workspace and their own temp directory), and the server
//! runs there: its working directory, and every argument and environment value that named
//! the workspace, now name the copy. A file the approval does not cover is simply not there.

use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use keel_fs::beneath::{DirHandle, WriteMode};
use keel_tools::trust::sha256_hex;

use super::pinning::{LINK, NOT_REGULAR, read};
use super::{Approvals, definition_hash, subject};
use crate::config::{ServerDef, Transport};

/// A private copy of a workspace's approved files; removed when dropped.
#[derive(Debug)]
pub struct PrivateCopy {
    root: PathBuf,
    workspace: PathBuf,
}

impl Drop for PrivateCopy {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

impl PrivateCopy {
    /// Where the copy is (it stands for the workspace).
    pub fn path(&self) -> &Path {
        &self.root
    }

    /// `transport` with every mention of the workspace (as a path prefix) in its command,
    /// arguments and environment values pointing at the copy instead.
    pub fn redirect(&self, transport: Transport) -> Transport {
        let ws = self.workspace.to_string_lossy().into_owned();
        let copy = self.root.to_string_lossy().into_owned();
        let swap = |v: String| -> String {
            if v == ws {
                return copy.clone();
            }
            v.replace(&format!("{ws}/"), &format!("{copy}/"))
        };
        match transport {
            Transport::Stdio { command, args, env } => Transport::Stdio {
                command: swap(command),
                args: args.into_iter().map(swap).collect(),
                env: env.into_iter().map(|(k, v)| (k, swap(v))).collect(),
            },
            other => other,
        }
    }

    /// A fresh, empty directory 0700 in the temp directory, outside `workspace`.
    fn create(workspace: &Path) -> Result<Self, String> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let base = std::env::temp_dir();
        let base = base.canonicalize().unwrap_or(base);
        if base.starts_with(workspace) {
            return Err(format!(
                "the temp directory `{}` lies inside the workspace, where commands could change the server's copy; set TMPDIR elsewhere",
                base.display()
            ));
        }
        for _ in 0..16 {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.subsec_nanos())
                .unwrap_or(0);
            let root = base.join(format!(
                "keel-mcp-{}-{}-{nanos:x}",
                std::process::id(),
                COUNTER.fetch_add(1, Ordering::Relaxed)
            ));
            let mut builder = std::fs::DirBuilder::new();
            std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
            match builder.create(&root) {
                Ok(()) => {
                    return Ok(Self {
                        root,
                        workspace: workspace.to_path_buf(),
                    });
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => {
                    return Err(format!(
                        "cannot make a private copy in `{}` ({e})",
                        base.display()
                    ));
                }
            }
        }
        Err("cannot make a private copy: no free name".into())
    }
}

impl Approvals {
    /// A private copy of the workspace files `def`'s approval pinned, each copied from the
    /// bytes checked against the approval: fails (naming the file) when one is missing or
    /// changed, or when the definition changed.
    pub fn private_copy(&self, workspace: &Path, def: &ServerDef) -> Result<PrivateCopy, String> {
        let Some(trusted) = self.store.get(workspace, &subject(&def.name)) else {
            return Err(format!("`{}` is not approved", def.name));
        };
        if trusted.sha256 != definition_hash(def) {
            return Err(format!(
                "the definition of `{}` changed since it was approved",
                def.name
            ));
        }
        let ws = workspace
            .canonicalize()
            .map_err(|e| format!("cannot open the workspace ({e})"))?;
        let handle = DirHandle::open(&ws)
            .map_err(|e| format!("cannot open the workspace `{}` ({e})", ws.display()))?;
        let copy = PrivateCopy::create(&ws)?;
        let dest = DirHandle::open(copy.path())
            .map_err(|e| format!("cannot open the private copy ({e})"))?;
        let changed = |rel: &str| {
            format!(
                "`{rel}` changed since `{}` was approved; review it, then approve it again with `keel mcp add {}`",
                def.name, def.name
            )
        };
        let mut total = 0u64;
        for (rel, want) in &trusted.files {
            // Only plain relative names: nothing is written outside the copy.
            let plain = !rel.is_empty()
                && Path::new(rel)
                    .components()
                    .all(|c| matches!(c, Component::Normal(_)));
            if !plain || want == NOT_REGULAR {
                continue;
            }
            let target = dest
                .resolve_entry(Path::new(rel))
                .map_err(|e| format!("cannot copy `{rel}` ({e})"))?;
            if let Some(link) = want.strip_prefix(LINK) {
                let now = handle
                    .resolve_entry(Path::new(rel))
                    .ok()
                    .and_then(|r| r.read_link().ok());
                if now.as_deref() != Some(Path::new(link)) {
                    return Err(changed(rel));
                }
                target
                    .symlink(Path::new(link))
                    .map_err(|e| format!("cannot copy `{rel}` ({e})"))?;
                continue;
            }
            // A named file that is a link into the workspace is recorded `HASH->TARGET`.
            let hash = want.split("->").next().unwrap_or(want);
            let content = read(&handle, rel, &mut total).map_err(|_| changed(rel))?;
            if sha256_hex(&content) != hash {
                return Err(changed(rel));
            }
            let mode = handle
                .resolve(Path::new(rel))
                .ok()
                .and_then(|r| r.info().ok().flatten())
                .map_or(0o600, |i| if i.mode & 0o100 != 0 { 0o700 } else { 0o600 });
            target
                .write_atomic(&content, WriteMode::CreateNew, Some(mode))
                .map_err(|e| format!("cannot copy `{rel}` ({e})"))?;
        }
        Ok(copy)
    }
}
