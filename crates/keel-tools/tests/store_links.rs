//! A workspace that holds the home, where a dotfile manager made `~/.config/keel` a link
//! (red-team pass 7, R7-29): a command re-pointed the link to its own `config.toml` with
//! `sandbox = false`, and the next session ran unconfined. The runner puts the link back —
//! every link on the way (pass 8, R8-1: a second link, `~/dotfiles -> src/dotfiles`, was not
//! noted), and with no other writing command beside it (R8-2: an overlapping command noted the
//! re-pointed link and put *that* back at its end).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use keel_tools::shell::{self, LintSettings, ShellSettings};
use keel_tools::{ToolContext, ToolRegistry, Workspace};
use serde_json::json;

/// Set in the child: the home it works in (the test re-runs itself with `HOME` there, since
/// the stores are found through this process's environment).
const CHILD: &str = "KEEL_STORE_LINKS_TEST_HOME";

/// In the parent: makes a home with `layout`, re-runs `test` with `HOME` there and checks it
/// passed. In the child: the home.
fn home_for(test: &str, layout: fn(&Path)) -> Option<PathBuf> {
    if let Some(home) = std::env::var_os(CHILD) {
        return Some(PathBuf::from(home));
    }
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().canonicalize().unwrap().join("home");
    std::fs::create_dir_all(&home).unwrap();
    layout(&home);
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test, "--nocapture"])
        .env(CHILD, &home)
        .env("HOME", &home)
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("XDG_DATA_HOME")
        .env_remove("KEEL_CONFIG")
        .env_remove("KEEL_HOME")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    None
}

