//! Keel's own git work against a hostile repository: each test plants one way a repository can
//! make git run a program (config keys, hooks, attributes, includes), then takes snapshots,
//! undoes and redoes, and checks that the planted program never ran — no canary file outside
//! or inside the workspace, no environment dump.

// Fixtures are made with plain git (what a user or a hostile command would run).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use std::path::{Path, PathBuf};
use std::process::Command;

use super::*;

struct Hostile {
    _dir: tempfile::TempDir,
    /// The workspace (a git repository unless the test says otherwise).
    ws: PathBuf,
    /// A directory outside the workspace where the payload would leave its canaries.
    outside: PathBuf,
    /// The payload: an executable script that leaves canaries and dumps its environment.
    payload: PathBuf,
}

fn setup(with_repo: bool) -> Hostile {
    assert!(
        git_available(),
        "these tests need git on PATH (CI installs it: apt-get install git)"
    );
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    let outside = dir.path().join("outside");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(outside.join("bin")).unwrap();
    let payload = outside.join("bin").join("payload");
    std::fs::write(
        &payload,
        format!(
            "#!/bin/sh\ntouch '{o}/canary' '{w}/canary'\nenv > '{o}/env-dump'\ncat\n",
            o = outside.display(),
            w = ws.display()
        ),
    )
    .unwrap();
    make_executable(&payload);
    std::fs::write(ws.join("a.txt"), "one\n").unwrap();
    std::fs::write(ws.join("b.dat"), "data\n").unwrap();
    if with_repo {
        git(&ws, &["init", "-q"]);
        git(&ws, &["add", "."]);
        git(&ws, &["commit", "-qm", "init"]);
    }
    Hostile {
        _dir: dir,
        ws,
        outside,
        payload,
    }
}

fn make_executable(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// The test's own git (planting only: `git config` runs nothing); its standard output.
pub(super) fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-c",
            "commit.gpgSign=false",
            "-c",
            "core.hooksPath=/dev/null",
        ])
        .args(args)
        .current_dir(dir)
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn config(h: &Hostile, key: &str, value: &str) {
    git(&h.ws, &["config", key, value]);
}

fn hook(dir: &Path, name: &str, h: &Hostile) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::copy(&h.payload, dir.join(name)).unwrap();
    make_executable(&dir.join(name));
}

/// Snapshot, change every file, snapshot, undo to the first, redo, and list.
fn exercise(ws: &Path) -> Result<(), SnapshotError> {
    let snaps = Snapshots::open(ws)?;
    let s0 = snaps.take("hostile", 0, None)?;
    std::fs::write(ws.join("a.txt"), "two\n").unwrap();
    std::fs::write(ws.join("b.dat"), "changed\n").unwrap();
    std::fs::write(ws.join("c.txt"), "new\n").unwrap();
    snaps.take("hostile", 1, Some(&s0))?;
    let undo = snaps.undo("hostile", Some(0))?;
    assert_eq!(std::fs::read_to_string(ws.join("a.txt")).unwrap(), "one\n");
    assert!(!ws.join("c.txt").exists());
    let replaced = undo.replaced.expect("the replaced state is kept");
    snaps.restore(&replaced)?;
    assert_eq!(std::fs::read_to_string(ws.join("a.txt")).unwrap(), "two\n");
    snaps.list("hostile")?;
    Ok(())
}

/// Runs the exercise and checks that nothing planted ran, then that the exercise succeeded.
fn assert_contained(h: &Hostile, vector: &str) {
    let result = exercise(&h.ws);
    for canary in [h.outside.join("canary"), h.ws.join("canary")] {
        assert!(
            !canary.exists(),
            "{vector}: the planted program ran ({} exists)",
            canary.display()
        );
    }
    assert!(
        !h.outside.join("env-dump").exists(),
        "{vector}: the planted program dumped Keel's environment"
    );
    if let Err(e) = result {
        panic!("{vector}: snapshots failed in a hostile repository: {e}");
    }
}

#[test]
fn core_fsmonitor_from_the_repository_config_never_runs() {
    let h = setup(true);
    config(&h, "core.fsmonitor", &h.payload.display().to_string());
    assert_contained(&h, "core.fsmonitor");
}

#[test]
fn hooks_in_the_repository_never_run() {
    let h = setup(true);
    for name in [
        "reference-transaction",
        "post-index-change",
        "post-checkout",
        "pre-auto-gc",
    ] {
        hook(&h.ws.join(".git/hooks"), name, &h);
    }
    assert_contained(&h, ".git/hooks");
}

