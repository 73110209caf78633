//! Red-team pass 11, R11-3: the memory of what the session made (R10-15: a file one command
//! left visible, hidden by a later command that moves its directory into an ignored one) was
//! this process's: the next `keel run` in the workspace had forgotten it, and `mv pkg
//! data/pkg` hid a visible `pkg/conftest.py` from the user's review, unjudged. The memory is
//! kept in Keel's data directory; a new process reads it. As root and as uid 65534.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

#[path = "shared/nobody.rs"]
mod nobody;

use std::path::Path;
use std::time::Duration;

use keel_tools::shell;

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

fn scenario(ws: &Path) {
    let data = ws.parent().unwrap().join("keel-data");
    std::fs::create_dir_all(&data).unwrap();
    let _ = shell::pending::open(&data);
    std::fs::write(ws.join(".gitignore"), "data/\n").unwrap();
    let ok = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(ws)
        .status()
        .unwrap();
    assert!(ok.success());
    std::thread::sleep(Duration::from_millis(1_200));
    // Session 1: a visible conftest (the diff shows it: it stays).
    let (ok, report) = exec(ws, "mkdir -p pkg && echo 'import os' > pkg/conftest.py");
    assert!(ok, "{report}");
    assert!(ws.join("pkg/conftest.py").exists(), "{report}");
    // A new Keel process: this one's memory is gone, the data directory's is not.
    shell::session_hidden::forget_in_process();
    std::thread::sleep(Duration::from_millis(1_200));
    // Session 2: the directory moved into an ignored one (no time stamp of the file changes).
    let (ok, report) = exec(ws, "mkdir -p data && mv pkg data/pkg");
    assert!(ok, "{report}");
    assert!(
        !ws.join("data/pkg/conftest.py").exists(),
        "the hidden conftest stayed: {report}"
    );
    assert!(report.contains("data/pkg/conftest.py"), "{report}");
}

nobody::user_and_nobody!(scenario: the_memory_of_what_the_session_made_outlives_the_process, the_memory_of_what_the_session_made_outlives_the_process_as_nobody);
