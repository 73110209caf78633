//! Version control and language toolchains: which `git`, `cargo`, `npm`, `pip`, `go` and
//! formatter/linter invocations only read, which write, which reach the network and which run
//! the project's own code (tests, scripts: unknown).

use super::options::{has_option, only_help, positionals, unknown_options};
use super::safety::{Analyzer, SafetyClass};
use super::words::Word;

use SafetyClass::{Network, Unknown, WritesWorkspace};

mod git;
use git::git;

/// Judges `program args` when it is a toolchain program; false when it is not one.
pub(crate) fn judge(a: &mut Analyzer, program: &str, args: &[Word]) -> bool {
    match program {
        "git" => git(a, args),
        "cargo" => cargo(a, args),
        "npm" | "pnpm" | "yarn" => npm(a, program, args),
        "npx" | "pnpx" | "bunx" => a.flag(
            Unknown,
            format!("`{program}` runs a package's program (possibly downloading it)"),
        ),
        "pip" | "pip3" => judge_pip(a, program, args),
        "go" => go(a, args),
        "rustc" => {
            if only_help(args) || has_option(args, &['V'], &["--print", "--explain", "--version"]) {
                a.read_only("rustc");
            } else {
                a.flag(
                    WritesWorkspace,
                    "`rustc` compiles and writes output files".into(),
                );
            }
        }
        "tsc" => {
            if only_help(args)
                || has_option(
                    args,
                    &['v', 'h'],
                    &["--noEmit", "--showConfig", "--listFilesOnly"],
                )
            {
                a.read_only("tsc");
            } else {
                a.flag(WritesWorkspace, "`tsc` writes compiled files".into());
            }
        }
        "ruff" => ruff(a, args),
        "black" | "isort" | "rustfmt" | "prettier" | "gofmt" | "clang-format" | "shfmt"
        | "autopep8" => formatter(a, program, args),
        "pytest" | "py.test" | "jest" | "vitest" | "mocha" | "tox" | "nox" | "eslint" | "mypy"
        | "pyright" => a.flag(
            Unknown,
            format!("`{program}` runs or loads the project's code"),
        ),
        _ => return false,
    }
    true
}

fn cargo(a: &mut Analyzer, args: &[Word]) {
    // `--config` anywhere (before or after the subcommand) can name a rustc wrapper or a
    // runner: code Keel cannot see.
    if let Some(w) = args.iter().find(|w| {
        w.value()
            .is_none_or(|v| v == "--config" || v.starts_with("--config=") || v.starts_with("-Z"))
    }) && w.value().is_some()
    {
        return a.flag(
            Unknown,
            format!(
                "`cargo {}` overrides configuration, which can run programs",
                w.text
            ),
        );
    }
    let mut i = 0;
    while let Some(w) = args.get(i) {
        match w.value() {
            Some("--version" | "-V" | "--list" | "--help" | "-h") => return a.read_only("cargo"),
            Some("--config" | "-Z") => {
                return a.flag(Unknown, "`cargo --config` overrides configuration".into());
            }
            Some("--manifest-path" | "--color" | "-C") => i += 2,
            Some(v) if v.starts_with('-') => i += 1,
            Some(_) => break,
            None => return a.flag(Unknown, format!("`cargo {}` is not known", w.source)),
        }
    }
    let Some(sub) = args.get(i).and_then(Word::value) else {
        return a.read_only("cargo");
    };
    let rest = &args[i + 1..];
    match sub {
        "version" | "locate-project" | "verify-project" | "read-manifest" | "help" => {
            a.read_only(&format!("cargo {sub}"))
        }
        "metadata" | "tree" | "pkgid" => cargo_resolve(a, sub, rest),
        "search" | "info" => a.flag(Network, format!("`cargo {sub}` queries the registry")),
        "fmt" => {
            // `cargo fmt -- --check` passes `--check` on to rustfmt.
            if has_option(rest, &[], &["--check"]) || rest.iter().any(|w| w.is("--check")) {
                a.read_only("cargo fmt --check");
            } else {
                a.flag(WritesWorkspace, "`cargo fmt` reformats files".into());
            }
        }
        "build" | "b" | "check" | "c" | "clippy" | "doc" | "d" | "fix" | "new" | "init" | "add"
        | "remove" | "rm" | "generate-lockfile" | "package" | "clean" => {
            a.flag(
                WritesWorkspace,
                format!("`cargo {sub}` writes build output or project files"),
            );
        }
        "update" | "fetch" | "vendor" => {
            a.flag(Network, format!("`cargo {sub}` downloads crates"));
            a.flag(WritesWorkspace, format!("`cargo {sub}` writes files"));
        }
        "install" | "uninstall" | "publish" | "login" | "logout" | "owner" | "yank" => {
            a.flag(Network, format!("`cargo {sub}` talks to the registry"));
            a.flag(
                WritesWorkspace,
                format!("`cargo {sub}` changes installed programs or crates"),
            );
        }
        "test" | "t" | "run" | "r" | "bench" | "nextest" | "miri" => {
            a.flag(Unknown, format!("`cargo {sub}` runs the project's code"))
        }
        _ => a.flag(
            Unknown,
            format!("`cargo {sub}` is not a cargo command Keel knows (it may be a plug-in)"),
        ),
    }
}

