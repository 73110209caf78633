//! File-tool latency with capability resolution (issue 29) next to the path-based way it
//! replaced, measured in the same run on the same files, interleaved.
//!
//! For a small (2 KB) and a large (1 MB) file three levels deep (`src/module/sub/…`):
//! - **I/O layer**: what `read_file`, `edit_file` and `create_file` do to the file system —
//!   now `Workspace::locate` beneath the open root (`openat2`, or the component walk with
//!   `--walk`) then reads and `renameat` writes through the open parent; the baseline is the
//!   previous code, kept here only: `canonicalize` the existing part of the path, then open,
//!   read and write by path (`tempfile` + `persist`).
//! - **Whole tool call**: `ReadFile`/`EditFile`/`CreateFile::execute` (JSON arguments,
//!   `spawn_blocking`, rendering, the editor), and how much of it the I/O layer's difference
//!   is. The I/O ratio bounds the tool-call ratio from above (the rest of a call is the same
//!   code either way).
//!
//! `cargo bench -p keel-tools --bench file_access [-- --walk] [-- --dir DIR]`. Medians of
//! interleaved runs; the temp directory is on the file system of `--dir` (default: the system
//! temp dir).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read, Write};
use std::path::{Component, Path, PathBuf};
use std::time::{Duration, Instant};

use keel_tools::builtin::{CreateFile, EditFile, ReadFile};
use keel_tools::fs::WriteMode;
use keel_tools::{Tool, ToolContext, Workspace};
use serde_json::json;

/// The path-based implementation before issue 29 (workspace.rs and fs.rs), as the baseline.
mod old {
    use super::*;

    pub fn resolve(root: &Path, rel: &str) -> PathBuf {
        let mut joined = root.to_path_buf();
        for comp in Path::new(rel).components() {
            if let Component::Normal(c) = comp {
                joined.push(c);
            }
        }
        let mut existing = joined.clone();
        let mut rest = Vec::new();
        while std::fs::symlink_metadata(&existing).is_err() {
            rest.push(existing.file_name().unwrap().to_os_string());
            existing.pop();
        }
        let mut out = existing.canonicalize().unwrap();
        assert!(out.starts_with(root));
        for name in rest.into_iter().rev() {
            out.push(name);
        }
        out
    }

    pub fn read_regular(path: &Path) -> Vec<u8> {
        use std::os::unix::fs::OpenOptionsExt;
        assert!(std::fs::metadata(path).unwrap().is_file());
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
            .open(path)
            .unwrap();
        let meta = file.metadata().unwrap();
        assert!(meta.is_file());
        let mut bytes = Vec::with_capacity(meta.len() as usize);
        file.read_to_end(&mut bytes).unwrap();
        bytes
    }

    pub fn atomic_write(path: &Path, bytes: &[u8], replace: bool) {
        let parent = path.parent().unwrap();
        std::fs::create_dir_all(parent).unwrap();
        let perms = replace
            .then(|| std::fs::metadata(path).ok().map(|m| m.permissions()))
            .flatten();
        let mut tmp = tempfile::Builder::new()
            .prefix(".keel-tmp-")
            .tempfile_in(parent)
            .unwrap();
        tmp.write_all(bytes).unwrap();
        match perms {
            Some(p) => tmp.as_file().set_permissions(p).unwrap(),
            None => {
                use std::os::unix::fs::PermissionsExt;
                tmp.as_file()
                    .set_permissions(std::fs::Permissions::from_mode(0o644))
                    .unwrap()
            }
        }
        tmp.as_file().sync_all().unwrap();
        if replace {
            tmp.persist(path).unwrap();
        } else {
            tmp.persist_noclobber(path).unwrap();
        }
        if let Ok(dir) = std::fs::File::open(parent) {
            let _ = dir.sync_all();
        }
    }
}

/// The three operations through the new layer.
mod new {
    use super::*;

    pub fn read(ws: &Workspace, rel: &str) -> Vec<u8> {
        let t = ws.locate(rel).unwrap();
        let info = t.info().unwrap().unwrap();
        info.check_regular().unwrap();
        t.read().unwrap()
    }

