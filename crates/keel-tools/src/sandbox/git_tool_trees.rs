//! The trees of installed code and the tool configuration the user's hooks load (red-team
//! pass 5, R5-16): husky's default hook is `npx lint-staged`, and what that runs is not one
//! file but a dependency tree — `npx` resolves the program in `node_modules/.bin`, husky 9
//! puts `node_modules/.bin` on the hook's `PATH`, the program `require`s dozens of packages
//! from anywhere in `node_modules`, reads its configuration (`.lintstagedrc.js` is code, and
//! every form of it names commands) and the package manager's (`.npmrc`'s `node-options`,
//! `.yarnrc.yml`'s `yarnPath`, Yarn Plug'n'Play's `.pnp.cjs`). pre-commit installed into the
//! project's virtual environment runs `.venv/bin/python -mpre_commit`, which imports from that
//! environment's `site-packages`. None of those trees is in any diff the user reviews (git
//! ignores them), so a model that rewrites one file in them gets its code run unconfined at
//! the user's next `git commit`.
//!
//! The set of files such a hook loads as code is open-ended, so it is protected by tree, not
//! by file: whenever the user's git runs any work-tree program (an installed hook, or a
//! program git's configuration names), these join [`super::git_config_paths`] — read-only to
//! the file tools and to commands, quarantined when a command creates one that was missing:
//!
//! - at the top of the work tree and in every existing directory a hook's text names (`cd
//!   frontend && npx lint-staged`): `node_modules` (whole), Yarn's `.yarn`, `.pnp.cjs`,
//!   `.pnp.loader.mjs`, the package managers' `.npmrc`, `.yarnrc`, `.yarnrc.yml`,
//!   `.pnpmfile.cjs`, and the configuration of the JavaScript hook tools in every file form
//!   their loaders accept — lint-staged (`.lintstagedrc*`, `lint-staged.config.*`),
//!   commitlint (`.commitlintrc*`, `commitlint.config.*`, `.config/commitlintrc*`), husky 4
//!   (`.huskyrc*`, `husky.config.*`) — and `package.json` / `package.yaml` when they hold one of
//!   those tools' sections (`"lint-staged": {…}`);
//! - the whole tree holding any program path already listed: the outermost `node_modules`,
//!   `vendor` (Composer's `vendor/bin/captainhook`, Bundler's `vendor/bundle`) or virtual
//!   environment (a directory holding `pyvenv.cfg`) it lies in.
//!
//! Read-only trees mean a command cannot `npm install` into them (a `node_modules` one
//! installs where none was is moved aside); the user installs dependencies. Tools that keep a
//! cache inside `node_modules` (`node_modules/.cache`) fall back or run without it.

use std::path::{Component, Path, PathBuf};

use super::git_includes::Reader;

/// The most of `package.json` / `package.yaml` read.
const MAX_MANIFEST: u64 = 1024 * 1024;

/// The key protected trees and tool files are listed under.
pub(super) const KEY: &str =
    "code the installed hooks run: `npx`, husky's PATH, hook tools' configuration";

/// Where a hook tool looks for its configuration: the discovery rule the tool itself uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reach {
    /// In the directory the hook runs it in — the top of the work tree, or a directory the
    /// hook's text names (`cd frontend && npx commitlint`) — as cosmiconfig searches from there
    /// (upward, out of the work tree).
    RunDir,
    /// In every directory of the work tree: lint-staged lists its file names at any depth,
    /// tracked or not (`git ls-files --cached --others --exclude-standard --
    /// ':(glob)**/.lintstagedrc'` …) and runs, for each staged file, the configuration closest
    /// to it (red-team pass 6, R6-9: `sub/.lintstagedrc.json` in an untracked directory ran at
    /// the user's next commit).
    EveryDir,
}

/// A JavaScript tool a hook runs, and where it reads its configuration.
struct HookTool {
    name: &'static str,
    /// Names taken bare and with every extension its loader accepts (`.lintstagedrc`,
    /// `.lintstagedrc.json`, `.lintstagedrc.mjs`, …).
    rc: &'static [&'static str],
    /// Names taken only with a code extension (`lint-staged.config.js`).
    config: &'static [&'static str],
    /// The `package.json` / `package.yaml` keys that hold its configuration.
    sections: &'static [&'static str],
    reach: Reach,
}

