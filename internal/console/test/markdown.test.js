// Unit tests of the console's Markdown renderer, run by node --test (from
// TestScriptsUnderNode in console_test.go).

import { test } from "node:test";
import assert from "node:assert/strict";
import { renderMarkdown, escapeHTML } from "../static/markdown.js";

const md = (s, opts) => renderMarkdown(s, opts);
const link = (href, text) => `<a href="${href}" rel="noopener noreferrer nofollow" target="_blank">${text}</a>`;

test("escapeHTML escapes what means something in HTML", () => {
  assert.equal(escapeHTML(`<a href="x" onclick='y'>&</a>`), "&lt;a href=&quot;x&quot; onclick=&#39;y&#39;&gt;&amp;&lt;/a&gt;");
});

test("HTML in the text stays text", () => {
  assert.equal(md("<script>alert(1)</script>"), "<p>&lt;script&gt;alert(1)&lt;/script&gt;</p>");
  assert.equal(md('<img src=x onerror="alert(1)">'), "<p>&lt;img src=x onerror=&quot;alert(1)&quot;&gt;</p>");
  assert.equal(md("a & b"), "<p>a &amp; b</p>");
});

test("paragraphs and line breaks", () => {
  assert.equal(md("one\ntwo\n\nthree"), "<p>one<br>two</p><p>three</p>");
  assert.equal(md("a\r\nb"), "<p>a<br>b</p>");
  assert.equal(md(""), "");
  assert.equal(md(null), "");
});

test("headings, shifted by the offset", () => {
  assert.equal(md("# Title"), "<h1>Title</h1>");
  assert.equal(md("### Three ###"), "<h3>Three</h3>");
  assert.equal(md("# Title", { headingOffset: 3 }), "<h4>Title</h4>");
  assert.equal(md("###### Six", { headingOffset: 3 }), "<h6>Six</h6>");
  assert.equal(md("#hashtag"), "<p>#hashtag</p>");
  assert.equal(md("## *em* in a heading"), "<h2><em>em</em> in a heading</h2>");
});

test("emphasis", () => {
  assert.equal(md("*a* **b** ***c*** _d_ __e__ ~~f~~"),
    "<p><em>a</em> <strong>b</strong> <strong><em>c</em></strong> <em>d</em> <strong>e</strong> <del>f</del></p>");
  assert.equal(md("**bold *and em* inside**"), "<p><strong>bold <em>and em</em> inside</strong></p>");
  assert.equal(md("snake_case_name stays"), "<p>snake_case_name stays</p>");
  assert.equal(md("2 * 3 * 4"), "<p>2 * 3 * 4</p>");
  assert.equal(md("**not closed"), "<p>**not closed</p>");
  assert.equal(md("**a *b** c*"), "<p><strong>a *b</strong> c*</p>");
  assert.equal(md("\\*literal\\*"), "<p>*literal*</p>");
});

test("code spans keep their text as it is", () => {
  assert.equal(md("run `ls -la` now"), "<p>run <code>ls -la</code> now</p>");
  assert.equal(md("`*not em* <b>`"), "<p><code>*not em* &lt;b&gt;</code></p>");
  assert.equal(md("``a ` b``"), "<p><code>a ` b</code></p>");
  assert.equal(md("`` `x` ``"), "<p><code>`x`</code></p>");
  assert.equal(md("an ` alone"), "<p>an ` alone</p>");
  assert.equal(md("**`x`**"), "<p><strong><code>x</code></strong></p>");
});

test("fenced code blocks", () => {
  assert.equal(md("```go\nfunc main() {}\n```"), '<pre><code class="language-go">func main() {}</code></pre>');
  assert.equal(md("~~~\n<b>*x*</b>\n~~~"), "<pre><code>&lt;b&gt;*x*&lt;/b&gt;</code></pre>");
  assert.equal(md("before\n```\ncode\n```\nafter"), "<p>before</p><pre><code>code</code></pre><p>after</p>");
  // A language name cannot carry markup into the class.
  assert.equal(md('```js"onclick=x\nx\n```'), '<pre><code class="language-jsquotonclickx">x</code></pre>');
  // Streaming: an unclosed fence runs to the end.
  assert.equal(md("```sh\necho hi\necho"), '<pre><code class="language-sh">echo hi\necho</code></pre>');
  // A shorter fence does not close a longer one.
  assert.equal(md("````\n```\n````"), "<pre><code>```</code></pre>");
  assert.equal(md("```\n\n  indented\n```"), "<pre><code>\n  indented</code></pre>");
});

