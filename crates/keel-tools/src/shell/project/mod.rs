//! Judging a test run by what it actually runs ([`CommandSafety::classify_test_run`]).
//!
//! `run_tests` runs `npm test`, `make test`, `pytest` or a configured command; what those run
//! is written in the project's files. Here the command line is judged with the project at
//! hand: `npm test`/`npm run X` (and yarn, pnpm, bun) become the package.json scripts (with
//! their `pre`/`post` scripts), `make X` becomes the Makefile's recipes, `sh x.sh` and
//! `./x.sh` become the script's text, pytest's `addopts` from its configuration and Cargo's
//! `runner`/`rustc-wrapper` from `.cargo/config.toml` are judged too. Each file read is
//! recorded with its content hash ([`Source`]), so a caller can ask again when one changes.
//!
//! Test runners (`jest`, `pytest`, `cargo test`, `go test`, …) and the project's own scripts
//! run by an interpreter (`node test/run.js`) run the project's code: that is what a test run
//! is, and the kernel sandbox confines it. They count as writing the workspace. Whatever else
//! the scripts do is judged like any command: `"test": "rm -rf src"` is destructive.
//!
//! [`CommandSafety::classify_test_run`]: super::CommandSafety::classify_test_run

mod files;
mod interpreters;
#[cfg(test)]
mod tests;

pub(crate) use files::Project;
use files::ReadFailure;
pub use files::{ProjectRoot, Source};

use super::safety::{Analyzer, SafetyClass, Stdin};
use super::words::Word;

use SafetyClass::{Unknown, WritesWorkspace};

/// Test runners: programs whose job is running the project's tests (or checks), and so its
/// code.
const TEST_RUNNERS: &[&str] = &[
    "jest",
    "vitest",
    "mocha",
    "ava",
    "tap",
    "tape",
    "jasmine",
    "karma",
    "playwright",
    "cypress",
    "pytest",
    "py.test",
    "tox",
    "nox",
    "eslint",
    "tsc",
    "mypy",
    "pyright",
    "phpunit",
    "rspec",
    "ctest",
    "uvu",
    "node-test",
    "nyc",
    "c8",
    "lerna",
    "turbo",
    "nx",
];

/// Interpreters whose first operand, a file of the project, is the project's own code.
const SCRIPT_RUNNERS: &[&str] = &[
    "node", "nodejs", "python", "python3", "ruby", "perl", "php", "deno", "bun", "tsx", "ts-node",
];

/// Fingerprints the workspace file `name` (relative to where the command runs) as a source of
/// the judgement, when the analysis has a project and the file is there: an approval
/// remembered for the session then stands for its content (a changed file asks again).
/// The one place every such record goes through (R12, R4-8).
pub(crate) fn record_program_file(a: &mut Analyzer, name: &str) {
    if let Some(project) = a.project.as_mut()
        && !name.is_empty()
    {
        // A file that is not there, not text or outside the workspace is not recorded.
        let _ = project.read_text(name, "a program file");
    }
}

/// Judges `program args` with the project at hand; false when it is not one of the cases
/// here (the caller judges it as any command). Scripts are always resolved (`npm test`,
/// `make lint`, `sh x.sh`); test runners and the project's own scripts count as the run's
/// work only in a test run, or inside a script an allow rule vouched for.
pub(crate) fn judge(a: &mut Analyzer, program: &str, args: &[Word], stdin: &Stdin) -> bool {
    // What the project's toolchain files make `cargo`, `rustc`, `rustfmt` run.
    super::runners::rust_toolchain_code(a, program, args);
    // The script an interpreter runs: fingerprinted, so an approval stands for its content.
    interpreters::record_scripts(a, program, args);
    // Program files other programs read (`awk -f`, `sed -f`, `jq -f`, `xargs -a`, `source`),
    // and what a command inside a substitution reads (`bash -c "$(cat r.sh)"`): R4-8.
    interpreters::record_program_files(a, program, args);
    if let Some(done) = resolve_script(a, program, args) {
        return done;
    }
    let runs_tests = a.runners_vouched || a.project.as_ref().is_some_and(|p| p.test_run);
    if runs_tests {
        return runner(a, program, args, stdin);
    }
    if program == "cargo" {
        // What `cargo build` runs besides the compiler; the subcommand is judged as usual.
        super::runners::cargo_build_code(a, args);
        // What `cargo metadata`/`tree` have rustc run for target information.
        super::runners::cargo_query_code(a, args);
    }
    false
}

