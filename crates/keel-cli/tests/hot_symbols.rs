//! The release layout's list (`hot-symbols.txt`) and the warning a release build gives when the
//! list was recorded for another dependency graph: without it, a dependency added to a Keel
//! crate renamed every listed function and a one-shot run's peak RSS went from 15 back to 27
//! MiB with nothing said (aee1b52).

#[path = "../build.rs"]
#[allow(dead_code)]
mod build;

const RUSTC: &str = "rustc 1.95.0 (59807616e 2026-04-14)";

#[test]
fn the_fingerprint_is_the_one_the_recording_script_writes() {
    // benches/hot_symbols.sh's Python `fingerprint(b"version = 4\n", RUSTC)`.
    assert_eq!(
        build::fingerprint(b"version = 4\n", RUSTC),
        "359db502393e1059"
    );
}

#[test]
fn a_list_recorded_for_another_dependency_graph_warns_and_names_the_way_to_re_record_it() {
    let lock = b"[[package]]\nname = \"keel-snapshot\"\ndependencies = [\"gix\"]\n".to_vec();
    let list = format!(
        "# recorded for: {}\n_ZN4keel4main17h0123456789abcdefE\n",
        build::fingerprint(&lock, RUSTC)
    );
    assert_eq!(
        build::stale_reason(&list, &build::fingerprint(&lock, RUSTC)),
        None
    );

    let mut with_rustix = lock.clone();
    with_rustix.extend_from_slice(b"[[package]]\nname = \"rustix\"\n");
    let warning = build::stale_reason(&list, &build::fingerprint(&with_rustix, RUSTC))
        .expect("a changed Cargo.lock warns");
    assert!(warning.contains("hot_symbols.sh"), "{warning}");
    assert!(warning.contains("KEEL_KEEP_SYMBOLS=1"), "{warning}");

    let other_compiler = build::fingerprint(&lock, "rustc 1.96.0 (0000000 2026-06-01)");
    assert!(build::stale_reason(&list, &other_compiler).is_some());
    // A list from before the header.
    assert!(build::stale_reason("_ZN4keel4main17h0123456789abcdefE\n", "x").is_some());
}

#[test]
fn the_committed_list_says_what_it_was_recorded_for() {
    let list = include_str!("../hot-symbols.txt");
    let header = list.lines().next().unwrap_or_default();
    let fingerprint = header.strip_prefix("# recorded for: ").unwrap_or_default();
    assert!(
        fingerprint.len() == 16 && fingerprint.chars().all(|c| c.is_ascii_hexdigit()),
        "hot-symbols.txt starts with `# recorded for: <fingerprint>`, not {header:?}"
    );
    assert!(
        list.lines().count() > 1_000,
        "the list names the hot functions"
    );
}