/// `cargo metadata`/`tree`/`pkgid` resolve the dependency graph: they may download the
/// registry index and crates (network, into `~/.cargo`) and write `Cargo.lock`. Read-only only
/// offline with the lock file frozen, or for `metadata --no-deps` (no resolution at all).
fn cargo_resolve(a: &mut Analyzer, sub: &str, rest: &[Word]) {
    let has = |long: &[&str]| has_option(rest, &[], long);
    let frozen = has(&["--frozen"]) || (has(&["--offline"]) && has(&["--locked"]));
    if frozen || (sub == "metadata" && has(&["--no-deps"])) {
        return a.read_only(&format!("cargo {sub}"));
    }
    if !has(&["--offline", "--frozen"]) {
        a.flag(
            Network,
            format!("`cargo {sub}` may download the registry index and crates (add --offline)"),
        );
    }
    if !has(&["--locked", "--frozen"]) {
        a.flag(
            WritesWorkspace,
            format!("`cargo {sub}` may write Cargo.lock and Cargo's caches (add --locked)"),
        );
    }
}

fn npm(a: &mut Analyzer, program: &str, args: &[Word]) {
    let ops = positionals(args, &[]);
    let sub = ops.first().and_then(|w| w.value());
    if sub.is_none()
        && (args
            .iter()
            .any(|w| w.is("--version") || w.is("-v") || w.is("--help")))
    {
        return a.read_only(program);
    }
    match sub {
        Some("ls" | "list" | "why" | "explain" | "help" | "prefix" | "root" | "bin") => {
            a.read_only(&format!("{program} {}", ops[0].text));
        }
        Some("view" | "info" | "show" | "outdated" | "audit" | "search" | "ping") => {
            a.flag(
                Network,
                format!("`{program} {}` queries the registry", ops[0].text),
            );
        }
        Some("config") if ops.get(1).is_some_and(|w| w.is("get") || w.is("list")) => {
            a.read_only(&format!("{program} config"));
        }
        Some(
            "install" | "i" | "ci" | "add" | "update" | "upgrade" | "uninstall" | "remove" | "rm"
            | "un" | "publish" | "unpublish" | "link" | "dedupe" | "prune",
        )
        | None => {
            a.flag(
                Network,
                format!("`{program}` installs or publishes packages"),
            );
            a.flag(
                Unknown,
                format!("`{program}` may run package install scripts"),
            );
        }
        Some(other) => a.flag(Unknown, format!("`{program} {other}` runs package scripts")),
    }
}

/// `pip`/`pip3`/`python -m pip`.
pub(crate) fn judge_pip(a: &mut Analyzer, name: &str, args: &[Word]) {
    let ops = positionals(args, &[]);
    match ops.first().and_then(|w| w.value()) {
        None if args
            .iter()
            .any(|w| w.is("--version") || w.is("-V") || w.is("--help")) =>
        {
            a.read_only(name)
        }
        Some("list" | "show" | "freeze" | "check" | "help" | "inspect" | "debug")
            if !pip_queries_index(ops[0].text.as_str(), args) =>
        {
            a.read_only(&format!("{name} {}", ops[0].text));
        }
        Some("list" | "show" | "freeze" | "check" | "help" | "inspect" | "debug") => {
            a.flag(
                Network,
                format!(
                    "`{name} {}` with these options queries a package index",
                    ops[0].text
                ),
            );
        }
        Some("download" | "index" | "search") => {
            a.flag(
                Network,
                format!("`{name} {}` queries the package index", ops[0].text),
            );
        }
        Some("install" | "uninstall" | "wheel") => {
            a.flag(
                Network,
                format!("`{name} {}` downloads packages", ops[0].text),
            );
            a.flag(
                WritesWorkspace,
                format!("`{name} {}` changes installed packages", ops[0].text),
            );
        }
        _ => a.flag(
            Unknown,
            format!("`{name}` with these arguments is not known"),
        ),
    }
}

