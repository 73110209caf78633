//! Red-team pass 9, R9-13: an approval given for one reason lifted the dependency-tree
//! protections for the whole command. `make test` was asked about because its recipe runs
//! `python3 tools/gen.py`; the person said yes, and another recipe line wrote
//! `.venv/lib/python3.11/site-packages/zz.pth` — kept, and run by the user's next `python`.
//! Now an approval lifts them only when the judged line changes installed dependencies,
//! which the approval prompt's reason then says.

// The uid 65534 variant starts the test binary again (tests/shared/nobody.rs).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

#[path = "shared/nobody.rs"]
mod nobody;

use std::path::Path;

use keel_tools::shell::{self, CommandSafety, LintSettings, ShellSettings};
use keel_tools::{ToolContext, ToolRegistry, Workspace, builtin};
use serde_json::json;

const SITE: &str = ".venv/lib/python3.11/site-packages";

fn write(ws: &Path, rel: &str, text: &str) {
    let p = ws.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

fn have(program: &str) -> bool {
    let found = std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(program).is_file()));
    if !found {
        assert!(std::env::var_os("CI").is_none(), "CI needs {program}");
    }
    found
}

fn tools() -> ToolRegistry {
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
    tools
}

fn scenario(ws: &Path) {
    if !keel_tools::sandbox::is_available() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI needs the kernel sandbox"
        );
        println!("SKIPPED: no kernel sandbox here");
        return;
    }
    if !have("python3") || !have("make") {
        println!("SKIPPED: python3 or make is not installed");
        return;
    }
    write(ws, ".gitignore", ".venv/\n");
    write(ws, ".venv/pyvenv.cfg", "home = /usr/bin\n");
    write(ws, &format!("{SITE}/pip/__init__.py"), "# pip\n");
    write(ws, "tools/gen.py", "print('gen')\n");
    write(
        ws,
        "Makefile",
        &format!(
            "test:\n\tpython3 tools/gen.py\n\t@echo 'import os' > {SITE}/zz.pth\n\techo tests ok\n"
        ),
    );
    let safety = CommandSafety::new();
    // The judgement names the write into the environment, so the prompt can say it.
    let judged = safety.classify_in_project("make test", ws);
    assert!(
        judged
            .changes_installed
            .iter()
            .any(|c| c.contains("zz.pth")),
        "{:?}",
        judged.changes_installed
    );
    // A recipe that runs a program and writes nothing installed: no such claim.
    write(
        ws,
        "Makefile",
        "test:\n\tpython3 tools/gen.py\n\techo tests ok\n",
    );
    assert!(
        safety
            .classify_in_project("make test", ws)
            .changes_installed
            .is_empty()
    );

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let tools = tools();
    let mut ctx = ToolContext::new(Workspace::new(ws).unwrap());
    // The person approved `make test` for its program (`python3 tools/gen.py` runs a
    // program): what that program writes the judgement cannot see, so the yes does not
    // cover installed code — the environment stays read-only.
    write(
        ws,
        "tools/gen.py",
        &format!("open('{SITE}/zz.pth', 'w').write('import os')\nprint('gen')\n"),
    );
    ctx.approved = true;
    let _ = rt.block_on(tools.execute("run_command", json!({"command": "make test"}), &ctx));
    assert!(
        !ws.join(SITE).join("zz.pth").exists(),
        "an approval for another reason let the command plant zz.pth"
    );
    // An approved line that says it writes there (the prompt named it) does.
    ctx.approved = true;
    let out = rt.block_on(tools.execute(
        "run_command",
        json!({"command": format!("echo '# patched' >> {SITE}/pip/__init__.py")}),
        &ctx,
    ));
    assert!(
        std::fs::read_to_string(ws.join(SITE).join("pip/__init__.py"))
            .unwrap()
            .contains("patched"),
        "{out:?}"
    );
}

nobody::user_and_nobody!(scenario: an_approval_lifts_only_what_its_prompt_showed, an_approval_lifts_only_what_its_prompt_showed_as_nobody);
