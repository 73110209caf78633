//! Red-team pass 7, R7-10 and R7-1's rest: installed dependencies are code the user's own
//! tools run later, and git ignores them. A command rewrote
//! `node_modules/tinytest/bin/cli.js` (run by the user's next `npm test`) and appended a line
//! to `.venv/lib/python3.11/site-packages/pip/__init__.py` (run by `python -m pip`), unasked,
//! with `git status` clean. Every dependency tree is now read-only to a command nobody
//! approved — the kernel's mounts, like `.git` — and an approved install writes as before. As
//! root and as uid 65534.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

#[path = "shared/nobody.rs"]
mod nobody;

use std::path::Path;

use keel_tools::shell;

const PIP: &str = ".venv/lib/python3.11/site-packages/pip/__init__.py";
const CLI: &str = "node_modules/tinytest/bin/cli.js";
const NESTED: &str = "packages/app/node_modules/dep/index.js";

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

fn read(ws: &Path, rel: &str) -> String {
    std::fs::read_to_string(ws.join(rel)).unwrap_or_default()
}

fn scenario(ws: &Path) {
    if !keel_tools::sandbox::is_available() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI runs the kernel sandbox"
        );
        println!("SKIPPED: no kernel sandbox");
        return;
    }
    write(ws, ".gitignore", "node_modules/\n.venv/\n");
    write(
        ws,
        "package.json",
        "{\"scripts\": {\"test\": \"tinytest\"}}\n",
    );
    write(ws, CLI, "console.log('tests ok')\n");
    write(ws, ".venv/pyvenv.cfg", "home = /usr/bin\n");
    write(ws, PIP, "# pip\n");
    write(ws, NESTED, "module.exports = 1\n");

    // The red team's edits, and the ways around a read-only tree: move it, remove it.
    let cmds = [
        format!("printf 'require(\"fs\").writeFileSync(\"/tmp/pwned\")' > {CLI}"),
        format!("echo 'import os' >> {PIP}"),
        format!("echo evil > {NESTED}"),
        "mv node_modules nm2".to_string(),
        "rm -rf .venv".to_string(),
        "mv packages/app/node_modules packages/nm".to_string(),
        "mv packages/app packages/app2".to_string(),
    ];
    for cmd in &cmds {
        let (ok, out) = run(ws, cmd, false);
        assert!(!ok, "`{cmd}` worked: {out}");
        assert_eq!(read(ws, CLI), "console.log('tests ok')\n", "{cmd}: {out}");
        assert_eq!(read(ws, PIP), "# pip\n", "{cmd}: {out}");
        assert_eq!(read(ws, NESTED), "module.exports = 1\n", "{cmd}: {out}");
    }
    let (_, out) = run(ws, &cmds[0], false);
    assert!(
        out.contains("read-only to commands nobody approved") && out.contains("node_modules"),
        "the command is told why: {out}"
    );
    // The rest of the workspace stays writable.
    let (ok, out) = run(
        ws,
        "echo x > src.txt && mkdir -p lib && echo y > lib/a.js",
        false,
    );
    assert!(ok, "{out}");

    // An install the user approved writes as before.
    let (ok, out) = run(ws, &format!("echo '// patched' >> {CLI}"), true);
    assert!(ok, "{out}");
    assert!(read(ws, CLI).contains("// patched"));
    // A tree made by the user since (their own `npm install` in another terminal) is kept too.
    write(ws, "tools/venv9/pyvenv.cfg", "home = /usr/bin\n");
    write(ws, "web/node_modules/x/index.js", "1\n");
    // Made before the command by more than the kernel's coarse clock tick (the slack a
    // tree's birth time is given: one made within it is taken for the command's).
    std::thread::sleep(std::time::Duration::from_millis(200));
    let (_, first) = run(ws, "true", false);
    let (ok, out) = run(ws, "echo evil > web/node_modules/x/index.js", false);
    assert!(!ok, "{first}\n{out}");
    assert_eq!(
        read(ws, "web/node_modules/x/index.js"),
        "1\n",
        "{first}\n{out}"
    );
}

/// Red-team pass 8, R8-9: the file tools wrote `.pth`, `sitecustomize.py` (and, by
/// `apply_patch`, another `.pth`) into the ignored `.venv`, unasked; the user's next `python`
/// ran them. They refuse every path in a dependency tree.
fn file_tools_scenario(ws: &Path) {
    use keel_tools::{ToolContext, ToolError, ToolRegistry, Workspace, builtin};
    write(ws, ".venv/pyvenv.cfg", "home = /usr/bin\n");
    write(ws, PIP, "# pip\n");
    write(ws, CLI, "console.log('tests ok')\n");
    let ctx = ToolContext::new(Workspace::new(ws).unwrap());
    let mut tools = ToolRegistry::new();
    builtin::register_defaults(&mut tools);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let site = ".venv/lib/python3.11/site-packages";
    for (tool, args) in [
        (
            "create_file",
            serde_json::json!({"path": format!("{site}/zz.pth"), "content": "import os\n"}),
        ),
        (
            "create_file",
            serde_json::json!({"path": format!("{site}/sitecustomize.py"), "content": "import os\n"}),
        ),
        (
            "create_file",
            serde_json::json!({"path": CLI, "content": "require('fs')\n", "overwrite": true}),
        ),
        (
            "apply_patch",
            serde_json::json!({"patch": format!("*** Begin Patch\n*** Add File: {site}/yy.pth\n+import os\n*** End Patch\n")}),
        ),
    ] {
        let r = rt.block_on(tools.execute(tool, args.clone(), &ctx));
        assert!(
            matches!(&r, Err(ToolError::Model(m)) if m.contains("installed dependencies")),
            "{tool} {args}: {r:?}"
        );
    }
    for planted in ["zz.pth", "sitecustomize.py", "yy.pth"] {
        assert!(!ws.join(site).join(planted).exists(), "{planted}");
    }
    assert_eq!(read(ws, CLI), "console.log('tests ok')\n");
    // The project's own files are written as before.
    let r = rt.block_on(tools.execute(
        "create_file",
        serde_json::json!({"path": "src/app.py", "content": "x = 1\n"}),
        &ctx,
    ));
    assert!(r.is_ok(), "{r:?}");
}

#[test]
fn the_file_tools_do_not_write_installed_dependencies() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().canonicalize().unwrap().join("ws");
    std::fs::create_dir(&ws).unwrap();
    file_tools_scenario(&ws);
}

#[test]
fn a_command_cannot_change_installed_dependencies() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().canonicalize().unwrap().join("ws");
    std::fs::create_dir(&ws).unwrap();
    scenario(&ws);
}

#[test]
fn a_command_cannot_change_installed_dependencies_as_nobody() {
    let Some(dir) = nobody::child_dir() else {
        nobody::run_child(
            "a_command_cannot_change_installed_dependencies_as_nobody",
            false,
        );
        return;
    };
    let ws = dir.canonicalize().unwrap().join("ws");
    std::fs::create_dir(&ws).unwrap();
    scenario(&ws);
}
