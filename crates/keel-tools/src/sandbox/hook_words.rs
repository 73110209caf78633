//! The work-tree paths a hook's text names, read as a shell reads them (red-team pass 7,
//! R7-18): a path through a variable the hook sets (`TOOLS=tools; sh $TOOLS/f.sh`), a
//! redirection's file (`exec 3<tools/g.sh`, `. <(cat tools/x.sh)`), a module run by Python
//! (`python3 -m tools.m` → `tools/m.py`, `tools/m/__init__.py`, `tools/m/__main__.py` and the
//! packages' `__init__.py`), what `node -r`/`--require`/`--import`/`--loader` preloads, and a
//! script named without a slash after a shell or interpreter (`sh check.sh`).
//!
//! A path behind a variable whose value the text does not fix (`$(dirname "$0")/f.sh`,
//! `$X/f.sh` with `X` from the environment) is taken from the top as before, and also every
//! file of that name the work tree holds within [`SEARCH_DIRS`] directories is named: the
//! hook could reach any of them.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Directories looked through for a file a hook names behind an unknown variable.
pub(super) const SEARCH_DIRS: usize = 4_000;
/// Directories never looked into by that search.
const NOT_SEARCHED: &[&str] = &[".git", "node_modules", "target", ".venv", "venv"];

/// What a hook's text names.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct HookWords {
    /// Paths as written, variables the text fixes replaced (`$ROOT/x` forms are left for
    /// [`super::git_hooks`]'s top rule).
    pub(super) paths: Vec<String>,
    /// Names of files behind a variable the text does not fix (`f.sh`, `tools/f.sh`).
    pub(super) behind_unknown: Vec<String>,
    /// Directories whose files the hook runs without naming them: a glob's directory (`for
    /// f in scripts/hooks.d/*`), `run-parts DIR` (red-team pass 9, R9-4). Each is protected
    /// whole: a file added there runs too.
    pub(super) dirs: Vec<String>,
    /// Directories the hook changes into (`cd frontend && tools/x.sh` runs
    /// `frontend/tools/x.sh`): its relative paths are taken from there too.
    pub(super) cd_dirs: Vec<String>,
    /// The languages whose inline code the hook runs (`python3 -c '…'`, `node -e '…'`): the
    /// file extensions that code could load from the top — the reader does not resolve
    /// what inline code imports, so every such file counts (R9-4).
    pub(super) inline: Vec<&'static [&'static str]>,
}

/// What inline Python code may import from the top (namespace packages make any directory
/// importable).
const PYTHON_CODE: &[&str] = &["py"];
/// What inline JavaScript may `require`/`import`.
const NODE_CODE: &[&str] = &["js", "cjs", "mjs", "json", "node", "ts", "mts", "cts"];
/// What inline Ruby may `require`.
const RUBY_CODE: &[&str] = &["rb"];
/// What inline Perl may `require`/`use`.
const PERL_CODE: &[&str] = &["pl", "pm"];

/// The directory part of a glob word before its first component with a wildcard
/// (`scripts/hooks.d/*` → `scripts/hooks.d`; `*.sh` → the top, `""`).
fn glob_dir(word: &str) -> Option<String> {
    if !word.contains(['*', '?', '[']) {
        return None;
    }
    let parts: Vec<&str> = word.split('/').collect();
    let first = parts.iter().position(|c| c.contains(['*', '?', '[']))?;
    Some(parts[..first].join("/"))
}

fn is_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// `NAME=value` assignments with a literal value (no expansion in it).
fn literal_assignments(text: &str) -> HashMap<String, String> {
    let mut vars = HashMap::new();
    for piece in text.split(['\n', ';', '&', '|']) {
        let mut piece = piece.trim();
        for kw in ["export ", "local ", "readonly ", "declare "] {
            piece = piece.strip_prefix(kw).unwrap_or(piece).trim_start();
        }
        let Some((name, value)) = piece.split_once('=') else {
            continue;
        };
        if !is_name(name) {
            continue;
        }
        let value = value.split_whitespace().next().unwrap_or("");
        let value = value.trim_matches(|c| c == '"' || c == '\'');
        if !value.contains(['$', '`']) {
            vars.insert(name.to_string(), value.to_string());
        }
    }
    vars
}

