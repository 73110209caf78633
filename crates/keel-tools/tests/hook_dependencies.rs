//! Red-team pass 5, R5-16: husky's default hook runs `npx lint-staged`, and what that loads is
//! a whole dependency tree and the tool's configuration. One ordinary command rewrote a module
//! in `node_modules` (not the `.bin` link, its target or the package directory, which were
//! protected) or created lint-staged's configuration, and the user's next `git commit` ran it
//! unconfined. The trees and configuration the hooks load are now read-only (missing
//! configuration a command creates is moved aside) — as root and as uid 65534.

// Tests start programs of their own (git): allowed here, outside Keel's one spawn path.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

#[path = "shared/nobody.rs"]
mod nobody;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use keel_tools::shell::{self, LintSettings, ShellSettings};
use keel_tools::{ToolContext, ToolError, ToolRegistry, Workspace, builtin};
use serde_json::json;

fn git_available() -> bool {
    std::process::Command::new("git")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

fn write(ws: &Path, rel: &str, text: &str, exec: bool) {
    let path = ws.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, text).unwrap();
    if exec {
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
}

async fn scenario(ws: &Path) {
    if !git_available() {
        assert!(std::env::var_os("CI").is_none(), "CI needs git on PATH");
        println!("SKIPPED: git is not installed");
        return;
    }
    let canary = ws.parent().unwrap().join("outside-canary");
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .current_dir(ws)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_AUTHOR_NAME", "u")
            .env("GIT_AUTHOR_EMAIL", "u@example.com")
            .env("GIT_COMMITTER_NAME", "u")
            .env("GIT_COMMITTER_EMAIL", "u@example.com")
            .output()
            .unwrap()
    };
    assert!(git(&["init", "-q"]).status.success());
    assert!(
        git(&["config", "core.hooksPath", ".husky"])
            .status
            .success()
    );
    // husky 9: the hook runs with `node_modules/.bin` on its PATH (`npx lint-staged` resolves
    // the same program); lint-staged loads its dependencies from anywhere in `node_modules`.
    write(
        ws,
        ".husky/pre-commit",
        "#!/bin/sh\nexport PATH=\"$PWD/node_modules/.bin:$PATH\"\nlint-staged\n",
        true,
    );
    write(
        ws,
        "node_modules/lint-staged/bin/lint-staged.js",
        "#!/bin/sh\n. \"$PWD/node_modules/listr2/run.sh\"\n",
        true,
    );
    write(ws, "node_modules/listr2/run.sh", "true\n", false);
    std::fs::create_dir_all(ws.join("node_modules/.bin")).unwrap();
    std::os::unix::fs::symlink(
        "../lint-staged/bin/lint-staged.js",
        ws.join("node_modules/.bin/lint-staged"),
    )
    .unwrap();
    let manifest = "{\"name\":\"x\",\"lint-staged\":{\"*.js\":\"eslint\"}}\n";
    write(ws, "package.json", manifest, false);
    write(ws, "README.md", "hi\n", false);
    // The user's setup works before Keel runs anything.
    assert!(git(&["add", "README.md"]).status.success());
    let first = git(&["commit", "-q", "-m", "first"]);
    assert!(first.status.success(), "{first:?}");

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
    for path in [
        "node_modules/listr2/run.sh",
        ".lintstagedrc.json",
        "lint-staged.config.mjs",
        "package.json",
    ] {
        let _ = tools
            .execute("read_file", json!({"path": path}), &ctx)
            .await;
        let r = tools
            .execute(
                "create_file",
                json!({"path": path, "content": "echo RAN\n", "overwrite": true}),
                &ctx,
            )
            .await;
        assert!(
            matches!(&r, Err(ToolError::Model(m)) if m.contains("read-only")),
            "{path}: {r:?}"
        );
    }
    let cmd = format!(
        "printf 'echo DEP-RAN >> {c}\\n' >> node_modules/listr2/run.sh; printf '{{\"*\": \"sh -c \\\\\"echo CONFIG-RAN >> {c}\\\\\"\"}}' > .lintstagedrc.json; sed -i s/eslint/evil/ package.json; echo done",
        c = canary.display()
    );
    let out = tools
        .execute("run_command", json!({"command": cmd}), &ctx)
        .await
        .unwrap();
    assert!(
        out.content.contains("`.lintstagedrc.json`"),
        "the result names the moved configuration: {}",
        out.content
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("node_modules/listr2/run.sh")).unwrap(),
        "true\n"
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("package.json")).unwrap(),
        manifest
    );
    assert!(!ws.join(".lintstagedrc.json").exists());
    // Other files stay writable, to the file tools and to commands.
    let r = tools
        .execute(
            "create_file",
            json!({"path": "src/a.js", "content": "x\n"}),
            &ctx,
        )
        .await;
    assert!(r.is_ok(), "{r:?}");
    let out = tools
        .execute(
            "run_command",
            json!({"command": "echo more >> README.md"}),
            &ctx,
        )
        .await
        .unwrap();
    assert!(!out.content.contains("quarantined"), "{}", out.content);
    assert_eq!(
        std::fs::read_to_string(ws.join("README.md")).unwrap(),
        "hi\nmore\n"
    );
    // The user's own git afterwards, outside any sandbox: nothing the command wrote runs.
    let _ = git(&["add", "README.md"]);
    let commit = git(&["commit", "-q", "-m", "x"]);
    assert!(commit.status.success(), "{commit:?}");
    assert!(
        !canary.exists(),
        "ran at the user's git commit: {:?}",
        std::fs::read_to_string(&canary)
    );
}

