// Unit tests of the console's diff parser, run by node --test.

import { test } from "node:test";
import assert from "node:assert/strict";
import { parseDiff } from "../static/diff.js";

const kinds = (f) => f.lines.map((l) => l.kind).join(" ");

test("a new file, as the gateway's snapshots diff it", () => {
  const [f, ...rest] = parseDiff("diff --git a/out.txt b/out.txt\nnew file mode 100644\n--- /dev/null\n+++ b/out.txt\n@@ -0,0 +1 @@\n+hello\n");
  assert.equal(rest.length, 0);
  assert.equal(f.path, "out.txt");
  assert.equal(kinds(f), "file file file file hunk add");
  assert.equal(f.added, 1);
  assert.equal(f.removed, 0);
  assert.equal(f.lines[5].text, "+hello");
});

test("hunk counts decide: a removed line may look like a header", () => {
  const diff = [
    "diff --git a/notes.md b/notes.md",
    "--- a/notes.md",
    "+++ b/notes.md",
    "@@ -1,4 +1,4 @@",
    " keep",
    "--- a rule",
    "+++ a plus line",
    "",
    "\\ No newline at end of file",
    "diff --git a/gone.txt b/gone.txt",
    "deleted file mode 100644",
    "--- a/gone.txt",
    "+++ /dev/null",
    "@@ -1,2 +0,0 @@",
    "-one",
    "-two",
  ].join("\n");
  const [a, b] = parseDiff(diff);
  assert.equal(a.path, "notes.md");
  assert.equal(kinds(a), "file file file hunk ctx del add ctx meta");
  assert.equal(a.added, 1);
  assert.equal(a.removed, 1);
  assert.equal(b.path, "gone.txt");
  assert.equal(kinds(b), "file file file file hunk del del");
  assert.equal(b.removed, 2);
});

test("several hunks, and a hunk header without counts", () => {
  const [f] = parseDiff("--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n@@ -10,2 +10,3 @@ func\n c\n+d\n e\n");
  assert.equal(f.path, "x");
  assert.equal(kinds(f), "file file hunk del add hunk ctx add ctx");
  assert.equal(f.added, 2);
  assert.equal(f.removed, 1);
});

test("binary and undiffed files are named", () => {
  const files = parseDiff(
    "diff --git a/img.png b/img.png\nnew file mode 100644\nBinary files /dev/null and b/img.png differ\n" +
      "diff --git a/big.bin b/big.bin\nFiles a/big.bin and b/big.bin differ (not diffed: larger than the gateway's limit)\n",
  );
  assert.equal(files.length, 2);
  assert.equal(files[0].path, "img.png");
  assert.equal(files[0].binary, true);
  assert.equal(kinds(files[0]), "file file meta");
  assert.equal(files[1].path, "big.bin");
  assert.equal(kinds(files[1]), "file meta");
});

test("quoted paths and mode changes", () => {
  const [f] = parseDiff('diff --git "a/with space\\303\\251.txt" "b/with space\\303\\251.txt"\nold mode 100644\nnew mode 100755\n');
  assert.equal(f.path, "with spaceé.txt");
  assert.equal(kinds(f), "file file file");
});

test("a diff cut short stays readable", () => {
  const [f] = parseDiff("--- a/x\n+++ b/x\n@@ -1,5 +1,5 @@\n-a\n…[truncated 100 bytes]\n");
  assert.equal(kinds(f), "file file hunk del meta");
});

test("empty and odd input", () => {
  assert.deepEqual(parseDiff(""), []);
  assert.deepEqual(parseDiff(null), []);
  const [f] = parseDiff("some note\n");
  assert.equal(kinds(f), "meta");
});
