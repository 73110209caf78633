// The API client: REST calls with the bearer token, and a session socket that reconnects by
// itself and resumes from the last event it saw (the server replays what was missed; events
// already seen are dropped by their seq).

const TOKEN_KEY = "keel.token";

/** The API token: from the page's `#token=` fragment (then removed from the address bar), else
 *  remembered for this browser tab. */
export function initToken() {
  const m = location.hash.match(/token=([^&]+)/);
  if (m) {
    sessionStorage.setItem(TOKEN_KEY, decodeURIComponent(m[1]));
    history.replaceState(null, "", location.pathname + location.search);
  }
}

export function setToken(token) {
  sessionStorage.setItem(TOKEN_KEY, token);
}

function token() {
  return sessionStorage.getItem(TOKEN_KEY);
}

/** An API failure with the server's `{error_code, message}`. */
export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

async function call(method, path, body) {
  const headers = {};
  const t = token();
  if (t) headers["Authorization"] = `Bearer ${t}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const res = await fetch(`/api/v1${path}`, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  const data = text ? JSON.parse(text) : null;
  if (!res.ok) {
    throw new ApiError(res.status, data?.error_code ?? "error", data?.message ?? res.statusText);
  }
  return data;
}

export const api = {
  call,
  listSessions: () => call("GET", "/sessions?limit=100"),
  getSession: (id) => call("GET", `/sessions/${encodeURIComponent(id)}`),
  createSession: (spec) => call("POST", "/sessions", spec),
  deleteSession: (id) => call("DELETE", `/sessions/${encodeURIComponent(id)}`),
  cancel: (id) => call("POST", `/sessions/${encodeURIComponent(id)}/cancel`),
  blockers: (id) => call("GET", `/sessions/${encodeURIComponent(id)}/blockers`),
  undo: (id, turn) => call("POST", `/sessions/${encodeURIComponent(id)}/undo`, turn === undefined ? {} : { turn }),
  answerBlocker: (id, blockerId, answer) =>
    call("POST", `/sessions/${encodeURIComponent(id)}/blockers/${encodeURIComponent(blockerId)}/answer`, { answer }),
};

/**
 * A session's live event stream over a WebSocket.
 * `onEvent(event)` gets every event once, in seq order; `onRequestError(err)` gets refusals
 * of what this client sent; `onState("live" | "connecting" | "closed")` follows the connection.
 */
export class SessionSocket {
  constructor(sessionId, { onEvent, onRequestError, onState }) {
    this.sessionId = sessionId;
    this.onEvent = onEvent;
    this.onRequestError = onRequestError;
    this.onState = onState;
    this.lastSeq = 0;
    this.retryMs = 250;
    this.closed = false;
    this.ws = null;
    this.connect();
  }

  connect() {
    if (this.closed) return;
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    let url = `${scheme}://${location.host}/api/v1/sessions/${encodeURIComponent(this.sessionId)}/ws?since_seq=${this.lastSeq}`;
    const t = token();
    if (t) url += `&token=${encodeURIComponent(t)}`;
    this.onState("connecting");
    const ws = new WebSocket(url);
    this.ws = ws;
    ws.onopen = () => {
      this.retryMs = 250;
      this.onState("live");
    };
    ws.onmessage = (msg) => {
      let data;
      try {
        data = JSON.parse(msg.data);
      } catch {
        return;
      }
      if (data.type === "request_error") {
        this.onRequestError(data);
        return;
      }
      if (typeof data.seq !== "number" || data.seq <= this.lastSeq) return;
      this.lastSeq = data.seq;
      this.onEvent(data);
    };
    ws.onclose = () => {
      if (this.ws !== ws) return;
      this.ws = null;
      if (this.closed) {
        this.onState("closed");
        return;
      }
      this.onState("connecting");
      setTimeout(() => this.connect(), this.retryMs);
      this.retryMs = Math.min(this.retryMs * 2, 5000);
    };
  }

  /** Sends a client message; false when not connected. */
  send(message) {
    if (!this.ws || this.ws.readyState !== WebSocket.OPEN) return false;
    this.ws.send(JSON.stringify(message));
    return true;
  }

  close() {
    this.closed = true;
    if (this.ws) this.ws.close();
  }
}
