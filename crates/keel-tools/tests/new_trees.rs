//! Red-team pass 9: R9-2, a dependency tree made by a command nobody approved (a `.pth` in
//! `.venv/lib/python3.11/site-packages` before any environment existed, a fresh
//! `node_modules` with npm's hidden lockfile) was adopted as it was by the user's
//! `python3 -m venv .venv` or `npm install`, and ran unconfined; R9-1, decoy environments
//! pushed the real `node_modules` and `.venv` off the read-only list's silent cut. A tree such
//! a command creates is moved aside; the file tools refuse an environment's site directory
//! before it exists; a workspace with more trees than Keel keeps read-only runs such commands
//! read-only, and says so. As root and as uid 65534.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

#[path = "shared/nobody.rs"]
mod nobody;

use std::path::Path;

use keel_tools::shell;

const SITE: &str = ".venv/lib/python3.11/site-packages";

fn run(ws: &Path, cmd: &str, approved: bool) -> (bool, String) {
    let mut req = shell::exec::ExecRequest::new(vec!["sh".into(), "-c".into(), cmd.into()], ws);
    req.approved = approved;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let out = runtime.block_on(shell::exec::run(req)).unwrap();
    (
        out.success(),
        format!(
            "{}\n{}\n{}",
            out.combined_text(),
            out.limit_note.clone().unwrap_or_default(),
            out.quarantined.clone().unwrap_or_default()
        ),
    )
}

fn write(ws: &Path, rel: &str, text: &str) {
    let p = ws.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

fn new_trees_scenario(ws: &Path) {
    let canary = ws.parent().unwrap().join("canary");
    let plant = format!(
        "mkdir -p {SITE} && echo 'import os; open({:?}, \"w\")' > {SITE}/zz.pth \
         && mkdir -p node_modules/tinytest/bin && echo 'evil' > node_modules/tinytest/bin/cli.js",
        canary.display().to_string()
    );
    let (ok, out) = run(ws, &plant, false);
    assert!(ok, "{out}");
    for tree in [".venv", "node_modules"] {
        assert!(!ws.join(tree).exists(), "{tree} stayed: {out}");
        assert!(
            ws.join(format!("{tree}.quarantined-by-keel")).exists(),
            "{out}"
        );
    }
    // The user's own `python3 -m venv .venv` starts clean.
    let venv = std::process::Command::new("python3")
        .args(["-m", "venv", "--without-pip", ".venv"])
        .current_dir(ws)
        .status();
    match venv {
        Ok(s) if s.success() => {
            let ran = std::process::Command::new(ws.join(".venv/bin/python"))
                .args(["-c", "pass"])
                .status()
                .unwrap();
            assert!(ran.success());
            assert!(!canary.exists(), "the planted .pth ran");
        }
        _ => {
            assert!(std::env::var_os("CI").is_none(), "CI needs python3 -m venv");
            println!("SKIPPED (python part): python3 -m venv is not available");
        }
    }
    // An approved install stays.
    let (ok, out) = run(
        ws,
        "mkdir -p web/node_modules/x && echo 1 > web/node_modules/x/i.js",
        true,
    );
    assert!(ok, "{out}");
    assert!(ws.join("web/node_modules/x/i.js").exists(), "{out}");
}

nobody::user_and_nobody!(new_trees_scenario: a_tree_a_command_creates_is_moved_aside, a_tree_a_command_creates_is_moved_aside_as_nobody);

/// Decoys the repository holds (more trees than Keel mounts): a command nobody approved runs
/// read-only, told why; one it makes itself are moved aside like any new tree.
fn decoys_scenario(ws: &Path) {
    if !keel_tools::sandbox::is_available() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI runs the kernel sandbox"
        );
        println!("SKIPPED: no kernel sandbox");
        return;
    }
    // Shipped with the repository: the list would be cut, so the command runs read-only.
    let shipped = ws.join("shipped");
    write(&shipped, "node_modules/tinytest/bin/cli.js", "ok\n");
    for i in 0..140 {
        write(&shipped, &format!("d/.b{i}/pyvenv.cfg"), "");
    }
    let (ok, out) = run(
        &shipped,
        "echo evil > node_modules/tinytest/bin/cli.js; echo x > src.txt",
        false,
    );
    assert!(!ok, "{out}");
    assert!(out.contains("run with the workspace read-only"), "{out}");
    assert_eq!(
        std::fs::read_to_string(shipped.join("node_modules/tinytest/bin/cli.js")).unwrap(),
        "ok\n"
    );
    assert!(!shipped.join("src.txt").exists());
    // Made by a command: moved aside after it (their new names are no trees), so they push
    // nothing off the list.
    let made = ws.join("made");
    write(&made, "node_modules/tinytest/bin/cli.js", "ok\n");
    let (ok, out) = run(
        &made,
        "for i in $(seq 100 240); do mkdir .a$i && touch .a$i/pyvenv.cfg; done",
        false,
    );
    assert!(ok, "{out}");
    assert!(!made.join(".a100").exists(), "{out}");
    let (ok, out) = run(&made, "echo evil > node_modules/tinytest/bin/cli.js", false);
    assert!(!ok, "{out}");
    assert!(!out.contains("run with the workspace read-only"), "{out}");
    assert_eq!(
        std::fs::read_to_string(made.join("node_modules/tinytest/bin/cli.js")).unwrap(),
        "ok\n"
    );
    let (ok, out) = run(&made, "echo x > src.txt", false);
    assert!(ok, "{out}");
}

