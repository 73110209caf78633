use std::os::unix::fs::symlink;

use super::*;

fn setup() -> (tempfile::TempDir, tempfile::TempDir, DirHandle) {
    let ws = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let outside = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let h = DirHandle::open(ws.path()).unwrap_or_else(|e| panic!("{e}"));
    (ws, outside, h)
}

/// Resolves `rel` both ways — `openat2` where it applies, and the component walk — and
/// checks they agree; returns the walk's answer.
fn both(h: &DirHandle, rel: &str) -> Result<ResolvedPath, ResolveError> {
    let comps: Vec<OsString> = Path::new(rel)
        .components()
        .map(|c| c.as_os_str().to_os_string())
        .collect();
    let fast = h.resolve(Path::new(rel));
    let walked = h.walk(comps);
    match (&fast, &walked) {
        (Ok(a), Ok(b)) => {
            assert_eq!(a.rel(), b.rel(), "{rel}");
            assert_eq!(a.missing, b.missing, "{rel}");
        }
        (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string(), "{rel}"),
        _ => panic!("{rel}: openat2 {fast:?} vs walk {walked:?}"),
    }
    walked
}

fn rel(r: Result<ResolvedPath, ResolveError>) -> String {
    r.map(|r| r.rel_string()).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn plain_and_missing_paths_resolve_to_themselves() {
    let (ws, _o, h) = setup();
    std::fs::create_dir_all(ws.path().join("src/a")).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(ws.path().join("src/a/f.rs"), "x").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(rel(both(&h, "src/a/f.rs")), "src/a/f.rs");
    assert_eq!(rel(both(&h, "src/a/new.rs")), "src/a/new.rs");
    let deep = both(&h, "src/b/c/d.rs").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(deep.rel_string(), "src/b/c/d.rs");
    assert_eq!(deep.missing, vec![OsString::from("b"), OsString::from("c")]);
    assert!(h.resolve(Path::new("")).is_ok_and(|r| r.is_root()));
}

#[test]
fn links_inside_are_followed_to_their_canonical_path() {
    let (ws, _o, h) = setup();
    std::fs::create_dir_all(ws.path().join("real/sub")).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(ws.path().join("real/sub/f.rs"), "x").unwrap_or_else(|e| panic!("{e}"));
    symlink("real", ws.path().join("rel_alias")).unwrap_or_else(|e| panic!("{e}"));
    symlink(ws.path().join("real"), ws.path().join("abs_alias")).unwrap_or_else(|e| panic!("{e}"));
    symlink("../real/sub/f.rs", ws.path().join("real/up_link")).unwrap_or_else(|e| panic!("{e}"));
    symlink("sub/f.rs", ws.path().join("real/file_link")).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(rel(both(&h, "rel_alias/sub/f.rs")), "real/sub/f.rs");
    assert_eq!(rel(both(&h, "abs_alias/sub/f.rs")), "real/sub/f.rs");
    assert_eq!(rel(both(&h, "abs_alias/sub/new.rs")), "real/sub/new.rs");
    assert_eq!(rel(both(&h, "real/up_link")), "real/sub/f.rs");
    assert_eq!(rel(both(&h, "rel_alias/file_link")), "real/sub/f.rs");
    let r = both(&h, "rel_alias/file_link").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(r.read().unwrap_or_default(), b"x");
}

#[test]
fn links_out_dangling_links_loops_and_files_on_the_way_are_refused() {
    let (ws, out, h) = setup();
    std::fs::write(out.path().join("secret"), "s").unwrap_or_else(|e| panic!("{e}"));
    std::fs::create_dir(ws.path().join("d")).unwrap_or_else(|e| panic!("{e}"));
    symlink(out.path(), ws.path().join("abs_out")).unwrap_or_else(|e| panic!("{e}"));
    symlink("../../..", ws.path().join("d/rel_out")).unwrap_or_else(|e| panic!("{e}"));
    symlink("/etc/passwd", ws.path().join("passwd")).unwrap_or_else(|e| panic!("{e}"));
    symlink("missing/x", ws.path().join("dangling")).unwrap_or_else(|e| panic!("{e}"));
    symlink("loop_b", ws.path().join("loop_a")).unwrap_or_else(|e| panic!("{e}"));
    symlink("loop_a", ws.path().join("loop_b")).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(ws.path().join("file"), "f").unwrap_or_else(|e| panic!("{e}"));
    for (path, want) in [
        ("abs_out/secret", "outside"),
        ("abs_out/new.txt", "outside"),
        ("d/rel_out/etc/passwd", "outside"),
        ("passwd", "outside"),
        ("dangling", "does not exist"),
        ("dangling/new.txt", "does not exist"),
        ("loop_a", "too many levels"),
        ("file/x", "not a directory"),
    ] {
        let e = both(&h, path)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains(want), "{path}: {e}");
    }
    let e = both(&h, "abs_out/secret").err().map(|e| e.to_string());
    assert!(
        e.as_deref()
            .is_some_and(|e| e.contains(&out.path().display().to_string())),
        "the message names where the link leads: {e:?}"
    );
}

