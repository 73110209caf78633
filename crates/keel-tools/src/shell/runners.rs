//! What test runners' own configuration adds to a test run: pytest's `addopts` (from
//! pytest.ini, pyproject.toml, tox.ini or setup.cfg — `--basetemp` empties a directory,
//! report options write files) and the programs Cargo's configuration runs around the tests
//! (`target.*.runner`, `build.rustc-wrapper`), judged as commands.

use super::project::vouch;
use super::safety::{Analyzer, PathScope, SafetyClass, path_scope};
use super::words::Word;

use SafetyClass::{Unknown, WritesWorkspace};

/// pytest: the runner, with its options and its configuration's `addopts` judged: `--basetemp`
/// empties a directory, report options write files.
pub(crate) fn pytest(a: &mut Analyzer, label: &str, args: &[Word]) {
    vouch(a, label);
    let mut options: Vec<Word> = args.to_vec();
    if let Some(addopts) = pytest_addopts(a) {
        options.extend(addopts.split_whitespace().map(Word::lit));
    }
    let mut i = 0;
    while let Some(w) = options.get(i) {
        let Some(v) = w.value() else {
            i += 1;
            continue;
        };
        let (name, value) = match v.split_once('=') {
            Some((n, val)) => (n, Some(Word::lit(val))),
            None => (v, None),
        };
        let writes = match name {
            "--basetemp" => Some("`pytest --basetemp` empties that directory first"),
            "--junitxml" | "--junit-xml" | "--result-log" | "--report-log" | "--html"
            | "--json-report-file" => Some("a pytest report option writes a file"),
            _ => None,
        };
        if let Some(how) = writes {
            let target = value.or_else(|| {
                i += 1;
                options.get(i).cloned()
            });
            match target {
                Some(t) if name == "--basetemp" => {
                    a.write_target(&t, "`pytest --basetemp`");
                    if t.value().is_some_and(|p| path_scope(p) != PathScope::Temp) {
                        a.flag(SafetyClass::Destructive, format!("{how}: `{}`", t.source));
                    }
                }
                Some(t) => a.write_target(&t, how),
                None => a.flag(WritesWorkspace, how.to_string()),
            }
        }
        i += 1;
    }
}

/// pytest's `addopts` from the first configuration file that has a pytest section.
fn pytest_addopts(a: &mut Analyzer) -> Option<String> {
    let project = a.project.as_mut()?;
    for (file, section) in [
        ("pytest.ini", "[pytest]"),
        ("pyproject.toml", "[tool.pytest.ini_options]"),
        ("tox.ini", "[pytest]"),
        ("setup.cfg", "[tool:pytest]"),
    ] {
        let Ok(Some(text)) = project.read(file, "pytest addopts") else {
            continue;
        };
        if !text.contains(section) {
            continue;
        }
        if file == "pyproject.toml" {
            let v: toml::Table = toml::from_str(&text).ok()?;
            let opts = v
                .get("tool")?
                .get("pytest")?
                .get("ini_options")?
                .get("addopts")?;
            return Some(match opts {
                toml::Value::String(s) => s.clone(),
                toml::Value::Array(a) => a
                    .iter()
                    .filter_map(|x| x.as_str())
                    .collect::<Vec<_>>()
                    .join(" "),
                _ => String::new(),
            });
        }
        return Some(ini_value(&text, section, "addopts").unwrap_or_default());
    }
    None
}

/// A key's value (with indented continuation lines) in an INI section.
fn ini_value(text: &str, section: &str, key: &str) -> Option<String> {
    let mut in_section = false;
    let mut value: Option<String> = None;
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with('[') {
            if value.is_some() {
                break;
            }
            in_section = t == section;
            continue;
        }
        if !in_section {
            continue;
        }
        if let Some(v) = value.as_mut() {
            if line.starts_with([' ', '\t']) && !t.is_empty() {
                v.push(' ');
                v.push_str(t);
                continue;
            }
            break;
        }
        if let Some((k, v)) = t.split_once('=')
            && k.trim() == key
        {
            value = Some(v.trim().to_string());
        }
    }
    value
}

/// `cargo test`, `cargo nextest`, `cargo bench`, `cargo run`: the project's code; the
/// programs `.cargo/config.toml` has Cargo run around it (`runner`, `rustc-wrapper`) are
/// judged as commands.
pub(crate) fn cargo(a: &mut Analyzer, args: &[Word]) -> bool {
    let sub = args
        .iter()
        .find_map(|w| w.value().filter(|v| !v.starts_with('-')));
    if !matches!(
        sub,
        Some(
            "test"
                | "t"
                | "nextest"
                | "bench"
                | "run"
                | "r"
                | "build"
                | "b"
                | "check"
                | "c"
                | "clippy"
                | "doc"
        )
    ) {
        return false;
    }
    // `--config` overrides stay unknown (the usual judgement).
    if args.iter().any(|w| {
        w.value()
            .is_none_or(|v| v.starts_with("--config") || v.starts_with("-Z"))
    }) {
        return false;
    }
    vouch(a, &format!("cargo {}", sub.unwrap_or("test")));
    cargo_config(a);
    true
}

