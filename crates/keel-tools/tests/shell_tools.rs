//! The shell tools end to end: the kernel sandbox, process-group handling, truncation, the
//! scrubbed environment, run_tests on fixture projects, and auto-lint after writes.

// Tests start programs of their own (the keel binary, git fixtures, tmux, servers): allowed
// here, outside Keel's one spawn path (docs/SECURITY.md, "One way to start a process").
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use keel_tools::sandbox::{self, SandboxPolicy, WritableRoots};
use keel_tools::shell::exec::{self, ExecRequest};
use keel_tools::shell::{self, LintSettings, ShellSettings};
use keel_tools::{
    ToolContext, ToolEffect, ToolError, ToolOutput, ToolRegistry, TypedTool, Workspace, builtin,
};
use serde_json::json;

struct Fixture {
    dir: tempfile::TempDir,
    ctx: ToolContext,
    tools: ToolRegistry,
}

impl Fixture {
    fn new() -> Self {
        Self::with_lint(LintSettings {
            enabled: false,
            ..LintSettings::default()
        })
    }

    fn with_lint(lint: LintSettings) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let ctx = ToolContext::new(Workspace::new(dir.path()).unwrap());
        let mut tools = ToolRegistry::new();
        builtin::register_defaults(&mut tools);
        shell::register(&mut tools, ShellSettings::default(), lint);
        Self { dir, ctx, tools }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    async fn call(&self, tool: &str, args: serde_json::Value) -> Result<ToolOutput, ToolError> {
        self.tools.execute(tool, args, &self.ctx).await
    }

    async fn ok(&self, tool: &str, args: serde_json::Value) -> ToolOutput {
        match self.call(tool, args).await {
            Ok(o) => o,
            Err(e) => panic!("{tool} failed: {e}"),
        }
    }

    /// The text of a call that must fail (an error result for the model).
    async fn failed(&self, tool: &str, args: serde_json::Value) -> String {
        match self.call(tool, args).await {
            Err(ToolError::Model(msg)) => msg,
            Err(ToolError::Failed(out)) => out.content,
            other => panic!("{tool} should have failed: {other:?}"),
        }
    }

    /// A call that must fail and keep its typed details (a failed test run).
    async fn failed_with_details(&self, tool: &str, args: serde_json::Value) -> ToolOutput {
        match self.call(tool, args).await {
            Err(ToolError::Failed(out)) => *out,
            other => panic!("{tool} should have failed with its details: {other:?}"),
        }
    }
}

fn require(program: &str) {
    assert!(
        exec::find_program(program).is_some(),
        "`{program}` is not installed; this test needs it (CI's .ci/run installs it)"
    );
}

/// True when Landlock works here; otherwise prints why the caller skips.
fn landlock_or_skip(test: &str) -> bool {
    if sandbox::is_available() {
        return true;
    }
    println!(
        "SKIPPED {test}: {} (CI machines have Landlock)",
        sandbox::describe_support()
    );
    false
}

async fn run_in(dir: &Path, policy: SandboxPolicy, script: &str) -> exec::ExecOutput {
    let mut req = ExecRequest::new(
        vec![
            OsString::from("bash"),
            OsString::from("-c"),
            OsString::from(script),
        ],
        dir,
    );
    req.policy = policy;
    req.roots = WritableRoots {
        workspace: Some(dir.to_path_buf()),
        ..WritableRoots::default()
    };
    req.timeout = Duration::from_secs(30);
    exec::run(req).await.unwrap()
}

