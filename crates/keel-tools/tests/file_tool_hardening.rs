//! File tools against hostile workspaces: protected paths, FIFOs, sockets and devices, and
//! names crafted to fake output lines.

// Tests start programs of their own (the keel binary, git fixtures, tmux, servers): allowed
// here, outside Keel's one spawn path (docs/SECURITY.md, "One way to start a process").
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use std::time::Duration;

use keel_tools::builtin::{
    ApplyPatch, CreateFile, EditFile, Grep, InsertLines, ListFiles, ReadFile,
};
use keel_tools::{Tool, ToolContext, ToolError, Workspace};
use serde_json::json;

struct F {
    dir: tempfile::TempDir,
    ctx: ToolContext,
}

impl F {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(".git/hooks")).unwrap();
        std::fs::create_dir_all(dir.path().join(".keel")).unwrap();
        std::fs::write(dir.path().join(".git/config"), "[core]\n").unwrap();
        std::fs::write(dir.path().join(".keel/config.toml"), "[shell]\n").unwrap();
        let ctx = ToolContext::new(Workspace::new(dir.path()).unwrap());
        Self { dir, ctx }
    }

    /// The tool's result within 10 s: a hang is a failure, not a stuck test.
    async fn call(&self, tool: &dyn Tool, args: serde_json::Value) -> Result<String, String> {
        match tokio::time::timeout(Duration::from_secs(10), tool.execute(args, &self.ctx)).await {
            Err(_) => panic!("the tool hung"),
            Ok(Ok(out)) => Ok(out.content),
            Ok(Err(ToolError::Model(m))) => Err(m),
            Ok(Err(ToolError::Failed(out))) => Err(out.content),
            Ok(Err(ToolError::Fatal(m))) => panic!("fatal: {m}"),
        }
    }
}

#[tokio::test]
async fn protected_paths_are_read_only_to_every_file_tool() {
    let f = F::new();
    let before_git = std::fs::read(f.dir.path().join(".git/config")).unwrap();
    let before_keel = std::fs::read(f.dir.path().join(".keel/config.toml")).unwrap();
    // Reading is fine (and lets edit_file's read-before-edit check pass).
    assert!(
        f.call(&ReadFile, json!({"path": ".git/config"}))
            .await
            .is_ok()
    );
    assert!(
        f.call(&ReadFile, json!({"path": ".keel/config.toml"}))
            .await
            .is_ok()
    );
    let edit = EditFile::default();
    let attempts: Vec<(&dyn Tool, serde_json::Value)> = vec![
        (
            &CreateFile,
            json!({"path": ".git/hooks/pre-commit", "content": "touch pwned"}),
        ),
        (
            &CreateFile,
            json!({"path": ".keel/new.toml", "content": "x"}),
        ),
        (
            &edit,
            json!({"path": ".git/config", "edits": [{"search": "[core]", "replace": "[core]\n\tfsmonitor = touch pwned"}]}),
        ),
        (
            &edit,
            json!({"path": ".keel/config.toml", "edits": [{"search": "[shell]", "replace": "[shell]\nsandbox = false"}]}),
        ),
        (
            &ApplyPatch,
            json!({"patch": "*** Begin Patch\n*** Update File: .git/config\n@@\n-[core]\n+[core]\n+\tfsmonitor = touch pwned\n*** End Patch"}),
        ),
        (
            &ApplyPatch,
            json!({"patch": "*** Begin Patch\n*** Delete File: .keel/config.toml\n*** End Patch"}),
        ),
        (
            &ApplyPatch,
            json!({"patch": "*** Begin Patch\n*** Add File: .GIT/hooks/post-checkout\n+touch pwned\n*** End Patch"}),
        ),
    ];
    for (tool, args) in attempts {
        let err = f
            .call(tool, args.clone())
            .await
            .expect_err(&format!("{args}"));
        assert!(err.contains("protected"), "{err}");
    }
    assert_eq!(
        std::fs::read(f.dir.path().join(".git/config")).unwrap(),
        before_git
    );
    assert_eq!(
        std::fs::read(f.dir.path().join(".keel/config.toml")).unwrap(),
        before_keel
    );
    assert!(!f.dir.path().join(".git/hooks/pre-commit").exists());
    assert!(!f.dir.path().join(".keel/new.toml").exists());
    assert!(
        !f.dir.path().join(".GIT").exists()
            && !f.dir.path().join(".git/hooks/post-checkout").exists()
    );
}