test("lists", () => {
  assert.equal(md("- a\n- b"), "<ul><li>a</li><li>b</li></ul>");
  assert.equal(md("* a\n+ b"), "<ul><li>a</li><li>b</li></ul>");
  assert.equal(md("1. one\n2. two"), "<ol><li>one</li><li>two</li></ol>");
  assert.equal(md("3) three\n4) four"), '<ol start="3"><li>three</li><li>four</li></ol>');
  assert.equal(md("- a\n  - b\n  - c\n- d"), "<ul><li>a<ul><li>b</li><li>c</li></ul></li><li>d</li></ul>");
  assert.equal(md("- a\n  more of a\n- b"), "<ul><li>a<br>more of a</li><li>b</li></ul>");
  assert.equal(md("- a\n\n- b"), "<ul><li>a</li><li>b</li></ul>");
  assert.equal(md("- a\n\nafter"), "<ul><li>a</li></ul><p>after</p>");
  assert.equal(md("- a\n1. b"), "<ul><li>a</li></ul><ol><li>b</li></ol>");
  assert.equal(md("- **bold** item"), "<ul><li><strong>bold</strong> item</li></ul>");
  assert.equal(md("-5 degrees"), "<p>-5 degrees</p>");
  assert.equal(md("- a\n```\ncode\n```"), "<ul><li>a</li></ul><pre><code>code</code></pre>");
});

test("links: http and https only", () => {
  assert.equal(md("[docs](https://example.com/a?b=1&c=2)"), "<p>" + link("https://example.com/a?b=1&amp;c=2", "docs") + "</p>");
  assert.equal(md("[x](http://example.com)"), "<p>" + link("http://example.com", "x") + "</p>");
  assert.equal(md('[x](https://example.com "title")'), "<p>" + link("https://example.com", "x") + "</p>");
  assert.equal(md("[w](https://en.wikipedia.org/wiki/A_(b))"), "<p>" + link("https://en.wikipedia.org/wiki/A_(b)", "w") + "</p>");
  for (const bad of ["javascript:alert(1)", "JAVASCRIPT:alert(1)", "data:text/html,x", "vbscript:x", "/relative", "mailto:a@b", "//evil.example", "java\tscript:x"]) {
    assert.equal(md(`[click](${bad})`), "<p>click</p>", bad);
  }
  // A quote in the target cannot end the attribute.
  assert.equal(md('[x](https://a.example/"onmouseover="alert(1))'),
    "<p>" + link("https://a.example/&quot;onmouseover=&quot;alert(1)", "x") + "</p>");
  assert.equal(md("[**bold** link](https://x.example)"), "<p>" + link("https://x.example", "<strong>bold</strong> link") + "</p>");
  // Links do not nest.
  assert.equal(md("[https://a.example](https://b.example)"), "<p>" + link("https://b.example", "https://a.example") + "</p>");
  assert.equal(md("[not a link]"), "<p>[not a link]</p>");
  assert.equal(md("[a](b"), "<p>[a](b</p>");
});

test("autolinks and bare URLs", () => {
  assert.equal(md("<https://example.com/x>"), "<p>" + link("https://example.com/x", "https://example.com/x") + "</p>");
  assert.equal(md("<javascript:alert(1)>"), "<p>&lt;javascript:alert(1)&gt;</p>");
  assert.equal(md("see https://example.com/a."), "<p>see " + link("https://example.com/a", "https://example.com/a") + ".</p>");
  assert.equal(md("(https://example.com/x)"), "<p>(" + link("https://example.com/x", "https://example.com/x") + ")</p>");
  assert.equal(md("xhttps://example.com"), "<p>xhttps://example.com</p>");
  assert.equal(md("`https://example.com`"), "<p><code>https://example.com</code></p>");
});

test("images become links", () => {
  assert.equal(md("![a cat](https://example.com/cat.png)"), "<p>" + link("https://example.com/cat.png", "a cat") + "</p>");
  assert.equal(md("![x](javascript:alert(1))"), "<p>x</p>");
});

test("block quotes, rules and tables", () => {
  assert.equal(md("> quoted *text*\n> more"), "<blockquote><p>quoted <em>text</em><br>more</p></blockquote>");
  assert.equal(md("a\n\n---\n\nb"), "<p>a</p><hr><p>b</p>");
  assert.equal(md("| a | b |\n|:--|--:|\n| 1 | `2` |"),
    '<table><thead><tr><th scope="col" class="align-left">a</th><th scope="col" class="align-right">b</th></tr></thead>' +
      '<tbody><tr><td class="align-left">1</td><td class="align-right"><code>2</code></td></tr></tbody></table>');
  assert.equal(md("a | b\n--- | ---"), '<table><thead><tr><th scope="col">a</th><th scope="col">b</th></tr></thead></table>');
  // A pipe in a paragraph is no table without its separator row.
  assert.equal(md("a | b\nc | d"), "<p>a | b<br>c | d</p>");
});