/// The commands whose meaning is written in a project file: package scripts, Makefile
/// recipes, shell scripts. `None`: not one of them.
fn resolve_script(a: &mut Analyzer, program: &str, args: &[Word]) -> Option<bool> {
    match program {
        "npm" | "pnpm" | "yarn" | "bun" if package_script(a, program, args) => Some(true),
        "make" | "gmake" => Some(make(a, args)),
        "sh" | "bash" | "dash" => script_file(args).map(|file| shell_script(a, &file)),
        p if p.starts_with("./")
            || p.starts_with("../")
            || (p.contains('/') && !p.starts_with('/')) =>
        {
            Some(executable(a, p))
        }
        _ => None,
    }
}

/// Test runners and the wrappers around them.
fn runner(a: &mut Analyzer, program: &str, args: &[Word], stdin: &Stdin) -> bool {
    match program {
        "npx" | "pnpx" | "bunx" => {
            let rest = skip_leading_options(args);
            if rest.is_empty() {
                return false;
            }
            a.simple_command(rest, stdin);
            true
        }
        "cross-env" | "dotenv" | "env-cmd" => {
            let rest: Vec<Word> = args
                .iter()
                .skip_while(|w| {
                    w.value()
                        .is_some_and(|v| v.contains('=') || v.starts_with('-'))
                })
                .cloned()
                .collect();
            if rest.is_empty() {
                a.read_only(program);
            } else {
                a.simple_command(&rest, stdin);
            }
            true
        }
        "cargo" => super::runners::cargo(a, args),
        "go" if args.first().is_some_and(|w| w.is("test") || w.is("vet")) => {
            vouch(a, &format!("go {}", args[0].text));
            true
        }
        "deno" | "bun" if args.first().is_some_and(|w| w.is("test")) => {
            vouch(a, &format!("{program} test"));
            true
        }
        "node" | "nodejs" if args.iter().any(|w| w.is("--test")) => {
            vouch(a, "node --test");
            true
        }
        p if p.starts_with("python") && python_test_module(args).is_some() => {
            let module = python_test_module(args).unwrap_or_default();
            if module == "pytest" {
                super::runners::pytest(a, "python -m pytest", args);
            } else {
                vouch(a, &format!("python -m {module}"));
            }
            true
        }
        "pytest" | "py.test" => {
            super::runners::pytest(a, program, args);
            true
        }
        p if TEST_RUNNERS.contains(&p) => {
            vouch(a, p);
            true
        }
        p if SCRIPT_RUNNERS.contains(&p) || p.starts_with("python") => project_script(a, p, args),
        _ => false,
    }
}

/// Judges a script of the project (`text`) as commands of its own. When the command that runs
/// it is vouched for by an allow rule (`run_command:npm test`), the test runners and project
/// scripts in it are what the rule allowed; anything else in it is judged as usual.
fn judge_script(a: &mut Analyzer, text: &str) {
    let inherited = a.runners_vouched || a.vouched;
    let outer = std::mem::replace(&mut a.runners_vouched, inherited);
    a.script(text);
    a.runners_vouched = outer;
}

/// Counts a test runner (or the project's own script) as what a test run does: it runs the
/// project's code, in the workspace-write sandbox.
pub(crate) fn vouch(a: &mut Analyzer, what: &str) {
    if a.runners_vouched {
        // Inside a script an allow rule covers: what the rule allowed.
        return a.read_only(what);
    }
    a.flag(
        WritesWorkspace,
        format!("`{what}` runs the project's tests or code (confined to the workspace)"),
    );
}

