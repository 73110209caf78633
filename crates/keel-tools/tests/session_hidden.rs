//! Code hidden from the user's review by a rule file, judged for the session (red-team pass 9,
//! R9-7 a–e, R9-11). Each form was one command nobody approved (or two file-tool writes),
//! `git status` clean after it, and ran unconfined at the user's next `python3 -m pytest`,
//! `cargo test` or `make test`: a shadow package with a `.gitignore` of `*`, a visible
//! conftest hidden by a later command's `.gitignore`, a `.gitattributes` making a rewrite
//! "Binary files differ", a hidden `.cargo/config.toml`, an ignored `build/main.d` the
//! Makefile `-include`s. As root and as uid 65534.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

#[path = "shared/nobody.rs"]
mod nobody;

use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::Duration;

use keel_tools::shell::{self, LintSettings, ShellSettings};
use keel_tools::{ToolContext, ToolRegistry, Workspace, builtin};
use serde_json::json;

fn exec(ws: &Path, cmd: &str) -> (bool, String) {
    let req = shell::exec::ExecRequest::new(vec!["sh".into(), "-c".into(), cmd.into()], ws);
    let out = nobody::runtime().block_on(shell::exec::run(req)).unwrap();
    (
        out.success(),
        format!(
            "{}{}",
            out.combined_text(),
            out.quarantined.unwrap_or_default()
        ),
    )
}

