//! Tests of the command-safety analyser.
use super::*;

fn class(cmd: &str) -> SafetyClass {
    classify(cmd).class
}

#[test]
fn redirections_are_writes() {
    for cmd in [
        "echo hi > out.txt",
        "echo hi >> out.txt",
        "echo hi >| out.txt",
        "ls &> log",
        "ls &>> log",
        "ls >&log",
        "cat <<EOF > f\nx\nEOF",
        "cat <<< hi > f",
        "{ ls; } > f",
        "(ls) > f",
        "ls 2> err.txt",
    ] {
        let a = classify(cmd);
        assert_eq!(a.class, SafetyClass::WritesWorkspace, "{cmd}: {a:?}");
        assert!(a.reasons[0].contains("redirection"), "{cmd}: {a:?}");
    }
    assert_eq!(class("echo x > /etc/passwd"), SafetyClass::Destructive);
    assert_eq!(class("echo x > ../up"), SafetyClass::Destructive);
    // Red-team B17: a redirection with nothing to write empties its file.
    for cmd in [":>f", ": > README.md", "> README.md", "true > f"] {
        assert_eq!(class(cmd), SafetyClass::Destructive, "{cmd}");
    }
    assert_eq!(class("echo x > \"$f\""), SafetyClass::Unknown);
    // `exec` with only redirections changes the shell's files for everything after it.
    assert_eq!(class("exec > f"), SafetyClass::Unknown);
}

#[test]
fn abbreviated_long_options_resolve_like_getopt_long() {
    use crate::shell::options::{abbreviates, resolve_long};
    assert!(abbreviates("out", "--output"));
    assert!(abbreviates("in-pl", "in-place"));
    assert!(!abbreviates("", "output"));
    assert_eq!(
        resolve_long("expr", &["expression", "file"]),
        Some("expression")
    );
    assert_eq!(
        resolve_long("e", &["expression", "eval"]),
        None,
        "ambiguous"
    );
    assert_eq!(resolve_long("nope", &["expression"]), None, "unknown");
    for cmd in [
        "sed --expr='w pwned' f",
        "sed --in-pl s/a/b/ f",
        "sed --frobnicate f",
        "sort --out=f in",
        "sort --outp f in",
        "sort --compress-prog=sh in",
        "awk --fil=p.awk f",
        "awk -fprog.awk f",
        "awk --dump-variables '{print}' f",
        "awk -o '{print}' f",
        "env --split=touch\\ x",
        "env -S'touch x'",
        "env --frob ls",
        "tar --checkpoint-act=exec=sh -tf a.tar",
        "tar --to-com=sh -xOf a.tar",
        "tar -I sh -tf a.tar",
        "tar --use=sh -tf a.tar",
    ] {
        assert!(!classify(cmd).is_read_only(), "{cmd}: {:?}", classify(cmd));
    }
    for cmd in [
        "sed --quiet -n p f",
        "sed --expression=p f",
        "sort --reverse f",
        "awk -F: '{print $1}' f",
        "awk -v x=1 '{print x}' f",
        "env -i ls",
        "tar -tf a.tar",
        "tar --list -f a.tar",
    ] {
        assert!(classify(cmd).is_read_only(), "{cmd}: {:?}", classify(cmd));
    }
}

#[test]
fn configuration_changing_environment_is_not_read_only() {
    for cmd in [
        "HOME=. git status",
        "XDG_CONFIG_HOME=. git log",
        "GIT_DIR=x git log",
        "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.pager GIT_CONFIG_VALUE_0=sh git log",
        "LD_PRELOAD=./x.so ls",
        "env HOME=. git status",
        "CARGO_HOME=. cargo metadata",
    ] {
        assert!(!classify(cmd).is_read_only(), "{cmd}: {:?}", classify(cmd));
    }
    assert!(classify("LANG=C ls").is_read_only());
    assert!(classify("TZ=UTC date").is_read_only());
}

