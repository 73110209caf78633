//! Red-team pass 7, R7-27: a hooks directory reached through a link (`core.hooksPath =
//! .husky`, `.husky -> tools/hooks`) was read-only at its target only. One command filled
//! `docs/hooks`, a later one ran `mv .husky old && ln -s docs/hooks .husky`, and the user's next
//! `git commit` ran the model's hook, unconfined. The runner now puts a re-pointed link on the
//! way to a program path back, and pins the chain to the link's target (`mv tools t2 && mkdir -p
//! tools/hooks` cannot carry the read-only mount away) — as root and as uid 65534.

// Tests start programs of their own (git): allowed here, outside Keel's one spawn path.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

#[path = "shared/nobody.rs"]
mod nobody;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use keel_tools::shell;

fn run(ws: &Path, cmd: &str) -> (bool, String) {
    run_protecting(ws, cmd, &[])
}

fn run_protecting(ws: &Path, cmd: &str, protected: &[&str]) -> (bool, String) {
    let mut req = shell::exec::ExecRequest::new(vec!["sh".into(), "-c".into(), cmd.into()], ws);
    req.roots
        .protected
        .extend(protected.iter().map(std::path::PathBuf::from));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let out = runtime.block_on(shell::exec::run(req)).unwrap();
    (
        out.success(),
        format!(
            "{}\n{}",
            out.combined_text(),
            out.quarantined.unwrap_or_default()
        ),
    )
}

const LEGIT: &str = "#!/bin/sh\necho legit\n";

fn scenario(ws: &Path) {
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .current_dir(ws)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .output()
    };
    match git(&["init", "-q"]) {
        Ok(o) if o.status.success() => {}
        _ => {
            assert!(std::env::var_os("CI").is_none(), "CI needs git on PATH");
            println!("SKIPPED: git is not installed");
            return;
        }
    }
    assert!(
        git(&["config", "core.hooksPath", ".husky"])
            .unwrap()
            .status
            .success()
    );
    std::fs::create_dir_all(ws.join("tools/hooks")).unwrap();
    let hook = ws.join("tools/hooks/pre-commit");
    std::fs::write(&hook, LEGIT).unwrap();
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::symlink("tools/hooks", ws.join(".husky")).unwrap();

    // The red team's two commands: the directory filled first (older than the second command
    // by more than the checks' second of slack), then the link re-pointed to it.
    let (ok, out) = run(
        ws,
        "mkdir -p docs/hooks && printf '#!/bin/sh\\ntouch pwned\\n' > docs/hooks/pre-commit && chmod +x docs/hooks/pre-commit",
    );
    assert!(ok, "{out}");
    std::thread::sleep(Duration::from_millis(1_200));
    let (_, out) = run(ws, "mv .husky old-husky && ln -s docs/hooks .husky");
    assert_eq!(
        std::fs::read_link(ws.join(".husky")).unwrap(),
        Path::new("tools/hooks"),
        "the re-pointed hooks link stayed: {out}"
    );
    assert!(
        out.contains(".husky") && out.contains("put it back"),
        "{out}"
    );
    assert_eq!(
        std::fs::read_to_string(ws.join(".husky/pre-commit")).unwrap(),
        LEGIT
    );

    // The target's parent renamed and a new target made in its place, with no hook installed
    // yet (nothing below the target listed): the chain to the link's target is pinned, so the
    // rename fails and the read-only target stays where the link leads.
    std::fs::remove_file(&hook).unwrap();
    let (_, out) = run(
        ws,
        "mv tools t2; mkdir -p tools/hooks; printf '#!/bin/sh\\ntouch pwned\\n' > tools/hooks/pre-commit",
    );
    assert!(!ws.join("t2").exists(), "{out}");
    assert!(!ws.join(".husky/pre-commit").exists(), "{out}");

    // Any protected path reached through a link (`shell.protected = ["guide/api.md"]`, `guide
    // -> manual`): the link's target's chain is pinned, its content stays.
    std::fs::create_dir_all(ws.join("manual")).unwrap();
    std::fs::write(ws.join("manual/api.md"), "mine\n").unwrap();
    std::os::unix::fs::symlink("manual", ws.join("guide")).unwrap();
    let (_, out) = run_protecting(
        ws,
        "mv manual m2; mkdir -p manual; echo evil > manual/api.md",
        &["guide/api.md"],
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("guide/api.md")).unwrap(),
        "mine\n",
        "{out}"
    );
}

#[test]
fn a_command_cannot_re_point_a_linked_hooks_directory() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().canonicalize().unwrap().join("ws");
    std::fs::create_dir(&ws).unwrap();
    scenario(&ws);
}

#[test]
fn a_command_cannot_re_point_a_linked_hooks_directory_as_nobody() {
    let Some(dir) = nobody::child_dir() else {
        nobody::run_child(
            "a_command_cannot_re_point_a_linked_hooks_directory_as_nobody",
            false,
        );
        return;
    };
    let ws = dir.canonicalize().unwrap().join("ws");
    std::fs::create_dir(&ws).unwrap();
    scenario(&ws);
}
