//! `keel-sandbox-exec`: the sandbox helper for programs other than `keel` that use
//! keel-tools (tests, benches, embedders). Keel starts it as
//! `keel-sandbox-exec __keel-sandbox-exec -- PROGRAM [ARGS…]`; see
//! `keel_tools::sandbox::helper_main`.

fn main() -> std::process::ExitCode {
    keel_tools::sandbox::helper_main()
}
