//! A scripted session that reads symbols and edits a Python and a Rust file through the
//! tolerant matching chain: the diffs and match levels must show in the `tool_result` events,
//! and the files must end up exactly as intended.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use keel_engine::{CollectingSink, Config, EngineBuilder, RunOptions};
use keel_llm::scripted::ScriptedProvider;
use keel_protocol::{EventKind, SessionStatus};
use keel_store::SqliteStore;

const INVENTORY_PY: &str = r#"class Inventory:
    """Counts items."""

    def __init__(self):
        self.items = {}

    def add(self, name, count=1):
        """Add `count` of `name`."""
        self.items[name] = self.items.get(name, 0) + count
        return self.items[name]
"#;

const STACK_RS: &str = r#"pub struct Stack {
    items: Vec<i32>,
}

impl Stack {
    /// Pushes a value and returns the new length.
    pub fn push(&mut self, value: i32) -> usize {
        self.items.push(value);
        self.items.len()
    }
}
"#;

/// The model's edits are imperfect on purpose: the Python search lost the class indentation,
/// the Rust search misremembers the doc comment and a line.
const SCRIPT: &str = r##"
turns:
  - text: "Let me look at both methods."
    tool_calls:
      - name: read_file
        arguments: {path: "inventory.py", symbol: "Inventory.add"}
      - name: read_file
        arguments: {path: "src/stack.rs", symbol: "Stack::push"}
  - tool_calls:
      - name: edit_file
        arguments:
          path: "inventory.py"
          edits:
            - search: |
                def add(self, name, count=1):
                    """Add `count` of `name`."""
                    self.items[name] = self.items.get(name, 0) + count
              replace: |
                def add(self, name, count=1):
                    """Add `count` of `name`."""
                    if count < 0:
                        raise ValueError("count must be positive")
                    self.items[name] = self.items.get(name, 0) + count
      - name: edit_file
        arguments:
          path: "src/stack.rs"
          edits:
            - search: |
                    /// Pushes a value, returns the length.
                    pub fn push(&mut self, value: i32) -> usize {
                        self.items.push(value);
                        self.items.len()
                    }
              replace: |
                    /// Pushes a value, returns the length.
                    pub fn push(&mut self, value: i32) -> usize {
                        self.items.push(value);
                        log::trace!("pushed {value}");
                        self.items.len()
                    }
  - text: "Both files are edited."
"##;

#[tokio::test]
async fn fuzzy_chain_edits_show_their_diffs_in_the_event_stream() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("src")).unwrap();
    std::fs::write(dir.path().join("inventory.py"), INVENTORY_PY).unwrap();
    std::fs::write(dir.path().join("src/stack.rs"), STACK_RS).unwrap();
    let provider = ScriptedProvider::from_yaml(SCRIPT).unwrap();
    let sink = CollectingSink::new();
    let engine = EngineBuilder::new(Config::default(), dir.path())
        .provider(Arc::new(provider))
        .store(Arc::new(SqliteStore::open_in_memory().unwrap()))
        .build()
        .unwrap();
    let mut options = RunOptions::default();
    options.sinks.push(sink.clone());
    let out = engine
        .run("harden the inventory and trace pushes", options)
        .await
        .unwrap();
    assert_eq!(out.status, SessionStatus::Completed, "{:?}", out.error);

    let results: Vec<(
        String,
        bool,
        String,
        serde_json::Value,
        keel_protocol::ToolDetails,
    )> = sink
        .events()
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::ToolResult {
                name,
                is_error,
                content,
                details,
                metadata,
                ..
            } => Some((
                name,
                is_error,
                content,
                metadata.unwrap_or_default(),
                details,
            )),
            _ => None,
        })
        .collect();
    assert_eq!(results.len(), 4, "{results:#?}");
    assert!(results.iter().all(|r| !r.1), "{results:#?}");

    // The symbol reads returned just the methods.
    assert!(
        results[0]
            .2
            .starts_with("`inventory.py`: method `Inventory.add` (lines 7-10)"),
        "{}",
        results[0].2
    );
    assert!(!results[0].2.contains("__init__"));
    assert!(
        results[1]
            .2
            .starts_with("`src/stack.rs`: method `Stack::push` (lines 6-10)"),
        "{}",
        results[1].2
    );

    // Python: found by ignoring indentation, re-indented into the class.
    let (_, _, content, meta, details) = &results[2];
    assert_eq!(meta["match_level"], "indentation-agnostic");
    assert_eq!(details.files, vec!["inventory.py".to_string()]);
    let diff = details.diff.as_deref().unwrap();
    assert!(
        diff.contains(
            "+        if count < 0:\n+            raise ValueError(\"count must be positive\")\n"
        ),
        "{diff}"
    );
    assert!(
        content.contains(diff.lines().next().unwrap()),
        "the diff is shown to the model too"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("inventory.py")).unwrap(),
        INVENTORY_PY.replace(
            "        self.items[name] = self.items.get(name, 0) + count\n",
            "        if count < 0:\n            raise ValueError(\"count must be positive\")\n        self.items[name] = self.items.get(name, 0) + count\n",
        )
    );

    // Rust: found fuzzily; the misremembered doc comment stays as the file had it.
    let (_, _, content, meta, details) = &results[3];
    assert_eq!(meta["match_level"], "fuzzy");
    assert!(content.contains("similarity 0."), "{content}");
    let diff = details.diff.as_deref().unwrap();
    assert!(
        diff.contains("+        log::trace!(\"pushed {value}\");"),
        "{diff}"
    );
    assert!(
        !diff.contains("-    /// Pushes a value and returns the new length."),
        "{diff}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("src/stack.rs")).unwrap(),
        STACK_RS.replace(
            "        self.items.push(value);\n",
            "        self.items.push(value);\n        log::trace!(\"pushed {value}\");\n",
        )
    );
}