#[tokio::test]
async fn read_only_sandbox_blocks_every_write() {
    if !landlock_or_skip("read_only_sandbox_blocks_every_write") {
        return;
    }
    require("python3");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "original").unwrap();
    let outside_tmp = std::env::temp_dir().join(format!("keel-ro-{}", std::process::id()));
    let attempts = [
        (r#"python3 -c "open('x','w')""#, "x"),
        (":>f", "f"),
        ("cp a.txt copy.txt", "copy.txt"),
        ("touch t", "t"),
        ("mkdir d", "d"),
        (
            "echo changed > a.txt.new && mv a.txt.new a.txt",
            "a.txt.new",
        ),
    ];
    for (script, file) in attempts {
        let out = run_in(dir.path(), SandboxPolicy::ReadOnly, script).await;
        assert!(
            !out.success(),
            "`{script}` succeeded in the read-only sandbox"
        );
        assert!(out.sandboxed);
        assert!(!dir.path().join(file).exists(), "`{script}` wrote {file}");
    }
    assert_eq!(
        std::fs::read_to_string(dir.path().join("a.txt")).unwrap(),
        "original"
    );
    let out = run_in(
        dir.path(),
        SandboxPolicy::ReadOnly,
        &format!("touch {}", outside_tmp.display()),
    )
    .await;
    assert!(
        !out.success() && !outside_tmp.exists(),
        "wrote to the shared temp dir"
    );
    // Reading and the private temp dir still work.
    let out = run_in(
        dir.path(),
        SandboxPolicy::ReadOnly,
        r#"cat a.txt && echo scratch > "$TMPDIR/ok" && cat "$TMPDIR/ok" && ls >/dev/null"#,
    )
    .await;
    assert!(out.success(), "{}", out.combined_text());
    assert_eq!(out.stdout.text(), "originalscratch\n");
}

#[tokio::test]
async fn write_sandbox_confines_writes_to_the_workspace() {
    if !landlock_or_skip("write_sandbox_confines_writes_to_the_workspace") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let outside = outside_every_writable_root();
    std::fs::create_dir_all(&outside).unwrap();
    let victim = outside.join("victim.txt");
    std::fs::write(&victim, "keep me").unwrap();
    let out = run_in(
        dir.path(),
        SandboxPolicy::WorkspaceWrite,
        "mkdir -p sub && echo inside > sub/in.txt && echo tmp > \"$TMPDIR/t\"",
    )
    .await;
    assert!(out.success(), "{}", out.combined_text());
    assert_eq!(
        std::fs::read_to_string(dir.path().join("sub/in.txt")).unwrap(),
        "inside\n"
    );
    for script in [
        format!("echo x > {}/new.txt", outside.display()),
        format!("echo x >> {}", victim.display()),
        format!("rm {}", victim.display()),
        format!("touch {}/t", outside.display()),
    ] {
        let out = run_in(dir.path(), SandboxPolicy::WorkspaceWrite, &script).await;
        assert!(!out.success(), "`{script}` succeeded outside the workspace");
    }
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep me");
    assert!(!outside.join("new.txt").exists() && !outside.join("t").exists());
    std::fs::remove_dir_all(&outside).unwrap();
}

/// A new directory outside the workspace and outside everything the workspace-write sandbox
/// lets commands write (temp dirs, tool caches), wherever the repository is checked out (a
/// clone under /tmp puts `target/` inside a writable temp dir).
fn outside_every_writable_root() -> PathBuf {
    let canonical = |p: PathBuf| p.canonicalize().unwrap_or(p);
    let mut writable: Vec<PathBuf> = [
        std::env::temp_dir(),
        PathBuf::from("/tmp"),
        PathBuf::from("/var/tmp"),
    ]
    .into_iter()
    .chain(
        keel_tools::shell::DEFAULT_WRITABLE
            .iter()
            .map(|d| keel_tools::sandbox::expand_home(d)),
    )
    .map(canonical)
    .collect();
    writable.sort();
    let name = format!("keel-sandbox-outside-{}", std::process::id());
    let candidates = [
        std::env::var_os("CARGO_TARGET_TMPDIR").map(PathBuf::from),
        std::env::var_os("HOME").map(PathBuf::from),
        Some(PathBuf::from("/var/lib")),
    ];
    for parent in candidates.into_iter().flatten() {
        let parent = canonical(parent);
        let writable_parent = writable.iter().any(|w| parent.starts_with(w));
        let usable = std::fs::create_dir_all(parent.join(&name)).is_ok();
        if usable && !writable_parent {
            return parent.join(&name);
        }
        let _ = std::fs::remove_dir(parent.join(&name));
    }
    panic!("no directory outside the sandbox's writable roots {writable:?} could be created");
}

