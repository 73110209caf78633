//! A fresh `HOME` (CI, a container, the tests' own temp home) does not break the Rust
//! toolchain in commands Keel runs: rustup's proxies find their toolchains through the
//! `RUSTUP_HOME`/`CARGO_HOME` Keel derives from the `rustup` on `PATH`, and the sandbox is not
//! asked to let them create `~/.rustup`.

#![allow(clippy::disallowed_macros, clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;

#[test]
fn cargo_runs_under_the_sandbox_with_a_fresh_home() {
    let has = |p: &str| {
        std::env::var_os("PATH")
            .is_some_and(|path| std::env::split_paths(&path).any(|d| d.join(p).is_file()))
    };
    if !has("rustup") {
        assert!(
            std::env::var("CI").is_err(),
            "CI installs Rust with rustup; this test needs it"
        );
        eprintln!("SKIPPED cargo_runs_under_the_sandbox_with_a_fresh_home: no rustup on PATH");
        return;
    }
    let env = Env::new();
    // `keel()` gives the command nothing but PATH and the empty temp HOME.
    let out = env
        .keel()
        .args(["sandbox", "--", "cargo", "--version"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !err.contains("could not create home directory"),
        "rustup tried to create ~/.rustup in the fresh HOME: {err}"
    );
    assert_exit(&out, 0);
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("cargo "));
    assert!(!env.home.join(".rustup").exists());
}
