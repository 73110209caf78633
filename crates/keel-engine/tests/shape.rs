//! The loop crate's shape (issue 33): small, its state its own, its guardrails apart from it,
//! and no application inside it.
//!
//! - `keel-engine/src` holds at most 12,000 lines (`find src -name '*.rs' | xargs cat | wc -l`);
//! - `struct Run` has no `pub`/`pub(crate)` field, and every `impl Run` block is in `src/run/`
//!   (the loop's files), so no other file reaches into the loop's state;
//! - no guardrail (`src/guardrails/`) imports the loop (`crate::run`): they talk to it through
//!   `HookContext` and `HookAction` only;
//! - keel-engine depends on neither keel-work nor keel-eval, and names neither: the
//!   applications sit on top of the runtime.
//!
//! Each check is a function over file text, tested below on a sample that breaks it.

use std::path::{Path, PathBuf};

/// The most lines `keel-engine/src` may hold.
const MAX_LINES: usize = 12_000;

/// The applications built on the runtime: the loop crate must not know them.
const APPLICATIONS: [&str; 2] = ["keel-work", "keel-eval"];

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every `.rs` file under `dir`, as (path relative to `dir`, text), in a stable order.
fn sources(dir: &Path) -> Vec<(String, String)> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, String)>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            panic!("cannot list {}", dir.display());
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(root, &path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path)
                    .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                let rel = path.strip_prefix(root).unwrap_or(&path);
                out.push((rel.to_string_lossy().replace('\\', "/"), text));
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

/// Lines as `wc -l` counts them: newline characters.
fn lines(files: &[(String, String)]) -> usize {
    files.iter().map(|(_, t)| t.matches('\n').count()).sum()
}

/// The text with `//` comments removed, line by line (a comment may name a path freely).
fn code(text: &str) -> String {
    text.lines()
        .map(|l| l.find("//").map_or(l, |i| &l[..i]))
        .collect::<Vec<_>>()
        .join("\n")
}

/// What breaks "`Run`'s state is private to the loop's files": a `pub` field of `struct Run`,
/// a `struct Run` or an `impl Run` outside `run/`.
fn run_leaks(files: &[(String, String)]) -> Vec<String> {
    let mut found = Vec::new();
    let mut defined = false;
    for (path, text) in files {
        let text = code(text);
        let in_loop = path.starts_with("run/");
        for (i, line) in text.lines().enumerate() {
            let t = line.trim_start();
            let names_run = |rest: &str| {
                rest.strip_prefix("Run")
                    .is_some_and(|r| r.starts_with(['<', ' ', '{']))
            };
            let is_struct = ["struct ", "pub struct ", "pub(crate) struct "]
                .iter()
                .any(|p| t.strip_prefix(p).is_some_and(names_run));
            let is_impl = t.strip_prefix("impl").is_some_and(|r| {
                let r = r.trim_start();
                let r = if r.starts_with('<') {
                    r.split_once('>').map_or("", |(_, r)| r.trim_start())
                } else {
                    r
                };
                names_run(r)
            });
            if (is_struct || is_impl) && !in_loop {
                found.push(format!("{path}:{}: `{}` outside run/", i + 1, t.trim_end()));
            }
            if !is_struct {
                continue;
            }
            defined = true;
            // The fields: the lines up to the brace that closes the struct.
            let mut depth = 0i32;
            for (j, field) in text.lines().enumerate().skip(i) {
                let f = field.trim_start();
                if depth == 1 && f.starts_with("pub") && f.contains(':') {
                    found.push(format!("{path}:{}: field `{}`", j + 1, f.trim_end()));
                }
                depth += field.matches('{').count() as i32 - field.matches('}').count() as i32;
                if depth <= 0 && j > i {
                    break;
                }
            }
        }
    }
    if !defined {
        found.push("no `struct Run` found in src/".into());
    }
    found
}

/// Imports of the loop (`crate::run`, or `run` through `super`) in the guardrail modules.
fn guardrails_importing_the_loop(files: &[(String, String)]) -> Vec<String> {
    let mut found = Vec::new();
    for (path, text) in files {
        let Some(name) = path.strip_prefix("guardrails/") else {
            continue;
        };
        // `super` is the crate in guardrails/mod.rs, `super::super` in the others.
        let up = if name == "mod.rs" {
            "super"
        } else {
            "super::super"
        };
        let code = code(text);
        let paths = ["crate::run".to_string(), format!("{up}::run")];
        for (i, line) in code.lines().enumerate() {
            let hit = paths.iter().any(|p| {
                line.match_indices(p.as_str()).any(|(at, _)| {
                    !line[at + p.len()..].starts_with(|c: char| c.is_alphanumeric() || c == '_')
                })
            }) || grouped_import_of_run(line);
            if hit {
                found.push(format!("{path}:{}: {}", i + 1, line.trim()));
            }
        }
    }
    found
}

