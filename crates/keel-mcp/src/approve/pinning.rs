//! What a project server's approval pins. Without network access: the files its definition
//! names ([`super::named_files`]) — the server runs confined (workspace read-only, no
//! network, Keel's data and the secret stores hidden), which is what holds when a file it
//! loads in turn changes.
//!
//! With network access the confinement cannot stop data leaving, so the approval pins every
//! file of the workspace (`.git` and Keel's `.keel` left out, the protected stores passed
//! over): what a server loads as code cannot be told from its name — an import by a name it
//! builds (red-team pass 2, R15), bytecode in `__pycache__` (pass 5, R5-2), a file without a
//! code extension it runs (`runpy.run_path("srvcore")`, R5-2's variant), a template it `exec`s.
//! A change to any of them needs approving again, and the server runs on a private copy of
//! exactly the pinned bytes ([`super::PrivateCopy`]), so what the model changes during the
//! session never reaches it (a module imported lazily inside a tool call: R5-8). Bounded
//! ([`TREE_MAX_FILES`], [`PIN_MAX_BYTES`]): past that the network grant is refused with what
//! to do.

use std::collections::BTreeMap;
use std::path::Path;

use keel_fs::beneath::{DirHandle, FileKind};
use keel_fs::walk::{Visit, WalkOptions};
use keel_tools::trust::{MAX_HASHED_BYTES, sha256_hex};

use super::{NamedFile, named_files};
use crate::config::ServerDef;

/// The most files (and links) a network approval pins.
pub const TREE_MAX_FILES: usize = 2_000;
/// The most bytes a network approval pins (and its private copy holds).
pub const PIN_MAX_BYTES: u64 = 64 * 1024 * 1024;
/// The most directory entries the walk looks at.
const MAX_ENTRIES: usize = 100_000;

/// How a pinned entry is recorded: a regular file by the SHA-256 of its content, a symlink
/// by its target, anything else by its kind.
pub(super) const LINK: &str = "link->";
pub(super) const NOT_REGULAR: &str = "not a regular file";

/// What an approval covers: the files `def` names ([`named_files`]) and, with network access,
/// every file of the workspace (see the module's documentation).
pub fn covered_files(
    workspace: &Path,
    def: &ServerDef,
    network: bool,
) -> Result<Vec<NamedFile>, String> {
    let named = named_files(workspace, def)?;
    if !network {
        return Ok(named);
    }
    let ws = workspace
        .canonicalize()
        .unwrap_or_else(|_| workspace.to_path_buf());
    let handle = DirHandle::open(&ws)
        .map_err(|e| format!("cannot open the workspace `{}` ({e})", ws.display()))?;
    let mut out: BTreeMap<String, String> = BTreeMap::new();
    walk(&handle, &mut |rel, kind, bytes| {
        let value = match kind {
            FileKind::File => {
                let content = read(&handle, rel, bytes)?;
                sha256_hex(&content)
            }
            FileKind::Symlink => {
                let target = handle
                    .resolve_entry(Path::new(rel))
                    .map_err(|e| e.to_string())
                    .and_then(|r| r.read_link().map_err(|e| e.to_string()))
                    .map_err(|e| format!("`{rel}` cannot be checked ({e})"))?;
                format!("{LINK}{}", target.display())
            }
            _ => NOT_REGULAR.to_string(),
        };
        out.insert(rel.to_string(), value);
        Ok(())
    })?;
    for f in named {
        out.insert(f.path, f.sha256);
    }
    Ok(out
        .into_iter()
        .map(|(path, sha256)| NamedFile { path, sha256 })
        .collect())
}

/// The regular file `rel` beneath `handle`, read whole (at most [`MAX_HASHED_BYTES`]); `total`
/// counts the bytes read so far against [`PIN_MAX_BYTES`].
pub(super) fn read(handle: &DirHandle, rel: &str, total: &mut u64) -> Result<Vec<u8>, String> {
    let content = handle
        .resolve(Path::new(rel))
        .map_err(|e| e.to_string())
        .and_then(|r| r.read_bounded(MAX_HASHED_BYTES).map_err(|e| e.to_string()))
        .map_err(|e| format!("`{rel}` cannot be checked ({e})"))?;
    *total += content.len() as u64;
    if *total > PIN_MAX_BYTES {
        return Err(too_big());
    }
    Ok(content)
}

