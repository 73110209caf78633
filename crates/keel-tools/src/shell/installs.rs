//! What a line changes among installed dependencies (red-team pass 9, R9-13): an approval
//! lifts the dependency-tree protections for the command ([`super::exec::ExecRequest::
//! approved`]: the trees writable, a tree it makes kept, the venv and loaded-code
//! quarantines off) only when the approval prompt said the line changes them.
//!
//! `make test` whose recipe ran `python3 tools/gen.py` was asked about for that program; the
//! person said yes, and a recipe line writing `.venv/lib/python3.11/site-packages/zz.pth` rode
//! along unreported — the approval had exempted the whole command. Now the judgement names
//! what the line installs (a package manager's install, a virtual environment made) and every
//! write it names inside a dependency tree; the prompt's reason says so
//! ([`super::Analysis::changes_installed`]), and only then does the approval exempt the
//! command. Otherwise an approved command runs with the trees read-only, like any other.

use std::path::Path;

use super::words::Word;

/// What the simple command `words` installs into the workspace's dependency trees, if it is a
/// package manager's install (`pip install`, `npm ci`, `uv sync`, `python3 -m venv .venv`).
pub(crate) fn installer(words: &[Word]) -> Option<String> {
    let values: Vec<&str> = words.iter().filter_map(Word::value).collect();
    let program = values.first().map(|p| super::safety::program_name(p))?;
    let rest = &values[1..];
    let sub = rest.iter().find(|w| !w.starts_with('-')).copied();
    let is = |subs: &[&str]| sub.is_some_and(|s| subs.contains(&s));
    let python_module = |m: &str| {
        program.starts_with("python") && rest.windows(2).any(|w| w[0] == "-m" && w[1] == m)
            || rest.iter().any(|w| *w == format!("-m{m}"))
    };
    let installs = match program {
        "pip" | "pip3" => is(&["install", "uninstall"]),
        "npm" | "pnpm" | "yarn" | "bun" | "cnpm" => {
            sub.is_none()
                || is(&[
                    "install",
                    "i",
                    "ci",
                    "add",
                    "update",
                    "upgrade",
                    "uninstall",
                    "remove",
                    "rm",
                    "un",
                    "link",
                    "dedupe",
                    "prune",
                    "rebuild",
                ])
        }
        "uv" => is(&["sync", "add", "remove", "pip", "venv", "lock", "run"]),
        "poetry" | "pdm" | "pipenv" | "hatch" => is(&[
            "install", "add", "remove", "update", "sync", "lock", "env", "run",
        ]),
        "bundle" | "bundler" => is(&["install", "update", "add"]) || sub.is_none(),
        "gem" => is(&["install", "uninstall", "update"]),
        "composer" => is(&["install", "update", "require", "remove"]),
        "conda" | "mamba" | "micromamba" => is(&["install", "create", "update", "remove"]),
        "virtualenv" | "pip-sync" | "tox" | "nox" => true,
        _ => python_module("pip") && is_pip_install(rest) || python_module("venv"),
    };
    installs.then(|| format!("`{}`", values.join(" ")))
}

/// `python3 -m pip install …`: the word after `pip` installs or removes.
fn is_pip_install(rest: &[&str]) -> bool {
    rest.iter()
        .skip_while(|w| **w != "pip" && !w.ends_with("pip"))
        .skip(1)
        .find(|w| !w.starts_with('-'))
        .is_some_and(|s| matches!(*s, "install" | "uninstall"))
}

/// The write of `rel` (workspace-relative) the line names, when it lies in a dependency tree.
/// Also any write in a workspace that holds the user's own configuration (a home, a dotfiles
/// directory: [`super::user_config`]), which an approval likewise makes writable.
pub(crate) fn tree_write(workspace: &Path, rel: &Path) -> Option<String> {
    if let Some(tree) = super::dependency_trees::tree_of(workspace, rel) {
        return Some(format!(
            "writes `{}` (in `{}`)",
            rel.display(),
            tree.display()
        ));
    }
    super::user_config::holds(workspace)
        .map(|_| format!("writes `{}` (the user's own configuration)", rel.display()))
}