#[test]
fn a_component_swapped_for_a_link_after_resolution_cannot_redirect_a_write() {
    let (ws, out, h) = setup();
    std::fs::create_dir(ws.path().join("d")).unwrap_or_else(|e| panic!("{e}"));
    for missing_parent in [false, true] {
        let rel_path = if missing_parent {
            "d/new/x.txt"
        } else {
            "d/x.txt"
        };
        let target = both(&h, rel_path).unwrap_or_else(|e| panic!("{e}"));
        // The attacker swaps `d` for a link out between resolution and the write.
        std::fs::rename(ws.path().join("d"), ws.path().join("d_old"))
            .unwrap_or_else(|e| panic!("{e}"));
        symlink(out.path(), ws.path().join("d")).unwrap_or_else(|e| panic!("{e}"));
        let written = target.write_atomic(b"payload", WriteMode::CreateNew, None);
        // The write lands in the directory that was resolved (now `d_old`), or fails — never
        // outside.
        assert!(
            std::fs::read_dir(out.path())
                .map(|d| d.count())
                .unwrap_or(0)
                == 0,
            "{rel_path}: something landed outside ({written:?})"
        );
        if written.is_ok() {
            let inside = ws
                .path()
                .join("d_old")
                .join(rel_path.trim_start_matches("d/"));
            assert_eq!(std::fs::read(&inside).unwrap_or_default(), b"payload");
        }
        std::fs::remove_file(ws.path().join("d")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::remove_dir_all(ws.path().join("d_old")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::create_dir(ws.path().join("d")).unwrap_or_else(|e| panic!("{e}"));
    }
}

#[test]
fn a_final_component_swapped_for_a_link_or_fifo_is_not_followed_or_waited_on() {
    let (ws, out, h) = setup();
    std::fs::write(out.path().join("secret"), "s").unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(ws.path().join("f"), "mine").unwrap_or_else(|e| panic!("{e}"));
    let target = both(&h, "f").unwrap_or_else(|e| panic!("{e}"));
    std::fs::remove_file(ws.path().join("f")).unwrap_or_else(|e| panic!("{e}"));
    symlink(out.path().join("secret"), ws.path().join("f")).unwrap_or_else(|e| panic!("{e}"));
    let e = target
        .read()
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(e.contains("symlink"), "{e}");
    std::fs::remove_file(ws.path().join("f")).unwrap_or_else(|e| panic!("{e}"));
    rustix::fs::mknodat(
        rustix::fs::CWD,
        ws.path().join("f").as_path(),
        FileType::Fifo,
        Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let started = std::time::Instant::now();
    let e = target
        .read()
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(e.contains("FIFO"), "{e}");
    assert!(started.elapsed() < std::time::Duration::from_secs(2));
}

#[test]
fn reads_can_be_bounded() {
    let (ws, _o, h) = setup();
    std::fs::write(ws.path().join("big"), vec![b'a'; 5000]).unwrap_or_else(|e| panic!("{e}"));
    let t = both(&h, "big").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(t.read_bounded(5000).map(|b| b.len()).ok(), Some(5000));
    let e = t
        .read_bounded(4096)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(e.contains("larger than 4.0 KB"), "{e}");
}

#[test]
fn mkdir_p_and_delete_work_beneath() {
    let (ws, _o, h) = setup();
    both(&h, "a/b/c")
        .and_then(|t| t.create_dir_all().map_err(ResolveError::Io))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(ws.path().join("a/b/c").is_dir());
    std::fs::write(ws.path().join("a/b/c/f"), "x").unwrap_or_else(|e| panic!("{e}"));
    both(&h, "a/b/c/f")
        .and_then(|t| t.remove_file().map_err(ResolveError::Io))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(!ws.path().join("a/b/c/f").exists());
    both(&h, "a/b/c")
        .and_then(|t| t.remove_empty_dir().map_err(ResolveError::Io))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(!ws.path().join("a/b/c").exists());
}

/// A reader of `len` bytes of `b'x'` that fails at its end when `fail_at_end` (as a hash
/// check does when the content does not match).
struct Source {
    left: u64,
    fail_at_end: bool,
}

impl std::io::Read for Source {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.left == 0 {
            if self.fail_at_end {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    "the content does not match its hash",
                ));
            }
            return Ok(0);
        }
        let n = buf
            .len()
            .min(usize::try_from(self.left).unwrap_or(usize::MAX));
        buf[..n].fill(b'x');
        self.left -= n as u64;
        Ok(n)
    }
}