fn write(ws: &Path, rel: &str, text: &str) {
    let p = ws.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

fn git(ws: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@t"])
        .args(args)
        .current_dir(ws)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn gone(ws: &Path, rel: &str, report: &str) {
    assert!(
        std::fs::symlink_metadata(ws.join(rel)).is_err(),
        "{rel} stayed: {report}"
    );
    assert!(report.contains(rel), "{rel} not said: {report}");
}

fn scenario(ws: &Path) {
    write(ws, ".gitignore", "build/\n");
    write(ws, "tests/test_a.py", "def test_a():\n    assert True\n");
    write(ws, "src/app.py", "print('app')\n");
    write(
        ws,
        "Makefile",
        "OBJS := build/main.o\n-include $(OBJS:.o=.d)\ntest:\n\t@echo tests ok\n",
    );
    git(ws, &["init", "-q"]);
    git(ws, &["add", "."]);
    git(ws, &["commit", "-qm", "init"]);
    std::thread::sleep(Duration::from_millis(1_200));

    // (a) A shadow package that ignores itself.
    let (ok, report) = exec(
        ws,
        "mkdir -p iniconfig && echo '*' > iniconfig/.gitignore && echo 'import os' > iniconfig/__init__.py",
    );
    assert!(ok, "{report}");
    gone(ws, "iniconfig/__init__.py", &report);
    gone(ws, "iniconfig/.gitignore", &report);

    // (b) A test file the diff shows stays; a later command's rule that hides it does not
    // make it the user's to run unseen.
    let (ok, report) = exec(ws, "mkdir -p data2 && echo 'import os' > data2/conftest.py");
    assert!(ok, "{report}");
    assert!(ws.join("data2/conftest.py").exists(), "{report}");
    std::thread::sleep(Duration::from_millis(1_200));
    let (ok, report) = exec(ws, "echo '*' > data2/.gitignore");
    assert!(ok, "{report}");
    gone(ws, "data2/conftest.py", &report);

    // (c) Review blinding: the rewrite's diff shows again.
    let (ok, report) = exec(
        ws,
        "printf '.gitignore\\n.gitattributes\\n' > src/.gitignore && printf 'app.py -diff\\n' > src/.gitattributes && echo 'import os; os.system(\"id\")' > src/app.py",
    );
    assert!(ok, "{report}");
    gone(ws, "src/.gitattributes", &report);
    gone(ws, "src/.gitignore", &report);
    let diff = git(ws, &["diff", "src/app.py"]);
    assert!(diff.contains("os.system"), "{diff}");

    // (d) A tool's configuration that runs programs.
    let (ok, report) = exec(
        ws,
        "mkdir -p .cargo && echo '*' > .cargo/.gitignore && printf '[target.x]\\nrunner = \"sh\"\\n' > .cargo/config.toml",
    );
    assert!(ok, "{report}");
    gone(ws, ".cargo/config.toml", &report);

    // R9-11: an ignored fragment the user's `make` includes.
    let canary = ws.parent().unwrap().join("make-canary");
    let plant = format!(
        "mkdir -p build && printf 'build/main.o: src/app.py\\n$(shell touch {})\\n' > build/main.d",
        canary.display()
    );
    let (ok, report) = exec(ws, &plant);
    assert!(ok, "{report}");
    gone(ws, "build/main.d", &report);
    match std::process::Command::new("make")
        .args(["-s", "test"])
        .current_dir(ws)
        .output()
    {
        Ok(o) => {
            assert!(o.status.success(), "{o:?}");
            assert!(!canary.exists(), "the planted fragment ran");
        }
        Err(_) => {
            assert!(std::env::var_os("CI").is_none(), "CI needs make");
            println!("SKIPPED (make part): make is not installed");
        }
    }
    // An ignored file nobody includes, written by a command nobody approved (not a build tool
    // of the project): moved aside too, by the session's default-deny (issue 29).
    let (ok, report) = exec(ws, "mkdir -p build && echo x > build/out.txt");
    assert!(ok, "{report}");
    gone(ws, "build/out.txt", &report);

    // (e) The file tools alone.
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
        ("data3/conftest.py", "import os\n"),
        ("data3/.gitignore", "*\n"),
        ("pluggy/__init__.py", "import os\n"),
        ("pluggy/.gitignore", "*\n"),
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
    for rel in [
        "data3/conftest.py",
        "data3/.gitignore",
        "pluggy/__init__.py",
        "pluggy/.gitignore",
    ] {
        gone(ws, rel, &notes);
    }
    // Written where git ignores it already: refused.
    let r = nobody::runtime().block_on(tools.execute(
        "create_file",
        json!({"path": "build/__init__.py", "content": "import os\n"}),
        &ctx,
    ));
    assert!(r.is_err(), "{r:?}");
    assert!(!ws.join("build/__init__.py").exists());
    // Nothing the session made is left that git does not show.
    let hidden = git(ws, &["status", "--porcelain", "--ignored"]);
    for line in hidden.lines().filter(|l| l.starts_with("!!")) {
        assert!(line == "!! build/", "{hidden}");
    }
}

nobody::user_and_nobody!(scenario: code_hidden_by_a_rule_file_is_moved_aside, code_hidden_by_a_rule_file_is_moved_aside_as_nobody);

/// Configuration git does not show, which the user's tools read (red-team pass 10: R10-9 a
/// `NODE_OPTIONS` appended to an ignored `.env`, R10-12 an ignored `.npmrc` with
/// `script-shell`, R10-11 a `pip.conf` in a directory that is not an environment yet), and a
/// plug-in declared under a name that is not UTF-8 (R10-7).
fn configs_scenario(ws: &Path) {
    write(ws, ".gitignore", ".env\n.npmrc\n.venv/\n*.egg-info/\n");
    write(ws, ".env", "PORT=3000\n");
    write(ws, "package.json", "{}\n");
    git(ws, &["init", "-q"]);
    std::thread::sleep(Duration::from_millis(1_200));
    let (ok, report) = exec(
        ws,
        "echo 'NODE_OPTIONS=\"--require ./data/h.js\"' >> .env && printf 'script-shell=./data/sh\\n' > .npmrc && mkdir -p .venv && printf '[global]\\nindex-url = http://127.0.0.1:9/\\n' > .venv/pip.conf && mkdir -p \"$(printf 'zz\\377.egg-info')\" && printf '[pytest11]\\nx = y\\n' > \"$(printf 'zz\\377.egg-info')/entry_points.txt\"",
    );
    assert!(ok, "{report}");
    gone(ws, ".env", &report);
    assert!(ws.join(".env.quarantined-by-keel").exists(), "{report}");
    gone(ws, ".npmrc", &report);
    gone(ws, ".venv/pip.conf", &report);
    let odd = std::ffi::OsStr::from_bytes(b"zz\xff.egg-info");
    assert!(
        std::fs::symlink_metadata(ws.join(odd).join("entry_points.txt")).is_err(),
        "{report}"
    );
}

nobody::user_and_nobody!(configs_scenario: configuration_git_does_not_show_is_moved_aside, configuration_git_does_not_show_is_moved_aside_as_nobody);

/// Build outputs make reuses by time stamp (red-team pass 10, R10-6): in a fresh clone, one
/// command made `build/main.o` (and could make `app`); the user's `make test` linked and ran
/// them without compiling the source.
fn outputs_scenario(ws: &Path) {
    write(ws, ".gitignore", "build/\napp\n");
    write(ws, "src/main.sh", "echo tests ok\n");
    write(
        ws,
        "Makefile",
        "app: build/main.o\n\tcp build/main.o app\nbuild/main.o: src/main.sh\n\tmkdir -p build && cp src/main.sh build/main.o\ntest: app\n\t@sh ./app\n",
    );
    git(ws, &["init", "-q"]);
    std::thread::sleep(Duration::from_millis(1_200));
    let canary = ws.parent().unwrap().join("outputs-canary");
    let plant = format!(
        "mkdir -p build && echo 'touch {}; echo tests ok' > build/main.o && cp build/main.o app && mkdir -p out && echo x > out/lib.class",
        canary.display()
    );
    let (ok, report) = exec(ws, &plant);
    assert!(ok, "{report}");
    gone(ws, "build/main.o", &report);
    gone(ws, "app", &report);
    // Not ignored: the diff shows it, it stays.
    assert!(ws.join("out/lib.class").exists(), "{report}");
    match std::process::Command::new("make")
        .args(["-s", "test"])
        .current_dir(ws)
        .output()
    {
        Ok(o) => {
            assert!(o.status.success(), "{o:?}");
            assert!(!canary.exists(), "the planted output ran");
        }
        Err(_) => {
            assert!(std::env::var_os("CI").is_none(), "CI needs make");
            println!("SKIPPED (make part): make is not installed");
        }
    }
}

nobody::user_and_nobody!(outputs_scenario: build_outputs_git_does_not_show_are_moved_aside, build_outputs_git_does_not_show_are_moved_aside_as_nobody);

/// Hidden by moving its directory (red-team pass 10, R10-15: a visible `pkg/conftest.py`, then
/// `mv pkg data/pkg` into an ignored directory — the file's own times do not change), and
/// unittest's `test*.py` (R10-14: `data/testutils.py` in an ignored package).
fn moved_scenario(ws: &Path) {
    write(ws, ".gitignore", "data/\n");
    git(ws, &["init", "-q"]);
    let (ok, report) = exec(ws, "mkdir -p pkg && echo 'import os' > pkg/conftest.py");
    assert!(ok, "{report}");
    assert!(ws.join("pkg/conftest.py").exists(), "{report}");
    std::thread::sleep(Duration::from_millis(1_200));
    let (ok, report) = exec(ws, "mkdir -p data && mv pkg data/pkg");
    assert!(ok, "{report}");
    gone(ws, "data/pkg/conftest.py", &report);
    let (ok, report) = exec(
        ws,
        "touch data/__init__.py && echo 'import os' > data/testutils.py",
    );
    assert!(ok, "{report}");
    gone(ws, "data/testutils.py", &report);
}

nobody::user_and_nobody!(moved_scenario: a_file_hidden_by_moving_its_directory_is_moved_aside, a_file_hidden_by_moving_its_directory_is_moved_aside_as_nobody);
