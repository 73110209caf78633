//! A file larger than Keel's file tools read whole (red-team pass 7, R7-11): `edit_file`,
//! `insert_lines` and `apply_patch` on a 50 GB sparse file each allocated its size and
//! aborted Keel ("memory allocation of 53687091200 bytes failed") — with a subagent's command
//! in flight, before its post-command check. Each now refuses with a message naming the limit
//! and what to do, and Keel goes on.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use keel_tools::{ToolContext, ToolError, ToolRegistry, Workspace, builtin};
use serde_json::json;

#[test]
fn the_file_tools_refuse_a_file_too_large_to_read_whole() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    // Sparse: 50 GB long, no disk used.
    let big = std::fs::File::create(ws.join("big.txt")).unwrap();
    big.set_len(50 * 1024 * 1024 * 1024).unwrap();
    drop(big);
    let ctx = ToolContext::new(Workspace::new(ws).unwrap());
    let mut tools = ToolRegistry::new();
    builtin::register_defaults(&mut tools);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let calls = [
        (
            "edit_file",
            json!({"path": "big.txt", "edits": [{"search": "aaa", "replace": "bbb"}]}),
        ),
        (
            "insert_lines",
            json!({"path": "big.txt", "after_line": 1, "text": "x"}),
        ),
        (
            "apply_patch",
            json!({"patch": "*** Begin Patch\n*** Update File: big.txt\n@@\n-aaa\n+bbb\n*** End Patch\n"}),
        ),
        (
            "apply_patch",
            json!({"patch": "*** Begin Patch\n*** Delete File: big.txt\n*** End Patch\n"}),
        ),
        ("read_file", json!({"path": "big.txt"})),
    ];
    for (tool, args) in calls {
        let r = rt.block_on(tools.execute(tool, args.clone(), &ctx));
        match &r {
            Err(ToolError::Model(m)) => assert!(m.contains("larger than"), "{tool}: {m}"),
            Ok(out) if tool == "read_file" => {
                assert!(out.content.contains("too large"), "{}", out.content)
            }
            other => panic!("{tool} {args}: {other:?}"),
        }
    }
    assert_eq!(
        std::fs::metadata(ws.join("big.txt")).unwrap().len(),
        50 * 1024 * 1024 * 1024,
        "the file is untouched"
    );
}