#[test]
fn a_streamed_write_replaces_only_when_the_reader_ends_cleanly() {
    let (ws, _o, h) = setup();
    let names = |dir: &Path| -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("{e}"))
            .map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned()))
            .collect::<Result<_, _>>()
            .unwrap_or_else(|e| panic!("{e}"));
        v.sort();
        v
    };
    std::fs::write(ws.path().join("big.bin"), "old").unwrap_or_else(|e| panic!("{e}"));
    let target = h
        .resolve(Path::new("big.bin"))
        .unwrap_or_else(|e| panic!("{e}"));
    // 3 MiB through a reader: written whole, in chunks.
    let written = target
        .write_atomic_from(
            &mut Source {
                left: 3 << 20,
                fail_at_end: false,
            },
            WriteMode::Replace,
            None,
        )
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(written, 3 << 20);
    let bytes = std::fs::read(ws.path().join("big.bin")).unwrap_or_else(|e| panic!("{e}"));
    assert!(bytes.len() == 3 << 20 && bytes.iter().all(|b| *b == b'x'));

    // A reader that fails at its end: the target keeps its content, no temp file is left,
    // and directories made for the write are removed again.
    std::fs::write(ws.path().join("big.bin"), "old").unwrap_or_else(|e| panic!("{e}"));
    let err = target
        .write_atomic_from(
            &mut Source {
                left: 1 << 20,
                fail_at_end: true,
            },
            WriteMode::Replace,
            None,
        )
        .err()
        .unwrap_or_else(|| panic!("a failing reader must fail the write"));
    assert!(err.to_string().contains("does not match"), "{err}");
    assert_eq!(
        std::fs::read_to_string(ws.path().join("big.bin")).unwrap_or_else(|e| panic!("{e}")),
        "old"
    );
    let deep = h
        .resolve(Path::new("new/dir/f.bin"))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        deep.write_atomic_from(
            &mut Source {
                left: 10,
                fail_at_end: true,
            },
            WriteMode::CreateNew,
            None,
        )
        .is_err()
    );
    assert_eq!(names(ws.path()), vec!["big.bin".to_string()]);
}

/// A workspace holding stores (as when it is the home directory): nothing resolves into one —
/// by name, through a link, in another case, by a hard link or after a rename — and walks
/// pass them over. Stores are registered here (the process's `HOME` is left alone).
#[test]
fn stores_beneath_the_root_are_never_resolved_into_or_listed() {
    use crate::stores::register_keel_path;
    let ws = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let root = ws.path().canonicalize().unwrap_or_else(|e| panic!("{e}"));
    std::fs::create_dir_all(root.join("ssh")).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(root.join("ssh/id_ed25519"), "KEY").unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(root.join("netrc"), "PASSWORD").unwrap_or_else(|e| panic!("{e}"));
    std::fs::create_dir_all(root.join("src")).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(root.join("src/main.rs"), "fn main() {}").unwrap_or_else(|e| panic!("{e}"));
    symlink("ssh", root.join("alias")).unwrap_or_else(|e| panic!("{e}"));
    std::fs::hard_link(root.join("netrc"), root.join("src/innocent.txt"))
        .unwrap_or_else(|e| panic!("{e}"));
    register_keel_path(&root.join("ssh"));
    register_keel_path(&root.join("netrc"));
    // Keel's config directory, which does not exist yet.
    register_keel_path(&root.join("conf/keel"));
    let h = DirHandle::open(&root).unwrap_or_else(|e| panic!("{e}"));
    for rel in [
        "ssh/id_ed25519",
        "ssh",
        "ssh/authorized_keys",
        "alias/id_ed25519",
        "netrc",
        "src/innocent.txt",
        "conf/keel/config.toml",
        "conf/keel",
    ] {
        let e = h.resolve(Path::new(rel)).err();
        assert!(
            matches!(e, Some(ResolveError::Protected(_))),
            "{rel}: {e:?}"
        );
        let e = h.resolve_entry(Path::new(rel)).err();
        assert!(
            matches!(e, Some(ResolveError::Protected(_))),
            "{rel} (entry): {e:?}"
        );
    }
    let msg = h
        .resolve(Path::new("ssh/id_ed25519"))
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(msg.contains("Keel's own") && msg.contains("ssh"), "{msg}");
    // Everything else works as before.
    assert!(h.resolve(Path::new("src/main.rs")).is_ok());
    assert!(h.resolve(Path::new("conf/other.toml")).is_ok());
    // A walk lists neither the stores nor the hard link to one.
    let mut listed = Vec::new();
    h.walk_sorted(Path::new(""), crate::walk::WalkOptions::default(), |e| {
        listed.push(e.rel.display().to_string());
        crate::walk::Visit::Continue
    })
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(listed.contains(&"src/main.rs".to_string()), "{listed:?}");
    for gone in ["ssh", "ssh/id_ed25519", "netrc", "src/innocent.txt"] {
        assert!(!listed.contains(&gone.to_string()), "{gone}: {listed:?}");
    }
    // Renamed after the handle was opened: still the same directory (identity, not name).
    std::fs::rename(root.join("ssh"), root.join("moved")).unwrap_or_else(|e| panic!("{e}"));
    let e = h.resolve(Path::new("moved/id_ed25519")).err();
    assert!(matches!(e, Some(ResolveError::Protected(_))), "{e:?}");
    let sub = h.subdir(Path::new("src")).unwrap_or_else(|e| panic!("{e}"));
    let e = sub.resolve(Path::new("innocent.txt")).err();
    assert!(matches!(e, Some(ResolveError::Protected(_))), "{e:?}");
}

