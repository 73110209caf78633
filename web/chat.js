// The transcript: turns events into chat bubbles, streamed text, collapsible tool calls with
// their results and diffs, and notices. Every event type of the stream has a case here, so
// nothing is dropped silently; text always goes in through textContent (never as HTML), and a
// finished answer is rendered as Markdown by building DOM nodes (markdown.js).

import { renderMarkdown } from "./markdown.js";

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

/** `n` and the noun in its number: `1 step`, `2 steps`. */
function count(n, one, many) {
  return n === 1 ? `1 ${one}` : `${n} ${many}`;
}

function short(value, max = 80) {
  const s = typeof value === "string" ? value : JSON.stringify(value);
  return s.length > max ? `${s.slice(0, max - 1)}…` : s;
}

/** The argument a person wants to see first — a path, command, pattern, query — else compact
 *  JSON (as `keel run` and `keel chat` show it). */
export function summarizeArgs(args) {
  if (args && typeof args === "object") {
    for (const key of ["path", "command", "pattern", "query", "symbol", "question"]) {
      if (typeof args[key] !== "string") continue;
      let s = args[key];
      if (key === "path") {
        if (typeof args.symbol === "string") s += ` (${args.symbol})`;
        else if (Number.isInteger(args.start_line)) s += `:${args.start_line}-${args.end_line ?? ""}`;
      }
      return short(s.split("\n").find((l) => l.trim()) ?? "", 100);
    }
  }
  const json = JSON.stringify(args ?? {});
  return json === "{}" ? "" : short(json, 100);
}

/** The head of a file, numbered, from a `created` excerpt `{text, total_lines}`. */
export function renderFile(excerpt, path) {
  const box = el("div", "file-view");
  const lines = excerpt.text === "" ? [] : excerpt.text.split("\n");
  box.append(el("div", "file-head", `${path} · ${excerpt.total_lines} line${excerpt.total_lines === 1 ? "" : "s"}`));
  const pre = el("pre", "file");
  lines.forEach((line, i) => {
    const row = el("span", "line");
    row.append(el("span", "ln", String(i + 1)), document.createTextNode(`${line}\n`));
    pre.append(row);
  });
  box.append(pre);
  const more = excerpt.total_lines - lines.length;
  if (more > 0) box.append(el("div", "more", `… ${more} more line${more === 1 ? "" : "s"}`));
  return box;
}

/** The end of a command's output from an `output_tail` excerpt, with an exit code other than 0. */
export function renderOutput(excerpt, exitCode) {
  const box = el("div", "output-view");
  const earlier = excerpt.total_lines - (excerpt.text === "" ? 0 : excerpt.text.split("\n").length);
  if (earlier > 0) box.append(el("div", "more", `… ${earlier} earlier line${earlier === 1 ? "" : "s"}`));
  box.append(el("pre", "output", excerpt.text === "" ? "(no output)" : excerpt.text));
  if (exitCode !== undefined && exitCode !== null && exitCode !== 0) {
    box.append(el("div", "exit-code", `exit code ${exitCode}`));
  }
  return box;
}

/** A command result's output without `run_command`'s status line and stream labels (results
 *  stored before `output_tail` was recorded). */
function commandOutput(content) {
  return content
    .split("\n")
    .filter((l, i) => !(i === 0 && /^(exit code|killed by)/.test(l)) && l !== "stdout:" && l !== "stderr:")
    .join("\n");
}

/** The first 40 lines of `text`, as the server's excerpts hold them. */
function headOf(text) {
  const lines = text.replace(/\n$/, "").split("\n");
  return { text: lines.slice(0, 40).join("\n"), total_lines: text === "" ? 0 : lines.length };
}

/** The last 40 lines of `text`, as the server's excerpts hold them. */
function tailOf(text) {
  const lines = text.replace(/\s+$/, "").split("\n");
  return { text: lines.slice(-40).join("\n"), total_lines: text.trim() === "" ? 0 : lines.length };
}

const COMMAND_TOOLS = ["run_command", "run_tests"];

/** Renders a unified diff with added, removed and hunk lines marked. */
export function renderDiff(diff) {
  const pre = el("pre", "diff");
  for (const line of diff.split("\n")) {
    let cls = "ctx";
    if (line.startsWith("+++") || line.startsWith("---")) cls = "file";
    else if (line.startsWith("@@")) cls = "hunk";
    else if (line.startsWith("+")) cls = "add";
    else if (line.startsWith("-")) cls = "del";
    pre.append(el("span", `line ${cls}`, `${line}\n`));
  }
  return pre;
}

