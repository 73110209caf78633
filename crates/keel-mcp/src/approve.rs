//! Approval of project-defined servers. A project's `.mcp.json` is hostile input (anyone who
//! wrote the repository wrote it), so its servers start only after the user approved that
//! exact definition *and* the workspace files it names: `keel mcp add NAME` records, in Keel's
//! trust store ([`keel_tools::trust`], subject `mcp:NAME`), a SHA-256 of the definition and
//! of every workspace file its command, arguments or environment values name (the script
//! `python3 tools/mcp_server.py` runs, a program found on a `PATH` the definition points into
//! the workspace), and whether the user granted it network access. A changed definition or a
//! changed file needs approving again, and says which changed.
//!
//! Without network access, files the named ones load in turn (imports, `node_modules`) and
//! directories are not covered: a project's server runs confined (workspace read-only, no
//! network, Keel's data and the secret stores hidden), which is what holds when such a file
//! changes. With network access the confinement cannot stop data leaving, so the approval
//! also covers every file beside each named script and under each workspace directory the
//! definition names, and every code file anywhere else in the workspace — a script may import
//! through a path it builds itself (`sys.path.insert`, `importlib` with a computed name,
//! `require(name)`), which no reading of the named files can follow ([`covered_files`]); a
//! change there needs approving again.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use keel_tools::trust::{TrustStore, Trusted, hash_file, sha256_hex};

use crate::config::ServerDef;

mod copy;
mod pinning;

pub use copy::PrivateCopy;
pub use pinning::{PIN_MAX_BYTES, TREE_MAX_FILES, covered_files};

/// The grant that lets an approved project server reach the network.
pub const NETWORK_GRANT: &str = "network";

/// A workspace file a definition names, with its content hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamedFile {
    /// Workspace-relative path.
    pub path: String,
    /// SHA-256 of its content.
    pub sha256: String,
}

/// Where a definition stands with the user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Approval {
    /// May start: the user's own server, or a project server approved as it stands.
    Approved {
        /// Network access granted (always for the user's own servers).
        network: bool,
    },
    /// A project server the user never approved (or withdrew approval of).
    NotApproved,
    /// Approved once, but the definition or a file it names changed since: the text says
    /// what changed.
    Changed(String),
    /// The definition names something Keel cannot check (a FIFO, a device, an unreadable or
    /// oversized file): it cannot be approved as it stands.
    Unverifiable(String),
}

impl Approval {
    /// True when the server may start.
    pub fn allows_start(&self) -> bool {
        matches!(self, Approval::Approved { .. })
    }

    /// One line for `keel mcp list`, `keel doctor` and start-up warnings.
    pub fn describe(&self, name: &str) -> String {
        match self {
            Approval::Approved { network: true } => "approved (network granted)".into(),
            Approval::Approved { network: false } => "approved".into(),
            Approval::NotApproved => {
                format!("not approved (review it, then run `keel mcp add {name}`)")
            }
            Approval::Changed(what) => format!(
                "CHANGED since you approved it: {what}; review it, then approve it again with `keel mcp add {name}`"
            ),
            Approval::Unverifiable(why) => format!("cannot be approved: {why}"),
        }
    }
}

/// The approvals of project servers, in the user's trust store.
#[derive(Debug, Clone)]
pub struct Approvals {
    store: TrustStore,
}

fn subject(name: &str) -> String {
    format!("mcp:{name}")
}

impl Approvals {
    /// The trust store in `data_dir` (missing or unreadable: nothing approved).
    pub fn load(data_dir: &Path) -> Self {
        Self {
            store: TrustStore::load(data_dir),
        }
    }

    /// Where `def` (from the project at `workspace`) stands now: its definition and named
    /// files hashed again and compared with what the user approved.
    pub fn check(&self, workspace: &Path, def: &ServerDef) -> Approval {
        if !def.origin.is_project() {
            return Approval::Approved { network: true };
        }
        let Some(trusted) = self.store.get(workspace, &subject(&def.name)) else {
            return Approval::NotApproved;
        };
        if trusted.sha256 != definition_hash(def) {
            return Approval::Changed(format!("its definition in {}", def.origin.path().display()));
        }
        let network = trusted.grants.contains(NETWORK_GRANT);
        let files = match covered_files(workspace, def, network) {
            Ok(f) => f,
            Err(e) => return Approval::Unverifiable(e),
        };
        let now: BTreeMap<&str, &str> = files
            .iter()
            .map(|f| (f.path.as_str(), f.sha256.as_str()))
            .collect();
        let then: BTreeMap<&str, &str> = trusted
            .files
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        if now != then {
            let mut changed: Vec<&str> = now
                .keys()
                .chain(then.keys())
                .filter(|k| now.get(*k) != then.get(*k))
                .copied()
                .collect::<BTreeSet<&str>>()
                .into_iter()
                .collect();
            changed.truncate(5);
            return Approval::Changed(changed.join(", "));
        }
        Approval::Approved { network }
    }

