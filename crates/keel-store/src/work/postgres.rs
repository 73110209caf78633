//! The PostgreSQL side of PRDs, tasks and proofs: async methods on [`PgStore`], the same
//! rules as the SQLite side (`sqlite.rs`). Multi-row writes run in one transaction that first
//! takes a transaction-scoped advisory lock on the workspace, so two processes numbering PRDs
//! or tasks of one workspace at once queue instead of colliding.

use std::collections::{BTreeMap, BTreeSet};

use sqlx::postgres::PgRow;
use sqlx::{PgConnection, Postgres, Row, Transaction};

use super::{
    NewTask, PrdRecord, ProofRecord, TASK_SIZES, TaskEdit, TaskRecord, TaskStatus, find_cycle,
};
use crate::postgres::db_err;
use crate::{PgStore, StoreError, now_ms};

fn missing(what: &str) -> StoreError {
    StoreError::Missing(what.to_string())
}

fn conflict(msg: String) -> StoreError {
    StoreError::Conflict(msg)
}

fn task_missing(id: u32) -> StoreError {
    missing(&format!(
        "no task #{id} in this workspace; `keel task list` lists them"
    ))
}

fn check_size(size: &str) -> Result<(), StoreError> {
    if TASK_SIZES.contains(&size) {
        Ok(())
    } else {
        Err(conflict(format!(
            "task size `{size}` is not one of {}",
            TASK_SIZES.join(", ")
        )))
    }
}

/// A stored number as `u32` (a value out of range is corrupt data, not a panic).
fn num(v: i64, what: &str) -> Result<u32, StoreError> {
    u32::try_from(v).map_err(|_| StoreError::Corrupt {
        context: what.to_string(),
        reason: format!("{v} is out of range"),
    })
}

fn ms(v: i64) -> u64 {
    v.max(0) as u64
}

/// Serialises writers of one workspace's PRDs and tasks until the transaction ends.
async fn lock_workspace(tx: &mut PgConnection, ws: &str) -> Result<(), StoreError> {
    sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended('keel-work:' || $1, 0))")
        .bind(ws)
        .execute(&mut *tx)
        .await
        .map_err(db_err("locking the workspace's tasks"))?;
    Ok(())
}

const TASK_COLUMNS: &str = "num, prd, title, description, criteria, size, status, question, session_id, pid, created_at, updated_at";

async fn load_task(
    conn: &mut PgConnection,
    ws: &str,
    id: u32,
) -> Result<Option<TaskRecord>, StoreError> {
    let row: Option<PgRow> = sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT {TASK_COLUMNS} FROM tasks WHERE workspace = $1 AND num = $2"
    )))
    .bind(ws)
    .bind(i64::from(id))
    .fetch_optional(&mut *conn)
    .await
    .map_err(db_err("reading a task"))?;
    let Some(r) = row else {
        return Ok(None);
    };
    let read = || -> Result<_, sqlx::Error> {
        Ok((
            r.try_get::<Option<i64>, _>(1)?,
            r.try_get::<String, _>(2)?,
            r.try_get::<String, _>(3)?,
            r.try_get::<String, _>(4)?,
            r.try_get::<String, _>(5)?,
            r.try_get::<String, _>(6)?,
            r.try_get::<Option<String>, _>(7)?,
            r.try_get::<Option<String>, _>(8)?,
            r.try_get::<Option<i64>, _>(9)?,
            r.try_get::<i64, _>(10)?,
            r.try_get::<i64, _>(11)?,
        ))
    };
    let (prd, title, description, criteria, size, status, question, session_id, pid, c, u) =
        read().map_err(db_err("reading a task"))?;
    let what = format!("task #{id}");
    let criteria: Vec<String> =
        serde_json::from_str(&criteria).map_err(|e| StoreError::Corrupt {
            context: format!("criteria of task #{id}"),
            reason: e.to_string(),
        })?;
    let status = TaskStatus::parse(&status).ok_or_else(|| StoreError::Corrupt {
        context: format!("status of task #{id}"),
        reason: format!("unknown status `{status}`"),
    })?;
    let deps: Vec<i64> = sqlx::query_scalar(
        "SELECT depends_on FROM task_deps WHERE workspace = $1 AND task = $2 ORDER BY depends_on",
    )
    .bind(ws)
    .bind(i64::from(id))
    .fetch_all(&mut *conn)
    .await
    .map_err(db_err("reading task links"))?;
    let sessions: Vec<String> = sqlx::query_scalar(
        "SELECT session_id FROM task_sessions WHERE workspace = $1 AND task = $2 ORDER BY started_at, session_id",
    )
    .bind(ws)
    .bind(i64::from(id))
    .fetch_all(&mut *conn)
    .await
    .map_err(db_err("reading a task's sessions"))?;
    Ok(Some(TaskRecord {
        id,
        prd: prd.map(|p| num(p, &what)).transpose()?,
        title,
        description,
        criteria,
        size,
        status,
        question,
        session_id,
        sessions,
        depends_on: deps
            .into_iter()
            .map(|d| num(d, &what))
            .collect::<Result<_, _>>()?,
        pid: pid.map(|p| num(p, &what)).transpose()?,
        created_at: ms(c),
        updated_at: ms(u),
    }))
}