/// Judges the programs the Cargo configuration of the directory a command runs in names
/// (`.cargo/config.toml` there and in every directory up to the workspace root) as commands
/// of their own: a `rustc-wrapper = "./w.sh"` is judged by what `w.sh` does.
fn cargo_config(a: &mut Analyzer) {
    let Some(project) = a.project.as_mut() else {
        return;
    };
    let Some(mut dir) = project.cwd.clone() else {
        return;
    };
    let mut programs = Vec::new();
    loop {
        for name in [".cargo/config.toml", ".cargo/config"] {
            match project.read_at(&dir.join(name), "runner and wrappers") {
                Ok(Some(text)) => programs.extend(cargo_config_programs(&text)),
                Ok(None) => {}
                Err(why) => programs.push(Err(why)),
            }
        }
        if dir == project.root || !dir.pop() || !dir.starts_with(&project.root) {
            break;
        }
    }
    for p in programs {
        match p {
            Ok(cmd) => {
                let line = format!("{cmd} ./target/test-binary");
                a.script(&line);
            }
            Err(why) => a.flag(Unknown, format!("Cargo's configuration: {why}")),
        }
    }
}

/// Programs rustup's proxies run from the toolchain the project selects.
const RUSTUP_PROXIES: &[&str] = &[
    "cargo",
    "rustc",
    "rustdoc",
    "rustfmt",
    "cargo-fmt",
    "cargo-clippy",
    "clippy-driver",
    "rust-analyzer",
    "rust-gdb",
    "rust-lldb",
    "cargo-miri",
    "rls",
];

/// What the project's own files make a Rust toolchain command run, judged with the project
/// at hand (red-team R7): a `rust-toolchain(.toml)` with a `path` makes rustup's proxies
/// (`cargo`, `rustc`, `rustfmt` — even `--version`) run programs the repository ships, and a
/// Cargo `[alias]` can make `cargo fmt --check` mean `cargo run`. Either makes the line
/// unknown; the command is judged as usual besides.
pub(crate) fn rust_toolchain_code(a: &mut Analyzer, program: &str, args: &[Word]) {
    if !RUSTUP_PROXIES.contains(&program) {
        return;
    }
    let Some(project) = a.project.as_mut() else {
        return;
    };
    let Some(mut dir) = project.cwd.clone() else {
        return;
    };
    let root = project.root.clone();
    let sub = (program == "cargo")
        .then(|| {
            args.iter()
                .find_map(|w| w.value().filter(|v| !v.starts_with('-')))
                .map(str::to_string)
        })
        .flatten();
    let mut flags = Vec::new();
    loop {
        for name in ["rust-toolchain.toml", "rust-toolchain"] {
            match project.read_at(&dir.join(name), "toolchain path") {
                Ok(Some(text)) => {
                    let path = toml::from_str::<toml::Table>(&text).ok().and_then(|t| {
                        t.get("toolchain")
                            .and_then(|t| t.get("path"))
                            .map(ToString::to_string)
                    });
                    if let Some(path) = path {
                        flags.push(format!(
                            "`{name}` points rustup at the toolchain {path}, so `{program}` runs programs that toolchain holds"
                        ));
                    }
                }
                Ok(None) => {}
                Err(why) => flags.push(format!("the Rust toolchain file: {why}")),
            }
        }
        if let Some(sub) = &sub {
            for name in [".cargo/config.toml", ".cargo/config"] {
                match project.read_at(&dir.join(name), "aliases") {
                    Ok(Some(text)) => {
                        let alias = toml::from_str::<toml::Table>(&text).ok().and_then(|t| {
                            t.get("alias")
                                .and_then(|a| a.get(sub.as_str()))
                                .map(ToString::to_string)
                        });
                        if let Some(alias) = alias {
                            flags.push(format!(
                                "the project's Cargo configuration makes `cargo {sub}` an alias of {alias}"
                            ));
                        }
                    }
                    Ok(None) => {}
                    Err(why) => flags.push(format!("Cargo's configuration: {why}")),
                }
            }
        }
        if dir == root || !dir.pop() || !dir.starts_with(&root) {
            break;
        }
    }
    for f in flags {
        a.flag(Unknown, f);
    }
}

