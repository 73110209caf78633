//! A workspace that holds the user's own configuration — a home (its `~/.bashrc`, `~/.config`,
//! `~/.local`, `~/bin`, `~/.aws/config`, …) or a dotfiles directory the home loads from — is
//! read-only to commands nobody approved and to the file tools; the user's approved commands
//! write as before (red-team passes 8 to 10: every per-name list of what a home holds was
//! bypassed, R8-5, R9-5, R9-6, R10-1, R10-4, R10-5, R10-16, R10-17, R10-18, R10-26, R10-29).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use keel_tools::{PathError, Workspace};

#[path = "shared/home.rs"]
mod home;
use home::{home_for, home_with_path, run, run_approved};

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

#[test]
fn the_users_own_configuration_is_read_only_to_commands_nobody_approved() {
    let Some(home) = home_for(
        "the_users_own_configuration_is_read_only_to_commands_nobody_approved",
        |home| {
            write(&home.join(".bashrc"), "# mine\n");
            write(&home.join(".config/app/settings"), "x\n");
            std::fs::create_dir_all(home.join(".local/lib/python3.11/site-packages")).unwrap();
            write(&home.join("dotfiles/vimrc"), "set nu\n");
            write(&home.join("dotfiles/other"), "evil\n");
            symlink("dotfiles/vimrc", home.join(".vimrc")).unwrap();
            // A stow-style link: its target is what the user's shell reads.
            write(&home.join("dotfiles/profile"), "# profile\n");
            symlink("dotfiles/profile", home.join(".profile")).unwrap();
            write(&home.join("notes.txt"), "notes\n");
        },
    ) else {
        return;
    };
    let out = run(
        &home,
        "echo evil >> .bashrc; echo evil > .config/app/settings; \
         echo 'import os' > .local/lib/python3.11/site-packages/zz.pth; \
         echo 'touch /tmp/pwned' > .mavenrc; ln -sfn dotfiles/other .vimrc; \
         echo evil >> dotfiles/profile; echo evil >> .profile; echo x > .terraformrc; \
         echo mine >> notes.txt; echo ok",
    );
    assert!(out.contains("ok"), "the command did not run: {out}");
    assert!(out.contains("read-only here"), "{out}");
    assert_eq!(
        std::fs::read_to_string(home.join(".bashrc")).unwrap(),
        "# mine\n",
        "{out}"
    );
    assert_eq!(
        std::fs::read_to_string(home.join(".config/app/settings")).unwrap(),
        "x\n",
        "{out}"
    );
    assert!(
        !home
            .join(".local/lib/python3.11/site-packages/zz.pth")
            .exists(),
        "{out}"
    );
    assert!(!home.join(".mavenrc").exists(), "{out}");
    assert!(!home.join(".terraformrc").exists(), "{out}");
    assert_eq!(
        std::fs::read_to_string(home.join("dotfiles/profile")).unwrap(),
        "# profile\n",
        "{out}"
    );
    assert_eq!(
        std::fs::read_link(home.join(".vimrc")).unwrap(),
        PathBuf::from("dotfiles/vimrc"),
        "{out}"
    );
    // The rest of the home too: nothing is written by a command nobody approved.
    assert_eq!(
        std::fs::read_to_string(home.join("notes.txt")).unwrap(),
        "notes\n",
        "{out}"
    );
    // The file tools write nothing there either, and say how to get out.
    let ws = Workspace::new(&home).unwrap();
    for rel in [
        ".mavenrc",
        ".bashrc",
        ".config/app/settings",
        ".vimrc",
        "dotfiles/profile",
        "notes.txt",
        "src/new.rs",
    ] {
        let got = ws.locate_writable(rel);
        assert!(
            matches!(got, Err(PathError::UserConfig { .. })),
            "{rel}: {got:?}"
        );
    }
    let why = ws.locate_writable("notes.txt").unwrap_err().to_string();
    assert!(why.contains("start keel in the project"), "{why}");
    // What the user approved writes as before.
    let out = run_approved(&home, "echo mine >> notes.txt; echo ok");
    assert_eq!(
        std::fs::read_to_string(home.join("notes.txt")).unwrap(),
        "notes\nmine\n",
        "{out}"
    );
    // The session says so at its start.
    let warn = keel_tools::shell::user_config::home_warning(&home).unwrap();
    assert!(warn.contains("holds your home directory"), "{warn}");
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
         && echo 'println \"x\"' > .gradle/init.d/a.gradle; echo ok",
    );
    assert!(out.contains("ok"), "the command did not run: {out}");
    for planted in [".aws/config", ".kube/config", ".gradle/init.d/a.gradle"] {
        assert!(!home.join(planted).exists(), "{planted} stayed: {out}");
    }
    assert!(out.contains("read-only here"), "{out}");
}

