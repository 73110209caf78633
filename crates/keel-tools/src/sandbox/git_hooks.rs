//! What the repository's installed hooks run from the work tree (red-team pass 4, R4-3's
//! gaps): the user's next `git commit` runs every hook in `core.hooksPath` (or `.git/hooks`)
//! unconfined, and a hook often runs work-tree files:
//!
//! - files its text names (`scripts/pre-commit.sh`, `"$(git rev-parse --show-toplevel)"/
//!   node_modules/lefthook/bin/index.js`), or the file a symlinked hook points at;
//! - the configuration of the hook manager it starts, and the programs that names: the
//!   pre-commit framework's `.pre-commit-config.yaml` (`repo: local` hooks' `entry:
//!   ./scripts/check.sh`; a different file when the hook passes `--config=`), lefthook's
//!   `lefthook.yml` / `.lefthook.yml` / `lefthook-local.yml` (any of `.yml`, `.yaml`, `.toml`,
//!   `.json`, `.jsonc`; `run: ./scripts/lint.sh`) and its script directories `.lefthook/` and
//!   `.lefthook-local/`.
//!
//! Those paths join [`super::git_config_paths`]: read-only to the file tools and to commands,
//! and quarantined when a command creates one that was missing. A hook's text is the user's
//! (the hooks directory is read-only to commands), so what it names can be trusted to be what
//! runs. Existing directories a hook's text names (`cd frontend && npm test`) are not
//! protected: the whole tree would turn read-only; what such a hook runs from there (a test
//! suite) is the project's code, as in any `npm test` the user runs — but the installed
//! dependency trees and hook tools' configuration there are ([`super::git_tool_trees`]).

use std::path::{Path, PathBuf};

use super::git_includes::{Reader, path_words};

/// The most hook files read per hooks directory.
const MAX_HOOKS: usize = 64;
/// The most of a hook or a hook manager's configuration read.
const MAX_HOOK_TEXT: u64 = 1024 * 1024;

/// The configuration files lefthook reads, at the top of the work tree.
fn lefthook_configs() -> Vec<String> {
    let mut out = Vec::new();
    for base in [
        "lefthook",
        ".lefthook",
        "lefthook-local",
        ".lefthook-local",
        ".config/lefthook",
        ".config/lefthook-local",
    ] {
        for ext in ["yml", "yaml", "toml", "json", "jsonc"] {
            out.push(format!("{base}.{ext}"));
        }
    }
    out
}

/// Keys of a hook manager's configuration whose values are never programs (file globs,
/// names, versions): their path-like words are not protected.
const DATA_KEYS: &[&str] = &[
    "files",
    "exclude",
    "types",
    "types_or",
    "exclude_types",
    "id",
    "name",
    "description",
    "glob",
    "root",
    "rev",
    "stages",
    "language",
    "language_version",
    "minimum_pre_commit_version",
    "default_stages",
    "default_language_version",
    "tags",
    "skip",
    "only",
];