/// Every hook tool whose configuration Keel protects, with the rule it finds it by. One table:
/// the files listed at the directories hooks run in, the manifests' sections, and the files
/// looked for at any depth (file tools, and after every command) all come from it.
const HOOK_TOOLS: &[HookTool] = &[
    HookTool {
        name: "lint-staged",
        rc: &[".lintstagedrc"],
        config: &["lint-staged.config"],
        sections: &["lint-staged"],
        reach: Reach::EveryDir,
    },
    HookTool {
        name: "commitlint",
        rc: &[".commitlintrc", ".config/commitlintrc"],
        config: &["commitlint.config"],
        sections: &["commitlint"],
        reach: Reach::RunDir,
    },
    HookTool {
        name: "husky 4",
        rc: &[".huskyrc"],
        config: &["husky.config"],
        sections: &["husky"],
        reach: Reach::RunDir,
    },
    HookTool {
        name: "simple-git-hooks",
        rc: &[".simple-git-hooks"],
        config: &["simple-git-hooks"],
        sections: &["simple-git-hooks"],
        reach: Reach::RunDir,
    },
    HookTool {
        name: "yorkie",
        rc: &[],
        config: &[],
        sections: &["gitHooks"],
        reach: Reach::RunDir,
    },
    HookTool {
        name: "pre-commit (npm)",
        rc: &[],
        config: &[],
        sections: &["pre-commit", "precommit", "pre-push", "prepush"],
        reach: Reach::RunDir,
    },
    HookTool {
        name: "ghooks",
        rc: &[],
        config: &[],
        sections: &["ghooks"],
        reach: Reach::RunDir,
    },
];

/// Extensions of configuration that is code.
const CODE_EXTENSIONS: &[&str] = &["js", "cjs", "mjs", "ts", "cts", "mts"];
/// Extensions of configuration that is data.
const DATA_EXTENSIONS: &[&str] = &["json", "yaml", "yml"];

impl HookTool {
    /// Every file name (relative to a directory the tool looks in) of its configuration.
    fn files(&self) -> Vec<String> {
        let mut out = Vec::new();
        for rc in self.rc {
            out.push((*rc).to_string());
            for ext in CODE_EXTENSIONS.iter().chain(DATA_EXTENSIONS) {
                out.push(format!("{rc}.{ext}"));
            }
        }
        for config in self.config {
            for ext in CODE_EXTENSIONS {
                out.push(format!("{config}.{ext}"));
            }
        }
        out
    }
}

/// Package managers' files, relative to a directory the hooks run tools in, that decide what
/// JavaScript tooling runs there.
const PACKAGE_MANAGER_FILES: &[&str] = &[
    "node_modules",
    ".yarn",
    ".pnp.cjs",
    ".pnp.js",
    ".pnp.loader.mjs",
    ".npmrc",
    ".yarnrc",
    ".yarnrc.yml",
    ".pnpmfile.cjs",
];

/// The files, relative to a directory the hooks run tools in, that decide what JavaScript
/// tooling runs there: the package managers' and every hook tool's configuration.
fn tool_files() -> Vec<String> {
    let mut out: Vec<String> = PACKAGE_MANAGER_FILES
        .iter()
        .map(|s| (*s).to_string())
        .collect();
    for tool in HOOK_TOOLS {
        out.extend(tool.files());
    }
    out
}

/// The manifests a tool's section may be in.
const MANIFESTS: &[&str] = &["package.json", "package.yaml"];