/// A store outside the workspace whose file is a link into it (a dotfile manager keeping the
/// key in a repository the agent works in, R11): the target is refused like the store.
#[test]
fn a_stores_link_target_inside_the_root_is_refused() {
    use crate::stores::register_keel_path;
    let ws = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let root = ws.path().canonicalize().unwrap_or_else(|e| panic!("{e}"));
    let store = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let store = store
        .path()
        .canonicalize()
        .unwrap_or_else(|e| panic!("{e}"));
    std::fs::create_dir_all(root.join("dotfiles/ssh")).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(root.join("dotfiles/ssh/id_ed25519"), "KEY").unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(root.join("README.md"), "hi").unwrap_or_else(|e| panic!("{e}"));
    std::fs::create_dir_all(store.join("keel")).unwrap_or_else(|e| panic!("{e}"));
    symlink(
        root.join("dotfiles/ssh/id_ed25519"),
        store.join("keel/id_ed25519"),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    register_keel_path(&store.join("keel"));
    let h = DirHandle::open(&root).unwrap_or_else(|e| panic!("{e}"));
    let e = h.resolve(Path::new("dotfiles/ssh/id_ed25519")).err();
    assert!(matches!(e, Some(ResolveError::Protected(_))), "{e:?}");
    // Through a link inside the workspace too.
    symlink("dotfiles/ssh", root.join("keys")).unwrap_or_else(|e| panic!("{e}"));
    let e = h.resolve(Path::new("keys/id_ed25519")).err();
    assert!(matches!(e, Some(ResolveError::Protected(_))), "{e:?}");
    // A hard link to the target is caught by identity.
    std::fs::hard_link(
        root.join("dotfiles/ssh/id_ed25519"),
        root.join("innocent.txt"),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let h = DirHandle::open(&root).unwrap_or_else(|e| panic!("{e}"));
    let e = h.resolve(Path::new("innocent.txt")).err();
    assert!(matches!(e, Some(ResolveError::Protected(_))), "{e:?}");
    assert!(h.resolve(Path::new("README.md")).is_ok());
}

#[test]
fn a_literal_path_is_never_redirected_by_a_link_inside() {
    // Red-team pass 6, R6-11: `.keel/flows/hk -> ../../.husky` made a PR description land in
    // the user's pre-commit hook. Keel's own files are written only where their path says.
    let (ws, _o, h) = setup();
    std::fs::create_dir_all(ws.path().join(".keel/flows")).unwrap_or_else(|e| panic!("{e}"));
    std::fs::create_dir_all(ws.path().join(".husky")).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(ws.path().join(".husky/pre-commit"), "echo hook\n")
        .unwrap_or_else(|e| panic!("{e}"));
    symlink("../../.husky", ws.path().join(".keel/flows/hk")).unwrap_or_else(|e| panic!("{e}"));
    symlink("../.husky/pre-commit", ws.path().join(".keel/project.md"))
        .unwrap_or_else(|e| panic!("{e}"));
    for through in [".keel/flows/hk/pre-commit", ".keel/project.md"] {
        assert!(
            matches!(
                h.resolve_literal(Path::new(through)),
                Err(ResolveError::Redirected { .. })
            ),
            "{through} was resolved through its link"
        );
        assert!(
            h.resolve(Path::new(through)).is_ok(),
            "{through}: the plain form follows it"
        );
    }
    assert_eq!(
        rel(h.resolve_literal(Path::new(".keel/flows/runs/x/PR.md"))),
        ".keel/flows/runs/x/PR.md",
        "a missing file under real directories is fine"
    );
}
