// Fixtures are made with plain git (what a user or a hostile command would run).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use super::*;

fn require_git() {
    assert!(
        git_available(),
        "these tests need git on PATH (CI installs it: apt-get install git)"
    );
}

/// Every file under `root` except `.git` and `.keel`: path → (content, executable, symlink).
fn tree(root: &Path) -> BTreeMap<String, (Vec<u8>, bool, bool)> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, (Vec<u8>, bool, bool)>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let e = e.unwrap();
            let path = e.path();
            let rel = path
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            if rel == ".git" || rel == ".keel" {
                continue;
            }
            let meta = std::fs::symlink_metadata(&path).unwrap();
            if meta.file_type().is_symlink() {
                let target = std::fs::read_link(&path).unwrap();
                out.insert(
                    rel,
                    (target.to_string_lossy().as_bytes().to_vec(), false, true),
                );
            } else if meta.is_dir() {
                out.insert(format!("{rel}/"), (Vec::new(), false, false));
                walk(root, &path, out);
            } else {
                use std::os::unix::fs::PermissionsExt;
                let exec = meta.permissions().mode() & 0o111 != 0;
                out.insert(rel, (std::fs::read(&path).unwrap(), exec, false));
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
}

fn write(root: &Path, rel: &str, content: &[u8]) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, content).unwrap();
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-c",
            "commit.gpgSign=false",
        ])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn set_exec(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let mut p = std::fs::metadata(path).unwrap().permissions();
    p.set_mode(0o755);
    std::fs::set_permissions(path, p).unwrap();
}

/// The agent's typical damage: edits, a new file in a new directory, a deletion, a mode change.
fn mutate(root: &Path) {
    write(root, "src/lib.rs", b"pub fn broken() {}\n");
    write(root, "new/dir/added.txt", b"made by the agent\n");
    std::fs::remove_file(root.join("docs/guide.md")).unwrap();
    set_exec(&root.join("run.sh"));
    std::os::unix::fs::symlink("src/lib.rs", root.join("link")).unwrap();
}

fn seed(root: &Path) {
    write(
        root,
        "src/lib.rs",
        b"pub fn add(a: i32, b: i32) -> i32 { a + b }\n",
    );
    write(root, "docs/guide.md", b"# Guide\n");
    write(root, "run.sh", b"echo hi\n");
    write(root, "bin.dat", &[0, 159, 146, 150, 255]);
}

#[test]
fn undo_in_a_plain_directory_restores_the_exact_tree() {
    require_git();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    seed(root);
    let before = tree(root);
    let snaps = Snapshots::open(root).unwrap();
    assert!(!snaps.in_user_repository());
    let s0 = snaps.take("sess-1", 0, None).unwrap();
    assert!(
        root.join(".keel/snapshots/HEAD").exists(),
        "private repository"
    );
    mutate(root);
    let s3 = snaps.take("sess-1", 3, Some(&s0)).unwrap();
    assert_ne!(s0.commit, s3.commit);
    write(root, "src/lib.rs", b"pub fn worse() {}\n");

    let listed = snaps.list("sess-1").unwrap();
    assert_eq!(listed.iter().map(|s| s.turn).collect::<Vec<_>>(), [0, 3]);
    assert_eq!(snaps.sessions().unwrap(), ["sess-1"]);

    let report = snaps.undo("sess-1", Some(0)).unwrap();
    assert_eq!(tree(root), before, "exact original tree");
    assert_eq!(report.turn, 0);
    assert_eq!(report.commit, s0.commit);
    assert_eq!(report.changes.modified, ["run.sh", "src/lib.rs"]);
    assert_eq!(report.changes.recreated, ["docs/guide.md"]);
    assert_eq!(report.changes.removed, ["link", "new/dir/added.txt"]);
    assert!(
        !root.join("new").exists(),
        "emptied directories are removed"
    );

    // The undo itself can be undone: the replaced state was kept.
    let replaced = report.replaced.unwrap();
    let back = snaps.restore(&replaced).unwrap();
    assert_eq!(back.len(), 5);
    assert_eq!(
        std::fs::read_to_string(root.join("src/lib.rs")).unwrap(),
        "pub fn worse() {}\n"
    );
}