#[test]
fn core_hooks_path_never_runs_hooks() {
    let h = setup(true);
    let dir = h.outside.join("hooks");
    for name in ["reference-transaction", "post-index-change"] {
        hook(&dir, name, &h);
    }
    config(&h, "core.hooksPath", &dir.display().to_string());
    assert_contained(&h, "core.hooksPath");
}

#[test]
fn filters_named_in_info_attributes_never_run() {
    let h = setup(true);
    let p = h.payload.display().to_string();
    std::fs::write(h.ws.join(".git/info/attributes"), "* filter=evil\n").unwrap();
    config(&h, "filter.evil.clean", &p);
    config(&h, "filter.evil.smudge", &p);
    config(&h, "filter.evil.required", "true");
    assert_contained(&h, "filter clean/smudge via .git/info/attributes");
}

#[test]
fn filters_named_in_gitattributes_never_run() {
    let h = setup(true);
    let p = h.payload.display().to_string();
    std::fs::write(h.ws.join(".gitattributes"), "*.txt filter=evil\n").unwrap();
    config(&h, "filter.evil.clean", &p);
    config(&h, "filter.evil.smudge", &p);
    assert_contained(&h, "filter clean/smudge via .gitattributes");
}

#[test]
fn a_long_running_process_filter_never_runs() {
    let h = setup(true);
    std::fs::write(h.ws.join(".git/info/attributes"), "* filter=proc\n").unwrap();
    config(&h, "filter.proc.process", &h.payload.display().to_string());
    config(&h, "filter.proc.required", "true");
    assert_contained(&h, "filter.<driver>.process");
}

#[test]
fn diff_drivers_textconv_and_external_diff_never_run() {
    let h = setup(true);
    let p = h.payload.display().to_string();
    std::fs::write(h.ws.join(".git/info/attributes"), "* diff=evil\n").unwrap();
    config(&h, "diff.evil.textconv", &p);
    config(&h, "diff.evil.command", &p);
    config(&h, "diff.external", &p);
    assert_contained(&h, "diff drivers, textconv, diff.external");
}

#[test]
fn included_config_files_cannot_bring_commands_in() {
    let h = setup(true);
    let included = h.outside.join("evil.gitconfig");
    std::fs::write(
        &included,
        format!(
            "[core]\n\tfsmonitor = {p}\n[filter \"inc\"]\n\tclean = {p}\n\tsmudge = {p}\n\trequired = true\n",
            p = h.payload.display()
        ),
    )
    .unwrap();
    std::fs::write(h.ws.join(".git/info/attributes"), "* filter=inc\n").unwrap();
    config(&h, "include.path", &included.display().to_string());
    let gitdir = format!("includeIf.gitdir:{}/.path", h.ws.display());
    config(&h, &gitdir, &included.display().to_string());
    assert_contained(&h, "include.path / includeIf");
}

#[test]
fn driver_names_with_dots_and_equals_signs_are_neutralised() {
    let h = setup(true);
    let p = h.payload.display().to_string();
    std::fs::write(h.ws.join(".git/info/attributes"), "* filter=a.b=c\n").unwrap();
    config(&h, "filter.a.b=c.clean", &p);
    config(&h, "filter.a.b=c.smudge", &p);
    assert_contained(&h, "a driver named `a.b=c`");
}

#[test]
fn pagers_aliases_and_other_command_keys_never_run() {
    let h = setup(true);
    let p = h.payload.display().to_string();
    for key in [
        "core.pager",
        "pager.diff",
        "pager.add",
        "core.sshCommand",
        "core.askPass",
        "core.editor",
        "core.gitProxy",
        "credential.helper",
        "gpg.program",
        "gpg.ssh.program",
        "core.alternateRefsCommand",
        "sequence.editor",
    ] {
        config(&h, key, &p);
    }
    config(&h, "commit.gpgSign", "true");
    config(&h, "alias.snapshot", &format!("!{p}"));
    config(&h, "gc.auto", "1");
    config(&h, "maintenance.auto", "true");
    assert_contained(&h, "pagers, aliases, ssh/askpass/credential/gpg commands");
}

#[test]
fn the_private_repository_of_a_plain_directory_is_hardened_too() {
    let h = setup(false);
    let snaps = Snapshots::open(&h.ws).unwrap();
    snaps.take("first", 0, None).unwrap();
    let git_dir = private_repository(&h.ws);
    let p = h.payload.display().to_string();
    let set = |key: &str, value: &str| {
        git(
            &h.ws,
            &[
                "config",
                "--file",
                &git_dir.join("config").display().to_string(),
                key,
                value,
            ],
        )
    };
    set("core.fsmonitor", &p);
    set("filter.evil.clean", &p);
    set("filter.evil.smudge", &p);
    std::fs::write(git_dir.join("info/attributes"), "* filter=evil\n").unwrap();
    hook(&git_dir.join("hooks"), "reference-transaction", &h);
    assert_contained(&h, "the private repository's config and hooks");
}