/// The workspace path `rel` when a hook tool that looks in every directory would read it as
/// configuration (`sub/.lintstagedrc.json`; a `sub/package.json` holding `"lint-staged"`),
/// named for the list of paths the user's git runs ([`super::git_config_path_of`]). Only
/// asked when the user's git runs a work-tree program. A path inside a `node_modules` is
/// not (git ignores it, and lint-staged asks git).
pub(super) fn discovered(workspace: &Path, rel: &Path) -> Option<super::GitConfigPath> {
    let name = rel.file_name()?.to_str()?;
    if rel.components().any(|c| c.as_os_str() == "node_modules") {
        return None;
    }
    let manifest = MANIFESTS.contains(&name);
    let mut text: Option<Option<String>> = None;
    for tool in HOOK_TOOLS.iter().filter(|t| t.reach == Reach::EveryDir) {
        let named = if manifest {
            let text = text.get_or_insert_with(|| {
                keel_fs::project::ProjectDir::open(workspace)
                    .ok()?
                    .read(rel.to_str()?, MAX_MANIFEST)
                    .ok()
                    .flatten()
            });
            text.as_deref()
                .and_then(|t| section_of(name, t, tool.sections))
                .is_some()
        } else {
            tool.files().iter().any(|f| f == name)
        };
        if named {
            return Some(super::GitConfigPath {
                path: rel.to_path_buf(),
                key: format!(
                    "{} configuration: the installed hooks run {}, which reads it in every directory of the work tree",
                    tool.name, tool.name
                ),
                tree: false,
            });
        }
    }
    None
}

/// Whether a file named `name` may be configuration a hook tool reads in any directory
/// ([`discovered`] says for sure): a cheap test for a walk over the whole tree.
pub fn may_be_discovered(name: &std::ffi::OsStr) -> bool {
    let Some(name) = name.to_str() else {
        return false;
    };
    MANIFESTS.contains(&name)
        || HOOK_TOOLS
            .iter()
            .filter(|t| t.reach == Reach::EveryDir)
            .any(|t| {
                t.rc.iter()
                    .chain(t.config)
                    .any(|stem| name.starts_with(stem))
            })
}

/// The hook tools' configuration files in every directory of the work tree at `root` (those
/// read at any depth: lint-staged's), found by name as lint-staged itself finds them — `git
/// ls-files --cached --others --exclude-standard` with their names — for when the runner's
/// walk after a command stopped at its bound (red-team pass 7, R7-31: 101,000 directories
/// made first hid `packages/a/.lintstagedrc.json`). `None`: git could not list them.
pub(crate) fn every_dir_configs_by_name(root: &Path) -> Option<Vec<PathBuf>> {
    let mut cmd = crate::safe_git::in_repository(root, &[]).ok()?;
    cmd.args([
        "ls-files",
        "-z",
        "--cached",
        "--others",
        "--exclude-standard",
        "--",
    ]);
    for t in HOOK_TOOLS.iter().filter(|t| t.reach == Reach::EveryDir) {
        for stem in t.rc.iter().chain(t.config) {
            cmd.arg(format!(":(glob)**/{stem}*"));
        }
    }
    for m in MANIFESTS {
        cmd.arg(format!(":(glob)**/{m}"));
    }
    let out = cmd.output().ok()?;
    if !out.status.success() {
        return None;
    }
    Some(
        out.stdout
            .split(|b| *b == 0)
            .filter(|s| !s.is_empty())
            .filter_map(|s| std::str::from_utf8(s).ok())
            .map(|s| root.join(s))
            .collect(),
    )
}

/// Adds the trees and tool files above to `r`. `runs_programs`: the user's git runs a
/// work-tree program here (an installed hook, or a program its configuration names).
pub(super) fn add_tool_trees(r: &mut Reader, runs_programs: bool) {
    // The trees holding the programs listed so far.
    let listed: Vec<PathBuf> = r.found.iter().map(|p| r.ws.join(&p.path)).collect();
    for abs in listed {
        if let Some(tree) = tree_of(r, &abs) {
            r.add_tree(&tree, KEY);
        }
    }
    if !runs_programs {
        return;
    }
    let mut dirs = vec![r.top.clone()];
    for d in std::mem::take(&mut r.named_dirs) {
        if d.starts_with(&r.ws) && !dirs.contains(&d) {
            dirs.push(d);
        }
    }
    for (i, dir) in dirs.iter().enumerate() {
        for file in tool_files() {
            let abs = dir.join(&file);
            // At the top every name is listed, present or not (one a command creates is
            // quarantined); in a directory a hook names, those that exist.
            if i == 0 || std::fs::symlink_metadata(&abs).is_ok() {
                if file == "node_modules" || file == ".yarn" {
                    r.add_tree(&abs, KEY);
                } else {
                    r.add(&abs, KEY);
                }
            }
        }
        for manifest in MANIFESTS {
            let abs = dir.join(manifest);
            if let Some(text) = r.read(&abs, MAX_MANIFEST)
                && let Some(section) = hook_section(manifest, &text)
            {
                r.add(
                    &abs,
                    &format!("holds `{section}`, configuration of a tool the installed hooks run"),
                );
            }
        }
    }
}

