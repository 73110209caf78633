//! Property tests through the real tools: random edits and random patches never panic, and a
//! call that fails never changes a byte on disk.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use keel_tools::builtin::{ApplyPatch, EditFile, ReadFile};
use keel_tools::patch::parse;
use keel_tools::{Tool, ToolContext, Workspace};
use proptest::prelude::*;
use serde_json::json;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn arb_line() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        "[ \t]{0,4}[a-z(){};=]{1,10}",
        "[ \t]{0,8}(fn|def|let|return) [a-z]{1,5}[ (){}:]{0,3}",
    ]
}

fn arb_file() -> impl Strategy<Value = (String, bool, bool)> {
    (
        prop::collection::vec(arb_line(), 0..30),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(lines, crlf, bom)| (lines.join("\n") + "\n", crlf, bom))
}

/// Every file in `dir` with its bytes.
fn snapshot(dir: &std::path::Path) -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .map(|p| {
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                std::fs::read(&p).unwrap(),
            )
        })
        .collect();
    out.sort();
    out
}

fn encode(text: &str, crlf: bool, bom: bool) -> Vec<u8> {
    let body = if crlf {
        text.replace('\n', "\r\n")
    } else {
        text.to_string()
    };
    let mut out = Vec::new();
    if bom {
        out.extend_from_slice("\u{FEFF}".as_bytes());
    }
    out.extend_from_slice(body.as_bytes());
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 120, ..ProptestConfig::default() })]

    #[test]
    fn edit_file_never_writes_on_error(
        (text, crlf, bom) in arb_file(),
        edits in prop::collection::vec(("[ \t\na-z(){};=]{0,30}", "[ \na-z]{0,15}"), 1..4),
    ) {
        let rt = runtime();
        let dir = tempfile::tempdir().unwrap();
        let original = encode(&text, crlf, bom);
        std::fs::write(dir.path().join("f.rs"), &original).unwrap();
        let ctx = ToolContext::new(Workspace::new(dir.path()).unwrap());
        rt.block_on(ReadFile.execute(json!({"path": "f.rs"}), &ctx)).unwrap();
        let edits: Vec<_> = edits.into_iter().map(|(s, r)| json!({"search": s, "replace": r})).collect();
        let result = rt.block_on(EditFile::default().execute(json!({"path": "f.rs", "edits": edits}), &ctx));
        let after = std::fs::read(dir.path().join("f.rs")).unwrap();
        match result {
            Err(_) => prop_assert_eq!(after, original),
            Ok(out) => {
                // Line endings and BOM survive every successful edit.
                let s = String::from_utf8(after).unwrap();
                prop_assert_eq!(s.starts_with('\u{FEFF}'), bom);
                if crlf {
                    prop_assert_eq!(s.matches('\n').count(), s.matches("\r\n").count());
                } else {
                    prop_assert!(!s.contains("\r\n"));
                }
                prop_assert!(out.metadata.is_some());
            }
        }
    }

    /// Searches cut from the file itself (as a model copies them) with random replacements:
    /// a success keeps the BOM and line-ending style; a failure (only ambiguity is possible)
    /// writes nothing.
    #[test]
    fn edits_copied_from_the_file_keep_its_style(
        (text, crlf, bom) in arb_file(),
        at in 0usize..10_000,
        len in 1usize..60,
        replace in "[ \na-z]{0,15}",
    ) {
        prop_assume!(!text.trim().is_empty());
        let start = at % text.len();
        let end = (start + len).min(text.len());
        let search = text[start..end].to_string();
        prop_assume!(!search.trim().is_empty());
        let rt = runtime();
        let dir = tempfile::tempdir().unwrap();
        let original = encode(&text, crlf, bom);
        std::fs::write(dir.path().join("f.py"), &original).unwrap();
        let ctx = ToolContext::new(Workspace::new(dir.path()).unwrap());
        rt.block_on(ReadFile.execute(json!({"path": "f.py"}), &ctx)).unwrap();
        let result = rt.block_on(EditFile::default().execute(
            json!({"path": "f.py", "edits": [{"search": search, "replace": replace}]}),
            &ctx,
        ));
        let after = std::fs::read(dir.path().join("f.py")).unwrap();
        match result {
            Err(e) => {
                prop_assert!(e.to_string().contains("matches") || e.to_string().contains("unchanged"), "{}", e);
                prop_assert_eq!(after, original);
            }
            Ok(_) => {
                let s = String::from_utf8(after).unwrap();
                prop_assert_eq!(s.starts_with('\u{FEFF}'), bom);
                if crlf {
                    prop_assert_eq!(s.matches('\n').count(), s.matches("\r\n").count());
                }
            }
        }
    }

    #[test]
    fn patch_parser_never_panics(text in "([ \t]{0,2}\\*\\*\\* (Begin Patch|End Patch|Add File: a|Update File: a|Delete File: a|Move to: b|End of File)[ \r]?\n|@@ ?[a-z]{0,5}\n|[ +-][a-z \r]{0,8}\n|[a-z]{0,5}\n|\n){0,30}") {
        let _ = parse(&text);
    }

    /// Deletes, adds, updates and moves of a few paths in any order — replacements included:
    /// never a panic; a refused patch changes nothing; an accepted one leaves every added
    /// file with its content.
    #[test]
    fn file_operations_in_any_order(ops in prop::collection::vec((0u8..4, 0usize..3, 0usize..3), 1..6)) {
        let names = ["a.txt", "b.txt", "c.txt"];
        let rt = runtime();
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "alpha\n").unwrap();
        std::fs::write(dir.path().join("b.txt"), "beta\n").unwrap();
        let original = snapshot(dir.path());
        let mut patch = String::from("*** Begin Patch\n");
        let mut added = Vec::new();
        for (i, (op, p, q)) in ops.iter().enumerate() {
            let (p, q) = (names[*p], names[*q]);
            match op {
                0 => patch.push_str(&format!("*** Delete File: {p}\n")),
                1 => {
                    patch.push_str(&format!("*** Add File: {p}\n+new {i}\n"));
                    added.push((p, format!("new {i}\n")));
                }
                2 => patch.push_str(&format!("*** Update File: {p}\n@@\n-alpha\n+ALPHA\n")),
                _ => patch.push_str(&format!("*** Update File: {p}\n*** Move to: {q}\n@@\n-beta\n+BETA\n")),
            }
        }
        patch.push_str("*** End Patch\n");
        let ctx = ToolContext::new(Workspace::new(dir.path()).unwrap());
        match rt.block_on(ApplyPatch.execute(json!({"patch": patch}), &ctx)) {
            Err(_) => prop_assert_eq!(snapshot(dir.path()), original),
            Ok(_) => {
                // A patch touches a file once (a deletion may be followed by what replaces
                // it), so every added file holds what was added.
                for (p, content) in added {
                    let now = std::fs::read_to_string(dir.path().join(p)).ok();
                    prop_assert_eq!(now, Some(content), "{}", p);
                }
            }
        }
    }

    #[test]
    fn apply_patch_never_writes_on_error(
        (text, crlf, bom) in arb_file(),
        body in "([ +-][a-z(){};= ]{0,10}\n|@@\n){1,12}",
    ) {
        let rt = runtime();
        let dir = tempfile::tempdir().unwrap();
        let original = encode(&text, crlf, bom);
        std::fs::write(dir.path().join("a.rs"), &original).unwrap();
        let ctx = ToolContext::new(Workspace::new(dir.path()).unwrap());
        let patch = format!("*** Begin Patch\n*** Update File: a.rs\n{body}*** Add File: new.rs\n+x\n*** End Patch\n");
        let result = rt.block_on(ApplyPatch.execute(json!({"patch": patch}), &ctx));
        let after = std::fs::read(dir.path().join("a.rs")).unwrap();
        if result.is_err() {
            prop_assert_eq!(after, original);
            prop_assert!(!dir.path().join("new.rs").exists());
        } else {
            prop_assert!(dir.path().join("new.rs").exists());
            prop_assert_eq!(String::from_utf8(after).unwrap().starts_with('\u{FEFF}'), bom);
        }
    }
}
