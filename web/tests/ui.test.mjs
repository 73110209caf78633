// Drives Keel's web UI in headless Debian chromium (playwright-core, no browser download).
//
//   node ui.test.mjs <server-url> <workspace> <react-script> <plan-exec-script> <screenshot-dir>
//
// Started by crates/keel-cli/tests/serve.rs against a real `keel serve` with the scripted
// provider. Exits non-zero with a message on the first failed expectation. Screenshots at a
// wide (1280 px) and a narrow (400 px) width are kept in <screenshot-dir> (session-1280.png and
// session-400.png are the ones docs/screenshots keeps). OUTSIDE_TASK, when set, is the task of
// a session stored outside the server's workspace roots: the sidebar must not list it.

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
  // The session has an address of its own.
  const id = await page.textContent("#session-id");
  const path = await page.evaluate(() => location.pathname);
  expect(path === `/s/${id}`, `the address names the session: ${path} for ${id}`);
  return id;
}

/** Whether two boxes overlap. */
const overlap = (a, b) => a && b && a.x < b.x + b.width && b.x < a.x + a.width && a.y < b.y + b.height && b.y < a.y + a.height;

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
    JSON.stringify(tools) === JSON.stringify(["read_file", "edit_file", "create_file", "run_command"]),
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

await step("tool calls are cells: a created file's content, an edit's diff, a command's output", async () => {
  const cells = await page.evaluate(() => {
    const of = (name) => document.querySelector(`#transcript .tool-call[data-tool="${name}"]`);
    const create = of("create_file");
    const run = of("run_command");
    return {
      args: [...document.querySelectorAll("#transcript .tool-call .tool-args")].map((a) => a.textContent),
      createOpen: create.open,
      fileHead: create.querySelector(".file-head")?.textContent,
      fileLines: [...create.querySelectorAll("pre.file .line")].map((l) => l.textContent),
      createRaw: create.querySelector(":scope > pre.result")?.textContent ?? null,
      runOpen: run.open,
      output: run.querySelector(".output-view pre.output")?.textContent,
      editDiff: of("edit_file").querySelectorAll("pre.diff .add").length,
    };
  });
  expect(
    JSON.stringify(cells.args) === JSON.stringify(["src/lib.rs", "src/lib.rs", "src/mul.rs", "ls src"]),
    `each call names its path or command, not raw JSON: ${JSON.stringify(cells.args)}`,
  );
  expect(cells.createOpen && cells.fileHead === "src/mul.rs · 3 lines", `the created file is shown: ${JSON.stringify(cells)}`);
  expect(
    JSON.stringify(cells.fileLines) === JSON.stringify(["1pub fn mul(a: i32, b: i32) -> i32 {\n", "2    a * b\n", "3}\n"]),
    `its lines, numbered: ${JSON.stringify(cells.fileLines)}`,
  );
  expect(cells.createRaw === null, `no escaped "content" string: ${cells.createRaw}`);
  expect(cells.runOpen && cells.output === "lib.rs\nmul.rs", `the command's output: ${JSON.stringify(cells)}`);
  expect(cells.editDiff > 0, "the edit's diff");
  for (const [width, name] of [[1280, "session-1280.png"], [400, "session-400.png"]]) {
    await page.setViewportSize({ width, height: width === 1280 ? 800 : 760 });
    await page.locator('#transcript .tool-call[data-tool="create_file"]').scrollIntoViewIfNeeded();
    await page.screenshot({ path: join(shots, name) });
  }
  await page.setViewportSize({ width: 1280, height: 900 });
});

