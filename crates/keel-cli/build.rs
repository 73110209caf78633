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

fn main() {
    println!("cargo:rerun-if-changed=hot-symbols.txt");
    println!("cargo:rerun-if-env-changed=KEEL_NO_SYMBOL_ORDERING");
    let env = |k: &str| std::env::var(k).unwrap_or_default();
    let release = env("PROFILE") == "release";
    let lld_default = env("TARGET") == "x86_64-unknown-linux-gnu";
    // A linker of the user's own (RUSTC_LINKER, -C linker=…, -fuse-ld=…) may not know the
    // option: leave the layout to it.
    let flags = env("CARGO_ENCODED_RUSTFLAGS");
    let own_linker = !env("RUSTC_LINKER").is_empty()
        || flags.contains("linker")
        || flags.contains("link-self-contained")
        || flags.contains("fuse-ld");
    let list = std::path::Path::new(&env("CARGO_MANIFEST_DIR")).join("hot-symbols.txt");
    if release
        && lld_default
        && !own_linker
        && env("KEEL_NO_SYMBOL_ORDERING").is_empty()
        && list.is_file()
    {
        println!(
            "cargo:rustc-link-arg-bin=keel=-Wl,--symbol-ordering-file={}",
            list.display()
        );
        println!("cargo:rustc-link-arg-bin=keel=-Wl,--no-warn-symbol-ordering");
        if env("HOST") == env("TARGET") && glibc_reads_relr() {
            println!("cargo:rustc-link-arg-bin=keel=-Wl,-z,pack-relative-relocs");
        }
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
