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

/** Appends `text` with inline Markdown (code, bold, italic, links) to `parent`. */
function inline(parent, text) {
  // Order matters: code spans first (their content is literal), then links, bold, italic.
  const pattern = /(`+)([\s\S]*?[^`])\1(?!`)|\[([^\]]+)\]\(([^)\s]+)\)|\*\*([^*]+)\*\*|__([^_]+)__|\*([^*\s][^*]*)\*|_([^_\s][^_]*)_/g;
  let last = 0;
  for (const m of text.matchAll(pattern)) {
    if (m.index > last) parent.append(document.createTextNode(text.slice(last, m.index)));
    if (m[1]) {
      const code = el("code");
      code.textContent = m[2];
      parent.append(code);
    } else if (m[3] !== undefined) {
      if (SAFE_LINK.test(m[4])) {
        const a = el("a");
        a.href = m[4];
        a.rel = "noopener noreferrer";
        a.target = "_blank";
        inline(a, m[3]);
        parent.append(a);
      } else {
        parent.append(document.createTextNode(m[0]));
      }
    } else if (m[5] !== undefined || m[6] !== undefined) {
      const b = el("strong");
      inline(b, m[5] ?? m[6]);
      parent.append(b);
    } else {
      const i = el("em");
      inline(i, m[7] ?? m[8]);
      parent.append(i);
    }
    last = m.index + m[0].length;
  }
  if (last < text.length) parent.append(document.createTextNode(text.slice(last)));
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