#[tokio::test]
async fn fifos_sockets_and_devices_are_refused_without_hanging() {
    let f = F::new();
    let fifo = f.dir.path().join("pipe");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let _sock = std::os::unix::net::UnixListener::bind(f.dir.path().join("sock")).unwrap();
    // A device node inside the workspace needs root (CI); elsewhere only the other two.
    let dev = std::process::Command::new("mknod")
        .arg(f.dir.path().join("zero"))
        .args(["c", "1", "5"])
        .status()
        .is_ok_and(|s| s.success());
    let mut cases = vec![("pipe", "FIFO"), ("sock", "socket")];
    if dev {
        cases.push(("zero", "device"));
    }
    for &(path, kind) in &cases {
        let err = f.call(&ReadFile, json!({"path": path})).await.unwrap_err();
        assert!(err.contains(kind), "{path}: {err}");
    }
    let err = f
        .call(
            &EditFile::default(),
            json!({"path": "pipe", "edits": [{"search": "a", "replace": "b"}]}),
        )
        .await
        .unwrap_err();
    assert!(err.contains("FIFO") || err.contains("read"), "{err}");
    // Replacing one on purpose is refused too: create_file's overwrite, a patch's Delete + Add.
    for (path, _) in &cases {
        let err = f
            .call(
                &CreateFile,
                json!({"path": path, "content": "x", "overwrite": true}),
            )
            .await
            .unwrap_err();
        assert!(
            err.contains("cannot read") || err.contains("not"),
            "{path}: {err}"
        );
        let patch = format!(
            "*** Begin Patch\n*** Delete File: {path}\n*** Add File: {path}\n+x\n*** End Patch\n"
        );
        let err = f
            .call(&ApplyPatch, json!({"patch": patch}))
            .await
            .unwrap_err();
        assert!(err.contains("not a regular file"), "{path}: {err}");
    }
    use std::os::unix::fs::FileTypeExt;
    assert!(
        std::fs::symlink_metadata(&fifo)
            .unwrap()
            .file_type()
            .is_fifo()
    );
}

#[tokio::test]
async fn names_with_control_characters_are_escaped_in_listings_and_results() {
    let f = F::new();
    std::fs::write(f.dir.path().join("a\nb.txt  (1 B)\nfake.rs"), "needle\n").unwrap();
    std::fs::write(f.dir.path().join("c\x1b[2Jd.txt"), "needle\n").unwrap();
    let listing = f.call(&ListFiles, json!({})).await.unwrap();
    assert!(listing.contains("a\\nb.txt  (1 B)\\nfake.rs"), "{listing}");
    assert!(listing.contains("c\\x1b[2Jd.txt"), "{listing}");
    assert!(
        !listing.contains('\x1b') && !listing.lines().any(|l| l.starts_with("fake.rs")),
        "{listing}"
    );
    let grep = Grep::default();
    let hits = f.call(&grep, json!({"pattern": "needle"})).await.unwrap();
    assert!(!hits.contains('\x1b'), "{hits}");
    assert!(
        !hits
            .lines()
            .any(|l| l.starts_with("b.txt") || l.starts_with("fake.rs")),
        "{hits}"
    );
}

