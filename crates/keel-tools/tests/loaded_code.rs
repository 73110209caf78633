//! Code the user's own tools load from places no diff shows (red-team pass 8: R8-4, R8-6,
//! R8-22). Each was one command nobody approved, `git status` clean after it, and ran
//! unconfined at the user's next `python3 -m pytest` or `cargo test`: a `data/conftest.py` in
//! an ignored directory, a `*.egg-info` declaring a `[pytest11]` plug-in, a `pluggy.so` in the
//! working directory, a `pytest.pyc` symlink to a blob of another name, a rewritten
//! `target/debug/deps/<test binary>`. The one runner's check moves them out of the loaders'
//! way; Cargo's profile directories are read-only to such a command (its Cargo builds into
//! `target/keel`); the file tools refuse the same files. As root and as uid 65534.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

#[path = "shared/nobody.rs"]
mod nobody;

use std::path::Path;
use std::time::Duration;

use keel_tools::shell;

fn exec(ws: &Path, cmd: &str, approved: bool) -> shell::exec::ExecOutput {
    let mut req = shell::exec::ExecRequest::new(vec!["sh".into(), "-c".into(), cmd.into()], ws);
    req.approved = approved;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(shell::exec::run(req)).unwrap()
}

fn write(ws: &Path, rel: &str, text: &str) {
    let p = ws.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

fn git_repo(ws: &Path, ignore: &str) {
    write(ws, ".gitignore", ignore);
    write(ws, "tests/test_a.py", "def test_a():\n    assert True\n");
    let ok = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(ws)
        .status()
        .unwrap();
    assert!(ok.success());
}

/// The Python shapes: one command plants them all; none is left where the loaders look, and a
/// test file the diff shows stays.
fn python_scenario(ws: &Path) {
    git_repo(ws, "data/\nbuild/\n*.egg-info/\n*.so\n*.py[cod]\n");
    let canary = ws.parent().unwrap().join("canary");
    let payload = format!("open({:?}, 'w')\n", canary.display().to_string());
    write(ws, "payload.txt", &payload);
    std::thread::sleep(Duration::from_millis(1_200));
    let plant = "mkdir -p data build pwn.egg-info \
        && cp payload.txt data/conftest.py && cp payload.txt build/pwnplug.py \
        && printf 'Metadata-Version: 2.1\\nName: pwn\\nVersion: 1.0\\n' > pwn.egg-info/PKG-INFO \
        && printf '[pytest11]\\npwn = build.pwnplug\\n' > pwn.egg-info/entry_points.txt \
        && printf 'not an ELF' > pluggy.so && printf 'not an ELF' > iniconfig.cpython-311-x86_64-linux-gnu.so \
        && printf 'blob' > data/blob.bin && ln -s data/blob.bin pytest.pyc \
        && printf 'def test_b():\\n    assert True\\n' > tests/test_b.py \
        && cp payload.txt data/test-smoke.js && mkdir -p data/test && cp payload.txt data/test/y.js";
    let out = exec(ws, plant, false);
    assert!(out.success(), "{}", out.combined_text());
    let report = out.quarantined.unwrap_or_default();
    for planted in [
        "data/conftest.py",
        "pwn.egg-info/entry_points.txt",
        "pluggy.so",
        "iniconfig.cpython-311-x86_64-linux-gnu.so",
        "pytest.pyc",
        "data/test-smoke.js",
        "data/test/y.js",
    ] {
        assert!(
            std::fs::symlink_metadata(ws.join(planted)).is_err(),
            "{planted} stayed: {report}"
        );
        assert!(report.contains(planted), "{planted}: {report}");
    }
    assert!(
        ws.join("data/conftest.py.quarantined-by-keel").exists(),
        "{report}"
    );
    // The diff shows it: the user's to review.
    assert!(ws.join("tests/test_b.py").exists(), "{report}");
    assert!(!report.contains("tests/test_b.py"), "{report}");
    // The user's next `python3 -m pytest` and plain `pytest` run none of it.
    let pytest = std::process::Command::new("python3")
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider", "."])
        .current_dir(ws)
        .output();
    match pytest {
        Ok(o) if String::from_utf8_lossy(&o.stderr).contains("No module named pytest") => {
            println!("SKIPPED (pytest part): pytest is not installed")
        }
        Ok(o) => {
            assert!(o.status.success(), "{o:?}");
            assert!(!canary.exists(), "a planted plug-in or conftest ran");
        }
        Err(_) => {
            assert!(std::env::var_os("CI").is_none(), "CI needs python3");
            println!("SKIPPED (pytest part): python3 is not installed");
        }
    }
    // A person approved it (an in-place build they asked for): it stays.
    let out = exec(ws, "printf 'x' > native.so", true);
    assert!(out.success());
    assert!(ws.join("native.so").exists(), "{:?}", out.quarantined);
}

nobody::user_and_nobody!(python_scenario: a_command_cannot_leave_code_pytest_loads_unseen, a_command_cannot_leave_code_pytest_loads_unseen_as_nobody);

/// Cargo: the user's profile directory is read-only to a command nobody approved, whose Cargo
/// builds into `target/keel`; a profile directory such a command builds elsewhere is moved
/// aside.
fn cargo_scenario(ws: &Path) {
    git_repo(ws, "/target\n");
    write(ws, "target/debug/.fingerprint/demo-1/bin-demo", "fp\n");
    write(
        ws,
        "target/debug/deps/demo-6608bf82a9088484",
        "#!/bin/sh\necho real\n",
    );
    std::thread::sleep(Duration::from_millis(1_200));
    let out = exec(ws, "printf %s \"$CARGO_TARGET_DIR\"", false);
    assert_eq!(
        out.stdout.text(),
        ws.join("target/keel").display().to_string()
    );
    let out = exec(ws, "printf %s \"$CARGO_TARGET_DIR\"", true);
    assert_eq!(out.stdout.text(), "", "an approved command builds as usual");
    let bin = "target/debug/deps/demo-6608bf82a9088484";
    let rewrite = format!("printf '#!/bin/sh\\ntouch pwned\\n' > {bin}");
    let out = exec(ws, &rewrite, false);
    if keel_tools::sandbox::is_available() {
        assert!(!out.success(), "{}", out.combined_text());
        assert_eq!(
            std::fs::read_to_string(ws.join(bin)).unwrap(),
            "#!/bin/sh\necho real\n"
        );
    } else {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI runs the kernel sandbox"
        );
        println!("SKIPPED (read-only part): no kernel sandbox");
    }
    // A profile directory built where the user's cargo looks (`--target-dir`), by a command
    // nobody approved: moved aside. Keel's own target stays.
    let out = exec(
        ws,
        "mkdir -p target/release/.fingerprint/d target/release/deps target/keel/debug/.fingerprint target/keel/debug/deps && echo x > target/release/deps/demo-1 && echo y > target/keel/debug/deps/demo-1",
        false,
    );
    assert!(out.success(), "{}", out.combined_text());
    let report = out.quarantined.unwrap_or_default();
    assert!(!ws.join("target/release").exists(), "{report}");
    assert!(
        ws.join("target/release.quarantined-by-keel").exists(),
        "{report}"
    );
    assert!(
        ws.join("target/keel/debug/deps/demo-1").exists(),
        "{report}"
    );
    // A link that makes Keel's own target the user's profile directory (R9-8): moved aside.
    let out = exec(ws, "ln -s keel/debug target/release", false);
    assert!(out.success(), "{}", out.combined_text());
    let report = out.quarantined.unwrap_or_default();
    assert!(
        std::fs::symlink_metadata(ws.join("target/release")).is_err(),
        "{report}"
    );
    assert!(report.contains("target/release"), "{report}");
    // The model's own `cargo test` still works: it builds into Keel's target.
    if exec(ws, "cargo --version", false).success() {
        write(
            ws,
            "Cargo.toml",
            "[package]\nname = \"demo\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
        );
        write(ws, "src/lib.rs", "#[test]\nfn t() {}\n");
        let out = exec(ws, "cargo test --offline -q", false);
        assert!(out.success(), "{}", out.combined_text());
        assert!(ws.join("target/keel/debug/deps").is_dir());
        assert!(!ws.join("target/release").exists());
    } else {
        // CI installs cargo for root; uid 65534 may not reach a root-owned toolchain.
        assert!(
            std::env::var_os("CI").is_none() || !nobody::is_root(),
            "CI has cargo"
        );
        println!("SKIPPED (cargo part): cargo is not installed or not reachable by this user");
    }
}

