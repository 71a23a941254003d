// A small Markdown renderer for agent output. It escapes the whole text
// first, so that the only markup in its result is the markup it adds
// itself: headings, paragraphs, emphasis, code spans, fenced code blocks,
// lists, block quotes, tables, rules and links whose target is http or
// https. Anything it does not understand stays visible as text. An
// unclosed code fence (a message still streaming) runs to the end.

const ESCAPES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

/** escapeHTML returns s with every character that means something in HTML escaped. */
export function escapeHTML(s) {
  return String(s).replace(/[&<>"']/g, (c) => ESCAPES[c]);
}

const FENCE = /^ {0,3}(`{3,}|~{3,})[ \t]*([^`\s]*)[^`]*$/;
const HEADING = /^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$/;
const RULE = /^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$/;
const ITEM = /^([ \t]*)([-*+]|\d{1,9}[.)])(?:[ \t]+(.*)|$)/;
const QUOTE = /^ {0,3}&gt; ?(.*)$/;
const TABLE_SEP = /^ *\|? *:?-+:? *(?:\| *:?-+:? *)*\|? *$/;

/**
 * renderMarkdown returns src as HTML. Options: headingOffset shifts
 * heading levels down (1 makes "#" an h2), to fit the page's outline.
 */
export function renderMarkdown(src, { headingOffset = 0 } = {}) {
  const lines = escapeHTML(String(src ?? "")).replace(/\r\n?/g, "\n").split("\n");
  return renderBlocks(lines, headingOffset);
}

function renderBlocks(lines, headingOffset) {
  const out = [];
  let para = [];
  const flushPara = () => {
    if (para.length) {
      out.push("<p>" + para.map((l) => inline(l.trim())).join("<br>") + "</p>");
      para = [];
    }
  };
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    if (/^\s*$/.test(line)) {
      flushPara();
      i++;
      continue;
    }
    const fence = FENCE.exec(line);
    if (fence) {
      flushPara();
      const marker = fence[1];
      const lang = fence[2].replace(/[^A-Za-z0-9_+-]/g, "");
      const body = [];
      i++;
      while (i < lines.length && !isFenceClose(lines[i], marker)) {
        body.push(lines[i]);
        i++;
      }
      i++; // the closing fence, or past the end
      const cls = lang ? ` class="language-${lang}"` : "";
      out.push(`<pre><code${cls}>` + body.join("\n") + "</code></pre>");
      continue;
    }
    const heading = HEADING.exec(line);
    if (heading) {
      flushPara();
      const level = Math.min(6, heading[1].length + headingOffset);
      out.push(`<h${level}>` + inline((heading[2] ?? "").trim()) + `</h${level}>`);
      i++;
      continue;
    }
    if (RULE.test(line)) {
      flushPara();
      out.push("<hr>");
      i++;
      continue;
    }
    if (QUOTE.test(line)) {
      flushPara();
      const inner = [];
      while (i < lines.length && !/^\s*$/.test(lines[i])) {
        const q = QUOTE.exec(lines[i]);
        inner.push(q ? q[1] : lines[i]);
        i++;
      }
      out.push("<blockquote>" + renderBlocks(inner, headingOffset) + "</blockquote>");
      continue;
    }
    if (ITEM.test(line)) {
      flushPara();
      i = renderList(lines, i, out);
      continue;
    }
    if (isTableStart(lines, i)) {
      flushPara();
      i = renderTable(lines, i, out);
      continue;
    }
    para.push(line);
    i++;
  }
  flushPara();
  return out.join("");
}

function isFenceClose(line, marker) {
  const m = /^ {0,3}(`{3,}|~{3,})[ \t]*$/.exec(line);
  return m !== null && m[1][0] === marker[0] && m[1].length >= marker.length;
}

function listKind(marker) {
  return /^\d/.test(marker) ? "ol" : "ul";
}

function indentOf(ws) {
  return ws.replace(/\t/g, "    ").length;
}

