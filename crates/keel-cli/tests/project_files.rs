//! Files a repository ships or a user names on the command line, read by `keel flow` and
//! `keel prd` (red-team B18): a flow that is a symlink to a secret outside, to `/dev/zero`,
//! or a FIFO is refused with a clear message — never read, never read without end, never
//! waited on; the same for a PRD file and for a script a workspace flow's agent node names.

// Tests start programs of their own (the keel binary): allowed here, outside Keel's one spawn
// path (docs/SECURITY.md, "One way to start a process").
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

mod common;

use std::os::unix::fs::symlink;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::*;

const SECRET: &str = "SECRET-KEY-MATERIAL-b18";

/// Runs `cmd` with at most 2 GB of address space (a regression reading /dev/zero fails fast
/// instead of eating the machine's memory) and a 20 s deadline; a run past it is a hang.
fn bounded(cmd: Command) -> Output {
    let mut shell = Command::new("sh");
    shell
        .arg("-c")
        .arg("ulimit -v 2000000; exec \"$0\" \"$@\"")
        .arg(cmd.get_program())
        .args(cmd.get_args())
        .env_clear()
        .envs(cmd.get_envs().filter_map(|(k, v)| v.map(|v| (k, v))))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(dir) = cmd.get_current_dir() {
        shell.current_dir(dir);
    }
    let mut child = shell.spawn().unwrap();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "{:?} hung (killed after 20 s): {}",
                cmd.get_args().collect::<Vec<_>>(),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

fn mkfifo(path: &Path) {
    rustix::fs::mknodat(
        rustix::fs::CWD,
        path,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A workspace with hostile flow files, and a secret outside it (in the fake home).
fn hostile_flows() -> Env {
    let env = Env::with_repo(tempfile::tempdir().unwrap().path());
    let secret = env.home.join("id_ed25519");
    // YAML-shaped, so a read would be parsed and its keys named in errors.
    std::fs::write(&secret, format!("name: {SECRET}\nnodes: []\n")).unwrap();
    let flows = env.work.join(".keel/flows");
    std::fs::create_dir_all(&flows).unwrap();
    symlink(&secret, flows.join("secret.yaml")).unwrap();
    symlink("/dev/zero", flows.join("zero.yaml")).unwrap();
    mkfifo(&flows.join("fifo.yaml"));
    // A skill directory linked out of the workspace, holding a flow: not listed.
    let elsewhere = env.home.join("skill");
    std::fs::create_dir_all(elsewhere.join("flows")).unwrap();
    std::fs::write(
        elsewhere.join("flows/outside.yaml"),
        "name: outside\nnodes: []\n",
    )
    .unwrap();
    std::fs::create_dir_all(env.work.join(".keel/skills")).unwrap();
    symlink(&elsewhere, env.work.join(".keel/skills/linked")).unwrap();
    env
}

#[test]
fn flow_list_and_run_refuse_links_out_devices_and_fifos() {
    let env = hostile_flows();
    let out = bounded({
        let mut c = env.keel();
        c.args(["flow", "list"]);
        c
    });
    let listing = text(&out);
    assert!(!listing.contains(SECRET), "the secret was read: {listing}");
    assert!(
        !listing.contains("outside.yaml"),
        "a linked skill's flow was listed: {listing}"
    );
    assert!(
        listing.contains("secret.yaml") && listing.contains("outside the workspace"),
        "{listing}"
    );
    for (file, why) in [
        (".keel/flows/secret.yaml", "outside the workspace"),
        (".keel/flows/zero.yaml", "outside the workspace"),
        (".keel/flows/fifo.yaml", "FIFO"),
    ] {
        for sub in ["run", "validate"] {
            let out = bounded({
                let mut c = env.keel();
                c.args(["flow", sub, file]);
                if sub == "run" {
                    c.args(["--provider", "scripted"]);
                }
                c
            });
            let said = text(&out);
            assert!(!out.status.success(), "flow {sub} {file} succeeded: {said}");
            assert!(
                !said.contains(SECRET),
                "flow {sub} {file} read the secret: {said}"
            );
            assert!(said.contains(why), "flow {sub} {file}: {said}");
        }
    }
    // By name, too.
    let out = bounded({
        let mut c = env.keel();
        c.args(["flow", "run", "zero", "--provider", "scripted"]);
        c
    });
    assert!(!out.status.success(), "{}", text(&out));
}

#[test]
fn a_prd_file_in_the_workspace_is_a_project_file_and_the_users_is_bounded() {
    let env = hostile_flows();
    std::fs::write(env.home.join("id_rsa"), SECRET).unwrap();
    symlink(env.home.join("id_rsa"), env.work.join("prd.md")).unwrap();
    mkfifo(&env.work.join("fifo.md"));
    mkfifo(&env.home.join("mine-fifo.md"));
    for (file, why) in [
        ("prd.md".to_string(), "outside the workspace"),
        ("fifo.md".to_string(), "FIFO"),
        (env.home.join("mine-fifo.md").display().to_string(), "FIFO"),
        ("/dev/zero".to_string(), "a device"),
    ] {
        let out = bounded({
            let mut c = env.keel();
            c.args(["prd", "add", &file]);
            c
        });
        let said = text(&out);
        assert!(!out.status.success(), "prd add {file} succeeded: {said}");
        assert!(said.contains(why), "prd add {file}: {said}");
    }
    let listed = bounded({
        let mut c = env.keel();
        c.args(["prd", "list"]);
        c
    });
    assert!(!text(&listed).contains(SECRET), "{}", text(&listed));
    // The user's own PRD elsewhere still works.
    std::fs::write(env.home.join("mine.md"), "# Mine\n\nBuild it.\n").unwrap();
    let out = bounded({
        let mut c = env.keel();
        c.args(["prd", "add", env.home.join("mine.md").to_str().unwrap()]);
        c
    });
    assert_exit(&out, 0);
}

#[test]
fn a_workspace_flows_agent_script_must_be_a_regular_file_of_the_workspace() {
    let env = Env::with_repo(tempfile::tempdir().unwrap().path());
    let flows = env.work.join(".keel/flows");
    std::fs::create_dir_all(&flows).unwrap();
    std::fs::create_dir_all(env.work.join("scripts")).unwrap();
    symlink("/dev/zero", env.work.join("scripts/zero.yaml")).unwrap();
    mkfifo(&env.work.join("scripts/fifo.yaml"));
    // The user's own script: the node falls back to it when the flow's is not used.
    let mine = env.script("mine.yaml", "turns:\n  - text: \"users own model ran\"\n");
    for (name, script, expect) in [
        ("zero", "../../scripts/zero.yaml", "users own model ran"),
        ("fifo", "../../scripts/fifo.yaml", "FIFO"),
        ("abs", "/dev/zero", "users own model ran"),
    ] {
        std::fs::write(
            flows.join(format!("{name}.yaml")),
            format!(
                "name: {name}\nnodes:\n  - {{id: a, type: agent, task: \"say hi\", script: \"{script}\"}}\n"
            ),
        )
        .unwrap();
        let out = bounded({
            let mut c = env.keel();
            c.args([
                "flow",
                "run",
                &format!(".keel/flows/{name}.yaml"),
                "--provider",
                "scripted",
                "--script",
                mine.to_str().unwrap(),
            ]);
            c
        });
        let said = text(&out);
        assert!(said.contains(expect), "{name}: {said}");
    }
}