async fn all_edges(
    conn: &mut PgConnection,
    ws: &str,
) -> Result<BTreeMap<u32, Vec<u32>>, StoreError> {
    let mut edges: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    let nums: Vec<i64> = sqlx::query_scalar("SELECT num FROM tasks WHERE workspace = $1")
        .bind(ws)
        .fetch_all(&mut *conn)
        .await
        .map_err(db_err("reading tasks"))?;
    for n in nums {
        edges.insert(num(n, "a task number")?, Vec::new());
    }
    let pairs: Vec<(i64, i64)> =
        sqlx::query_as("SELECT task, depends_on FROM task_deps WHERE workspace = $1")
            .bind(ws)
            .fetch_all(&mut *conn)
            .await
            .map_err(db_err("reading dependencies"))?;
    for (t, d) in pairs {
        edges
            .entry(num(t, "a dependency")?)
            .or_default()
            .push(num(d, "a dependency")?);
    }
    Ok(edges)
}

impl PgStore {
    async fn begin_work(&self, ws: &str) -> Result<Transaction<'static, Postgres>, StoreError> {
        let mut tx = self
            .pool
            .begin()
            .await
            .map_err(db_err("starting a transaction"))?;
        lock_workspace(&mut tx, ws).await?;
        Ok(tx)
    }

    /// Stores a new PRD as version 1 and returns it.
    pub async fn add_prd(
        &self,
        ws: &str,
        title: &str,
        body: &str,
    ) -> Result<PrdRecord, StoreError> {
        let mut tx = self.begin_work(ws).await?;
        let id: i64 =
            sqlx::query_scalar("SELECT COALESCE(MAX(num), 0) + 1 FROM prds WHERE workspace = $1")
                .bind(ws)
                .fetch_one(&mut *tx)
                .await
                .map_err(db_err("numbering a PRD"))?;
        let now = now_ms() as i64;
        sqlx::query("INSERT INTO prds (workspace, num, title, created_at) VALUES ($1, $2, $3, $4)")
            .bind(ws)
            .bind(id)
            .bind(title)
            .bind(now)
            .execute(&mut *tx)
            .await
            .map_err(db_err("adding a PRD"))?;
        sqlx::query(
            "INSERT INTO prd_versions (workspace, prd, version, body, created_at) VALUES ($1, $2, 1, $3, $4)",
        )
        .bind(ws)
        .bind(id)
        .bind(body)
        .bind(now)
        .execute(&mut *tx)
        .await
        .map_err(db_err("adding a PRD"))?;
        tx.commit().await.map_err(db_err("adding a PRD"))?;
        self.prd(ws, Some(num(id, "a PRD number")?), None).await
    }

    /// Stores `body` as the PRD's next version (nothing when it is unchanged).
    pub async fn edit_prd(&self, ws: &str, id: u32, body: &str) -> Result<PrdRecord, StoreError> {
        let mut tx = self.begin_work(ws).await?;
        let current = self.prd(ws, Some(id), None).await?;
        if current.body == body {
            return Ok(current);
        }
        sqlx::query(
            "INSERT INTO prd_versions (workspace, prd, version, body, created_at)
             SELECT $1, $2, MAX(version) + 1, $3, $4 FROM prd_versions WHERE workspace = $1 AND prd = $2",
        )
        .bind(ws)
        .bind(i64::from(id))
        .bind(body)
        .bind(now_ms() as i64)
        .execute(&mut *tx)
        .await
        .map_err(db_err("storing a PRD version"))?;
        tx.commit().await.map_err(db_err("storing a PRD version"))?;
        self.prd(ws, Some(id), None).await
    }

    /// A PRD (the latest one when `id` is `None`) at `version` (default: its latest).
    pub async fn prd(
        &self,
        ws: &str,
        id: Option<u32>,
        version: Option<u32>,
    ) -> Result<PrdRecord, StoreError> {
        let id = match id {
            Some(id) => id,
            None => {
                let latest: Option<i64> =
                    sqlx::query_scalar("SELECT MAX(num) FROM prds WHERE workspace = $1")
                        .bind(ws)
                        .fetch_one(&self.pool)
                        .await
                        .map_err(db_err("finding the latest PRD"))?;
                let latest = latest.ok_or_else(|| {
                    missing("this workspace has no PRD yet; add one with `keel prd add FILE`")
                })?;
                num(latest, "a PRD number")?
            }
        };
        let head: Option<(String, i64, Option<i64>)> = sqlx::query_as(
            "SELECT p.title, p.created_at, (SELECT MAX(version) FROM prd_versions v WHERE v.workspace = p.workspace AND v.prd = p.num)
             FROM prds p WHERE p.workspace = $1 AND p.num = $2",
        )
        .bind(ws)
        .bind(i64::from(id))
        .fetch_optional(&self.pool)
        .await
        .map_err(db_err("reading a PRD"))?;
        let (title, created_at, latest) = head.ok_or_else(|| {
            missing(&format!(
                "no PRD #{id} in this workspace; `keel prd list` lists them"
            ))
        })?;
        let latest = num(latest.unwrap_or(0), "a PRD version")?;
        let version = version.unwrap_or(latest);
        let (body, at): (String, i64) = sqlx::query_as(
            "SELECT body, created_at FROM prd_versions WHERE workspace = $1 AND prd = $2 AND version = $3",
        )
        .bind(ws)
        .bind(i64::from(id))
        .bind(i64::from(version))
        .fetch_optional(&self.pool)
        .await
        .map_err(db_err("reading a PRD version"))?
        .ok_or_else(|| missing(&format!("PRD #{id} has versions 1 to {latest}, not {version}")))?;
        Ok(PrdRecord {
            id,
            title,
            version,
            body,
            created_at: ms(created_at),
            updated_at: ms(at),
        })
    }

    /// Every PRD of the workspace at its latest version, oldest first.
    pub async fn list_prds(&self, ws: &str) -> Result<Vec<PrdRecord>, StoreError> {
        let ids: Vec<i64> =
            sqlx::query_scalar("SELECT num FROM prds WHERE workspace = $1 ORDER BY num")
                .bind(ws)
                .fetch_all(&self.pool)
                .await
                .map_err(db_err("listing PRDs"))?;
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            out.push(self.prd(ws, Some(num(id, "a PRD number")?), None).await?);
        }
        Ok(out)
    }

    /// Stores `tasks` for `prd` in one transaction (all or nothing) and returns their ids.
    pub async fn add_tasks(
        &self,
        ws: &str,
        prd: Option<u32>,
        tasks: &[NewTask],
    ) -> Result<Vec<u32>, StoreError> {
        let mut tx = self.begin_work(ws).await?;
        let first: i64 =
            sqlx::query_scalar("SELECT COALESCE(MAX(num), 0) + 1 FROM tasks WHERE workspace = $1")
                .bind(ws)
                .fetch_one(&mut *tx)
                .await
                .map_err(db_err("numbering tasks"))?;
        let first = num(first, "a task number")?;
        let existing = all_edges(&mut tx, ws).await?;
        let now = now_ms() as i64;
        let mut ids = Vec::new();
        for (i, t) in tasks.iter().enumerate() {
            check_size(&t.size)?;
            if t.title.trim().is_empty() {
                return Err(conflict(format!("task {} has an empty title", i + 1)));
            }
            let id = first + i as u32;
            let criteria = serde_json::to_string(&t.criteria).unwrap_or_else(|_| "[]".into());
            sqlx::query(
                "INSERT INTO tasks (workspace, num, prd, title, description, criteria, size, status, created_at, updated_at)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, 'ready', $8, $8)",
            )
            .bind(ws)
            .bind(i64::from(id))
            .bind(prd.map(i64::from))
            .bind(t.title.trim())
            .bind(t.description.trim())
            .bind(criteria)
            .bind(&t.size)
            .bind(now)
            .execute(&mut *tx)
            .await
            .map_err(db_err("adding a task"))?;
            let mut deps: BTreeSet<u32> = BTreeSet::new();
            for d in &t.depends_on {
                if !existing.contains_key(d) {
                    return Err(conflict(format!(
                        "task `{}` depends on #{d}, which does not exist",
                        t.title
                    )));
                }
                deps.insert(*d);
            }
            for a in &t.after {
                if *a >= i {
                    return Err(conflict(format!(
                        "task `{}` depends on task {} of the same list, which does not come before it",
                        t.title,
                        a + 1
                    )));
                }
                deps.insert(first + *a as u32);
            }
            insert_deps(&mut tx, ws, id, &deps).await?;
            ids.push(id);
        }
        tx.commit().await.map_err(db_err("adding tasks"))?;
        Ok(ids)
    }

    /// A task by id.
    pub async fn task(&self, ws: &str, id: u32) -> Result<TaskRecord, StoreError> {
        let mut conn = self
            .pool
            .acquire()
            .await
            .map_err(db_err("taking a connection"))?;
        load_task(&mut conn, ws, id)
            .await?
            .ok_or_else(|| task_missing(id))
    }

    /// Every task of the workspace, by id.
    pub async fn list_tasks(&self, ws: &str) -> Result<Vec<TaskRecord>, StoreError> {
        let mut conn = self
            .pool
            .acquire()
            .await
            .map_err(db_err("taking a connection"))?;
        let ids: Vec<i64> =
            sqlx::query_scalar("SELECT num FROM tasks WHERE workspace = $1 ORDER BY num")
                .bind(ws)
                .fetch_all(&mut *conn)
                .await
                .map_err(db_err("listing tasks"))?;
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            if let Some(t) = load_task(&mut conn, ws, num(id, "a task number")?).await? {
                out.push(t);
            }
        }
        Ok(out)
    }

    /// Changes a task's definition (dependencies checked: they exist, no cycle).
    pub async fn edit_task(
        &self,
        ws: &str,
        id: u32,
        edit: &TaskEdit,
    ) -> Result<TaskRecord, StoreError> {
        let mut tx = self.begin_work(ws).await?;
        let Some(current) = load_task(&mut tx, ws, id).await? else {
            return Err(task_missing(id));
        };
        if let Some(s) = &edit.size {
            check_size(s)?;
        }
        let status = edit.status.unwrap_or(current.status);
        let question = if edit.status.is_some_and(|s| s != TaskStatus::Blocked) {
            None
        } else {
            current.question.clone()
        };
        let criteria = edit
            .criteria
            .as_ref()
            .map(|c| serde_json::to_string(c).unwrap_or_else(|_| "[]".into()));
        sqlx::query(
            "UPDATE tasks SET title = COALESCE($3, title), description = COALESCE($4, description),
                criteria = COALESCE($5, criteria), size = COALESCE($6, size), status = $7,
                question = $8, updated_at = $9
             WHERE workspace = $1 AND num = $2",
        )
        .bind(ws)
        .bind(i64::from(id))
        .bind(edit.title.as_deref().map(str::trim))
        .bind(edit.description.as_deref().map(str::trim))
        .bind(criteria)
        .bind(edit.size.as_deref())
        .bind(status.as_str())
        .bind(question)
        .bind(now_ms() as i64)
        .execute(&mut *tx)
        .await
        .map_err(db_err("editing a task"))?;
        if let Some(deps) = &edit.depends_on {
            let mut edges = all_edges(&mut tx, ws).await?;
            for d in deps {
                if !edges.contains_key(d) {
                    return Err(conflict(format!("task #{d} does not exist")));
                }
            }
            edges.insert(id, deps.clone());
            if let Some(cycle) = find_cycle(&edges) {
                let path: Vec<String> = cycle.iter().map(|c| format!("#{c}")).collect();
                return Err(conflict(format!(
                    "that would make a dependency cycle: {}",
                    path.join(" → ")
                )));
            }
            sqlx::query("DELETE FROM task_deps WHERE workspace = $1 AND task = $2")
                .bind(ws)
                .bind(i64::from(id))
                .execute(&mut *tx)
                .await
                .map_err(db_err("editing dependencies"))?;
            insert_deps(&mut tx, ws, id, &deps.iter().copied().collect()).await?;
        }
        tx.commit().await.map_err(db_err("editing a task"))?;
        self.task(ws, id).await
    }

    /// Deletes a task no other task depends on, with its proofs.
    pub async fn remove_task(&self, ws: &str, id: u32) -> Result<(), StoreError> {
        let mut tx = self.begin_work(ws).await?;
        if load_task(&mut tx, ws, id).await?.is_none() {
            return Err(task_missing(id));
        }
        let dependents: Vec<i64> = sqlx::query_scalar(
            "SELECT task FROM task_deps WHERE workspace = $1 AND depends_on = $2 ORDER BY task",
        )
        .bind(ws)
        .bind(i64::from(id))
        .fetch_all(&mut *tx)
        .await
        .map_err(db_err("reading task links"))?;
        if !dependents.is_empty() {
            let list: Vec<String> = dependents.iter().map(|d| format!("#{d}")).collect();
            return Err(conflict(format!(
                "{} depend on task #{id}; remove or edit them first (`keel task edit N --deps …`)",
                list.join(", ")
            )));
        }
        for q in [
            "DELETE FROM task_deps WHERE workspace = $1 AND task = $2",
            "DELETE FROM task_sessions WHERE workspace = $1 AND task = $2",
            "DELETE FROM proofs WHERE workspace = $1 AND task = $2",
            "DELETE FROM tasks WHERE workspace = $1 AND num = $2",
        ] {
            sqlx::query(q)
                .bind(ws)
                .bind(i64::from(id))
                .execute(&mut *tx)
                .await
                .map_err(db_err("removing a task"))?;
        }
        tx.commit().await.map_err(db_err("removing a task"))
    }

    /// Marks a task `in_progress` in session `session_id`, owned by process `pid`. Refused
    /// when a dependency is not done, or when a live process already runs it.
    pub async fn claim_task(
        &self,
        ws: &str,
        id: u32,
        session_id: &str,
        pid: u32,
    ) -> Result<TaskRecord, StoreError> {
        let mut tx = self.begin_work(ws).await?;
        let task = load_task(&mut tx, ws, id)
            .await?
            .ok_or_else(|| task_missing(id))?;
        if task.status == TaskStatus::InProgress && !task.is_interrupted() && task.pid != Some(pid)
        {
            return Err(conflict(format!(
                "task #{id} is being worked on by process {}",
                task.pid.unwrap_or(0)
            )));
        }
        for d in &task.depends_on {
            let dep = load_task(&mut tx, ws, *d).await?;
            if dep.as_ref().map(|t| t.status) != Some(TaskStatus::Done) {
                return Err(conflict(format!(
                    "task #{id} depends on #{d}, which is not done yet; run it first (`keel work start {d}`) or `keel work batch`"
                )));
            }
        }
        let now = now_ms() as i64;
        sqlx::query(
            "UPDATE tasks SET status = 'in_progress', question = NULL, session_id = $1, pid = $2, updated_at = $3 WHERE workspace = $4 AND num = $5",
        )
        .bind(session_id)
        .bind(i64::from(pid))
        .bind(now)
        .bind(ws)
        .bind(i64::from(id))
        .execute(&mut *tx)
        .await
        .map_err(db_err("claiming a task"))?;
        sqlx::query(
            "INSERT INTO task_sessions (workspace, task, session_id, started_at) VALUES ($1, $2, $3, $4)
             ON CONFLICT DO NOTHING",
        )
        .bind(ws)
        .bind(i64::from(id))
        .bind(session_id)
        .bind(now)
        .execute(&mut *tx)
        .await
        .map_err(db_err("claiming a task"))?;
        tx.commit().await.map_err(db_err("claiming a task"))?;
        self.task(ws, id).await
    }

    /// Records how a task's run ended (`question` for a blocked one).
    pub async fn finish_task(
        &self,
        ws: &str,
        id: u32,
        status: TaskStatus,
        question: Option<&str>,
    ) -> Result<(), StoreError> {
        let n = sqlx::query(
            "UPDATE tasks SET status = $1, question = $2, pid = NULL, updated_at = $3 WHERE workspace = $4 AND num = $5",
        )
        .bind(status.as_str())
        .bind(question)
        .bind(now_ms() as i64)
        .bind(ws)
        .bind(i64::from(id))
        .execute(&self.pool)
        .await
        .map_err(db_err("finishing a task"))?
        .rows_affected();
        if n == 0 {
            return Err(task_missing(id));
        }
        Ok(())
    }

    /// The tasks (workspace, id) that ran in `session_id`.
    pub async fn tasks_of_session(
        &self,
        session_id: &str,
    ) -> Result<Vec<(String, u32)>, StoreError> {
        let rows: Vec<(String, i64)> =
            sqlx::query_as("SELECT workspace, task FROM task_sessions WHERE session_id = $1")
                .bind(session_id)
                .fetch_all(&self.pool)
                .await
                .map_err(db_err("finding a session's task"))?;
        rows.into_iter()
            .map(|(ws, t)| Ok((ws, num(t, "a task number")?)))
            .collect()
    }

    /// After a blocker of `session_id` is answered: its blocked tasks become ready again.
    pub async fn ready_tasks_of_session(&self, session_id: &str) -> Result<Vec<u32>, StoreError> {
        let ids: Vec<i64> = sqlx::query_scalar(
            "UPDATE tasks t SET status = 'ready', question = NULL, updated_at = $2
             FROM task_sessions s
             WHERE s.session_id = $1 AND t.workspace = s.workspace AND t.num = s.task AND t.status = 'blocked'
             RETURNING t.num",
        )
        .bind(session_id)
        .bind(now_ms() as i64)
        .fetch_all(&self.pool)
        .await
        .map_err(db_err("readying a task"))?;
        ids.into_iter().map(|i| num(i, "a task number")).collect()
    }

    /// Stores a proof for a task's run.
    pub async fn add_proof(
        &self,
        ws: &str,
        task: u32,
        session_id: &str,
        body: &serde_json::Value,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO proofs (workspace, task, session_id, body, created_at) VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(ws)
        .bind(i64::from(task))
        .bind(session_id)
        .bind(body.to_string())
        .bind(now_ms() as i64)
        .execute(&self.pool)
        .await
        .map_err(db_err("storing a proof"))?;
        Ok(())
    }

    /// A task's proofs, oldest first.
    pub async fn proofs(&self, ws: &str, task: u32) -> Result<Vec<ProofRecord>, StoreError> {
        let rows: Vec<(String, String, i64)> = sqlx::query_as(
            "SELECT session_id, body, created_at FROM proofs WHERE workspace = $1 AND task = $2 ORDER BY created_at, id",
        )
        .bind(ws)
        .bind(i64::from(task))
        .fetch_all(&self.pool)
        .await
        .map_err(db_err("reading proofs"))?;
        rows.into_iter()
            .map(|(session_id, body, at)| {
                Ok(ProofRecord {
                    task,
                    session_id,
                    body: serde_json::from_str(&body).map_err(|e| StoreError::Corrupt {
                        context: format!("proof of task #{task}"),
                        reason: e.to_string(),
                    })?,
                    created_at: ms(at),
                })
            })
            .collect()
    }
}

async fn insert_deps(
    tx: &mut PgConnection,
    ws: &str,
    id: u32,
    deps: &BTreeSet<u32>,
) -> Result<(), StoreError> {
    for d in deps {
        sqlx::query("INSERT INTO task_deps (workspace, task, depends_on) VALUES ($1, $2, $3)")
            .bind(ws)
            .bind(i64::from(id))
            .bind(i64::from(*d))
            .execute(&mut *tx)
            .await
            .map_err(db_err("adding a dependency"))?;
    }
    Ok(())
}