/// A weak model once called `create_file` with `src/**/*.rs` and got a directory named `**`:
/// a path with glob characters is refused by every writing tool (nothing is created), unless a
/// file by that exact name exists.
#[tokio::test]
async fn glob_patterns_are_refused_as_file_names_by_the_writing_tools() {
    let f = F::new();
    let edit = EditFile::default();
    let attempts: Vec<(&dyn Tool, serde_json::Value)> = vec![
        (
            &CreateFile,
            json!({"path": "src/**/*.rs", "content": "fn main() {}\n"}),
        ),
        (&CreateFile, json!({"path": "notes?.md", "content": "x\n"})),
        (
            &edit,
            json!({"path": "src/{a,b}.rs", "edits": [{"search": "a", "replace": "b"}]}),
        ),
        (
            &ApplyPatch,
            json!({"patch": "*** Begin Patch\n*** Add File: lib/[a-z].py\n+x = 1\n*** End Patch\n"}),
        ),
    ];
    for (tool, args) in attempts {
        let err = f
            .call(tool, args.clone())
            .await
            .expect_err(&format!("{} {args} must be refused", tool.name()));
        assert!(err.contains("glob pattern"), "{}: {err}", tool.name());
    }
    assert!(
        !f.dir.path().join("src").exists(),
        "no `src/**` was created"
    );
    assert!(!f.dir.path().join("lib").exists());
    // A file really named so can be edited; a web-route name is a name.
    std::fs::write(f.dir.path().join("a[1-2].txt"), "one\n").unwrap();
    f.call(&ReadFile, json!({"path": "a[1-2].txt"}))
        .await
        .unwrap();
    f.call(
        &edit,
        json!({"path": "a[1-2].txt", "edits": [{"search": "one", "replace": "two"}]}),
    )
    .await
    .unwrap();
    assert_eq!(
        std::fs::read_to_string(f.dir.path().join("a[1-2].txt")).unwrap(),
        "two\n"
    );
    f.call(
        &CreateFile,
        json!({"path": "app/[id]/page.tsx", "content": "export default 1;\n"}),
    )
    .await
    .unwrap();
    assert!(f.dir.path().join("app/[id]/page.tsx").is_file());
}

/// A weak model's path with a newline, a tab or an escape sequence in it (`notes\n.md`, a
/// copied `\x1b[31m`) is refused by every path-taking file tool with the reason, shown
/// escaped: nothing is created, and reading says why instead of "not found". A file really
/// named so (it came from elsewhere) can still be read and edited.
#[tokio::test]
async fn control_characters_in_paths_are_refused_with_the_reason() {
    let f = F::new();
    std::fs::write(f.dir.path().join("calc.py"), "x = 1\n").unwrap();
    let edit = EditFile::default();
    let attempts: Vec<(&dyn Tool, serde_json::Value, &str)> = vec![
        (
            &CreateFile,
            json!({"path": "notes\n.md", "content": "x\n"}),
            "U+000A",
        ),
        (
            &CreateFile,
            json!({"path": "src/\u{1b}[31mred.rs", "content": "x\n"}),
            "U+001B",
        ),
        (
            &CreateFile,
            json!({"path": "a\tb.txt", "content": "x\n"}),
            "U+0009",
        ),
        (
            &CreateFile,
            json!({"path": "dir\r/x.txt", "content": "x\n"}),
            "U+000D",
        ),
        (
            &edit,
            json!({"path": "calc.py\n", "edits": [{"search": "x", "replace": "y"}]}),
            "U+000A",
        ),
        (
            &InsertLines,
            json!({"path": "calc.py\u{7f}", "after_line": 1, "text": "y = 2"}),
            "U+007F",
        ),
        (
            &ApplyPatch,
            json!({"patch": "*** Begin Patch\n*** Add File: lib/x\u{7}.py\n+x = 1\n*** End Patch\n"}),
            "U+0007",
        ),
        (&ReadFile, json!({"path": "calc.py\u{85}"}), "U+0085"),
        // Through a file as if it were a directory: the reason, not "cannot inspect" + the
        // raw name (a SmolLM2 path with a paragraph of prose in it).
        (
            &ReadFile,
            json!({"path": "calc.py/x\n```\n\nI was asked to make the steps readable"}),
            "U+000A",
        ),
        (&ListFiles, json!({"path": "src\u{1b}"}), "U+001B"),
    ];
    for (tool, args, code) in attempts {
        let err = f
            .call(tool, args.clone())
            .await
            .expect_err(&format!("{} {args} must be refused", tool.name()));
        assert!(
            err.contains("control character") && err.contains(code),
            "{}: {err}",
            tool.name()
        );
        assert!(
            !err.chars().any(|c| c.is_control() && c != '\n'),
            "the refusal shows the path escaped: {err:?}"
        );
        // The path cannot fake lines: the reason is on the first one.
        assert!(
            err.lines().next().unwrap().contains("control character"),
            "{err:?}"
        );
    }
    let mut names: Vec<String> = std::fs::read_dir(f.dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, [".git", ".keel", "calc.py"], "nothing was created");
    assert_eq!(
        std::fs::read_to_string(f.dir.path().join("calc.py")).unwrap(),
        "x = 1\n"
    );
    // A file really named so can be read and edited.
    std::fs::write(f.dir.path().join("odd\nname.txt"), "one\n").unwrap();
    f.call(&ReadFile, json!({"path": "odd\nname.txt"}))
        .await
        .unwrap();
    f.call(
        &edit,
        json!({"path": "odd\nname.txt", "edits": [{"search": "one", "replace": "two"}]}),
    )
    .await
    .unwrap();
    assert_eq!(
        std::fs::read_to_string(f.dir.path().join("odd\nname.txt")).unwrap(),
        "two\n"
    );
}

