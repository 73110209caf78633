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
//! get the ordering: it is an lld option. The list marks the functions ThinLTO renames with a
//! hash that changes with every change to their module; a linker script places those whatever
//! the hash (see [`layout_files`]). Names a build does not have are skipped (another compiler
//! version, a renamed function, or a crate whose dependencies changed: a legacy-mangled name's
//! own hash covers its crate's `-C metadata`); what is not listed keeps the linker's order.
//!
//! The names of Keel's own crates carry a hash of the crate's dependency graph (a legacy-mangled
//! name's `17h…E`, a v0 name's crate disambiguator): a dependency added or upgraded renames
//! every function above it, and the list silently loses its effect (aee1b52 added rustix to
//! keel-snapshot: peak RSS back from 15 to 27 MiB). The list's first line therefore records what
//! it was recorded for — a fingerprint of `Cargo.lock` and the compiler's version — and a release
//! build whose fingerprint differs warns, naming the script that re-records it.
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
    if env("KEEL_NO_SYMBOL_ORDERING").is_empty()
        && list.is_file()
        && let Some((order, script)) = layout_files(&list, &env("OUT_DIR"))
    {
        println!(
            "cargo:rustc-link-arg-bin=keel=-Wl,--symbol-ordering-file={}",
            order.display()
        );
        println!("cargo:rustc-link-arg-bin=keel=-Wl,--no-warn-symbol-ordering");
        println!("cargo:rustc-link-arg-bin=keel=-Wl,-T,{}", script.display());
        if let Some(warning) = staleness(&list, &env("CARGO_MANIFEST_DIR"), &env("RUSTC")) {
            println!("cargo:warning={warning}");
        }
    }
    // The binary is built for this machine (`cargo install`): packed relocations need the
    // glibc that runs it to read them.
    if env("HOST") == env("TARGET") && glibc_reads_relr() {
        println!("cargo:rustc-link-arg-bin=keel=-Wl,-z,pack-relative-relocs");
    }
}

/// The ordering file and the linker script for `list`, written into `out_dir`.
///
/// A function ThinLTO promoted (a local one another module calls) is named with `.llvm.` and a
/// hash of its module, which changes whenever the module does: with ordinary commits, so a list
/// naming such functions exactly went stale within days (562 of 4,399 names). The list marks
/// them instead (`name.llvm.*`, recorded so by `benches/hot_symbols.sh`): the ordering file gets
/// every name without the mark (lld matches exact names; a function no longer promoted is
/// found there), and a linker script puts each marked name's function section
/// (`-ffunction-sections`, rustc's default), whatever its hash, into `.text.hot` right before
/// `.text`, whose start the ordering file fills. Only marked names get a pattern: lld tests
/// every pattern against every input section (all 4,408 names as patterns took ~100 s of the
/// link on the loaded 2-core machine, the 560 marked 14 s), and a layout with every hot
/// function placed by the script measured 1.8 MiB more than this one. `None` when the list
/// cannot be read or the files cannot be written (the link then goes without the layout).
fn layout_files(
    list: &std::path::Path,
    out_dir: &str,
) -> Option<(std::path::PathBuf, std::path::PathBuf)> {
    // Keel's own build input (crates/keel-cli/hot-symbols.txt), not a project file.
    #[allow(clippy::disallowed_methods)]
    let text = std::fs::read_to_string(list).ok()?;
    let mut order = String::new();
    let mut script = String::from("SECTIONS {\n  .text.hot : {\n");
    // `#` starts a comment line (the header); no mangled name starts with it.
    for line in (text.lines().map(str::trim)).filter(|l| !l.is_empty() && !l.starts_with('#')) {
        let (name, promoted) = match line.strip_suffix(".llvm.*") {
            Some(name) => (name, true),
            None => (line, false),
        };
        order.push_str(name);
        order.push('\n');
        // A linker script name is one token: a mangled name never holds these, a C one might.
        if promoted && !name.contains(|c: char| "*?[]\\()\"' ;,{}".contains(c)) {
            script.push_str(&format!(
                "    *(.text.{name}.llvm.* .text.unlikely.{name}.llvm.*)\n"
            ));
        }
    }
    script.push_str("  }\n}\nINSERT BEFORE .text;\n");
    let dir = std::path::Path::new(out_dir);
    let (order_path, script_path) = (dir.join("hot-symbols.order"), dir.join("hot-text.ld"));
    std::fs::write(&order_path, order).ok()?;
    std::fs::write(&script_path, script).ok()?;
    Some((order_path, script_path))
}

/// The header line of the list: `# recorded for: <fingerprint>` (see [`fingerprint`]).
const RECORDED_FOR: &str = "# recorded for: ";

/// FNV-1a (64 bits) of `Cargo.lock`'s bytes, a newline and the compiler's `rustc -V` line,
/// in hexadecimal. `benches/hot_symbols.sh` computes the same when it records the list.
pub(crate) fn fingerprint(lock: &[u8], rustc_version: &str) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &byte in lock
        .iter()
        .chain(b"\n")
        .chain(rustc_version.trim().as_bytes())
    {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{hash:016x}")
}

/// Why the list at `list` may no longer name this build's functions: it was recorded for
/// another `Cargo.lock` or compiler (or before the header existed). `None` when it matches, or
/// when there is no lock file to compare (a packaged crate) or the compiler cannot be asked.
fn staleness(list: &std::path::Path, manifest_dir: &str, rustc: &str) -> Option<String> {
    let lock_path = std::path::Path::new(manifest_dir).join("../../Cargo.lock");
    println!("cargo:rerun-if-changed={}", lock_path.display());
    // Keel's own build inputs (its list and lock file), not a project's files.
    #[allow(clippy::disallowed_methods)]
    let (text, lock) = (
        std::fs::read_to_string(list).ok()?,
        std::fs::read(&lock_path).ok()?,
    );
    let version = rustc_version(if rustc.is_empty() { "rustc" } else { rustc })?;
    stale_reason(&text, &fingerprint(&lock, &version))
}

/// The warning for a list whose header does not name `current` (see [`staleness`]).
pub(crate) fn stale_reason(list_text: &str, current: &str) -> Option<String> {
    let recorded = list_text
        .lines()
        .next()
        .and_then(|l| l.trim().strip_prefix(RECORDED_FOR))
        .map(str::trim);
    if recorded == Some(current) {
        return None;
    }
    let was = recorded.map_or("a list without the header".to_string(), |r| {
        format!("fingerprint {r}")
    });
    Some(format!(
        "crates/keel-cli/hot-symbols.txt was recorded for another Cargo.lock or compiler ({was}, this build {current}): a changed dependency renames the functions it lists, and without their layout a one-shot run's peak RSS grows by ~10 MiB. Re-record it: KEEL_KEEP_SYMBOLS=1 cargo build --release -p keel-cli, then KEEL_BIN=target/release/keel crates/keel-cli/benches/hot_symbols.sh"
    ))
}

/// The compiler's `rustc -V` line.
// A build script asking the build machine's compiler, not Keel starting a process.
#[allow(clippy::disallowed_methods)]
fn rustc_version(rustc: &str) -> Option<String> {
    let out = std::process::Command::new(rustc).arg("-V").output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
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