fn skip_leading_options(args: &[Word]) -> &[Word] {
    let n = args
        .iter()
        .take_while(|w| w.value().is_some_and(|v| v.starts_with('-')))
        .count();
    &args[n..]
}

/// `npm test`, `npm run X`, `yarn X`, `pnpm run X`, `bun run X`: the package.json script, its
/// `pre`/`post` scripts, and the arguments passed on.
fn package_script(a: &mut Analyzer, program: &str, args: &[Word]) -> bool {
    // The subcommand: the first word that is not an option (`npm --silent test`).
    let Some(sub_at) = args.iter().position(|w| !w.could_be_option()) else {
        return false;
    };
    let Some(first) = args[sub_at].value() else {
        return false;
    };
    let (name, rest_at) = match first {
        "test" | "t" | "tst" => ("test", sub_at + 1),
        "run" | "run-script" | "rum" | "urn" => {
            match args[sub_at + 1..].iter().position(|w| !w.could_be_option()) {
                Some(k) => match args[sub_at + 1 + k].value() {
                    Some(n) => (n, sub_at + 2 + k),
                    None => return false,
                },
                None => return false,
            }
        }
        // `yarn lint`, `pnpm lint`: a script when package.json has one.
        other if matches!(program, "yarn" | "pnpm") => (other, sub_at + 1),
        _ => return false,
    };
    if program == "bun" && first == "test" {
        return false;
    }
    // npm's options before the script's `--` are its configuration (`--script-shell`,
    // `--node-options`, `--userconfig`), not the script's arguments (R8-7).
    let npm_options_end = if program == "npm" {
        args[rest_at..]
            .iter()
            .position(|w| w.is("--"))
            .map_or(args.len(), |k| rest_at + k)
    } else {
        sub_at
    };
    if let Some(w) = args[..npm_options_end]
        .iter()
        .find(|w| w.could_be_option() && !harmless_package_option(w))
    {
        a.flag(
            Unknown,
            format!(
                "`{program} {}`: an option that may change what the script runs through",
                w.source
            ),
        );
        return true;
    }
    let Some(project) = a.project.as_mut() else {
        return false;
    };
    let what = format!("scripts.{name}");
    let text = match project.read("package.json", &what) {
        Ok(Some(t)) => t,
        Ok(None) => {
            a.flag(
                Unknown,
                format!("`{program} {first}` needs a package.json, and there is none here"),
            );
            return true;
        }
        Err(why) => {
            a.flag(Unknown, format!("`{program} {first}`: {why}"));
            return true;
        }
    };
    let scripts = serde_json::from_str::<serde_json::Value>(&text)
        .ok()
        .and_then(|v| v.get("scripts").cloned());
    let Some(scripts) = scripts else {
        a.flag(
            Unknown,
            "package.json has no readable `scripts` object".to_string(),
        );
        return true;
    };
    let script = |key: &str| {
        scripts
            .get(key)
            .and_then(|s| s.as_str())
            .map(str::to_string)
    };
    let Some(body) = script(name) else {
        if matches!(program, "yarn" | "pnpm") && !matches!(first, "test" | "run" | "run-script") {
            // `yarn jest`: a binary, not a script.
            return false;
        }
        a.flag(
            Unknown,
            format!("package.json has no `{name}` script for `{program}` to run"),
        );
        return true;
    };
    // What follows the script's name (after a `--`) is appended to its command line.
    let mut passed: Vec<String> = Vec::new();
    for (k, w) in args.iter().enumerate().skip(rest_at) {
        if (k == rest_at || k == npm_options_end) && w.is("--") {
            continue;
        }
        passed.push(match w.value() {
            Some(v) => super::testing::quote(v),
            None => w.source.clone(),
        });
    }
    let mut line = body;
    if !passed.is_empty() {
        line = format!("{line} {}", passed.join(" "));
    }
    package_manager_config(a);
    let scripts = [
        script(&format!("pre{name}")),
        Some(line),
        script(&format!("post{name}")),
    ];
    for text in scripts.into_iter().flatten() {
        judge_script(a, &text);
    }
    true
}

