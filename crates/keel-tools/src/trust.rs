//! The user's trust in what a workspace suggests, by content: one store for every decision
//! a repository may not make on its own (a project's `[llm]` settings, its `.mcp.json`
//! servers). A repository is hostile input, so what it ships is only a *suggestion* until the
//! user accepted exactly that content: the store keeps, per workspace and subject (`llm`,
//! `mcp:NAME`), the SHA-256 of what was accepted, the SHA-256 of every workspace file it
//! names, and what the user granted with it (`network`). A changed byte is a new suggestion.
//!
//! The store is `trust.json` in Keel's data directory (`$KEEL_HOME`, else
//! `~/.local/share/keel`), which confined commands cannot see (it is hidden from them) and a
//! project cannot name. A store that would lie inside the workspace it judges, or at a
//! relative path (no `HOME`: the data directory falls back to `./.keel`), trusts nothing:
//! the repository could have written it.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The store's file name in Keel's data directory.
pub const TRUST_FILE: &str = "trust.json";

/// Largest file hashed for a decision (a script or program a server runs).
pub const MAX_HASHED_BYTES: u64 = 64 * 1024 * 1024;

/// Largest store read (a store this big was not written by Keel).
const MAX_STORE_BYTES: u64 = 8 * 1024 * 1024;

/// One accepted suggestion.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Trusted {
    /// SHA-256 (hex) of what was accepted: a server definition, a config section.
    pub sha256: String,
    /// SHA-256 of each workspace file it names, by workspace-relative path.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub files: BTreeMap<String, String>,
    /// What the user granted with it beyond the default (`network`).
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub grants: BTreeSet<String>,
}

/// The user's decisions, per workspace and subject.
#[derive(Debug, Clone)]
pub struct TrustStore {
    /// `None`: the store is unusable (relative data directory) and trusts nothing.
    path: Option<PathBuf>,
    entries: BTreeMap<String, BTreeMap<String, Trusted>>,
}

impl TrustStore {
    /// The store in `data_dir` (missing or unreadable: nothing trusted).
    pub fn load(data_dir: &Path) -> Self {
        if !data_dir.is_absolute() {
            return Self {
                path: None,
                entries: BTreeMap::new(),
            };
        }
        let path = data_dir.join(TRUST_FILE);
        let entries = read_bounded(&path, MAX_STORE_BYTES)
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or_default();
        Self {
            path: Some(path),
            entries,
        }
    }

    /// Where the store lives (`None` when it is unusable).
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// What the user accepted for `subject` in `workspace`, if anything. Nothing is trusted
    /// from a store inside the workspace.
    pub fn get(&self, workspace: &Path, subject: &str) -> Option<&Trusted> {
        if !self.usable_for(workspace) {
            return None;
        }
        self.entries.get(&workspace_key(workspace))?.get(subject)
    }

    /// True when `subject` in `workspace` was accepted with exactly `sha256`.
    pub fn accepts(&self, workspace: &Path, subject: &str, sha256: &str) -> bool {
        self.get(workspace, subject)
            .is_some_and(|t| t.sha256 == sha256)
    }

    /// Records the user's acceptance of `subject` in `workspace`.
    pub fn set(&mut self, workspace: &Path, subject: &str, trusted: Trusted) -> io::Result<()> {
        self.check_writable(workspace)?;
        self.entries
            .entry(workspace_key(workspace))
            .or_default()
            .insert(subject.to_string(), trusted);
        self.save()
    }

    /// Forgets `subject` in `workspace`; true when there was something to forget.
    pub fn remove(&mut self, workspace: &Path, subject: &str) -> io::Result<bool> {
        let key = workspace_key(workspace);
        let removed = self
            .entries
            .get_mut(&key)
            .is_some_and(|m| m.remove(subject).is_some());
        if removed {
            if self.entries.get(&key).is_some_and(BTreeMap::is_empty) {
                self.entries.remove(&key);
            }
            self.save()?;
        }
        Ok(removed)
    }

