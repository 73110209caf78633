// Drives the tasks board in headless Debian chromium (playwright-core, no browser download).
//
//   node board.test.mjs <server-url> <batch-script> <screenshot-dir>
//
// Started by crates/keel-cli/tests/work.rs against a real `keel serve` whose workspace has a
// PRD and three generated tasks (#2 after #1, #3 after #2), all ready. Exits non-zero with a
// message on the first failed expectation.

import { chromium } from "playwright-core";
import { mkdirSync } from "node:fs";
import { join } from "node:path";

const [url, script, shots] = process.argv.slice(2);
if (!shots) {
  console.error("usage: node board.test.mjs <url> <batch-script> <screenshot-dir>");
  process.exit(2);
}
mkdirSync(shots, { recursive: true });
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium",
  headless: true,
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-dev-shm-usage"],
});
const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
const errors = [];
page.on("pageerror", (e) => errors.push(e.message));

function expect(condition, message) {
  if (!condition) throw new Error(message);
}

async function step(name, fn) {
  try {
    await fn();
    console.log(`ok   ${name}`);
  } catch (err) {
    console.error(`FAIL ${name}: ${err.message}`);
    await page.screenshot({ path: join(shots, "board-failure.png"), fullPage: true }).catch(() => {});
    await browser.close();
    process.exit(1);
  }
}

const cards = (status) => page.$$eval(`.board-column[data-status="${status}"] .task-card`, (cs) => cs.map((c) => c.textContent));

await step("the board shows the tasks by status with their dependencies", async () => {
  await page.goto(url);
  await page.click("#show-tasks");
  await page.waitForSelector('.board-column[data-status="ready"] .task-card');
  const ready = await cards("ready");
  const waiting = await cards("waiting");
  // Only #1 can start; #2 and #3 wait for their dependencies (not "ready").
  expect(ready.length === 1 && ready[0].includes("Start"), `1 ready task, got ${ready}`);
  expect(waiting.length === 2, `2 waiting tasks, got ${waiting}`);
  expect(waiting[0].includes("after #1") && waiting[1].includes("after #2"), `dependencies: ${waiting}`);
  expect(waiting[1].includes("waits for #2") && !waiting[1].includes("Start"), "a task whose dependency is not done cannot start");
  const summary = await page.textContent(".board-summary");
  expect(summary.includes("1 ready · 2 waiting"), `summary: ${summary}`);
});

await step("Run batch runs every task; each has a proof", async () => {
  await page.fill("#board-script", script);
  await page.click("#run-batch");
  await page.waitForFunction(() => document.querySelectorAll('.board-column[data-status="done"] .task-card').length === 3, null, { timeout: 60000 });
  const card = page.locator('.board-column[data-status="done"] .task-card[data-id="3"]');
  await card.locator("details.proof summary").click();
  await card.locator(".criterion.met").first().waitFor();
  const text = await card.locator("details.proof").textContent();
  expect(text.includes("Tests after: passed"), `tests after: ${text}`);
  expect(text.includes("added bye.sh (+1 −0)"), `files: ${text}`);
  expect((await card.locator(".criterion.met").count()) === 2, "both criteria met");
  await page.screenshot({ path: join(shots, "board.png"), fullPage: true });
});

await step("no script errors", async () => {
  expect(errors.length === 0, errors.join("; "));
});
await browser.close();