/// Package-manager options that change only what is printed.
fn harmless_package_option(w: &Word) -> bool {
    w.value().is_some_and(|v| {
        matches!(
            v,
            "-s" | "--silent"
                | "-q"
                | "--quiet"
                | "-d"
                | "--verbose"
                | "--if-present"
                | "--color"
                | "--no-color"
                | "--no-progress"
                | "--no-audit"
                | "--no-fund"
                | "--loglevel=silent"
                | "--loglevel=error"
                | "--loglevel=warn"
                | "--loglevel=info"
        )
    })
}

/// Package managers' project settings that change what a script runs — the shell it runs in,
/// code every `node` it starts loads, the package manager's own program, other config files
/// — by file: red-team pass 7, R7-13 (`.npmrc` `script-shell=./tools/sh.sh` ran instead of
/// the judged `npm test` script).
const PACKAGE_MANAGER_SETTINGS: &[(&str, &[&str])] = &[
    (
        ".npmrc",
        &[
            "script-shell",
            "node-options",
            "shell",
            "onload-script",
            "globalconfig",
            "userconfig",
            "node-gyp",
            "init-module",
            // Which package's script runs (R8-7: `workspace=a` ran pkgs/a's test script
            // while the root's was judged).
            "workspace",
            "workspaces",
            "include-workspace-root",
            "prefix",
        ],
    ),
    (
        ".yarnrc.yml",
        &["yarnPath", "plugins", "injectEnvironmentFiles"],
    ),
    (".yarnrc", &["yarn-path"]),
    ("bunfig.toml", &["shell", "preload"]),
];

/// Judges the package manager's project settings ([`PACKAGE_MANAGER_SETTINGS`]) where the
/// command runs: each file is read (and so in the fingerprint, present or not); a setting
/// that changes what runs makes the line unknown.
fn package_manager_config(a: &mut Analyzer) {
    let Some(project) = a.project.as_mut() else {
        return;
    };
    let mut found = Vec::new();
    for (file, keys) in PACKAGE_MANAGER_SETTINGS {
        match project.read(file, "package manager settings") {
            Ok(Some(text)) => {
                for line in text.lines() {
                    let line = line.trim_start();
                    if line.starts_with(['#', ';', '[']) {
                        continue;
                    }
                    let key = line
                        .split(['=', ':', ' ', '\t'])
                        .next()
                        .unwrap_or("")
                        .trim_matches(['"', '\'']);
                    if keys.contains(&key) {
                        found.push(format!(
                            "`{file}` sets `{key}`, which changes what the package manager runs"
                        ));
                    }
                }
            }
            Ok(None) => {}
            Err(why) => found.push(format!("`{file}`: {why}")),
        }
    }
    for why in found {
        a.flag(Unknown, why);
    }
}