export class Transcript {
  /**
   * `hooks`: onPhase(phase, previous), onViolation(event), onBlocker(event), onUsage(usage),
   * onStatus(status), onTurnFinished(event), onNotice(text, kind),
   * onApproval(callId, answer) with answer {approve: true, scope} or {approve: false, reason}.
   */
  constructor(root, hooks) {
    this.root = root;
    this.hooks = hooks;
    this.clear();
  }

  clear() {
    this.root.replaceChildren();
    this.bubble = null; // the assistant bubble receiving streamed text
    this.reasoning = null;
    this.tools = new Map(); // tool call id -> its <details>
    this.approvals = new Map(); // call id -> its approval box
    this.usage = null;
    this.agentGroups = new Map(); // subagent run id -> its group <details>
    this.agentsById = new Map(); // agent id (a1) -> its group
    this.agentCalls = new Map(); // agent id -> the agent_open call that started it
  }

  scroll() {
    this.root.scrollTop = this.root.scrollHeight;
  }

  user(text) {
    this.endBubble();
    const b = el("div", "msg user");
    b.append(el("div", "who", "you"), el("div", "text", text));
    this.root.append(b);
  }

  assistantBubble() {
    if (!this.bubble) {
      const b = el("div", "msg assistant streaming");
      b.append(el("div", "who", "agent"));
      this.bubbleText = el("div", "text");
      b.append(this.bubbleText);
      this.root.append(b);
      this.bubble = b;
    }
    return this.bubble;
  }

  endBubble() {
    if (this.bubble) this.bubble.classList.remove("streaming");
    this.bubble = null;
    this.reasoning = null;
  }

  notice(text, kind = "info") {
    this.root.append(el("div", `notice ${kind}`, text));
  }

