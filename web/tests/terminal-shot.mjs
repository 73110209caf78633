// Turns a terminal screen captured with colours (`tmux capture-pane -p -e`) into a PNG, drawn
// by headless Debian chromium (playwright-core, no browser download) in a dark terminal theme.
//
//   node terminal-shot.mjs <screen.ansi> <out.png> <columns> <rows>
//
// Used by crates/keel-cli/tests/chat_daily_tmux.rs for the 80×24 screenshot of `keel chat`.

import { chromium } from "playwright-core";
import { readFileSync } from "node:fs";

const [input, output, cols = "80", rows = "24"] = process.argv.slice(2);
if (!output) {
  console.error("usage: node terminal-shot.mjs <screen.ansi> <out.png> [columns] [rows]");
  process.exit(2);
}

// The 16 colours of a dark terminal theme, then xterm's 256-colour cube and greys.
const BASE = [
  "#1c2128", "#f47067", "#57ab5a", "#c69026", "#539bf5", "#b083f0", "#39c5cf", "#adbac7",
  "#545d68", "#ff938a", "#6bc46d", "#daaa3f", "#6cb6ff", "#dcbdfb", "#56d4dd", "#cdd9e5",
];
function color256(n) {
  if (n < 16) return BASE[n];
  if (n < 232) {
    const i = n - 16;
    const step = (v) => (v === 0 ? 0 : 55 + v * 40);
    return `rgb(${step(Math.floor(i / 36))},${step(Math.floor(i / 6) % 6)},${step(i % 6)})`;
  }
  const g = 8 + (n - 232) * 10;
  return `rgb(${g},${g},${g})`;
}

const escapeHtml = (s) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");

/** One line of text with SGR escapes → HTML spans. */
function lineToHtml(line, state) {
  let html = "";
  let i = 0;
  const open = () => {
    const css = [];
    let fg = state.fg;
    let bg = state.bg;
    if (state.reverse) [fg, bg] = [bg ?? "#1c2128", fg ?? "#adbac7"];
    if (fg) css.push(`color:${fg}`);
    if (bg) css.push(`background:${bg}`);
    if (state.bold) css.push("font-weight:700");
    if (state.dim) css.push("opacity:.6");
    if (state.italic) css.push("font-style:italic");
    if (state.underline) css.push("text-decoration:underline");
    return css.length ? `<span style="${css.join(";")}">` : "<span>";
  };
  let text = "";
  const flush = () => {
    if (text) html += `${open()}${escapeHtml(text)}</span>`;
    text = "";
  };
  while (i < line.length) {
    if (line[i] === "\x1b" && line[i + 1] === "[") {
      const end = line.slice(i + 2).search(/[A-Za-z]/);
      if (end < 0) break;
      const cmd = line[i + 2 + end];
      const params = line.slice(i + 2, i + 2 + end);
      i += 3 + end;
      if (cmd !== "m") continue;
      flush();
      const codes = params === "" ? [0] : params.split(";").map(Number);
      for (let k = 0; k < codes.length; k++) {
        const c = codes[k];
        if (c === 0) Object.assign(state, { fg: null, bg: null, bold: false, dim: false, italic: false, underline: false, reverse: false });
        else if (c === 1) state.bold = true;
        else if (c === 2) state.dim = true;
        else if (c === 3) state.italic = true;
        else if (c === 4) state.underline = true;
        else if (c === 7) state.reverse = true;
        else if (c === 22) state.bold = state.dim = false;
        else if (c === 23) state.italic = false;
        else if (c === 24) state.underline = false;
        else if (c === 27) state.reverse = false;
        else if (c >= 30 && c <= 37) state.fg = BASE[c - 30];
        else if (c === 39) state.fg = null;
        else if (c >= 40 && c <= 47) state.bg = BASE[c - 40];
        else if (c === 49) state.bg = null;
        else if (c >= 90 && c <= 97) state.fg = BASE[c - 90 + 8];
        else if (c >= 100 && c <= 107) state.bg = BASE[c - 100 + 8];
        else if ((c === 38 || c === 48) && codes[k + 1] === 5) {
          state[c === 38 ? "fg" : "bg"] = color256(codes[k + 2]);
          k += 2;
        } else if ((c === 38 || c === 48) && codes[k + 1] === 2) {
          state[c === 38 ? "fg" : "bg"] = `rgb(${codes[k + 2]},${codes[k + 3]},${codes[k + 4]})`;
          k += 4;
        }
      }
      continue;
    }
    text += line[i];
    i += 1;
  }
  flush();
  return html;
}

const state = {};
const lines = readFileSync(input, "utf8").replace(/\n$/, "").split("\n").slice(0, Number(rows));
while (lines.length < Number(rows)) lines.push("");
const body = lines.map((l) => `<div class="row">${lineToHtml(l, state) || "&nbsp;"}</div>`).join("");
const charW = 8.4;
const rowH = 17;
const pad = 12;
const html = `<!doctype html><meta charset="utf-8"><style>
  html, body { margin: 0; background: #1c2128; }
  .term { padding: ${pad}px; color: #adbac7; font: 14px/${rowH}px "DejaVu Sans Mono", monospace; white-space: pre; }
  .row { height: ${rowH}px; overflow: hidden; }
</style><div class="term">${body}</div>`;

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium",
  headless: true,
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-dev-shm-usage"],
});
const page = await browser.newPage({
  viewport: { width: Math.ceil(Number(cols) * charW + 2 * pad), height: Number(rows) * rowH + 2 * pad },
});
await page.setContent(html);
await page.screenshot({ path: output });
await browser.close();
console.log(`wrote ${output}`);
