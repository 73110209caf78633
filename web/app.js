// The page: the session list and creation form, the open session (transcript, phase
// indicator, blockers, status and usage) and the composer. Each session has an address of its
// own (`/s/<id>`, served by `keel serve`): opening one puts it in the address bar, so it can
// be reloaded, bookmarked and shared; Back and Forward move between the sessions opened.

import { api, ApiError, initToken, setToken, SessionSocket } from "./api.js";
import { Transcript } from "./chat.js";
import { PhaseIndicator, toast } from "./phase.js";
import { installShortcuts, renderSessionList, updateListedStatus } from "./sessions.js";
import { TasksBoard } from "./tasks.js";

const $ = (id) => document.getElementById(id);

const state = {
  session: null, // the open session's view
  status: null, // the open session's status, as its stream last said
  socket: null,
  running: false,
};

const phases = new PhaseIndicator($("phase-indicator"));
const transcript = new Transcript($("transcript"), {
  onPhase: (phase) => phases.set(phase),
  // A toast is news: not for a violation replayed from a session's history (the transcript
  // shows it in its place).
  onViolation: (e) => {
    if (!(e.ts < Date.now() - 10000)) toast(`${e.tool} is not allowed in ${e.phase}: ${e.hint}`, "violation");
  },
  onBlocker: () => loadBlockers(),
  onUsage: (usage) => showUsage(usage),
  onStatus: (status) => showStatus(status),
  onApproval: (callId, a) => {
    const msg = a.approve
      ? { type: "approve", call_id: callId, scope: a.scope }
      : { type: "deny", call_id: callId, ...(a.reason ? { reason: a.reason } : {}) };
    if (!state.socket?.send(msg)) toast("Not connected; the answer was not sent.", "error");
  },
  onTurnFinished: () => {
    setRunning(false);
    refreshList();
    loadBlockers();
  },
});

function showStatus(status) {
  const s = $("session-status");
  s.textContent = status;
  s.dataset.status = status;
  state.status = status;
  // The list shows the same status as the header.
  if (state.session) updateListedStatus($("session-list"), state.session.id, status);
  setRunning(status === "running");
}

function showUsage(u) {
  if (!u) return;
  const tokens = (u.input_tokens ?? 0) + (u.output_tokens ?? 0);
  const cost = u.cost_usd ? ` · $${u.cost_usd.toFixed(4)}` : "";
  if (tokens === 0 && u.requests) {
    // Every request has input tokens: zero means the provider did not report them.
    $("usage").textContent = `${u.requests} requests · tokens not reported${cost}`;
    return;
  }
  $("usage").textContent = `${u.requests ?? 0} requests · ${tokens.toLocaleString()} tokens (${(u.input_tokens ?? 0).toLocaleString()} in, ${(u.output_tokens ?? 0).toLocaleString()} out)${cost}`;
}

function setRunning(running) {
  state.running = running;
  $("cancel-turn").disabled = !running;
  $("undo").disabled = running;
  $("send").disabled = running;
  document.body.classList.toggle("running", running);
}

function showError(err) {
  if (err instanceof ApiError && err.status === 401) {
    // Not modal: in the page's flow, above everything, covering nothing.
    if (!$("token-dialog").open) $("token-dialog").show();
    $("token-input").focus();
    return;
  }
  toast(err.message ?? String(err), "error");
}

/** The session id in an address (`/s/<id>`), if it names one. */
export function sessionInPath(pathname) {
  const m = /^\/s\/([^/]+)\/?$/.exec(pathname);
  return m ? decodeURIComponent(m[1]) : null;
}

/** Puts `path` in the address bar (a new history entry unless `replace`). */
function go(path, replace = false) {
  if (location.pathname === path) return;
  const url = path + location.search;
  if (replace) history.replaceState(null, "", url);
  else history.pushState(null, "", url);
}

const narrow = window.matchMedia("(max-width: 760px)");

/** On a narrow screen the creation form folds away, leaving the session list and the
 *  session itself on screen. */
function foldForm() {
  if (narrow.matches) $("new-session-box").open = false;
}

async function refreshList() {
  let sessions;
  try {
    sessions = await api.listSessions();
  } catch (err) {
    showError(err);
    return;
  }
  renderSessionList($("session-list"), sessions, {
    openId: state.session?.id,
    openStatus: state.status,
    onOpen: openSession,
  });
}