#[test]
fn replace_refs_cannot_swap_what_a_snapshot_restores() {
    let h = setup(true);
    let snaps = Snapshots::open(&h.ws).unwrap();
    let s0 = snaps.take("s", 0, None).unwrap();
    // A replace ref maps the snapshot's commit onto another one with different content.
    std::fs::write(h.ws.join("a.txt"), "planted\n").unwrap();
    git(&h.ws, &["add", "a.txt"]);
    git(&h.ws, &["commit", "-qm", "planted"]);
    git(&h.ws, &["replace", "-f", &s0.commit, "HEAD"]);
    std::fs::write(h.ws.join("a.txt"), "later\n").unwrap();
    snaps.restore(&s0.commit).unwrap();
    assert_eq!(
        std::fs::read_to_string(h.ws.join("a.txt")).unwrap(),
        "one\n",
        "the snapshot's own content, not the replacement's"
    );
}

#[test]
fn a_shipped_snapshots_symlink_is_refused_not_written_through() {
    let h = setup(false);
    // The repository ships `.keel/snapshots` pointing outside.
    let elsewhere = h.outside.join("store");
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::fs::create_dir_all(h.ws.join(".keel")).unwrap();
    std::os::unix::fs::symlink(&elsewhere, h.ws.join(".keel/snapshots")).unwrap();
    let snaps = Snapshots::open(&h.ws).unwrap();
    let e = snaps.take("s", 0, None).unwrap_err().to_string();
    assert!(e.contains("is a symlink"), "{e}");
    assert_eq!(
        std::fs::read_dir(&elsewhere).unwrap().count(),
        0,
        "nothing was written where the link points"
    );
}

#[test]
fn undo_deletes_only_inside_even_through_a_swapped_directory() {
    let h = setup(false);
    std::fs::create_dir_all(h.ws.join("d")).unwrap();
    let snaps = Snapshots::open(&h.ws).unwrap();
    let s0 = snaps.take("s", 0, None).unwrap();
    std::fs::write(h.ws.join("d/new.txt"), "made in turn 1\n").unwrap();
    snaps.take("s", 1, Some(&s0)).unwrap();
    // A command swaps `d` for a link to a directory outside holding a file of the same name.
    std::fs::write(h.outside.join("new.txt"), "precious\n").unwrap();
    std::fs::rename(h.ws.join("d"), h.ws.join("d.real")).unwrap();
    std::os::unix::fs::symlink(&h.outside, h.ws.join("d")).unwrap();
    let _ = snaps.undo("s", Some(0));
    assert_eq!(
        std::fs::read_to_string(h.outside.join("new.txt")).unwrap(),
        "precious\n",
        "undo deleted a file outside the workspace"
    );
}

#[test]
fn an_index_naming_files_outside_never_brings_them_into_a_snapshot() {
    // Red-team pass 3, R3-11: Keel's index was seeded from one naming `../../…/.ssh/…` and
    // `git add --all` read the key into `.git/objects`, where a command read it back.
    assert!(git_available(), "these tests need git on PATH");
    let dir = tempfile::tempdir().unwrap();
    let ws = keel_tools::fixtures::index_naming_a_file_outside(dir.path());
    std::fs::write(ws.join("a.txt"), "one\n").unwrap();
    let snaps = Snapshots::open(&ws).unwrap();
    snaps.take("s", 0, None).unwrap();
    std::fs::write(ws.join("a.txt"), "two\n").unwrap();
    snaps.take("s", 1, None).unwrap();
    let objects = git(
        &ws,
        &["cat-file", "--batch-all-objects", "--batch", "--unordered"],
    );
    assert!(!objects.contains("RT-SECRET"), "the key was read in");
    assert!(objects.contains("two"), "the snapshot itself was taken");
}

