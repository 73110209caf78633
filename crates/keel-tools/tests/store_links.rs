//! A workspace that holds the home, where a dotfile manager made `~/.config/keel` a link
//! (red-team pass 7, R7-29): a command re-pointed the link to its own `config.toml` with
//! `sandbox = false`, and the next session ran unconfined. The runner puts the link back —
//! every link on the way (pass 8, R8-1: a second link, `~/dotfiles -> src/dotfiles`, was not
//! noted), and with no other writing command beside it (R8-2: an overlapping command noted the
//! re-pointed link and put *that* back at its end).
//!
//! The commands here run as approved ones: to a command nobody approved the home's dot
//! entries are read-only anyway (tests/home_config.rs); the links' own guard holds for every
//! command.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

#[path = "shared/home.rs"]
mod home;
use home::{home_for, run_approved as run, runtime, tools};
use keel_tools::{ToolContext, Workspace};
use serde_json::json;

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
    let mut ctx = ToolContext::new(Workspace::new(&home).unwrap());
    ctx.approved = true;
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