/// `word` with `$NAME` and `${NAME}` of `vars` replaced.
fn substitute(word: &str, vars: &HashMap<String, String>) -> String {
    let mut out = word.to_string();
    for (name, value) in vars {
        out = out
            .replace(&format!("${{{name}}}"), value)
            .replace(&format!("${name}/"), &format!("{value}/"));
        if out.ends_with(&format!("${name}")) {
            let cut = out.len() - name.len() - 1;
            out.truncate(cut);
            out.push_str(value);
        }
    }
    out
}

/// Whether `word` (a path) still goes through a variable that is not a top-of-tree form.
fn unknown_variable(word: &str) -> bool {
    word.contains('$')
}

fn is_python(w: &str) -> bool {
    let name = w.rsplit('/').next().unwrap_or(w);
    name.strip_prefix("python")
        .is_some_and(|v| v.is_empty() || v.chars().all(|c| c.is_ascii_digit() || c == '.'))
}

/// The files a module `a.b.c` may be loaded from (each package's `__init__.py` runs too).
fn module_files(module: &str) -> Vec<String> {
    let path = module.replace('.', "/");
    let mut out = vec![
        format!("{path}.py"),
        format!("{path}/__init__.py"),
        format!("{path}/__main__.py"),
    ];
    let parts: Vec<&str> = path.split('/').collect();
    for k in 1..parts.len() {
        out.push(format!("{}/__init__.py", parts[..k].join("/")));
    }
    out
}

/// The files `node -r X` may load: a path (with the extensions node tries) or a package.
fn preload_files(x: &str) -> Vec<String> {
    if x.starts_with('.') || x.contains('/') && !x.starts_with('@') {
        let mut out = vec![x.to_string()];
        for ext in [".js", ".cjs", ".mjs", ".json", "/index.js"] {
            out.push(format!("{x}{ext}"));
        }
        out
    } else {
        vec![format!("node_modules/{x}")]
    }
}