/// `pip list --outdated`/`--uptodate` and any index option reach the network.
fn pip_queries_index(sub: &str, args: &[Word]) -> bool {
    // `pip show -f` is `--files`: short options count for `list` only.
    let short: &[char] = if sub == "list" { &['o', 'u', 'i'] } else { &[] };
    has_option(
        args,
        short,
        &[
            "--outdated",
            "--uptodate",
            "--index-url",
            "--extra-index-url",
            "--find-links",
            "--proxy",
        ],
    )
}

fn go(a: &mut Analyzer, args: &[Word]) {
    let ops = positionals(args, &[]);
    match ops.first().and_then(|w| w.value()) {
        Some("version" | "help" | "doc") => a.read_only(&format!("go {}", ops[0].text)),
        // Loading packages may download modules into the module cache.
        Some("list") => {
            if has_option(args, &[], &["-mod=vendor"]) {
                a.read_only(&format!("go {}", ops[0].text));
            } else {
                a.flag(
                    Network,
                    format!(
                        "`go {}` may download modules into the module cache",
                        ops[0].text
                    ),
                );
            }
        }
        Some("env") => {
            if has_option(args, &['w', 'u'], &[]) {
                a.flag(WritesWorkspace, "`go env -w` changes settings".into());
            } else {
                a.read_only("go env");
            }
        }
        Some("build" | "vet" | "fmt" | "clean" | "install") => {
            a.flag(
                WritesWorkspace,
                format!("`go {}` writes files or the build cache", ops[0].text),
            );
        }
        Some("get" | "mod" | "work") => {
            a.flag(
                Network,
                format!("`go {}` may download modules", ops[0].text),
            );
            a.flag(
                WritesWorkspace,
                format!("`go {}` changes module files", ops[0].text),
            );
        }
        Some(sub) => a.flag(Unknown, format!("`go {sub}` runs the project's code")),
        None => a.read_only("go"),
    }
}

fn ruff(a: &mut Analyzer, args: &[Word]) {
    let ops = positionals(
        args,
        &[
            "--config",
            "--select",
            "--ignore",
            "--extend-select",
            "--output-format",
            "--target-version",
            "--line-length",
        ],
    );
    let fixes = has_option(args, &[], &["--fix", "--unsafe-fixes", "--add-noqa"])
        && !has_option(args, &[], &["--no-fix"]);
    match ops.first().and_then(|w| w.value()) {
        _ if only_help(args) || has_option(args, &['V'], &["--version"]) => a.read_only("ruff"),
        Some("check") | None if !fixes => a.read_only("ruff check"),
        Some("format") if has_option(args, &[], &["--check", "--diff"]) => {
            a.read_only("ruff format --check")
        }
        Some("rule" | "config" | "linter" | "version") => a.read_only("ruff"),
        _ => a.flag(WritesWorkspace, "`ruff` rewrites files".into()),
    }
    unknown_options(a, "ruff", args);
}

fn formatter(a: &mut Analyzer, program: &str, args: &[Word]) {
    let checks = match program {
        "gofmt" => !has_option(args, &['w'], &[]),
        "prettier" => !has_option(args, &['w'], &["--write"]),
        "clang-format" => !has_option(args, &['i'], &[]),
        "shfmt" => !has_option(args, &['w'], &["--write"]),
        "autopep8" => !has_option(args, &['i'], &["--in-place"]),
        // rustfmt -l lists the files it changed — and changes them.
        "rustfmt" => {
            has_option(args, &[], &["--check"])
                || args
                    .iter()
                    .zip(args.iter().skip(1))
                    .any(|(o, v)| o.is("--emit") && v.is("stdout"))
                || args.iter().any(|w| w.is("--emit=stdout"))
        }
        "black" => has_option(args, &[], &["--check", "--diff"]),
        _ => has_option(args, &['c'], &["--check", "--diff", "--check-only"]),
    };
    // prettier loads its configuration, found from each file it formats upward
    // (`prettier.config.js`, `.prettierrc.mjs`), and the plugins it names: JavaScript of the
    // repository, run by a command that writes (red-team pass 7, R7-16).
    let loads_code = program == "prettier"
        && (!has_option(args, &[], &["--no-config"])
            || args
                .iter()
                .any(|w| w.value().is_none_or(|v| v.starts_with("--plugin"))));
    if checks || only_help(args) {
        a.read_only(program);
    } else if loads_code {
        a.flag(
            Unknown,
            "`prettier` loads the project's configuration and plugins (JavaScript it runs) before it rewrites files".into(),
        );
    } else {
        a.flag(WritesWorkspace, format!("`{program}` rewrites files"));
    }
}
