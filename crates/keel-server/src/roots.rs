//! Where the server may run sessions: only in workspaces under its configured roots
//! (`[server] workspaces`, default the `--workspace` it was started in), never in `/` or a
//! system directory, and with scripts from under the same roots. Paths are compared after
//! resolving symbolic links, so a link inside a root cannot point a session elsewhere.

use std::path::{Component, Path, PathBuf};

use axum::http::StatusCode;

use crate::error::ApiError;

/// Directories no session may use as (or, for the second list, inside) its workspace.
const SYSTEM_EXACT: &[&str] = &[
    "/", "/usr", "/var", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/opt", "/home", "/root",
    "/run", "/srv", "/mnt", "/media", "/tmp",
];
const SYSTEM_TREES: &[&str] = &["/etc", "/proc", "/sys", "/dev", "/boot"];

/// The server's workspace roots, canonical.
#[derive(Debug, Clone)]
pub struct WorkspaceRoots {
    roots: Vec<PathBuf>,
}

/// Why the roots cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct RootsError(pub String);

/// Whether `path` (canonical) is `/` or a system directory.
fn is_system(path: &Path) -> bool {
    SYSTEM_EXACT.iter().any(|s| path == Path::new(s))
        || SYSTEM_TREES.iter().any(|s| path.starts_with(s))
}

/// `path` with `.` and `..` removed lexically (for a path that does not exist).
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

impl WorkspaceRoots {
    /// Canonicalises `roots`; each must exist and be neither `/` nor a system directory.
    pub fn new(roots: &[PathBuf]) -> Result<Self, RootsError> {
        let mut out = Vec::new();
        for root in roots {
            let canonical = root.canonicalize().map_err(|e| {
                RootsError(format!(
                    "workspace root `{}` cannot be opened: {e}; fix `[server] workspaces` or --workspace",
                    root.display()
                ))
            })?;
            if is_system(&canonical) {
                return Err(RootsError(format!(
                    "refusing to serve sessions in `{}`: it is the root or a system directory; start `keel serve` in a project directory (or list project directories in `[server] workspaces`)",
                    canonical.display()
                )));
            }
            // Sessions may write anywhere beneath a root: no program Keel starts unconfined is
            // looked up there, also before a session in it opened (red-team pass 3, R3-3).
            keel_tools::shell::lookup::distrust(&canonical);
            out.push(canonical);
        }
        if out.is_empty() {
            return Err(RootsError(
                "no workspace roots: set `[server] workspaces` or start in a project directory"
                    .into(),
            ));
        }
        Ok(Self { roots: out })
    }

    /// The canonical roots.
    pub fn roots(&self) -> &[PathBuf] {
        &self.roots
    }

    fn contains(&self, canonical: &Path) -> bool {
        !is_system(canonical) && self.roots.iter().any(|r| canonical.starts_with(r))
    }

    fn outside(&self, what: &str, shown: &Path) -> ApiError {
        let roots = self
            .roots
            .iter()
            .map(|r| format!("`{}`", r.display()))
            .collect::<Vec<_>>()
            .join(", ");
        ApiError::new(
            StatusCode::FORBIDDEN,
            "outside_workspace_roots",
            format!(
                "{what} `{}` is outside this server's workspace roots ({roots}); the server's owner can add directories with `[server] workspaces` in their own config",
                shown.display()
            ),
        )
    }

    /// The canonical workspace `path` names, if it is a directory under the roots. Nothing is
    /// said about paths outside them beyond that (not even whether they exist).
    pub fn workspace(&self, path: &Path) -> Result<PathBuf, ApiError> {
        let canonical = match path.canonicalize() {
            Ok(c) => c,
            Err(e) => {
                let lexical = normalize(path);
                if !self.contains(&lexical) {
                    return Err(self.outside("workspace", path));
                }
                return Err(ApiError::bad_request(format!(
                    "workspace `{}` cannot be opened: {e}",
                    path.display()
                )));
            }
        };
        if !self.contains(&canonical) {
            return Err(self.outside("workspace", path));
        }
        if !canonical.is_dir() {
            return Err(ApiError::bad_request(format!(
                "workspace `{}` is not a directory",
                path.display()
            )));
        }
        Ok(canonical)
    }

    /// Whether a stored session's workspace lies under the roots (what the session list
    /// shows: not the sessions `keel run` or an eval ran elsewhere with the same store).
    pub fn holds(&self, workspace: &Path) -> bool {
        let canonical = workspace
            .canonicalize()
            .unwrap_or_else(|_| normalize(workspace));
        self.contains(&canonical)
    }