/// Credentials in the user's git configuration are not readable by commands: they see a copy
/// without them, and git keeps working with the rest (red-team pass 9, R9-12).
#[test]
fn commands_see_the_users_git_configuration_without_its_credentials() {
    let Some(home) = home_for(
        "commands_see_the_users_git_configuration_without_its_credentials",
        |home| {
            write(
                &home.join(".gitconfig"),
                "[user]\n\tname = Ada Lovelace\n[http \"https://github.com/\"]\n\textraheader = AUTHORIZATION: basic c2VjcmV0LXRva2Vu\n[github]\n\ttoken = ghp_0123456789\n[include]\n\tpath = .gitsecrets\n\
                 [http \"https://example.com/\"] extraheader = AUTHORIZATION: basic U0FNRUxJTkU=\n\
                 [credential \"https://bitbucket.org\"]\n\thelper = store --file ~/.config/mycreds\n",
            );
            write(
                &home.join(".config/mycreds"),
                "https://u:STORESECRET5@bitbucket.org\n",
            );
            write(
                &home.join(".gitcookies"),
                "example.com\tFALSE\t/\tTRUE\t0\to\tCOOKIESECRET6\n",
            );
            write(
                &home.join(".gitsecrets"),
                "[sendemail]\n\tsmtpPass = hunter2-included\n",
            );
            write(
                &home.join(".config/git/config"),
                "[url \"https://oauth2:glpat-abcdef@gitlab.com/\"]\n\tinsteadOf = https://gitlab.com/\n",
            );
            std::fs::create_dir_all(home.join("proj")).unwrap();
        },
    ) else {
        return;
    };
    let out = run(
        &home.join("proj"),
        "cat ~/.gitconfig ~/.config/git/config ~/.gitsecrets ~/.config/mycreds ~/.gitcookies; git config --global --get user.name || echo no-git",
    );
    for secret in [
        "U0FNRUxJTkU",
        "STORESECRET5",
        "COOKIESECRET6",
        "c2VjcmV0LXRva2Vu",
        "ghp_0123456789",
        "glpat-abcdef",
        "hunter2-included",
    ] {
        assert!(!out.contains(secret), "{secret} leaked: {out}");
    }
    assert!(out.contains("name = Ada Lovelace"), "{out}");
    assert!(out.contains("https://gitlab.com/"), "{out}");
    assert!(
        out.contains("no-git") || out.matches("Ada Lovelace").count() == 2,
        "{out}"
    );
    // The files themselves are untouched.
    assert!(
        std::fs::read_to_string(home.join(".gitconfig"))
            .unwrap()
            .contains("ghp_0123456789")
    );
}

