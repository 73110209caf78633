// A small Markdown renderer for the model's answers that builds DOM nodes directly: text
// only ever goes in through textContent, so HTML in a reply is shown as text and never runs.
// Supported: paragraphs, headings, bullet and numbered lists, fenced code, block quotes,
// inline code, bold, italic and http(s)/mailto links. Anything else stays plain text.

function el(tag, className) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  return node;
}

const SAFE_LINK = /^(https?:|mailto:)/i;

// Lines longer than this are shown as plain text: inline Markdown in a reply that long is not
// prose, and no scan should depend on what a model chose to put in one line.
const INLINE_LIMIT = 20000;

/**
 * Where `needle` next occurs in `text` at or after `from` (-1: nowhere), remembering the last
 * answer per needle so a scan that asks again and again (a line of `[[[[…` with no `]`) stays
 * linear instead of searching the rest of the line each time.
 */
function finder(text) {
  const memo = new Map();
  return (needle, from) => {
    const seen = memo.get(needle);
    if (seen && seen.from <= from && (seen.at === -1 || seen.at >= from)) return seen.at;
    const at = text.indexOf(needle, from);
    memo.set(needle, { from, at });
    return at;
  };
}

/** The length of the run of `ch` starting at `i`. */
function runLength(text, i, ch) {
  let j = i;
  while (j < text.length && text[j] === ch) j++;
  return j - i;
}

/**
 * The end (exclusive) of a code span opened by a run of `k` backticks ending at `from`: the
 * next run of exactly `k` backticks; -1 when there is none. `closers` remembers, per length,
 * where the search last found nothing, so every run is looked at O(1) times per length.
 */
function codeSpanEnd(text, from, k, closers) {
  const fence = "`".repeat(k);
  const failedFrom = closers.get(k);
  if (failedFrom !== undefined && failedFrom <= from) return -1;
  let at = text.indexOf(fence, from);
  while (at !== -1) {
    const run = runLength(text, at, "`");
    if (run === k) return at + k;
    at = text.indexOf(fence, at + run);
  }
  closers.set(k, from);
  return -1;
}

/**
 * One inline element starting at `i`, or null: `{ end, kind, a, b }`. Code spans first (their
 * content is literal), then links, bold, italic. A linear scan (no backtracking regex: a few
 * thousand backticks in a reply once took minutes to render).
 */
function inlineAt(text, i, next, closers) {
  const c = text[i];
  if (c === "`") {
    const k = runLength(text, i, "`");
    const end = codeSpanEnd(text, i + k, k, closers);
    if (end === -1 || end - k === i + k) return { end: i + k, kind: "text", a: text.slice(i, i + k) };
    return { end, kind: "code", a: text.slice(i + k, end - k) };
  }
  if (c === "[") {
    const close = next("]", i + 1);
    if (close > i + 1 && text[close + 1] === "(") {
      const paren = next(")", close + 2);
      const target = paren === -1 ? "" : text.slice(close + 2, paren);
      if (target && !/\s/.test(target)) {
        return { end: paren + 1, kind: "link", a: text.slice(i + 1, close), b: target };
      }
    }
    return null;
  }
  if (c === "*" || c === "_") {
    if (text[i + 1] === c) {
      const close = next(c, i + 2);
      if (close > i + 2 && text[close + 1] === c) {
        return { end: close + 2, kind: "strong", a: text.slice(i + 2, close) };
      }
    }
    const first = text[i + 1];
    if (first !== undefined && first !== c && !/\s/.test(first)) {
      const close = next(c, i + 1);
      if (close !== -1) return { end: close + 1, kind: "em", a: text.slice(i + 1, close) };
    }
  }
  return null;
}

/** Appends `text` with inline Markdown (code, bold, italic, links) to `parent`. */
function inline(parent, text) {
  if (text.length > INLINE_LIMIT) {
    parent.append(document.createTextNode(text));
    return;
  }
  const next = finder(text);
  const closers = new Map();
  let last = 0;
  let i = 0;
  const flush = (upto) => {
    if (upto > last) parent.append(document.createTextNode(text.slice(last, upto)));
  };
  while (i < text.length) {
    const m = inlineAt(text, i, next, closers);
    if (!m) {
      i++;
      continue;
    }
    if (m.kind === "text") {
      i = m.end;
      continue;
    }
    flush(i);
    if (m.kind === "code") {
      const code = el("code");
      code.textContent = m.a;
      parent.append(code);
    } else if (m.kind === "link") {
      if (SAFE_LINK.test(m.b)) {
        const a = el("a");
        a.href = m.b;
        a.rel = "noopener noreferrer";
        a.target = "_blank";
        inline(a, m.a);
        parent.append(a);
      } else {
        parent.append(document.createTextNode(text.slice(i, m.end)));
      }
    } else {
      const node = el(m.kind);
      inline(node, m.a);
      parent.append(node);
    }
    last = m.end;
    i = m.end;
  }
  flush(text.length);
}

/** Renders `source` as Markdown into a new `<div class="md">`. */
export function renderMarkdown(source) {
  const root = el("div", "md");
  const lines = source.replace(/\r\n?/g, "\n").split("\n");
  let paragraph = [];
  let list = null; // { node, ordered }

  const flushParagraph = () => {
    if (paragraph.length) {
      const p = el("p");
      paragraph.forEach((line, i) => {
        if (i) p.append(el("br"));
        inline(p, line);
      });
      root.append(p);
      paragraph = [];
    }
  };
  const endList = () => {
    list = null;
  };

  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    const fence = line.match(/^\s*(```+|~~~+)\s*([\w+-]*)\s*$/);
    if (fence) {
      flushParagraph();
      endList();
      const body = [];
      i++;
      while (i < lines.length && !lines[i].trim().startsWith(fence[1])) body.push(lines[i++]);
      const pre = el("pre", "code");
      const code = el("code");
      if (fence[2]) code.dataset.lang = fence[2];
      code.textContent = body.join("\n");
      pre.append(code);
      root.append(pre);
      continue;
    }
    if (!line.trim()) {
      flushParagraph();
      endList();
      continue;
    }
    const heading = line.match(/^(#{1,6})\s+(.*)$/);
    if (heading) {
      flushParagraph();
      endList();
      const h = el(`h${Math.min(heading[1].length + 2, 6)}`);
      inline(h, heading[2]);
      root.append(h);
      continue;
    }
    const item = line.match(/^\s*([-*+]|\d+[.)])\s+(.*)$/);
    if (item) {
      flushParagraph();
      const ordered = /\d/.test(item[1]);
      if (!list || list.ordered !== ordered) {
        list = { node: el(ordered ? "ol" : "ul"), ordered };
        root.append(list.node);
      }
      const li = el("li");
      inline(li, item[2]);
      list.node.append(li);
      continue;
    }
    const quote = line.match(/^>\s?(.*)$/);
    if (quote) {
      flushParagraph();
      endList();
      const q = el("blockquote");
      inline(q, quote[1]);
      root.append(q);
      continue;
    }
    endList();
    paragraph.push(line);
  }
  flushParagraph();
  return root;
}