    /// Whether `def` (from the project at `workspace`) may start as it stands now.
    pub fn is_approved(&self, workspace: &Path, def: &ServerDef) -> bool {
        self.check(workspace, def).allows_start()
    }

    /// Records approval of `def` and the files it names as they stand now, with network
    /// access when `network`; returns the files covered.
    pub fn approve(
        &mut self,
        workspace: &Path,
        def: &ServerDef,
        network: bool,
    ) -> Result<Vec<NamedFile>, String> {
        let files = covered_files(workspace, def, network)?;
        self.approve_as_shown(workspace, def, network, &files)?;
        Ok(files)
    }

    /// Records approval of `def` with exactly `files` — the ones the user was shown (from
    /// [`covered_files`]) — so a file that changed between showing and answering is not
    /// approved in its new form: the next start finds it changed (red-team R4-14).
    pub fn approve_as_shown(
        &mut self,
        workspace: &Path,
        def: &ServerDef,
        network: bool,
        files: &[NamedFile],
    ) -> Result<(), String> {
        let trusted = Trusted {
            sha256: definition_hash(def),
            files: files
                .iter()
                .map(|f| (f.path.clone(), f.sha256.clone()))
                .collect(),
            grants: if network {
                BTreeSet::from([NETWORK_GRANT.to_string()])
            } else {
                BTreeSet::new()
            },
        };
        self.store
            .set(workspace, &subject(&def.name), trusted)
            .map_err(|e| format!("cannot record the approval: {e}"))
    }

    /// Forgets an approval; true when there was one.
    pub fn revoke(&mut self, workspace: &Path, name: &str) -> std::io::Result<bool> {
        self.store.remove(workspace, &subject(name))
    }
}

/// The command, arguments and environment values of a definition.
fn definition_words(def: &ServerDef) -> Vec<&str> {
    let c = &def.config;
    let mut words: Vec<&str> = Vec::new();
    words.extend(c.command.as_deref());
    words.extend(c.args.iter().map(String::as_str));
    words.extend(c.env.values().map(String::as_str));
    words
}

/// A short code for what approving `def` with `files` (and `network`) records: shown with the
/// details, typed back to approve exactly them (`/mcp add NAME --confirm CODE` in `keel chat`).
pub fn approval_code(def: &ServerDef, network: bool, files: &[NamedFile]) -> String {
    let mut text = format!("{}\n{}\n{network}\n", def.name, definition_hash(def));
    for f in files {
        text.push_str(&format!("{}\0{}\n", f.path, f.sha256));
    }
    sha256_hex(text.as_bytes()).chars().take(10).collect()
}

/// SHA-256 of the definition's canonical JSON (keys sorted by the config's own maps).
pub fn definition_hash(def: &ServerDef) -> String {
    let json = serde_json::to_string(&def.config).unwrap_or_default();
    sha256_hex(json.as_bytes())
}

