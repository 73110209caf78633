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

use keel_fs::beneath::DirHandle;
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

    /// Writes a new file `rel` (plain relative name) into the copy with `mode`. The copy is
    /// Keel's own fresh 0700 directory and holds no link yet (links are made last), so the
    /// path leads nowhere else; `O_EXCL` never follows a final link. No `fsync`: the copy
    /// lives as long as the server.
    fn write(&self, rel: &str, content: &[u8], mode: u32) -> std::io::Result<()> {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let at = self.root.join(rel);
        if let Some(parent) = at.parent() {
            self.mkdir(parent)?;
        }
        // Keel's own private directory, not a project file (see above).
        #[allow(clippy::disallowed_methods)]
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&at)?;
        file.write_all(content)
    }

    /// Creates `dir` (inside the copy) and its missing parents, 0700.
    fn mkdir(&self, dir: &Path) -> std::io::Result<()> {
        let mut builder = std::fs::DirBuilder::new();
        builder.recursive(true);
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        builder.create(dir)
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
        let changed = |rel: &str| {
            format!(
                "`{rel}` changed since `{}` was approved; review it, then approve it again with `keel mcp add {}`",
                def.name, def.name
            )
        };
        let mut total = 0u64;
        let mut links: Vec<(&str, &str)> = Vec::new();
        for (rel, want) in &trusted.files {
            // Only plain relative names: nothing is written outside the copy.
            let plain = !rel.is_empty()
                && Path::new(rel)
                    .components()
                    .all(|c| matches!(c, Component::Normal(_)));
            if !plain || want == NOT_REGULAR {
                continue;
            }
            if let Some(link) = want.strip_prefix(LINK) {
                let now = handle
                    .resolve_entry(Path::new(rel))
                    .ok()
                    .and_then(|r| r.read_link().ok());
                if now.as_deref() != Some(Path::new(link)) {
                    return Err(changed(rel));
                }
                links.push((rel, link));
                continue;
            }
            // A named file that is a link into the workspace is recorded `HASH->TARGET`.
            let hash = want.split("->").next().unwrap_or(want);
            let found = handle.resolve(Path::new(rel)).map_err(|_| changed(rel))?;
            let content = read(&handle, rel, &mut total).map_err(|_| changed(rel))?;
            if sha256_hex(&content) != hash {
                return Err(changed(rel));
            }
            let exec = found
                .info()
                .ok()
                .flatten()
                .is_some_and(|i| i.mode & 0o100 != 0);
            copy.write(rel, &content, if exec { 0o700 } else { 0o600 })
                .map_err(|e| format!("cannot copy `{rel}` ({e})"))?;
        }
        // Links last: no file above was written through one.
        for (rel, link) in links {
            let at = copy.root.join(rel);
            if let Some(parent) = at.parent() {
                copy.mkdir(parent)
                    .map_err(|e| format!("cannot copy `{rel}` ({e})"))?;
            }
            if at.symlink_metadata().is_err() {
                std::os::unix::fs::symlink(link, &at)
                    .map_err(|e| format!("cannot copy `{rel}` ({e})"))?;
            }
        }
        Ok(copy)
    }
}
