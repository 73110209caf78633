//! Approvals judge what actually runs (issue 29), tried for effect with `keel run` headless:
//! nobody can approve, so every call that needs approval is denied. Each attack hides a
//! command (`rm -rf src`, `touch canary`) where an earlier classifier or an allow rule let it
//! through; the test checks the tree afterwards. As root they run twice: as root and as uid
//! 65534 (through `setpriv`), since Keel's own files (the data directory, `keel.db`) are made
//! private in both cases.

#![allow(
    clippy::disallowed_macros,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::disallowed_methods
)]

mod common;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::{Command, Output};

use common::*;

const NOBODY: u32 = 65534;

fn is_root() -> bool {
    std::fs::metadata("/proc/self").unwrap().uid() == 0
}

fn chown_tree(path: &Path) {
    std::os::unix::fs::lchown(path, Some(NOBODY), Some(NOBODY)).unwrap();
    if path.is_dir() && !path.is_symlink() {
        for e in std::fs::read_dir(path).unwrap() {
            chown_tree(&e.unwrap().path());
        }
    }
}

/// Who runs `keel`: the test's own user, and as root also uid 65534.
fn users() -> Vec<bool> {
    if is_root() {
        vec![false, true]
    } else {
        vec![false]
    }
}

/// `keel ARGS` in `env` as the test's user, or (`nobody`, as root) as uid 65534.
fn keel(env: &Env, nobody: bool, args: &[&str]) -> Output {
    let plain = env.keel();
    let mut cmd = if nobody {
        let setpriv = ["/usr/bin/setpriv", "/bin/setpriv"]
            .into_iter()
            .find(|p| Path::new(p).exists())
            .unwrap_or_else(|| {
                panic!(
                    "`setpriv` (util-linux) is needed to run keel as uid 65534; install util-linux"
                )
            });
        let bin_dir = env.home.parent().unwrap().join("bin");
        std::fs::create_dir_all(&bin_dir).unwrap();
        let bin = bin_dir.join("keel");
        if !bin.exists() && std::fs::hard_link(plain.get_program(), &bin).is_err() {
            std::fs::copy(plain.get_program(), &bin).unwrap();
        }
        let top = env.work.parent().unwrap();
        std::fs::set_permissions(top, std::fs::Permissions::from_mode(0o755)).unwrap();
        chown_tree(top);
        let mut c = Command::new(setpriv);
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(&bin);
        c
    } else {
        Command::new(plain.get_program())
    };
    cmd.current_dir(&env.work).env_clear();
    for (k, v) in plain.get_envs() {
        if let Some(v) = v {
            cmd.env(k, v);
        }
    }
    cmd.args(args).output().unwrap()
}

/// Whether `program` is on PATH (or, for `time`, the external `/usr/bin/time`).
fn on_path(program: &str) -> bool {
    if program == "time" {
        return Path::new("/usr/bin/time").is_file();
    }
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|d| d.join(program).is_file()))
}