// renderList renders the list starting at lines[i], nested by indentation,
// and returns the index of the first line after it.
function renderList(lines, i, out) {
  // One entry per open list: its indentation, its kind and whether one of
  // its items is open.
  const stack = [];
  const open = (indent, marker) => {
    const kind = listKind(marker);
    const n = parseInt(marker, 10);
    out.push(kind === "ol" && n !== 1 ? `<ol start="${n}">` : `<${kind}>`);
    stack.push({ indent, kind, item: false });
  };
  const closeTop = () => {
    const top = stack.pop();
    if (top.item) out.push("</li>");
    out.push(`</${top.kind}>`);
  };
  let blank = false;
  while (i < lines.length) {
    const line = lines[i];
    if (/^\s*$/.test(line)) {
      blank = true;
      i++;
      continue;
    }
    const m = ITEM.exec(line);
    if (m && !RULE.test(line)) {
      const indent = indentOf(m[1]);
      while (stack.length > 1 && indent < stack[stack.length - 1].indent) closeTop();
      const top = stack[stack.length - 1];
      if (!top) {
        open(indent, m[2]);
      } else if (indent > top.indent + 1 && top.item) {
        open(indent, m[2]); // a list inside the open item
      } else if (listKind(m[2]) !== top.kind) {
        closeTop();
        open(indent, m[2]);
      }
      const level = stack[stack.length - 1];
      if (level.item) out.push("</li>");
      out.push("<li>" + inline((m[3] ?? "").trim()));
      level.item = true;
      blank = false;
      i++;
      continue;
    }
    // A line that is not an item continues the open item when it is
    // indented, or follows it without a blank line and starts no other
    // block; otherwise the list has ended.
    const indented = /^(?: {2,}|\t)/.test(line);
    if (!indented && (blank || FENCE.test(line) || HEADING.test(line) || QUOTE.test(line) || RULE.test(line))) break;
    out.push("<br>" + inline(line.trim()));
    blank = false;
    i++;
  }
  while (stack.length) closeTop();
  return i;
}

// isTableStart reports whether lines[i] is a table's header row: a row
// with a pipe, then a separator row of as many cells.
function isTableStart(lines, i) {
  const sep = lines[i + 1];
  return (
    lines[i].includes("|") && sep !== undefined && sep.includes("|") && TABLE_SEP.test(sep) &&
    splitRow(sep).length === splitRow(lines[i]).length
  );
}

function splitRow(line) {
  let s = line.trim();
  if (s.startsWith("|")) s = s.slice(1);
  if (s.endsWith("|") && !s.endsWith("\\|")) s = s.slice(0, -1);
  const cells = [];
  let cur = "";
  for (let j = 0; j < s.length; j++) {
    if (s[j] === "\\" && s[j + 1] === "|") {
      cur += "|";
      j++;
    } else if (s[j] === "|") {
      cells.push(cur.trim());
      cur = "";
    } else {
      cur += s[j];
    }
  }
  cells.push(cur.trim());
  return cells;
}

function renderTable(lines, i, out) {
  const head = splitRow(lines[i]);
  const aligns = splitRow(lines[i + 1]).map((c) => {
    const left = c.startsWith(":");
    const right = c.endsWith(":");
    return left && right ? "center" : right ? "right" : left ? "left" : "";
  });
  const cell = (tag, text, j) => {
    // A class, not a style attribute, which the page's policy refuses.
    const a = aligns[j] ? ` class="align-${aligns[j]}"` : "";
    return `<${tag}${tag === "th" ? ' scope="col"' : ""}${a}>` + inline(text ?? "") + `</${tag}>`;
  };
  const rows = [];
  i += 2;
  while (i < lines.length && lines[i].includes("|") && !/^\s*$/.test(lines[i])) {
    rows.push(splitRow(lines[i]));
    i++;
  }
  out.push(
    "<table><thead><tr>" + head.map((c, j) => cell("th", c, j)).join("") + "</tr></thead>" +
      (rows.length
        ? "<tbody>" + rows.map((r) => "<tr>" + head.map((_, j) => cell("td", r[j], j)).join("") + "</tr>").join("") + "</tbody>"
        : "") +
      "</table>",
  );
  return i;
}