/// Every workspace file `def` names, hashed: its command (also as found on the `PATH` the
/// server gets, when that leads into the workspace), each argument and each environment
/// value, whole and split at `=`, `:` and whitespace (`--config=x.json`,
/// `PYTHONPATH=./lib:./src`, `NODE_OPTIONS=--require ./hook.js`). A name is a workspace file
/// when, relative to the workspace or absolute, it is inside the workspace or resolves
/// (through symlinks) to a file inside it. A directory stands for its entry points
/// ([`entry_points`]). A named FIFO, device or unreadable file is an error: Keel cannot vouch
/// for it.
pub fn named_files(workspace: &Path, def: &ServerDef) -> Result<Vec<NamedFile>, String> {
    let ws = workspace
        .canonicalize()
        .unwrap_or_else(|_| workspace.to_path_buf());
    let c = &def.config;
    let words = definition_words(def);
    let mut candidates: BTreeSet<PathBuf> = BTreeSet::new();
    for word in words {
        for piece in pieces(word) {
            let p = Path::new(piece);
            candidates.insert(if p.is_absolute() {
                p.to_path_buf()
            } else {
                ws.join(p)
            });
        }
    }
    // `python -m pkg.mod` runs the workspace's `pkg/mod.py` (or its package's `__init__.py` /
    // `__main__.py`) first: the server's directory is the workspace, first on `sys.path`.
    for module in python_modules(&c.args) {
        let mut dir = ws.clone();
        let parts: Vec<&str> = module.split('.').filter(|p| !p.is_empty()).collect();
        for (i, part) in parts.iter().enumerate() {
            if i + 1 == parts.len() {
                candidates.insert(dir.join(format!("{part}.py")));
                candidates.insert(dir.join(part).join("__main__.py"));
            }
            dir.push(part);
            candidates.insert(dir.join("__init__.py"));
        }
    }
    // A bare command is looked up on the PATH the server gets: the definition's own, else
    // Keel's. A relative PATH entry is relative to the workspace (the server's directory).
    if let Some(command) = c.command.as_deref().filter(|c| !c.contains('/')) {
        let path = c
            .env
            .get("PATH")
            .cloned()
            .or_else(|| std::env::var("PATH").ok())
            .unwrap_or_default();
        for dir in path.split(':').filter(|d| !d.is_empty()) {
            let dir = Path::new(dir);
            let dir = if dir.is_absolute() {
                dir.to_path_buf()
            } else {
                ws.join(dir)
            };
            let candidate = dir.join(command);
            if candidate.is_file() {
                candidates.insert(candidate);
                break;
            }
        }
    }
    // A directory runs its entry points (`python3 tools` runs `tools/__main__.py`, `node
    // dir` its package.json `main` or `index.js`): those count as named (red-team pass 8,
    // R8-18: `python3 tools` was approved with no file covered).
    let dirs: Vec<PathBuf> = candidates
        .iter()
        .filter(|p| {
            p.is_dir() && (p.starts_with(&ws) || p.canonicalize().is_ok_and(|r| r.starts_with(&ws)))
        })
        .cloned()
        .collect();
    for dir in dirs {
        candidates.extend(entry_points(&ws, &dir));
    }
    let mut out: BTreeMap<String, String> = BTreeMap::new();
    for path in candidates {
        let Ok(meta) = path.symlink_metadata() else {
            continue;
        };
        let resolved = path.canonicalize().ok();
        let inside = path.starts_with(&ws) || resolved.as_ref().is_some_and(|r| r.starts_with(&ws));
        if !inside {
            continue;
        }
        let target_meta = std::fs::metadata(&path).ok();
        if target_meta.as_ref().is_some_and(std::fs::Metadata::is_dir) {
            continue;
        }
        let rel = path
            .strip_prefix(&ws)
            .map(|r| r.display().to_string())
            .unwrap_or_else(|_| path.display().to_string());
        if meta.file_type().is_symlink() && target_meta.is_none() {
            return Err(format!(
                "it names `{rel}`, a symlink to nothing Keel can read"
            ));
        }
        let hash = hash_file(&path).map_err(|e| {
            format!("it names `{rel}`, which Keel cannot check ({e}); only regular files can be approved")
        })?;
        // A symlink's target is part of what runs.
        let target = resolved
            .filter(|r| *r != path)
            .map(|r| format!("->{}", r.display()))
            .unwrap_or_default();
        out.insert(rel, format!("{hash}{target}"));
    }
    Ok(out
        .into_iter()
        .map(|(path, sha256)| NamedFile { path, sha256 })
        .collect())
}