/// `make [options] [VAR=value] [target…]`: the recipes its makefiles give the targets, read
/// from every makefile make reads (`-f` each, or the first of `GNUmakefile`, `makefile`,
/// `Makefile`; each include), in the directory `-C` names. Each file read, and each looked
/// for and not there, is in the judgement's fingerprint (R6-14). What make would read that
/// cannot be named here (`-I` search directories, an option Keel does not follow, an include
/// named at run time) makes the line unknown, and its approval lapses when workspace code
/// changes, as inline code's does.
fn make(a: &mut Analyzer, args: &[Word]) -> bool {
    let mut targets = Vec::new();
    let mut overrides = Vec::new();
    let mut files: Vec<String> = Vec::new();
    let mut dir: Option<String> = None;
    let mut unfollowed: Option<String> = None;
    let mut i = 0;
    while let Some(w) = args.get(i) {
        i += 1;
        let Some(v) = w.value() else {
            unfollowed.get_or_insert(format!("`make {}` is not known before it runs", w.source));
            continue;
        };
        let next = args.get(i).and_then(Word::value);
        // An option's value: attached (`-fx`, `--file=x`) or the next word.
        let mut value = |short: &str, long: &[&str]| -> Option<Option<String>> {
            if v == short || long.contains(&v) {
                i += 1;
                return Some(next.map(str::to_string));
            }
            if let Some(rest) = v
                .strip_prefix(short)
                .filter(|r| !r.is_empty() && !v.starts_with("--"))
            {
                return Some(Some(rest.to_string()));
            }
            long.iter()
                .find_map(|l| v.strip_prefix(&format!("{l}=")))
                .map(|rest| Some(rest.to_string()))
        };
        if let Some(f) = value("-f", &["--file", "--makefile"]) {
            match f {
                Some(f) => files.push(f),
                None => {
                    unfollowed.get_or_insert("`make -f` names no file".into());
                }
            }
            continue;
        }
        if let Some(d) = value("-C", &["--directory"]) {
            match (d, &dir) {
                (Some(d), None) => dir = Some(d),
                _ => {
                    unfollowed.get_or_insert("`make -C` more than once".into());
                }
            }
            continue;
        }
        match v {
            "-s"
            | "--silent"
            | "--quiet"
            | "-k"
            | "--keep-going"
            | "--no-print-directory"
            | "-w"
            | "--print-directory"
            | "-B"
            | "--always-make"
            | "-r"
            | "--no-builtin-rules"
            | "-R"
            | "--no-builtin-variables" => {}
            "-j" | "-l" => {
                // `-j 4`: a number is the option's value, not a target.
                if next.is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())) {
                    i += 1;
                }
            }
            _ if v.starts_with("-j")
                || v.starts_with("--jobs")
                || v.starts_with("-l")
                || v.starts_with("--load-average") => {}
            _ if v.starts_with('-') => {
                unfollowed.get_or_insert(format!(
                    "`make {v}`: Keel does not follow what this option makes make read or run"
                ));
            }
            _ => match v.split_once('=') {
                Some((name, value)) => overrides.push((name.to_string(), value.to_string())),
                None => targets.push(v.to_string()),
            },
        }
    }
    let Some(project) = a.project.as_mut() else {
        return false;
    };
    let what = if targets.is_empty() {
        "the default target".to_string()
    } else {
        format!("target {}", targets.join(" "))
    };
    let saved = project.cwd.clone();
    if let Some(d) = &dir {
        project.cd(Some(d.as_str()));
    }
    let defaults = files.is_empty();
    let names: Vec<String> = if defaults {
        ["GNUmakefile", "makefile", "Makefile"]
            .map(String::from)
            .to_vec()
    } else {
        files
    };
    let judged = {
        let mut read = |name: &str| project.read(name, &what);
        super::makefile::recipes(&names, defaults, &targets, &overrides, &mut read)
    };
    project.cwd = saved;
    match judged {
        Ok(r) => {
            for call in &r.shell_calls {
                judge_script(a, call);
            }
            for line in &r.lines {
                judge_script(a, line);
            }
            if !r.missing.is_empty() {
                a.flag(
                    Unknown,
                    format!(
                        "the Makefile has no rule for {}: make's built-in rules decide what runs",
                        r.missing.join(", ")
                    ),
                );
            }
        }
        Err(why) => {
            a.flag(Unknown, format!("the Makefile cannot be judged: {why}"));
            a.inline_code = true;
        }
    }
    if let Some(why) = unfollowed {
        a.flag(Unknown, why);
        a.inline_code = true;
    }
    true
}

/// The script file `sh FILE`/`bash [-e…] FILE` runs (not `-c`, not standard input).
fn script_file(args: &[Word]) -> Option<String> {
    for w in args {
        let v = w.value()?;
        if v.starts_with('-') || v.starts_with('+') {
            if v.contains('c') && !v.starts_with("--") {
                return None;
            }
            continue;
        }
        return Some(v.to_string());
    }
    None
}

