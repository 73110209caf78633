//! Approval of project-defined servers. A project's `.mcp.json` is hostile input (anyone who
//! wrote the repository wrote it), so its servers start only after the user approved that
//! exact definition: `keel mcp add NAME` records a SHA-256 of the definition in the user's
//! data directory, and a changed definition needs approving again.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::config::ServerDef;

/// The approvals file: `{"<workspace>": {"<server>": "<sha256>"}}`.
#[derive(Debug, Clone)]
pub struct Approvals {
    path: PathBuf,
    entries: BTreeMap<String, BTreeMap<String, String>>,
}

impl Approvals {
    /// The file in `data_dir` (missing or unreadable: nothing approved).
    pub fn load(data_dir: &Path) -> Self {
        let path = data_dir.join("mcp-approvals.json");
        // Keel's own data directory, not anything a repository ships.
        #[allow(clippy::disallowed_methods)]
        let entries = std::fs::read_to_string(&path)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default();
        Self { path, entries }
    }

    /// Whether `def` (from the project at `workspace`) is approved as it stands now.
    pub fn is_approved(&self, workspace: &Path, def: &ServerDef) -> bool {
        !def.origin.is_project()
            || self
                .entries
                .get(&workspace_key(workspace))
                .and_then(|m| m.get(&def.name))
                .is_some_and(|h| *h == definition_hash(def))
    }

    /// Records approval of `def` as it stands now.
    pub fn approve(&mut self, workspace: &Path, def: &ServerDef) -> std::io::Result<()> {
        self.entries
            .entry(workspace_key(workspace))
            .or_default()
            .insert(def.name.clone(), definition_hash(def));
        self.save()
    }

    /// Forgets an approval; true when there was one.
    pub fn revoke(&mut self, workspace: &Path, name: &str) -> std::io::Result<bool> {
        let key = workspace_key(workspace);
        let removed = self
            .entries
            .get_mut(&key)
            .is_some_and(|m| m.remove(name).is_some());
        if removed {
            self.save()?;
        }
        Ok(removed)
    }

    fn save(&self) -> std::io::Result<()> {
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let text = serde_json::to_string_pretty(&self.entries).map_err(std::io::Error::other)?;
        std::fs::write(&self.path, text)
    }
}

fn workspace_key(workspace: &Path) -> String {
    workspace
        .canonicalize()
        .unwrap_or_else(|_| workspace.to_path_buf())
        .display()
        .to_string()
}

/// SHA-256 of the definition's canonical JSON (keys sorted by the config's own maps).
pub fn definition_hash(def: &ServerDef) -> String {
    let json = serde_json::to_string(&def.config).unwrap_or_default();
    let digest = Sha256::digest(json.as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Origin, ServerConfig};

    #[test]
    fn a_changed_definition_needs_approving_again() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(&ws).unwrap_or_else(|e| panic!("{e}"));
        let mut def = ServerDef {
            name: "x".into(),
            config: ServerConfig {
                command: Some("echo".into()),
                ..ServerConfig::default()
            },
            origin: Origin::Project(ws.join(".mcp.json")),
        };
        let mut a = Approvals::load(dir.path());
        assert!(!a.is_approved(&ws, &def));
        a.approve(&ws, &def).unwrap_or_else(|e| panic!("{e}"));
        let a = Approvals::load(dir.path());
        assert!(a.is_approved(&ws, &def));
        def.config.args.push("--evil".into());
        assert!(!a.is_approved(&ws, &def));
        def.origin = Origin::User(dir.path().join("c.toml"));
        assert!(
            a.is_approved(&ws, &def),
            "user definitions need no approval"
        );
    }
}
