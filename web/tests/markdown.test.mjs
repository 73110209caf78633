// Unit test of web/markdown.js in plain node (no browser): what the renderer makes of a reply,
// and that hostile replies (thousands of backticks, brackets, asterisks) render in bounded time.
// Run: node web/tests/markdown.test.mjs (crates/keel-server/tests/web_markdown.rs runs it).

// A minimal DOM: just what markdown.js uses.
class Node {
  constructor(tag) {
    this.tag = tag;
    this.children = [];
    this.className = "";
    this.dataset = {};
    this._text = "";
  }
  append(...nodes) {
    this.children.push(...nodes);
  }
  set textContent(t) {
    this._text = String(t);
    this.children = [];
  }
  get textContent() {
    return this._text + this.children.map((c) => c.textContent).join("");
  }
}
class Text {
  constructor(t) {
    this.tag = "#text";
    this.text = t;
  }
  get textContent() {
    return this.text;
  }
}
globalThis.document = {
  createElement: (tag) => new Node(tag),
  createTextNode: (t) => new Text(t),
};

const { renderMarkdown } = await import("../markdown.js");

// The shape of a rendered tree: `tag(children)` with text as JSON strings.
function shape(n) {
  if (n.tag === "#text") return JSON.stringify(n.text);
  const inner = n._text ? [JSON.stringify(n._text)] : [];
  // Adjacent text nodes read as one (how the browser shows them).
  const kids = inner;
  for (const c of n.children) {
    const s = shape(c);
    if (c.tag === "#text" && kids.length && kids[kids.length - 1].startsWith('"') && n.children.length > 1) {
      kids[kids.length - 1] = JSON.stringify(JSON.parse(kids[kids.length - 1]) + c.text);
    } else {
      kids.push(s);
    }
  }
  const attrs = n.href ? `[${n.href}]` : "";
  return `${n.tag}${attrs}(${kids.join(",")})`;
}
const render = (src) => renderMarkdown(src).children.map(shape).join(" ");

let failed = 0;
function check(name, got, want) {
  if (got !== want) {
    failed++;
    console.error(`FAIL ${name}\n  got:  ${got}\n  want: ${want}`);
  } else {
    console.log(`ok   ${name}`);
  }
}

check("code span", render("run `cargo test` now"), 'p("run ",code("cargo test")," now")');
check("double-backtick span keeps a backtick", render("``a`b``"), 'p(code("a`b"))');
check("unclosed backticks stay text", render("a ``b` c"), 'p("a ``b` c")');
check("bold and italic", render("**mul** and *x* and __y__ and _z_"),
  'p(strong("mul")," and ",em("x")," and ",strong("y")," and ",em("z"))');
check("a safe link", render("see [docs](https://x.dev/a)"), 'p("see ",a[https://x.dev/a]("docs"))');
check("an unsafe link is text", render("[x](javascript:alert(1))"), 'p("[x](javascript:alert(1))")');
check("a link target with a space is text", render("[x](a b)"), 'p("[x](a b)")');
check("asterisk before space is not emphasis", render("2 * 3 * 4"), 'p("2 * 3 * 4")');
check("code content is literal", render("`**not bold**`"), 'p(code("**not bold**"))');
check("html stays text", render("<img src=x onerror=alert(1)>"), 'p("<img src=x onerror=alert(1)>")');
check("list", render("- a\n- **b**"), 'ul(li("a"),li(strong("b")))');

// Hostile lines: each must render in well under a second (the old regex took 33 s for 4,000
// backticks and grows ×8 per doubling).
const hostile = {
  backticks: "`".repeat(20000) + "a",
  "backtick runs of every length": Array.from({ length: 190 }, (_, k) => "`".repeat(k + 1)).join(" "),
  brackets: "[".repeat(19000) + "x",
  "bracket-paren": "[a](".repeat(4900),
  asterisks: "**a".repeat(6500),
  underscores: "_a ".repeat(6500),
  "over the inline limit": "`".repeat(200000) + "a",
};
for (const [name, line] of Object.entries(hostile)) {
  const t0 = performance.now();
  const out = renderMarkdown(`x ${line}`);
  const ms = performance.now() - t0;
  const text = out.textContent;
  if (ms > 1000 || text.length === 0 || text.length > line.length + 2) {
    failed++;
    console.error(`FAIL hostile ${name}: ${ms.toFixed(0)} ms, ${text.length} chars out`);
  } else {
    console.log(`ok   hostile ${name} (${line.length} chars, ${ms.toFixed(1)} ms)`);
  }
}

if (failed) {
  console.error(`${failed} check(s) failed`);
  process.exit(1);
}
