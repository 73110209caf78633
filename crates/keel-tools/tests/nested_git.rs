//! Nested git repositories planted by the model (red-team B16): the file tools refuse every
//! `.git` path at any depth, and a repository a command leaves with program-running config or
//! hooks is moved out of git's sight and reported — as root and as uid 65534.

// Tests start programs of their own (git): allowed here, outside Keel's one spawn path.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

#[path = "shared/nobody.rs"]
mod nobody;
use nobody::runtime;

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

async fn scenario(ws: &Path) {
    if !git_available() {
        assert!(std::env::var_os("CI").is_none(), "CI needs git on PATH");
        println!("SKIPPED: git is not installed");
        return;
    }
    let outside = ws.parent().unwrap().join("outside-canary");
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
    // The file tools: no `.git` path at any depth, in any case.
    for path in [
        "docs/.git/config",
        "docs/.GIT/HEAD",
        "a/b/.git/hooks/post-checkout",
    ] {
        let r = tools
            .execute(
                "create_file",
                json!({"path": path, "content": "[core]\n\tfsmonitor = touch /tmp/x\n"}),
                &ctx,
            )
            .await;
        assert!(
            matches!(&r, Err(ToolError::Model(m)) if m.contains("protected")),
            "{path}: {r:?}"
        );
        assert!(!ws.join(path).exists(), "{path} was written");
    }
    // A command planting a repository whose config runs a program.
    let cmd = format!(
        "git init -q vendor/lib && git -C vendor/lib config core.fsmonitor 'touch {}; false' && git init -q plain",
        outside.display()
    );
    let out = tools
        .execute("run_command", json!({"command": cmd}), &ctx)
        .await
        .unwrap();
    assert!(
        out.content.contains("vendor/lib") && out.content.contains("core.fsmonitor"),
        "the result reports it: {}",
        out.content
    );
    assert!(
        !ws.join("vendor/lib/.git").exists(),
        "the repository is out of git's sight"
    );
    assert!(
        ws.join("vendor/lib/.git-quarantined-by-keel/config")
            .is_file()
    );
    // A repository that runs nothing (`git init`, `cargo new`) is left alone.
    assert!(ws.join("plain/.git/config").is_file());
    assert!(!out.content.contains("plain"), "{}", out.content);
    // The user's git in that directory now runs nothing.
    let _ = std::process::Command::new("git")
        .arg("status")
        .current_dir(ws.join("vendor/lib"))
        .env("GIT_CEILING_DIRECTORIES", ws)
        .output();
    assert!(!outside.exists(), "the planted fsmonitor ran");
    // A hook written by a command into an existing nested repository.
    let out = tools
        .execute(
            "run_command",
            json!({"command": "printf '#!/bin/sh\\n' > plain/.git/hooks/post-checkout && chmod +x plain/.git/hooks/post-checkout"}),
            &ctx,
        )
        .await
        .unwrap();
    assert!(out.content.contains("post-checkout"), "{}", out.content);
    assert!(!ws.join("plain/.git").exists());
    // A git directory under another name (red-team pass 2, R2): a `.git` file naming
    // `gitdir: realgit`, a layout a tarball can ship. The file tools refuse its config and
    // hooks; a command that sets a program in it gets it quarantined.
    let out = tools
        .execute(
            "run_command",
            json!({"command": "mkdir shipped && cd shipped && git init -q && mv .git realgit && echo 'gitdir: realgit' > .git"}),
            &ctx,
        )
        .await
        .unwrap();
    assert!(ws.join("shipped/realgit/HEAD").is_file(), "{}", out.content);
    for path in [
        "shipped/realgit/config",
        "shipped/realgit/hooks/post-checkout",
    ] {
        let r = tools
            .execute(
                "create_file",
                json!({"path": path, "content": "[core]\n\tfsmonitor = touch /tmp/x\n", "overwrite": true}),
                &ctx,
            )
            .await;
        assert!(
            matches!(&r, Err(ToolError::Model(m)) if m.contains("protected")),
            "{path}: {r:?}"
        );
    }
    assert!(!ws.join("shipped/realgit/hooks/post-checkout").exists());
    let cmd = format!(
        "git --git-dir=shipped/realgit config core.fsmonitor 'touch {}; false'",
        outside.display()
    );
    let out = tools
        .execute("run_command", json!({"command": cmd}), &ctx)
        .await
        .unwrap();
    assert!(
        out.content.contains("core.fsmonitor") && out.content.contains("shipped"),
        "the result reports it: {}",
        out.content
    );
    // Out of git's sight: a git directory by content loses its `HEAD` (its files stay).
    assert!(
        !ws.join("shipped/realgit/HEAD").exists(),
        "out of git's sight"
    );
    assert!(
        ws.join("shipped/realgit/HEAD-quarantined-by-keel")
            .is_file()
    );
    // A working-tree file the repository's config includes (pass 2, R14): read-only to the
    // file tools and to commands.
    let top = ws.join("top");
    std::fs::create_dir_all(&top).unwrap();
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .current_dir(&top)
            .output()
            .unwrap()
    };
    git(&["init", "-q"]);
    git(&["config", "include.path", "../.gitconfig"]);
    std::fs::write(
        top.join(".gitconfig"),
        "[diff \"lockb\"]\n\ttextconv = cat\n",
    )
    .unwrap();
    let tctx = ToolContext::new(Workspace::new(&top).unwrap());
    let r = tools
        .execute(
            "create_file",
            json!({"path": ".gitconfig", "content": "[core]\n\tfsmonitor = touch /tmp/x\n", "overwrite": true}),
            &tctx,
        )
        .await;
    assert!(
        matches!(&r, Err(ToolError::Model(m)) if m.contains("read-only") && m.contains("include.path")),
        "{r:?}"
    );
    let _ = tools
        .execute(
            "run_command",
            json!({"command": format!("printf '[core]\\n\\tfsmonitor = touch {}\\n' >> .gitconfig", outside.display())}),
            &tctx,
        )
        .await;
    let text = std::fs::read_to_string(top.join(".gitconfig")).unwrap();
    assert!(!text.contains("fsmonitor"), "a command changed it: {text}");
    let _ = std::process::Command::new("git")
        .arg("status")
        .current_dir(ws.join("shipped"))
        .env("GIT_CEILING_DIRECTORIES", ws)
        .output();
    assert!(!outside.exists(), "the planted fsmonitor ran");
}

