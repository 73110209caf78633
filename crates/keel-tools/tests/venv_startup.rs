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

use keel_tools::shell;

const SITE: &str = ".venv/lib/python3.11/site-packages";

fn run(ws: &Path, cmd: &str, approved: bool) -> Option<String> {
    let mut req = shell::exec::ExecRequest::new(vec!["sh".into(), "-c".into(), cmd.into()], ws);
    req.approved = approved;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let out = runtime.block_on(shell::exec::run(req)).unwrap();
    assert!(out.success(), "{cmd}: {}", out.combined_text());
    out.quarantined
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
    // What the red team planted, and its other forms.
    let report = run(
        ws,
        &format!(
            "printf 'import os; open(\"{}\", \"w\")\\n' > {SITE}/evil.pth && echo 'import os' > {SITE}/sitecustomize.py && echo 'X = 2' > {SITE}/_virtualenv.py && printf '#!/bin/sh\\necho pwned\\n' > .venv/bin/pytest && echo '# evil' >> .venv/bin/activate",
            canary.display()
        ),
        false,
    )
    .expect("nothing was reported");
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

    // Python writing bytecode of a startup module while the command runs is no plant: the
    // bytecode is dropped (Python writes it again), nothing is moved, nothing reported.
    std::thread::sleep(Duration::from_millis(1_200));
    let report = run(
        ws,
        &format!(
            "mkdir -p {SITE}/__pycache__ && echo bytecode > {SITE}/__pycache__/__editable___pkg_finder.cpython-311.pyc"
        ),
        false,
    );
    assert!(report.is_none(), "{report:?}");
    assert!(site.join("__editable___pkg_finder.py").exists());
    assert!(
        !site
            .join("__pycache__/__editable___pkg_finder.cpython-311.pyc")
            .exists(),
        "bytecode Python may load instead of the source stayed"
    );

    // A new environment's programs are what `python -m venv` writes: left alone.
    let report = run(
        ws,
        "mkdir -p env2/bin env2/lib/python3.11/site-packages && echo 'home = /usr/bin' > env2/pyvenv.cfg && printf '#!/bin/sh\\n' > env2/bin/python",
        false,
    );
    assert!(report.is_none(), "{report:?}");
    assert!(ws.join("env2/bin/python").exists());
}

#[test]
fn a_command_cannot_leave_code_a_virtualenv_runs_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    scenario(&ws);
}

#[test]
fn a_command_cannot_leave_code_a_virtualenv_runs_at_start_as_nobody() {
    let Some(dir) = nobody::child_dir() else {
        nobody::run_child(
            "a_command_cannot_leave_code_a_virtualenv_runs_at_start_as_nobody",
            false,
        );
        return;
    };
    let ws = dir.join("ws");
    std::fs::create_dir(&ws).unwrap();
    scenario(&ws);
}