// Characters a backslash may escape; after escapeHTML, < > & " ' are
// entities and stay as they are.
const PUNCT = "!#$%()*+,-./:;=?@[\\]^_`{|}~";
// A link's target: http or https with a host, and no space.
const URL_OK = /^https?:\/\/[^\s/?#][^\s]*$/i;
// Sticky patterns, matched at an index without copying the line.
const BACKTICKS = /`+/y;
const BARE_URL = /https?:\/\/(?:[^\s&]|&amp;)+/iy;
const AUTOLINK = /&lt;(https?:\/\/[^\s&]*(?:&amp;[^\s&]*)*)&gt;/iy;
const RUNS = { "*": /\*+/y, _: /_+/y, "~": /~+/y };
const WORD = /[A-Za-z0-9]/;
// How far a span's closing delimiter is looked for, how far a link's
// brackets, and how deeply spans nest: bounds that keep a pathological
// line from stalling the page.
const REACH = 8192;
const LINK_REACH = 2048;
const MAX_DEPTH = 16;

function runAt(re, s, i) {
  re.lastIndex = i;
  const m = re.exec(s);
  return m ? m[0] : "";
}

// inline renders the spans of one line of escaped text. Within a link's
// text (inLink) no other link starts: links do not nest.
function inline(s, depth = 0, inLink = false) {
  // Where a search for a closing delimiter already failed, by delimiter:
  // the next opener of the same kind resumes there rather than scan the
  // same stretch again, which keeps a line of many openers linear.
  const misses = new Map();
  let out = "";
  let i = 0;
  while (i < s.length) {
    const c = s[i];
    if (c === "\\" && i + 1 < s.length && PUNCT.includes(s[i + 1])) {
      out += s[i + 1];
      i += 2;
      continue;
    }
    if (c === "`") {
      const span = codeSpan(s, i, misses);
      if (span) {
        out += "<code>" + span.text + "</code>";
        i = span.end;
      } else {
        const run = runAt(BACKTICKS, s, i);
        out += run;
        i += run.length;
      }
      continue;
    }
    if (!inLink && (c === "[" || (c === "!" && s[i + 1] === "["))) {
      const link = linkAt(s, c === "!" ? i + 1 : i, depth);
      if (link) {
        out += link.html;
        i = link.end;
        continue;
      }
    }
    if (c === "&" && !inLink) {
      const m = runAt(AUTOLINK, s, i);
      const url = m.slice(4, -4);
      if (URL_OK.test(url)) {
        out += anchor(url, url);
        i += m.length;
        continue;
      }
    }
    if (!inLink && (c === "h" || c === "H") && (i === 0 || !WORD.test(s[i - 1]))) {
      const m = runAt(BARE_URL, s, i);
      const url = m ? trimURL(m) : "";
      if (URL_OK.test(url)) {
        out += anchor(url, url);
        i += url.length;
        continue;
      }
    }
    if (c === "*" || c === "_" || c === "~") {
      const run = runAt(RUNS[c], s, i);
      const em = depth < MAX_DEPTH ? emphasis(s, i, run, depth, inLink, misses) : null;
      if (em) {
        out += em.html;
        i = em.end;
      } else {
        out += run;
        i += run.length;
      }
      continue;
    }
    out += c;
    i++;
  }
  return out;
}

// codeSpan finds the code span opened by the backticks at i: up to the
// next run of as many backticks. misses, when given, remembers where a
// search failed.
function codeSpan(s, i, misses) {
  const open = runAt(BACKTICKS, s, i);
  const limit = Math.min(s.length, i + REACH);
  const key = "`" + open.length;
  let j = Math.max(i + open.length, misses?.get(key) ?? 0);
  for (;;) {
    const k = j < limit ? s.indexOf("`", j) : -1;
    if (k < 0 || k >= limit) {
      misses?.set(key, Math.max(j, limit));
      return null;
    }
    const run = runAt(BACKTICKS, s, k);
    if (run.length === open.length) {
      let text = s.slice(i + open.length, k);
      if (text.length > 2 && text.startsWith(" ") && text.endsWith(" ") && text.trim() !== "") text = text.slice(1, -1);
      return { text, end: k + run.length };
    }
    j = k + run.length;
  }
}

// skipCode returns the index after a code span at i, or after its
// backticks when they open none.
function skipCode(s, i) {
  const span = codeSpan(s, i);
  return span ? span.end : i + runAt(BACKTICKS, s, i).length;
}