/// A command line's Cargo subcommand when it compiles the project — and so runs its build
/// scripts, its proc macros and whatever its configuration wraps `rustc` in. `Err` when
/// options before it make the package Keel would look at unknown (`--manifest-path`, `-C`).
fn compiling_subcommand(args: &[Word]) -> Result<Option<&str>, ()> {
    for w in args {
        match w.value() {
            Some("--manifest-path" | "-C") => return Err(()),
            Some(v) if v.starts_with("--manifest-path=") => return Err(()),
            Some(v) if v.starts_with('-') => {}
            Some(sub) => {
                return Ok(matches!(
                    sub,
                    "build"
                        | "b"
                        | "check"
                        | "c"
                        | "clippy"
                        | "doc"
                        | "d"
                        | "fix"
                        | "run"
                        | "r"
                        | "test"
                        | "t"
                        | "bench"
                        | "nextest"
                        | "rustc"
                        | "rustdoc"
                )
                .then_some(sub));
            }
            None => return Err(()),
        }
    }
    Ok(None)
}

/// For a `cargo` command that is not a test run (`run_command cargo build`): a compiling
/// subcommand runs repository code besides the compiler, so that code is judged here and the
/// subcommand itself by the usual rules afterwards — the programs the Cargo configuration
/// names (`rustc-wrapper`, `runner`) as commands, and build scripts and proc-macro crates of
/// the package and its workspace (Rust Keel cannot judge) make it unknown (red-team B13).
pub(crate) fn cargo_build_code(a: &mut Analyzer, args: &[Word]) {
    let sub = match compiling_subcommand(args) {
        Ok(Some(sub)) => sub.to_string(),
        Ok(None) => return,
        Err(()) => {
            return a.flag(
                Unknown,
                "`cargo --manifest-path`/`-C` builds a package whose build scripts Keel did not look at"
                    .into(),
            );
        }
    };
    cargo_config(a);
    match rust_build_code(a) {
        Ok(found) if found.is_empty() => {}
        Ok(found) => a.flag(
            Unknown,
            format!(
                "`cargo {sub}` runs the project's own Rust code while it builds ({}), which Keel cannot judge",
                found.join(", ")
            ),
        ),
        Err(why) => a.flag(
            Unknown,
            format!("`cargo {sub}` may run build scripts Keel could not look for: {why}"),
        ),
    }
}

/// For `cargo metadata`, `tree`, `pkgid` and the downloading subcommands: they ask rustc for
/// target information (`rustc -vV`, `--print cfg`) through the configuration's `build.rustc`
/// or `rustc-wrapper`, so those programs are judged as commands here, as for a build (red-team
/// pass 3, R3-8: `cargo metadata --offline --locked` ran a repository's `build.rustc`).
pub(crate) fn cargo_query_code(a: &mut Analyzer, args: &[Word]) {
    let sub = args
        .iter()
        .find_map(|w| w.value().filter(|v| !v.starts_with('-')));
    if matches!(
        sub,
        Some("metadata" | "tree" | "pkgid" | "fetch" | "vendor" | "update" | "generate-lockfile")
    ) {
        cargo_config(a);
    }
}

/// The build scripts and proc-macro crates of the package a command builds (the
/// `Cargo.toml` files from where it runs up to the workspace root), of the workspace members
/// those name and of their path dependencies inside the workspace.
fn rust_build_code(a: &mut Analyzer) -> Result<Vec<String>, String> {
    let Some(project) = a.project.as_mut() else {
        return Ok(Vec::new());
    };
    let mut dir = project
        .cwd
        .clone()
        .ok_or_else(|| "the directory it runs in is not known".to_string())?;
    let root = project.root.clone();
    let mut queue = Vec::new();
    loop {
        queue.push(dir.clone());
        if dir == root || !dir.pop() || !dir.starts_with(&root) {
            break;
        }
    }
    let shown = |p: &std::path::Path| p.strip_prefix(&root).unwrap_or(p).display().to_string();
    let mut seen = std::collections::HashSet::new();
    let mut found = Vec::new();
    while let Some(d) = queue.pop() {
        if !d.starts_with(&root) || !seen.insert(d.clone()) {
            continue;
        }
        let manifest = d.join("Cargo.toml");
        let Some(text) = project.read_at(&manifest, "build scripts and proc macros")? else {
            continue;
        };
        let table: toml::Table = toml::from_str(&text)
            .map_err(|e| format!("`{}` does not parse: {e}", shown(&manifest)))?;
        if let Some(package) = table.get("package").and_then(toml::Value::as_table) {
            match package.get("build") {
                Some(toml::Value::Boolean(false)) => {}
                Some(toml::Value::String(script)) => found.push(shown(&d.join(script))),
                _ if project.kind(&d.join("build.rs")).is_some() => {
                    found.push(shown(&d.join("build.rs")));
                }
                _ => {}
            }
            let proc_macro = table
                .get("lib")
                .and_then(|l| l.get("proc-macro").or_else(|| l.get("proc_macro")))
                .and_then(toml::Value::as_bool);
            if proc_macro == Some(true) {
                found.push(format!("the proc macro in {}", shown(&d)));
            }
            for section in ["dependencies", "dev-dependencies", "build-dependencies"] {
                let Some(deps) = table.get(section).and_then(toml::Value::as_table) else {
                    continue;
                };
                for dep in deps.values() {
                    if let Some(path) = dep.get("path").and_then(toml::Value::as_str) {
                        queue.push(keel_fs::lexical_normalize(&d.join(path)));
                    }
                }
            }
        }
        let members = table
            .get("workspace")
            .and_then(|w| w.get("members"))
            .and_then(toml::Value::as_array);
        for member in members
            .into_iter()
            .flatten()
            .filter_map(toml::Value::as_str)
        {
            match member.strip_suffix("/*") {
                Some(parent) if !parent.contains(['*', '?', '[']) => {
                    queue.extend(project.subdirs(&d.join(parent)));
                }
                _ if member.contains(['*', '?', '[']) => {
                    return Err(format!(
                        "the workspace member pattern `{member}` in `{}`",
                        shown(&manifest)
                    ));
                }
                _ => queue.push(keel_fs::lexical_normalize(&d.join(member))),
            }
        }
    }
    Ok(found)
}

