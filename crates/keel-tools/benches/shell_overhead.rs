//! Overhead of Keel's shell machinery per command, as a ratio to running `true` plainly in
//! the same run: command analysis alone, the process runner without and with the sandbox
//! (namespaces through the helper, Landlock, seccomp), and `run_command` end to end
//! (analysis + bash + sandbox + capture) next to plain `bash -c true`, the two interleaved.
//!
//! Run: `cargo bench -p keel-tools --bench shell_overhead`

// Benchmarks start programs of their own (the keel binary, baselines such as `bash -c true`):
// allowed here, outside Keel's one spawn path (docs/SECURITY.md, "One way to start a process").
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use std::ffi::OsString;
use std::hint::black_box;
use std::time::{Duration, Instant};

use keel_tools::sandbox::{self, SandboxPolicy};
use keel_tools::shell::exec::{self, ExecRequest};
use keel_tools::shell::{self, LintSettings, ShellSettings, classify};
use keel_tools::{ToolContext, ToolRegistry, Workspace};

const RUNS: u32 = 200;
/// Runs in the workspace holding installed dependencies, and its `node_modules` packages.
const DEPS_RUNS: u32 = 40;
const PACKAGES: usize = 1_500;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn per_run(total: Duration, n: u32) -> Duration {
    total / n
}

async fn time_async<F, Fut>(n: u32, mut f: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    // Warm up (page cache, the sandbox probe, the parser).
    for _ in 0..5 {
        f().await;
    }
    let start = Instant::now();
    for _ in 0..n {
        f().await;
    }
    per_run(start.elapsed(), n)
}