fn results(out: &Output) -> Vec<(String, String)> {
    json_lines(&out.stdout)
        .into_iter()
        .filter(|e| e["type"] == "tool_result")
        .map(|e| {
            (
                e["id"].as_str().unwrap_or("").to_string(),
                e["content"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

fn content<'a>(results: &'a [(String, String)], id: &str) -> &'a str {
    results
        .iter()
        .find(|(i, _)| i == id)
        .map(|(_, c)| c.as_str())
        .unwrap_or_else(|| panic!("no result for {id} in {results:?}"))
}

/// A scripted model making `calls` (id, tool, arguments as YAML flow), then finishing.
fn script(calls: &[(&str, &str, String)]) -> String {
    let mut s = String::from("turns:\n  - tool_calls:\n");
    for (id, tool, args) in calls {
        s.push_str(&format!(
            "      - {{id: {id}, name: {tool}, arguments: {args}}}\n"
        ));
    }
    s.push_str("  - text: done\n");
    s
}

fn command(cmd: &str) -> String {
    format!("{{command: {}}}", serde_json::to_string(cmd).unwrap())
}

/// The run of a model that runs each of `commands` (id, command line) with `run_command`.
fn run_commands(env: &Env, nobody: bool, policy: &str, commands: &[(&str, &str)]) -> Output {
    let body = script(
        &commands
            .iter()
            .map(|(id, c)| (*id, "run_command", command(c)))
            .collect::<Vec<_>>(),
    );
    run(env, nobody, policy, &body)
}

fn run(env: &Env, nobody: bool, policy: &str, body: &str) -> Output {
    let script = env.script("s.yaml", body);
    let out = keel(
        env,
        nobody,
        &[
            "run",
            "--json",
            "--approval",
            policy,
            "--script",
            script.to_str().unwrap(),
            "go",
        ],
    );
    assert_exit(&out, 0);
    out
}

/// Commands an earlier classifier rated read_only although bash runs a hidden command in them
/// (arithmetic on a runtime-built array subscript, prompt expansion, a trap after `--`, a
/// read-write redirection, an awk redirection hidden by a `;` in a string, `zstd -c -o`, a
/// C-style loop over a value read from a file). Under `untrusted` read-only commands run
/// without asking, so each must be judged by its effect to be stopped.
#[test]
fn hidden_commands_do_not_run_under_untrusted() {
    for nobody in users() {
        let env = Env::new();
        std::fs::write(env.work.join("count"), "a[$(touch for-ran)]").unwrap();
        let mut calls = vec![
            (
                "arith",
                r"n=$(printf 'a\x5b\x24(rm -rf src)\x5d'); echo $((n))",
            ),
            (
                "prompt",
                r"x=$(printf '\x24(touch prompt-ran)'); echo ${x@P}",
            ),
            ("trap", "trap -- 'touch trap-ran' EXIT"),
            ("rw", "cat README.md <> rw-ran"),
            ("awk", r#"awk 'BEGIN { print ";" > "awk-ran" }'"#),
            ("cfor", "n=$(cat count); for ((i=0; i<n; i++)); do :; done"),
            ("list", "ls -la"),
        ];
        // Programs an earlier classifier rated read_only although an option makes them write
        // or run a program: `git grep -O`, `time --output`, `yq --in-place`. Each runs when
        // the program is installed (and is then denied, so its canary never appears).
        let mut canaries = vec!["prompt-ran", "trap-ran", "rw-ran", "awk-ran", "for-ran"];
        for (id, program, line, canary) in [
            (
                "zstd",
                "zstd",
                "zstd -q -c -o zstd-ran README.md",
                "zstd-ran",
            ),
            (
                "grep",
                "git",
                "git grep --no-index -nO'touch grep-ran' demo -- README.md",
                "grep-ran",
            ),
            (
                "time",
                "time",
                "/usr/bin/time --output=time-ran true",
                "time-ran",
            ),
        ] {
            if on_path(program) {
                calls.push((id, line));
                canaries.push(canary);
            } else {
                println!("SKIPPED {id}: `{program}` is not installed");
            }
        }
        if on_path("yq") {
            calls.push(("yq", "yq -y --in-place '.a = 1' c.yaml"));
        }
        std::fs::write(env.work.join("c.yaml"), "a: 0\n").unwrap();
        let out = run_commands(&env, nobody, "untrusted", &calls);
        let r = results(&out);
        let who = if nobody { "uid 65534" } else { "this user" };
        assert!(
            env.work.join("src/lib.rs").exists(),
            "{who}: src survives: {r:?}"
        );
        for canary in &canaries {
            assert!(!env.work.join(canary).exists(), "{who}: {canary}: {r:?}");
        }
        assert_eq!(
            std::fs::read_to_string(env.work.join("c.yaml")).unwrap(),
            "a: 0\n",
            "{who}: yq --in-place: {r:?}"
        );
        for (id, _) in calls.iter().filter(|(id, _)| *id != "list") {
            assert!(
                content(&r, id).contains("nobody to approve"),
                "{who}: {id}: {}",
                content(&r, id)
            );
        }
        assert!(
            content(&r, "list").contains("README.md"),
            "reading still runs"
        );
    }
}

/// An allow rule vouches for its own command, never for the rest of the line.
/// The read-only lane: a command that runs unasked only because it was rated read-only runs
/// in the read-only sandbox, so a classifier miss cannot write. The miss here is the one
/// SECURITY.md names: a repository's `.git/config` programs (`core.fsmonitor` on `git status`,
/// a `textconv` driver on `git diff`) that delete README.md. Under `untrusted` and
/// `on-request` the commands still print what they should, the programs' writes fail, the
/// model is told why, and the same command asks the next time (denied headless).
#[test]
fn a_command_allowed_because_it_reads_cannot_write() {
    if !on_path("git") {
        assert!(
            std::env::var_os("CI").is_none(),
            "git is needed for this test in CI"
        );
        println!("SKIPPED a_command_allowed_because_it_reads_cannot_write: git is not installed");
        return;
    }
    // Also when a user rule allows the reading command (red-team pass 7, R7-24), and when
    // the project's test command is that reading line, run by `run_tests` (R7-25).
    for (nobody, ruled) in users().into_iter().flat_map(|n| [(n, false), (n, true)]) {
        for policy in ["untrusted", "on-request"] {
            let env = Env::new();
            if ruled {
                env.user_config("[approval]\nallow = [\"run_command:git status\"]\n");
                env.config("[shell]\ntest_command = \"git status --short\"\n");
            }
            let git = |args: &[&str]| {
                let out = Command::new("git")
                    .args(["-c", "user.email=t@t", "-c", "user.name=t"])
                    .args(args)
                    .current_dir(&env.work)
                    .output()
                    .unwrap();
                assert!(out.status.success(), "git {args:?}: {out:?}");
            };
            git(&["init", "-q"]);
            git(&["add", "-A"]);
            git(&["commit", "-qm", "init"]);
            let script = |name: &str, body: &str| {
                let p = env.work.join(name);
                std::fs::write(&p, body).unwrap();
                std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
            };
            script(
                "hook.sh",
                "#!/bin/sh\ntouch fsmon-ran\nrm -f README.md\nexit 1\n",
            );
            script("conv.sh", "#!/bin/sh\ntouch textconv-ran\ncat \"$1\"\n");
            std::fs::write(env.work.join(".gitattributes"), "*.rs diff=evil\n").unwrap();
            let lib = env.work.join("src/lib.rs");
            let mut text = std::fs::read_to_string(&lib).unwrap();
            text.push_str("// changed\n");
            std::fs::write(&lib, text).unwrap();
            git(&["config", "core.fsmonitor", "./hook.sh"]);
            git(&["config", "diff.evil.textconv", "./conv.sh"]);
            let mut calls = vec![
                ("status", "run_command", command("git status --short")),
                ("diff", "run_command", command("git diff src/lib.rs")),
                ("again", "run_command", command("git status --short")),
                ("list", "run_command", command("ls")),
            ];
            if ruled {
                calls.push(("tests", "run_tests", "{}".to_string()));
            }
            let out = run(&env, nobody, policy, &crate::script(&calls));
            let r = results(&out);
            let who = match (nobody, ruled) {
                (true, false) => "uid 65534",
                (false, false) => "this user",
                (true, true) => "uid 65534, with a rule and a test command",
                (false, true) => "this user, with a rule and a test command",
            };
            assert!(
                env.work.join("README.md").exists(),
                "{who}, {policy}: README.md survives: {r:?}"
            );
            for canary in ["fsmon-ran", "textconv-ran"] {
                assert!(!env.work.join(canary).exists(), "{who}, {policy}: {r:?}");
            }
            let status = content(&r, "status");
            assert!(
                status.contains(" M src/lib.rs"),
                "{who}, {policy}: {status}"
            );
            assert!(
                status.contains("ran in the read-only sandbox")
                    && status.contains("run the same command again"),
                "{who}, {policy}: the model is told why: {status}"
            );
            assert!(content(&r, "diff").contains("+// changed"), "{r:?}");
            assert!(
                content(&r, "again").contains("nobody to approve"),
                "{who}, {policy}: the same command asks next time: {r:?}"
            );
            assert!(content(&r, "list").contains("README.md"), "{r:?}");
        }
    }
}

#[test]
fn an_allow_rule_does_not_carry_the_rest_of_the_line() {
    for nobody in users() {
        let env = Env::new();
        env.user_config("[approval]\nallow = [\"run_command:git status\", \"run_command:echo\"]\n");
        let calls = [
            ("seq", "git status; rm -rf src"),
            ("and", "git status && touch and-ran"),
            ("pipe", "echo touch pipe-ran | sh"),
            ("subst", "echo $(touch subst-ran)"),
            ("wrap", "env touch env-ran"),
            ("shc", "bash -c 'git status; touch shc-ran'"),
            ("word", "git statusx; touch word-ran"),
            ("ok", "echo allowed-ran"),
        ];
        let out = run_commands(&env, nobody, "untrusted", &calls);
        let r = results(&out);
        assert!(env.work.join("src/lib.rs").exists(), "{r:?}");
        for canary in [
            "and-ran",
            "pipe-ran",
            "subst-ran",
            "env-ran",
            "shc-ran",
            "word-ran",
        ] {
            assert!(!env.work.join(canary).exists(), "{canary}: {r:?}");
        }
        assert!(content(&r, "ok").contains("allowed-ran"), "{r:?}");
    }
}

/// Writes a project's test setup into a fresh workspace.
type Setup = Box<dyn Fn(&Env)>;

/// `run_tests` is judged by the command it resolves to: a test script that deletes files asks
/// under `on-request` (headless: denied), whether it comes from the configured command's
/// script, package.json or a Makefile; a plain test script runs.
#[test]
fn run_tests_is_judged_by_what_it_runs() {
    let ci = std::env::var_os("CI").is_some();
    let mut cases: Vec<(&str, Setup)> = vec![(
        "a configured script",
        Box::new(|env: &Env| {
            env.config("[shell]\ntest_command = \"sh scripts/test.sh\"\n");
            std::fs::create_dir_all(env.work.join("scripts")).unwrap();
            std::fs::write(
                env.work.join("scripts/test.sh"),
                "echo testing\nrm -rf src\n",
            )
            .unwrap();
        }),
    )];
    for (tool, case, setup) in [
        (
            "npm",
            "package.json",
            Box::new(|env: &Env| {
                std::fs::remove_file(env.work.join("Cargo.toml")).unwrap();
                std::fs::write(
                    env.work.join("package.json"),
                    r#"{"scripts": {"test": "echo testing && rm -rf src"}}"#,
                )
                .unwrap();
            }) as Setup,
        ),
        (
            "make",
            "a Makefile",
            Box::new(|env: &Env| {
                env.config("[shell]\ntest_command = \"make test\"\n");
                std::fs::write(
                    env.work.join("Makefile"),
                    "test:\n\t@echo testing\n\trm -rf src\n",
                )
                .unwrap();
            }),
        ),
    ] {
        if on_path(tool) {
            cases.push((case, setup));
        } else {
            assert!(!ci, "`{tool}` is needed for this test in CI");
            println!("SKIPPED {case}: `{tool}` is not installed");
        }
    }
    for (case, setup) in &cases {
        for nobody in users() {
            let env = Env::new();
            setup(&env);
            let body = script(&[("t", "run_tests", "{}".to_string())]);
            let out = run(&env, nobody, "on-request", &body);
            let r = results(&out);
            assert!(env.work.join("src/lib.rs").exists(), "{case}: {r:?}");
            let c = content(&r, "t");
            assert!(
                c.contains("nobody to approve") && c.contains("destructive"),
                "{case}: {c}"
            );
        }
    }
    // A test script that only tests runs without asking.
    let env = Env::new();
    env.config("[shell]\ntest_command = \"sh scripts/test.sh\"\n");
    std::fs::create_dir_all(env.work.join("scripts")).unwrap();
    std::fs::write(
        env.work.join("scripts/test.sh"),
        "echo '1 passed, 0 failed'\n",
    )
    .unwrap();
    let out = run(
        &env,
        false,
        "on-request",
        &script(&[("t", "run_tests", "{}".into())]),
    );
    let r = results(&out);
    assert!(content(&r, "t").contains("1 passed"), "{r:?}");
}

/// Keel's data directory and session database are readable only by their owner, also when
/// the directory already existed with a looser mode.
#[test]
fn the_session_database_is_private() {
    for nobody in users() {
        let env = Env::new();
        let data = env.home.join("data");
        std::fs::create_dir_all(&data).unwrap();
        std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o755)).unwrap();
        let out = run_commands(&env, nobody, "never", &[("l", "ls")]);
        let _ = results(&out);
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&data), 0o700, "nobody={nobody}");
        assert_eq!(mode(&data.join("keel.db")), 0o600, "nobody={nobody}");
        for companion in ["keel.db-wal", "keel.db-shm"] {
            let p = data.join(companion);
            if p.exists() {
                assert_eq!(mode(&p), 0o600, "{companion}, nobody={nobody}");
            }
        }
        if nobody {
            assert_eq!(
                std::fs::metadata(data.join("keel.db")).unwrap().uid(),
                NOBODY
            );
        }
    }
}