/// Red-team pass 5, R5-1: git reads its configuration — includes too — again when the staging
/// `git add` runs, after Keel's probe: a filter defined only by an include that appears in
/// between (a running command swapping it in, or `include.path = /proc/1/cwd/…`, which
/// resolves differently inside the sandbox) ran in the snapshot. Every driver
/// `info/attributes` names is blanked whether or not the probe saw it defined.
#[test]
fn drivers_the_attributes_name_are_blanked_before_any_config_defines_them() {
    let h = setup(true);
    std::fs::create_dir_all(h.ws.join(".git/info")).unwrap();
    std::fs::write(
        h.ws.join(".git/info/attributes"),
        "*.txt filter=kx\n[attr]m diff=dd\n*.md m\n",
    )
    .unwrap();
    let snaps = Snapshots::open(&h.ws).unwrap();
    let overrides = snaps.git.driver_overrides().unwrap();
    for key in [
        "filter.kx.clean",
        "filter.kx.smudge",
        "filter.kx.process",
        "diff.dd.textconv",
    ] {
        assert!(
            overrides.iter().any(|(k, v)| k == key && v.is_empty()),
            "{key} not blanked: {overrides:?}"
        );
    }
    // Now the include appears (what the probe never saw) and a snapshot stages a .txt file.
    let out = std::process::Command::new("git")
        .args(["config", "include.path", "../cfg/inc.cfg"])
        .current_dir(&h.ws)
        .output()
        .unwrap();
    assert!(out.status.success());
    std::fs::create_dir_all(h.ws.join("cfg")).unwrap();
    std::fs::write(
        h.ws.join("cfg/inc.cfg"),
        format!("[filter \"kx\"]\n\tclean = {}\n", h.payload.display()),
    )
    .unwrap();
    std::fs::write(h.ws.join("a.txt"), "a\n").unwrap();
    snaps.take("s", 0, None).unwrap();
    assert!(!h.outside.join("canary").exists(), "the filter ran");
}

/// Red-team pass 5, R5-9: a snapshot copied a private file's content (`secrets.env`, 0600)
/// into a world-readable loose object, where another local user read it. Keel's objects are
/// written owner-only.
#[test]
fn a_private_files_content_is_not_left_readable_by_others() {
    private_content_stays_private(false);
}

/// Red-team pass 7, R7-17: a shipped `core.sharedRepository = world` had Keel write the 0600
/// file's content as a 0444 object.
#[test]
fn a_shipped_shared_repository_does_not_publish_a_private_file() {
    private_content_stays_private(true);
}

fn private_content_stays_private(shared_world: bool) {
    use std::os::unix::fs::PermissionsExt;
    let h = setup(true);
    if shared_world {
        config(&h, "core.sharedRepository", "world");
    }
    let secret = h.ws.join("secrets.env");
    std::fs::write(&secret, "DB_PASSWORD=s3cret\n").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    let snaps = Snapshots::open(&h.ws).unwrap();
    snaps.take("s", 0, None).unwrap();
    let out = Command::new("git")
        .args(["hash-object", "secrets.env"])
        .current_dir(&h.ws)
        .output()
        .unwrap();
    let sha = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let object = snaps
        .git_dir()
        .join("objects")
        .join(&sha[..2])
        .join(&sha[2..]);
    let mode = std::fs::metadata(&object)
        .unwrap_or_else(|e| panic!("{}: {e}", object.display()))
        .permissions()
        .mode();
    assert_eq!(mode & 0o077, 0, "object {} is {mode:o}", object.display());
}

#[test]
fn a_partial_clones_promisor_transport_never_runs() {
    // Red-team pass 6, R6-1: a shipped "partial clone" whose promisor remote is `ext::<program>`
    // with `protocol.ext.allow = always` (beating the forced `protocol.allow=never`), and the root
    // tree object missing. Keel's discovery reads `HEAD:<workspace>`: git would fetch the
    // missing object on demand — running the program, unconfined.
    let h = setup(false);
    let app = h.ws.join("app");
    std::fs::create_dir_all(&app).unwrap();
    std::fs::rename(h.ws.join("a.txt"), app.join("a.txt")).unwrap();
    std::fs::rename(h.ws.join("b.dat"), app.join("b.dat")).unwrap();
    git(&h.ws, &["init", "-q"]);
    git(&h.ws, &["add", "."]);
    git(&h.ws, &["commit", "-qm", "init"]);
    let transport = h.outside.join("bin").join("transport");
    std::fs::write(
        &transport,
        format!(
            "#!/bin/sh\ntouch '{o}/canary'\nenv > '{o}/env-dump'\n",
            o = h.outside.display()
        ),
    )
    .unwrap();
    make_executable(&transport);
    config(&h, "core.repositoryformatversion", "1");
    config(&h, "extensions.partialClone", "origin");
    config(
        &h,
        "remote.origin.url",
        &format!("ext::{}", transport.display()),
    );
    config(&h, "remote.origin.promisor", "true");
    config(&h, "protocol.ext.allow", "always");
    let tree = git(&h.ws, &["rev-parse", "HEAD^{tree}"]);
    let tree = tree.trim();
    std::fs::remove_file(h.ws.join(".git/objects").join(&tree[..2]).join(&tree[2..])).unwrap();
    // The repository is broken (an object is missing): snapshots may fail, but nothing runs.
    let _ = exercise(&app);
    assert!(
        !h.outside.join("canary").exists(),
        "the promisor remote's transport program ran"
    );
}