/// True while a live (not zombie) process has `marker` in its command line. Pids inside the
/// command's PID namespace mean nothing here, so the test names its processes instead.
fn process_alive(marker: &str) -> bool {
    std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
        let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
        // A zombie is dead; it only waits for its parent to notice.
        String::from_utf8_lossy(&cmdline).contains(marker)
            && !stat
                .rsplit(')')
                .next()
                .is_some_and(|rest| rest.trim_start().starts_with('Z'))
    })
}

async fn wait_dead(marker: &str) -> bool {
    for _ in 0..50 {
        if !process_alive(marker) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

fn marker(what: &str) -> String {
    format!("keel-{what}-{}", std::process::id())
}

#[tokio::test]
async fn timeout_kills_the_whole_process_group() {
    let f = Fixture::new();
    let started = Instant::now();
    let grandchild = marker("grandchild");
    let out = f
        .ok(
            "run_command",
            json!({
                "command": format!("bash -c '(exec -a {grandchild} sleep 300) & wait' & echo started; sleep 300"),
                "timeout": 1
            }),
        )
        .await;
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "took {:?}",
        started.elapsed()
    );
    assert!(
        out.content.contains("timed out after 1 s"),
        "{}",
        out.content
    );
    assert!(
        out.content.contains("started"),
        "output before the timeout is kept: {}",
        out.content
    );
    let meta = out.metadata.unwrap();
    assert_eq!(meta["timed_out"], true);
    assert_eq!(meta["exit_code"], serde_json::Value::Null);
    assert!(
        wait_dead(&grandchild).await,
        "the grandchild survived the timeout"
    );
}

#[tokio::test]
async fn background_processes_end_with_the_command() {
    let f = Fixture::new();
    let started = Instant::now();
    let bg = marker("background");
    let out = f
        .ok(
            "run_command",
            json!({"command": format!("(exec -a {bg} sleep 300) & echo done")}),
        )
        .await;
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(out.content.starts_with("exit code: 0"), "{}", out.content);
    assert!(wait_dead(&bg).await, "the background process survived");
}

/// Long output is returned whole (the engine, not the tool, fits a result to the budget and
/// keeps the rest retrievable); only past the safety cap does a marker stand for the middle.
#[tokio::test]
async fn long_output_is_returned_whole_up_to_the_cap() {
    let mut f = Fixture::new();
    f.ctx.max_output_chars = 1_000;
    let out = f
        .ok(
            "run_command",
            json!({"command": "seq 1 100000; echo oops >&2; exit 3"}),
        )
        .await;
    let c = &out.content;
    assert!(
        c.starts_with("exit code: 3\nstdout:\n1\n2\n3\n"),
        "{}",
        &c[..200]
    );
    assert!(c.contains("\n50000\n") && c.contains("100000\n"));
    assert!(!c.contains("omitted"));
    assert!(c.ends_with("stderr:\noops"), "{}", &c[c.len() - 200..]);
    assert_eq!(out.details.exit_code, Some(3));
    // What a person sees of it: the last lines, bounded, with the count of the rest.
    let tail = out.details.output_tail.clone().unwrap_or_default();
    assert!(tail.text.ends_with("99999\n100000\noops"), "{}", tail.text);
    assert_eq!(tail.text.lines().count(), keel_protocol::Excerpt::MAX_LINES);
    assert_eq!(tail.total_lines, 100_001);

    let cap = keel_tools::text::OUTPUT_CAP_CHARS;
    let out = f
        .ok(
            "run_command",
            json!({"command": format!("head -c {} /dev/zero | tr '\\0' a; echo; echo END", cap + 500_000)}),
        )
        .await;
    let c = &out.content;
    assert!(
        c.contains("omitted: the output passed the 2000000-character cap"),
        "{} chars: {}",
        c.len(),
        &c[..c.len().min(300)]
    );
    assert!(c.ends_with("END"), "{}", &c[c.len() - 100..]);
    assert!(c.len() < cap + 1_000, "{} chars", c.len());
}

#[tokio::test]
async fn stdin_is_closed() {
    let f = Fixture::new();
    let started = Instant::now();
    let out = f
        .ok("run_command", json!({"command": "cat; echo after"}))
        .await;
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(out.content, "exit code: 0\nstdout:\nafter");
}

/// Runs as a child of itself with secrets in its environment (tests cannot set variables in
/// their own process safely), and checks the command sees only the allowlist: not the secrets,
/// whatever their names, and not Keel's own environment through /proc.
#[tokio::test]
async fn secrets_are_not_passed_to_commands() {
    const CANARY: &str = "canary-5f3a9c";
    if std::env::var_os("KEEL_SECRET_CHILD").is_some() {
        let f = Fixture::new();
        let script = "env; echo ==parent; cat /proc/$PPID/environ; echo ==keel; \
                      cat /proc/$KEEL_PID/environ; echo ==self-leader; \
                      for p in /proc/[0-9]*; do cat $p/environ 2>/dev/null; done; true";
        let script = script.replace("$KEEL_PID", &std::process::id().to_string());
        let out = f.ok("run_command", json!({ "command": script })).await;
        assert!(out.content.contains("PATH="), "{}", out.content);
        if sandbox::is_available() {
            for leaked in [
                CANARY,
                "KEEL_VISIBLE_NOT_ALLOWED",
                "GH_PAT",
                "MYSQL_PWD",
                "SENTRY_DSN",
            ] {
                assert!(
                    !out.content.contains(leaked),
                    "{leaked} leaked: {}",
                    out.content
                );
            }
        } else {
            // Without Landlock /proc/<keel>/environ is readable: only check the command's own.
            let own = out.content.split("==parent").next().unwrap_or_default();
            assert!(!own.contains(CANARY), "{own}");
        }
        println!("child checked the environment");
        return;
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "secrets_are_not_passed_to_commands",
            "--nocapture",
        ])
        .env("KEEL_SECRET_CHILD", "1")
        .env("OPENAI_API_KEY2", CANARY)
        .env("GH_PAT", CANARY)
        .env("MYSQL_PWD", CANARY)
        .env("SENTRY_DSN", format!("https://{CANARY}@sentry.example/1"))
        .env("KEEL_TEST_SECRET_CANARY", CANARY)
        .env("KEEL_VISIBLE_NOT_ALLOWED", "yes")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("child checked the environment"), "{stdout}");
}

