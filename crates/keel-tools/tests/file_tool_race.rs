//! The race out of the workspace through Keel's own file tools (issue 29): a process the model
//! started (`setsid -f …`, outliving its call) keeps swapping `ws/d` between a directory and a
//! symlink to a directory outside — here a thread making the same system calls, far faster
//! than a shell loop — while `create_file`, `edit_file`, `insert_lines` and
//! `apply_patch` write under `d/` again and again, and `list_files` lists it. Nothing may ever
//! land outside (nor be listed from there): the outside
//! directory holds a canary file with the same content as `ws/d/e.txt` (so a write redirected
//! there would pass the edit tools' freshness check) and must end exactly as it began.
//!
//! Runs as the current user (root in CI) and again as uid 65534 through `setpriv`, the way
//! `sandbox_userns.rs` does; once with `openat2` and once with the component walk used on
//! kernels without it.

#![allow(clippy::unwrap_used, clippy::expect_used)]
// The test re-runs itself as uid 65534 through `setpriv`.
#![allow(clippy::disallowed_methods)]

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

#[path = "shared/nobody.rs"]
mod nobody;

use keel_tools::builtin::{ApplyPatch, CreateFile, EditFile, InsertLines, ListFiles, ReadFile};
use keel_tools::shell::{RunCommand, ShellSettings};
use keel_tools::{Tool, ToolContext, Workspace};
use serde_json::json;

const CHILD_DIR: &str = "KEEL_RACE_TEST_DIR";
const NOBODY: u32 = 65534;
const CANARY: &str = "canary line\n";
/// How long each tool is raced.
const RACE: Duration = Duration::from_millis(1500);

/// Swaps `ws/d` between the real directory and a symlink to `outside` until stopped, with
/// `renameat2(RENAME_EXCHANGE)` (so `d` is never missing, only ever one or the other); counts
/// the swaps.
fn start_swapper(
    ws: &Path,
    outside: &Path,
) -> (Arc<AtomicBool>, Arc<AtomicU64>, std::thread::JoinHandle<()>) {
    let stop = Arc::new(AtomicBool::new(false));
    let swaps = Arc::new(AtomicU64::new(0));
    let (d, link) = (ws.join("d"), ws.join("d.link"));
    std::os::unix::fs::symlink(outside, &link).unwrap();
    let (stop2, swaps2) = (stop.clone(), swaps.clone());
    let handle = std::thread::spawn(move || {
        while !stop2.load(Ordering::Relaxed) {
            let exchanged = rustix::fs::renameat_with(
                rustix::fs::CWD,
                &d,
                rustix::fs::CWD,
                &link,
                rustix::fs::RenameFlags::EXCHANGE,
            );
            assert!(exchanged.is_ok(), "RENAME_EXCHANGE: {exchanged:?}");
            swaps2.fetch_add(1, Ordering::Relaxed);
            std::thread::yield_now();
        }
        // Leave `d` the real directory.
        if std::fs::symlink_metadata(&d).is_ok_and(|m| m.file_type().is_symlink()) {
            let _ = rustix::fs::renameat_with(
                rustix::fs::CWD,
                &d,
                rustix::fs::CWD,
                &link,
                rustix::fs::RenameFlags::EXCHANGE,
            );
        }
    });
    (stop, swaps, handle)
}

fn outside_state(outside: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(outside)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap_or_default(),
            )
        })
        .collect();
    out.sort();
    out
}

/// Calls `tool` with `args` until the race time is up; returns (successes, attempts).
async fn race(
    ctx: &ToolContext,
    tool: &dyn Tool,
    mut args: impl FnMut(u64) -> serde_json::Value,
) -> (u64, u64) {
    let (mut ok, mut n) = (0, 0);
    let started = Instant::now();
    while started.elapsed() < RACE {
        if tool.execute(args(n), ctx).await.is_ok() {
            ok += 1;
        }
        n += 1;
    }
    (ok, n)
}