nobody::user_and_nobody!(async scenario: planted_nested_repositories_are_refused_or_quarantined, planted_nested_repositories_are_refused_or_quarantined_as_nobody);

/// Red-team pass 4, R4-1: each repository hid its program from Keel's own config parser or
/// used a key its denylist did not name; all four ran at the user's next `git status`,
/// `commit`, `fetch` or `help`. Keel now asks git to read the config and judges the keys by
/// an allowlist.
async fn desync_scenario(ws: &Path) {
    if !git_available() {
        assert!(std::env::var_os("CI").is_none(), "CI needs git on PATH");
        println!("SKIPPED: git is not installed");
        return;
    }
    let canary = ws.parent().unwrap().join("desync-canary");
    let c = canary.display();
    let ctx = ToolContext::new(Workspace::new(ws).unwrap());
    let mut tools = ToolRegistry::new();
    shell::register(
        &mut tools,
        ShellSettings::default(),
        LintSettings {
            enabled: false,
            ..LintSettings::default()
        },
    );
    let steps = [
        (
            "sub1",
            format!(
                "git init -q sub1 && printf '\\357\\273\\277[core]\\n\\trepositoryformatversion = 0\\n\\tbare = false\\n\\tfsmonitor = \"echo BOM >> {c}; false\"\\n' > sub1/.git/config"
            ),
        ),
        (
            "sub2",
            format!(
                "git init -q sub2 && printf '[core]\\n\\trepositoryformatversion = 0\\n[user]\\n\\tname = x\\\\\\\\\\n[core]\\n\\tfsmonitor = \"echo CONT >> {c}; false\"\\n' > sub2/.git/config"
            ),
        ),
        (
            "sub3",
            format!(
                "git init -q sub3 && git -C sub3 config extensions.worktreeConfig true && git -C sub3 config core.repositoryformatversion 1 && printf '[core]\\n\\tfsmonitor = \"echo WT >> {c}; false\"\\n' > sub3/.git/config.worktree"
            ),
        ),
        (
            "sub4",
            format!(
                "git init -q sub4 && git -C sub4 config protocol.ext.allow always && git -C sub4 remote add origin 'ext::sh -c \"echo EXT >> {c}\"'"
            ),
        ),
        (
            "sub5",
            format!(
                "git init -q sub5 && git -C sub5 config man.viewer x && git -C sub5 config man.x.cmd 'echo MAN >> {c}'"
            ),
        ),
    ];
    for (dir, cmd) in &steps {
        let out = tools
            .execute("run_command", json!({"command": cmd}), &ctx)
            .await
            .unwrap();
        assert!(
            out.content.contains(&format!("- {dir} (")),
            "{dir} was not reported: {}",
            out.content
        );
        assert!(!ws.join(dir).join(".git").exists(), "{dir}: still in sight");
        assert!(ws.join(dir).join(".git-quarantined-by-keel").is_dir());
    }
    // What the user would do next, outside Keel: nothing runs.
    for (dir, _) in &steps {
        for args in [
            &["status"][..],
            &["fetch", "origin"],
            &["help", "-m", "log"],
        ] {
            let _ = std::process::Command::new("git")
                .args(args)
                .current_dir(ws.join(dir))
                .env("GIT_CEILING_DIRECTORIES", ws)
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .env("GIT_CONFIG_GLOBAL", "/dev/null")
                .output();
        }
    }
    assert!(
        !canary.exists(),
        "a planted program ran: {:?}",
        std::fs::read_to_string(&canary)
    );
    // A plain clone (remote, branch, core keys) is left in place.
    let out = tools
        .execute(
            "run_command",
            json!({"command": "git init -q src0 && git clone -q src0 cloned 2>/dev/null; git -C cloned config user.name t"}),
            &ctx,
        )
        .await
        .unwrap();
    assert!(ws.join("cloned/.git/config").is_file(), "{}", out.content);
    assert!(!out.content.contains("cloned"), "{}", out.content);
}