    pub fn edit(ws: &Workspace, rel: &str, make: impl Fn(&[u8]) -> Vec<u8>) {
        let t = ws.locate_writable(rel).unwrap();
        assert!(t.info().unwrap().is_some());
        let before = t.read().unwrap();
        let after = make(&before);
        assert_eq!(t.read().unwrap(), before);
        t.write_atomic(&after, WriteMode::Replace, None).unwrap();
    }

    pub fn create(ws: &Workspace, rel: &str, bytes: &[u8]) {
        let t = ws.locate_writable(rel).unwrap();
        assert!(t.info().unwrap().is_none());
        t.write_atomic(bytes, WriteMode::CreateNew, None).unwrap();
    }
}

mod baseline {
    use super::*;

    pub fn read(root: &Path, rel: &str) -> Vec<u8> {
        let p = old::resolve(root, rel);
        assert!(std::fs::metadata(&p).unwrap().is_file());
        old::read_regular(&p)
    }

    pub fn edit(root: &Path, rel: &str, make: impl Fn(&[u8]) -> Vec<u8>) {
        let p = old::resolve(root, rel);
        assert!(std::fs::metadata(&p).unwrap().is_file());
        let before = old::read_regular(&p);
        let after = make(&before);
        assert_eq!(std::fs::read(&p).unwrap(), before);
        old::atomic_write(&p, &after, true);
    }