/// `use crate::{…, run, …}` (or `run::…` inside the braces).
fn grouped_import_of_run(line: &str) -> bool {
    let Some(at) = line.find("crate::{") else {
        return false;
    };
    line[at + "crate::{".len()..]
        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .any(|w| w == "run")
}

/// Where keel-engine's manifest or sources name an application crate.
fn applications_named(manifest: &str, files: &[(String, String)]) -> Vec<String> {
    let mut found = Vec::new();
    for (i, line) in manifest.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("");
        for app in APPLICATIONS {
            if line.contains(app) {
                found.push(format!("Cargo.toml:{}: {}", i + 1, line.trim()));
            }
        }
    }
    for (path, text) in files {
        let code = code(text);
        for app in APPLICATIONS {
            let ident = app.replace('-', "_");
            if code.contains(&ident) {
                found.push(format!("src/{path}: names {ident}"));
            }
        }
    }
    found
}

#[test]
fn the_engine_source_stays_within_its_line_budget() {
    let files = sources(&crate_dir().join("src"));
    let n = lines(&files);
    assert!(
        n <= MAX_LINES,
        "keel-engine/src has {n} lines, over {MAX_LINES}: move what is not the loop out of it"
    );
}

#[test]
fn the_loops_state_is_private_to_the_loops_files() {
    let leaks = run_leaks(&sources(&crate_dir().join("src")));
    assert!(
        leaks.is_empty(),
        "`Run` reached from outside the loop:\n{}",
        leaks.join("\n")
    );
}

#[test]
fn no_guardrail_imports_the_loop() {
    let found = guardrails_importing_the_loop(&sources(&crate_dir().join("src")));
    assert!(
        found.is_empty(),
        "guardrails importing the loop:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_loop_crate_knows_no_application() {
    let manifest = std::fs::read_to_string(crate_dir().join("Cargo.toml"))
        .unwrap_or_else(|e| panic!("Cargo.toml: {e}"));
    let found = applications_named(&manifest, &sources(&crate_dir().join("src")));
    assert!(
        found.is_empty(),
        "the loop crate knows an application:\n{}",
        found.join("\n")
    );
}

#[test]
fn each_check_fails_on_a_sample_that_breaks_it() {
    let file = |p: &str, t: &str| (p.to_string(), t.to_string());
    // Lines are newlines, as `wc -l` counts them.
    assert_eq!(lines(&[file("a.rs", "a\nb\n"), file("b.rs", "c")]), 2);

    let private = "pub(crate) struct Run<'a> {\n    engine: &'a E,\n    hooks: Hooks,\n}\n";
    let ok = [
        file("run/mod.rs", private),
        file("run/chain.rs", "impl Run<'_> { fn f(&self) {} }\n"),
        file(
            "engine.rs",
            "struct RunOptions { pub a: u8 }\nimpl RunOutcome {}\n",
        ),
    ];
    assert!(run_leaks(&ok).is_empty(), "{:?}", run_leaks(&ok));
    let public =
        "pub(crate) struct Run<'a> {\n    engine: &'a E,\n    pub(crate) messages: Vec<M>,\n}\n";
    assert_eq!(run_leaks(&[file("run/mod.rs", public)]).len(), 1);
    let outside = [
        file("run/mod.rs", private),
        file("verify.rs", "impl<'a> Run<'a> {}\n"),
    ];
    assert_eq!(run_leaks(&outside).len(), 1);
    assert_eq!(run_leaks(&[file("engine.rs", "struct Engine;\n")]).len(), 1);

    let clean = [
        file(
            "guardrails/phase.rs",
            "use crate::runtime::X;\nuse crate::hooks::{Hook, HookContext};\n// crate::run\n",
        ),
        file("guardrails/mod.rs", "use super::hooks::Hook;\n"),
        file("run/hooks.rs", "use crate::run::Run;\n"),
    ];
    assert!(guardrails_importing_the_loop(&clean).is_empty());
    for bad in [
        file("guardrails/phase.rs", "use crate::run::Run;\n"),
        file("guardrails/phase.rs", "fn f(r: &crate::run::Run) {}\n"),
        file(
            "guardrails/phase.rs",
            "use crate::{hooks::Hook, run::Run};\n",
        ),
        file("guardrails/verify.rs", "use super::super::run;\n"),
        file("guardrails/mod.rs", "use super::run::Run;\n"),
    ] {
        assert_eq!(
            guardrails_importing_the_loop(std::slice::from_ref(&bad)).len(),
            1,
            "{bad:?}"
        );
    }

    let manifest = "[dependencies]\nkeel-tools.workspace = true\n# keel-work sits on top\n";
    assert!(applications_named(manifest, &[file("lib.rs", "use keel_tools::X;\n")]).is_empty());
    assert_eq!(
        applications_named("[dev-dependencies]\nkeel-eval.workspace = true\n", &[]).len(),
        1
    );
    assert_eq!(
        applications_named("", &[file("lib.rs", "pub use keel_work::Runner;\n")]).len(),
        1
    );
}
