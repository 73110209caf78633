//! Project files a hostile repository ships, through a real session (issue 29, "project files
//! are read without care"): instruction files linked to a secret outside the workspace never
//! reach the model; files linked to `/dev/zero` are refused at once instead of read without
//! end; FIFOs in place of `AGENTS.md`, `.keel/config.toml` or `.keel/constitution.json` never
//! hang Keel. Each refusal names the file and what to do.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::symlink;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use keel_engine::{Config, Engine, EngineBuilder, RunOptions};
use keel_llm::ChatRequest;
use keel_llm::scripted::ScriptedProvider;
use keel_store::SqliteStore;

const SECRET: &str = "SECRET-KEY-MATERIAL-4711";
/// A hang (or an endless read) fails the test instead of blocking it.
const LIMIT: Duration = Duration::from_secs(10);

/// Runs `f` on its own thread; panics if it takes longer than [`LIMIT`].
fn within<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(LIMIT).unwrap_or_else(|_| {
        panic!("{what} did not finish within {LIMIT:?} (hung on a project file?)")
    })
}

fn mkfifo(path: &Path) {
    rustix::fs::mknodat(
        rustix::fs::CWD,
        path,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
}

fn engine(dir: &Path, provider: &ScriptedProvider) -> Result<Engine, String> {
    let mut config = Config::default();
    config.verify.enabled = false;
    config.index.enabled = false;
    EngineBuilder::new(config, dir)
        .provider(Arc::new(provider.clone()))
        .store(Arc::new(SqliteStore::open_in_memory().unwrap()))
        .build()
        .map_err(|e| e.to_string())
}

const READ_UNDER_WEB: &str = "turns:\n  - tool_calls:\n      - name: read_file\n        arguments: {path: web/src/a.ts}\n  - text: done\n";

/// Builds an engine for `dir` and runs a session that reads `web/src/a.ts`: every request
/// the model got, and the engine's notes about files left out.
fn session(dir: &Path) -> (Vec<ChatRequest>, Vec<String>) {
    let dir = dir.to_path_buf();
    within("a session", move || {
        let provider = ScriptedProvider::from_yaml(READ_UNDER_WEB).unwrap();
        let engine = engine(&dir, &provider).unwrap();
        let notes = engine.project_notes().to_vec();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(engine.run("work on web", RunOptions::default()))
            .unwrap();
        (provider.requests(), notes)
    })
}

fn everything_sent(requests: &[ChatRequest]) -> String {
    requests
        .iter()
        .map(|r| {
            format!(
                "{}\n{}",
                r.system,
                serde_json::to_string(&r.messages).unwrap()
            )
        })
        .collect()
}

fn workspace_with_web() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("web/src")).unwrap();
    std::fs::create_dir_all(dir.path().join(".keel/rules")).unwrap();
    std::fs::write(dir.path().join("web/src/a.ts"), "export const a = 1;\n").unwrap();
    dir
}

#[test]
fn instruction_files_linked_to_a_secret_outside_never_reach_the_model() {
    let outside = tempfile::tempdir().unwrap();
    let key = outside.path().join("id_ed25519");
    std::fs::write(
        &key,
        format!("-----BEGIN OPENSSH PRIVATE KEY-----\n{SECRET}\n"),
    )
    .unwrap();
    let dir = workspace_with_web();
    for rel in [
        "AGENTS.md",
        "CLAUDE.md",
        "web/AGENTS.md",
        ".keel/rules/style.md",
    ] {
        symlink(&key, dir.path().join(rel)).unwrap();
    }
    // A link inside the workspace is still fine.
    std::fs::write(dir.path().join("docs.md"), "INSIDE-RULE: be brief.\n").unwrap();
    symlink("../../docs.md", dir.path().join(".keel/rules/inside.md")).unwrap();

    let (requests, notes) = session(dir.path());
    assert_eq!(requests.len(), 2);
    let sent = everything_sent(&requests);
    assert!(!sent.contains(SECRET), "the secret reached the model");
    assert!(
        requests[0].system.contains("INSIDE-RULE"),
        "links inside are followed"
    );
    for name in ["AGENTS.md", "CLAUDE.md", ".keel/rules/style.md"] {
        assert!(
            notes.iter().any(|n| n.starts_with(&format!(
                "`{name}` is a symlink leading outside the workspace"
            )) && n.contains("replace the link with the file itself")),
            "{name}: {notes:?}"
        );
    }
}

