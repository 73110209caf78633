//! R7-30: a line is not judged by a project file an earlier part of it may change.

use crate::shell::{CommandSafety, SafetyClass};

const GOOD: &str = "test:\n\t@echo testing > out.txt\n";
const EVIL: &str = "test:\n\t@echo EVIL; rm -rf src\n";

fn workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let write = |name: &str, text: &str| {
        std::fs::write(dir.path().join(name), text).unwrap_or_else(|e| panic!("{e}"))
    };
    write("Makefile", GOOD);
    write(".e", EVIL);
    write(
        "package.json",
        r#"{"scripts": {"test": "echo ok > out.txt", "lint": "echo lint > lint.txt"}}"#,
    );
    write("evil.json", r#"{"scripts": {"test": "rm -rf src"}}"#);
    write("build.sh", "echo built > out.txt\n");
    dir
}

fn class(dir: &tempfile::TempDir, line: &str) -> SafetyClass {
    let a = CommandSafety::new().classify_in_project(line, dir.path());
    a.class
}

#[test]
fn a_line_that_replaces_a_file_it_is_judged_by_is_unknown() {
    let dir = workspace();
    assert_eq!(class(&dir, "make test"), SafetyClass::WritesWorkspace);
    for line in [
        "cp .e Makefile && make test",
        "cat .e > Makefile; make test",
        "mv .e Makefile && make test",
        "cp .e ./sub/../Makefile && make test",
        "cp .e GNUmakefile && make test",
        "cp -r .e . && make test",
        "sed -i 's/testing/x/' Makefile && make test",
        "make test > Makefile",
        "cp evil.json package.json && npm test",
        "cp .e \"$F\" && make test",
        "printf 'rm -rf src' > build.sh; sh build.sh",
        "bash -c 'cp .e Makefile' && make test",
        "tar -xf a.tar && make test",
        // A loop runs its judged command again after its own writes.
        "for i in 1 2; do make test; cp .e Makefile; done",
        "while true; do npm test; cp evil.json package.json; done",
        // The parts of a pipeline or of `a & b` run at once.
        "make test | cp .e Makefile",
        "make test & cp .e Makefile; wait",
        "{ make test; } & cat .e > Makefile",
    ] {
        let c = class(&dir, line);
        assert!(c >= SafetyClass::Unknown, "{line}: {c}");
    }
}

#[test]
fn writes_through_a_link_or_a_hard_link_count() {
    let dir = workspace();
    std::os::unix::fs::symlink("Makefile", dir.path().join("m")).unwrap_or_else(|e| panic!("{e}"));
    std::fs::hard_link(dir.path().join("Makefile"), dir.path().join("h"))
        .unwrap_or_else(|e| panic!("{e}"));
    std::fs::create_dir(dir.path().join("d")).unwrap_or_else(|e| panic!("{e}"));
    std::os::unix::fs::symlink("..", dir.path().join("d/up")).unwrap_or_else(|e| panic!("{e}"));
    for line in [
        "cat .e > m; make test",
        "cat .e > h; make test",
        "cp .e d/up/Makefile && make test",
    ] {
        let c = class(&dir, line);
        assert!(c >= SafetyClass::Unknown, "{line}: {c}");
    }
}

#[test]
fn writes_elsewhere_or_after_keep_the_judgement() {
    let dir = workspace();
    for line in [
        "make test > log.txt 2>&1",
        "make test && cp out.txt results.txt",
        "cp Makefile Makefile.bak && make test",
        "mkdir -p build && make test",
        "make test | tee log.txt",
        "npm test && npm run lint",
        "echo start > log.txt; make test",
        "for i in 1 2; do make test; done",
    ] {
        assert_eq!(class(&dir, line), SafetyClass::WritesWorkspace, "{line}");
    }
}

