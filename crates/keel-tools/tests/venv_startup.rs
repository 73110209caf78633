//! A command cannot leave code that a workspace virtual environment runs at every start
//! (red-team pass 6, R6-2): a `.pth` planted in an ignored `.venv` ran at the user's next
//! `python`, unconfined. The one runner moves such startup files aside after the command,
//! unless a person approved the command (an approved `pip install -e .` keeps its `.pth`), and
//! Python's own bytecode of a startup module is not taken for a plant. As root and as uid
//! 65534.

// Tests start programs of their own (python): allowed here.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

#[path = "shared/nobody.rs"]
mod nobody;

use std::path::Path;
use std::time::Duration;

use keel_tools::sandbox::SandboxPolicy;
use keel_tools::shell;

const SITE: &str = ".venv/lib/python3.11/site-packages";

fn run(ws: &Path, cmd: &str, approved: bool) -> Option<String> {
    run_with(ws, cmd, approved, SandboxPolicy::WorkspaceWrite)
}

/// Without the kernel sandbox (`shell.sandbox = false`, or a kernel without it): the
/// environment is not read-only then, and the check after the command is what is left.
fn run_unconfined(ws: &Path, cmd: &str, approved: bool) -> Option<String> {
    run_with(ws, cmd, approved, SandboxPolicy::Off)
}

fn run_with(ws: &Path, cmd: &str, approved: bool, policy: SandboxPolicy) -> Option<String> {
    let out = exec(ws, cmd, approved, policy);
    assert!(out.success(), "{cmd}: {}", out.combined_text());
    out.quarantined
}

fn exec(ws: &Path, cmd: &str, approved: bool, policy: SandboxPolicy) -> shell::exec::ExecOutput {
    let mut req = shell::exec::ExecRequest::new(vec!["sh".into(), "-c".into(), cmd.into()], ws);
    req.approved = approved;
    req.policy = policy;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(shell::exec::run(req)).unwrap()
}

/// A virtual environment as `python -m venv` and an earlier install left it, older than the
/// next command.
fn venv(ws: &Path) {
    let site = ws.join(SITE);
    std::fs::create_dir_all(&site).unwrap();
    std::fs::create_dir_all(ws.join(".venv/bin")).unwrap();
    std::fs::write(ws.join(".venv/pyvenv.cfg"), "home = /usr/bin\n").unwrap();
    std::fs::write(ws.join(".venv/bin/activate"), "# activate\n").unwrap();
    std::fs::write(site.join("_virtualenv.pth"), "import _virtualenv\n").unwrap();
    std::fs::write(site.join("_virtualenv.py"), "X = 1\n").unwrap();
    std::fs::write(ws.join(".gitignore"), ".venv/\n").unwrap();
    // Older than the command by more than the check's second of slack.
    std::thread::sleep(Duration::from_millis(1_200));
}