/// The attack, in `base` (a fresh directory). Panics when anything lands outside.
async fn attack(base: &Path, label: &str) {
    let ws = base.join("ws");
    let outside = base.join("outside");
    std::fs::create_dir_all(ws.join("d")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::set_permissions(&outside, std::fs::Permissions::from_mode(0o777)).unwrap();
    std::fs::write(ws.join("d/e.txt"), CANARY).unwrap();
    std::fs::write(outside.join("e.txt"), CANARY).unwrap();
    std::fs::write(ws.join("d/u.txt"), "line 0\n").unwrap();
    std::fs::write(outside.join("u.txt"), "line 0\n").unwrap();
    // Only outside: a listing that ever names it listed the outside directory.
    std::fs::write(outside.join("outside-only.txt"), "secret\n").unwrap();
    let before = outside_state(&outside);
    let ctx = ToolContext::new(Workspace::new(&ws).unwrap());

    let (stop, swaps, swapper) = start_swapper(&ws, &outside);
    let created = race(
        &ctx,
        &CreateFile,
        |i| json!({"path": format!("d/c{i}.txt"), "content": "created\n"}),
    )
    .await;
    let edit = EditFile::default();
    let mut edited = (0, 0);
    let mut inserted = (0, 0);
    let started = Instant::now();
    while started.elapsed() < RACE {
        // Each round reads the file (so the edit's freshness check passes), then changes it
        // back and forth; the content stays the canary's between rounds.
        let _ = ReadFile.execute(json!({"path": "d/e.txt"}), &ctx).await;
        let r = edit
            .execute(
                json!({"path": "d/e.txt", "edits": [{"search": "canary line", "replace": "PWNED line"}]}),
                &ctx,
            )
            .await;
        edited.1 += 1;
        if r.is_ok() {
            edited.0 += 1;
            let _ = edit
                .execute(
                    json!({"path": "d/e.txt", "edits": [{"search": "PWNED line", "replace": "canary line"}]}),
                    &ctx,
                )
                .await;
        }
        let _ = ReadFile.execute(json!({"path": "d/e.txt"}), &ctx).await;
        let r = InsertLines
            .execute(
                json!({"path": "d/e.txt", "after_line": 0, "text": "PWNED"}),
                &ctx,
            )
            .await;
        inserted.1 += 1;
        if r.is_ok() {
            inserted.0 += 1;
            let _ = ReadFile.execute(json!({"path": "d/e.txt"}), &ctx).await;
            let _ = edit
                .execute(
                    json!({"path": "d/e.txt", "edits": [{"search": "PWNED\ncanary line", "replace": "canary line"}]}),
                    &ctx,
                )
                .await;
        }
    }
    // apply_patch adds a file and moves `d/u.txt` from "line k" to "line k+1" each time.
    let mut patched = (0, 0);
    let mut k = 0u64;
    let started = Instant::now();
    while started.elapsed() < RACE {
        let n = patched.1;
        let r = ApplyPatch
            .execute(
                json!({"patch": format!(
                    "*** Begin Patch\n*** Add File: d/p{n}.txt\n+patched\n*** Update File: d/u.txt\n@@\n-line {k}\n+line {}\n*** End Patch",
                    k + 1
                )}),
                &ctx,
            )
            .await;
        patched.1 += 1;
        if r.is_ok() {
            patched.0 += 1;
            k += 1;
        }
    }
    // list_files walks `d` while it flips: it may list `d` or a symlink, never what is outside.
    let mut listed = (0, 0);
    let mut leaked = None;
    let started = Instant::now();
    while started.elapsed() < RACE {
        for path in [".", "d"] {
            listed.1 += 1;
            if let Ok(out) = ListFiles.execute(json!({"path": path}), &ctx).await {
                listed.0 += 1;
                if out.content.contains("outside-only") {
                    leaked = Some(out.content);
                }
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    swapper.join().unwrap();
    assert!(
        leaked.is_none(),
        "{label}: list_files listed the directory outside:\n{}",
        leaked.unwrap_or_default()
    );
    assert!(listed.0 > 0, "{label}: list_files never succeeded");

    let after = outside_state(&outside);
    let changed: Vec<&str> = after
        .iter()
        .filter(|f| !before.contains(f))
        .map(|(name, _)| name.as_str())
        .collect();
    assert!(
        changed.is_empty(),
        "{label}: {} files landed in or changed outside the workspace, e.g. {:?} (created \
         {created:?}, edited {edited:?}, inserted {inserted:?}, patched {patched:?}, {} swaps)",
        changed.len(),
        &changed[..changed.len().min(8)],
        swaps.load(Ordering::Relaxed)
    );
    assert_eq!(after, before, "{label}: the outside directory changed");
    // The race was real: the swapper ran and the tools got through part of the time.
    assert!(
        swaps.load(Ordering::Relaxed) > 100,
        "{label}: the swapper barely ran"
    );
    assert!(
        created.0 > 0 && patched.0 > 0 && edited.0 + inserted.0 > 0,
        "{label}: no tool call ever succeeded (created {created:?}, edited {edited:?}, patched {patched:?})"
    );
    println!(
        "{label}: created {created:?}, edited {edited:?}, inserted {inserted:?}, patched {patched:?} (ok, tries); {} swaps; nothing outside",
        swaps.load(Ordering::Relaxed)
    );
}

async fn attack_both_ways(base: &Path, label: &str) {
    let a = base.join("openat2");
    std::fs::create_dir_all(&a).unwrap();
    attack(&a, &format!("{label}, openat2")).await;
    keel_tools::beneath::force_component_walk(true);
    let b = base.join("walk");
    std::fs::create_dir_all(&b).unwrap();
    attack(&b, &format!("{label}, component walk")).await;
    keel_tools::beneath::force_component_walk(false);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_swapped_directory_never_sends_a_file_tool_write_outside() {
    if let Some(dir) = std::env::var_os(CHILD_DIR) {
        // The unprivileged child.
        attack_both_ways(Path::new(&dir), "uid 65534").await;
        return;
    }
    let base = tempfile::Builder::new()
        .prefix("keel-race-")
        .tempdir_in("/tmp")
        .unwrap();
    attack_both_ways(base.path(), "current user").await;
    if !rustix::process::geteuid().is_root() {
        return;
    }
    // Again as uid 65534 in a directory it owns.
    let dir = base.path().join("nobody");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(base.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    rustix::fs::chown(
        &dir,
        Some(rustix::process::Uid::from_raw(NOBODY)),
        Some(rustix::process::Gid::from_raw(NOBODY)),
    )
    .unwrap();
    let setpriv = ["/usr/bin/setpriv", "/bin/setpriv"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .unwrap_or_else(|| {
            panic!(
                "`setpriv` (util-linux) is needed to run this test as uid 65534; install util-linux"
            )
        });
    let out = Command::new(setpriv)
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
        ])
        .arg(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "a_swapped_directory_never_sends_a_file_tool_write_outside",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_DIR, &dir)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    for line in text.lines().filter(|l| l.contains("nothing outside")) {
        println!("{line}");
    }
    assert!(out.status.success(), "as uid 65534:\n{text}");
    assert!(
        text.contains("1 passed"),
        "the child did not run the test:\n{text}"
    );
}

/// The literal attack, through the real `run_command` and its sandbox: the command starts a
/// shell loop with `setsid -f` (so that it would outlive the call) swapping `ws/d` between
/// the directory and a symlink to a directory outside, then stays a while; meanwhile
/// `create_file` writes `d/…` again and again. Nothing may land outside, and once the call
/// returns the loop must be gone (its PID namespace ends with the command).
async fn setsid_swapper(base: &Path, label: &str) {
    let ws = base.join("ws");
    let outside = base.join("outside");
    std::fs::create_dir_all(ws.join("d")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("canary.txt"), CANARY).unwrap();
    let before = outside_state(&outside);
    let ctx = ToolContext::new(Workspace::new(&ws).unwrap());
    let run_ctx = ToolContext::new(Workspace::new(&ws).unwrap());
    std::os::unix::fs::symlink(&outside, ws.join("d.link")).unwrap();
    // The swap a command makes with `renameat2(RENAME_EXCHANGE)`: `d` is always either the
    // directory or the link out, never missing.
    let swapper = "import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\nwhile True:\n    libc.renameat2(-100, b'd', -100, b'd.link', 2)\n";
    let command = format!(
        "setsid -f python3 -c \"{swapper}\" </dev/null >/dev/null 2>&1; sleep 4; echo call-ends"
    );
    let call = tokio::spawn(async move {
        RunCommand::new(std::sync::Arc::new(ShellSettings::default()))
            .execute(json!({"command": command, "timeout": 30}), &run_ctx)
            .await
    });
    // Race while the call runs (it sleeps 4 s; the loop starts within a second).
    let (mut created, mut seen_link) = ((0u64, 0u64), 0u64);
    let started = Instant::now();
    while started.elapsed() < Duration::from_millis(3500) {
        if std::fs::symlink_metadata(ws.join("d")).is_ok_and(|m| m.file_type().is_symlink()) {
            seen_link += 1;
        }
        let r = CreateFile
            .execute(
                json!({"path": format!("d/c{}.txt", created.1), "content": "created\n"}),
                &ctx,
            )
            .await;
        created.1 += 1;
        if r.is_ok() {
            created.0 += 1;
        }
    }
    let out = call.await.unwrap().unwrap();
    assert!(
        out.content.contains("call-ends"),
        "{label}: {}",
        out.content
    );
    // The loop died with the call: `d` stops flipping.
    let is_link =
        || std::fs::symlink_metadata(ws.join("d")).is_ok_and(|m| m.file_type().is_symlink());
    let first = is_link();
    for _ in 0..100 {
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(
            is_link(),
            first,
            "{label}: the setsid loop outlived its run_command call"
        );
    }
    let after = outside_state(&outside);
    assert_eq!(
        after, before,
        "{label}: create_file wrote outside the workspace (created {created:?})"
    );
    // The race was real: `d` was seen as the link out, and writes got through.
    assert!(
        seen_link > 0,
        "{label}: the swapper never ran: {}",
        out.content
    );
    assert!(created.0 > 0, "{label}: create_file never succeeded");
    println!(
        "{label}: created {created:?} (ok, tries), d seen as a link {seen_link} times; nothing outside"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_setsid_loop_started_by_run_command_sends_no_write_outside_and_dies_with_its_call() {
    const TEST: &str =
        "a_setsid_loop_started_by_run_command_sends_no_write_outside_and_dies_with_its_call";
    let s = keel_tools::sandbox::support();
    let python = keel_tools::shell::exec::find_program("python3").is_some();
    if !(s.mount_namespace.is_ok() && s.isolation.processes && python) {
        assert!(
            std::env::var_os("CI").is_none(),
            "{TEST}: no namespaces for commands ({:?}) or no python3 — CI machines must have \
             them",
            s.mount_namespace
        );
        println!("SKIPPED {TEST}: no namespaces for commands or no python3");
        return;
    }
    if let Some(dir) = nobody::child_dir() {
        setsid_swapper(&dir, "uid 65534").await;
        return;
    }
    let base = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    setsid_swapper(base.path(), "current user").await;
    if nobody::is_root() {
        nobody::run_child(TEST, false);
    }
}