#[tokio::test]
async fn read_only_context_refuses_mutating_commands_and_runs_the_rest_confined() {
    let mut f = Fixture::new();
    f.ctx.sandbox = SandboxPolicy::ReadOnly;
    let err = f
        .call("run_command", json!({"command": "ls && rm -rf src"}))
        .await;
    let Err(ToolError::Model(msg)) = err else {
        panic!("expected a refusal, got {err:?}")
    };
    assert!(
        msg.contains("only read-only commands") && msg.contains("`rm` deletes files"),
        "{msg}"
    );
    std::fs::write(f.path("a.txt"), "hello").unwrap();
    let out = f
        .ok("run_command", json!({"command": "cat a.txt | wc -c"}))
        .await;
    assert_eq!(out.content, "exit code: 0\nstdout:\n5");
    let meta = out.metadata.unwrap();
    assert_eq!(meta["class"], "read_only");
    assert_eq!(meta["sandbox"], "read_only");
    assert_eq!(meta["sandboxed"], sandbox::is_available());
}

#[tokio::test]
async fn deny_list_refuses_nested_commands() {
    let f = Fixture::new();
    let err = f
        .call(
            "run_command",
            json!({"command": "echo hi && bash -c 'sudo ls'"}),
        )
        .await;
    let Err(ToolError::Model(msg)) = err else {
        panic!("expected a refusal, got {err:?}")
    };
    assert!(msg.contains("`sudo` is on the [shell] deny list"), "{msg}");
    let err = f.call("run_command", json!({"command": "  "})).await;
    assert!(matches!(err, Err(ToolError::Model(_))));
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), dest).unwrap();
        }
    }
}

