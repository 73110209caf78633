// The tasks board: the workspace's tasks in columns by status, their dependencies, start and
// batch buttons, and each task's latest proof (gates, tests before/after, files changed,
// acceptance criteria with their evidence).

import { api } from "./api.js";

// `waiting`: ready, but a dependency is not done yet (the server's `shown_status`).
const COLUMNS = ["ready", "waiting", "in_progress", "blocked", "done", "failed"];

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

export class TasksBoard {
  /** `root`: the board section; `onError(err)` reports failures. */
  constructor(root, { onError, onInfo }) {
    this.root = root;
    this.onError = onError;
    this.onInfo = onInfo;
    this.busy = false;
    this.columns = {};
    const bar = el("div", "board-bar");
    this.workspace = el("input");
    this.workspace.placeholder = "workspace (server directory)";
    this.workspace.id = "board-workspace";
    this.script = el("input");
    this.script.placeholder = "script (scripted provider only)";
    this.script.id = "board-script";
    this.batch = el("button", "", "Run batch");
    this.batch.type = "button";
    this.batch.id = "run-batch";
    this.batch.addEventListener("click", () => this.run({}, "/work/batch"));
    const refresh = el("button", "secondary", "Refresh");
    refresh.type = "button";
    refresh.addEventListener("click", () => this.load());
    this.summary = el("span", "board-summary");
    bar.append(this.workspace, this.script, this.batch, refresh, this.summary);
    const cols = el("div", "board-columns");
    for (const status of COLUMNS) {
      const col = el("section", "board-column");
      col.dataset.status = status;
      col.append(el("h3", "", status.replace("_", " ")));
      const list = el("div", "cards");
      col.append(list);
      this.columns[status] = list;
      cols.append(col);
    }
    root.append(bar, cols);
  }

  /** The request fields every call shares. */
  spec() {
    const spec = {};
    if (this.workspace.value.trim()) spec.workspace = this.workspace.value.trim();
    if (this.script.value.trim()) spec.script = this.script.value.trim();
    return spec;
  }

  query() {
    const w = this.workspace.value.trim();
    return w ? `?workspace=${encodeURIComponent(w)}` : "";
  }

  async load() {
    let status;
    try {
      status = await api.call("GET", `/work/status${this.query()}`);
    } catch (err) {
      this.onError(err);
      return;
    }
    const tasks = status.tasks;
    for (const list of Object.values(this.columns)) list.replaceChildren();
    for (const t of tasks) {
      const column = t.shown_status === "interrupted" ? "in_progress" : (t.shown_status ?? t.status);
      this.columns[column]?.append(this.card(t, column));
    }
    const c = status.counts;
    this.summary.textContent = `${tasks.length} tasks · ${c.done} done · ${c.ready} ready · ${c.waiting} waiting · ${c.blocked} blocked · ${c.failed} failed`;
  }

  card(t, column) {
    const card = el("article", "task-card");
    card.dataset.id = t.id;
    card.dataset.status = column;
    card.append(el("h4", "", `#${t.id} ${t.title}`));
    const meta = el("p", "task-meta", `size ${t.size}`);
    if (t.depends_on.length) {
      const deps = el("span", "deps", ` · after ${t.depends_on.map((d) => `#${d}`).join(", ")}`);
      meta.append(deps);
    }
    card.append(meta);
    if (t.question) card.append(el("p", "question", `Blocked: ${t.question}`));
    if (column === "waiting") {
      card.append(el("p", "waits", `waits for ${(t.waiting_for ?? []).map((d) => `#${d}`).join(", ")}`));
    }
    if (column === "ready") {
      const start = el("button", "start", "Start");
      start.type = "button";
      start.addEventListener("click", () => this.run({ task: t.id, execute: true }, "/work/start"));
      card.append(start);
    }
    if (t.status === "done" || t.status === "failed") {
      const proof = el("details", "proof");
      proof.append(el("summary", "", "Proof"));
      proof.addEventListener("toggle", () => {
        if (proof.open && proof.childElementCount === 1) this.loadProof(t.id, proof);
      });
      card.append(proof);
    }
    return card;
  }

  async loadProof(id, box) {
    let data;
    try {
      data = await api.call("GET", `/tasks/${id}${this.query()}`);
    } catch (err) {
      this.onError(err);
      return;
    }
    const p = data.proofs.at(-1)?.body;
    if (!p) {
      box.append(el("p", "", "No proof yet."));
      return;
    }
    const gate = (g) => (g ? `${g.passed ? "passed" : "FAILED"} — ${g.command}` : "no test command");
    box.append(el("p", "", `Run ${p.run_status}${p.resumed ? " (resumed)" : ""}`));
    box.append(el("p", "", `Tests before: ${gate(p.tests_before)}`));
    box.append(el("p", "", `Tests after: ${gate(p.tests_after)}`));
    for (const g of p.gates) box.append(el("p", g.passed ? "ok" : "bad", `Gate ${g.name}: ${g.passed ? "passed" : "FAILED"}`));
    const files = el("ul", "files");
    for (const f of p.files) files.append(el("li", "", `${f.change} ${f.path} (+${f.lines_added} −${f.lines_removed})`));
    if (!p.files.length) files.append(el("li", "", "no files changed"));
    box.append(files);
    const crit = el("ol", "criteria");
    for (const c of p.criteria) {
      const li = el("li", `criterion ${c.status}`);
      li.append(el("span", "badge", c.status.replace("_", " ")), document.createTextNode(` ${c.criterion}`));
      li.append(el("div", "evidence", `${c.evidence ?? "no evidence"} — ${c.check}`));
      crit.append(li);
    }
    box.append(crit);
  }

  async run(fields, path) {
    if (this.busy) return;
    this.busy = true;
    this.root.classList.add("running");
    this.batch.disabled = true;
    try {
      const r = await api.call("POST", path, { ...this.spec(), ...fields });
      const runs = r.runs ?? [r];
      this.onInfo(runs.length ? runs.map((x) => `#${x.task} ${x.status}`).join(", ") : "No task was ready.");
    } catch (err) {
      this.onError(err);
    } finally {
      this.busy = false;
      this.batch.disabled = false;
      this.root.classList.remove("running");
      await this.load();
    }
  }
}
