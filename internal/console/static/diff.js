// Unified diffs, as GET /v1/runs/{id}/diff serves them (git's format:
// "diff --git" file headers, ---/+++ names, @@ hunks), split into files
// and classified line by line for highlighting.

import { h } from "./dom.js";

const HUNK = /^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@/;

/**
 * parseDiff splits a unified diff into files: {path, lines: [{kind,
 * text}], added, removed, binary}. kind is "file" (a header line),
 * "hunk", "add", "del", "ctx" or "meta" (a note: "\ No newline…", a
 * binary file, a truncation). Within a hunk its counts decide what a line
 * is, so that a removed line that begins with "--" stays a removal.
 */
export function parseDiff(text) {
  const files = [];
  let file = null;
  let oldLeft = 0;
  let newLeft = 0;
  const start = () => {
    file = { path: "", oldPath: "", newPath: "", lines: [], added: 0, removed: 0, binary: false };
    files.push(file);
  };
  const lines = String(text ?? "").split("\n");
  if (lines.length && lines[lines.length - 1] === "") lines.pop();
  for (const line of lines) {
    if (oldLeft > 0 || newLeft > 0) {
      const c = line[0];
      if (c === "+" && newLeft > 0) {
        file.lines.push({ kind: "add", text: line });
        file.added++;
        newLeft--;
        continue;
      }
      if (c === "-" && oldLeft > 0) {
        file.lines.push({ kind: "del", text: line });
        file.removed++;
        oldLeft--;
        continue;
      }
      if ((c === " " || line === "") && oldLeft > 0 && newLeft > 0) {
        file.lines.push({ kind: "ctx", text: line });
        oldLeft--;
        newLeft--;
        continue;
      }
      if (c === "\\") {
        file.lines.push({ kind: "meta", text: line });
        continue;
      }
      // The hunk ended early (a cut diff): read on as headers.
      oldLeft = newLeft = 0;
    }
    if (line.startsWith("diff --git ") || (!file && (line.startsWith("--- ") || line.startsWith("Binary files ")))) {
      start();
      if (line.startsWith("diff --git ")) {
        file.path = gitPath(line.slice("diff --git ".length));
        file.lines.push({ kind: "file", text: line });
        continue;
      }
    }
    if (!file) {
      // Text before any file: a note of the gateway's.
      start();
    }
    const hunk = HUNK.exec(line);
    if (hunk) {
      oldLeft = hunk[2] === undefined ? 1 : Number(hunk[2]);
      newLeft = hunk[4] === undefined ? 1 : Number(hunk[4]);
      file.lines.push({ kind: "hunk", text: line });
      continue;
    }
    if (line.startsWith("--- ")) {
      file.oldPath = stripSide(line.slice(4), "a/");
      file.lines.push({ kind: "file", text: line });
      continue;
    }
    if (line.startsWith("+++ ")) {
      file.newPath = stripSide(line.slice(4), "b/");
      if (file.newPath !== "/dev/null") file.path = file.newPath;
      else if (file.oldPath) file.path = file.oldPath;
      file.lines.push({ kind: "file", text: line });
      continue;
    }
    if (/^(new|deleted) file mode |^(old|new) mode |^index |^similarity |^rename (from|to) /.test(line)) {
      file.lines.push({ kind: "file", text: line });
      continue;
    }
    if (line.startsWith("Binary files ")) file.binary = true;
    file.lines.push({ kind: "meta", text: line });
  }
  for (const f of files) if (!f.path) f.path = f.newPath || f.oldPath || "(diff)";
  return files;
}

// gitPath is the new side's path of a "diff --git a/x b/x" line.
function gitPath(names) {
  const quoted = names.endsWith('"');
  const b = names.lastIndexOf(quoted ? ' "b/' : " b/");
  if (b < 0) return names;
  return stripSide(names.slice(b + 1), "b/");
}

function stripSide(name, side) {
  const n = unquote(name.replace(/\t.*$/, ""));
  return n.startsWith(side) ? n.slice(side.length) : n;
}

// unquote reads a path git quoted ("a/with space\t"), C-style.
function unquote(s) {
  if (!(s.length >= 2 && s.startsWith('"') && s.endsWith('"'))) return s;
  const inner = s.slice(1, -1);
  const bytes = [];
  const enc = new TextEncoder();
  for (let i = 0; i < inner.length; i++) {
    const c = inner[i];
    if (c !== "\\") {
      bytes.push(...enc.encode(c));
      continue;
    }
    const n = inner[++i];
    const simple = { n: 10, t: 9, r: 13, '"': 34, "\\": 92, a: 7, b: 8, f: 12, v: 11 };
    if (n in simple) bytes.push(simple[n]);
    else if (/[0-7]/.test(n)) {
      bytes.push(parseInt(inner.slice(i, i + 3), 8));
      i += 2;
    } else bytes.push(...enc.encode(n ?? ""));
  }
  return new TextDecoder().decode(new Uint8Array(bytes));
}

/** LINE_CLASS is the class of each kind of line. */
export const LINE_CLASS = {
  file: "diff-header",
  hunk: "diff-hunk",
  add: "diff-add",
  del: "diff-del",
  ctx: "diff-ctx",
  meta: "diff-meta",
};

/** MAX_LINES bounds the lines drawn, so that a huge diff cannot stall the page. */
export const MAX_LINES = 20000;

/**
 * renderDiff draws files (from parseDiff) into container: one section per
 * file with its name and counts, and its lines as spans of class
 * "diff-line" and LINE_CLASS[kind]. The +/- of each line stays visible, so colour
 * is never the only sign.
 */
export function renderDiff(container, files) {
  const frag = document.createDocumentFragment();
  let drawn = 0;
  for (const f of files) {
    const code = h("code");
    for (const l of f.lines) {
      if (drawn >= MAX_LINES) break;
      code.append(h("span", { class: "diff-line " + LINE_CLASS[l.kind], text: l.text + "\n" }));
      drawn++;
    }
    const stat = f.binary ? "binary" : `+${f.added} −${f.removed}`;
    frag.append(
      h("section", { class: "diff-file", "aria-label": f.path },
        h("h4", { class: "diff-file-name" }, h("span", { text: f.path }), " ",
          h("span", { class: "diff-stat", text: stat, "aria-label": f.binary ? "binary" : `${f.added} added, ${f.removed} removed` })),
        h("pre", { class: "diff-body", tabindex: "0" }, code)),
    );
    if (drawn >= MAX_LINES) {
      frag.append(h("p", { class: "help", text: `The diff has more lines than the ${MAX_LINES} drawn here; download the files to see the rest.` }));
      break;
    }
  }
  container.replaceChildren(frag);
}
