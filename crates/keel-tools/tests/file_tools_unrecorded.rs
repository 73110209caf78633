//! The file tools do not replace or edit a file no snapshot records — in a directory the
//! repository ignores, or ignored and over 1 MiB — since `keel undo` could not bring it back
//! (red-team pass 10, R10-21: `create_file data/r.csv` overwrote the user's data unasked, where
//! `echo x > data/r.csv` is asked). New files there, and recorded files, are written as ever.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use keel_tools::{PathError, ToolContext, ToolRegistry, Workspace, builtin};
use serde_json::json;

#[test]
fn the_file_tools_do_not_destroy_a_file_no_snapshot_holds() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().canonicalize().unwrap();
    let out = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(&ws)
        .output()
        .unwrap();
    assert!(out.status.success());
    std::fs::write(ws.join(".gitignore"), "data/\n*.bin\n").unwrap();
    std::fs::create_dir_all(ws.join("data")).unwrap();
    std::fs::write(ws.join("data/r.csv"), "precious,data\n1,2\n").unwrap();
    std::fs::write(ws.join("big.bin"), vec![b'x'; 2 * 1024 * 1024]).unwrap();
    std::fs::write(ws.join("small.bin"), "x\n").unwrap();
    std::fs::write(ws.join("app.py"), "print(1)\n").unwrap();

    let w = Workspace::new(&ws).unwrap();
    for rel in ["data/r.csv", "big.bin"] {
        assert!(
            matches!(w.locate_writable(rel), Err(PathError::Unrecorded { .. })),
            "{rel}"
        );
    }
    for rel in ["data/new.csv", "small.bin", "app.py", "new.py"] {
        assert!(w.locate_writable(rel).is_ok(), "{rel}");
    }

    let mut tools = ToolRegistry::new();
    builtin::register_defaults(&mut tools);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let ctx = ToolContext::new(Workspace::new(&ws).unwrap());
    let err = rt
        .block_on(tools.execute(
            "create_file",
            json!({"path": "data/r.csv", "content": "x\n", "overwrite": true}),
            &ctx,
        ))
        .expect_err("the overwrite was done");
    assert!(format!("{err}").contains("keel undo"), "{err}");
    assert_eq!(
        std::fs::read_to_string(ws.join("data/r.csv")).unwrap(),
        "precious,data\n1,2\n"
    );
}