// linkAt renders [text](url) at i (s[i] === "["), or an image's
// ![alt](url) as a link to it; null when there is none. A target that is
// not http or https leaves only the text.
function linkAt(s, i, depth) {
  const image = i > 0 && s[i - 1] === "!";
  const limit = Math.min(s.length, i + LINK_REACH);
  let nest = 0;
  let j = i;
  for (; j < limit; j++) {
    if (s[j] === "\\") {
      j++;
    } else if (s[j] === "`") {
      j = skipCode(s, j) - 1;
    } else if (s[j] === "[") {
      nest++;
    } else if (s[j] === "]") {
      nest--;
      if (nest === 0) break;
    }
  }
  if (j >= limit || s[j + 1] !== "(") return null;
  // The target ends at the parenthesis that balances the opening one.
  let close = j + 2;
  for (let parens = 1; close < limit; close++) {
    if (s[close] === "(") parens++;
    else if (s[close] === ")" && --parens === 0) break;
  }
  if (close >= limit) return null;
  const text = s.slice(i + 1, j);
  let target = s.slice(j + 2, close).trim();
  // An optional title after the URL: "title".
  const titled = /^(\S+)\s+&quot;.*&quot;$/.exec(target);
  if (titled) target = titled[1];
  if (target.startsWith("&lt;") && target.endsWith("&gt;")) target = target.slice(4, -4);
  const label = image ? text : inline(text, depth + 1, true);
  const end = close + 1;
  if (!URL_OK.test(target)) return { html: label, end };
  return { html: anchor(target, label), end };
}

// anchor is a link to url (escaped text that URL_OK accepted). It opens
// in a new tab, without a referrer or a handle on this page.
function anchor(url, label) {
  return `<a href="${url}" rel="noopener noreferrer nofollow" target="_blank">${label}</a>`;
}

// trimURL drops trailing punctuation that ends a sentence rather than the
// URL, and a closing parenthesis without its opening one.
function trimURL(url) {
  for (;;) {
    const last = url[url.length - 1];
    if (".,:;!?".includes(last)) {
      url = url.slice(0, -1);
    } else if (last === ")" && (url.match(/\(/g) ?? []).length < (url.match(/\)/g) ?? []).length) {
      url = url.slice(0, -1);
    } else if (url.endsWith("&amp;")) {
      url = url.slice(0, -5);
    } else {
      return url;
    }
  }
}

// emphasis renders *em*, **strong**, ***both***, the same with _ (only at
// word boundaries, so snake_case stays) and ~~deleted~~, for the
// delimiter run at i; null when nothing closes it.
function emphasis(s, i, run, depth, inLink, misses) {
  const c = run[0];
  if (run.length > 3 || (c === "~" && run.length !== 2)) return null;
  const next = s[i + run.length];
  if (next === undefined || /\s/.test(next)) return null;
  if (c === "_" && i > 0 && WORD.test(s[i - 1])) return null;
  const limit = Math.min(s.length, i + REACH);
  const key = c + run.length;
  let j = Math.max(i + run.length, misses.get(key) ?? 0);
  while (j < limit) {
    if (s[j] === "`") {
      j = skipCode(s, j);
      continue;
    }
    if (s[j] === "\\") {
      j += 2;
      continue;
    }
    if (s[j] !== c) {
      j++;
      continue;
    }
    const close = runAt(RUNS[c], s, j);
    const after = s[j + close.length];
    const boundary = c !== "_" || after === undefined || !WORD.test(after);
    if (close.length === run.length && !/\s/.test(s[j - 1]) && boundary) {
      const inner = inline(s.slice(i + run.length, j), depth + 1, inLink);
      const end = j + close.length;
      if (c === "~") return { html: "<del>" + inner + "</del>", end };
      if (run.length === 1) return { html: "<em>" + inner + "</em>", end };
      if (run.length === 2) return { html: "<strong>" + inner + "</strong>", end };
      return { html: "<strong><em>" + inner + "</em></strong>", end };
    }
    j += close.length;
  }
  misses.set(key, j);
  return null;
}

// The Trusted Types policy that alone may write HTML into the console's
// page (the Content-Security-Policy names it and no other): it renders
// Markdown, so whatever reaches innerHTML went through escapeHTML.
const policy = globalThis.trustedTypes?.createPolicy("agentgate-markdown", {
  createHTML: (src, opts) => renderMarkdown(src, opts),
});

/** setMarkdown replaces el's content with src rendered as Markdown. */
export function setMarkdown(el, src, opts) {
  el.innerHTML = policy ? policy.createHTML(src, opts) : renderMarkdown(src, opts);
}
