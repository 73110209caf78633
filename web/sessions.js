// The session list (ids shortened only as far as they stay unique, each session's workspace,
// the status the open session really has) and the keyboard shortcuts.

/** The shortest prefix of each id (at least `min` characters) that no other id shares: what
 *  `keel sessions show`, `--resume` and the API accept (15 characters: date and time of day). */
export function uniquePrefixes(ids, min = 15) {
  const out = new Map();
  for (const id of ids) {
    let n = Math.min(min, id.length);
    while (n < id.length && ids.some((other) => other !== id && other.startsWith(id.slice(0, n)))) n++;
    out.set(id, id.slice(0, n));
  }
  return out;
}

/** The last part of a path, for a compact label. */
export function baseName(path) {
  const parts = (path ?? "").split("/").filter(Boolean);
  return parts[parts.length - 1] ?? path ?? "";
}

/** The status to show for a listed session: a turn running on this server is "running"
 *  whatever the store said when the list was fetched; the open session shows what its own
 *  stream said last. */
export function shownStatus(session, openId, openStatus) {
  if (session.id === openId && openStatus) return openStatus;
  return session.turn_running ? "running" : session.status;
}

/** Fills `list` with one item per session; `onOpen(id)` opens one. */
export function renderSessionList(list, sessions, { openId, openStatus, onOpen }) {
  const prefixes = uniquePrefixes(sessions.map((s) => s.id));
  list.replaceChildren();
  for (const s of sessions) {
    const li = document.createElement("li");
    li.dataset.id = s.id;
    li.classList.toggle("active", s.id === openId);
    const title = document.createElement("span");
    title.className = "task";
    title.textContent = s.task || "(new session)";
    const meta = document.createElement("span");
    meta.className = "meta";
    const status = document.createElement("span");
    status.className = "status";
    status.textContent = shownStatus(s, openId, openStatus);
    status.dataset.status = status.textContent;
    const id = document.createElement("span");
    id.className = "id";
    id.textContent = prefixes.get(s.id);
    id.title = s.id;
    const ws = document.createElement("span");
    ws.className = "workspace";
    ws.textContent = baseName(s.workspace);
    ws.title = s.workspace;
    meta.append(status, ` · ${s.execution_mode} · `, id, " · ", ws);
    li.append(title, meta);
    li.addEventListener("click", () => onOpen(s.id));
    list.append(li);
  }
}

/** Keeps the open session's item in step with the status its stream reports. */
export function updateListedStatus(list, id, status) {
  const item = list.querySelector(`li[data-id="${CSS.escape(id)}"] .status`);
  if (item) {
    item.textContent = status;
    item.dataset.status = status;
  }
}

/** The keyboard shortcuts, as listed in the shortcuts dialog. */
export const SHORTCUTS = [
  ["Ctrl+Enter / ⌘+Enter", "send the message"],
  ["Esc", "cancel the running turn (in the message box)"],
  ["/", "focus the message box"],
  ["?", "show or hide this list"],
];

/** Fills the shortcuts dialog and wires the keys: `actions` has send, cancel, focus. */
export function installShortcuts(dialog, actions) {
  const table = dialog.querySelector("dl");
  table.replaceChildren();
  for (const [keys, what] of SHORTCUTS) {
    const dt = document.createElement("dt");
    dt.textContent = keys;
    const dd = document.createElement("dd");
    dd.textContent = what;
    table.append(dt, dd);
  }
  document.addEventListener("keydown", (ev) => {
    const typing = ["INPUT", "TEXTAREA", "SELECT"].includes(document.activeElement?.tagName);
    if (ev.key === "Enter" && (ev.ctrlKey || ev.metaKey) && document.activeElement?.id === "message") {
      ev.preventDefault();
      actions.send();
    } else if (ev.key === "Escape" && document.activeElement?.id === "message") {
      actions.cancel();
    } else if (!typing && ev.key === "/") {
      ev.preventDefault();
      actions.focus();
    } else if (!typing && ev.key === "?") {
      ev.preventDefault();
      if (dialog.open) dialog.close();
      else dialog.showModal();
    }
  });
}