    fn usable_for(&self, workspace: &Path) -> bool {
        let Some(path) = &self.path else {
            return false;
        };
        let ws = canonical(workspace);
        let dir = path.parent().map(canonical).unwrap_or_default();
        !dir.starts_with(&ws)
    }

    fn check_writable(&self, workspace: &Path) -> io::Result<()> {
        match &self.path {
            None => Err(io::Error::other(
                "Keel's data directory is not an absolute path (set HOME or KEEL_HOME), so no decision can be recorded",
            )),
            Some(p) if !self.usable_for(workspace) => Err(io::Error::other(format!(
                "Keel's data directory ({}) is inside the workspace, where the project could write it; set KEEL_HOME to a directory outside it",
                p.parent().unwrap_or(p).display()
            ))),
            Some(_) => Ok(()),
        }
    }

    fn save(&self) -> io::Result<()> {
        let Some(path) = &self.path else {
            return Err(io::Error::other("the trust store is unusable"));
        };
        let dir = path.parent().unwrap_or(Path::new("/"));
        create_private_dir(dir)?;
        let text = serde_json::to_string_pretty(&self.entries).map_err(io::Error::other)?;
        let mut tmp = tempfile::Builder::new()
            .prefix(".trust-")
            .tempfile_in(dir)?;
        io::Write::write_all(&mut tmp, text.as_bytes())?;
        io::Write::write_all(&mut tmp, b"\n")?;
        tmp.as_file().sync_all()?;
        tmp.persist(path).map_err(|e| e.error)?;
        Ok(())
    }
}

fn create_private_dir(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    match std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
    {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}

fn canonical(p: &Path) -> PathBuf {
    p.canonicalize().unwrap_or_else(|_| p.to_path_buf())
}

fn workspace_key(workspace: &Path) -> String {
    canonical(workspace).display().to_string()
}

/// The extensions of files an interpreter or loader may run as code when a program imports a
/// module by a name or path it builds (`import util`, `require(x)`, `sys.path.insert`): the
/// sources, and what the loaders take in their place — Python bytecode (an "unchecked-hash"
/// `__pycache__/*.pyc` is loaded without looking at the `.py`: red-team pass 5, R5-2) and zip
/// archives on `sys.path`, Java classes and jars, Perl's `.pmc`, PHP's `.phar`/`.inc`, native
/// extensions. One list for every approval bound to code by content: a network-approved MCP
/// server's workspace code, and a session approval's "no code file changed since".
pub const CODE_EXTENSIONS: &[&str] = &[
    // Python: sources, path files, bytecode, zip imports, native extensions.
    "py", "pyw", "pth", "pyc", "pyo", "pyd", "pyz", "zip", "egg", "whl", "so",
    // JavaScript / TypeScript and what `require` loads.
    "js", "mjs", "cjs", "ts", "mts", "cts", "jsx", "tsx", "json", "node", "wasm",
    // Others whose scripts approvals fingerprint.
    "rb", "bundle", "pl", "pm", "pmc", "php", "phar", "inc", "lua", "sh", "bash", "zsh", "r", "R",
    "jl", "tcl", "class", "jar", "dylib",
    // Makefiles make may include under a name known only when it runs (R6-14).
    "mk", "mak",
];

/// Whether a file named `name` may be loaded as code ([`CODE_EXTENSIONS`]).
pub fn loads_as_code(name: &str) -> bool {
    name.rsplit_once('.')
        .is_some_and(|(stem, ext)| !stem.is_empty() && CODE_EXTENSIONS.contains(&ext))
}

/// The first 64 bits of SHA-256 of `bytes`.
pub fn sha256_u64(bytes: &[u8]) -> u64 {
    let digest = Sha256::digest(bytes);
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    u64::from_be_bytes(first)
}

/// SHA-256 of `bytes`, as lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// SHA-256 of the regular file at `path` (a symlink is followed), read without blocking on a
/// FIFO and refusing devices, directories and files over [`MAX_HASHED_BYTES`].
pub fn hash_file(path: &Path) -> io::Result<String> {
    let mut file = open_regular(path)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut total: u64 = 0;
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        total += n as u64;
        if total > MAX_HASHED_BYTES {
            return Err(io::Error::other(format!(
                "{} is larger than {} MiB",
                path.display(),
                MAX_HASHED_BYTES / (1024 * 1024)
            )));
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex(&hasher.finalize()))
}

/// Opens `path` for reading only if it is a regular file: non-blocking (a FIFO cannot hang
/// the open), then checked on the open handle (no check-then-open gap).
fn open_regular(path: &Path) -> io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    // By path on purpose: what is hashed is what the approved command will open by that path
    // (its trust store is Keel's own file); non-blocking, checked regular once open, bounded.
    #[allow(clippy::disallowed_methods)]
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
        .open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(io::Error::other(format!(
            "{} is not a regular file",
            path.display()
        )));
    }
    Ok(file)
}

