//! PRDs (with versions), tasks with dependencies, and the proof each task run leaves — the
//! records behind `keel prd`, `keel task` and `keel work`.
//!
//! Everything is scoped by workspace (the canonical directory) and numbered per workspace
//! (`#1`, `#2` …) so users can type short ids. Multi-row changes (a generated task list, an
//! edit of dependencies) happen in one transaction: a failure stores nothing.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

#[cfg(feature = "postgres")]
mod postgres;
mod sqlite;
mod store;

pub use store::{WorkStore, WorkStores};

/// Schema migration 5 (after 3: memory, 4: session start columns).
pub(crate) const MIGRATION: &str = r#"
CREATE TABLE prds (
    workspace   TEXT NOT NULL,
    num         INTEGER NOT NULL,
    title       TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    PRIMARY KEY (workspace, num)
);
CREATE TABLE prd_versions (
    workspace   TEXT NOT NULL,
    prd         INTEGER NOT NULL,
    version     INTEGER NOT NULL,
    body        TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    PRIMARY KEY (workspace, prd, version)
);
CREATE TABLE tasks (
    workspace    TEXT NOT NULL,
    num          INTEGER NOT NULL,
    prd          INTEGER,
    title        TEXT NOT NULL,
    description  TEXT NOT NULL,
    criteria     TEXT NOT NULL DEFAULT '[]',
    size         TEXT NOT NULL,
    status       TEXT NOT NULL,
    question     TEXT,
    session_id   TEXT,
    pid          INTEGER,
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL,
    PRIMARY KEY (workspace, num)
);
CREATE TABLE task_deps (
    workspace   TEXT NOT NULL,
    task        INTEGER NOT NULL,
    depends_on  INTEGER NOT NULL,
    PRIMARY KEY (workspace, task, depends_on)
);
CREATE TABLE task_sessions (
    workspace   TEXT NOT NULL,
    task        INTEGER NOT NULL,
    session_id  TEXT NOT NULL,
    started_at  INTEGER NOT NULL,
    PRIMARY KEY (workspace, task, session_id)
);
CREATE TABLE proofs (
    workspace   TEXT NOT NULL,
    task        INTEGER NOT NULL,
    session_id  TEXT NOT NULL,
    body        TEXT NOT NULL,
    created_at  INTEGER NOT NULL
);
CREATE INDEX proofs_task ON proofs(workspace, task, created_at);
"#;

/// Task sizes, smallest first: the only values `size` may take.
pub const TASK_SIZES: &[&str] = &["xs", "s", "m", "l", "xl"];

/// A PRD at its latest version.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PrdRecord {
    pub id: u32,
    pub title: String,
    /// The latest version's number (1 for a new PRD).
    pub version: u32,
    pub body: String,
    /// Unix milliseconds.
    pub created_at: u64,
    /// When the latest version was stored (Unix milliseconds).
    pub updated_at: u64,
}

/// Where a task is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    /// Not started (or answered after a blocker); runs once its dependencies are done.
    Ready,
    /// Its run stopped with a question for a human.
    Blocked,
    InProgress,
    Done,
    Failed,
}

impl TaskStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Ready => "ready",
            TaskStatus::Blocked => "blocked",
            TaskStatus::InProgress => "in_progress",
            TaskStatus::Done => "done",
            TaskStatus::Failed => "failed",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "ready" => TaskStatus::Ready,
            "blocked" => TaskStatus::Blocked,
            "in_progress" => TaskStatus::InProgress,
            "done" => TaskStatus::Done,
            "failed" => TaskStatus::Failed,
            _ => return None,
        })
    }
}

/// A task to store. In [`SqliteStore::add_tasks`], `depends_on` holds existing task ids;
/// `after` holds indices of earlier tasks in the same batch.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NewTask {
    pub title: String,
    pub description: String,
    pub criteria: Vec<String>,
    pub size: String,
    pub depends_on: Vec<u32>,
    #[serde(default)]
    pub after: Vec<usize>,
}