/// The files an interpreter runs when given the directory `dir`: Python's `__main__.py` and
/// `__init__.py`, Node's and Deno's entry files, and what `package.json` names as `main`,
/// `module` or `bin`.
fn entry_points(ws: &Path, dir: &Path) -> Vec<PathBuf> {
    const ENTRIES: &[&str] = &[
        "__main__.py",
        "__init__.py",
        "main.py",
        "pyproject.toml",
        "package.json",
        "index.js",
        "index.mjs",
        "index.cjs",
        "index.ts",
        "main.js",
        "main.ts",
        "mod.ts",
        "deno.json",
        "deno.jsonc",
    ];
    let mut out: Vec<PathBuf> = ENTRIES.iter().map(|e| dir.join(e)).collect();
    // Read beneath the workspace like any project file (no link out, no FIFO, bounded).
    let text = dir.strip_prefix(ws).ok().and_then(|rel| {
        keel_tools::project::ProjectDir::open(ws)
            .ok()?
            .read(
                rel.join("package.json").to_str()?,
                keel_tools::project::CONFIG_LIMIT,
            )
            .ok()
            .flatten()
    });
    if let Some(json) = text.and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok()) {
        let mut named: Vec<&str> = Vec::new();
        for key in ["main", "module"] {
            named.extend(json.get(key).and_then(serde_json::Value::as_str));
        }
        match json.get("bin") {
            Some(serde_json::Value::String(b)) => named.push(b),
            Some(serde_json::Value::Object(m)) => {
                named.extend(m.values().filter_map(serde_json::Value::as_str).take(16));
            }
            _ => {}
        }
        out.extend(
            named
                .into_iter()
                .filter(|n| !n.is_empty() && !Path::new(n).is_absolute())
                .map(|n| dir.join(n)),
        );
    }
    out
}

/// The modules `-m MODULE` / `-mMODULE` name among a Python command's arguments (before the
/// module's own arguments).
fn python_modules(args: &[String]) -> Vec<&str> {
    let mut out = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "-m" {
            if let Some(m) = it.next() {
                out.push(m.as_str());
            }
            break;
        }
        if let Some(m) = a
            .strip_prefix("-m")
            .filter(|m| !m.is_empty() && !a.starts_with("--"))
        {
            out.push(m);
            break;
        }
    }
    out.retain(|m| {
        m.chars()
            .all(|c| c.is_alphanumeric() || c == '_' || c == '.')
    });
    out
}