/// SmolLM2 on a real server sent `create_file {"path": "{file_path}"}` and got a file named
/// `{file_path}`: an unfilled template placeholder is refused by the writing tools (nothing is
/// created), unless a file by that exact name exists; cookiecutter's double braces are names.
#[tokio::test]
async fn template_placeholders_are_refused_as_file_names() {
    let f = F::new();
    for path in [
        "{file_path}",
        "src/{module_name}.py",
        "{filename}",
        "<path>",
        "docs/<file name>.md",
    ] {
        let err = f
            .call(&CreateFile, json!({"path": path, "content": "x\n"}))
            .await
            .expect_err(path);
        assert!(err.contains("template placeholder"), "{path}: {err}");
    }
    let names: Vec<String> = std::fs::read_dir(f.dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 2, "nothing was created: {names:?}");
    // Short brace names are names (`{x}.txt`, a route's `{id}`); a brace set is still a
    // glob; double braces are a template directory's real name.
    f.call(
        &CreateFile,
        json!({"path": "api/{id}/index.js", "content": "x\n"}),
    )
    .await
    .unwrap();
    let err = f
        .call(&CreateFile, json!({"path": "{a,b}.rs", "content": "x\n"}))
        .await
        .unwrap_err();
    assert!(err.contains("glob pattern"), "{err}");
    f.call(
        &CreateFile,
        json!({"path": "{{cookiecutter.project_slug}}/setup.py", "content": "x = 1\n"}),
    )
    .await
    .unwrap();
    // A file really named so can be edited.
    std::fs::write(f.dir.path().join("{id}.txt"), "one\n").unwrap();
    f.call(&ReadFile, json!({"path": "{id}.txt"}))
        .await
        .unwrap();
    f.call(
        &EditFile::default(),
        json!({"path": "{id}.txt", "edits": [{"search": "one", "replace": "two"}]}),
    )
    .await
    .unwrap();
    assert_eq!(
        std::fs::read_to_string(f.dir.path().join("{id}.txt")).unwrap(),
        "two\n"
    );
}

#[tokio::test]
async fn a_fifo_or_dev_zero_ignore_file_does_not_hang_listings_or_grep() {
    let f = F::new();
    std::fs::create_dir_all(f.dir.path().join("web")).unwrap();
    rustix::fs::mknodat(
        rustix::fs::CWD,
        f.dir.path().join(".gitignore").as_path(),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    std::os::unix::fs::symlink("/dev/zero", f.dir.path().join("web/.gitignore")).unwrap();
    std::fs::write(f.dir.path().join("web/.ignore"), "skipped.txt\n").unwrap();
    std::fs::write(f.dir.path().join("web/a.txt"), "needle\n").unwrap();
    std::fs::write(f.dir.path().join("web/skipped.txt"), "needle\n").unwrap();
    // `call` fails the test if a tool takes more than 10 s.
    let listing = f.call(&ListFiles, json!({})).await.unwrap();
    assert!(listing.contains("web/a.txt"), "{listing}");
    assert!(
        !listing.contains("skipped.txt"),
        "regular ignore files still apply: {listing}"
    );
    let hits = f
        .call(&Grep::default(), json!({"pattern": "needle"}))
        .await
        .unwrap();
    assert!(
        hits.contains("web/a.txt") && !hits.contains("skipped"),
        "{hits}"
    );
}