  /** Applies one event. */
  apply(e) {
    if (e.parent_run_id) {
      this.childEvent(e);
      this.scroll();
      return;
    }
    switch (e.type) {
      case "session_started":
        this.user(e.task);
        if (e.phase) this.hooks.onPhase(e.phase, "");
        this.hooks.onStatus("running");
        break;
      case "session_resumed":
        this.user(e.message || "(continue)");
        if (e.answered_blockers?.length) {
          this.notice(`answers delivered for ${count(e.answered_blockers.length, "blocker", "blockers")}`);
        }
        this.hooks.onStatus("running");
        break;
      case "turn_started":
        break;
      case "assistant_delta":
        if (e.channel === "reasoning") {
          this.assistantBubble();
          if (!this.reasoning) {
            const d = el("details", "reasoning");
            d.append(el("summary", null, "thinking"));
            this.reasoningText = el("div", "text");
            d.append(this.reasoningText);
            this.bubble.insertBefore(d, this.bubbleText);
            this.reasoning = d;
          }
          this.reasoningText.textContent += e.text;
        } else {
          this.assistantBubble();
          this.bubbleText.textContent += e.text;
        }
        break;
      case "assistant_message":
        if (e.text) {
          this.assistantBubble();
          this.bubbleText.replaceChildren(renderMarkdown(e.text));
        }
        this.endBubble();
        if (e.usage) this.addUsage(e.usage);
        break;
      case "model_retry":
        // Text streamed before the failure is superseded by the retry's.
        if (this.bubble) {
          this.bubble.remove();
          this.bubble = null;
        }
        this.notice(retryNotice(e), "warn");
        break;
      case "model_fallback":
        if (this.bubble) {
          this.bubble.remove();
          this.bubble = null;
        }
        this.notice(`model ${e.from} failed; falling back to ${e.to}`, "warn");
        break;
      case "model_notice":
        this.notice(e.message, "warn");
        break;
      case "workspace_check":
        // What Keel's checks after a command moved aside or could NOT check: for the person.
        this.notice(e.message, e.unchecked ? "error" : "warn");
        break;
      case "tool_call":
        this.toolCall(e);
        break;
      case "tool_result":
        this.toolResult(e);
        break;
      case "tool_repaired":
        this.notice(
          e.how.startsWith("name: ")
            ? `${e.from} → ${e.to} (${e.how.slice(6)})`
            : `arguments repaired: ${e.how}`,
          "repair",
        );
        break;
      case "phase_changed":
        this.endBubble();
        this.notice(`phase: ${e.previous || "start"} → ${e.phase}`, "phase");
        this.hooks.onPhase(e.phase, e.previous);
        break;
      case "phase_violation":
        this.notice(`phase violation: ${e.tool} is not allowed in ${e.phase}. ${e.hint}`, "violation");
        this.hooks.onViolation(e);
        break;
      case "phase_validation":
        this.notice(
          `${e.phase} validation ${e.passed ? "passed" : "failed"}${e.after_rollback ? " after the rollback" : ""}: ${e.command}${e.passed ? "" : `\n${short(e.output, 400)}`}`,
          e.passed ? "ok" : "warn",
        );
        break;
      case "rollback_started":
        this.notice(`rolling back ${e.phase}: ${e.command}`, "warn");
        break;
      case "rollback_completed":
        this.notice(`rolled back ${e.phase}; the workspace validates again`, "ok");
        break;
      case "rollback_failed":
        this.notice(`rollback of ${e.phase} failed: ${e.reason}`, "error");
        break;
      case "checkpoint":
        this.notice(`checkpoint: ${e.phase} (${e.reason})`, "phase");
        break;
      case "snapshot":
        this.notice(`snapshot: the workspace as of the end of turn ${e.turn} (undo to it with turn ${e.turn})`);
        break;
      case "snapshot_failed":
        this.notice(`no snapshot for turn ${e.turn}: ${e.message}`, "warn");
        break;
      case "workspace_pushed":
        this.notice(`pushed ${String(e.commit).slice(0, 10)} to ${e.branch} of ${e.url}`);
        break;
      case "undo": {
        const changed = [...(e.modified ?? []), ...(e.recreated ?? []), ...(e.removed ?? [])];
        this.notice(
          `undo: workspace restored to the end of turn ${e.turn}${changed.length ? ` (${changed.join(", ")})` : " (nothing changed)"}`,
          "warn",
        );
        break;
      }
      case "compaction":
        this.notice(`context compacted: ${e.tokens_before} → ${e.tokens_after} tokens (${e.summarizer})`);
        break;
      case "blocker":
        this.endBubble();
        this.notice(`blocked: ${e.question}`, "warn");
        this.hooks.onBlocker(e);
        break;
      case "verification":
        this.notice(
          `verification ${e.passed ? "passed" : "failed"}: ${e.gate}${e.passed ? "" : `\n${short(e.output, 400)}`}`,
          e.passed ? "ok" : "warn",
        );
        break;
      case "recovery":
        this.notice(`recovering from ${e.error_code} (attempt ${e.attempt})`, "warn");
        break;
      case "error":
        this.endBubble();
        // A cancellation is what the person asked for: `session_finished` says "cancelled".
        if (e.error_code !== "cancelled") this.notice(`error [${e.error_code}]: ${e.message}`, "error");
        break;
      case "approval_requested":
        this.approvalRequested(e);
        break;
      case "approval_resolved":
        this.approvalResolved(e);
        break;
      case "session_finished":
        this.endBubble();
        for (const c of e.children ?? []) {
          this.notice(
            `subagent ${c.agent_id} (${c.role}, ${c.model}): ${c.status} · ${count(c.iterations, "step", "steps")} · ${c.usage.input_tokens} in · ${c.usage.output_tokens} out`,
          );
        }
        this.usage = e.usage;
        this.hooks.onUsage(e.usage);
        this.hooks.onStatus(e.status);
        break;
      case "turn_finished":
        this.endBubble();
        if (e.message) this.notice(`turn ${e.status}: ${e.message}`, "error");
        this.hooks.onStatus(e.status);
        this.hooks.onTurnFinished(e);
        break;
      default:
        // A newer server's event: shown, never dropped.
        this.notice(`${e.type}: ${short(e, 200)}`);
    }
    this.scroll();
  }