/// The first hook-tool section `text` (a `package.json` or `package.yaml`) holds. A
/// `package.json` that does not parse counts as holding one (the tool may read it otherwise).
fn hook_section(name: &str, text: &str) -> Option<&'static str> {
    HOOK_TOOLS
        .iter()
        .find_map(|t| section_of(name, text, t.sections))
}

/// The first of `sections` that `text` (a `package.json` or `package.yaml`) holds at its top
/// level (`ghooks` also under `config`). A `package.json` that does not parse counts as
/// holding the first (the tool may read it otherwise).
fn section_of(name: &str, text: &str, sections: &[&'static str]) -> Option<&'static str> {
    if name.ends_with(".json") {
        let Ok(value) = serde_json::from_str::<serde_json::Value>(text) else {
            return sections.first().copied();
        };
        let map = value.as_object()?;
        if sections.contains(&"ghooks")
            && map
                .get("config")
                .and_then(serde_json::Value::as_object)
                .is_some_and(|c| c.contains_key("ghooks"))
        {
            return Some("config.ghooks");
        }
        return sections.iter().find(|s| map.contains_key(**s)).copied();
    }
    // YAML: a top-level key, quoted or not.
    text.lines()
        .filter(|l| !l.starts_with([' ', '\t', '#', '-']))
        .filter_map(|l| {
            l.split_once(':')
                .map(|(k, _)| k.trim().trim_matches(['"', '\'']))
        })
        .find_map(|k| sections.iter().find(|s| **s == k).copied())
}

/// The tree `abs` lies in whose code is loaded as a whole: the outermost `node_modules` or
/// `vendor` on its way below the workspace, else the nearest enclosing virtual environment
/// (a directory holding `pyvenv.cfg`) below the workspace.
fn tree_of(r: &mut Reader, abs: &Path) -> Option<PathBuf> {
    let rel = abs.strip_prefix(&r.ws).ok()?;
    let mut prefix = r.ws.clone();
    for c in rel.components() {
        let Component::Normal(name) = c else {
            return None;
        };
        prefix.push(name);
        if (name == "node_modules" || name == "vendor") && prefix != abs {
            return Some(prefix);
        }
    }
    let mut cur = abs.parent();
    while let Some(dir) = cur {
        if dir == r.ws || !dir.starts_with(&r.ws) {
            break;
        }
        let cfg = dir.join("pyvenv.cfg");
        r.look(&cfg);
        if std::fs::symlink_metadata(&cfg).is_ok_and(|m| m.is_file()) {
            return Some(dir.to_path_buf());
        }
        cur = dir.parent();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_trees_and_configuration_the_installed_hooks_load_are_listed() {
        if !crate::fixtures::have_git() {
            return;
        }
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let ws = dir.path().canonicalize().unwrap_or_else(|e| panic!("{e}"));
        let w = |rel: &str, text: &str| {
            let p = ws.join(rel);
            std::fs::create_dir_all(p.parent().unwrap_or(&ws)).unwrap_or_else(|e| panic!("{e}"));
            std::fs::write(p, text).unwrap_or_else(|e| panic!("{e}"));
        };
        w(".git/config", "[core]\n\tbare = false\n");
        // No hook: nothing.
        assert!(super::super::git_config_paths(&ws).is_empty());
        // pre-commit installed into the project's virtual environment; a monorepo hook.
        w(
            ".git/hooks/pre-commit",
            &format!(
                "#!/usr/bin/env bash\n# File generated by pre-commit: https://pre-commit.com\nINSTALL_PYTHON={}/.venv/bin/python3\nexec \"$INSTALL_PYTHON\" -mpre_commit \"$@\"\n",
                ws.display()
            ),
        );
        w(".venv/pyvenv.cfg", "home = /usr/bin\n");
        w(".venv/bin/python3", "");
        w(".venv/lib/python3.11/site-packages/pre_commit/main.py", "");
        w(
            ".git/hooks/commit-msg",
            "#!/bin/sh\ncd frontend/ && npx --no -- commitlint --edit \"$1\"\n",
        );
        w("frontend/commitlint.config.js", "module.exports = {};\n");
        w("frontend/node_modules/@commitlint/cli/cli.js", "");
        w(
            "package.json",
            "{\"name\":\"x\",\"lint-staged\":{\"*\":\"eslint\"}}",
        );
        w("frontend/package.json", "{\"name\":\"y\"}");
        let got = super::super::git_config_paths(&ws);
        let has = |path: &str, tree: bool| {
            got.iter()
                .any(|p| p.path == Path::new(path) && p.tree == tree)
        };
        for (path, tree) in [
            (".venv", true),
            ("node_modules", true),
            (".yarn", true),
            (".lintstagedrc.cjs", false),
            (".npmrc", false),
            ("package.json", false),
            ("frontend/node_modules", true),
            ("frontend/commitlint.config.js", false),
        ] {
            assert!(has(path, tree), "{path} missing from {got:?}");
        }
        for path in [
            "frontend/package.json",
            "frontend/.npmrc",
            "frontend",
            ".venv/lib",
        ] {
            assert!(
                !got.iter().any(|p| p.path == Path::new(path)),
                "{path} listed: {got:?}"
            );
        }
    }

    /// Red-team pass 7, R7-31: when the walk after a command stops at its bound, lint-staged's
    /// configuration is found by name the way lint-staged finds it (tracked or untracked, not
    /// ignored), at any depth.
    #[test]
    fn hook_tool_configuration_is_found_by_name_at_any_depth() {
        if !crate::fixtures::have_git() {
            return;
        }
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let ws = dir.path().canonicalize().unwrap_or_else(|e| panic!("{e}"));
        let init = crate::safe_git::bare()
            .current_dir(&ws)
            .args(["init", "-q"])
            .status();
        assert!(init.is_ok_and(|s| s.success()));
        for (rel, text) in [
            ("packages/a/.lintstagedrc.json", "{}"),
            ("deep/er/lint-staged.config.mjs", ""),
            ("deep/package.json", "{}"),
            ("ignored/.lintstagedrc", "{}"),
            (".gitignore", "ignored/\n"),
            ("src/a.js", ""),
        ] {
            let p = ws.join(rel);
            std::fs::create_dir_all(p.parent().unwrap_or(&ws)).unwrap_or_else(|e| panic!("{e}"));
            std::fs::write(p, text).unwrap_or_else(|e| panic!("{e}"));
        }
        let mut got: Vec<String> = every_dir_configs_by_name(&ws)
            .unwrap_or_default()
            .iter()
            .filter_map(|p| p.strip_prefix(&ws).ok())
            .map(|p| p.display().to_string())
            .collect();
        got.sort();
        assert_eq!(
            got,
            [
                "deep/er/lint-staged.config.mjs",
                "deep/package.json",
                "packages/a/.lintstagedrc.json"
            ]
        );
    }

    #[test]
    fn hook_tool_sections_of_a_manifest_are_found() {
        assert_eq!(
            hook_section(
                "package.json",
                r#"{"name":"x","lint-staged":{"*":"eslint"}}"#
            ),
            Some("lint-staged")
        );
        assert_eq!(
            hook_section(
                "package.json",
                r#"{"config":{"ghooks":{"pre-commit":"x"}}}"#
            ),
            Some("config.ghooks")
        );
        assert_eq!(
            hook_section("package.json", r#"{"name":"x","scripts":{"test":"jest"}}"#),
            None
        );
        assert_eq!(
            hook_section("package.json", "{ not json"),
            Some("lint-staged")
        );
        assert_eq!(
            hook_section("package.yaml", "name: x\n\"lint-staged\":\n  '*': eslint\n"),
            Some("lint-staged")
        );
        assert_eq!(hook_section("package.yaml", "name: x\n  husky: 1\n"), None);
        let files = tool_files();
        for f in [
            "node_modules",
            ".lintstagedrc.mjs",
            "lint-staged.config.ts",
            "commitlint.config.cjs",
            ".config/commitlintrc.yaml",
            ".huskyrc.json",
            ".yarnrc.yml",
            ".pnp.cjs",
        ] {
            assert!(files.iter().any(|x| x == f), "{f}");
        }
    }
}
