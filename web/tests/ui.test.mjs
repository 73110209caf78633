// Drives Keel's web UI in headless Debian chromium (playwright-core, no browser download).
//
//   node ui.test.mjs <server-url> <workspace> <react-script> <plan-exec-script> <screenshot-dir>
//
// Started by crates/keel-cli/tests/serve.rs against a real `keel serve` with the scripted
// provider. Exits non-zero with a message on the first failed expectation. Screenshots at a
// wide (1280 px) and a narrow (400 px) width are kept in <screenshot-dir>.

import { chromium } from "playwright-core";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";

const [url, workspace, reactScript, planScript, shots] = process.argv.slice(2);
if (!shots) {
  console.error("usage: node ui.test.mjs <url> <workspace> <react-script> <plan-exec-script> <screenshot-dir>");
  process.exit(2);
}
mkdirSync(shots, { recursive: true });

const executablePath = process.env.CHROMIUM ?? "/usr/bin/chromium";
const browser = await chromium.launch({
  executablePath,
  headless: true,
  args: [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
  ],
});

const problems = [];
let page;

function expect(condition, message) {
  if (!condition) throw new Error(message);
}

async function step(name, fn) {
  const started = Date.now();
  try {
    await fn();
    console.log(`ok   ${name} (${Date.now() - started} ms)`);
  } catch (err) {
    console.error(`FAIL ${name}: ${err.message}`);
    if (page) await page.screenshot({ path: join(shots, "failure.png"), fullPage: true }).catch(() => {});
    await browser.close();
    process.exit(1);
  }
}

/** Records what the page shows over time: phases, toasts, streamed text snapshots. */
function installRecorder() {
  window.__rec = { phases: [], toasts: [], textStates: [], statuses: [] };
  const rec = window.__rec;
  const indicator = document.getElementById("phase-indicator");
  new MutationObserver(() => {
    const p = indicator.dataset.phase;
    if (p && rec.phases[rec.phases.length - 1] !== p) rec.phases.push(p);
  }).observe(indicator, { attributes: true, attributeFilter: ["data-phase"] });
  new MutationObserver((muts) => {
    for (const m of muts) {
      for (const n of m.addedNodes) {
        if (n.classList?.contains("toast")) rec.toasts.push({ kind: n.className, text: n.textContent });
      }
    }
  }).observe(document.getElementById("toasts"), { childList: true });
  new MutationObserver(() => {
    for (const t of document.querySelectorAll("#transcript .msg.assistant.streaming .text")) {
      const s = t.textContent;
      if (rec.textStates[rec.textStates.length - 1] !== s) rec.textStates.push(s);
    }
  }).observe(document.getElementById("transcript"), { childList: true, subtree: true, characterData: true });
  const status = document.getElementById("session-status");
  new MutationObserver(() => rec.statuses.push(status.textContent)).observe(status, { childList: true, characterData: true, subtree: true });
}

async function createSession(script, mode) {
  await page.fill('#new-session input[name="workspace"]', workspace);
  await page.fill('#new-session input[name="provider"]', "scripted");
  await page.fill('#new-session input[name="script"]', script);
  await page.selectOption('#new-session select[name="execution_mode"]', mode);
  const before = await page.textContent("#session-id");
  await page.click("#create-session");
  await page.waitForSelector("#session-header:not([hidden])");
  // The new session is open (not the previous one still on screen).
  await page.waitForFunction((old) => {
    const id = document.getElementById("session-id").textContent;
    return id && id !== old;
  }, before);
  await page.waitForFunction(() => document.getElementById("connection").dataset.state === "live");
  await page.evaluate(installRecorder);
}

async function send(text) {
  await page.fill("#message", text);
  await page.click("#send");
}

async function waitForStatus(status, timeout = 30000) {
  await page.waitForFunction(
    (s) => document.getElementById("session-status").textContent === s && !document.body.classList.contains("running"),
    status,
    { timeout },
  );
}

await step("the page loads without script errors", async () => {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  page = await context.newPage();
  page.on("pageerror", (err) => problems.push(`page error: ${err.message}`));
  page.on("console", (msg) => {
    if (msg.type() === "error") problems.push(`console error: ${msg.text()}`);
  });
  await page.goto(url);
  await page.waitForSelector("#new-session");
  expect(problems.length === 0, problems.join("\n"));
});