async function openSession(id, { replace = false } = {}) {
  let session;
  try {
    session = await api.getSession(id);
  } catch (err) {
    showError(err);
    if (err instanceof ApiError && err.status === 404 && sessionInPath(location.pathname) === id) {
      go("/", true);
      showEmpty();
    }
    return;
  }
  go(`/s/${encodeURIComponent(session.id)}`, replace);
  state.socket?.close();
  state.session = session;
  $("empty").hidden = true;
  $("board").hidden = true;
  for (const id of ["session-header", "transcript", "composer"]) $(id).hidden = false;
  $("session-title").textContent = session.task || "New session";
  $("session-mode").textContent = session.execution_mode;
  document.body.dataset.mode = session.execution_mode;
  $("session-workspace").textContent = session.workspace;
  $("session-id").textContent = session.id;
  transcript.clear();
  phases.reset(session.execution_mode);
  state.status = null;
  showStatus(session.turn_running ? "running" : session.status);
  showUsage(session.usage);
  setRunning(session.turn_running);
  $("blockers").hidden = true;
  state.socket = new SessionSocket(id, {
    onEvent: (e) => {
      if (e.type === "session_started") $("session-title").textContent = e.task;
      transcript.apply(e);
    },
    onRequestError: (e) => toast(e.message, "error"),
    onState: (s) => {
      $("connection").dataset.state = s;
      $("connection").title = s === "live" ? "Live" : s === "connecting" ? "Reconnecting…" : "Closed";
    },
  });
  refreshList();
  loadBlockers();
  foldForm();
  $("message").focus();
}

/** Closes the open session (if any) and shows only the section `id` of the main area. */
function showOnly(id) {
  state.socket?.close();
  state.socket = null;
  state.session = null;
  for (const other of ["session-header", "transcript", "composer", "blockers", "board", "empty"]) {
    $(other).hidden = other !== id;
  }
}

/** Nothing open: the welcome text. */
function showEmpty() {
  showOnly("empty");
}

async function loadBlockers() {
  if (!state.session) return;
  const id = state.session.id;
  let blockers;
  try {
    blockers = await api.blockers(id);
  } catch (err) {
    showError(err);
    return;
  }
  if (state.session?.id !== id) return;
  const box = $("blockers");
  box.replaceChildren();
  box.hidden = blockers.length === 0;
  for (const b of blockers) {
    const form = document.createElement("form");
    form.className = "blocker";
    form.dataset.id = b.id;
    const q = document.createElement("p");
    q.className = "question";
    q.textContent = b.question;
    form.append(q);
    for (const line of b.evidence ?? []) {
      const ev = document.createElement("p");
      ev.className = "evidence";
      ev.textContent = line;
      form.append(ev);
    }
    const input = document.createElement("textarea");
    input.rows = 2;
    input.placeholder = "Your answer";
    input.required = true;
    const button = document.createElement("button");
    button.type = "submit";
    button.textContent = "Answer and continue";
    form.append(input, button);
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      try {
        await api.answerBlocker(id, b.id, input.value);
        form.remove();
        box.hidden = box.childElementCount === 0;
        // The next message delivers the answer to the agent.
        sendMessage("Continue with my answer.");
      } catch (err) {
        showError(err);
      }
    });
    box.append(form);
  }
}

function sendMessage(content) {
  if (!state.socket || !content.trim()) return false;
  if (!state.socket.send({ type: "user_message", content })) {
    toast("Not connected yet; try again in a moment.", "error");
    return false;
  }
  setRunning(true);
  return true;
}

$("composer").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const box = $("message");
  if (sendMessage(box.value)) box.value = "";
});

installShortcuts($("shortcuts"), {
  send: () => $("composer").requestSubmit(),
  cancel: () => {
    if (state.running) state.socket?.send({ type: "cancel" });
  },
  focus: () => $("message").focus(),
});
$("show-shortcuts").addEventListener("click", () => $("shortcuts").showModal());

$("undo").addEventListener("click", async () => {
  if (!state.session) return;
  try {
    const r = await api.undo(state.session.id);
    const n = r.modified.length + r.recreated.length + r.removed.length;
    toast(`Restored the end of turn ${r.turn}: ${n === 1 ? "1 file" : `${n} files`} changed.`);
  } catch (err) {
    showError(err);
  }
});

$("cancel-turn").addEventListener("click", () => {
  state.socket?.send({ type: "cancel" });
});

$("new-session").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const form = new FormData(ev.target);
  const spec = {};
  for (const [k, v] of form.entries()) {
    if (typeof v === "string" && v.trim()) spec[k] = v.trim();
  }
  try {
    const session = await api.createSession(spec);
    await openSession(session.id);
  } catch (err) {
    showError(err);
  }
});

$("token-form").addEventListener("submit", () => {
  setToken($("token-input").value.trim());
  route({ replace: true });
});

const board = new TasksBoard($("board"), { onError: showError, onInfo: (m) => toast(m) });

function showBoard() {
  showOnly("board");
  board.load();
  refreshList();
}

$("show-tasks").addEventListener("click", () => {
  go("/tasks");
  showBoard();
});

/** Shows what the address names: a session, the tasks board, or nothing open. */
function route({ replace = false } = {}) {
  const id = sessionInPath(location.pathname);
  if (id) {
    if (state.session?.id !== id) openSession(id, { replace });
  } else if (location.pathname === "/tasks") {
    showBoard();
  } else {
    showEmpty();
  }
  refreshList();
}

window.addEventListener("popstate", () => route());

initToken();
foldForm();
// Narrowed: fold the form away; widened again: there is room for it.
narrow.addEventListener("change", () => {
  $("new-session-box").open = !narrow.matches;
});
route({ replace: true });
setInterval(refreshList, 10000);
