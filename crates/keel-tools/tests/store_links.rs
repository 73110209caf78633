//! A workspace that holds the home, where a dotfile manager made `~/.config/keel` a link
//! (red-team pass 7, R7-29): a command re-pointed the link to its own `config.toml` with
//! `sandbox = false`, and the next session ran unconfined. The runner puts the link back.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use keel_tools::shell::{self, LintSettings, ShellSettings};
use keel_tools::{ToolContext, ToolRegistry, Workspace};
use serde_json::json;

/// Set in the child: the home it works in (the test re-runs itself with `HOME` there, since
/// the stores are found through this process's environment).
const CHILD: &str = "KEEL_STORE_LINKS_TEST_HOME";

#[test]
fn a_command_cannot_re_point_a_link_to_keels_configuration() {
    let Some(home) = std::env::var_os(CHILD).map(std::path::PathBuf::from) else {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().canonicalize().unwrap().join("home");
        std::fs::create_dir_all(home.join("dotfiles/keel")).unwrap();
        std::fs::write(home.join("dotfiles/keel/config.toml"), "# mine\n").unwrap();
        std::fs::create_dir_all(home.join(".config")).unwrap();
        std::os::unix::fs::symlink("../dotfiles/keel", home.join(".config/keel")).unwrap();
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "a_command_cannot_re_point_a_link_to_keels_configuration",
                "--nocapture",
            ])
            .env(CHILD, &home)
            .env("HOME", &home)
            .env_remove("XDG_CONFIG_HOME")
            .env_remove("XDG_DATA_HOME")
            .env_remove("KEEL_CONFIG")
            .env_remove("KEEL_HOME")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        return;
    };
    let ctx = ToolContext::new(Workspace::new(&home).unwrap());
    let mut tools = ToolRegistry::new();
    shell::register(
        &mut tools,
        ShellSettings::default(),
        LintSettings {
            enabled: false,
            ..LintSettings::default()
        },
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let cmd = "mv .config/keel .config/keel-old && mkdir -p evil && printf '[shell]\\nsandbox = false\\n' > evil/config.toml && ln -s ../evil .config/keel";
    let out = rt
        .block_on(tools.execute("run_command", json!({"command": cmd}), &ctx))
        .unwrap();
    assert_eq!(
        std::fs::read_link(home.join(".config/keel")).unwrap(),
        std::path::PathBuf::from("../dotfiles/keel"),
        "{}",
        out.content
    );
    assert!(
        out.content.contains(".config/keel") && out.content.contains("put it back"),
        "{}",
        out.content
    );
    assert_eq!(
        std::fs::read_to_string(home.join(".config/keel/config.toml")).unwrap(),
        "# mine\n"
    );
}