fn scenario(ws: &Path) {
    venv(ws);
    let site = ws.join(SITE);
    let canary = ws.join("canary");
    let plant = format!(
        "printf 'import os; open(\"{}\", \"w\")\\n' > {SITE}/evil.pth && echo 'import os' > {SITE}/sitecustomize.py && echo 'X = 2' > {SITE}/_virtualenv.py && printf '#!/bin/sh\\necho pwned\\n' > .venv/bin/pytest && echo '# evil' >> .venv/bin/activate",
        canary.display()
    );
    // Confined, nobody approving: the environment is read-only to the command
    // ([`keel_tools::shell`]'s dependency trees, R7-10).
    if keel_tools::sandbox::is_available() {
        let out = exec(ws, &plant, false, SandboxPolicy::WorkspaceWrite);
        assert!(!out.success(), "{}", out.combined_text());
        assert!(!site.join("evil.pth").exists());
        assert_eq!(
            std::fs::read_to_string(site.join("_virtualenv.py")).unwrap(),
            "X = 1\n"
        );
    }
    // Unconfined: what the red team planted, and its other forms, moved aside after.
    let report = run_unconfined(ws, &plant, false).expect("nothing was reported");
    for planted in [
        format!("{SITE}/evil.pth"),
        format!("{SITE}/sitecustomize.py"),
        format!("{SITE}/_virtualenv.py"),
        ".venv/bin/pytest".to_string(),
        ".venv/bin/activate".to_string(),
    ] {
        assert!(!ws.join(&planted).exists(), "{planted} stayed: {report}");
        assert!(
            ws.join(format!("{planted}.quarantined-by-keel")).exists(),
            "{planted} was not moved aside: {report}"
        );
        assert!(report.contains(&planted), "{planted}: {report}");
    }
    assert!(
        site.join("_virtualenv.pth").exists(),
        "an unchanged .pth is left alone"
    );
    // The user's next Python reads the environment's site directory: the plant does not run.
    let python = std::process::Command::new("python3")
        .args(["-S", "-c", "import site, sys; site.addsitedir(sys.argv[1])"])
        .arg(&site)
        .output();
    if python.is_ok() {
        assert!(!canary.exists(), "the planted .pth ran");
    } else {
        assert!(std::env::var_os("CI").is_none(), "CI needs python3");
        println!("SKIPPED (python part): python3 is not installed");
    }

    // An approved install keeps what it writes (an editable install's .pth, a console script).
    let report = run(
        ws,
        &format!(
            "echo 'import __editable___pkg_finder' > {SITE}/__editable__.pkg-1.0.pth && echo 'X = 3' > {SITE}/__editable___pkg_finder.py && printf '#!/bin/sh\\n' > .venv/bin/pkg"
        ),
        true,
    );
    assert!(report.is_none(), "{report:?}");
    assert!(site.join("__editable__.pkg-1.0.pth").exists());
    assert!(ws.join(".venv/bin/pkg").exists());

    // Bytecode of a startup module written while the command runs is removed (Python may
    // load it without reading the source; it compiles the source again); the module stays.
    std::thread::sleep(Duration::from_millis(1_200));
    let report = run_unconfined(
        ws,
        &format!(
            "mkdir -p {SITE}/__pycache__ && echo bytecode > {SITE}/__pycache__/__editable___pkg_finder.cpython-311.pyc"
        ),
        false,
    )
    .unwrap_or_default();
    assert!(report.contains("removed (Python bytecode"), "{report}");
    assert!(!report.contains("moved to"), "{report}");
    assert!(site.join("__editable___pkg_finder.py").exists());
    assert!(
        !site
            .join("__pycache__/__editable___pkg_finder.cpython-311.pyc")
            .exists(),
        "bytecode Python may load instead of the source stayed"
    );

    // A new environment made by a command nobody approved is moved aside whole (red-team
    // pass 9, R9-2: the user's `python3 -m venv` adopts what is there); an approved one stays.
    let make = "mkdir -p env2/bin env2/lib/python3.11/site-packages && echo 'home = /usr/bin' > env2/pyvenv.cfg && printf '#!/bin/sh\\n' > env2/bin/python";
    let report = run(ws, make, false).expect("nothing was reported");
    assert!(!ws.join("env2").exists(), "{report}");
    assert!(ws.join("env2.quarantined-by-keel/bin/python").exists());
    let report = run(ws, make, true);
    assert!(report.is_none(), "{report:?}");
    assert!(ws.join("env2/bin/python").exists());
}

