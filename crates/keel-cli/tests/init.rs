//! `keel init`: stack detection into `.keel/project.md`, the user's config left alone on a
//! second run, and the project prompt layer reading the detected stack.

// Tests start programs of their own (the keel binary, git fixtures, tmux, servers): allowed
// here, outside Keel's one spawn path (docs/SECURITY.md, "One way to start a process").
#![allow(
    clippy::disallowed_macros,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::disallowed_methods
)]

mod common;

use common::*;

fn keel_ok(env: &Env, args: &[&str]) -> String {
    let out = env.keel().args(args).output().unwrap();
    assert_exit(&out, 0);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn init_in_a_git_repository_detects_the_stack_and_leaves_the_config_alone() {
    let env = Env::new();
    let git = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(&env.work)
        .status();
    if !git.is_ok_and(|s| s.success()) {
        assert!(std::env::var_os("CI").is_none(), "git is missing in CI");
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED init_in_a_git_repository…: git is not installed"
        );
        return;
    }
    keel_ok(&env, &["init"]);
    let project = std::fs::read_to_string(env.work.join(".keel/project.md")).unwrap();
    assert!(project.contains("- Version control: git"), "{project}");
    assert!(!project.contains("new project"), "{project}");
    let config = std::fs::read_to_string(env.work.join(".keel/config.toml")).unwrap();
    // A user's own edit survives a second init.
    std::fs::write(
        env.work.join(".keel/config.toml"),
        format!("{config}\n# mine\n"),
    )
    .unwrap();
    assert!(keel_ok(&env, &["init"]).contains("nothing changed"));
    assert!(
        std::fs::read_to_string(env.work.join(".keel/config.toml"))
            .unwrap()
            .ends_with("# mine\n")
    );
    // Keel's own files stay out of `git status`: after an index and a snapshot, only the
    // project's own .keel files are new.
    keel_ok(&env, &["index"]);
    assert!(env.work.join(".keel/index.db").exists());
    std::fs::create_dir_all(env.work.join(".keel/snapshots")).unwrap();
    std::fs::write(env.work.join(".keel/snapshots/HEAD"), "ref: x\n").unwrap();
    let status = std::process::Command::new("git")
        .args([
            "status",
            "--porcelain",
            "--untracked-files=all",
            "--",
            ".keel",
        ])
        .current_dir(&env.work)
        .output()
        .unwrap();
    let status = String::from_utf8_lossy(&status.stdout);
    assert!(!status.contains("index.db"), "{status}");
    assert!(!status.contains("snapshots"), "{status}");
    assert!(status.contains(".keel/config.toml"), "{status}");
    // The project prompt layer reads the detected stack.
    let engine_prompt = keel_engine::prompt::system_prompt(&env.work);
    assert!(
        engine_prompt.contains("# Tech stack"),
        "the stack is in the project layer"
    );
}