await step("a react session streams text and shows tool calls, with no phase indicator", async () => {
  await createSession(reactScript, "react");
  expect(await page.isHidden("#phase-indicator"), "the phase indicator is hidden for react sessions");
  await send("add a mul function");
  await waitForStatus("completed");
  const rec = await page.evaluate(() => window.__rec);
  expect(rec.textStates.length >= 3, `text arrived in pieces (saw ${rec.textStates.length} states)`);
  const final = await page.textContent("#transcript .msg.assistant:last-of-type .text");
  expect(final.includes("Added mul"), `final answer shown: ${final}`);
  const tools = await page.$$eval("#transcript .tool-call", (els) => els.map((e) => e.dataset.tool));
  expect(
    JSON.stringify(tools) === JSON.stringify(["read_file", "edit_file", "create_file"]),
    `tool calls shown: ${tools}`,
  );
  // Tool calls are collapsible; the result is inside, the full arguments collapsed beside it.
  const first = page.locator("#transcript .tool-call").first();
  expect(!(await first.evaluate((d) => d.open)), "tool calls start collapsed");
  await first.locator(":scope > summary").click();
  expect(await first.evaluate((d) => d.open), "a tool call opens");
  expect((await first.locator("pre.result").textContent()).includes("fn add"), "its result is shown");
  expect(!(await first.locator("details.args").evaluate((d) => d.open)), "its arguments are collapsed");
  // An edit shows one view: the rendered diff, not the raw diff again as text.
  const edit = page.locator('#transcript .tool-call[data-tool="edit_file"]');
  const views = await edit.evaluate((d) => ({
    diffs: d.querySelectorAll("pre.diff").length,
    raw: [...d.querySelectorAll(":scope > pre.result")].map((p) => p.textContent).join("\n"),
    added: [...d.querySelectorAll("pre.diff .add")].map((l) => l.textContent).join(""),
  }));
  expect(views.diffs === 1, `one rendered diff: ${JSON.stringify(views)}`);
  expect(!/^(@@|\+\/\/\/|--- )/m.test(views.raw), `no raw diff beside it: ${views.raw}`);
  expect(views.added.includes("/// Adds two numbers."), `the diff shows the change: ${views.added}`);
  // The answer is Markdown, rendered; the HTML in it is text and never runs.
  const answer = await page.evaluate(() => {
    const last = [...document.querySelectorAll("#transcript .msg.assistant .text")].pop();
    return {
      strong: last.querySelector("strong")?.textContent,
      code: last.querySelector("code")?.textContent,
      items: last.querySelectorAll("li").length,
      elements: last.querySelectorAll("img, script").length,
      text: last.textContent,
      xss: window.__xss ?? null,
    };
  });
  expect(answer.strong === "mul" && answer.code === "src/mul.rs" && answer.items === 2, `markdown rendered: ${JSON.stringify(answer)}`);
  expect(answer.elements === 0 && answer.xss === null, `no HTML from the model ran: ${JSON.stringify(answer)}`);
  expect(answer.text.includes("<img src=x"), `the HTML is shown as text: ${answer.text}`);
  // Diffs (metadata.diff of a write) render with added and removed lines marked.
  const diff = await page.evaluate(async () => {
    const { renderDiff } = await import("/ui/chat.js");
    const pre = renderDiff("--- a/src/lib.rs\n+++ b/src/lib.rs\n@@ -1,1 +1,2 @@\n-old\n+new\n same");
    return [...pre.children].map((c) => c.className);
  });
  expect(
    JSON.stringify(diff) === JSON.stringify(["line file", "line file", "line hunk", "line del", "line add", "line ctx"]),
    `diff lines classified: ${diff}`,
  );
  const usage = await page.textContent("#usage");
  expect(/\d+ requests · [\d,]+ tokens/.test(usage), `usage shown: ${usage}`);
  const listed = await page.textContent("#session-list");
  expect(listed.includes("add a mul function"), "the session list shows the task");
  // The list: an id prefix that is unique (and what the CLI accepts), the workspace, and the
  // same status as the header.
  const item = await page.evaluate(() => {
    const li = document.querySelector("#session-list li.active");
    return {
      id: li.dataset.id,
      shown: li.querySelector(".id").textContent,
      others: [...document.querySelectorAll("#session-list li")].map((l) => l.dataset.id).filter((i) => i !== li.dataset.id),
      workspace: li.querySelector(".workspace").title,
      status: li.querySelector(".status").textContent,
      header: document.getElementById("session-status").textContent,
      headerWorkspace: document.getElementById("session-workspace").textContent,
    };
  });
  expect(item.id.startsWith(item.shown) && item.shown.length >= 15, `id prefix: ${JSON.stringify(item)}`);
  expect(item.others.every((o) => !o.startsWith(item.shown)), `the prefix is unique: ${JSON.stringify(item)}`);
  expect(item.workspace === workspace && item.headerWorkspace === workspace, `workspace shown: ${JSON.stringify(item)}`);
  expect(item.status === item.header, `list and header agree: ${JSON.stringify(item)}`);
  await page.screenshot({ path: join(shots, "react.png"), fullPage: true });
});