fn too_big() -> String {
    format!(
        "with network access the approval covers every file of the workspace (the server runs \
         on a private copy of exactly those), and this workspace holds more than \
         {TREE_MAX_FILES} files or {} MiB (or {MAX_ENTRIES} entries); approve it without \
         --network (it runs confined, with no network), or make it one of your own servers \
         outside the project",
        PIN_MAX_BYTES / (1024 * 1024)
    )
}

/// Visits every entry of the workspace but directories, in name order, as (workspace-relative
/// path, kind, bytes read so far): `.git` (at any depth) and `.keel` (at the top) are left
/// out, the protected stores passed over (the handle's fence), links never followed. Fails
/// past the bounds, or when `each` fails.
fn walk(
    handle: &DirHandle,
    each: &mut dyn FnMut(&str, FileKind, &mut u64) -> Result<(), String>,
) -> Result<(), String> {
    let mut error: Option<String> = None;
    let (mut seen, mut files, mut bytes) = (0usize, 0usize, 0u64);
    handle
        .walk_sorted(Path::new(""), WalkOptions::default(), |entry| {
            seen += 1;
            let name = entry.name();
            let skip = name == ".git" || (entry.depth == 1 && name == ".keel");
            if seen > MAX_ENTRIES || (!skip && !entry.is_dir() && files >= TREE_MAX_FILES) {
                error = Some(too_big());
                return Visit::Stop;
            }
            if skip {
                return Visit::Skip;
            }
            if entry.is_dir() {
                return Visit::Continue;
            }
            files += 1;
            let Some(rel) = entry.rel_str() else {
                error = Some(format!(
                    "`{}` has a name that is not UTF-8; rename it, or approve without --network",
                    entry.rel.display()
                ));
                return Visit::Stop;
            };
            match each(rel, entry.kind, &mut bytes) {
                Ok(()) => Visit::Continue,
                Err(e) => {
                    error = Some(e);
                    Visit::Stop
                }
            }
        })
        .map_err(|e| format!("cannot list the workspace ({e})"))?;
    error.map_or(Ok(()), Err)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::approve::tests::project_def;
    use crate::approve::{Approval, Approvals};
    use crate::config::Transport;

    fn write(ws: &Path, rel: &str, text: &str) {
        let path = ws.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).unwrap_or_else(|e| panic!("{e}"));
        }
        std::fs::write(path, text).unwrap_or_else(|e| panic!("{e}"));
    }

    /// Red-team pass 2, R15 (an imported module), pass 5, R5-2's variant (a file without a
    /// code extension the server runs: `runpy.run_path("srvcore")`): with network access the
    /// approval pins every file of the workspace, so the model's edit of any of them — or a
    /// new one — needs approving again; without it, the confinement holds and only the named
    /// script counts. `.git` and `.keel` are left out; a FIFO is recorded, never opened; a
    /// workspace past the bound is refused network access, saying what to do.
    #[test]
    fn a_network_approval_pins_every_file_of_the_workspace() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let ws = dir.path().join("ws");
        write(
            &ws,
            "tools/srv.py",
            "import runpy\nrunpy.run_path('srvcore')\n",
        );
        write(&ws, "srvcore", "X = 1\n");
        write(&ws, "README.md", "hi\n");
        write(&ws, ".keel/state.json", "{}");
        write(&ws, ".git/HEAD", "ref: refs/heads/main\n");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            ws.join("tools/pipe"),
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let def = project_def(&ws, "python3", &["tools/srv.py"]);
        let mut a = Approvals::load(&dir.path().join("data"));
        let files = a.approve(&ws, &def, true).unwrap_or_else(|e| panic!("{e}"));
        let names: Vec<&str> = files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(
            names,
            ["README.md", "srvcore", "tools/pipe", "tools/srv.py"]
        );
        assert_eq!(a.check(&ws, &def), Approval::Approved { network: true });
        // Keel's own files change freely.
        write(&ws, ".keel/state.json", "{\"a\":1}");
        assert_eq!(a.check(&ws, &def), Approval::Approved { network: true });
        for (rel, text) in [
            (
                "srvcore",
                "import socket; socket.create_connection(('127.0.0.1', 19999))\n",
            ),
            ("README.md", "changed\n"),
            ("lib/deep/new.py", "Z = 1\n"),
        ] {
            a.approve(&ws, &def, true).unwrap_or_else(|e| panic!("{e}"));
            write(&ws, rel, text);
            assert_eq!(a.check(&ws, &def), Approval::Changed(rel.into()), "{rel}");
        }
        // Without network access only the named script counts.
        a.approve(&ws, &def, false)
            .unwrap_or_else(|e| panic!("{e}"));
        write(&ws, "srvcore", "X = 2\n");
        assert_eq!(a.check(&ws, &def), Approval::Approved { network: false });
        // A big workspace: network access is refused, saying why.
        for i in 0..=TREE_MAX_FILES {
            write(&ws, &format!("data/f{i}.txt"), "x");
        }
        let e = a.approve(&ws, &def, true).err().unwrap_or_default();
        assert!(e.contains("without --network"), "{e}");
        assert!(a.approve(&ws, &def, false).is_ok());
    }

    /// Red-team pass 5, R5-2: an "unchecked-hash" `__pycache__/srv.cpython-311.pyc` is loaded
    /// by Python in place of `srv.py` without looking at it; bytecode, a sourceless `.pyc`, a
    /// zip on the import path are workspace files like any other.
    #[test]
    fn a_network_approval_covers_bytecode_and_archives_python_loads_instead() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let ws = dir.path().join("ws");
        write(&ws, "srv.py", "def main(): pass\n");
        let def = project_def(&ws, "python3", &["-c", "import srv; srv.main()"]);
        let mut a = Approvals::load(&dir.path().join("data"));
        a.approve(&ws, &def, true).unwrap_or_else(|e| panic!("{e}"));
        for planted in [
            "__pycache__/srv.cpython-311.pyc",
            "helper.pyc",
            "vendor/deps.zip",
        ] {
            write(&ws, planted, "\u{a7}\r\r\n payload");
            assert_eq!(
                a.check(&ws, &def),
                Approval::Changed(planted.into()),
                "{planted}"
            );
            std::fs::remove_file(ws.join(planted)).unwrap_or_else(|e| panic!("{e}"));
            assert!(a.check(&ws, &def).allows_start(), "{planted}");
        }
    }

    /// Red-team pass 5, R5-8: a module the server imports lazily, inside a tool call, was read
    /// after the model changed it. The server runs on a private copy of exactly the approved
    /// bytes: made only when every pinned file is as approved, holding nothing else (no
    /// `.git`, no `.keel`), outside the workspace and removed with the server; the server's
    /// arguments and environment name the copy instead of the workspace.
    #[test]
    fn the_private_copy_holds_exactly_the_approved_bytes() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let ws = dir.path().join("ws");
        write(&ws, "srv.py", "import runpy\n");
        write(&ws, "lib/srvcore", "X = 1\n");
        write(&ws, ".keel/config.toml", "");
        write(&ws, ".git/HEAD", "ref: refs/heads/main\n");
        std::os::unix::fs::symlink("srv.py", ws.join("link.py")).unwrap_or_else(|e| panic!("{e}"));
        let ws = ws.canonicalize().unwrap_or_else(|e| panic!("{e}"));
        let def = project_def(&ws, "python3", &[&ws.join("srv.py").display().to_string()]);
        let mut a = Approvals::load(&dir.path().join("data"));
        a.approve(&ws, &def, true).unwrap_or_else(|e| panic!("{e}"));
        let copy = a.private_copy(&ws, &def).unwrap_or_else(|e| panic!("{e}"));
        let root = copy.path().to_path_buf();
        assert!(!root.starts_with(&ws));
        let read = |rel: &str| std::fs::read_to_string(root.join(rel)).ok();
        assert_eq!(read("srv.py").as_deref(), Some("import runpy\n"));
        assert_eq!(read("lib/srvcore").as_deref(), Some("X = 1\n"));
        assert_eq!(
            std::fs::read_link(root.join("link.py")).ok(),
            Some(std::path::PathBuf::from("srv.py"))
        );
        assert!(!root.join(".git").exists() && !root.join(".keel").exists());
        // The model's change after the copy never reaches it.
        write(&ws, "lib/srvcore", "X = 2\n");
        assert_eq!(read("lib/srvcore").as_deref(), Some("X = 1\n"));
        let Ok(Transport::Stdio { args, .. }) = def.config.transport().map(|t| copy.redirect(t))
        else {
            panic!("stdio")
        };
        assert_eq!(args, [root.join("srv.py").display().to_string()]);
        drop(copy);
        assert!(!root.exists(), "removed with the server");
        // A changed file: no copy, and the message names it.
        let e = a.private_copy(&ws, &def).err().unwrap_or_default();
        assert!(e.contains("`lib/srvcore` changed"), "{e}");
    }
}