/// The word itself and its parts split at `=`, `:` and whitespace, without leading dashes'
/// options (`--flag`).
fn pieces(word: &str) -> Vec<&str> {
    let mut out = vec![word];
    out.extend(word.split(|c: char| c == '=' || c == ':' || c.is_whitespace()));
    out.retain(|p| !p.is_empty() && !p.starts_with('-') && !p.contains("${"));
    out.sort_unstable();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Origin, ServerConfig};

    pub(super) fn project_def(ws: &Path, command: &str, args: &[&str]) -> ServerDef {
        ServerDef {
            name: "x".into(),
            config: ServerConfig {
                command: Some(command.into()),
                args: args.iter().map(|a| a.to_string()).collect(),
                ..ServerConfig::default()
            },
            origin: Origin::Project(ws.join(".mcp.json")),
        }
    }

    #[test]
    fn a_python_module_the_server_runs_is_part_of_the_approval() {
        // #35: `python3 -m srv` ran the workspace's srv.py, which was not hashed: the model
        // could rewrite it after the approval.
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let ws = dir.path();
        std::fs::write(ws.join("srv.py"), "print(1)\n").unwrap_or_else(|e| panic!("{e}"));
        std::fs::create_dir_all(ws.join("pkg/sub")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(ws.join("pkg/__init__.py"), "").unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(ws.join("pkg/sub/__main__.py"), "x").unwrap_or_else(|e| panic!("{e}"));
        let names = |args: &[&str]| -> Vec<String> {
            named_files(ws, &project_def(ws, "python3", args))
                .unwrap_or_else(|e| panic!("{e}"))
                .into_iter()
                .map(|f| f.path)
                .collect()
        };
        assert_eq!(names(&["-m", "srv"]), ["srv.py"]);
        assert_eq!(names(&["-u", "-msrv", "--port", "1"]), ["srv.py"]);
        assert_eq!(
            names(&["-m", "pkg.sub"]),
            ["pkg/__init__.py", "pkg/sub/__main__.py"]
        );
    }

    #[test]
    fn a_directory_the_server_runs_is_covered_by_its_entry_points() {
        // Red-team pass 8, R8-18: `python3 tools` runs `tools/__main__.py`, and was approved
        // with no file covered.
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(ws.join("tools")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::create_dir_all(ws.join("srv/bin")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(ws.join("tools/__main__.py"), "print('ok')\n")
            .unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(
            ws.join("srv/package.json"),
            r#"{"name": "s", "bin": {"s": "bin/s.js"}}"#,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(ws.join("srv/bin/s.js"), "1\n").unwrap_or_else(|e| panic!("{e}"));
        let py = project_def(&ws, "python3", &["tools"]);
        let names: Vec<String> = named_files(&ws, &py)
            .unwrap_or_else(|e| panic!("{e}"))
            .into_iter()
            .map(|f| f.path)
            .collect();
        assert_eq!(names, ["tools/__main__.py"]);
        let node = project_def(&ws, "node", &["srv"]);
        let names: Vec<String> = named_files(&ws, &node)
            .unwrap_or_else(|e| panic!("{e}"))
            .into_iter()
            .map(|f| f.path)
            .collect();
        assert_eq!(names, ["srv/bin/s.js", "srv/package.json"]);
        let data = dir.path().join("data");
        let mut a = Approvals::load(&data);
        a.approve(&ws, &py, false).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(ws.join("tools/__main__.py"), "import os\n")
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            a.check(&ws, &py),
            Approval::Changed("tools/__main__.py".into())
        );
    }

    #[test]
    fn a_changed_definition_needs_approving_again() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(&ws).unwrap_or_else(|e| panic!("{e}"));
        let mut def = project_def(&ws, "echo", &[]);
        let data = dir.path().join("data");
        let mut a = Approvals::load(&data);
        assert_eq!(a.check(&ws, &def), Approval::NotApproved);
        a.approve(&ws, &def, false)
            .unwrap_or_else(|e| panic!("{e}"));
        let a = Approvals::load(&data);
        assert_eq!(a.check(&ws, &def), Approval::Approved { network: false });
        def.config.args.push("--evil".into());
        assert!(matches!(a.check(&ws, &def), Approval::Changed(w) if w.contains(".mcp.json")));
        def.origin = Origin::User(dir.path().join("c.toml"));
        assert!(
            a.is_approved(&ws, &def),
            "user definitions need no approval"
        );
    }

    #[test]
    fn a_changed_script_needs_approving_again_and_is_named() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(ws.join("tools")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(ws.join("tools/mcp_server.py"), "print('ok')\n")
            .unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(ws.join("conf.json"), "{}").unwrap_or_else(|e| panic!("{e}"));
        let mut def = project_def(
            &ws,
            "python3",
            &["tools/mcp_server.py", "--config=conf.json"],
        );
        def.config
            .env
            .insert("PYTHONPATH".into(), "./lib:./tools".into());
        let data = dir.path().join("data");
        let mut a = Approvals::load(&data);
        let files = a.approve(&ws, &def, true).unwrap_or_else(|e| panic!("{e}"));
        let names: Vec<&str> = files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(names, ["conf.json", "tools/mcp_server.py"]);
        assert_eq!(a.check(&ws, &def), Approval::Approved { network: true });
        std::fs::write(ws.join("tools/mcp_server.py"), "import os\n")
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            a.check(&ws, &def),
            Approval::Changed("tools/mcp_server.py".into())
        );
        // Swapping the script for a symlink to elsewhere is a change too.
        std::fs::write(dir.path().join("other.py"), "import os\n")
            .unwrap_or_else(|e| panic!("{e}"));
        std::fs::remove_file(ws.join("tools/mcp_server.py")).unwrap_or_else(|e| panic!("{e}"));
        std::os::unix::fs::symlink(dir.path().join("other.py"), ws.join("tools/mcp_server.py"))
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(a.check(&ws, &def), Approval::Changed(_)));
    }

    #[test]
    fn a_program_on_a_path_into_the_workspace_is_covered_and_a_fifo_refused() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(ws.join("bin")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(ws.join("bin/python3"), "#!/bin/sh\n").unwrap_or_else(|e| panic!("{e}"));
        let mut def = project_def(&ws, "python3", &["-V"]);
        def.config.env.insert("PATH".into(), "bin:/usr/bin".into());
        let files = named_files(&ws, &def).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(files.len(), 1);
        assert_eq!(files[0].path, "bin/python3");

        rustix::fs::mknodat(
            rustix::fs::CWD,
            ws.join("pipe"),
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let def = project_def(&ws, "cat", &["pipe"]);
        let e = named_files(&ws, &def).err().unwrap_or_default();
        assert!(e.contains("`pipe`") && e.contains("regular"), "{e}");
    }
}