  addUsage(usage) {
    const u = this.usage ?? { input_tokens: 0, output_tokens: 0, cost_usd: 0, requests: 0 };
    this.usage = {
      input_tokens: u.input_tokens + (usage.input_tokens ?? 0),
      output_tokens: u.output_tokens + (usage.output_tokens ?? 0),
      cost_usd: (u.cost_usd ?? 0) + (usage.cost_usd ?? 0),
      requests: (u.requests ?? 0) + (usage.requests ?? 0),
    };
    this.hooks.onUsage(this.usage);
  }

  /** A subagent's event (it carries a `parent_run_id`): grouped under the `agent_open` call
   *  that started the child, one short line each; its answer is not streamed. */
  childEvent(e) {
    let group = this.agentGroups.get(e.run_id);
    if (!group) {
      group = el("details", "subagent");
      group.open = true;
      group.append(el("summary", null, "subagent"));
      (this.agentCalls.get(e.agent_id) ?? this.root).append(group);
      this.agentGroups.set(e.run_id, group);
    }
    const line = (text, kind = "") => group.append(el("div", `subagent-line ${kind}`, text));
    switch (e.type) {
      case "agent_started":
        group.querySelector("summary").textContent = `subagent ${e.agent_id} (${e.role}, ${e.model}): ${short(e.task, 100)}`;
        this.agentsById.set(e.agent_id, group);
        group.dataset.agent = e.agent_id;
        break;
      case "agent_finished":
        line(`${e.status} after ${count(e.iterations, "step", "steps")}`, e.status === "completed" ? "ok" : "error");
        group.classList.add(e.status);
        break;
      case "tool_call":
        line(`→ ${e.name} ${short(e.arguments)}`, "call");
        break;
      case "tool_result":
        if (e.is_error) line(`✗ ${short(e.content, 200)}`, "error");
        break;
      case "assistant_message":
        if (e.text) line(short(e.text, 400), "answer");
        break;
      case "approval_requested":
        this.approvalRequested(e, group, `subagent ${group.dataset.agent ?? ""}: `);
        break;
      case "approval_resolved":
        this.approvalResolved(e);
        break;
      case "error":
        line(`error [${e.error_code}]: ${e.message}`, "error");
        break;
      default:
        break; // deltas, steps and the rest: the lines above tell the story
    }
  }

  /** A call waiting for a person: what it is, and approve / deny buttons (`into` a
   *  subagent's group, labelled with it, for a child's call). */
  approvalRequested(e, into = this.root, label = "") {
    this.endBubble();
    const box = el("div", "approval");
    box.dataset.callId = e.call_id;
    box.append(
      el("div", "approval-what", `${label}approval needed (${e.class}): ${e.summary}`),
    );
    if (e.reason) box.append(el("div", "approval-why", e.reason));
    const buttons = el("div", "approval-buttons");
    const answer = (a) => {
      for (const b of buttons.querySelectorAll("button")) b.disabled = true;
      this.hooks.onApproval?.(e.call_id, a);
    };
    const approve = el("button", "approve", "Approve");
    approve.type = "button";
    approve.addEventListener("click", () => answer({ approve: true, scope: "once" }));
    const always = el("button", "approve-session", "Approve for this session");
    always.type = "button";
    always.addEventListener("click", () => answer({ approve: true, scope: "session" }));
    const deny = el("button", "deny", "Deny");
    deny.type = "button";
    deny.addEventListener("click", () => answer({ approve: false, reason: null }));
    buttons.append(approve, always, deny);
    box.append(buttons);
    into.append(box);
    this.approvals.set(e.call_id, box);
  }

  approvalResolved(e) {
    const text = e.approved
      ? `approved${e.scope === "session" ? " for this session" : ""}`
      : `denied${e.reason ? `: ${e.reason}` : ""}`;
    const box = this.approvals.get(e.call_id);
    if (!box) {
      this.notice(`${e.call_id}: ${text}`, e.approved ? "ok" : "warn");
      return;
    }
    box.querySelector(".approval-buttons")?.remove();
    box.classList.add(e.approved ? "approved" : "denied");
    box.append(el("div", "approval-answer", text));
  }

  toolCall(e) {
    this.endBubble();
    const d = el("details", "tool-call pending");
    d.dataset.tool = e.name;
    d.args = e.arguments ?? {};
    const summary = el("summary");
    summary.append(el("span", "tool-name", e.name), el("span", "tool-args", summarizeArgs(e.arguments)));
    d.append(summary);
    // The full arguments, collapsed: the summary line already shows their start.
    const args = el("details", "args");
    args.append(el("summary", null, "arguments"), el("pre", null, JSON.stringify(e.arguments, null, 2)));
    d.append(args);
    this.root.append(d);
    this.tools.set(e.id, d);
  }