    pub fn create(root: &Path, rel: &str, bytes: &[u8]) {
        let p = old::resolve(root, rel);
        assert!(std::fs::symlink_metadata(&p).is_err());
        old::atomic_write(&p, bytes, false);
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn time(f: impl FnOnce()) -> Duration {
    let t = Instant::now();
    f();
    t.elapsed()
}

fn us(d: Duration) -> String {
    format!("{:.1} µs", d.as_secs_f64() * 1e6)
}

/// Flips one byte near the start (`x` ↔ `y`), so every edit changes the file.
fn flip(b: &[u8]) -> Vec<u8> {
    let mut v = b.to_vec();
    v[3] = if v[3] == b'x' { b'y' } else { b'x' };
    v
}

fn content(lines: usize) -> String {
    let mut s = String::from("// x\n");
    for i in 0..lines {
        s.push_str(&format!("fn f{i}(a: u32) -> u32 {{ a + {i} }}\n"));
    }
    s
}

struct Row {
    what: String,
    new: Duration,
    old: Duration,
}

fn io_layer(ws: &Workspace, label: &str, rel: &str, runs: usize, rows: &mut Vec<Row>) {
    let root = ws.root().to_path_buf();
    let size = std::fs::metadata(root.join(rel)).unwrap().len() as usize;
    let bytes = vec![b'a'; size];
    let (mut rn, mut ro, mut en, mut eo, mut cn, mut co) =
        (vec![], vec![], vec![], vec![], vec![], vec![]);
    for i in 0..runs {
        // Alternate which goes first, so neither gains from the other's warm caches.
        let new_first = i % 2 == 0;
        let (a, b) = (
            format!("src/module/sub/new_{i}.rs"),
            format!("src/module/sub/old_{i}.rs"),
        );
        let mut ops: [Box<dyn FnMut()>; 2] = [
            Box::new(|| {
                rn.push(time(|| drop(new::read(ws, rel))));
                en.push(time(|| new::edit(ws, rel, flip)));
                cn.push(time(|| new::create(ws, &a, &bytes)));
            }),
            Box::new(|| {
                ro.push(time(|| drop(baseline::read(&root, rel))));
                eo.push(time(|| baseline::edit(&root, rel, flip)));
                co.push(time(|| baseline::create(&root, &b, &bytes)));
            }),
        ];
        if !new_first {
            ops.reverse();
        }
        for op in ops.iter_mut() {
            op();
        }
        drop(ops);
        std::fs::remove_file(root.join(&a)).unwrap();
        std::fs::remove_file(root.join(&b)).unwrap();
    }
    for (op, n, o) in [("read", rn, ro), ("edit", en, eo), ("create", cn, co)] {
        rows.push(Row {
            what: format!("{op} {label}"),
            new: median(n),
            old: median(o),
        });
    }
}

async fn tool_calls(
    ctx: &ToolContext,
    label: &str,
    rel: &str,
    runs: usize,
) -> Vec<(String, Duration)> {
    let root = ctx.workspace.root().to_path_buf();
    let text = std::fs::read_to_string(root.join(rel)).unwrap();
    let edit = EditFile::default();
    let (mut r, mut e, mut c) = (vec![], vec![], vec![]);
    for i in 0..runs {
        let t = Instant::now();
        ReadFile
            .execute(json!({"path": rel, "start_line": 1, "end_line": 40}), ctx)
            .await
            .unwrap();
        r.push(t.elapsed());
        let (from, to) = if i % 2 == 0 {
            ("// x", "// y")
        } else {
            ("// y", "// x")
        };
        let t = Instant::now();
        edit.execute(
            json!({"path": rel, "edits": [{"search": from, "replace": to}]}),
            ctx,
        )
        .await
        .unwrap();
        e.push(t.elapsed());
        let new = format!("src/module/sub/tool_{i}.rs");
        let t = Instant::now();
        CreateFile
            .execute(json!({"path": new, "content": text}), ctx)
            .await
            .unwrap();
        c.push(t.elapsed());
        std::fs::remove_file(root.join(&new)).unwrap();
    }
    vec![
        (format!("read {label}"), median(r)),
        (format!("edit {label}"), median(e)),
        (format!("create {label}"), median(c)),
    ]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--walk") {
        keel_tools::beneath::force_component_walk(true);
    }
    let base = args
        .iter()
        .position(|a| a == "--dir")
        .and_then(|i| args.get(i + 1))
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let dir = tempfile::tempdir_in(&base).unwrap();
    std::fs::create_dir_all(dir.path().join("src/module/sub")).unwrap();
    std::fs::write(dir.path().join("src/module/sub/small.rs"), content(60)).unwrap();
    std::fs::write(dir.path().join("src/module/sub/large.rs"), content(28_000)).unwrap();
    let ws = Workspace::new(dir.path()).unwrap();
    let ctx = ToolContext::new(ws.clone());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    // Warm up, and let edit_file's read-before-edit check pass.
    for f in ["small", "large"] {
        let rel = format!("src/module/sub/{f}.rs");
        rt.block_on(ReadFile.execute(json!({"path": rel}), &ctx))
            .unwrap();
    }
    let mut rows = Vec::new();
    io_layer(
        &ws,
        "small (2 KB)",
        "src/module/sub/small.rs",
        1500,
        &mut rows,
    );
    io_layer(
        &ws,
        "large (1 MB)",
        "src/module/sub/large.rs",
        150,
        &mut rows,
    );
    let mut calls = rt.block_on(tool_calls(
        &ctx,
        "small (2 KB)",
        "src/module/sub/small.rs",
        600,
    ));
    calls.extend(rt.block_on(tool_calls(
        &ctx,
        "large (1 MB)",
        "src/module/sub/large.rs",
        60,
    )));
    println!(
        "file access ({}; temp dir under {}): medians",
        if keel_tools::beneath::uses_openat2() {
            "openat2"
        } else {
            "component walk"
        },
        base.display()
    );
    println!(
        "{:<20} {:>12} {:>12} {:>7}   {:>12} {:>16}",
        "operation", "I/O new", "I/O old", "ratio", "tool call", "I/O Δ of call"
    );
    for (row, (_, call)) in rows.iter().zip(&calls) {
        let delta = row.new.as_secs_f64() - row.old.as_secs_f64();
        println!(
            "{:<20} {:>12} {:>12} {:>6.2}×   {:>12} {:>15.1}%",
            row.what,
            us(row.new),
            us(row.old),
            row.new.as_secs_f64() / row.old.as_secs_f64(),
            us(*call),
            100.0 * delta / call.as_secs_f64(),
        );
    }
}