fn request(dir: &std::path::Path, argv: &[&str], policy: SandboxPolicy) -> ExecRequest {
    let mut req = ExecRequest::new(argv.iter().map(OsString::from).collect(), dir);
    req.policy = policy;
    req
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    // A repository: the workspace-write sandbox makes `.git` and `.keel` read-only (a mount
    // namespace with bind mounts, when Keel runs as root).
    std::fs::create_dir_all(root.join(".git")).unwrap();
    std::fs::create_dir_all(root.join(".keel")).unwrap();
    // As Keel runs commands: each one's post-command check journaled in the data directory
    // (`shell::pending`, written before the command, removed after its check).
    let data = tempfile::tempdir().unwrap();
    assert!(shell::pending::open(data.path()).is_empty());
    let true_path = exec::find_program("true").unwrap();
    println!("sandbox: {}", sandbox::describe_support());

    rt.block_on(async {
        let plain = time_async(RUNS, || {
            let p = true_path.clone();
            async move {
                let s = tokio::process::Command::new(p).status().await.unwrap();
                assert!(s.success());
            }
        })
        .await;
        let simple = "true";
        let realistic = "git log --oneline -n 20 | head -5 && rg -n 'fn main' src | wc -l; \
                         find . -name '*.rs' -exec grep -l unwrap {} + 2>/dev/null";
        let start = Instant::now();
        for _ in 0..RUNS * 10 {
            black_box(classify(black_box(simple)));
        }
        let analyse_simple = per_run(start.elapsed(), RUNS * 10);
        let start = Instant::now();
        for _ in 0..RUNS * 10 {
            black_box(classify(black_box(realistic)));
        }
        let analyse_realistic = per_run(start.elapsed(), RUNS * 10);

        let t = true_path.to_str().unwrap().to_string();
        let runner_off = time_async(RUNS, || {
            let req = request(&root, &[&t], SandboxPolicy::Off);
            async move {
                assert!(exec::run(req).await.unwrap().success());
            }
        })
        .await;
        let runner_ro = time_async(RUNS, || {
            let req = request(&root, &[&t], SandboxPolicy::ReadOnly);
            async move {
                assert!(exec::run(req).await.unwrap().success());
            }
        })
        .await;
        let runner_rw = time_async(RUNS, || {
            let req = request(&root, &[&t], SandboxPolicy::WorkspaceWrite);
            async move {
                assert!(exec::run(req).await.unwrap().success());
            }
        })
        .await;

        let mut tools = ToolRegistry::new();
        shell::register(
            &mut tools,
            ShellSettings::default(),
            LintSettings {
                enabled: false,
                ..LintSettings::default()
            },
        );
        let ctx = ToolContext::new(Workspace::new(&root).unwrap());
        // The headline figure: `run_command true` end to end next to plain `bash -c true`,
        // interleaved run by run (this machine is shared; load hits both alike), medians.
        let mut tool_runs = Vec::new();
        let mut bash_runs = Vec::new();
        for i in 0..RUNS + 5 {
            let start = Instant::now();
            let out = tools
                .execute("run_command", serde_json::json!({"command": "true"}), &ctx)
                .await
                .unwrap();
            let tool = start.elapsed();
            assert!(out.content.starts_with("exit code: 0"), "{}", out.content);
            let start = Instant::now();
            let s = tokio::process::Command::new("bash")
                .args(["-c", "true"])
                .status()
                .await
                .unwrap();
            let bash = start.elapsed();
            assert!(s.success());
            // The first runs warm up (page cache, the sandbox probe, the parser).
            if i >= 5 {
                tool_runs.push(tool);
                bash_runs.push(bash);
            }
        }
        let tool_call = median(tool_runs);
        let plain_bash = median(bash_runs);

        // The same in a workspace holding installed dependencies: a `node_modules` of
        // PACKAGES packages (about 18 files each) and a virtual environment, as a JavaScript
        // or Python project has. Every command that may write is followed by the runner's walk
        // of what it could write (red-team pass 7, R7-10: these trees are code too).
        let deps = tempfile::tempdir().unwrap();
        let deps_root = deps.path().to_path_buf();
        std::fs::create_dir_all(deps_root.join(".git")).unwrap();
        let mut files = 0usize;
        for p in 0..PACKAGES {
            let pkg = deps_root.join(format!("node_modules/pkg{p}"));
            std::fs::create_dir_all(pkg.join("lib")).unwrap();
            std::fs::write(pkg.join("package.json"), "{}").unwrap();
            std::fs::write(pkg.join("index.js"), "module.exports = 1;\n").unwrap();
            for f in 0..16 {
                std::fs::write(pkg.join(format!("lib/m{f}.js")), "exports.x = 1;\n").unwrap();
            }
            files += 18;
        }
        let site = deps_root.join(".venv/lib/python3.11/site-packages");
        for p in 0..200 {
            let pkg = site.join(format!("mod{p}"));
            std::fs::create_dir_all(&pkg).unwrap();
            for f in 0..10 {
                std::fs::write(pkg.join(format!("m{f}.py")), "x = 1\n").unwrap();
            }
            files += 10;
        }
        std::fs::write(deps_root.join(".venv/pyvenv.cfg"), "home = /usr/bin\n").unwrap();
        let deps_ctx = ToolContext::new(Workspace::new(&deps_root).unwrap());
        let mut deps_runs = Vec::new();
        let mut deps_bash = Vec::new();
        for i in 0..DEPS_RUNS + 3 {
            let start = Instant::now();
            let out = tools
                .execute("run_command", serde_json::json!({"command": "true"}), &deps_ctx)
                .await
                .unwrap();
            let tool = start.elapsed();
            assert!(out.content.starts_with("exit code: 0"), "{}", out.content);
            let start = Instant::now();
            let s = tokio::process::Command::new("bash")
                .args(["-c", "true"])
                .status()
                .await
                .unwrap();
            let bash = start.elapsed();
            assert!(s.success());
            if i >= 3 {
                deps_runs.push(tool);
                deps_bash.push(bash);
            }
        }
        let deps_call = median(deps_runs);
        let deps_plain = median(deps_bash);
        let ratio = |d: Duration| d.as_secs_f64() / plain.as_secs_f64();
        println!("baseline: spawn `true` plainly            {plain:>10.1?}   1.00x");
        println!(
            "analysis of `true`                        {analyse_simple:>10.1?}   {:.3}x",
            ratio(analyse_simple)
        );
        println!(
            "analysis of a realistic pipeline          {analyse_realistic:>10.1?}   {:.3}x",
            ratio(analyse_realistic)
        );
        println!(
            "runner, no sandbox (`true`)               {runner_off:>10.1?}   {:.2}x",
            ratio(runner_off)
        );
        println!(
            "runner, read-only sandbox (`true`)        {runner_ro:>10.1?}   {:.2}x",
            ratio(runner_ro)
        );
        println!(
            "runner, workspace-write sandbox (`true`)  {runner_rw:>10.1?}   {:.2}x",
            ratio(runner_rw)
        );
        println!(
            "plain `bash -c true` (median, interleaved) {plain_bash:>9.1?}   {:.2}x",
            ratio(plain_bash)
        );
        println!(
            "run_command `true` end to end (median)    {tool_call:>10.1?}   {:.2}x ({:.2}x of plain bash -c, same runs)",
            ratio(tool_call),
            tool_call.as_secs_f64() / plain_bash.as_secs_f64()
        );
        println!(
            "with installed dependencies ({files} files): plain `bash -c true` {deps_plain:.1?}, run_command `true` {deps_call:.1?}   {:.2}x of plain bash -c, same runs",
            deps_call.as_secs_f64() / deps_plain.as_secs_f64()
        );
    });
}