#[test]
fn undo_in_a_git_repository_never_touches_the_users_index_head_or_stash() {
    require_git();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    git(root, &["init", "-q", "-b", "main"]);
    seed(root);
    write(root, ".gitignore", b"target/\n.keel/\n");
    write(root, ".keel/config.toml", b"[agent]\n");
    git(root, &["add", "."]);
    git(root, &["commit", "-qm", "init"]);
    // The user has work in progress: something staged, something stashed, an ignored file.
    write(root, "docs/guide.md", b"# Guide, staged edit\n");
    git(root, &["add", "docs/guide.md"]);
    write(root, "stashed.txt", b"x\n");
    git(
        root,
        &[
            "stash",
            "push",
            "-q",
            "--include-untracked",
            "--",
            "stashed.txt",
        ],
    );
    write(root, "target/build.out", b"ignored\n");
    let index = std::fs::read(root.join(".git/index")).unwrap();
    let head = git(root, &["rev-parse", "HEAD"]);
    let stash = git(root, &["stash", "list"]);
    let before = tree(root);

    let snaps = Snapshots::open(root).unwrap();
    assert!(snaps.in_user_repository());
    let s0 = snaps.take("sess-2", 0, None).unwrap();
    mutate(root);
    write(root, "target/build.out", b"rebuilt\n");
    snaps.take("sess-2", 1, Some(&s0)).unwrap();

    write(root, ".keel/config.toml", b"[agent]\nmax_iterations = 5\n");
    let report = snaps.undo("sess-2", Some(0)).unwrap();
    assert_eq!(
        std::fs::read(root.join(".keel/config.toml")).unwrap(),
        b"[agent]\nmax_iterations = 5\n".to_vec(),
        "Keel's own directory is never restored"
    );
    let mut after = tree(root);
    // Ignored files are neither recorded nor restored.
    assert_eq!(
        after.remove("target/build.out").unwrap().0,
        b"rebuilt\n".to_vec()
    );
    let mut expected = before.clone();
    expected.remove("target/build.out");
    assert_eq!(after, expected);
    assert_eq!(report.changes.recreated, ["docs/guide.md"]);

    assert_eq!(
        std::fs::read(root.join(".git/index")).unwrap(),
        index,
        "index"
    );
    assert_eq!(git(root, &["rev-parse", "HEAD"]), head);
    assert_eq!(git(root, &["symbolic-ref", "HEAD"]), "refs/heads/main");
    assert_eq!(git(root, &["stash", "list"]), stash);
    let refs = git(
        root,
        &["for-each-ref", "--format=%(refname)", "refs/keel/snapshots"],
    );
    assert_eq!(
        refs.lines().collect::<Vec<_>>(),
        [
            "refs/keel/snapshots/sess-2/0",
            "refs/keel/snapshots/sess-2/1"
        ]
    );
    // The staged edit is still what the user's index holds.
    assert_eq!(
        git(root, &["diff", "--cached", "--name-only"]),
        "docs/guide.md"
    );
}

#[test]
fn line_endings_survive_a_text_attribute() {
    require_git();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    git(root, &["init", "-q"]);
    write(root, ".gitattributes", b"* text=auto eol=lf\n");
    write(root, "crlf.txt", b"one\r\ntwo\r\n");
    let snaps = Snapshots::open(root).unwrap();
    let s0 = snaps.take("s", 0, None).unwrap();
    write(root, "crlf.txt", b"changed\n");
    snaps.restore(&s0.commit).unwrap();
    assert_eq!(
        std::fs::read(root.join("crlf.txt")).unwrap(),
        b"one\r\ntwo\r\n"
    );
}

#[test]
fn a_workspace_inside_a_repository_restores_only_itself() {
    require_git();
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path();
    git(repo, &["init", "-q"]);
    write(repo, "outside.txt", b"outside\n");
    write(repo, "ws/inside.txt", b"inside\n");
    git(repo, &["add", "."]);
    git(repo, &["commit", "-qm", "init"]);
    let ws = repo.join("ws");
    let snaps = Snapshots::open(&ws).unwrap();
    let s0 = snaps.take("s", 0, None).unwrap();
    write(&ws, "inside.txt", b"changed\n");
    write(&ws, "more.txt", b"new\n");
    write(repo, "outside.txt", b"changed outside\n");
    let report = snaps.restore(&s0.commit).unwrap();
    assert_eq!(report.modified, ["inside.txt"]);
    assert_eq!(report.removed, ["more.txt"]);
    assert_eq!(
        std::fs::read_to_string(ws.join("inside.txt")).unwrap(),
        "inside\n"
    );
    assert_eq!(
        std::fs::read_to_string(repo.join("outside.txt")).unwrap(),
        "changed outside\n"
    );
}