/// What else the user's shell reads as code in a home workspace (red-team pass 10): files a
/// dotfile manager's link BELOW the top leads to (`~/.config/bash -> ../dotfiles/bash`,
/// sourced by `~/.bashrc`: R10-4), `~/bin` (on PATH by the stock `~/.profile`) and a `PATH`
/// directory that does not exist yet (R10-5), and dot entries past 20,000 plain files at the
/// home's top (R10-1: a listing cut had left `~/.profile` writable).
#[test]
fn a_command_cannot_reach_what_the_users_shell_runs_from_a_home() {
    let Some(home) = home_with_path(
        "a_command_cannot_reach_what_the_users_shell_runs_from_a_home",
        |home| {
            write(&home.join("dotfiles/bash/aliases.sh"), "alias l=ls\n");
            std::fs::create_dir_all(home.join(".config")).unwrap();
            symlink("../dotfiles/bash", home.join(".config/bash")).unwrap();
            write(&home.join(".profile"), "# profile\n");
            write(&home.join("bin/tool"), "#!/bin/sh\n");
            std::fs::create_dir_all(home.join("perl5/lib/perl5")).unwrap();
            write(&home.join("notes.txt"), "notes\n");
            // Plain files first, then the dot entries: a listing cut at 20,000 missed them.
            for i in 0..30_000 {
                std::fs::File::create(home.join(format!("f{i:05}"))).unwrap();
            }
            std::fs::create_dir_all(home.join(".local/lib/python3.11/site-packages")).unwrap();
        },
        &["tools/bin"],
    ) else {
        return;
    };
    let out = run(
        &home,
        "echo evil >> dotfiles/bash/aliases.sh; echo evil > dotfiles/bash/zz.sh; \
         printf '#!/bin/sh\\n' > bin/git; echo evil >> .profile; \
         echo 'import os' > .local/lib/python3.11/site-packages/zz.pth; \
         mkdir -p tools/bin && printf '#!/bin/sh\\n' > tools/bin/git; \
         printf 'package strict; 1;' > perl5/lib/perl5/strict.pm; \
         echo mine >> notes.txt; echo ok",
    );
    assert!(out.contains("ok"), "the command did not run: {out}");
    assert_eq!(
        std::fs::read_to_string(home.join("dotfiles/bash/aliases.sh")).unwrap(),
        "alias l=ls\n",
        "{out}"
    );
    assert!(!home.join("dotfiles/bash/zz.sh").exists(), "{out}");
    assert!(!home.join("bin/git").exists(), "{out}");
    assert_eq!(
        std::fs::read_to_string(home.join(".profile")).unwrap(),
        "# profile\n",
        "{out}"
    );
    assert!(
        !home
            .join(".local/lib/python3.11/site-packages/zz.pth")
            .exists(),
        "{out}"
    );
    assert!(!home.join("tools/bin/git").exists(), "{out}");
    assert!(!home.join("perl5/lib/perl5/strict.pm").exists(), "{out}");
    assert!(out.contains("read-only here"), "{out}");
    assert_eq!(
        std::fs::read_to_string(home.join("notes.txt")).unwrap(),
        "notes\n",
        "{out}"
    );
    let ws = Workspace::new(&home).unwrap();
    for rel in [
        "dotfiles/bash/zy.sh",
        "bin/python3",
        "tools/bin/x",
        "perl5/lib/perl5/x.pm",
        "dotfiles/README",
    ] {
        assert!(
            matches!(ws.locate_writable(rel), Err(PathError::UserConfig { .. })),
            "{rel}"
        );
    }
}