/// Reads the hooks in `dir` and records what they run from the work tree; the number of hooks.
pub(super) fn read_hooks(r: &mut Reader, dir: &Path) -> usize {
    let dir_meta = std::fs::symlink_metadata(dir);
    // A hooks directory in the workspace that is a link is not entered (it may lead anywhere;
    // the directory itself is protected by its key).
    if dir.starts_with(&r.ws) && !dir_meta.as_ref().is_ok_and(std::fs::Metadata::is_dir) {
        return 0;
    }
    r.look(dir);
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut hooks: Vec<(String, PathBuf)> = entries
        .flatten()
        .map(|e| (e.file_name().to_string_lossy().into_owned(), e.path()))
        .filter(|(name, _)| !name.ends_with(".sample") && !name.starts_with('.'))
        .collect();
    hooks.sort();
    hooks.truncate(MAX_HOOKS);
    let count = hooks.len();
    let top = r.top.clone();
    for (name, path) in hooks {
        let key = format!("hook `{name}`");
        // A hook that is a link to a work-tree script (`ln -s ../../scripts/pre-commit.sh`).
        if let Ok(target) = std::fs::read_link(&path)
            && let Some(t) = target.to_str()
            && let Some(abs) = Reader::resolve(dir, t)
        {
            r.add(&abs, &key);
        }
        let Some(text) = r.read(&path, MAX_HOOK_TEXT) else {
            continue;
        };
        // What it names as a shell reads it: variables it sets, redirections, `python -m`,
        // `node -r` (R7-18).
        let words = super::hook_words::hook_words(&text);
        for tail in &words.behind_unknown {
            // Behind a variable the text does not fix: every file of that name.
            for abs in super::hook_words::files_named(&top, tail).0 {
                r.add(&abs, &key);
            }
        }
        // Relative paths from the top, and from each directory the hook changes into.
        let mut bases = vec![top.clone()];
        for d in &words.cd_dirs {
            if let Some(abs) = Reader::resolve(&top, d)
                && abs.starts_with(&top)
                && !bases.contains(&abs)
            {
                bases.push(abs);
            }
        }
        for word in &words.paths {
            let word = strip_top_variable(word);
            for (b, base) in bases.iter().enumerate() {
                // Absolute and top-variable forms once.
                if b > 0 && (word.starts_with('/') || word.starts_with('~')) {
                    continue;
                }
                let Some(abs) = Reader::resolve(base, word) else {
                    continue;
                };
                if abs.is_dir() {
                    // Its JavaScript tooling is protected ([`super::git_tool_trees`]).
                    r.named_dirs.push(abs);
                } else if b == 0 || std::fs::symlink_metadata(&abs).is_ok() {
                    r.add(&abs, &key);
                }
            }
        }
        // Directories whose every file runs (a glob's, `run-parts`'s): protected whole,
        // present or not (R9-4).
        for d in &words.dirs {
            for base in &bases {
                if let Some(abs) = Reader::resolve(base, strip_top_variable(d)) {
                    r.add(&abs, &format!("{key} runs every file in it"));
                }
            }
        }
        // Inline code (`python3 -c`, `node -e`): what its language loads, from the top.
        for lang in &words.inline {
            r.add_reach(
                &top,
                lang,
                &format!("{key} runs inline code that may load any such file"),
            );
        }
        // `npx lint-staged` (husky's default hook), `pnpm exec`, `bunx`, `yarn`: the program
        // in the work tree's `node_modules/.bin`, its link target and that package's directory
        // (red-team pass 5, R5-16); the whole `node_modules` joins them in
        // [`super::git_tool_trees`].
        for name in package_runner_programs(&text) {
            let bin = top.join("node_modules/.bin").join(&name);
            r.add(&bin, &key);
            if let Ok(real) = bin.canonicalize()
                && let Some(package) = package_dir(&real)
                && package.starts_with(&r.ws)
            {
                r.add(&package, &key);
            }
        }
        if text.contains("pre-commit.com") || text.contains("pre_commit") {
            let config = option_value(&text, "--config").unwrap_or(".pre-commit-config.yaml");
            if let Some(abs) = Reader::resolve(&top, config) {
                manager_config(r, &abs, &format!("pre-commit, run by {key}"));
            }
        }
        if text.contains("lefthook") {
            let key = format!("lefthook, run by {key}");
            for dir in [".lefthook", ".lefthook-local"] {
                r.add(&top.join(dir), &key);
            }
            for config in lefthook_configs() {
                manager_config(r, &top.join(config), &key);
            }
        }
    }
    count
}

/// The programs a hook's text runs through a package runner: `npx [opts] NAME`, `pnpx`,
/// `bunx`, `pnpm exec|dlx NAME`, `npm exec NAME`, `yarn [exec|run] NAME`.
fn package_runner_programs(text: &str) -> Vec<String> {
    let words: Vec<&str> = text
        .split(|c: char| c.is_whitespace() || matches!(c, ';' | '&' | '|' | '(' | ')'))
        .map(|w| w.trim_matches(|c| c == '"' || c == '\''))
        .filter(|w| !w.is_empty())
        .collect();
    let mut out: Vec<String> = Vec::new();
    for (i, w) in words.iter().enumerate() {
        let rest = match *w {
            "npx" | "pnpx" | "bunx" => &words[i + 1..],
            "pnpm" | "npm" if matches!(words.get(i + 1), Some(&"exec" | &"dlx")) => &words[i + 2..],
            "yarn" => match words.get(i + 1) {
                Some(&"exec" | &"run") => &words[i + 2..],
                _ => &words[i + 1..],
            },
            _ => continue,
        };
        if let Some(name) = rest.iter().find(|w| !w.starts_with('-'))
            && !name.contains('/')
            && !name.contains('$')
            && !out.iter().any(|o| o == name)
        {
            out.push((*name).to_string());
        }
    }
    out
}