#[test]
fn turns_resolve_to_the_first_snapshot_at_or_after_them() {
    require_git();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "a.txt", b"a\n");
    let snaps = Snapshots::open(root).unwrap();
    assert!(matches!(
        snaps.resolve("s", None),
        Err(SnapshotError::NoSnapshots(_))
    ));
    let s0 = snaps.take("s", 0, None).unwrap();
    // Nothing changed: the parent commit is reused rather than a duplicate made.
    let same = snaps.take("s", 2, Some(&s0)).unwrap();
    assert_eq!(same.commit, s0.commit);
    write(root, "a.txt", b"b\n");
    let s5 = snaps.take("s", 5, Some(&same)).unwrap();
    assert_eq!(snaps.resolve("s", Some(0)).unwrap().turn, 0);
    assert_eq!(snaps.resolve("s", Some(1)).unwrap().turn, 2);
    assert_eq!(snaps.resolve("s", Some(3)).unwrap().commit, s5.commit);
    assert_eq!(snaps.resolve("s", None).unwrap().turn, 5);
    let e = snaps.resolve("s", Some(6)).unwrap_err().to_string();
    assert!(e.contains("changed no files after turn 6"), "{e}");
    assert!(matches!(
        snaps.take("../../HEAD", 0, None),
        Err(SnapshotError::BadName(_))
    ));
}

#[test]
fn a_workspace_in_an_ignored_directory_of_another_repository_keeps_its_own_store() {
    require_git();
    let dir = tempfile::tempdir().unwrap();
    let outer = dir.path();
    git(outer, &["init", "-q"]);
    write(outer, ".gitignore", b"scratch/\n");
    write(outer, "tracked.txt", b"outer\n");
    git(outer, &["add", "."]);
    git(outer, &["commit", "-qm", "init"]);
    let ws = outer.join("scratch/project");
    seed(&ws);
    let before = tree(&ws);
    let outer_status = git(outer, &["status", "--porcelain", "--ignored"]);

    let snaps = Snapshots::open(&ws).unwrap();
    assert!(
        !snaps.in_user_repository(),
        "the outer repository is not used"
    );
    let s0 = snaps.take("s", 0, None).unwrap();
    mutate(&ws);
    snaps.take("s", 1, Some(&s0)).unwrap();
    snaps.undo("s", Some(0)).unwrap();
    assert_eq!(tree(&ws), before);

    assert!(ws.join(".keel/snapshots/HEAD").exists(), "a private store");
    assert!(!outer.join(".git/keel").exists());
    assert_eq!(
        git(outer, &["for-each-ref", "refs/keel"]),
        "",
        "no snapshot refs in the outer repository"
    );
    assert_eq!(
        git(outer, &["status", "--porcelain", "--ignored"]),
        outer_status
    );

    // An untracked (not ignored) directory: private as well; a tracked one uses the repository.
    let fresh = outer.join("fresh");
    write(&fresh, "a.txt", b"a\n");
    assert!(!Snapshots::open(&fresh).unwrap().in_user_repository());
    git(outer, &["add", "fresh"]);
    assert!(
        Snapshots::open(&fresh).unwrap().in_user_repository(),
        "staged files make it a tracked part"
    );
}

