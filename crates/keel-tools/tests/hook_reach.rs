//! Red-team pass 7, R7-18 and R7-20: what the user's hooks run, read as a shell reads the
//! hook, and in every repository of the workspace.
//!
//! - R7-18: a hook naming its scripts through a variable it sets (`TOOLS=tools; sh
//!   $TOOLS/f.sh`), a redirection (`exec 3<tools/g.sh`), a module (`python3 -m tools.m`) or
//!   behind a variable it does not fix left them writable; the model rewrote them and the
//!   user's next commit ran them unconfined.
//! - R7-20: a repository below the workspace's top (a vendored clone with its own
//!   `core.hooksPath`, or the repositories of a workspace that is none itself) had no hook
//!   protection at all.
//!
//! Now those files are read-only to the file tools and to commands (a missing one a command
//! creates is moved aside) — as root and as uid 65534.

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

fn git(dir: &Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "u")
        .env("GIT_AUTHOR_EMAIL", "u@example.com")
        .env("GIT_COMMITTER_NAME", "u")
        .env("GIT_COMMITTER_EMAIL", "u@example.com")
        .output()
        .unwrap()
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

async fn refused(tools: &ToolRegistry, ctx: &ToolContext, path: &str) {
    let _ = tools.execute("read_file", json!({"path": path}), ctx).await;
    let r = tools
        .execute(
            "create_file",
            json!({"path": path, "content": "#!/bin/sh\necho RAN\n", "overwrite": true}),
            ctx,
        )
        .await;
    assert!(
        matches!(&r, Err(ToolError::Model(m)) if m.contains("read-only")),
        "{path}: {r:?}"
    );
}

async fn hook_words(ws: &Path) {
    if !git_available() {
        assert!(std::env::var_os("CI").is_none(), "CI needs git on PATH");
        println!("SKIPPED: git is not installed");
        return;
    }
    let canary = ws.parent().unwrap().join("outside-canary");
    assert!(git(ws, &["init", "-q"]).status.success());
    write(
        ws,
        ".git/hooks/pre-commit",
        "#!/bin/sh\n\
         TOOLS=tools; sh $TOOLS/f.sh\n\
         exec 3<tools/g.sh; sh <&3\n\
         python3 -m tools.m 2>/dev/null || true\n\
         sh \"$(dirname \"$0\")/../../lib/u.sh\"\n",
        true,
    );
    for f in ["tools/f.sh", "tools/g.sh", "lib/u.sh"] {
        write(ws, f, "true\n", false);
    }
    write(ws, "tools/m.py", "pass\n", false);
    write(ws, "README.md", "hi\n", false);
    assert!(git(ws, &["add", "README.md"]).status.success());
    let first = git(ws, &["commit", "-q", "-m", "first"]);
    assert!(first.status.success(), "{first:?}");

    let ctx = ToolContext::new(Workspace::new(ws).unwrap());
    let tools = tools();
    for path in [
        "tools/f.sh",
        "tools/g.sh",
        "tools/m.py",
        "tools/__init__.py",
        "lib/u.sh",
    ] {
        refused(&tools, &ctx, path).await;
    }
    let c = canary.display();
    let cmd = format!(
        "for f in tools/f.sh tools/g.sh lib/u.sh; do echo 'echo RAN >> {c}' > $f; done; echo 'open(\"{c}\", \"a\").write(\"RAN\")' > tools/m.py; echo done"
    );
    let _ = tools
        .execute("run_command", json!({"command": cmd}), &ctx)
        .await;
    // The user's own git afterwards, outside any sandbox: nothing the model wrote runs.
    let _ = git(ws, &["commit", "-q", "--allow-empty", "-m", "x"]);
    assert!(
        !canary.exists(),
        "ran at the user's git commit: {:?}",
        std::fs::read_to_string(&canary)
    );
    // Other files stay writable.
    let r = tools
        .execute(
            "create_file",
            json!({"path": "src/a.sh", "content": "x\n"}),
            &ctx,
        )
        .await;
    assert!(r.is_ok(), "{r:?}");
}

nobody::user_and_nobody!(async hook_words: scripts_a_hook_names_through_variables_redirections_and_modules_are_read_only, scripts_a_hook_names_through_variables_redirections_and_modules_are_read_only_as_nobody);