/// Red-team pass 7, R7-2: an "unchecked-hash" `src/__pycache__/app.<tag>.pyc` (Python loads it
/// without looking at `app.py`) and a sourceless `pytest.pyc` at the root (run by the user's
/// `python3 -m pytest`), both ignored by the usual `.gitignore`.
fn bytecode_scenario(ws: &Path) {
    let Ok(tag) = std::process::Command::new("python3")
        .args(["-c", "import sys; print(sys.implementation.cache_tag)"])
        .output()
    else {
        assert!(std::env::var_os("CI").is_none(), "CI needs python3");
        println!("SKIPPED: python3 is not installed");
        return;
    };
    let tag = String::from_utf8_lossy(&tag.stdout).trim().to_string();
    let scratch = ws.parent().unwrap().join("scratch");
    std::fs::create_dir_all(&scratch).unwrap();
    let canary = scratch.join("canary");
    std::fs::create_dir_all(ws.join("src")).unwrap();
    std::fs::write(ws.join("src/app.py"), "def f():\n    return 1\n").unwrap();
    std::fs::write(
        scratch.join("evil.py"),
        format!(
            "open({:?}, 'w')\ndef f():\n    return 1\n",
            canary.display().to_string()
        ),
    )
    .unwrap();
    let compiled = std::process::Command::new("python3")
        .args([
            "-c",
            "import py_compile, sys; py_compile.compile(sys.argv[1], cfile=sys.argv[2], invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)",
        ])
        .arg(scratch.join("evil.py"))
        .arg(scratch.join("evil.pyc"))
        .status()
        .unwrap();
    assert!(compiled.success());
    std::fs::write(ws.join(".gitignore"), "__pycache__/\n*.py[cod]\n").unwrap();
    std::thread::sleep(Duration::from_millis(1_200));
    let evil = scratch.join("evil.pyc");
    let report = run(
        ws,
        &format!(
            "mkdir -p src/__pycache__ && cp {e} src/__pycache__/app.{tag}.pyc && cp {e} pytest.pyc",
            e = evil.display()
        ),
        false,
    )
    .unwrap_or_default();
    for planted in [
        format!("src/__pycache__/app.{tag}.pyc"),
        "pytest.pyc".to_string(),
    ] {
        assert!(!ws.join(&planted).exists(), "{planted} stayed: {report}");
        assert!(report.contains(&planted), "{planted}: {report}");
    }
    // The user's next import runs the source.
    let out = std::process::Command::new("python3")
        .args(["-c", "import app; print(app.f())"])
        .current_dir(ws.join("src"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(!canary.exists(), "the planted bytecode ran");
}

nobody::user_and_nobody!(bytecode_scenario: bytecode_a_command_writes_is_removed, bytecode_a_command_writes_is_removed_as_nobody);

nobody::user_and_nobody!(scenario: a_command_cannot_leave_code_a_virtualenv_runs_at_start, a_command_cannot_leave_code_a_virtualenv_runs_at_start_as_nobody);

/// Red-team pass 8, R8-10: padding `lib/` with directories (only 16 were looked at) hid a
/// `.pth` planted in `lib/python3.11/site-packages`. An environment larger than the check's
/// bounds is made inert instead: its `pyvenv.cfg` is moved aside.
fn padded_scenario(ws: &Path) {
    let report = run(
        ws,
        "mkdir -p env3/bin env3/lib/python3.11/site-packages && echo 'home = /usr/bin' > env3/pyvenv.cfg && for i in $(seq 1 40); do mkdir -p env3/lib/python0-$i; done && echo 'import os' > env3/lib/python3.11/site-packages/zz.pth",
        false,
    )
    .expect("nothing was reported");
    assert!(!ws.join("env3/pyvenv.cfg").exists(), "{report}");
    assert!(report.contains("env3"), "{report}");
}

nobody::user_and_nobody!(padded_scenario: a_padded_environment_is_made_inert, a_padded_environment_is_made_inert_as_nobody);

/// A padded environment made inert is not adopted by the user's re-creation of it (red-team
/// pass 8, R8-10's rest): `python3 -m venv env5` over the inert directory had kept the planted
/// `.pth` of its old `site-packages`.
fn recreated_scenario(ws: &Path) {
    let python = std::process::Command::new("python3")
        .args(["-m", "venv", "--without-pip", "env5"])
        .current_dir(ws)
        .status();
    if !python.is_ok_and(|s| s.success()) {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI needs python3 with venv"
        );
        println!("SKIPPED: python3 -m venv is not available");
        return;
    }
    std::fs::write(ws.join(".gitignore"), "env5/\n").unwrap();
    std::thread::sleep(Duration::from_millis(1_200));
    let canary = ws.parent().unwrap().join("venv-canary");
    let plant = format!(
        "for i in $(seq 1 40); do mkdir -p env5/lib/python0-$i; done && for d in env5/lib/python3*/site-packages; do echo 'import os; open({:?}, \"w\")' > $d/zz.pth; done",
        canary.display().to_string()
    );
    let report = run_unconfined(ws, &plant, false).expect("nothing was reported");
    assert!(!ws.join("env5/pyvenv.cfg").exists(), "{report}");
    assert!(report.contains("--clear"), "{report}");
    // The user re-creates it as plainly as possible, then runs it.
    let ok = std::process::Command::new("python3")
        .args(["-m", "venv", "--without-pip", "env5"])
        .current_dir(ws)
        .status()
        .unwrap();
    assert!(ok.success());
    let ok = std::process::Command::new(ws.join("env5/bin/python"))
        .args(["-c", "pass"])
        .status()
        .unwrap();
    assert!(ok.success());
    assert!(!canary.exists(), "the planted .pth ran: {report}");
}

nobody::user_and_nobody!(recreated_scenario: an_inert_environment_recreated_runs_nothing_planted, an_inert_environment_recreated_runs_nothing_planted_as_nobody);