test("long and hostile lines stay fast", () => {
  const inputs = [
    "*a ".repeat(20000),
    "`".repeat(30000),
    "[".repeat(20000) + "](",
    "**".repeat(20000),
    "_a".repeat(20000),
    "https://x.example/" + "a".repeat(100000),
    "- ".repeat(5000) + "\n" + "  - x\n".repeat(5000),
  ];
  for (const s of inputs) {
    const start = process.hrtime.bigint();
    md(s);
    const ms = Number(process.hrtime.bigint() - start) / 1e6;
    assert.ok(ms < 2000, `${ms} ms for ${JSON.stringify(s.slice(0, 20))}…`);
  }
});

// A seeded generator, so that a failure names an input that can be run again.
function prng(seed) {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) / 4294967296;
  };
}

const PIECES = [
  "*", "**", "_", "__", "~~", "`", "```", "~~~", "[", "]", "(", ")", "![", "<", ">", "&", '"', "'", "#", "## ", "- ",
  "1. ", "> ", "|", "---", "\\", "\n", "\n\n", " ", "  ", "a", "word", "https://x.example/p?q=1&r=2", "javascript:alert(1)",
  "<script>", "</p>", "&amp;", "&#x3c;", "http://", "\t", "é", "\u2028",
];

const ALLOWED = new Set(["p", "br", "h1", "h2", "h3", "h4", "h5", "h6", "em", "strong", "del", "code", "pre", "ul", "ol", "li",
  "blockquote", "hr", "table", "thead", "tbody", "tr", "th", "td", "a"]);
const VOID = new Set(["br", "hr"]);
const ATTRS = { a: ["href", "rel", "target"], code: ["class"], th: ["scope", "class"], td: ["class"], ol: ["start"] };

// checkHTML fails unless html holds only the renderer's own tags, well
// nested, with only their attributes, and links to http(s) alone.
function checkHTML(html, input) {
  const stack = [];
  const tag = /<(\/?)([a-z0-9]+)((?:\s+[a-z]+="[^"<>]*")*)\s*>/y;
  for (let i = 0; i < html.length; ) {
    const lt = html.indexOf("<", i);
    const gt = html.indexOf(">", i);
    if (gt >= 0 && (lt < 0 || gt < lt)) assert.fail(`a bare ">" in ${JSON.stringify(html)} from ${JSON.stringify(input)}`);
    if (lt < 0) break;
    tag.lastIndex = lt;
    const m = tag.exec(html);
    assert.ok(m, `markup the renderer does not make at ${lt} of ${JSON.stringify(html)} from ${JSON.stringify(input)}`);
    const [, close, name, attrs] = m;
    assert.ok(ALLOWED.has(name), `tag ${name} from ${JSON.stringify(input)}`);
    if (close) {
      assert.equal(stack.pop(), name, `misnested </${name}> in ${JSON.stringify(html)} from ${JSON.stringify(input)}`);
    } else {
      for (const [, an, av] of attrs.matchAll(/([a-z]+)="([^"]*)"/g)) {
        assert.ok((ATTRS[name] ?? []).includes(an), `attribute ${an} on ${name} from ${JSON.stringify(input)}`);
        if (an === "href") assert.match(av, /^https?:\/\/\S+$/i, `href from ${JSON.stringify(input)}`);
        if (an === "class") assert.match(av, /^(language-[A-Za-z0-9_+-]+|align-(left|right|center))$/);
      }
      if (name === "a") assert.ok(!stack.includes("a"), `a link inside a link from ${JSON.stringify(input)}`);
      if (!VOID.has(name)) stack.push(name);
    }
    i = tag.lastIndex;
  }
  assert.deepEqual(stack, [], `unclosed tags in ${JSON.stringify(html)} from ${JSON.stringify(input)}`);
}

test("random input always gives well-formed, safe HTML", () => {
  const rand = prng(20261203);
  for (let n = 0; n < 4000; n++) {
    let s = "";
    const len = 1 + Math.floor(rand() * 40);
    for (let k = 0; k < len; k++) s += PIECES[Math.floor(rand() * PIECES.length)];
    checkHTML(md(s), s);
  }
});

test("the fixed cases are well formed too", () => {
  for (const s of ["**[a](https://x.example)**", "[`a`](https://x.example)", "> - a\n> - b", "- a\n  - b\n    - c\nd",
    "| a |\n| - |\n| <b> |", "# [x](https://x.example)", "***a** b*"]) {
    checkHTML(md(s), s);
  }
});