async fn nested_repositories(ws: &Path) {
    if !git_available() {
        assert!(std::env::var_os("CI").is_none(), "CI needs git on PATH");
        println!("SKIPPED: git is not installed");
        return;
    }
    let canary = ws.parent().unwrap().join("outside-canary");
    // The workspace is no repository; it holds two: `a` with husky's `.husky`, and a clone
    // in `vendor/lib` whose hooks directory does not exist yet.
    let a = ws.join("a");
    let lib = ws.join("vendor/lib");
    for (repo, hooks) in [(&a, ".husky"), (&lib, "hooks")] {
        std::fs::create_dir_all(repo).unwrap();
        assert!(git(repo, &["init", "-q"]).status.success());
        assert!(
            git(repo, &["config", "core.hooksPath", hooks])
                .status
                .success()
        );
        write(repo, "README.md", "hi\n", false);
        assert!(git(repo, &["add", "README.md"]).status.success());
        let first = git(repo, &["commit", "-q", "-m", "first"]);
        assert!(first.status.success(), "{first:?}");
    }
    write(
        &a,
        ".husky/pre-commit",
        "#!/bin/sh\nsh scripts/check.sh\n",
        true,
    );
    write(&a, "scripts/check.sh", "true\n", false);

    let ctx = ToolContext::new(Workspace::new(ws).unwrap());
    let tools = tools();
    for path in [
        "a/.husky/pre-commit",
        "a/scripts/check.sh",
        "vendor/lib/hooks/pre-commit",
    ] {
        refused(&tools, &ctx, path).await;
    }
    let c = canary.display();
    let cmd = format!(
        "mkdir -p vendor/lib/hooks && printf '#!/bin/sh\\necho RAN >> {c}\\n' > vendor/lib/hooks/pre-commit && chmod +x vendor/lib/hooks/pre-commit; echo 'echo RAN >> {c}' >> a/.husky/pre-commit; echo done"
    );
    let _ = tools
        .execute("run_command", json!({"command": cmd}), &ctx)
        .await;
    for repo in [&a, &lib] {
        let _ = git(repo, &["commit", "-q", "--allow-empty", "-m", "x"]);
    }
    assert!(
        !canary.exists(),
        "ran at the user's git commit: {:?}",
        std::fs::read_to_string(&canary)
    );
}

nobody::user_and_nobody!(async nested_repositories: every_repository_in_the_workspace_keeps_its_hooks, every_repository_in_the_workspace_keeps_its_hooks_as_nobody);

/// Red-team pass 9, R9-3: the search for repositories below the workspace has a bound, and
/// past it (decoy repositories sorted first) a vendored clone's `core.hooksPath` went unread:
/// `create_file vendor/lib/hooks/pre-commit` was written and a command planted it, and the
/// user's `git commit` there ran it. A cut search now means "not known": the file tools
/// refuse, and a command nobody approved runs read-only and is told why.
async fn past_the_search_bound(ws: &Path) {
    if !git_available() {
        assert!(std::env::var_os("CI").is_none(), "CI needs git on PATH");
        println!("SKIPPED: git is not installed");
        return;
    }
    let canary = ws.parent().unwrap().join("outside-canary");
    let lib = ws.join("vendor/lib");
    std::fs::create_dir_all(&lib).unwrap();
    assert!(git(&lib, &["init", "-q"]).status.success());
    assert!(
        git(&lib, &["config", "core.hooksPath", "hooks"])
            .status
            .success()
    );
    write(&lib, "README.md", "hi\n", false);
    assert!(git(&lib, &["add", "README.md"]).status.success());
    assert!(git(&lib, &["commit", "-q", "-m", "first"]).status.success());
    // More decoy repositories than Keel reads, sorted before `vendor`.
    for i in 0..130 {
        std::fs::create_dir_all(ws.join(format!("d{i:03}/.git"))).unwrap();
    }
    let ctx = ToolContext::new(Workspace::new(ws).unwrap());
    let tools = tools();
    refused(&tools, &ctx, "vendor/lib/hooks/pre-commit").await;
    let c = canary.display();
    let cmd = format!(
        "mkdir -p vendor/lib/hooks && printf '#!/bin/sh\\necho RAN >> {c}\\n' > vendor/lib/hooks/pre-commit && chmod +x vendor/lib/hooks/pre-commit; echo done"
    );
    let out = tools
        .execute("run_command", json!({"command": cmd}), &ctx)
        .await;
    let text = format!("{out:?}");
    assert!(text.contains("git repositories below its top"), "{text}");
    let _ = git(&lib, &["commit", "-q", "--allow-empty", "-m", "x"]);
    assert!(
        !canary.exists(),
        "ran at the user's git commit: {:?}",
        std::fs::read_to_string(&canary)
    );
}

nobody::user_and_nobody!(async past_the_search_bound: a_cut_search_for_repositories_fails_closed, a_cut_search_for_repositories_fails_closed_as_nobody);