#[test]
fn files_linked_to_dev_zero_are_refused_at_once() {
    let dir = workspace_with_web();
    for rel in [
        "CLAUDE.md",
        "web/AGENTS.md",
        ".mcp.json",
        ".keel/rules/zero.md",
    ] {
        symlink("/dev/zero", dir.path().join(rel)).unwrap();
    }
    // As root (CI), a device node inside the workspace too.
    let device = rustix::fs::mknodat(
        rustix::fs::CWD,
        dir.path().join("AGENTS.md").as_path(),
        rustix::fs::FileType::CharacterDevice,
        rustix::fs::Mode::from_raw_mode(0o666),
        rustix::fs::makedev(1, 5),
    )
    .is_ok();
    let started = Instant::now();
    let (requests, notes) = session(dir.path());
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
    assert_eq!(requests.len(), 2);
    let sent = everything_sent(&requests);
    assert!(!sent.contains('\0'), "zeros reached the model");
    assert!(
        notes
            .iter()
            .any(|n| n.starts_with("`CLAUDE.md`") && n.contains("(to `/dev/zero`)")),
        "{notes:?}"
    );
    if device {
        assert!(
            notes
                .iter()
                .any(|n| n.starts_with("`AGENTS.md` is a device, not a regular file")),
            "{notes:?}"
        );
    }
    let mcp = keel_mcp::config::read_project_mcp_json(dir.path()).unwrap_err();
    assert!(
        mcp.contains(".mcp.json not read") && mcp.contains("/dev/zero"),
        "{mcp}"
    );
}

#[test]
fn a_fifo_in_place_of_agents_md_is_skipped_with_a_note() {
    let dir = workspace_with_web();
    mkfifo(&dir.path().join("AGENTS.md"));
    mkfifo(&dir.path().join("web/AGENTS.md"));
    std::fs::write(dir.path().join("CLAUDE.md"), "CLAUDE-RULE: test first.\n").unwrap();
    let (requests, notes) = session(dir.path());
    assert!(requests[0].system.contains("CLAUDE-RULE"));
    assert!(
        notes.iter().any(|n| n
            == "`AGENTS.md` is a FIFO (named pipe), not a regular file; Keel reads project files \
                only when they are regular files — replace it with one, or remove it"),
        "{notes:?}"
    );
}

#[test]
fn a_fifo_in_place_of_the_project_config_or_constitution_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(".keel")).unwrap();
    mkfifo(&dir.path().join(".keel/config.toml"));
    let ws = dir.path().to_path_buf();
    let err = within("loading the config", move || {
        Config::load(
            None,
            &ws,
            Vec::new(),
            keel_config::Layer::from_overrides(&[]),
        )
        .map(|_| ())
        .unwrap_err()
        .to_string()
    });
    assert!(
        err.contains(".keel/config.toml") && err.contains("is a FIFO (named pipe)"),
        "{err}"
    );

    std::fs::remove_file(dir.path().join(".keel/config.toml")).unwrap();
    mkfifo(&dir.path().join(".keel/constitution.json"));
    let ws = dir.path().to_path_buf();
    let err = within("starting an engine", move || {
        let provider = ScriptedProvider::from_yaml("turns:\n  - text: done\n").unwrap();
        engine(&ws, &provider).map(|_| ()).unwrap_err()
    });
    assert!(
        err.contains(".keel/constitution.json") && err.contains("is a FIFO (named pipe)"),
        "{err}"
    );
}
