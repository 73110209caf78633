//! `/workflow` in chat: the listing, a validation mistake with its position, and the
//! hypotheses example flow (scripted agents) run in the background with its node lines shown.

use std::sync::Arc;
use std::time::Duration;

use keel_config::Layer;
use keel_engine::runtime::SessionOverrides;
use keel_store::SqliteStore;
use ratatui::Terminal;
use ratatui::backend::TestBackend;

use super::app::App;
use super::composer::Composer;
use super::msg::{Done, Msg};
use super::theme::Theme;
use super::workflow;

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            copy_dir(&p, &to.join(e.file_name()));
        } else {
            std::fs::copy(&p, to.join(e.file_name())).unwrap();
        }
    }
}

fn screen_text(app: &App) -> String {
    let mut term = Terminal::new(TestBackend::new(200, 40)).unwrap();
    term.draw(|f| app.draw(f, 0)).unwrap();
    let buf = term.backend().buffer();
    (0..buf.area.height)
        .map(|y| {
            (0..buf.area.width)
                .map(|x| buf[(x, y)].symbol().to_string())
                .collect::<String>()
                .trim_end()
                .to_string()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workflow_lists_flows_reports_mistakes_and_runs_one_in_the_background() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("ws");
    let examples = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/flows");
    copy_dir(&examples, &root.join(".keel/flows"));

    let list = workflow::list_text(&root);
    assert!(list.contains("hypotheses"), "{list}");
    assert!(list.contains(".keel/flows/hypotheses.yaml"), "{list}");
    assert!(list.contains("/workflow NAME"), "{list}");

    let store = Arc::new(SqliteStore::open(&tmp.path().join("keel.db")).unwrap());
    let config = crate::setup::load_config(&root, Layer::from_overrides(&[])).unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();

    std::fs::write(
        root.join("bad.yaml"),
        "name: bad\nnodes:\n  - id: a\n    type: shel\n    command: ls\n",
    )
    .unwrap();
    let err = workflow::start(
        &root,
        "bad.yaml",
        &config,
        store.clone(),
        SessionOverrides::default(),
        tx.clone(),
    )
    .unwrap_err();
    assert!(
        err.contains("bad.yaml:4:11: unknown node type `shel`"),
        "{err}"
    );

    let running = workflow::start(
        &root,
        "hypotheses",
        &config,
        store,
        SessionOverrides::default(),
        tx,
    )
    .unwrap();
    assert_eq!(running.name, "hypotheses");
    let mut app = App::new(root.clone(), Composer::default(), Theme::plain());
    let done = tokio::time::timeout(Duration::from_secs(120), async {
        loop {
            match rx.recv().await {
                Some(Msg::Flow(e)) => workflow::show_event(&mut app, &e),
                Some(Msg::FlowDone(done)) => break done,
                Some(_) => {}
                None => panic!("the flow's channel closed before it finished"),
            }
        }
    })
    .await
    .expect("the flow finishes within two minutes");
    workflow::show_done(&mut app, &running.name, &done);
    let Done::Ended { run_id, status, .. } = &done else {
        panic!("{done:?}");
    };
    assert_eq!(status, "completed");
    let text = screen_text(&app);
    for line in [
        "▶ explore",
        "✓ explore completed: wrong-constant",
        "✓ verify completed",
    ] {
        assert!(text.contains(line), "{line} missing in\n{text}");
    }
    assert!(
        text.contains(&format!(
            "flow hypotheses: run {run_id} completed · `keel flow status {run_id}`"
        )),
        "{text}"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("answer.txt")).unwrap(),
        "42\n"
    );
}