nobody::user_and_nobody!(decoys_scenario: decoy_trees_do_not_unprotect_the_real_ones, decoy_trees_do_not_unprotect_the_real_ones_as_nobody);

#[test]
fn the_file_tools_do_not_plant_an_environment_before_it_exists() {
    use keel_tools::{ToolContext, ToolError, ToolRegistry, Workspace, builtin};
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().canonicalize().unwrap().join("ws");
    std::fs::create_dir(&ws).unwrap();
    let ctx = ToolContext::new(Workspace::new(&ws).unwrap());
    let mut tools = ToolRegistry::new();
    builtin::register_defaults(&mut tools);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let args = serde_json::json!({"path": format!("{SITE}/zz.pth"), "content": "import os\n"});
    let r = rt.block_on(tools.execute("create_file", args, &ctx));
    assert!(
        matches!(&r, Err(ToolError::Model(m)) if m.contains("installed dependencies")),
        "{r:?}"
    );
    assert!(!ws.join(SITE).join("zz.pth").exists());
}

/// A tree made across two commands (red-team pass 10, R10-3): `.venv/lib/python3.11` in the
/// first (no tree yet), its `site-packages/zz.pth` in the second, more than a second later.
fn across_commands_scenario(ws: &Path) {
    write(ws, ".gitignore", ".venv/\n");
    let (ok, out) = run(ws, "mkdir -p .venv/lib/python3.11", false);
    assert!(ok, "{out}");
    std::thread::sleep(std::time::Duration::from_millis(1_300));
    let (ok, out) = run(
        ws,
        &format!("mkdir -p {SITE} && echo 'import os' > {SITE}/zz.pth"),
        false,
    );
    assert!(ok, "{out}");
    assert!(!ws.join(SITE).join("zz.pth").exists(), "{out}");
    assert!(ws.join(".venv.quarantined-by-keel").exists(), "{out}");
    // A tree the user made meanwhile, which the next command does not touch, stays.
    write(ws, "env2/lib/python3.11/site-packages/ok.txt", "x");
    write(ws, "env2/pyvenv.cfg", "home = /usr/bin\n");
    std::thread::sleep(std::time::Duration::from_millis(1_300));
    let (ok, out) = run(ws, "echo hi > notes.txt", false);
    assert!(ok, "{out}");
    assert!(ws.join("env2/pyvenv.cfg").exists(), "{out}");
}

nobody::user_and_nobody!(across_commands_scenario: a_tree_made_across_commands_is_moved_aside, a_tree_made_across_commands_is_moved_aside_as_nobody);