/// The package directory (`…/node_modules/pkg` or `…/node_modules/@scope/pkg`) holding `file`.
fn package_dir(file: &Path) -> Option<PathBuf> {
    let parts: Vec<_> = file.components().collect();
    let at = parts
        .iter()
        .rposition(|c| c.as_os_str() == "node_modules")?;
    let first = parts.get(at + 1)?;
    let take = if first.as_os_str().to_string_lossy().starts_with('@') {
        at + 3
    } else {
        at + 2
    };
    (take <= parts.len()).then(|| parts[..take].iter().collect())
}

/// Records a hook manager's configuration file at `abs` (present or not) and the program
/// paths its values name.
fn manager_config(r: &mut Reader, abs: &Path, key: &str) {
    r.add(abs, key);
    let Some(text) = r.read(abs, MAX_HOOK_TEXT) else {
        return;
    };
    let top = r.top.clone();
    for line in text.lines() {
        let item = line.trim_start().trim_start_matches('-').trim_start();
        let item = item.trim_start_matches('"');
        let (k, v) = match item.split_once(':') {
            Some((k, v)) if !k.contains(char::is_whitespace) => {
                (k.trim_end_matches('"').to_ascii_lowercase(), v)
            }
            _ => (String::new(), item),
        };
        if DATA_KEYS.contains(&k.as_str()) {
            continue;
        }
        for word in path_words(v) {
            let word = word.trim_end_matches([',', ']', '}']);
            if let Some(p) = Reader::resolve(&top, strip_top_variable(word))
                && !p.is_dir()
            {
                r.add(&p, key);
            }
        }
        // `entry: check.sh` (pre-commit's `language: script`): a file at the top.
        if k == "entry"
            && let Some(first) = v.split_whitespace().next()
            && !first.contains('/')
        {
            let first = first.trim_matches(|c| c == '"' || c == '\'');
            let p = top.join(first);
            if std::fs::symlink_metadata(&p).is_ok_and(|m| m.is_file()) {
                r.add(&p, key);
            }
        }
    }
}

/// `$DIR/x`, `${ROOT}/x`, `"$(git rev-parse --show-toplevel)"/x` → `x`: hooks name work-tree
/// files through a variable holding the top (lefthook's and husky's stubs do).
fn strip_top_variable(word: &str) -> &str {
    if let Some(at) = word.rfind(")\"/").or_else(|| word.rfind(")/")) {
        let rest = &word[at..];
        return rest
            .split_once('/')
            .map_or(word, |(_, r)| r.trim_start_matches('/'));
    }
    if word.starts_with('$')
        && let Some((_, rest)) = word.split_once('/')
    {
        return rest.trim_start_matches('/');
    }
    word
}

/// The value of `--name=VALUE` or `--name VALUE` in `text`.
fn option_value<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    let at = text.find(name)?;
    let rest = &text[at + name.len()..];
    let rest = rest.strip_prefix('=').or_else(|| rest.strip_prefix(' '))?;
    let value = rest
        .split(|c: char| c.is_whitespace() || c == ')' || c == '"' || c == '\'')
        .next()?;
    (!value.is_empty()).then_some(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_that_name_the_top_through_a_variable_are_taken_from_the_top() {
        assert_eq!(
            strip_top_variable("$dir/node_modules/lefthook/bin/index.js"),
            "node_modules/lefthook/bin/index.js"
        );
        assert_eq!(strip_top_variable("${ROOT}/x.sh"), "x.sh");
        assert_eq!(strip_top_variable("scripts/x.sh"), "scripts/x.sh");
        assert_eq!(
            strip_top_variable("--show-toplevel)\"/tools/hook.sh"),
            "tools/hook.sh"
        );
        assert_eq!(
            option_value(
                "ARGS=(hook-impl --config=ci/pre-commit.yaml --hook-type=pre-commit)",
                "--config"
            ),
            Some("ci/pre-commit.yaml")
        );
        assert_eq!(option_value("exec pre-commit", "--config"), None);
        assert_eq!(
            package_runner_programs(
                "#!/bin/sh\nnpx lint-staged\nnpx --no -- commitlint --edit \"$1\"\npnpm exec eslint .\nyarn run tsc\n"
            ),
            ["lint-staged", "commitlint", "eslint", "tsc"]
        );
        assert_eq!(
            package_dir(Path::new("/w/node_modules/lint-staged/bin/x.js")),
            Some(PathBuf::from("/w/node_modules/lint-staged"))
        );
        assert_eq!(
            package_dir(Path::new("/w/node_modules/@commitlint/cli/cli.js")),
            Some(PathBuf::from("/w/node_modules/@commitlint/cli"))
        );
    }
}