fn project(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/projects")
        .join(name)
}

#[tokio::test]
async fn run_tests_summarises_a_cargo_project() {
    require("cargo");
    let f = Fixture::new();
    copy_dir(&project("cargo_one_failing"), f.dir.path());
    // Failing tests are a failed call (✗ in every front end), with the summary as its text,
    // that keeps its details for the renderers: exit code, output tail, counts.
    let out = f.failed_with_details("run_tests", json!({})).await;
    assert_eq!(out.details.exit_code, Some(101));
    let tail = out.details.output_tail.as_ref().expect("an output tail");
    assert!(tail.text.contains("test result: FAILED"), "{tail:?}");
    let meta = out.metadata.as_ref().expect("metadata");
    assert_eq!(
        (
            &meta["passed"],
            &meta["failed"],
            &meta["skipped"],
            &meta["status"]
        ),
        (&json!(2), &json!(1), &json!(1), &json!("failed")),
        "{meta}"
    );
    let c = &out.content;
    assert!(
        c.starts_with("cargo test: 2 passed, 1 failed, 1 skipped (exit code 101)"),
        "{c}"
    );
    assert!(
        c.contains("First failure:\n---- tests::broken_on_purpose stdout ----"),
        "{c}"
    );
    assert!(c.contains("two and two make four"), "{c}");
    assert!(
        !c.contains("test tests::adds ... ok"),
        "only the failure is shown: {c}"
    );

    let verbose = f.failed("run_tests", json!({"verbose": true})).await;
    assert!(verbose.contains("test tests::adds ... ok"), "{verbose}");
}

#[tokio::test]
async fn run_tests_summarises_a_pytest_project() {
    require("python3");
    let has_pytest = std::process::Command::new("python3")
        .args(["-m", "pytest", "--version"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !(has_pytest || exec::find_program("pytest").is_some()) {
        // A developer's fresh machine may lack pytest: skip loudly there; CI installs it.
        assert!(
            std::env::var_os("CI").is_none(),
            "pytest is not installed; install python3-pytest or `pip install pytest` (CI's .ci/run does)"
        );
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED run_tests_summarises_a_pytest_project: pytest is not installed (`pip install pytest`)"
        );
        return;
    }
    let f = Fixture::new();
    copy_dir(&project("pytest_one_failing"), f.dir.path());
    let c = &f.failed("run_tests", json!({})).await;
    assert!(
        c.starts_with("pytest: 1 passed, 1 failed, 1 skipped (exit code 1)"),
        "{c}"
    );
    assert!(c.contains("test_broken_on_purpose"), "{c}");
    assert!(c.contains("two and two make four"), "{c}");
    assert!(
        !f.path(".pytest_cache").exists(),
        "no cache left in the workspace"
    );
    let scoped = f
        .failed("run_tests", json!({"path": "tests/test_calc.py"}))
        .await;
    assert!(scoped.contains("tests/test_calc.py"), "{scoped}");
    let err = f.call("run_tests", json!({"path": "../elsewhere"})).await;
    assert!(matches!(err, Err(ToolError::Model(m)) if m.contains("..")));
}

/// A `unittest` project: run by pytest when it is installed, else by `python3 -m unittest`
/// (before, a missing pytest made every run "no test counts found" — and ✓).
#[tokio::test]
async fn run_tests_runs_a_unittest_project_with_or_without_pytest() {
    require("python3");
    let f = Fixture::new();
    copy_dir(&project("unittest_one_failing"), f.dir.path());
    let c = f.failed("run_tests", json!({})).await;
    let label = if exec::find_program("pytest").is_some() {
        "pytest"
    } else {
        "unittest"
    };
    assert!(
        c.starts_with(&format!(
            "{label}: 1 passed, 1 failed, 1 skipped (exit code 1)"
        )),
        "{c}"
    );
    assert!(c.contains("two and two make four"), "{c}");
    if label == "unittest" {
        assert!(c.contains("`python3 -m unittest discover -s tests`"), "{c}");
        let one = f
            .failed("run_tests", json!({"path": "tests/test_calc.py"}))
            .await;
        // The nearest directory with test modules is where it runs.
        assert!(
            one.contains("`python3 -m unittest test_calc.py` in tests"),
            "{one}"
        );
    }
    // Fixed, the run passes (✓).
    let test = f.path("tests/test_calc.py");
    let fixed = std::fs::read_to_string(&test)
        .unwrap()
        .replace("add(2, 2), 5", "add(2, 2), 4");
    std::fs::write(&test, fixed).unwrap();
    let out = f.ok("run_tests", json!({})).await;
    assert!(
        out.content.starts_with(&format!(
            "{label}: 2 passed, 0 failed, 1 skipped (exit code 0)"
        )),
        "{}",
        out.content
    );
    assert_eq!(out.details.exit_code, Some(0));
}

/// A test command that fails without reporting any test is a failure, never a pass.
#[tokio::test]
async fn run_tests_fails_when_the_command_fails_before_counting() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = ToolContext::new(Workspace::new(dir.path()).unwrap());
    let mut tools = ToolRegistry::new();
    let settings = ShellSettings {
        test_command: Some("echo 'No module named pytest' >&2; exit 1".into()),
        ..ShellSettings::default()
    };
    shell::register(
        &mut tools,
        settings,
        LintSettings {
            enabled: false,
            ..LintSettings::default()
        },
    );
    let err = tools.execute("run_tests", json!({}), &ctx).await;
    let Err(ToolError::Failed(out)) = err else {
        panic!("a failed test command must be a failed call: {err:?}")
    };
    assert_eq!(out.details.exit_code, Some(1));
    assert!(
        out.details
            .output_tail
            .as_ref()
            .is_some_and(|t| t.text.contains("No module named pytest")),
        "{:?}",
        out.details
    );
    let msg = out.content;
    assert!(
        msg.starts_with(
            "test command: FAILED — the tests did not run to a result (exit code 1, no test counts)"
        ),
        "{msg}"
    );
    assert!(msg.contains("No module named pytest"), "{msg}");
}