#[test]
fn repeated_undo_steps_back_one_snapshot_at_a_time_and_redo_walks_forward() {
    require_git();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    git(root, &["init", "-q"]);
    seed(root);
    git(root, &["add", "."]);
    git(root, &["commit", "-qm", "init"]);
    let snaps = Snapshots::open(root).unwrap();
    // Three writing turns, each preceded by its snapshot; one turn in between wrote nothing.
    let t0 = tree(root);
    let s0 = snaps.take("s", 0, None).unwrap();
    write(root, "src/lib.rs", b"pub fn one() {}\n");
    let t1 = tree(root);
    let s1 = snaps.take("s", 1, Some(&s0)).unwrap();
    let s2 = snaps.take("s", 2, Some(&s1)).unwrap();
    assert_eq!(s2.commit, s1.commit, "nothing changed: the same state");
    write(root, "new.txt", b"two\n");
    std::fs::remove_dir_all(root.join("docs")).unwrap(); // git has no empty directories
    let t2 = tree(root);
    snaps.take("s", 4, Some(&s2)).unwrap();
    write(root, "new.txt", b"three\n");
    set_exec(&root.join("run.sh"));
    let t3 = tree(root);

    let history = snaps.history("s").unwrap();
    let turns: Vec<u32> = history.iter().map(|h| h.snapshot.turn).collect();
    assert_eq!(turns, [0, 1, 2, 4], "the numbers the events carry");
    assert!(
        history.iter().all(|h| !h.current),
        "the workspace is past them"
    );
    assert!(history[3].next_undo && history[2].unchanged);

    let mut reports = Vec::new();
    for expected in [&t2, &t1, &t0] {
        let r = snaps.undo("s", None).unwrap();
        assert_eq!(
            &tree(root),
            expected,
            "undo {} restores that tree exactly",
            reports.len() + 1
        );
        reports.push(r.turn);
    }
    assert_eq!(
        reports,
        [4, 2, 0],
        "each undo one writing step further back"
    );
    assert!(snaps.history("s").unwrap()[0].current);
    let e = snaps.undo("s", None).unwrap_err();
    assert!(matches!(e, SnapshotError::AtOldest { turn: 0, .. }), "{e}");

    for expected in [&t1, &t2, &t3] {
        snaps.redo("s").unwrap();
        assert_eq!(&tree(root), expected, "redo walks forward again");
    }
    assert!(matches!(
        snaps.redo("s"),
        Err(SnapshotError::NothingToRedo(_))
    ));

    // --to names a snapshot by the same number; a redo after new changes is refused.
    snaps.undo("s", Some(1)).unwrap();
    assert_eq!(tree(root), t1);
    write(root, "later.txt", b"new work\n");
    let e = snaps.redo("s").unwrap_err();
    assert!(matches!(e, SnapshotError::RedoStale { .. }), "{e}");
    assert!(root.join("later.txt").exists(), "nothing overwritten");
}

#[test]
fn untracked_build_directories_are_neither_recorded_nor_restored() {
    require_git();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    git(root, &["init", "-q", "-b", "main"]);
    seed(root);
    // No .gitignore: target/ and node_modules/ would be "untracked files" to git. A committed
    // build/ directory of sources is the user's work and stays recorded.
    write(root, "build/gen.sh", b"echo gen\n");
    git(root, &["add", "-A"]);
    git(root, &["commit", "-qm", "init"]);
    write(root, "target/debug/app", b"old binary");
    let snaps = Snapshots::open_with(root, keel_tools::build_dirs::BuildDirs::default()).unwrap();
    assert!(snaps.in_user_repository());
    let s0 = snaps.take("sess-b", 0, None).unwrap();
    // The turn: the agent edits a source file and a tracked build/ file; the build rewrites
    // target/ and fills node_modules/.
    write(root, "src/lib.rs", b"pub fn changed() {}\n");
    write(root, "build/gen.sh", b"echo changed\n");
    write(root, "target/debug/app", b"new binary");
    for i in 0..5 {
        write(root, &format!("node_modules/pkg/f{i}.js"), b"x");
    }
    snaps.take("sess-b", 1, Some(&s0)).unwrap();
    // An undo from a front end that does not know the configuration (keel undo, the server)
    // leaves out what the snapshot left out.
    let report = Snapshots::open(root)
        .unwrap()
        .undo("sess-b", Some(0))
        .unwrap();
    assert_eq!(report.changes.modified, ["build/gen.sh", "src/lib.rs"]);
    assert!(report.changes.removed.is_empty(), "{:?}", report.changes);
    assert!(report.changes.recreated.is_empty(), "{:?}", report.changes);
    assert_eq!(
        std::fs::read(root.join("target/debug/app")).unwrap(),
        b"new binary",
        "build output is left alone"
    );
    assert!(root.join("node_modules/pkg/f4.js").exists());
    // The user's own view is untouched: target/ is still just untracked to git.
    let status = git(root, &["status", "--porcelain"]);
    assert!(status.contains("?? target/"), "{status}");

    // build_dirs = [] records everything.
    let all = tempfile::tempdir().unwrap();
    write(all.path(), "target/x", b"1");
    let snaps =
        Snapshots::open_with(all.path(), keel_tools::build_dirs::BuildDirs::none()).unwrap();
    let s0 = snaps.take("sess-c", 0, None).unwrap();
    write(all.path(), "target/x", b"2");
    snaps.take("sess-c", 1, Some(&s0)).unwrap();
    let report = snaps.undo("sess-c", Some(0)).unwrap();
    assert_eq!(report.changes.modified, ["target/x"]);
}