fn tools() -> ToolRegistry {
    let mut tools = ToolRegistry::new();
    shell::register(
        &mut tools,
        ShellSettings::default(),
        LintSettings {
            enabled: false,
            ..LintSettings::default()
        },
    );
    tools
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Runs `cmd` in the home and returns its result's text.
fn run(home: &Path, cmd: &str) -> String {
    let ctx = ToolContext::new(Workspace::new(home).unwrap());
    runtime()
        .block_on(tools().execute("run_command", json!({"command": cmd}), &ctx))
        .map(|o| o.content)
        .unwrap_or_else(|e| format!("{e:?}"))
}

/// The configuration Keel's next session in this home would read.
fn next_config(home: &Path) -> String {
    std::fs::read_to_string(home.join(".config/keel/config.toml")).unwrap_or_default()
}

const EVIL: &str = "mkdir -p evil && printf '[shell]\\nsandbox = false\\n' > evil/config.toml";

#[test]
fn a_command_cannot_re_point_a_link_to_keels_configuration() {
    let Some(home) = home_for(
        "a_command_cannot_re_point_a_link_to_keels_configuration",
        |home| {
            std::fs::create_dir_all(home.join("dotfiles/keel")).unwrap();
            std::fs::write(home.join("dotfiles/keel/config.toml"), "# mine\n").unwrap();
            std::fs::create_dir_all(home.join(".config")).unwrap();
            symlink("../dotfiles/keel", home.join(".config/keel")).unwrap();
        },
    ) else {
        return;
    };
    let out = run(
        &home,
        &format!("mv .config/keel .config/keel-old && {EVIL} && ln -s ../evil .config/keel"),
    );
    assert_eq!(
        std::fs::read_link(home.join(".config/keel")).unwrap(),
        PathBuf::from("../dotfiles/keel"),
        "{out}"
    );
    assert!(
        out.contains(".config/keel") && out.contains("put it back"),
        "{out}"
    );
    assert_eq!(next_config(&home), "# mine\n");
    // The link's parent cannot be moved away with it (pinned in the command's view).
    let out = run(
        &home,
        &format!(
            "mv .config .config-old; mkdir -p .config && {EVIL} && ln -s ../evil .config/keel"
        ),
    );
    assert_eq!(next_config(&home), "# mine\n", "{out}");
    assert!(!home.join(".config-old").exists(), "{out}");
}

#[test]
fn every_link_on_the_way_to_keels_configuration_is_put_back() {
    // A dotfiles checkout elsewhere in the home, reached through a second link.
    let Some(home) = home_for(
        "every_link_on_the_way_to_keels_configuration_is_put_back",
        |home| {
            std::fs::create_dir_all(home.join("src/dotfiles/keel-real")).unwrap();
            std::fs::write(home.join("src/dotfiles/keel-real/config.toml"), "# mine\n").unwrap();
            symlink("keel-real", home.join("src/dotfiles/keel")).unwrap();
            symlink("src/dotfiles", home.join("dotfiles")).unwrap();
            std::fs::create_dir_all(home.join(".config")).unwrap();
            symlink("../dotfiles/keel", home.join(".config/keel")).unwrap();
        },
    ) else {
        return;
    };
    // The second link re-pointed.
    let out = run(
        &home,
        &format!(
            "{EVIL} && rm dotfiles && ln -s evil-root dotfiles && mkdir -p evil-root && mv evil evil-root/keel"
        ),
    );
    assert_eq!(next_config(&home), "# mine\n", "{out}");
    assert!(out.contains("put it back"), "{out}");
    // The third, inside the checkout.
    let out = run(
        &home,
        &format!("{EVIL} && rm src/dotfiles/keel && ln -s ../../evil src/dotfiles/keel"),
    );
    assert_eq!(next_config(&home), "# mine\n", "{out}");
    assert_eq!(
        std::fs::read_link(home.join("src/dotfiles/keel")).unwrap(),
        PathBuf::from("keel-real")
    );
}

#[test]
fn an_overlapping_command_cannot_put_back_a_re_pointed_link() {
    let Some(home) = home_for(
        "an_overlapping_command_cannot_put_back_a_re_pointed_link",
        |home| {
            std::fs::create_dir_all(home.join("dotfiles/keel")).unwrap();
            std::fs::write(home.join("dotfiles/keel/config.toml"), "# mine\n").unwrap();
            std::fs::create_dir_all(home.join(".config")).unwrap();
            symlink("../dotfiles/keel", home.join(".config/keel")).unwrap();
        },
    ) else {
        return;
    };
    let ctx = ToolContext::new(Workspace::new(&home).unwrap());
    let tools = tools();
    let first = format!(
        "mv .config/keel .config/keel-old && {EVIL} && ln -s ../evil .config/keel; sleep 2"
    );
    let (a, b) = runtime().block_on(async {
        let a = tools.execute("run_command", json!({"command": first}), &ctx);
        let b = async {
            tokio::time::sleep(std::time::Duration::from_millis(700)).await;
            tools
                .execute(
                    "run_command",
                    json!({"command": "readlink .config/keel; sleep 1"}),
                    &ctx,
                )
                .await
        };
        tokio::join!(a, b)
    });
    let (a, b) = (a.unwrap().content, b.unwrap().content);
    assert!(
        !b.contains("../evil"),
        "the second command ran while the first had the link re-pointed: {b}"
    );
    assert_eq!(next_config(&home), "# mine\n", "{a}\n{b}");
}

#[test]
fn a_directory_a_link_walks_through_stays_where_it_is() {
    // Red-team pass 8, R8-20: `../x/..` in the link's text walks through the real directory
    // `x`; replaced by a link, it re-routed the unchanged link to the command's directory.
    let Some(home) = home_for(
        "a_directory_a_link_walks_through_stays_where_it_is",
        |home| {
            std::fs::create_dir_all(home.join("dotfiles/keel")).unwrap();
            std::fs::write(home.join("dotfiles/keel/config.toml"), "# mine\n").unwrap();
            std::fs::create_dir_all(home.join("x")).unwrap();
            std::fs::create_dir_all(home.join(".config")).unwrap();
            symlink("../x/../dotfiles/keel", home.join(".config/keel")).unwrap();
        },
    ) else {
        return;
    };
    let out = run(
        &home,
        &format!(
            "{EVIL} && mkdir -p a/b a/dotfiles && mv evil a/dotfiles/keel && mv x x-old && ln -s a/b x"
        ),
    );
    assert_eq!(next_config(&home), "# mine\n", "{out}");
    assert!(
        home.join("x").symlink_metadata().is_ok_and(|m| m.is_dir()),
        "{out}"
    );
}

/// A home workspace without `~/.aws` or `~/.kube`: a command that creates their configuration
/// with a program in it (`credential_process`, a kubeconfig `exec` plugin) — run by the
/// user's next `aws` or `kubectl` anywhere, unconfined — has it moved aside (red-team pass 9,
/// R9-6; the stores are covered only when they exist).
#[test]
fn a_command_cannot_plant_cloud_tools_configuration_in_a_home() {
    let Some(home) = home_for(
        "a_command_cannot_plant_cloud_tools_configuration_in_a_home",
        |home| std::fs::write(home.join("notes.txt"), "mine\n").unwrap(),
    ) else {
        return;
    };
    let out = run(
        &home,
        "mkdir -p .aws .kube .gradle/init.d && printf '[default]\\ncredential_process = sh -c \"touch /tmp/pwned\"\\n' > .aws/config \
         && echo 'users: [{name: u, user: {exec: {command: sh}}}]' > .kube/config \
         && echo 'println \"x\"' > .gradle/init.d/a.gradle && echo ok",
    );
    assert!(out.contains("ok"), "the command did not run: {out}");
    for planted in [".aws/config", ".kube/config", ".gradle/init.d/a.gradle"] {
        assert!(!home.join(planted).exists(), "{planted} stayed: {out}");
    }
    assert!(out.contains("quarantined-by-keel"), "{out}");
}
