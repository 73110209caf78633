//! Code layout of the release binary: the functions a small session runs (listed in
//! `hot-symbols.txt`, recorded by `benches/hot_symbols.sh`) are placed together at the start of
//! `.text`, so the pages a run touches are few and dense. Without it they are spread over the
//! whole 31 MB of code, and the kernel maps 64 KB around every page a run touches
//! (fault-around): a one-shot run then holds two thirds of the binary's code in memory.
//!
//! Relative relocations are packed (`-z pack-relative-relocs`, DT_RELR) when the glibc the
//! binary is built against reads them (2.36 and later): 54,000 of them, 1.3 MB of `.rela.dyn`
//! that the loader reads at every start, become a few kilobytes.
//!
//! Only release builds for x86-64 Linux with Rust's own linker (rust-lld, the default there)
//! get the ordering: it is an lld option. Names the file lists that a build does not have
//! (another compiler version, a changed function) are skipped; what is not listed keeps
//! the linker's order.
//!
//! The release binary's symbol table is dropped here, at its link (`--strip-all`), not by the
//! profile's `strip`: a profile setting is part of every crate's `-C metadata`, so a build with
//! symbols for recording the list (`KEEL_KEEP_SYMBOLS=1`) would mangle every name differently
//! from the build that uses the list — and rebuild every dependency. With the link argument the
//! two builds share every compiled crate and every name; only `keel` is linked again.

// Cargo reads its directives from a build script's stdout: `println!` is the interface here,
// not terminal output (keel-cli's clippy.toml forbids it for the program itself).
#![allow(clippy::disallowed_macros)]

fn main() {
    let env = |k: &str| std::env::var(k).unwrap_or_default();
    if env("PROFILE") != "release" {
        // Debug and test builds link as they always did, and are not rebuilt when the list
        // changes.
        println!("cargo:rerun-if-changed=build.rs");
        return;
    }
    let list = std::path::Path::new(&env("CARGO_MANIFEST_DIR")).join("hot-symbols.txt");
    // A file that does not exist would make cargo run this script, and compile keel, on
    // every build.
    if list.is_file() {
        println!("cargo:rerun-if-changed=hot-symbols.txt");
    } else {
        println!("cargo:rerun-if-changed=build.rs");
    }
    println!("cargo:rerun-if-env-changed=KEEL_NO_SYMBOL_ORDERING");
    println!("cargo:rerun-if-env-changed=KEEL_KEEP_SYMBOLS");
    if env("CARGO_CFG_TARGET_OS") == "linux" && env("KEEL_KEEP_SYMBOLS").is_empty() {
        // GNU ld, gold and lld all take it; the profile keeps symbols (see the top).
        println!("cargo:rustc-link-arg-bin=keel=-Wl,--strip-all");
    }
    // rust-lld is the default linker there; a linker of the user's own (RUSTC_LINKER,
    // -C linker=…, -fuse-ld=…) may not know the options: leave the layout to it.
    let flags = env("CARGO_ENCODED_RUSTFLAGS");
    let own_linker = !env("RUSTC_LINKER").is_empty()
        || flags.contains("linker")
        || flags.contains("link-self-contained")
        || flags.contains("fuse-ld");
    if env("TARGET") != "x86_64-unknown-linux-gnu" || own_linker {
        return;
    }
    if env("KEEL_NO_SYMBOL_ORDERING").is_empty() && list.is_file() {
        println!(
            "cargo:rustc-link-arg-bin=keel=-Wl,--symbol-ordering-file={}",
            list.display()
        );
        println!("cargo:rustc-link-arg-bin=keel=-Wl,--no-warn-symbol-ordering");
    }
    // The binary is built for this machine (`cargo install`): packed relocations need the
    // glibc that runs it to read them.
    if env("HOST") == env("TARGET") && glibc_reads_relr() {
        println!("cargo:rustc-link-arg-bin=keel=-Wl,-z,pack-relative-relocs");
    }
}

/// Whether this machine's glibc is 2.36 or later (`getconf GNU_LIBC_VERSION`: "glibc 2.36").
// A build script asking the build machine, not Keel starting a process.
#[allow(clippy::disallowed_methods)]
fn glibc_reads_relr() -> bool {
    let Ok(out) = std::process::Command::new("getconf")
        .arg("GNU_LIBC_VERSION")
        .output()
    else {
        return false;
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let Some(version) = text.trim().strip_prefix("glibc ") else {
        return false;
    };
    let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    (major, minor) >= (2, 36)
}