#[test]
fn config_parser_desyncs_and_unlisted_keys_are_quarantined() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    runtime().block_on(desync_scenario(&ws));
}

/// Red-team pass 4, R4-2: the quarantine ran only after `run_command` and `run_tests`; a
/// verification gate (or lint, a flow node, a rollback command) planted a top-level `.git` in
/// a workspace that had none, with a `core.fsmonitor` the user's `git status` ran. Every run
/// through the one runner is now checked.
#[test]
fn a_repository_planted_through_the_runner_itself_is_quarantined() {
    if !git_available() {
        assert!(std::env::var_os("CI").is_none(), "CI needs git on PATH");
        println!("SKIPPED: git is not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    let canary = dir.path().join("gate-canary");
    let cmd = format!(
        "git init -q . && git config core.fsmonitor 'echo TOPGATE >> {}; false' && git init -q vendor && git -C vendor config core.fsmonitor 'echo VENDOR >> {}; false'",
        canary.display(),
        canary.display()
    );
    let req = shell::exec::ExecRequest::new(vec!["sh".into(), "-c".into(), cmd.into()], &ws);
    let out = runtime().block_on(shell::exec::run(req)).unwrap();
    assert!(out.success(), "{}", out.combined_text());
    let report = out.quarantined.unwrap_or_default();
    assert!(
        report.contains("- . (core.fsmonitor)") && report.contains("- vendor (core.fsmonitor)"),
        "{report}"
    );
    assert!(!ws.join(".git").exists() && !ws.join("vendor/.git").exists());
    for d in [&ws, &ws.join("vendor")] {
        let _ = std::process::Command::new("git")
            .arg("status")
            .current_dir(d)
            .env("GIT_CEILING_DIRECTORIES", dir.path())
            .output();
    }
    assert!(!canary.exists(), "the planted fsmonitor ran");
    // The workspace itself made a bare repository (pass 4, R4-1): its `HEAD` goes.
    let bare = dir.path().join("bare");
    std::fs::create_dir(&bare).unwrap();
    let cmd = format!(
        "git init -q --bare . && git config --file config core.pager 'echo BARE >> {}'",
        canary.display()
    );
    let req = shell::exec::ExecRequest::new(vec!["sh".into(), "-c".into(), cmd.into()], &bare);
    let out = runtime().block_on(shell::exec::run(req)).unwrap();
    let report = out.quarantined.unwrap_or_default();
    assert!(report.contains("- . (core.pager)"), "{report}");
    assert!(!bare.join("HEAD").exists() && bare.join("HEAD-quarantined-by-keel").is_file());
    // (A pager runs only on a terminal: what counts is that git no longer finds a repository.)
    let found = std::process::Command::new("git")
        .args(["rev-parse", "--git-dir"])
        .current_dir(&bare)
        .env("GIT_CEILING_DIRECTORIES", dir.path())
        .output()
        .unwrap();
    assert!(
        !found.status.success(),
        "git still takes it for a repository"
    );
    // A read-only run is never checked (it cannot have written anything).
    let mut ro = shell::exec::ExecRequest::new(vec!["true".into()], &ws);
    ro.policy = keel_tools::sandbox::SandboxPolicy::ReadOnly;
    assert!(
        runtime()
            .block_on(shell::exec::run(ro))
            .unwrap()
            .quarantined
            .is_none()
    );
}

/// Red-team pass 4, R4-3: with `core.hooksPath = .husky` (husky's setup) the model's edit of
/// `.husky/pre-commit` ran unasked, and the user's next `git commit` ran it outside the
/// sandbox. Every working-tree path the repository's config names as a program is now
/// read-only to the file tools and to commands.
#[test]
fn hooks_and_programs_the_repository_config_names_are_read_only() {
    if !git_available() {
        assert!(std::env::var_os("CI").is_none(), "CI needs git on PATH");
        println!("SKIPPED: git is not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(ws.join(".husky")).unwrap();
    std::fs::create_dir_all(ws.join("tools")).unwrap();
    let git = |args: &[&str]| {
        let ok = std::process::Command::new("git")
            .args(args)
            .current_dir(&ws)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .status()
            .unwrap()
            .success();
        assert!(ok, "git {args:?}");
    };
    git(&["init", "-q"]);
    git(&["config", "core.hooksPath", ".husky"]);
    git(&["config", "filter.x.clean", "sh tools/clean.sh"]);
    std::fs::write(ws.join(".husky/pre-commit"), "npx lint-staged\n").unwrap();
    std::fs::write(ws.join("tools/clean.sh"), "cat\n").unwrap();
    let ctx = ToolContext::new(Workspace::new(&ws).unwrap());
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
    runtime().block_on(async {
        for (path, key) in [
            (".husky/pre-commit", "core.hookspath"),
            (".husky/pre-push", "core.hookspath"),
            ("tools/clean.sh", "filter.x.clean"),
        ] {
            let r = tools
                .execute(
                    "create_file",
                    json!({"path": path, "content": "echo HUSKY-RAN\n", "overwrite": true}),
                    &ctx,
                )
                .await;
            assert!(
                matches!(&r, Err(ToolError::Model(m)) if m.contains(key) && m.contains("read-only")),
                "{path}: {r:?}"
            );
        }
        let _ = tools
            .execute(
                "run_command",
                json!({"command": "echo 'echo HUSKY-RAN' >> .husky/pre-commit; echo x >> tools/clean.sh; touch .husky/post-checkout"}),
                &ctx,
            )
            .await;
    });
    assert_eq!(
        std::fs::read_to_string(ws.join(".husky/pre-commit")).unwrap(),
        "npx lint-staged\n"
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("tools/clean.sh")).unwrap(),
        "cat\n"
    );
    assert!(!ws.join(".husky/post-checkout").exists());
    // Other files stay writable.
    std::fs::create_dir_all(ws.join("src")).unwrap();
    let r = runtime().block_on(tools.execute(
        "create_file",
        json!({"path": "src/a.txt", "content": "x\n"}),
        &ctx,
    ));
    assert!(r.is_ok(), "{r:?}");
}

/// Red-team pass 4, R4-3's gaps: program paths the repository's config names that do not
/// exist yet (`core.hooksPath = .githooks` with no `.githooks`, a filter's missing script), a
/// hook manager's configuration a command creates (pre-commit's config, `lefthook-local.yml`)
/// — only existing paths can be mounted read-only, so a command created them and the user's
/// next `git commit` ran them unconfined. The runner now moves each one that appears out of
/// git's way and says so; the file tools refuse them by name.
#[test]
fn program_paths_a_command_creates_for_the_users_git_are_quarantined() {
    if !git_available() {
        assert!(std::env::var_os("CI").is_none(), "CI needs git on PATH");
        println!("SKIPPED: git is not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    let canary = dir.path().join("outside-canary");
    std::fs::create_dir_all(&ws).unwrap();
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .current_dir(&ws)
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
        git(&["config", "core.hooksPath", ".githooks"])
            .status
            .success()
    );
    assert!(
        git(&["config", "filter.x.clean", "sh tools/clean.sh"])
            .status
            .success()
    );
    // The pre-commit framework's hook, installed by the user: it reads the work tree's config.
    std::fs::create_dir_all(ws.join(".githooks")).unwrap();
    std::fs::write(ws.join("README.md"), "hi\n").unwrap();
    let ctx = ToolContext::new(Workspace::new(&ws).unwrap());
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
    // `.githooks` exists but is empty: remove it so the configured directory is missing.
    std::fs::remove_dir(ws.join(".githooks")).unwrap();
    std::fs::create_dir_all(ws.join(".git/hooks")).unwrap();
    let hook = format!(
        "#!/bin/sh\n# File generated by pre-commit: https://pre-commit.com\necho PRE-COMMIT-RAN >> {}\n",
        canary.display()
    );
    // (The `.git/hooks` one is not run while `core.hooksPath` is set; it only names the
    // manager, whose configuration must not be created by the model.)
    std::fs::write(ws.join(".git/hooks/pre-commit"), &hook).unwrap();
    runtime().block_on(async {
        for (path, key) in [
            (".githooks/pre-commit", "core.hookspath"),
            ("tools/clean.sh", "filter.x.clean"),
        ] {
            let r = tools
                .execute(
                    "create_file",
                    json!({"path": path, "content": "echo RAN\n"}),
                    &ctx,
                )
                .await;
            assert!(
                matches!(&r, Err(ToolError::Model(m)) if m.contains(key) && m.contains("read-only")),
                "{path}: {r:?}"
            );
        }
        let cmd = format!(
            "mkdir -p .githooks tools && printf '#!/bin/sh\\necho HOOK-RAN >> {c}\\n' > .githooks/pre-commit && chmod +x .githooks/pre-commit && printf 'echo FILTER-RAN >> {c}; cat\\n' > tools/clean.sh && echo '* filter=x' > .gitattributes && echo 'repos: []' > .pre-commit-config.yaml",
            c = canary.display()
        );
        let out = tools
            .execute("run_command", json!({"command": cmd}), &ctx)
            .await
            .unwrap();
        for named in [".githooks", "tools/clean.sh", ".pre-commit-config.yaml"] {
            assert!(
                out.content.contains(&format!("`{named}`")),
                "the result names {named}: {}",
                out.content
            );
        }
    });
    assert!(!ws.join(".githooks").exists());
    assert!(ws.join(".githooks.quarantined-by-keel/pre-commit").exists());
    assert!(!ws.join("tools/clean.sh").exists());
    assert!(ws.join("tools/clean.sh.quarantined-by-keel").exists());
    assert!(!ws.join(".pre-commit-config.yaml").exists());
    // The user's own git afterwards, outside any sandbox: nothing the command wrote runs.
    let _ = git(&["add", "README.md"]);
    let _ = git(&["commit", "-q", "-m", "x"]);
    assert!(
        !canary.exists(),
        "ran at the user's git commit: {:?}",
        std::fs::read_to_string(&canary)
    );
}

/// A FIFO where git reads its ignore or attribute rules (`mkfifo d/.gitignore`) made every
/// later `git add` — each snapshot, `keel undo` — and the user's own `git status` wait
/// forever (a snapshot until its 10-minute deadline). The runner moves such entries away.
#[test]
fn a_fifo_where_git_reads_its_rules_is_moved_away() {
    if !git_available() {
        assert!(std::env::var_os("CI").is_none(), "CI needs git on PATH");
        println!("SKIPPED: git is not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(ws.join("d")).unwrap();
    let ok = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(&ws)
        .status()
        .unwrap()
        .success();
    assert!(ok);
    std::fs::write(ws.join("a.txt"), "a\n").unwrap();
    let ctx = ToolContext::new(Workspace::new(&ws).unwrap());
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
    let out = runtime()
        .block_on(tools.execute(
            "run_command",
            json!({"command": "mkfifo .gitignore d/.gitattributes"}),
            &ctx,
        ))
        .unwrap();
    assert!(
        out.content.contains("`.gitignore` moved to") && out.content.contains("d/.gitattributes"),
        "{}",
        out.content
    );
    for p in [".gitignore", "d/.gitattributes"] {
        assert!(
            std::fs::symlink_metadata(ws.join(p)).is_err(),
            "{p} still there"
        );
    }
    // The user's git no longer waits.
    let status = std::process::Command::new("timeout")
        .args(["10", "git", "status", "--short"])
        .current_dir(&ws)
        .output()
        .unwrap();
    assert!(status.status.success(), "{status:?}");
}

/// Red-team pass 5, R5-10: as a normal user, `chmod 111 x` made `x` unlistable, so the search
/// passed over `x/sub/.git` (with `core.fsmonitor`) while `cd x/sub && git status` still
/// worked and ran it unconfined. The owner's read bit is put back and the repository found.
#[test]
fn a_repository_under_an_unlistable_directory_is_found_as_nobody() {
    let Some(dir) = nobody::child_dir() else {
        nobody::run_child(
            "a_repository_under_an_unlistable_directory_is_found_as_nobody",
            false,
        );
        return;
    };
    if !git_available() {
        assert!(std::env::var_os("CI").is_none(), "CI needs git on PATH");
        println!("SKIPPED: git is not installed");
        return;
    }
    let ws = dir.join("ws");
    std::fs::create_dir(&ws).unwrap();
    let ctx = ToolContext::new(Workspace::new(&ws).unwrap());
    let mut tools = ToolRegistry::new();
    shell::register(
        &mut tools,
        ShellSettings::default(),
        LintSettings {
            enabled: false,
            ..LintSettings::default()
        },
    );
    let out = runtime()
        .block_on(tools.execute(
            "run_command",
            json!({"command": "mkdir -p x/sub && git init -q x/sub && git -C x/sub config core.fsmonitor 'echo RAN; false' && chmod 111 x"}),
            &ctx,
        ))
        .unwrap();
    assert!(
        out.content.contains("x/sub") && out.content.contains("core.fsmonitor"),
        "{}",
        out.content
    );
    assert!(!ws.join("x/sub/.git").exists(), "{}", out.content);
}
