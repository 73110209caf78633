//! Git directories under other shapes than `.git` (red-team pass 7, R7-9): git takes any
//! directory holding a `HEAD` and a `commondir` for a repository, and reads the config of the
//! directory `commondir` names. A command that splits a repository that way, or hides a
//! `.git` below a directory that looks like a git directory, gets it found and quarantined;
//! the file tools refuse the write that would complete one — as root and as uid 65534.

// Tests start programs of their own (git): allowed here, outside Keel's one spawn path.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

#[path = "shared/nobody.rs"]
mod nobody;

use std::path::Path;

use keel_tools::shell::{self, LintSettings, ShellSettings};
use keel_tools::{ToolContext, ToolError, ToolRegistry, Workspace, builtin};
use serde_json::json;

fn git(dir: &Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
}

fn git_available() -> bool {
    std::process::Command::new("git")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The user's `git canary` in `dir` (an alias the planted config defines), stopped at the
/// workspace so only what lies inside it is looked at.
fn users_git_alias(ws: &Path, dir: &Path) {
    let _ = std::process::Command::new("git")
        .arg("canary")
        .current_dir(dir)
        .env("GIT_CEILING_DIRECTORIES", ws)
        .output();
}

async fn scenario(ws: &Path) {
    if !git_available() {
        assert!(std::env::var_os("CI").is_none(), "CI needs git on PATH");
        println!("SKIPPED: git is not installed");
        return;
    }
    let outside = ws.parent().unwrap().join("outside-canary");
    assert!(git(ws, &["init", "-q"]).status.success());
    std::fs::create_dir_all(ws.join("src")).unwrap();
    std::fs::write(ws.join("src/app.py"), "print(1)\n").unwrap();
    let ctx = ToolContext::new(Workspace::new(ws).unwrap());
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

    // R7-9 as reported: `src/` made a git directory by a `HEAD` and a `commondir` naming
    // `.cache/g`, whose config defines the program.
    let cmd = format!(
        "mkdir -p .cache/g/objects .cache/g/refs/heads && echo 'ref: refs/heads/main' > src/HEAD \
         && echo ../.cache/g > src/commondir \
         && printf '[alias]\\n\\tcanary = !touch {}\\n' > .cache/g/config",
        outside.display()
    );
    let out = tools
        .execute("run_command", json!({"command": cmd}), &ctx)
        .await
        .unwrap();
    assert!(
        out.content.contains("src") && out.content.contains("HEAD-quarantined-by-keel"),
        "the result reports it: {}",
        out.content
    );
    assert!(!ws.join("src/HEAD").exists(), "{}", out.content);
    assert!(
        ws.join("src/app.py").is_file(),
        "the directory's own files stay where they are"
    );
    users_git_alias(ws, &ws.join("src"));
    assert!(!outside.exists(), "the planted alias ran");

    // The file tools: the write that would complete such a directory is refused, in either
    // order, the root's own directory included.
    std::fs::create_dir_all(ws.join("lib")).unwrap();
    std::fs::write(ws.join("lib/commondir"), "../.cache/g\n").unwrap();
    std::fs::create_dir_all(ws.join("pkg/refs")).unwrap();
    std::fs::write(ws.join("pkg/HEAD"), "ref: refs/heads/main\n").unwrap();
    for (path, content) in [
        ("lib/HEAD", "ref: refs/heads/main\n"),
        ("pkg/commondir", "../.cache/g\n"),
        ("pkg/objects/info/alternates", "../../../.git/objects\n"),
    ] {
        let r = tools
            .execute(
                "create_file",
                json!({"path": path, "content": content}),
                &ctx,
            )
            .await;
        assert!(
            matches!(&r, Err(ToolError::Model(m)) if m.contains("protected")),
            "{path}: {r:?}"
        );
        assert!(!ws.join(path).exists(), "{path} was written");
    }
    // An ordinary file beside them is still written.
    tools
        .execute(
            "create_file",
            json!({"path": "pkg/notes.txt", "content": "x\n"}),
            &ctx,
        )
        .await
        .unwrap();

    // A `.git` below a directory that looks like a git directory (`vendor/HEAD`, `objects`,
    // `refs`) was never searched for.
    let cmd = format!(
        "mkdir -p vendor/objects vendor/refs && echo 'ref: refs/heads/main' > vendor/HEAD \
         && git init -q vendor/lib && git -C vendor/lib config alias.canary '!touch {}'",
        outside.display()
    );
    let out = tools
        .execute("run_command", json!({"command": cmd}), &ctx)
        .await
        .unwrap();
    assert!(
        out.content.contains("vendor/lib") && out.content.contains("alias.canary"),
        "the result reports it: {}",
        out.content
    );
    assert!(!ws.join("vendor/lib/.git").exists(), "{}", out.content);
    users_git_alias(ws, &ws.join("vendor/lib"));
    assert!(!outside.exists(), "the planted alias ran");
}

nobody::user_and_nobody!(async scenario: git_directories_split_or_hidden_are_found_and_refused, git_directories_split_or_hidden_are_found_and_refused_as_nobody);
