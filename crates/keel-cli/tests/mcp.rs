//! `keel mcp`: a project's `.mcp.json` server is listed as not approved until `keel mcp add`
//! approves it, a changed definition needs approving again, `keel mcp test` starts it and
//! lists its tools, and a project's `.keel/config.toml` cannot define servers.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{Env, assert_exit};

/// The Python that has the MCP SDK, by absolute path (the temp HOME hides pyenv's shims).
fn python_with_mcp() -> Option<String> {
    let out = std::process::Command::new("python3")
        .args([
            "-c",
            "import sys, mcp.server.mcpserver; print(sys.executable)",
        ])
        .output()
        .ok()
        .filter(|o| o.status.success());
    if out.is_none() {
        assert!(
            std::env::var("CI").map_or(true, |v| v != "true"),
            "the Python MCP SDK is missing; .ci/run installs it"
        );
        eprintln!("SKIPPED: the Python MCP SDK is missing (pip install 'mcp>=2,<3')");
    }
    out.map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
}

fn mcp_json(env: &Env, python: &str, extra: &str) {
    let script = common::repo_root().join("crates/keel-mcp/tests/servers/py_server.py");
    let args: Vec<String> = [script.display().to_string(), extra.to_string()]
        .into_iter()
        .filter(|a| !a.is_empty())
        .collect();
    let json = serde_json::json!({"mcpServers": {"py": {"command": python, "args": args}}});
    std::fs::write(env.work.join(".mcp.json"), json.to_string()).unwrap();
}

fn stdout(env: &Env, args: &[&str]) -> String {
    let out = env.keel().args(args).output().unwrap();
    assert_exit(&out, 0);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn project_servers_need_approval_and_test_lists_tools() {
    let Some(python) = python_with_mcp() else {
        return;
    };
    let env = Env::new();
    mcp_json(&env, &python, "");
    assert!(stdout(&env, &["mcp", "list"]).contains("NOT APPROVED"));
    let refused = env.keel().args(["mcp", "test", "py"]).output().unwrap();
    assert_exit(&refused, 2);
    assert!(String::from_utf8_lossy(&refused.stderr).contains("keel mcp add py"));

    assert!(stdout(&env, &["mcp", "add", "py"]).contains("Approved"));
    assert!(stdout(&env, &["mcp", "list"]).contains("deferred"));
    let tested = stdout(&env, &["mcp", "test", "py"]);
    assert!(tested.contains("ready, 4 tool(s)"), "{tested}");
    assert!(tested.contains("mcp__py__echo"), "{tested}");

    // A changed definition is not the approved one.
    mcp_json(&env, &python, "--slow-start=0");
    assert!(stdout(&env, &["mcp", "list"]).contains("NOT APPROVED"));
    let doctor = env.keel().arg("doctor").output().unwrap();
    let text = String::from_utf8_lossy(&doctor.stdout);
    assert!(
        text.contains("mcp py") && text.contains("not approved"),
        "{text}"
    );
}

#[test]
fn user_servers_are_added_and_removed_and_a_project_config_cannot_define_one() {
    let env = Env::new();
    let added = stdout(
        &env,
        &["mcp", "add", "mine", "--", "my-mcp-server", "--flag"],
    );
    assert!(added.contains("Added `mine`"), "{added}");
    let list = stdout(&env, &["mcp", "list"]);
    assert!(
        list.contains("mine") && list.contains("stdio: my-mcp-server --flag"),
        "{list}"
    );
    assert!(stdout(&env, &["mcp", "remove", "mine"]).contains("Removed"));
    assert!(stdout(&env, &["mcp", "list"]).contains("No MCP servers"));

    env.config("[mcp.servers.evil]\ncommand = \"sh\"\n");
    let out = env.keel().args(["mcp", "list"]).output().unwrap();
    assert_exit(&out, 0);
    assert!(String::from_utf8_lossy(&out.stdout).contains("No MCP servers"));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("`mcp`"),
        "{out:?}"
    );
}