    /// Checks an existing session's stored workspace (it may have been created by `keel run`
    /// anywhere).
    pub fn check_existing(&self, workspace: &Path) -> Result<(), ApiError> {
        let canonical = workspace
            .canonicalize()
            .unwrap_or_else(|_| normalize(workspace));
        if self.contains(&canonical) {
            Ok(())
        } else {
            Err(self.outside("the session's workspace", workspace))
        }
    }

    /// The canonical script file `script` (relative to `workspace`) names, if it is a regular
    /// file under the roots. Its content is never read here nor quoted in an error.
    pub fn script(&self, workspace: &Path, script: &str) -> Result<PathBuf, ApiError> {
        let path = workspace.join(script);
        let canonical = match path.canonicalize() {
            Ok(c) => c,
            Err(_) if !self.contains(&normalize(&path)) => {
                return Err(self.outside("script", Path::new(script)));
            }
            Err(e) => {
                return Err(script_error(format!(
                    "script `{script}` cannot be opened: {e}"
                )));
            }
        };
        if !self.contains(&canonical) {
            return Err(self.outside("script", Path::new(script)));
        }
        if !canonical.is_file() {
            return Err(script_error(format!(
                "script `{script}` is not a regular file"
            )));
        }
        Ok(canonical)
    }
}

/// A script that cannot be used: a provider problem (422), like an invalid one.
fn script_error(message: String) -> ApiError {
    ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "provider_error", message)
}

/// `message` without the source excerpts parsers quote (`12 | secret = …` lines and their
/// caret lines), so an error never carries a file's content to a client.
pub fn without_excerpts(message: &str) -> String {
    message
        .lines()
        .filter(|line| {
            let t = line.trim_start();
            let digits = t.trim_start_matches(|c: char| c.is_ascii_digit());
            !(t.starts_with('|')
                || (digits.len() < t.len() && digits.trim_start().starts_with('|')))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_directories_cannot_be_roots_or_workspaces() {
        for bad in ["/", "/etc", "/usr"] {
            let e = WorkspaceRoots::new(&[PathBuf::from(bad)]).err();
            assert!(e.is_some_and(|e| e.0.contains("system directory")), "{bad}");
        }
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let root = dir.path().join("projects");
        std::fs::create_dir_all(root.join("a")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(root.join("a/s.yaml"), "turns: []\n").unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(dir.path().join("outside.yaml"), "x").unwrap_or_else(|e| panic!("{e}"));
        std::os::unix::fs::symlink("/etc", root.join("a/etc")).unwrap_or_else(|e| panic!("{e}"));
        let roots =
            WorkspaceRoots::new(std::slice::from_ref(&root)).unwrap_or_else(|e| panic!("{e}"));
        let ws = roots
            .workspace(&root.join("a"))
            .unwrap_or_else(|e| panic!("{e:?}"));
        for outside in [
            PathBuf::from("/"),
            PathBuf::from("/etc"),
            root.join("a/etc"),
            root.join("../nope"),
        ] {
            let e = roots.workspace(&outside).err().map(|e| e.code);
            assert_eq!(e, Some("outside_workspace_roots"), "{}", outside.display());
        }
        assert!(roots.script(&ws, "s.yaml").is_ok());
        assert!(roots.holds(&root.join("a")));
        assert!(
            roots.holds(&root.join("gone/since")),
            "a deleted workspace under a root"
        );
        assert!(!roots.holds(dir.path()), "the root's parent");
        assert!(!roots.holds(&root.join("a/etc")), "a link out of the root");
        assert!(!roots.holds(Path::new("/tmp/.tmpXYZ/eval-1")));
        for bad in [
            "/etc/shadow",
            "../../outside.yaml",
            "etc/passwd",
            "/nonexistent/x",
        ] {
            let e = roots.script(&ws, bad).err().map(|e| e.code);
            assert_eq!(e, Some("outside_workspace_roots"), "{bad}");
        }
    }

    #[test]
    fn parser_excerpts_are_removed() {
        let m = "invalid script x: TOML parse error at line 1, column 5\n  |\n1 | root:$6$secret\n  |     ^\nexpected `=`";
        let clean = without_excerpts(m);
        assert!(!clean.contains("secret"), "{clean}");
        assert!(clean.contains("expected `=`"), "{clean}");
    }
}