nobody::user_and_nobody!(cargo_scenario: a_command_cannot_rewrite_what_cargo_test_reuses, a_command_cannot_rewrite_what_cargo_test_reuses_as_nobody);

#[test]
fn the_file_tools_do_not_write_code_loaded_unseen() {
    use keel_tools::{ToolContext, ToolError, ToolRegistry, Workspace, builtin};
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().canonicalize().unwrap().join("ws");
    std::fs::create_dir(&ws).unwrap();
    git_repo(&ws, "data/\n/target\n");
    write(&ws, "target/debug/.fingerprint/demo-1/bin-demo", "fp\n");
    write(
        &ws,
        "target/debug/deps/demo-6608bf82a9088484",
        "#!/bin/sh\n",
    );
    let ctx = ToolContext::new(Workspace::new(&ws).unwrap());
    let mut tools = ToolRegistry::new();
    builtin::register_defaults(&mut tools);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    for path in [
        "data/conftest.py",
        "pwn2.egg-info/entry_points.txt",
        "pluggy.so",
        "pytest.pyc",
        "target/debug/deps/demo-6608bf82a9088484",
    ] {
        let args = serde_json::json!({"path": path, "content": "import os\n", "overwrite": true});
        let r = rt.block_on(tools.execute("create_file", args, &ctx));
        assert!(
            matches!(&r, Err(ToolError::Model(m)) if m.contains("not written by the file tools") || m.contains("build output")),
            "{path}: {r:?}"
        );
    }
    assert!(!ws.join("data/conftest.py").exists());
    assert_eq!(
        std::fs::read_to_string(ws.join("target/debug/deps/demo-6608bf82a9088484")).unwrap(),
        "#!/bin/sh\n"
    );
    // A test file the diff shows is written as before.
    let r = rt.block_on(tools.execute(
        "create_file",
        serde_json::json!({"path": "tests/test_c.py", "content": "def test_c():\n    pass\n"}),
        &ctx,
    ));
    assert!(r.is_ok(), "{r:?}");
}