#[test]
fn a_session_diff_shows_its_changes_outside_git() {
    require_git();
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    write(
        ws,
        "src/lib.rs",
        b"pub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n",
    );
    write(ws, "README.md", b"demo\n");
    let snaps = Snapshots::open(ws).unwrap();
    assert!(
        !snaps.in_user_repository(),
        "a plain directory: Keel's own repository"
    );
    assert_eq!(
        snaps.session_diff("s1").unwrap(),
        None,
        "no snapshot, no changes"
    );
    let first = snaps.take("s1", 0, None).unwrap();
    write(
        ws,
        "src/lib.rs",
        b"pub fn add(a: i32, b: i32) -> i32 {\n    a.wrapping_add(b)\n}\n",
    );
    write(ws, "tests/new.rs", b"#[test]\nfn t() {}\n");
    std::fs::remove_file(ws.join("README.md")).unwrap();
    snaps.take("s1", 1, Some(&first)).unwrap();
    let diff = snaps.session_diff("s1").unwrap().unwrap();
    assert!(
        diff.contains("--- a/src/lib.rs\n+++ b/src/lib.rs"),
        "{diff}"
    );
    assert!(
        diff.contains("-    a + b\n+    a.wrapping_add(b)"),
        "{diff}"
    );
    assert!(
        diff.contains("+++ b/tests/new.rs"),
        "a created file: {diff}"
    );
    assert!(
        diff.contains("--- a/README.md\n+++ /dev/null"),
        "a deleted file: {diff}"
    );
    assert!(
        !diff.contains(".keel"),
        "Keel's own directory is never shown: {diff}"
    );
    // A change after the last snapshot (the turn still running) is shown too.
    write(ws, "notes.txt", b"later\n");
    assert!(
        snaps
            .session_diff("s1")
            .unwrap()
            .unwrap()
            .contains("+++ b/notes.txt")
    );
    // Undone: nothing left to show.
    let undo = snaps.restore(&first.commit).unwrap();
    assert!(!undo.is_empty());
    assert_eq!(snaps.session_diff("s1").unwrap().as_deref(), Some(""));
}

#[test]
fn a_nested_repository_without_a_commit_leaves_snapshots_working() {
    // Red-team pass 4 (with R4-1): one `git init -q sub1` made `git add --all` fail ("does not
    // have a commit checked out"), so every later snapshot failed and undo was gone for the run.
    require_git();
    for user_repo in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        if user_repo {
            git(root, &["init", "-q"]);
        }
        write(root, "a.txt", b"one\n");
        let snaps = Snapshots::open(root).unwrap();
        let s0 = snaps.take("s", 0, None).unwrap();
        git(root, &["init", "-q", "sub1"]);
        git(root, &["init", "-q", "sub 2"]);
        write(root, "sub1/b.txt", b"nested\n");
        write(root, "a.txt", b"two\n");
        let s1 = snaps
            .take("s", 1, None)
            .unwrap_or_else(|e| panic!("user repository {user_repo}: {e}"));
        write(root, "a.txt", b"three\n");
        snaps.restore(&s1.commit).unwrap();
        assert_eq!(std::fs::read(root.join("a.txt")).unwrap(), b"two\n");
        snaps.restore(&s0.commit).unwrap();
        assert_eq!(std::fs::read(root.join("a.txt")).unwrap(), b"one\n");
        assert!(
            root.join("sub1/.git/HEAD").is_file(),
            "the nested repository stays"
        );
    }
}
