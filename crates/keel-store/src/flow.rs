//! Tables behind `keel flow`: one row per flow run (its definition, inputs, state checkpoint
//! and trace) and the checkpoints taken after every node. The rows are written and read by
//! `keel-flow` through [`crate::SqliteDb::with_connection`]; this module only owns the schema.

/// Schema migration 7: flow runs and their per-node checkpoints.
pub(crate) const MIGRATION: &str = r#"
CREATE TABLE flow_runs (
    id          TEXT PRIMARY KEY,
    workspace   TEXT NOT NULL,
    flow_name   TEXT NOT NULL,
    flow_file   TEXT NOT NULL,
    flow_source TEXT NOT NULL,
    inputs      TEXT NOT NULL DEFAULT '{}',
    status      TEXT NOT NULL,
    state       TEXT NOT NULL DEFAULT '{}',
    trace       TEXT NOT NULL DEFAULT '{}',
    pid         INTEGER,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
);
CREATE INDEX flow_runs_created ON flow_runs(created_at DESC);
CREATE TABLE flow_checkpoints (
    run_id      TEXT NOT NULL REFERENCES flow_runs(id) ON DELETE CASCADE,
    seq         INTEGER NOT NULL,
    node        TEXT NOT NULL,
    node_state  TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    PRIMARY KEY (run_id, seq)
);
"#;
