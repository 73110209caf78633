//! Where the user's own (unconfined) MCP servers start: never in the workspace.
//!
//! A user's server runs with the user's full rights, and the usual configurations resolve
//! code relative to the working directory and `PATH`: `npx -y @scope/server` runs
//! `./node_modules/.bin/…` when the directory has it, `python3 -m module` imports
//! `./module.py` first, a relative or empty `PATH` entry finds `./git`. Started in a hostile
//! repository, those would run the repository's code as the user (red-team B26). So a user's
//! server starts in the user's home (or `/` when the home is the workspace or lies inside it),
//! its program is looked up only in absolute `PATH` entries outside the workspace, and the
//! search paths it inherits (`PATH`, `NODE_PATH`, `GEM_PATH`) keep only such entries.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use keel_tools::shell::lookup;

/// Search-path variables a server inherits from Keel's environment.
const SEARCH_PATHS: &[&str] = &["PATH", "NODE_PATH", "GEM_PATH"];

/// How a user's server is started: its working directory, its program (absolute when found
/// on the cleaned `PATH`) and the cleaned search paths to set.
#[derive(Debug, Clone, PartialEq)]
pub struct UserPlace {
    pub cwd: PathBuf,
    pub program: OsString,
    pub env: Vec<(String, String)>,
}

/// Where a user's server with `program` starts for `workspace`, given Keel's environment
/// (`var`).
pub fn user_place(
    program: &str,
    workspace: &Path,
    var: impl Fn(&str) -> Option<OsString>,
) -> UserPlace {
    // The one lookup filter Keel's own programs use (keel_tools::shell::lookup): absolute
    // entries outside the workspace and every other directory commands may write.
    let also = [workspace];
    let cwd = var("HOME")
        .map(PathBuf::from)
        .filter(|h| h.is_absolute() && h.is_dir() && !lookup::is_untrusted(h, &also))
        .unwrap_or_else(|| PathBuf::from("/"));
    let mut env = Vec::new();
    let mut path_dirs = Vec::new();
    for name in SEARCH_PATHS {
        if let Some(value) = var(name) {
            let dirs = lookup::trusted_dirs(&value, &also);
            if *name == "PATH" {
                path_dirs.clone_from(&dirs);
            }
            let joined = std::env::join_paths(&dirs).unwrap_or_default();
            env.push((name.to_string(), joined.to_string_lossy().into_owned()));
        }
    }
    let found = (!program.contains('/'))
        .then(|| lookup::find_in(&path_dirs, program, &also))
        .flatten();
    UserPlace {
        cwd,
        program: found.map_or_else(|| OsString::from(program), PathBuf::into_os_string),
        env,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_users_server_never_starts_in_or_searches_the_workspace() {
        let root = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let ws = root.path().join("ws");
        let home = root.path().join("home");
        let bin = root.path().join("bin");
        for d in [&ws, &home, &bin, &ws.join("node_modules/.bin")] {
            std::fs::create_dir_all(d).unwrap_or_else(|e| panic!("{e}"));
        }
        let exe = |p: &Path| {
            use std::os::unix::fs::PermissionsExt;
            std::fs::write(p, "#!/bin/sh\n").unwrap_or_else(|e| panic!("{e}"));
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755))
                .unwrap_or_else(|e| panic!("{e}"));
        };
        // The repository ships its own `npx`, on a relative, an empty and an absolute entry.
        exe(&ws.join("node_modules/.bin/npx"));
        exe(&ws.join("npx"));
        exe(&bin.join("npx"));
        let path = format!(
            "./node_modules/.bin::{}:{}",
            ws.join("node_modules/.bin").display(),
            bin.display()
        );
        let node_path = format!("{}:lib", ws.display());
        let env = |home: PathBuf| {
            let (path, node_path) = (path.clone(), node_path.clone());
            move |k: &str| match k {
                "HOME" => Some(home.clone().into_os_string()),
                "PATH" => Some(OsString::from(&path)),
                "NODE_PATH" => Some(OsString::from(&node_path)),
                _ => None,
            }
        };
        let p = user_place("npx", &ws, env(home.clone()));
        assert_eq!(p.cwd, home);
        assert_eq!(p.program, bin.join("npx").into_os_string());
        assert!(
            p.env.contains(&("PATH".into(), bin.display().to_string())),
            "{p:?}"
        );
        assert!(
            p.env.contains(&("NODE_PATH".into(), String::new())),
            "{p:?}"
        );
        // The workspace is the home (or the home lies inside it): `/`, not the home.
        let p = user_place("npx", &ws, env(ws.clone()));
        assert_eq!(p.cwd, PathBuf::from("/"));
        let p = user_place("python3", &ws, env(ws.join("sub")));
        assert_eq!(p.cwd, PathBuf::from("/"));
    }
}
