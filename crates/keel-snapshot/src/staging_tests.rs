//! What a program that runs inside the staging git can reach (red-team pass 5, R5-1's
//! remaining surface): every way the hardening knows of is switched off, so the tests force a
//! filter on the staging git themselves (`Git::stage_settings`, given after every other
//! setting) — a stand-in for the next way nobody listed yet.

// Fixtures are made with plain git (what a user or a hostile command would run).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use std::path::Path;

use super::hostile_tests::git;
use super::*;

fn sandboxed() -> bool {
    let s = keel_tools::sandbox::support();
    let ok = s.mount_namespace.is_ok() && s.isolation.processes && git_available();
    if !ok {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI needs namespaces for commands and git"
        );
        println!("SKIPPED: no namespaces for commands, or no git");
    }
    ok
}

/// The id `content` has as a blob in the repository at `ws` (nothing written).
fn blob_id(ws: &Path, content: &str) -> String {
    let mut child = std::process::Command::new("git")
        .args(["hash-object", "--stdin"])
        .current_dir(ws)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(content.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// The bypass of R5-1's first fixes: a filter running in the staging git wrote
/// `.git/commondir` = `../evilgit` (with a `core.fsmonitor` there), and the user's next `git
/// status` ran it. Whatever runs there now writes Keel's staging directory only — not
/// `commondir`, hooks, refs or the repository's objects (an existing blob replaced), not the
/// work tree — and a loose object it forges there under the name of other content never
/// reaches the repository under that name.
#[test]
fn a_program_in_the_staging_git_writes_nothing_but_keels_staging_directory() {
    if !sandboxed() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    let outside = dir.path().join("outside");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(ws.join("a.txt"), "one\n").unwrap();
    git(&ws, &["init", "-q"]);
    git(&ws, &["add", "."]);
    git(&ws, &["commit", "-qm", "init"]);
    let a_blob = git(&ws, &["rev-parse", "HEAD:a.txt"]).trim().to_string();
    let victim = blob_id(&ws, "victim\n");
    let g = ws.join(".git");
    let filter = outside.join("filter.sh");
    std::fs::write(
        &filter,
        format!(
            r#"#!/bin/sh
G='{g}'
echo ../evilgit > "$G/commondir"
mkdir -p "$G/hooks"; echo evil > "$G/hooks/pre-commit"
echo {a_blob} > "$G/refs/heads/planted"
echo x > "$G/objects/planted"
rm -f "$G/objects/{a2}/{a38}"; echo evil > "$G/objects/{a2}/{a38}"
echo planted > '{ws}/planted.txt'
echo evil > '{ws}/a.txt'
f=$(printf 'forged\n' | git hash-object -w --stdin)
mkdir -p "$GIT_OBJECT_DIRECTORY/{v2}"
mv "$GIT_OBJECT_DIRECTORY/$(echo $f | cut -c1-2)/$(echo $f | cut -c3-)" "$GIT_OBJECT_DIRECTORY/{v2}/{v38}"
cat >/dev/null
echo FILTERED
"#,
            g = g.display(),
            ws = ws.display(),
            a2 = &a_blob[..2],
            a38 = &a_blob[2..],
            v2 = &victim[..2],
            v38 = &victim[2..],
        ),
    )
    .unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&filter, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let attributes = outside.join("attributes");
    std::fs::write(&attributes, "*.txt filter=evil\n").unwrap();
    let mut snaps = Snapshots::open(&ws).unwrap();
    snaps.git.stage_settings = vec![
        format!("core.attributesFile={}", attributes.display()),
        format!("filter.evil.clean={}", filter.display()),
    ];
    std::fs::write(ws.join("new.txt"), "new\n").unwrap();
    let taken = snaps.take("s", 0, None);
    // The program ran (the snapshot recorded what it printed)...
    let recorded = match &taken {
        Ok(t) => git(&ws, &["cat-file", "-p", &format!("{}:new.txt", t.commit)]),
        Err(e) => panic!("the snapshot failed: {e}"),
    };
    assert_eq!(
        recorded.trim(),
        "FILTERED",
        "the forced filter did not run in the staging git"
    );
    // ...and wrote nothing of the repository or the work tree.
    for planted in [
        "commondir",
        "hooks/pre-commit",
        "refs/heads/planted",
        "objects/planted",
    ] {
        assert!(!g.join(planted).exists(), ".git/{planted} was written");
    }
    assert_eq!(
        git(&ws, &["cat-file", "-p", &a_blob]),
        "one\n",
        "a.txt's blob was replaced"
    );
    assert!(
        !ws.join("planted.txt").exists(),
        "the work tree was written"
    );
    assert_eq!(std::fs::read_to_string(ws.join("a.txt")).unwrap(), "one\n");
    let forged = std::process::Command::new("git")
        .args(["cat-file", "-p", &victim])
        .current_dir(&ws)
        .output()
        .unwrap();
    assert!(
        !forged.status.success() || forged.stdout == b"victim\n",
        "a forged object reached the repository: {}",
        String::from_utf8_lossy(&forged.stdout)
    );
    // The staging directory holds Keel's index and no object directory any more.
    let left: Vec<String> = std::fs::read_dir(g.join("keel"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("objects-"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// The staging git's objects reach the repository (owner-only), an undo restores through the
/// sandbox without writing Keel's index there, and an older Keel's index is taken over.
#[test]
fn snapshots_and_undo_work_through_the_staging_directory() {
    if !sandboxed() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("a.txt"), "one\n").unwrap();
    git(&ws, &["init", "-q"]);
    git(&ws, &["add", "."]);
    git(&ws, &["commit", "-qm", "init"]);
    // An older Keel's index, where it kept it.
    std::fs::copy(ws.join(".git/index"), ws.join(".git/keel-snapshot.index")).unwrap();
    let snaps = Snapshots::open(&ws).unwrap();
    let s0 = snaps.take("s", 0, None).unwrap();
    assert!(ws.join(".git/keel/index").is_file());
    assert!(!ws.join(".git/keel-snapshot.index").exists());
    std::fs::write(ws.join("a.txt"), "two\n").unwrap();
    std::fs::write(ws.join("b.txt"), "new\n").unwrap();
    let s1 = snaps.take("s", 1, Some(&s0)).unwrap();
    assert_eq!(
        git(&ws, &["cat-file", "-p", &format!("{}:b.txt", s1.commit)]),
        "new\n"
    );
    let report = snaps.restore(&s0.commit).unwrap();
    assert_eq!(report.modified, vec!["a.txt".to_string()]);
    assert_eq!(std::fs::read_to_string(ws.join("a.txt")).unwrap(), "one\n");
    assert!(!ws.join("b.txt").exists());
    // Nothing changed since: the next snapshot is the same tree.
    let again = snaps.take("s", 2, Some(&s1)).unwrap();
    assert_eq!(again.tree, s0.tree);
}

/// A command left a FIFO where a tracked file was (red-team pass 11, R11-10): every undo of
/// the session failed in `git add`. The FIFO is left out of the snapshot, and the undo brings
/// back both the file and the session's other edits.
#[test]
fn a_fifo_in_place_of_a_file_does_not_stop_undo() {
    if !git_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().canonicalize().unwrap();
    git(&ws, &["init", "-q"]);
    std::fs::create_dir_all(ws.join("src")).unwrap();
    std::fs::write(ws.join("src/util.py"), "def util(): pass\n").unwrap();
    std::fs::write(ws.join("src/app.py"), "print('app')\n").unwrap();
    git(&ws, &["add", "."]);
    git(
        &ws,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-qm",
            "init",
        ],
    );
    let snaps = Snapshots::open(&ws).unwrap();
    let s0 = snaps.take("sess-1", 0, None).unwrap();
    std::fs::write(ws.join("src/app.py"), "GARBAGE\n").unwrap();
    std::fs::rename(ws.join("src/util.py"), ws.join("src/u.bak")).unwrap();
    rustix::fs::mknodat(
        rustix::fs::CWD,
        ws.join("src/util.py"),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o644),
        0,
    )
    .unwrap();
    snaps.take("sess-1", 1, Some(&s0)).unwrap();
    let report = snaps.undo("sess-1", Some(0));
    assert!(report.is_ok(), "{report:?}");
    assert_eq!(
        std::fs::read_to_string(ws.join("src/app.py")).unwrap(),
        "print('app')\n"
    );
    assert!(
        std::fs::symlink_metadata(ws.join("src/util.py"))
            .unwrap()
            .is_file()
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("src/util.py")).unwrap(),
        "def util(): pass\n"
    );
}