/// The commands a Cargo configuration names: `target.*.runner`, `build.rustc-wrapper`,
/// `build.rustc-workspace-wrapper`, `build.rustc`, `build.rustdoc`.
fn cargo_config_programs(text: &str) -> Vec<Result<String, String>> {
    let table: toml::Table = match toml::from_str(text) {
        Ok(t) => t,
        Err(e) => return vec![Err(format!("it does not parse: {e}"))],
    };
    let as_command = |v: &toml::Value| -> Result<String, String> {
        match v {
            toml::Value::String(s) => Ok(s.clone()),
            toml::Value::Array(a) => Ok(a
                .iter()
                .filter_map(|x| x.as_str())
                .map(super::testing::quote)
                .collect::<Vec<_>>()
                .join(" ")),
            other => Err(format!("a program given as {}", other.type_str())),
        }
    };
    let mut out = Vec::new();
    // `rustflags` that make rustc run or load a program: a linker, link arguments, a codegen
    // backend, unstable options (red-team pass 7, R7-15).
    let flags_run = |v: &toml::Value| -> Option<String> {
        let words: Vec<String> = match v {
            toml::Value::String(s) => s.split_whitespace().map(str::to_string).collect(),
            toml::Value::Array(a) => a
                .iter()
                .filter_map(|x| x.as_str())
                .map(str::to_string)
                .collect(),
            _ => return Some("rustflags Keel cannot read".into()),
        };
        let joined = words.join(" ");
        [
            "linker",
            "link-arg",
            "link-args",
            "codegen-backend",
            "-Z",
            "-L",
            "-l",
        ]
        .iter()
        .find(|w| joined.contains(**w))
        .map(|w| {
            format!("rustflags holding `{w}` make rustc run or load what the repository names")
        })
    };
    let mut sections: Vec<&toml::Table> = Vec::new();
    if let Some(targets) = table.get("target").and_then(|t| t.as_table()) {
        for t in targets.values() {
            if let Some(r) = t.get("runner") {
                out.push(as_command(r));
            }
            if let Some(t) = t.as_table() {
                sections.push(t);
            }
        }
    }
    if let Some(host) = table.get("host").and_then(|t| t.as_table()) {
        sections.push(host);
    }
    if let Some(build) = table.get("build").and_then(|t| t.as_table()) {
        sections.push(build);
    }
    for t in sections {
        // The linker and archiver cargo has rustc run: judged as the commands they are.
        for key in ["linker", "ar"] {
            if let Some(v) = t.get(key) {
                out.push(as_command(v).map(|c| format!("{c} -o ./target/out")));
            }
        }
        for key in ["rustflags", "rustdocflags"] {
            if let Some(why) = t.get(key).and_then(flags_run) {
                out.push(Err(why));
            }
        }
    }
    // `[env]` reaches every program cargo runs (`LD_PRELOAD`, `RUSTC_WRAPPER`).
    if table
        .get("env")
        .and_then(|e| e.as_table())
        .is_some_and(|e| !e.is_empty())
    {
        out.push(Err(
            "its `[env]` sets variables for every program Cargo runs".into(),
        ));
    }
    if let Some(build) = table.get("build").and_then(|b| b.as_table()) {
        for key in [
            "rustc-wrapper",
            "rustc-workspace-wrapper",
            "rustc",
            "rustdoc",
        ] {
            if let Some(v) = build.get(key) {
                out.push(as_command(v));
            }
        }
    }
    out
}