/// Reads `text` (a hook) for the paths it names.
pub(super) fn hook_words(text: &str) -> HookWords {
    let vars = literal_assignments(text);
    let trim = |w: &str| -> String {
        w.trim_matches(|c| matches!(c, '"' | '\'' | '!' | '(' | ')'))
            .to_string()
    };
    // Words as `path_words` takes them (`"$(git rev-parse --show-toplevel)"/x` stays one),
    // and a redirection's file split off its operator (`3<tools/g.sh`, `<(cat x)`).
    let mut tokens: Vec<String> = Vec::new();
    for w in text.split(|c: char| c.is_whitespace() || matches!(c, ';' | '|' | '&' | '`')) {
        if w.starts_with('#') {
            continue;
        }
        if w.contains(['<', '>']) {
            tokens.extend(w.split(['<', '>']).map(trim));
        } else {
            tokens.push(trim(w));
        }
    }
    let tokens: Vec<String> = tokens
        .into_iter()
        .filter(|w| !w.is_empty())
        .map(|w| substitute(&w, &vars))
        .collect();
    let mut out = HookWords::default();
    let push = |out: &mut HookWords, p: String| {
        if !p.is_empty() && !p.contains("://") && !out.paths.contains(&p) {
            out.paths.push(p);
        }
    };
    let inline = |out: &mut HookWords, lang: &'static [&'static str]| {
        if !out.inline.contains(&lang) {
            out.inline.push(lang);
        }
    };
    for (i, tok) in tokens.iter().enumerate() {
        let value = tok.rsplit_once('=').map_or(tok.as_str(), |(_, v)| v);
        // A glob: every file of its directory (a new one included) runs (R9-4).
        if let Some(dir) = glob_dir(value).filter(|d| !d.contains('$') && !d.is_empty())
            && !out.dirs.contains(&dir)
        {
            out.dirs.push(dir);
        }
        if value.contains('/') {
            push(&mut out, value.to_string());
            if unknown_variable(value)
                && let Some((_, rest)) = value.rsplit_once('$')
                && let Some((_, tail)) = rest.split_once('/')
            {
                // `$(dirname "$0")/../../lib/u.sh`: the path below the climb.
                let tail: Vec<&str> = tail
                    .split('/')
                    .filter(|c| !c.is_empty() && *c != "." && *c != "..")
                    .collect();
                let tail = tail.join("/");
                if !tail.is_empty() && !out.behind_unknown.contains(&tail) {
                    out.behind_unknown.push(tail);
                }
            }
        }
        let next = |k: usize| tokens.get(i + k).map(String::as_str);
        let program = tok.rsplit('/').next().unwrap_or(tok);
        if is_python(tok) {
            // `python3 [-X opts] -m mod`, `-mmod`.
            let mut k = 1;
            while k < 8 {
                match next(k) {
                    // Options that take the next word.
                    Some("-X" | "-W" | "-Q") => k += 1,
                    Some("-c") => {
                        inline(&mut out, PYTHON_CODE);
                        break;
                    }
                    Some("-m") => {
                        if let Some(m) = next(k + 1) {
                            module_files(m).into_iter().for_each(|p| push(&mut out, p));
                        }
                        break;
                    }
                    Some(w) if w.starts_with("-m") => {
                        module_files(&w[2..])
                            .into_iter()
                            .for_each(|p| push(&mut out, p));
                        break;
                    }
                    Some(w) if w.starts_with('-') => {}
                    Some(w) => {
                        push(&mut out, w.to_string());
                        break;
                    }
                    None => break,
                }
                k += 1;
            }
        }
        if matches!(program, "node" | "nodejs") {
            let mut k = 0;
            while k < 12 {
                k += 1;
                let Some(w) = next(k) else { break };
                let preload = [
                    "-r",
                    "--require",
                    "--import",
                    "--loader",
                    "--experimental-loader",
                ];
                if matches!(w, "-e" | "--eval" | "-p" | "--print")
                    || w.starts_with("--eval=")
                    || w.starts_with("--print=")
                {
                    inline(&mut out, NODE_CODE);
                    break;
                }
                if preload.contains(&w) {
                    if let Some(x) = next(k + 1) {
                        preload_files(x).into_iter().for_each(|p| push(&mut out, p));
                    }
                    k += 1;
                } else if let Some(x) = preload
                    .iter()
                    .find_map(|o| w.strip_prefix(&format!("{o}=")))
                {
                    preload_files(x).into_iter().for_each(|p| push(&mut out, p));
                } else if !w.starts_with('-') {
                    push(&mut out, w.to_string());
                    break;
                }
            }
        }
        if matches!(program, "ruby" | "perl")
            && (1..4)
                .filter_map(next)
                .take_while(|w| w.starts_with('-'))
                .any(|w| matches!(w, "-e" | "-E") || w.starts_with("-e"))
        {
            inline(
                &mut out,
                if program == "ruby" {
                    RUBY_CODE
                } else {
                    PERL_CODE
                },
            );
        }
        // `run-parts [opts] DIR`: every program in DIR.
        if program == "run-parts"
            && let Some(dir) = (1..8)
                .filter_map(next)
                .find(|w| !w.starts_with('-') && !w.contains('$'))
            && !out.dirs.iter().any(|d| d == dir)
        {
            out.dirs.push(dir.trim_end_matches('/').to_string());
        }
        if matches!(program, "cd" | "pushd")
            && let Some(dir) = next(1).filter(|w| !w.starts_with('-') && !w.contains('$'))
            && !out.cd_dirs.iter().any(|d| d == dir)
        {
            out.cd_dirs.push(dir.trim_end_matches('/').to_string());
        }
        // `sh check.sh`, `. lib.sh`, `source lib.sh`, `exec tool.sh`: a file at the top.
        if matches!(
            program,
            "sh" | "bash" | "dash" | "zsh" | "ksh" | "." | "source" | "exec" | "ruby" | "perl"
        ) && let Some(w) = (1..4).filter_map(next).find(|w| !w.starts_with('-'))
            && !w.contains('/')
            && !w.contains('$')
            && w.contains('.')
        {
            push(&mut out, w.to_string());
        }
    }
    out
}