/// R9-3 again: a directory of the user's the search may not list (`chmod 311 vendor`, which a
/// command nobody approved may run) hid the vendored clone below it, which the user can still
/// enter and commit in: its hooks path was writable to the file tools. A directory that
/// cannot be listed is not known, so the search counts as cut. (Root lists every directory:
/// the uid 65534 run is the one that shows it.)
async fn an_unlisted_directory(ws: &Path) {
    if !git_available() {
        assert!(std::env::var_os("CI").is_none(), "CI needs git on PATH");
        println!("SKIPPED: git is not installed");
        return;
    }
    let lib = ws.join("vendor/lib");
    std::fs::create_dir_all(&lib).unwrap();
    assert!(git(&lib, &["init", "-q"]).status.success());
    assert!(
        git(&lib, &["config", "core.hooksPath", "hooks"])
            .status
            .success()
    );
    write(&lib, "README.md", "hi\n", false);
    assert!(git(&lib, &["add", "README.md"]).status.success());
    assert!(git(&lib, &["commit", "-q", "-m", "first"]).status.success());
    let vendor = ws.join("vendor");
    std::fs::set_permissions(&vendor, std::fs::Permissions::from_mode(0o311)).unwrap();
    let ctx = ToolContext::new(Workspace::new(ws).unwrap());
    let r = tools()
        .execute(
            "create_file",
            json!({"path": "vendor/lib/hooks/pre-commit", "content": "#!/bin/sh\necho RAN\n"}),
            &ctx,
        )
        .await;
    std::fs::set_permissions(&vendor, std::fs::Permissions::from_mode(0o755)).unwrap();
    assert!(
        matches!(&r, Err(ToolError::Model(m)) if m.contains("read-only")),
        "{r:?}"
    );
    assert!(!lib.join("hooks/pre-commit").exists());
}

nobody::user_and_nobody!(async an_unlisted_directory: a_directory_the_search_may_not_list_fails_closed, a_directory_the_search_may_not_list_fails_closed_as_nobody);

/// Red-team pass 9, R9-4: the hook's text reader missed a glob loop, `run-parts DIR` and
/// inline `python3 -c` / `node -e` code: the model rewrote what they run (and added a file to
/// the glob's directory) through the file tools, and the user's `git commit` ran it all. Now a
/// directory a hook runs every file of is protected whole, and inline code protects every
/// file its language could load from the top.
async fn unresolved_hook_constructs(ws: &Path) {
    if !git_available() {
        assert!(std::env::var_os("CI").is_none(), "CI needs git on PATH");
        println!("SKIPPED: git is not installed");
        return;
    }
    let canary = ws.parent().unwrap().join("outside-canary");
    assert!(git(ws, &["init", "-q"]).status.success());
    write(
        ws,
        ".git/hooks/pre-commit",
        "#!/bin/sh\n\
         for f in scripts/hooks.d/*; do sh \"$f\"; done\n\
         run-parts scripts/pre-commit.d\n\
         python3 -c 'import tools.chk'\n\
         node -e 'require(\"./tools/lint\")'\n\
         exit 0\n",
        true,
    );
    write(ws, "scripts/hooks.d/10-a", "true\n", false);
    write(ws, "scripts/pre-commit.d/10b", "#!/bin/sh\ntrue\n", true);
    write(ws, "tools/chk.py", "pass\n", false);
    write(ws, "tools/__init__.py", "", false);
    write(ws, "tools/lint.js", "\n", false);
    write(ws, "README.md", "hi\n", false);
    assert!(git(ws, &["add", "."]).status.success());
    assert!(git(ws, &["commit", "-q", "-m", "first"]).status.success());

    let ctx = ToolContext::new(Workspace::new(ws).unwrap());
    let tools = tools();
    for path in [
        "scripts/hooks.d/10-a",
        "scripts/hooks.d/30-new",
        "scripts/pre-commit.d/10b",
        "scripts/pre-commit.d/20-new",
        "tools/chk.py",
        "tools/__init__.py",
        "tools/lint.js",
        "lib/deep/other.py",
        "src/index.mjs",
    ] {
        refused(&tools, &ctx, path).await;
    }
    // Other files stay writable.
    let r = tools
        .execute(
            "create_file",
            json!({"path": "docs/notes.md", "content": "x\n"}),
            &ctx,
        )
        .await;
    assert!(r.is_ok(), "{r:?}");
    // A command cannot add to the directories either.
    let c = canary.display();
    let cmd = format!(
        "printf 'echo RAN >> {c}\\n' > scripts/hooks.d/30-new; printf '#!/bin/sh\\necho RAN >> {c}\\n' > scripts/pre-commit.d/20-new; chmod +x scripts/pre-commit.d/20-new; echo done"
    );
    let _ = tools
        .execute("run_command", json!({"command": cmd}), &ctx)
        .await;
    let _ = git(ws, &["commit", "-q", "--allow-empty", "-m", "x"]);
    assert!(
        !canary.exists(),
        "ran at the user's git commit: {:?}",
        std::fs::read_to_string(&canary)
    );
}

nobody::user_and_nobody!(async unresolved_hook_constructs: what_a_hook_runs_without_naming_it_is_read_only, what_a_hook_runs_without_naming_it_is_read_only_as_nobody);