#[test]
fn shell_features_that_run_hidden_code_are_not_read_only() {
    for cmd in [
        "f() { ls; }; f",
        "ls() { touch x; }; ls",
        "trap 'touch x' EXIT",
        "exec 3</dev/tcp/127.0.0.1/80",
        "cat </dev/tcp/127.0.0.1/80",
        "let 'x=a[$(touch p)]'",
        "declare -i x='a[$(touch p)]'",
        "[[ -v 'a[$(touch p)]' ]]",
        "cat /proc/$PPID/environ",
        "git grep --open-files-in-pager=x y",
        "git --git-dir=evil/.git status",
        "git -c core.pager=sh log",
        "cargo metadata --config build.rustc-wrapper=./x",
        "cargo tree -Zunstable-options",
        "rustfmt -l src/lib.rs",
        "black -l 100 x.py",
    ] {
        assert!(!classify(cmd).is_read_only(), "{cmd}: {:?}", classify(cmd));
    }
    assert!(classify("rustfmt --check src/lib.rs").is_read_only());
    assert!(classify("let x=1+2").is_read_only());
    assert_eq!(class("cat </dev/tcp/127.0.0.1/80"), SafetyClass::Network);
}

#[test]
fn cd_out_of_the_workspace_makes_relative_writes_outside() {
    assert_eq!(class("cd .. && touch x"), SafetyClass::Destructive);
    assert_eq!(
        class("cd /etc && echo x > passwd"),
        SafetyClass::Destructive
    );
    assert_eq!(class("cd && echo x > .bashrc"), SafetyClass::Destructive);
    assert_eq!(class("cd \"$D\" && touch x"), SafetyClass::Destructive);
    assert_eq!(class("git -C .. status; touch x"), SafetyClass::Destructive);
    assert_eq!(class("cd src && touch x"), SafetyClass::WritesWorkspace);
    assert!(classify("cd .. && ls").is_read_only());
}

#[test]
fn deep_nesting_is_unknown_not_a_stack_overflow() {
    // A small stack, as a server's worker thread might have: the analyser must not recurse
    // once per nesting level.
    let handle = std::thread::Builder::new()
        .stack_size(256 * 1024)
        .spawn(|| {
            let deep = format!("{}ls{}", "(".repeat(10_000), ")".repeat(10_000));
            let a = classify(&deep);
            let subs = format!("echo {}x{}", "$(".repeat(5_000), ")".repeat(5_000));
            (a, classify(&subs))
        })
        .unwrap_or_else(|e| panic!("{e}"));
    let (a, b) = handle
        .join()
        .unwrap_or_else(|_| panic!("the analyser overflowed its stack"));
    assert_eq!(a.class, SafetyClass::Unknown, "{a:?}");
    assert!(a.reasons.iter().any(|r| r.contains("too deeply")), "{a:?}");
    assert_eq!(b.class, SafetyClass::Unknown, "{b:?}");
}

#[test]
fn sinks_and_dups_are_not_writes() {
    for cmd in [
        "ls 2>/dev/null",
        "ls >/dev/null 2>&1",
        "ls 2>&1 | head",
        "ls 1>&2",
        "ls 3<&0",
        "ls 1>&-",
        "cat < file.txt",
        "echo $((1<<2))",
    ] {
        let a = classify(cmd);
        assert_eq!(a.class, SafetyClass::ReadOnly, "{cmd}: {a:?}");
    }
}

#[test]
fn reasons_name_the_word() {
    let a = classify("ls && rm -rf build");
    assert_eq!(a.class, SafetyClass::Destructive);
    assert!(a.reasons.iter().any(|r| r.contains("`rm`")), "{a:?}");
    let a = classify("ls | wc -l");
    assert_eq!(a.reasons, ["only reads: ls, wc"]);
}

#[test]
fn deny_list_matches_nested_commands() {
    let a = classify("bash -c 'sudo reboot'");
    assert_eq!(a.denied_by(&["sudo".into()]), Some("sudo"));
    let a = classify("/usr/bin/git push origin main");
    assert_eq!(a.denied_by(&["git push".into()]), Some("git push"));
    assert_eq!(a.denied_by(&["git pull".into()]), None);
}

#[test]
fn allow_list_makes_a_command_read_only_but_not_its_redirections() {
    let s = CommandSafety::with_allow(&["make lint".into()]);
    assert_eq!(s.classify("make lint").class, SafetyClass::ReadOnly);
    assert_eq!(
        s.classify("make lint > out").class,
        SafetyClass::WritesWorkspace
    );
    assert_eq!(s.classify("make install").class, SafetyClass::Unknown);
}

#[test]
fn path_scopes() {
    assert_eq!(path_scope("src/a.rs"), PathScope::Inside);
    assert_eq!(path_scope("/tmp/x"), PathScope::Temp);
    assert_eq!(path_scope("/tmp/../etc/x"), PathScope::Outside);
    assert_eq!(path_scope("~/.bashrc"), PathScope::Outside);
    assert_eq!(path_scope("a/../../b"), PathScope::Outside);
}