/// The files under `top` whose path ends with `tail` (`f.sh`, `tools/f.sh`), looked for in at
/// most [`SEARCH_DIRS`] directories; and whether the search stopped before the end.
pub(super) fn files_named(top: &Path, tail: &str) -> (Vec<PathBuf>, bool) {
    let mut found = Vec::new();
    let mut queue = vec![top.to_path_buf()];
    let mut dirs = 0usize;
    while let Some(dir) = queue.pop() {
        dirs += 1;
        if dirs > SEARCH_DIRS {
            return (found, true);
        }
        let candidate = dir.join(tail);
        if std::fs::symlink_metadata(&candidate).is_ok_and(|m| !m.is_dir()) {
            found.push(candidate);
        }
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut subdirs: Vec<PathBuf> = entries
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .filter(|e| !NOT_SEARCHED.iter().any(|n| e.file_name() == *n))
            .map(|e| e.path())
            .collect();
        subdirs.sort();
        queue.extend(subdirs.into_iter().rev());
    }
    (found, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hook_names_files_through_its_variables_redirections_and_modules() {
        let hook = "#!/bin/sh\n\
            ROOT=$(git rev-parse --show-toplevel)\n\
            \"$ROOT/tools/a.sh\"\n\
            TOOLS=tools; sh $TOOLS/f.sh\n\
            exec 3<tools/g.sh; sh <&3\n\
            . <(cat tools/x.sh)\n\
            python3 -m tools.m\n\
            python3 -X dev -mtools.n\n\
            node -r ./tools/pre.js --require=dep tools/run.js\n\
            sh check.sh\n\
            sh \"$(dirname \"$0\")/../../lib/u.sh\"\n";
        let w = hook_words(hook);
        for p in [
            "$ROOT/tools/a.sh",
            "tools/f.sh",
            "tools/g.sh",
            "tools/x.sh",
            "tools/m.py",
            "tools/m/__init__.py",
            "tools/m/__main__.py",
            "tools/__init__.py",
            "tools/n.py",
            "./tools/pre.js",
            "./tools/pre.js.js",
            "node_modules/dep",
            "tools/run.js",
            "check.sh",
        ] {
            assert!(w.paths.iter().any(|x| x == p), "{p}: {:?}", w.paths);
        }
        assert!(w.behind_unknown.iter().any(|t| t == "lib/u.sh"), "{w:?}");
        assert!(
            !w.paths.iter().any(|p| p == "3" || p == "cat" || p == "dev"),
            "{w:?}"
        );
        assert!(w.behind_unknown.iter().any(|t| t == "tools/a.sh"), "{w:?}");
    }

    #[test]
    fn files_behind_an_unknown_variable_are_looked_for_by_name() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        for d in ["tools", "a/b", "node_modules/x"] {
            std::fs::create_dir_all(dir.path().join(d)).unwrap_or_else(|e| panic!("{e}"));
        }
        for f in ["tools/f.sh", "a/b/f.sh", "node_modules/x/f.sh", "g.sh"] {
            std::fs::write(dir.path().join(f), "").unwrap_or_else(|e| panic!("{e}"));
        }
        let (found, cut) = files_named(dir.path(), "f.sh");
        assert!(!cut);
        let rel: Vec<_> = found
            .iter()
            .filter_map(|p| p.strip_prefix(dir.path()).ok())
            .map(|p| p.to_string_lossy().into_owned())
            .collect();
        assert_eq!(rel, ["a/b/f.sh", "tools/f.sh"]);
    }
}
