//! Where rustup's and Cargo's homes are for commands when Keel's `HOME` lacks them.

use std::path::{Path, PathBuf};

use super::lookup::find_program;

/// Toolchain homes that commands get when Keel's `HOME` does not hold them (a fresh or
/// temporary `HOME`, as in CI or a container): rustup's proxies (`cargo`, `rustc`) look for
/// their toolchains in `$RUSTUP_HOME`, default `~/.rustup`, and try to create it when it is
/// missing — which fails under the sandbox (`HOME` is not writable) and finds no toolchain
/// outside it. When `RUSTUP_HOME`/`CARGO_HOME` are unset and `~/.rustup`/`~/.cargo` do not
/// exist, they point at the installation the `cargo` on `PATH` belongs to
/// (`…/.cargo/bin/rustup` → `CARGO_HOME=…/.cargo`, `RUSTUP_HOME=…/.rustup`). Empty when nothing
/// needs setting. `keel doctor` reports it.
pub fn toolchain_homes() -> &'static [(&'static str, PathBuf)] {
    static HOMES: std::sync::OnceLock<Vec<(&'static str, PathBuf)>> = std::sync::OnceLock::new();
    HOMES.get_or_init(|| {
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let missing = |var: &str, dir: &str| {
            std::env::var_os(var).is_none() && !home.as_ref().is_some_and(|h| h.join(dir).is_dir())
        };
        let mut out = Vec::new();
        // Only a rustup installation (`rustup` beside `cargo` in `<CARGO_HOME>/bin`): a
        // system cargo (`/usr/bin/cargo`) needs no home of its own.
        let Some(bin) = find_program("rustup").and_then(|p| p.parent().map(Path::to_path_buf))
        else {
            return out;
        };
        let Some(cargo_home) = bin
            .parent()
            .filter(|_| bin.ends_with("bin") && bin.join("cargo").exists())
        else {
            return out;
        };
        if missing("CARGO_HOME", ".cargo") {
            out.push(("CARGO_HOME", cargo_home.to_path_buf()));
        }
        if missing("RUSTUP_HOME", ".rustup")
            && let Some(rustup_home) = cargo_home.parent().map(|p| p.join(".rustup"))
            && rustup_home.join("toolchains").is_dir()
        {
            out.push(("RUSTUP_HOME", rustup_home));
        }
        out
    })
}