/// A stored task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskRecord {
    pub id: u32,
    pub prd: Option<u32>,
    pub title: String,
    pub description: String,
    pub criteria: Vec<String>,
    pub size: String,
    pub status: TaskStatus,
    /// The open question, when blocked.
    pub question: Option<String>,
    /// The session of the latest run.
    pub session_id: Option<String>,
    /// Every session that worked on the task, oldest first.
    pub sessions: Vec<String>,
    pub depends_on: Vec<u32>,
    /// The process that runs it (while `in_progress`).
    pub pid: Option<u32>,
    pub created_at: u64,
    pub updated_at: u64,
}

impl TaskRecord {
    /// In progress, but the process that ran it is gone (killed, crashed).
    pub fn is_interrupted(&self) -> bool {
        self.status == TaskStatus::InProgress && self.pid.is_some_and(|p| !process_alive(p))
    }

    /// Its dependencies that are not done yet, among the workspace's `tasks`.
    pub fn waiting_for(&self, tasks: &[TaskRecord]) -> Vec<u32> {
        self.depends_on
            .iter()
            .copied()
            .filter(|d| {
                !tasks
                    .iter()
                    .any(|t| t.id == *d && t.status == TaskStatus::Done)
            })
            .collect()
    }

    /// The status to show a person: `waiting` for a ready task whose dependencies are not all
    /// done (it cannot start yet), `interrupted` for one in progress whose process is gone,
    /// else the stored status.
    pub fn shown_status(&self, tasks: &[TaskRecord]) -> &'static str {
        if self.is_interrupted() {
            "interrupted"
        } else if self.status == TaskStatus::Ready && !self.waiting_for(tasks).is_empty() {
            "waiting"
        } else {
            self.status.as_str()
        }
    }
}

/// Whether process `pid` runs on this machine (tasks still record the process that claims
/// them; sessions use run leases).
fn process_alive(pid: u32) -> bool {
    if cfg!(target_os = "linux") {
        std::path::Path::new(&format!("/proc/{pid}")).exists()
    } else {
        true
    }
}

/// Changes to a task's definition; unset fields stay.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TaskEdit {
    pub title: Option<String>,
    pub description: Option<String>,
    pub criteria: Option<Vec<String>>,
    pub size: Option<String>,
    pub depends_on: Option<Vec<u32>>,
    pub status: Option<TaskStatus>,
}

/// A stored proof.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProofRecord {
    pub task: u32,
    pub session_id: String,
    pub body: serde_json::Value,
    pub created_at: u64,
}

/// The first dependency cycle among `edges` (task → its dependencies), as a path that starts
/// and ends with the same task; `None` when there is none.
pub fn find_cycle<K: Ord + Copy>(edges: &BTreeMap<K, Vec<K>>) -> Option<Vec<K>> {
    fn visit<K: Ord + Copy>(
        k: K,
        edges: &BTreeMap<K, Vec<K>>,
        state: &mut BTreeMap<K, u8>,
        path: &mut Vec<K>,
    ) -> Option<Vec<K>> {
        match state.get(&k) {
            Some(2) => return None,
            Some(1) => {
                let start = path.iter().position(|p| *p == k).unwrap_or(0);
                let mut cycle = path[start..].to_vec();
                cycle.push(k);
                return Some(cycle);
            }
            _ => {}
        }
        state.insert(k, 1);
        path.push(k);
        for d in edges.get(&k).map(Vec::as_slice).unwrap_or_default() {
            if let Some(c) = visit(*d, edges, state, path) {
                return Some(c);
            }
        }
        path.pop();
        state.insert(k, 2);
        None
    }
    let mut state = BTreeMap::new();
    for k in edges.keys() {
        let mut path = Vec::new();
        if let Some(c) = visit(*k, edges, &mut state, &mut path) {
            return Some(c);
        }
    }
    None
}