fn read_bounded(path: &Path, max: u64) -> io::Result<Vec<u8>> {
    let file = open_regular(path)?;
    let mut out = Vec::new();
    file.take(max + 1).read_to_end(&mut out)?;
    if out.len() as u64 > max {
        return Err(io::Error::other(format!("{} is too large", path.display())));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decisions_are_per_workspace_and_content() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let ws = dir.path().join("ws");
        let other = dir.path().join("other");
        for d in [&ws, &other] {
            std::fs::create_dir_all(d).unwrap();
        }
        let mut store = TrustStore::load(&data);
        assert!(!store.accepts(&ws, "llm", "abc"));
        store
            .set(
                &ws,
                "llm",
                Trusted {
                    sha256: "abc".into(),
                    ..Trusted::default()
                },
            )
            .unwrap();
        let store = TrustStore::load(&data);
        assert!(store.accepts(&ws, "llm", "abc"));
        assert!(!store.accepts(&ws, "llm", "abd"), "another content");
        assert!(!store.accepts(&other, "llm", "abc"), "another workspace");
        assert!(!store.accepts(&ws, "mcp:x", "abc"), "another subject");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&data).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700, "the data directory is private");
        let mode = std::fs::metadata(data.join(TRUST_FILE))
            .unwrap()
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(mode & 0o077, 0, "the store is private: {mode:o}");
        let mut store = store;
        assert!(store.remove(&ws, "llm").unwrap());
        assert!(!TrustStore::load(&data).accepts(&ws, "llm", "abc"));
        assert!(!store.remove(&ws, "llm").unwrap());
    }

    #[test]
    fn a_store_inside_the_workspace_or_at_a_relative_path_trusts_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        let data = ws.join(".keel");
        std::fs::create_dir_all(&data).unwrap();
        // What a repository would ship to accept its own suggestion.
        let planted = serde_json::json!({
            ws.canonicalize().unwrap().display().to_string(): {"llm": {"sha256": "abc"}}
        });
        std::fs::write(data.join(TRUST_FILE), planted.to_string()).unwrap();
        let mut store = TrustStore::load(&data);
        assert!(!store.accepts(&ws, "llm", "abc"));
        let e = store
            .set(&ws, "llm", Trusted::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("inside the workspace"), "{e}");
        let store = TrustStore::load(Path::new(".keel"));
        assert!(store.path().is_none());
        assert!(!store.accepts(&ws, "llm", "abc"));
    }

    #[test]
    fn hashing_refuses_what_is_not_a_regular_file() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("f");
        std::fs::write(&f, "hello").unwrap();
        assert_eq!(
            hash_file(&f).unwrap(),
            "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
        );
        assert!(hash_file(dir.path()).is_err(), "a directory");
        assert!(hash_file(Path::new("/dev/zero")).is_err(), "a device");
        let fifo = dir.path().join("fifo");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        let started = std::time::Instant::now();
        assert!(hash_file(&fifo).is_err(), "a FIFO");
        assert!(started.elapsed() < std::time::Duration::from_secs(2));
    }
}