/// R8-7: options and command-line variables that change what npm or make run the judged
/// script or recipe through.
#[test]
fn options_that_change_what_runs_the_script_are_unknown() {
    let dir = workspace();
    for line in [
        "npm test --script-shell=tools/sh.sh",
        "npm --script-shell tools/sh.sh test",
        "npm --node-options='--require ./tools/x.js' test",
        "npm test --userconfig tools/npmrc",
        "npm run lint --globalconfig=x",
        "npm test $OPTS",
        "make test SHELL=tools/sh.sh",
        "make test .SHELLFLAGS=-c",
        "make test MAKEFLAGS=-fevil.mk",
        "make test MAKEFILES=evil.mk",
    ] {
        let c = class(&dir, line);
        assert!(c >= SafetyClass::Unknown, "{line}: {c}");
    }
    for line in [
        "npm test",
        "npm test --silent",
        "npm -s test",
        "npm test -- --watch=false",
        "npm run lint --if-present",
        "make test V=1",
        "make -s test",
    ] {
        assert_eq!(class(&dir, line), SafetyClass::WritesWorkspace, "{line}");
    }
}

#[test]
fn a_command_line_variable_wins_over_the_makefiles_own() {
    let dir = workspace();
    std::fs::write(
        dir.path().join("Makefile"),
        "CMD = echo ok > out.txt\nINC ?=\ntest:\n\t@$(CMD)\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(class(&dir, "make test"), SafetyClass::WritesWorkspace);
    let c = class(&dir, "make test CMD='rm -rf src'");
    assert!(c >= SafetyClass::Unknown, "{c}");
}

/// R8-13: a remembered approval is keyed by the judged files' digest; it was 32 bits of FNV
/// over FNV-64 file hashes, forged by brute force over a comment in the Makefile.
#[test]
fn a_judgement_is_remembered_by_a_collision_resistant_digest() {
    let dir = workspace();
    let a = CommandSafety::new().classify_in_project("make test", dir.path());
    assert_eq!(a.sources_fingerprint().unwrap_or_default().len(), 16);
    assert_eq!(a.sources[0].hash, crate::trust::sha256_u64(GOOD.as_bytes()));
}

/// R8-7 (the `.npmrc` form): `workspace=a` in the project's `.npmrc` makes `npm test` run
/// another package's script than the root one judged.
#[test]
fn an_npmrc_that_picks_another_packages_script_is_unknown() {
    let dir = workspace();
    for setting in ["workspace=a", "workspaces=true", "prefix=pkgs/a"] {
        std::fs::write(dir.path().join(".npmrc"), format!("{setting}\n"))
            .unwrap_or_else(|e| panic!("{e}"));
        let c = class(&dir, "npm test");
        assert!(c >= SafetyClass::Unknown, "{setting}: {c}");
    }
}

/// Red-team pass 11, R11-6: bash expands a glob in a written path (`> data/f10.cs?`, `cp …
/// data/f2.cs?`, `cd dat? && > f1.csv`) to the one existing file; the overwrite check took
/// the text literally (a new file) and the user's ignored, never-recorded data was lost.
#[test]
fn a_glob_in_a_written_path_is_judged_by_what_it_matches() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let write = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::create_dir_all(p.parent().unwrap_or(dir.path())).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(p, text).unwrap_or_else(|e| panic!("{e}"))
    };
    write(".gitignore", "data/\n");
    write("README.md", "readme\n");
    for i in 1..=12 {
        write(&format!("data/f{i}.csv"), "precious\n");
    }
    let mut wrong = Vec::new();
    for line in [
        "echo GONE > data/f10.csv",
        "echo GONE > data/f10.cs?",
        "echo GONE > data/f11.c*",
        "echo GONE > data/[f]12.csv",
        "sort -o data/f1.cs? README.md",
        "cp README.md data/f2.cs?",
        "cat README.md | tee data/f3.c*",
        "cd dat? && echo GONE > f1.csv",
        "pushd d*a >/dev/null; echo GONE > f3.csv",
    ] {
        let a = CommandSafety::new().classify_in_project(line, dir.path());
        if a.class != SafetyClass::Destructive {
            wrong.push(format!("{line}: {:?} {:?}", a.class, a.reasons));
        }
    }
    assert!(wrong.is_empty(), "not asked:\n{}", wrong.join("\n"));
    // A pattern that matches nothing is a new file; an append keeps the content.
    for line in ["echo x > new*.txt", "echo x >> data/f1.cs?"] {
        assert_eq!(class_in(&dir, line), SafetyClass::WritesWorkspace, "{line}");
    }
}

fn class_in(dir: &tempfile::TempDir, line: &str) -> SafetyClass {
    CommandSafety::new()
        .classify_in_project(line, dir.path())
        .class
}