  /** One view of the result, from its typed details (as `keel run` and `keel chat` draw it):
   *  the diff of an edit (with what the tool said besides it), the head of a created file, the
   *  tail of a command's output; the text for anything else. */
  toolResult(e) {
    let d = this.tools.get(e.id);
    if (!d) {
      this.toolCall({ id: e.id, name: e.name, arguments: {} });
      d = this.tools.get(e.id);
    }
    d.classList.remove("pending");
    d.classList.add(e.is_error ? "failed" : "ok");
    const opened = e.name === "agent_open" && !e.is_error && /Started subagent (\S+)/.exec(e.content);
    if (opened) {
      const id = opened[1].replace(/[^\w-]/g, "");
      this.agentCalls.set(id, d);
      const group = this.agentsById.get(id);
      if (group) d.append(group); // the child started first: move it under its call
    }
    this.resultView(d, e);
    // The full arguments go last, under what the call did.
    const args = d.querySelector(":scope > details.args");
    if (args) d.append(args);
  }

  /** The result's view inside the call's cell `d`. */
  resultView(d, e) {
    // The typed part of the result (older stored events carried the diff in metadata).
    const details = e.details ?? {};
    const diff = details.diff ?? e.metadata?.diff;
    const plan = e.metadata?.plan;
    const created =
      details.created ?? (e.name === "create_file" && typeof d.args?.content === "string" ? headOf(d.args.content) : null);
    const tail =
      details.output_tail ?? (COMMAND_TOOLS.includes(e.name) ? tailOf(commandOutput(e.content)) : null);
    if (diff && !e.is_error) {
      d.append(renderDiff(diff));
      const rest = withoutDiff(e.content, diff);
      if (rest) d.append(el("pre", "result note", rest));
      d.open = true;
    } else if (created && !e.is_error) {
      d.append(renderFile(created, details.files?.[0] ?? d.args?.path ?? ""));
      d.open = true;
    } else if (tail && (tail.text !== "" || !e.is_error)) {
      d.append(renderOutput(tail, details.exit_code));
      d.classList.toggle("exit-failed", details.exit_code !== undefined && details.exit_code !== 0);
      d.open = true;
      return this.truncated(d, details);
    } else if (plan && Array.isArray(plan.steps) && !e.is_error) {
      const list = el("ul", "plan");
      for (const step of plan.steps) {
        const mark = step.status === "done" ? "✓" : step.status === "in_progress" ? "▸" : "○";
        list.append(el("li", `plan-step ${step.status}`, `${mark} ${step.step}`));
      }
      d.append(list);
      d.open = true;
    } else {
      d.append(el("pre", `result${e.is_error ? " error" : ""}`, e.content));
    }
    if (details.exit_code !== undefined && details.exit_code !== 0) {
      d.append(el("div", "exit-code", `exit code ${details.exit_code}`));
    }
    this.truncated(d, details);
  }

  /** Says when the model was shown only part of the result. */
  truncated(d, details) {
    if (details.truncated) {
      d.append(
        el("div", "truncated", `the model saw ${details.truncated.shown_chars} of ${details.truncated.original_chars} characters`),
      );
    }
  }
}

/** A tool result's text without the diff it carries (shown rendered instead): the block of
 *  diff lines from the diff's first line on is dropped; what the tool said before and after it
 *  (the summary, lint findings) stays. */
export function withoutDiff(content, diff) {
  const first = diff.split("\n")[0];
  const lines = content.split("\n");
  const start = lines.indexOf(first);
  if (start < 0) return content.trim();
  let end = start;
  while (end < lines.length && /^([ +\-@\\]|…|$)/.test(lines[end])) end++;
  return [...lines.slice(0, start), ...lines.slice(end)].join("\n").trim();
}

/** One short line for a model retry: what failed, attempt k of n, the wait. */
export function retryNotice(e) {
  const of = e.attempts ? ` of ${e.attempts}` : "";
  const wait = (e.delay_ms / 1000).toFixed(1);
  return `${e.message} — attempt ${e.attempt + 1}${of}, waiting ${wait}s`;
}