/// Red-team pass 10, R10-22: past the walk's bound (100,000 loaders' files kept) the check
/// stopped and only the model was told. 100,002 visible decoy `*_test.py` and an ignored
/// `data/conftest.py` in one command nobody approved: the plant is moved aside all the same
/// (git's listing of every untracked file, judged by name), and the user is told — a notice
/// queued for the session's event stream, not only the tool result.
fn past_the_bound(ws: &Path) {
    git_repo(ws, "data/\n");
    std::thread::sleep(Duration::from_millis(1_200));
    let _ = shell::bounds::take_notices(ws);
    let plant = "mkdir -p aaa data && touch aaa/x{000000..050000}_test.py \
        && touch aaa/y{000000..050000}_test.py && echo 'open(\"/tmp/x\", \"w\")' > data/conftest.py";
    let mut req = shell::exec::ExecRequest::new(
        vec![
            shell::exec::shell_program().into_os_string(),
            "-c".into(),
            plant.into(),
        ],
        ws,
    );
    req.timeout = Duration::from_secs(300);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let out = runtime.block_on(shell::exec::run(req)).unwrap();
    assert!(out.success(), "{}", out.combined_text());
    let report = out.quarantined.clone().unwrap_or_default();
    assert!(
        std::fs::symlink_metadata(ws.join("data/conftest.py")).is_err(),
        "the plant stayed live: {report}"
    );
    assert!(
        ws.join("data/conftest.py.quarantined-by-keel").exists(),
        "{report}"
    );
    // The visible decoys are the user's to review: they stay.
    assert!(ws.join("aaa/x000000_test.py").exists(), "{report}");
    let notices = shell::bounds::take_notices(ws);
    assert!(
        notices
            .iter()
            .any(|n| n.text.contains("reached its bound") && n.text.contains("data/conftest.py")),
        "the user is told: {notices:?}"
    );
}

nobody::user_and_nobody!(past_the_bound: past_the_walks_bound_a_plant_is_still_moved_and_told, past_the_walks_bound_a_plant_is_still_moved_and_told_as_nobody);
