//! What the read-only lane costs everyday commands: each line of
//! `tests/fixtures/shell_safety/everyday_read_only.txt` is run in a fresh clone of this
//! repository under the workspace-write sandbox (the baseline: how commands ran before the
//! lane) and under the read-only sandbox (how a command allowed only because it reads runs
//! under `untrusted` and `on-request`), and the two outcomes — exit status and stdout — are
//! compared. A second workspace-write run of each command separates commands whose output
//! changes from run to run (`ls -lt`, `date`) from the ones the read-only sandbox changes.
//! Lines whose program is not installed count as run (both sandboxes say so alike).
//! Run with `cargo bench -p keel-tools --bench readonly_lane` (root, or a kernel that lets a
//! normal user create user namespaces; without a sandbox both runs are the same and the
//! figures say nothing).

// The clone is made with the system git; the comparison runs everything through the runner.
#![allow(clippy::disallowed_methods)]

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use keel_tools::sandbox::{self, SandboxPolicy};
use keel_tools::shell::ShellSettings;
use keel_tools::shell::exec::{self, ExecRequest};

const CORPUS: &str = include_str!("../tests/fixtures/shell_safety/everyday_read_only.txt");

fn commands() -> Vec<String> {
    CORPUS
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| l.replace('␤', "\n"))
        .collect()
}

/// (exit code, stdout, stderr) of `command` in `dir` under `policy`.
async fn outcome(
    dir: &Path,
    command: &str,
    policy: SandboxPolicy,
) -> (Option<i32>, String, String) {
    let settings = ShellSettings::default();
    let mut req = ExecRequest::new(
        vec![
            exec::shell_program().into_os_string(),
            OsString::from("-c"),
            OsString::from(command),
        ],
        dir,
    );
    req.policy = policy;
    req.roots = settings.roots_for(dir);
    req.timeout = Duration::from_secs(30);
    match exec::run(req).await {
        Ok(out) => (out.exit_code(), out.stdout.text(), out.stderr.text()),
        Err(e) => (None, String::new(), e.to_string()),
    }
}

fn clone_of_this_repository() -> Result<(tempfile::TempDir, PathBuf), String> {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let ws = dir.path().join("ws");
    let out = Command::new("git")
        .args(["clone", "--quiet", "--no-hardlinks"])
        .arg(&repo)
        .arg(&ws)
        .output()
        .map_err(|e| format!("cannot run git: {e}"))?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    Ok((dir, ws))
}

fn main() {
    if !sandbox::is_available() {
        println!(
            "SKIPPED readonly_lane: no kernel sandbox here ({})",
            sandbox::describe_support()
        );
        return;
    }
    let (_keep, ws) = match clone_of_this_repository() {
        Ok(c) => c,
        Err(e) => {
            println!("SKIPPED readonly_lane: cannot clone this repository: {e}");
            return;
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            println!("SKIPPED readonly_lane: no async runtime: {e}");
            return;
        }
    };
    let commands = commands();
    let n = commands.len();
    let (mut unstable, mut differ) = (Vec::new(), Vec::new());
    let (mut write_time, mut ro_time) = (Duration::ZERO, Duration::ZERO);
    for c in &commands {
        let t = Instant::now();
        let base = runtime.block_on(outcome(&ws, c, SandboxPolicy::WorkspaceWrite));
        write_time += t.elapsed();
        let t = Instant::now();
        let lane = runtime.block_on(outcome(&ws, c, SandboxPolicy::ReadOnly));
        ro_time += t.elapsed();
        let again = runtime.block_on(outcome(&ws, c, SandboxPolicy::WorkspaceWrite));
        if (&base.0, &base.1) != (&again.0, &again.1) {
            unstable.push(c.clone());
        } else if (&base.0, &base.1) != (&lane.0, &lane.1) {
            let why = lane.2.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
            differ.push(format!(
                "{c:?}: exit {:?} → {:?} ({})",
                base.0,
                lane.0,
                why.chars().take(120).collect::<String>()
            ));
        }
    }
    let stable = n - unstable.len();
    println!("everyday read-only commands: {n}, in a clone of this repository");
    println!(
        "  baseline (workspace-write, run twice): {} of {n} differ between two runs (left out)",
        unstable.len()
    );
    println!(
        "  read-only lane: {}/{stable} change exit status or stdout = {:.1}%",
        differ.len(),
        differ.len() as f64 * 100.0 / stable.max(1) as f64
    );
    for d in &differ {
        println!("    {d}");
    }
    println!(
        "  time per command: workspace-write {:?}, read-only {:?}",
        write_time / n as u32,
        ro_time / n as u32
    );
}