/// The workspace repository's own configuration: `actions/checkout` leaves the job's token as
/// `http.https://github.com/.extraheader`, a token clone leaves it in `remote.origin.url`.
/// Commands and `read_file` see it without them (red-team pass 10, R10-10).
#[test]
fn the_repositorys_own_git_configuration_is_shown_without_its_credentials() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().canonicalize().unwrap();
    let git = |args: &[&str]| home::git(&ws, args);
    git(&["init", "-q"]);
    git(&[
        "config",
        "--local",
        "http.https://github.com/.extraheader",
        "AUTHORIZATION: basic TE9DQUxSRVBPU0VDUkVU",
    ]);
    git(&[
        "remote",
        "add",
        "origin",
        "https://x-access-token:URLSECRET9@github.com/o/r.git",
    ]);
    // A nested clone with a token in its remote (R10-25).
    std::fs::create_dir_all(ws.join("vendor/lib")).unwrap();
    let nested = |args: &[&str]| home::git(&ws.join("vendor/lib"), args);
    nested(&["init", "-q"]);
    nested(&[
        "remote",
        "add",
        "origin",
        "https://x-access-token:NESTEDSECRET19@github.com/o/lib.git",
    ]);
    // git-crypt's key (R10-27).
    write(&ws.join(".git/git-crypt/keys/default"), "CRYPTKEY27");
    let out = run(
        &ws,
        "cat .git/config vendor/lib/.git/config; git config --local --list; git remote -v; git -C vendor/lib remote -v; cat .git/git-crypt/keys/default",
    );
    for secret in [
        "TE9DQUxSRVBPU0VDUkVU",
        "URLSECRET9",
        "NESTEDSECRET19",
        "CRYPTKEY27",
    ] {
        assert!(!out.contains(secret), "{secret} leaked: {out}");
    }
    assert!(out.contains("https://github.com/o/r.git"), "{out}");
    let mut tools = keel_tools::ToolRegistry::new();
    keel_tools::builtin::register_defaults(&mut tools);
    let read = home::runtime()
        .block_on(tools.execute(
            "read_file",
            serde_json::json!({"path": ".git/config"}),
            &keel_tools::ToolContext::new(Workspace::new(&ws).unwrap()),
        ))
        .map(|o| o.content)
        .unwrap_or_else(|e| format!("{e:?}"));
    for secret in ["TE9DQUxSRVBPU0VDUkVU", "URLSECRET9"] {
        assert!(!read.contains(secret), "{secret} leaked: {read}");
    }
    let key = home::runtime()
        .block_on(tools.execute(
            "read_file",
            serde_json::json!({"path": ".git/git-crypt/keys/default"}),
            &keel_tools::ToolContext::new(Workspace::new(&ws).unwrap()),
        ))
        .map(|o| o.content)
        .unwrap_or_else(|e| format!("{e:?}"));
    assert!(!key.contains("CRYPTKEY27"), "{key}");
    assert!(read.contains("[remote \"origin\"]"), "{read}");
    // The file itself is untouched.
    assert!(
        std::fs::read_to_string(ws.join(".git/config"))
            .unwrap()
            .contains("URLSECRET9")
    );
}

