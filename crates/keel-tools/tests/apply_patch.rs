//! `apply_patch` against fixture directories: `input/` is copied to a temp workspace, `patch`
//! is applied, and the workspace must then equal `expected/` — or, when the case has an
//! `error` file, the call must fail with that text and leave `input/` byte-for-byte intact.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use keel_tools::builtin::ApplyPatch;
use keel_tools::{Tool, ToolContext, ToolError, Workspace};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/patches")
}

/// Every file under `dir` by relative path, with its bytes.
fn tree(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    if !dir.exists() {
        return out;
    }
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let p = entry.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p
                    .strip_prefix(dir)
                    .unwrap()
                    .to_string_lossy()
                    .replace('\\', "/");
                out.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

fn copy_tree(from: &Path, to: &Path) {
    for (rel, bytes) in tree(from) {
        let p = to.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, bytes).unwrap();
    }
}

fn show(t: &BTreeMap<String, Vec<u8>>) -> String {
    t.iter()
        .map(|(k, v)| format!("== {k}\n{}", String::from_utf8_lossy(v)))
        .collect()
}

async fn run_case(case: &Path) -> Result<(), String> {
    let work = tempfile::tempdir().unwrap();
    copy_tree(&case.join("input"), work.path());
    let before = tree(work.path());
    let ctx = ToolContext::new(Workspace::new(work.path()).unwrap());
    let patch = std::fs::read_to_string(case.join("patch")).unwrap();
    let result = ApplyPatch
        .execute(serde_json::json!({ "patch": patch }), &ctx)
        .await;
    let after = tree(work.path());
    let name = case.file_name().unwrap().to_string_lossy().into_owned();
    match std::fs::read_to_string(case.join("error")) {
        Ok(expected_error) => {
            let expected_error = expected_error.trim();
            match result {
                Err(ToolError::Model(msg)) => {
                    if !msg.contains(expected_error) {
                        return Err(format!(
                            "{name}: error\n{msg}\ndoes not contain\n{expected_error}"
                        ));
                    }
                    if !msg.contains("No file was changed") {
                        return Err(format!("{name}: the error must say nothing changed: {msg}"));
                    }
                }
                other => return Err(format!("{name}: expected an error, got {other:?}")),
            }
            if after != before {
                return Err(format!(
                    "{name}: a failed patch changed the workspace:\n{}",
                    show(&after)
                ));
            }
        }
        Err(_) => {
            let out = result.map_err(|e| format!("{name}: {e}"))?;
            let expected = tree(&case.join("expected"));
            if after != expected {
                return Err(format!(
                    "{name}: workspace differs from expected/\n--- got\n{}\n--- expected\n{}",
                    show(&after),
                    show(&expected)
                ));
            }
            let details = &out.details;
            if details.files.is_empty() || details.diff.as_deref().unwrap_or("").is_empty() {
                return Err(format!(
                    "{name}: the result lacks files or diff: {details:?}"
                ));
            }
        }
    }
    Ok(())
}

#[tokio::test]
async fn fixture_directories() {
    let mut cases: Vec<PathBuf> = std::fs::read_dir(fixtures())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    cases.sort();
    assert!(cases.len() >= 10, "fixture cases found: {cases:?}");
    let failures: Vec<String> = {
        let mut f = Vec::new();
        for case in &cases {
            if let Err(e) = run_case(case).await {
                f.push(e);
            }
        }
        f
    };
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[cfg(unix)]
#[tokio::test]
async fn a_moved_file_keeps_its_mode() {
    use std::os::unix::fs::PermissionsExt;
    let work = tempfile::tempdir().unwrap();
    std::fs::write(work.path().join("run.sh"), "#!/bin/sh\necho 1\n").unwrap();
    std::fs::set_permissions(
        work.path().join("run.sh"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    let ctx = ToolContext::new(Workspace::new(work.path()).unwrap());
    let patch = "*** Begin Patch\n*** Update File: run.sh\n*** Move to: bin/run.sh\n@@\n-echo 1\n+echo 2\n*** End Patch\n";
    let out = ApplyPatch
        .execute(serde_json::json!({ "patch": patch }), &ctx)
        .await
        .unwrap();
    assert!(
        out.content.contains("R run.sh -> bin/run.sh"),
        "{}",
        out.content
    );
    let mode = std::fs::metadata(work.path().join("bin/run.sh"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o755);
    assert!(!work.path().join("run.sh").exists());
}

#[tokio::test]
async fn a_stale_file_is_refused() {
    let work = tempfile::tempdir().unwrap();
    std::fs::write(work.path().join("a.txt"), "one\n").unwrap();
    let ctx = ToolContext::new(Workspace::new(work.path()).unwrap());
    ctx.reads
        .record(&work.path().canonicalize().unwrap().join("a.txt"), b"one\n");
    std::fs::write(work.path().join("a.txt"), "one\ntwo\n").unwrap();
    let patch = "*** Begin Patch\n*** Update File: a.txt\n@@\n-one\n+ONE\n*** End Patch\n";
    let err = ApplyPatch
        .execute(serde_json::json!({ "patch": patch }), &ctx)
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("changed on disk since you read it"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(work.path().join("a.txt")).unwrap(),
        "one\ntwo\n"
    );
}