#[tokio::test]
async fn run_tests_explains_when_no_runner_is_found() {
    let f = Fixture::new();
    let err = f.call("run_tests", json!({})).await;
    let Err(ToolError::Model(msg)) = err else {
        panic!("{err:?}")
    };
    assert!(
        msg.contains("no test runner found") && msg.contains("test_command"),
        "{msg}"
    );
}

fn python_only_lint() -> LintSettings {
    let mut lint = LintSettings::default();
    lint.commands.insert(
        "python".into(),
        vec!["python3 -m py_compile {files}".into()],
    );
    lint
}

#[tokio::test]
async fn auto_lint_reports_findings_after_create_file() {
    require("python3");
    let f = Fixture::with_lint(python_only_lint());
    let out = f
        .ok(
            "create_file",
            json!({"path": "pkg/bad.py", "content": "def f(:\n    pass\n"}),
        )
        .await;
    let c = &out.content;
    assert!(c.starts_with("Created `pkg/bad.py`"), "{c}");
    assert!(c.contains("[auto-check] `python3 -m py_compile`"), "{c}");
    assert!(c.contains("bad.py") && c.contains("SyntaxError"), "{c}");
    assert!(
        !f.path("pkg/__pycache__").exists(),
        "the check leaves no bytecode behind"
    );

    let out = f
        .ok(
            "create_file",
            json!({"path": "good.py", "content": "x = 1\n"}),
        )
        .await;
    assert!(
        out.content.contains("no findings for good.py"),
        "{}",
        out.content
    );
    let out = f
        .ok(
            "create_file",
            json!({"path": "notes.md", "content": "# hi\n"}),
        )
        .await;
    assert!(
        !out.content.contains("[auto-check]"),
        "no check for markdown: {}",
        out.content
    );
}

/// A writing tool that is not create_file: the hook keys off the result's typed `files`.
struct WriteTwo;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct NoArgs {}