await step("the sidebar lists only sessions under the server's workspace roots", async () => {
  const outside = process.env.OUTSIDE_TASK;
  expect(outside, "the harness stored a session outside the roots (OUTSIDE_TASK)");
  await page.waitForFunction(() => document.querySelectorAll("#session-list li").length > 0);
  const listed = await page.$$eval("#session-list li .task", (els) => els.map((e) => e.textContent));
  expect(!listed.includes(outside), `a session outside the roots is listed: ${JSON.stringify(listed)}`);
  expect(listed.includes("add a mul function"), `the server's own sessions are: ${JSON.stringify(listed)}`);
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

await step("a session's address reopens it after a reload, from a bookmark, and with Back", async () => {
  const id = await page.textContent("#session-id");
  await page.reload();
  await page.waitForFunction((want) => document.getElementById("session-id").textContent === want, id);
  await page.waitForFunction(() => document.querySelectorAll("#transcript .tool-call").length === 4);
  const origin = new URL(url).origin;
  // A bookmark: the address typed into a tab that shows something else.
  await page.goto(`${origin}/`);
  await page.waitForSelector("#empty:not([hidden])");
  await page.goto(`${origin}/s/${id}`);
  await page.waitForFunction((want) => document.getElementById("session-id").textContent === want, id);
  await page.waitForFunction(() => document.querySelectorAll("#transcript .tool-call").length === 4);
  // Back and Forward move between sessions opened here.
  const other = await page.$$eval("#session-list li", (els, open) => els.map((e) => e.dataset.id).find((i) => i !== open), id);
  expect(other, "a second session to open");
  await page.click(`#session-list li[data-id="${other}"]`);
  await page.waitForFunction((want) => location.pathname === `/s/${want}`, other);
  await page.goBack();
  await page.waitForFunction((want) => document.getElementById("session-id").textContent === want, id);
  // An address naming no session says so and shows nothing open (the browser logs the 404).
  const before = problems.length;
  await page.goto(`${origin}/s/20000101-000000-nothere`);
  await page.waitForFunction(() => location.pathname === "/");
  await page.waitForSelector("#toasts .toast.error");
  const logged = problems.splice(before);
  expect(logged.every((p) => p.includes("404")), `only the 404 was logged: ${logged}`);
  await page.goto(`${origin}/s/${id}`);
  await page.waitForFunction((want) => document.getElementById("session-id").textContent === want, id);
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
  const why = await first.locator(".approval-why").textContent();
  expect(why === "`rm` deletes files", `the approval says why it asks: ${why}`);
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
    // What shows of a control: its box clipped by every scrolling ancestor.
    const shownRect = (e) => {
      let r = e.getBoundingClientRect();
      let { left, top, right, bottom } = r;
      for (let a = e.parentElement; a; a = a.parentElement) {
        const st = getComputedStyle(a);
        if (st.overflowX === "visible" && st.overflowY === "visible") continue;
        const c = a.getBoundingClientRect();
        left = Math.max(left, c.left);
        top = Math.max(top, c.top);
        right = Math.min(right, c.right);
        bottom = Math.min(bottom, c.bottom);
      }
      return { left, top, right, bottom, width: Math.max(0, right - left), height: Math.max(0, bottom - top) };
    };
    const controls = [...document.querySelectorAll("button:not([disabled]), #composer button, textarea, select, input")]
      .map((e) => [e, shownRect(e)])
      .filter(([, r]) => r.width > 0 && r.height > 0);
    const overlap = (a, b) => a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;
    const hits = controls
      .filter(([, c]) => toasts.some((t) => overlap(t, c)))
      .map(([e, r]) => `${e.tagName}#${e.id}.${e.className} ${JSON.stringify(r)} vs ${JSON.stringify(toasts)}`);
    document.querySelectorAll("#toasts .toast").forEach((t) => t.remove());
    return hits.length ? hits.join("; ") : false;
  });
}

await step("the token prompt matches what the server prints and covers no control", async () => {
  const origin = new URL(url).origin;
  const token = new URL(url).hash.replace("#token=", "");
  const id = await page.textContent("#session-id");
  const before = problems.length;
  for (const width of [1280, 400]) {
    await page.setViewportSize({ width, height: 800 });
    await page.evaluate(() => sessionStorage.clear());
    await page.goto(`${origin}/s/${id}`);
    await page.waitForFunction(() => document.getElementById("token-dialog").open);
    const text = await page.textContent("#token-dialog");
    expect(text.includes("#token=") && text.includes("--token") && text.includes("server-token"), `the prompt names what keel serve prints: ${text}`);
    // Narrow windows fold the form; open it to check the Create button is free.
    await page.evaluate(() => (document.getElementById("new-session-box").open = true));
    const [dialog, create] = await Promise.all([page.locator("#token-dialog").boundingBox(), page.locator("#create-session").boundingBox()]);
    expect(!overlap(dialog, create), `the token prompt covers Create at ${width} px: ${JSON.stringify({ dialog, create })}`);
    const free = await page.evaluate(() => {
      const b = document.getElementById("create-session");
      b.scrollIntoView();
      const r = b.getBoundingClientRect();
      return document.elementFromPoint(r.x + r.width / 2, r.y + r.height / 2) === b;
    });
    expect(free, `the Create button can be clicked at ${width} px`);
    if (width === 1280) await page.screenshot({ path: join(shots, "token-1280.png") });
  }
  await page.fill("#token-input", token);
  await page.click("#token-dialog button[type=submit]");
  await page.waitForFunction(() => !document.getElementById("token-dialog").open);
  await page.waitForFunction((want) => document.getElementById("session-id").textContent === want, id);
  await page.waitForFunction(() => document.querySelectorAll("#session-list li").length > 0);
  // Without the token the browser logs the API's 401s, and nothing else.
  const logged = problems.splice(before);
  expect(logged.every((p) => p.includes("401")), `only 401s were logged: ${logged}`);
  await page.setViewportSize({ width: 1280, height: 900 });
});

await step("at 400 px the form folds away and the composer stays on screen", async () => {
  await page.setViewportSize({ width: 400, height: 760 });
  await page.reload();
  await page.waitForFunction(() => document.getElementById("connection").dataset.state === "live");
  const shown = await page.evaluate(() => {
    // The steady layout: toasts (in the flow at this width) come and go.
    document.querySelectorAll("#toasts .toast").forEach((t) => t.remove());
    const box = (id) => document.getElementById(id).getBoundingClientRect();
    return {
      folded: !document.getElementById("new-session-box").open,
      composer: box("composer").toJSON(),
      send: box("send").toJSON(),
      transcript: box("transcript").toJSON(),
      sidebar: box("sidebar").toJSON(),
      height: window.innerHeight,
      width: window.innerWidth,
      scroll: document.documentElement.scrollHeight,
    };
  });
  expect(shown.folded, "the creation form is folded at 400 px");
  expect(shown.composer.bottom <= shown.height && shown.composer.top >= 0, `the composer is on screen: ${JSON.stringify(shown)}`);
  expect(shown.send.right <= shown.width, `the Send button is on screen: ${JSON.stringify(shown.send)}`);
  expect(shown.sidebar.height <= shown.height * 0.35, `the sidebar takes at most a third: ${JSON.stringify(shown.sidebar)}`);
  expect(shown.transcript.height >= 200, `the transcript has room: ${JSON.stringify(shown.transcript)}`);
  expect(shown.scroll <= shown.height + 1, `nothing to scroll past: ${JSON.stringify(shown)}`);
  // Unfolding it gives the whole form back.
  await page.click("#new-session-box > summary");
  expect(await page.isVisible("#create-session"), "the form unfolds");
  await page.click("#new-session-box > summary");
  await page.setViewportSize({ width: 1280, height: 900 });
});

await step("the layout works from 400 px to wide, and toasts never cover controls", async () => {
  for (const [width, name] of [[1280, "wide.png"], [400, "narrow.png"]]) {
    await page.setViewportSize({ width, height: 900 });
    const fits = await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth);
    expect(fits, `no horizontal scrolling at ${width} px`);
    await page.locator("#send").scrollIntoViewIfNeeded();
    const send = await page.locator("#send").boundingBox();
    expect(send && send.x >= 0 && send.x + send.width <= width, `the Send button is on screen at ${width} px: ${JSON.stringify(send)}`);
    const covered = await toastsCoverControls();
    expect(!covered, `a toast covers a control at ${width} px: ${covered}`);
    await page.screenshot({ path: join(shots, name), fullPage: true });
  }
  await page.setViewportSize({ width: 1280, height: 900 });
});

await step("reopening the session replays its history, phase included", async () => {
  const id = await page.getAttribute("#session-list li.active", "data-id");
  await page.reload();
  // The address reopens it: no click needed.
  await page.waitForFunction((want) => document.getElementById("session-id").textContent === want, id);
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