await step("status agrees while a turn runs", async () => {
  await createSession(reactScript, "react");
  await send("add a mul function again");
  await page.waitForFunction(() => {
    const li = document.querySelector("#session-list li.active .status");
    return li && li.textContent === document.getElementById("session-status").textContent;
  });
  await page.waitForFunction(
    () => !document.body.classList.contains("running") && document.getElementById("session-status").textContent !== "running",
    null,
    { timeout: 30000 },
  );
  const [listed, header] = await page.evaluate(() => [
    document.querySelector("#session-list li.active .status").textContent,
    document.getElementById("session-status").textContent,
  ]);
  expect(listed === header, `list ${listed} vs header ${header}`);
});

await step("approve and deny buttons answer a call that waits for a person", async () => {
  writeFileSync(join(workspace, "scratch-approved.txt"), "approve me\n");
  writeFileSync(join(workspace, "scratch-denied.txt"), "deny me\n");
  await createSession(join(dirname(reactScript), "approval.yaml"), "react");
  await send("clean up the scratch files");
  const first = page.locator("#transcript .approval").nth(0);
  await first.waitFor({ timeout: 30000 });
  const what = await first.locator(".approval-what").textContent();
  expect(what.includes("rm scratch-approved.txt"), `the approval names the command: ${what}`);
  expect(existsSync(join(workspace, "scratch-approved.txt")), "nothing runs before the answer");
  await first.locator("button.approve").click();
  await page.waitForSelector("#transcript .approval.approved");
  const second = page.locator("#transcript .approval").nth(1);
  await second.waitFor({ timeout: 30000 });
  await second.locator("button:has-text('Deny')").click();
  await page.waitForSelector("#transcript .approval.denied");
  await waitForStatus("completed");
  expect(!existsSync(join(workspace, "scratch-approved.txt")), "the approved command ran");
  expect(existsSync(join(workspace, "scratch-denied.txt")), "the denied command did not run");
});

await step("keyboard shortcuts are listed", async () => {
  await page.evaluate(() => document.activeElement?.blur());
  await page.keyboard.press("?");
  await page.waitForFunction(() => document.getElementById("shortcuts").open);
  const text = await page.textContent("#shortcuts");
  expect(text.includes("Ctrl+Enter") && text.includes("Esc"), `shortcuts listed: ${text}`);
  await page.keyboard.press("Escape");
  await page.waitForFunction(() => !document.getElementById("shortcuts").open);
});

await step("a plan_exec session moves through all four phases and toasts a violation", async () => {
  await createSession(planScript, "plan_exec");
  expect(await page.isVisible("#phase-indicator"), "the phase indicator is shown for plan_exec");
  const current = await page.getAttribute("#phase-indicator .phase-step.current", "data-step");
  expect(current === "planning", `starts at planning (${current})`);
  await send("add a sub function, with a plan");
  await waitForStatus("completed");
  const rec = await page.evaluate(() => window.__rec);
  expect(
    JSON.stringify(rec.phases) === JSON.stringify(["planning", "building", "verification", "delivery"]),
    `phases in order: ${JSON.stringify(rec.phases)}`,
  );
  const violations = rec.toasts.filter((t) => t.kind.includes("violation"));
  expect(violations.length === 1, `one violation toast: ${JSON.stringify(rec.toasts)}`);
  expect(violations[0].text.includes("planning"), `the toast names the phase: ${violations[0].text}`);
  const steps = await page.$$eval("#phase-indicator .phase-step", (els) =>
    els.map((e) => `${e.dataset.step}:${e.classList.contains("current") ? "current" : e.classList.contains("done") ? "done" : "todo"}`),
  );
  expect(
    JSON.stringify(steps) === JSON.stringify(["planning:done", "building:done", "verification:done", "delivery:current"]),
    `the indicator ends at delivery: ${steps}`,
  );
  expect(rec.textStates.length >= 3, "text streamed");
  const tools = await page.$$eval("#transcript .tool-call", (els) => els.map((e) => e.dataset.tool));
  expect(tools.includes("advance_phase"), `tool calls shown: ${tools}`);
  await page.screenshot({ path: join(shots, "plan_exec.png"), fullPage: true });
});

await step("undo restores the workspace from before the last change", async () => {
  expect(existsSync(join(workspace, "src/sub.rs")), "the plan_exec session wrote src/sub.rs");
  await page.click("#undo");
  await page.waitForSelector("#transcript .notice:has-text('undo: workspace restored')");
  const rec = await page.evaluate(() => window.__rec);
  expect(rec.toasts.some((t) => t.text.includes("Restored the end of turn")), `undo toast: ${JSON.stringify(rec.toasts)}`);
  expect(!existsSync(join(workspace, "src/sub.rs")), "src/sub.rs is gone");
  expect(existsSync(join(workspace, "src/mul.rs")), "the other session's file stays");
});