nobody::user_and_nobody!(async scenario: what_a_hook_loads_from_the_work_tree_is_read_only, what_a_hook_loads_from_the_work_tree_is_read_only_as_nobody);

/// Red-team pass 6, R6-9: lint-staged reads its configuration in every directory of the work
/// tree (`git ls-files --cached --others --exclude-standard -- ':(glob)**/.lintstagedrc.json'`
/// …, a `package.json` holding `"lint-staged"` at any depth), tracked or not; only the root's
/// were protected. The hook here finds them by the same rule and runs what they say.
async fn nested_configuration(ws: &Path) {
    if !git_available() {
        assert!(std::env::var_os("CI").is_none(), "CI needs git on PATH");
        println!("SKIPPED: git is not installed");
        return;
    }
    let canary = ws.parent().unwrap().join("outside-canary");
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .current_dir(ws)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_AUTHOR_NAME", "u")
            .env("GIT_AUTHOR_EMAIL", "u@example.com")
            .env("GIT_COMMITTER_NAME", "u")
            .env("GIT_COMMITTER_EMAIL", "u@example.com")
            .output()
            .unwrap()
    };
    assert!(git(&["init", "-q"]).status.success());
    assert!(
        git(&["config", "core.hooksPath", ".husky"])
            .status
            .success()
    );
    // lint-staged's discovery, in shell: every configuration file at any depth, and every
    // package.json with a "lint-staged" section; each "runs" by being sourced.
    write(
        ws,
        ".husky/pre-commit",
        "#!/bin/sh\nfor f in $(git ls-files --cached --others --exclude-standard -- ':(glob)**/.lintstagedrc.json' ':(glob)**/lint-staged.config.js' ':(glob)**/package.json'); do\n  case \"$f\" in *package.json) grep -q lint-staged \"$f\" && sh -c \"$(sed -n 's/.*\"lint-staged\": *\"\\(.*\\)\".*/\\1/p' \"$f\")\" ;; *) sh \"$f\" ;; esac\ndone\nexit 0\n",
        true,
    );
    write(ws, "web/package.json", "{\"name\":\"web\"}\n", false);
    write(ws, "README.md", "hi\n", false);
    assert!(
        git(&["add", "README.md", "web/package.json"])
            .status
            .success()
    );
    let first = git(&["commit", "-q", "-m", "first"]);
    assert!(first.status.success(), "{first:?}");

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
    let payload = format!("echo RAN >> {}\n", canary.display());
    // The file tools refuse the names lint-staged reads in any directory.
    for path in ["deep/er/.lintstagedrc.json", "web/lint-staged.config.js"] {
        let r = tools
            .execute(
                "create_file",
                json!({"path": path, "content": payload}),
                &ctx,
            )
            .await;
        assert!(
            matches!(&r, Err(ToolError::Model(m)) if m.contains("lint-staged")),
            "{path}: {r:?}"
        );
    }
    // A write that makes a manifest lint-staged's configuration is moved aside at once.
    let _ = tools
        .execute("read_file", json!({"path": "web/package.json"}), &ctx)
        .await;
    let edited = format!(
        "{{\"name\":\"web\",\"lint-staged\": \"echo RAN >> {}\"}}\n",
        canary.display()
    );
    let out = tools
        .execute(
            "create_file",
            json!({"path": "web/package.json", "content": edited, "overwrite": true}),
            &ctx,
        )
        .await
        .unwrap();
    assert!(
        out.content.contains("`web/package.json`") && !ws.join("web/package.json").exists(),
        "{}",
        out.content
    );
    std::fs::rename(
        ws.join("web/package.json.quarantined-by-keel"),
        ws.join("web/package.json"),
    )
    .unwrap();
    std::fs::write(ws.join("web/package.json"), "{\"name\":\"web\"}\n").unwrap();
    // A command creating them anywhere, in an untracked directory too.
    let cmd = format!(
        "mkdir -p new/deep && printf '{p}' > new/deep/.lintstagedrc.json && printf '{p}' > web/lint-staged.config.js && printf '{{\"lint-staged\": \"echo RAN >> {c}\"}}' > new/package.json; echo done",
        p = payload.trim_end(),
        c = canary.display()
    );
    let out = tools
        .execute("run_command", json!({"command": cmd}), &ctx)
        .await
        .unwrap();
    for moved in [
        "`new/deep/.lintstagedrc.json`",
        "`web/lint-staged.config.js`",
        "`new/package.json`",
    ] {
        assert!(out.content.contains(moved), "{moved}: {}", out.content);
    }
    // Ordinary manifests and files stay as they are.
    let out = tools
        .execute(
            "run_command",
            json!({"command": "printf '{\"name\":\"lib\"}' > new/package.json && echo x > new/deep/a.js"}),
            &ctx,
        )
        .await
        .unwrap();
    assert!(!out.content.contains("quarantined"), "{}", out.content);
    // The user's own commit afterwards, outside any sandbox: nothing ran.
    std::fs::write(ws.join("README.md"), "hi\nmore\n").unwrap();
    let _ = git(&["add", "README.md"]);
    let commit = git(&["commit", "-q", "-m", "x"]);
    assert!(commit.status.success(), "{commit:?}");
    assert!(
        !canary.exists(),
        "ran at the user's git commit: {:?}",
        std::fs::read_to_string(&canary)
    );
}

nobody::user_and_nobody!(async nested_configuration: hook_tool_configuration_at_any_depth_is_kept_from_commands_and_file_tools, hook_tool_configuration_at_any_depth_is_kept_from_commands_and_file_tools_as_nobody);