/// A shell script of the project, judged by its text.
fn shell_script(a: &mut Analyzer, file: &str) -> bool {
    let Some(project) = a.project.as_mut() else {
        return false;
    };
    match project.read(file, "the script") {
        Ok(Some(text)) => {
            judge_script(a, &text);
            true
        }
        Ok(None) => {
            a.flag(Unknown, format!("the script `{file}` does not exist"));
            true
        }
        Err(why) => {
            a.flag(Unknown, format!("the script `{file}`: {why}"));
            true
        }
    }
}

/// `./x`: a shell script (by its `#!` line, or none) is judged by its text; another
/// interpreter's script is the project's own code.
fn executable(a: &mut Analyzer, path: &str) -> bool {
    let Some(project) = a.project.as_mut() else {
        return false;
    };
    match project.read_text(path, "the script") {
        Ok(Some(text)) => {
            let shebang = text.lines().next().filter(|l| l.starts_with("#!"));
            let shell = shebang.is_none_or(|l| {
                let prog = l
                    .trim_start_matches("#!")
                    .split_whitespace()
                    .flat_map(|w| w.rsplit('/').next())
                    .find(|w| *w != "env" && !w.starts_with('-'))
                    .unwrap_or("");
                matches!(prog, "sh" | "bash" | "dash")
            });
            if shell {
                judge_script(a, &text);
            } else if a.runners_vouched || project_test_run(a) {
                vouch(a, path);
            } else {
                // Python, Node, Perl… code Keel cannot judge, as `python3 x.py` is: a script
                // the model just wrote must not run unasked as `./x.py` (red-team pass 3,
                // R3-9). Its content is fingerprinted, so an approval stands for this text.
                a.flag(
                    Unknown,
                    format!("`{path}` runs the project's own code, which Keel cannot judge"),
                );
            }
        }
        // A built program of the project: its code.
        Err(ReadFailure::NotText) if a.runners_vouched || project_test_run(a) => vouch(a, path),
        Err(ReadFailure::NotText) => {
            a.flag(Unknown, format!("`{path}` is a program of the project"))
        }
        Ok(None) => a.flag(Unknown, format!("`{path}` does not exist")),
        Err(ReadFailure::Refused(why)) => a.flag(Unknown, format!("`{path}`: {why}")),
    }
    true
}

fn project_test_run(a: &Analyzer) -> bool {
    a.project.as_ref().is_some_and(|p| p.test_run)
}

/// `node test/run.js`, `python tests/run.py`: the project's own code when the first operand
/// is a file of the project; inline code (`-c`, `-e`) is judged as usual.
fn project_script(a: &mut Analyzer, program: &str, args: &[Word]) -> bool {
    if args.iter().any(|w| {
        ["-c", "-e", "-E", "-p", "--eval", "--print", "-r"]
            .iter()
            .any(|f| w.is(f))
    }) {
        return false;
    }
    let Some(file) = args.iter().find(|w| !w.could_be_option()) else {
        return false;
    };
    let Some(name) = file.value() else {
        return false;
    };
    let Some(project) = a.project.as_ref() else {
        return false;
    };
    let inside = project.cwd.as_ref().is_some_and(|cwd| {
        cwd.join(name)
            .canonicalize()
            .is_ok_and(|p| p.starts_with(&project.root) && p.is_file())
    });
    if !inside {
        return false;
    }
    vouch(a, &format!("{program} {name}"));
    true
}

/// `python -m pytest|unittest|nose2|tox|coverage run …`.
fn python_test_module(args: &[Word]) -> Option<String> {
    let m = args.iter().position(|w| w.is("-m"))?;
    let module = args.get(m + 1)?.value()?;
    matches!(
        module,
        "pytest" | "unittest" | "nose2" | "tox" | "nox" | "coverage" | "mypy"
    )
    .then(|| module.to_string())
}