/** Whether any toast's box overlaps a control. */
async function toastsCoverControls() {
  return page.evaluate(async () => {
    const { toast } = await import("/ui/phase.js");
    toast("a long notice that could cover something important, like the buttons of the composer", "violation", 60000);
    const boxes = (sel) => [...document.querySelectorAll(sel)].map((e) => e.getBoundingClientRect()).filter((r) => r.width > 0);
    const toasts = boxes("#toasts .toast");
    const controls = boxes("button:not([disabled]), #composer button, textarea, select, input");
    const overlap = (a, b) => a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;
    const hits = toasts.some((t) => controls.some((c) => overlap(t, c)));
    document.querySelectorAll("#toasts .toast").forEach((t) => t.remove());
    return hits;
  });
}

await step("the layout works from 400 px to wide, and toasts never cover controls", async () => {
  for (const [width, name] of [[1280, "wide.png"], [400, "narrow.png"]]) {
    await page.setViewportSize({ width, height: 900 });
    const fits = await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth);
    expect(fits, `no horizontal scrolling at ${width} px`);
    await page.locator("#send").scrollIntoViewIfNeeded();
    const send = await page.locator("#send").boundingBox();
    expect(send && send.x >= 0 && send.x + send.width <= width, `the Send button is on screen at ${width} px: ${JSON.stringify(send)}`);
    expect(!(await toastsCoverControls()), `a toast covers a control at ${width} px`);
    await page.screenshot({ path: join(shots, name), fullPage: true });
  }
  await page.setViewportSize({ width: 1280, height: 900 });
});

await step("reopening the session replays its history, phase included", async () => {
  const id = await page.getAttribute("#session-list li.active", "data-id");
  await page.reload();
  await page.click(`#session-list li[data-id="${id}"]`);
  await page.waitForFunction(() => document.querySelectorAll("#transcript .tool-call").length > 0);
  await page.waitForFunction(() => document.getElementById("phase-indicator").dataset.phase === "delivery");
  expect(problems.length === 0, problems.join("\n"));
});

await step("a subagent's events are grouped under the agent_open call that started it", async () => {
  const shown = await page.evaluate(async () => {
    const { Transcript } = await import("/ui/chat.js");
    const root = document.createElement("div");
    const t = new Transcript(root, { onPhase() {}, onViolation() {}, onBlocker() {}, onUsage() {}, onStatus() {}, onTurnFinished() {} });
    const parent = { session_id: "s", run_id: "r1" };
    const child = { session_id: "s", run_id: "r2", parent_run_id: "r1" };
    t.apply({ ...parent, type: "tool_call", id: "c1", name: "agent_open", arguments: { role: "explorer", task: "look" } });
    // The child may start before the parent records agent_open's result.
    t.apply({ ...child, type: "agent_started", agent_id: "a1", role: "explorer", task: "look", model: "m" });
    t.apply({ ...child, type: "tool_call", id: "g1", name: "grep", arguments: { pattern: "fn" } });
    t.apply({ ...child, type: "assistant_delta", text: "streamed", channel: "text" });
    t.apply({ ...parent, type: "tool_result", id: "c1", name: "agent_open", is_error: false, content: "Started subagent a1 (role `explorer`)" });
    t.apply({ ...child, type: "assistant_message", text: "found it", tool_calls: 0, usage: {} });
    t.apply({ ...child, type: "agent_finished", agent_id: "a1", role: "explorer", status: "completed", iterations: 2, usage: {} });
    const call = root.querySelector(".tool-call");
    const group = call?.querySelector("details.subagent");
    return {
      grouped: Boolean(group),
      summary: group?.querySelector("summary").textContent,
      lines: [...(group?.querySelectorAll(".subagent-line") ?? [])].map((l) => l.textContent),
      bubbles: root.querySelectorAll(".msg.assistant").length,
    };
  });
  expect(shown.grouped, `the child's group sits in the agent_open call: ${JSON.stringify(shown)}`);
  expect(shown.summary.startsWith("subagent a1 (explorer"), `labelled: ${shown.summary}`);
  expect(JSON.stringify(shown.lines) === JSON.stringify(['→ grep {"pattern":"fn"}', "found it", "completed after 2 steps"]), `lines: ${JSON.stringify(shown.lines)}`);
  expect(shown.bubbles === 0, "a child's text never streams into the parent's answer");
});

await browser.close();
console.log(`screenshots in ${shots}`);