impl TypedTool for WriteTwo {
    type Args = NoArgs;
    const NAME: &'static str = "write_two";
    fn description(&self) -> &str {
        "test tool"
    }
    fn effect(&self) -> ToolEffect {
        ToolEffect::WritesFiles
    }
    async fn run(&self, _: NoArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        std::fs::write(ctx.workspace.root().join("a.py"), "ok = True\n").unwrap();
        std::fs::write(ctx.workspace.root().join("b.py"), "if True\n").unwrap();
        Ok(ToolOutput::text("wrote two").with_files(["a.py", "b.py"]))
    }
}

/// Same, but declared read-only: the hook must not run.
struct SneakyReader;

impl TypedTool for SneakyReader {
    type Args = NoArgs;
    const NAME: &'static str = "sneaky";
    fn description(&self) -> &str {
        "test tool"
    }
    fn effect(&self) -> ToolEffect {
        ToolEffect::ReadOnly
    }
    async fn run(&self, _: NoArgs, _: &ToolContext) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::text("read").with_files(["b.py"]))
    }
}

#[tokio::test]
async fn auto_lint_runs_for_any_writing_tool_and_only_those() {
    require("python3");
    let mut f = Fixture::with_lint(python_only_lint());
    f.tools.register(WriteTwo).register(SneakyReader);
    let out = f.ok("write_two", json!({})).await;
    assert!(
        out.content.starts_with("wrote two\n\n[auto-check]"),
        "{}",
        out.content
    );
    assert!(out.content.contains("b.py"), "{}", out.content);
    let out = f.ok("sneaky", json!({})).await;
    assert_eq!(out.content, "read");
}

#[tokio::test]
async fn auto_lint_runs_cargo_check_for_rust() {
    require("cargo");
    let f = Fixture::with_lint(LintSettings::default());
    copy_dir(&project("cargo_one_failing"), f.dir.path());
    // Before anything is built (no Cargo.lock, no target/) the check cannot be confined to
    // its build output (red-team B13): it is skipped and says why.
    let out = f
        .ok(
            "create_file",
            json!({"path": "src/first.rs", "content": "\n"}),
        )
        .await;
    assert!(
        out.content.contains("skipped `cargo check`"),
        "{}",
        out.content
    );
    std::fs::write(
        f.path("Cargo.lock"),
        "# This file is automatically @generated by Cargo.\n# It is not intended for manual editing.\nversion = 4\n\n[[package]]\nname = \"one_failing\"\nversion = \"0.1.0\"\n",
    )
    .unwrap();
    std::fs::create_dir(f.path("target")).unwrap();
    let out = f
        .ok(
            "create_file",
            json!({"path": "src/extra.rs", "content": "pub fn broken() -> i32 {\n    \"not a number\"\n}\n"}),
        )
        .await;
    // Not yet part of the crate: cargo check is clean for it.
    assert!(
        out.content.contains("no findings for src/extra.rs"),
        "{}",
        out.content
    );
    std::fs::remove_file(f.path("src/lib.rs")).unwrap();
    let out = f
        .ok(
            "create_file",
            json!({"path": "src/lib.rs", "content": "mod extra;\npub fn ok() -> i32 { 1 }\n"}),
        )
        .await;
    // The error is in extra.rs, newly reported since the last check: it is shown.
    assert!(
        out.content.contains("src/extra.rs:2:5: error[E0308]"),
        "{}",
        out.content
    );
}

#[test]
fn settings_bound_the_timeout() {
    let s = ShellSettings::default();
    assert_eq!(s.timeout_for(None), Duration::from_secs(60));
    assert_eq!(s.timeout_for(Some(0)), Duration::from_secs(60));
    assert_eq!(s.timeout_for(Some(5)), Duration::from_secs(5));
    assert_eq!(s.timeout_for(Some(10_000)), Duration::from_secs(300));
    let s = Arc::new(s);
    assert_eq!(
        s.policy_for(SandboxPolicy::ReadOnly),
        SandboxPolicy::ReadOnly
    );
}