/// A dotfiles directory as the workspace (red-team pass 10, R10-16, R10-26, R10-17, R10-29):
/// the home's configuration loads from it — by a link (`~/.vimrc -> dotfiles/vimrc`, one
/// below the top, a dangling one), by another name of a file (a hard link), by a start-up
/// file that sources a file there by path (`. ~/dotfiles/aliases.sh`) or puts a directory
/// there on `PATH`, by `~/.gitconfig`'s include — so it is read-only to commands nobody
/// approved and to the file tools. A project the start-up files merely mention (an alias
/// that `cd`s there) is not.
#[test]
fn a_directory_the_users_configuration_loads_from_is_read_only() {
    let Some(home) = home_for(
        "a_directory_the_users_configuration_loads_from_is_read_only",
        |home| {
            write(&home.join("proj/src.txt"), "code\n");
            write(&home.join(".bashrc"), "alias p='cd ~/proj'\n");
        },
    ) else {
        return;
    };
    let dotfiles = home.join("dotfiles");
    type Form = (&'static str, fn(&Path));
    let forms: &[Form] = &[
        ("a link at the top", |h| {
            symlink("dotfiles/vimrc", h.join(".vimrc")).unwrap()
        }),
        ("a link below the top", |h| {
            std::fs::create_dir_all(h.join(".config")).unwrap();
            symlink("../dotfiles/bash", h.join(".config/bash")).unwrap()
        }),
        ("a dangling link", |h| {
            symlink("dotfiles/not-yet/aliases", h.join(".bash_aliases")).unwrap()
        }),
        ("a hard link", |h| {
            std::fs::hard_link(h.join("dotfiles/vimrc"), h.join(".config/nvim-init")).unwrap()
        }),
        ("a sourced file", |h| {
            write(
                &h.join(".bashrc"),
                "alias p='cd ~/proj'\n[ -f ~/dotfiles/aliases.sh ] && . ~/dotfiles/aliases.sh\n",
            )
        }),
        ("a sourced file's source", |h| {
            write(&h.join(".bashrc"), "source ~/.bash.d/main\n");
            write(
                &h.join(".bash.d/main"),
                "for f in $HOME/dotfiles/rc/*.sh; do . \"$f\"; done\n",
            )
        }),
        ("a PATH directory", |h| {
            write(
                &h.join(".profile"),
                "export PATH=\"$HOME/dotfiles/bin:$PATH\"\n",
            )
        }),
        ("an eval of a file's text", |h| {
            write(
                &h.join(".bashrc"),
                "DOT=\"$HOME/dotfiles\"\neval \"$(cat $DOT/aliases.sh)\"\n",
            )
        }),
        ("ssh's Include", |h| {
            write(&h.join(".ssh/config"), "Include ~/dotfiles/*.conf\n")
        }),
        ("a user-site .pth line", |h| {
            let site = h.join(".local/lib/python3.11/site-packages");
            write(
                &site.join("mine.pth"),
                &format!("{}\n", h.join("dotfiles").display()),
            )
        }),
        ("a git include", |h| {
            write(
                &h.join(".gitconfig"),
                "[include]\n\tpath = ~/dotfiles/gitconfig\n",
            )
        }),
    ];
    for (what, form) in forms {
        // A fresh dotfiles directory and start-up files for each form.
        let _ = std::fs::remove_dir_all(&dotfiles);
        write(&dotfiles.join("vimrc"), "set nu\n");
        write(&dotfiles.join("aliases.sh"), "alias l=ls\n");
        for f in [
            ".ssh/config",
            ".local/lib/python3.11/site-packages/mine.pth",
            ".vimrc",
            ".bash_aliases",
            ".config/bash",
            ".config/nvim-init",
            ".profile",
            ".gitconfig",
        ] {
            let _ = std::fs::remove_file(home.join(f));
        }
        write(&home.join(".bashrc"), "alias p='cd ~/proj'\n");
        form(&home);
        let out = run(
            &dotfiles,
            "echo evil >> aliases.sh; echo evil >> vimrc; echo ok",
        );
        assert!(out.contains("ok"), "{what}: the command did not run: {out}");
        assert_eq!(
            std::fs::read_to_string(dotfiles.join("aliases.sh")).unwrap(),
            "alias l=ls\n",
            "{what}: {out}"
        );
        assert!(out.contains("read-only here"), "{what}: {out}");
        let ws = Workspace::new(&dotfiles).unwrap();
        assert!(
            matches!(
                ws.locate_writable("aliases.sh"),
                Err(PathError::UserConfig { .. })
            ),
            "{what}"
        );
    }
    // A workspace inside the configuration itself (`~/.config/nvim`): read-only too; Go's
    // `~/go/src` projects are the user's projects.
    write(&home.join(".config/nvim/init.lua"), "-- mine\n");
    write(&home.join("go/src/example.com/p/main.go"), "package main\n");
    let nvim = Workspace::new(home.join(".config/nvim")).unwrap();
    assert!(matches!(
        nvim.locate_writable("init.lua"),
        Err(PathError::UserConfig { .. })
    ));
    let gosrc = Workspace::new(home.join("go/src/example.com/p")).unwrap();
    assert!(gosrc.locate_writable("main.go").is_ok());
    // A project the start-up files only mention stays the agent's to change.
    let out = run(&home.join("proj"), "echo more >> src.txt; echo ok");
    assert_eq!(
        std::fs::read_to_string(home.join("proj/src.txt")).unwrap(),
        "code\nmore\n",
        "{out}"
    );
    assert!(!out.contains("read-only here"), "{out}");
    assert!(
        Workspace::new(home.join("proj"))
            .unwrap()
            .locate_writable("src.txt")
            .is_ok()
    );
}
