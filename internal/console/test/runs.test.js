// Unit tests of the runs list's paging, run by node --test.

import { test } from "node:test";
import assert from "node:assert/strict";
import { collectPages } from "../static/runs.js";

// pager serves runs r0… in pages of size, by a cursor that is the next index.
function pager(total, size) {
  const asked = [];
  const get = async (cursor) => {
    asked.push(cursor);
    const from = cursor ? Number(cursor) : 0;
    const runs = [];
    for (let i = from; i < Math.min(total, from + size); i++) runs.push({ id: "r" + i });
    const next = from + size < total ? String(from + size) : undefined;
    return next ? { runs, next_cursor: next } : { runs };
  };
  return { get, asked };
}

test("one page, and the cursor of the next", async () => {
  const p = pager(5, 2);
  const got = await collectPages(p.get, 1);
  assert.deepEqual(got.runs.map((r) => r.id), ["r0", "r1"]);
  assert.equal(got.next, "2");
  assert.deepEqual(p.asked, [""]);
});

test("as many pages as are shown, following the cursor", async () => {
  const p = pager(5, 2);
  const got = await collectPages(p.get, 2);
  assert.deepEqual(got.runs.map((r) => r.id), ["r0", "r1", "r2", "r3"]);
  assert.equal(got.next, "4");
  assert.deepEqual(p.asked, ["", "2"]);
});

test("the last page has no cursor, and reading stops there", async () => {
  const p = pager(3, 2);
  const got = await collectPages(p.get, 5);
  assert.deepEqual(got.runs.map((r) => r.id), ["r0", "r1", "r2"]);
  assert.equal(got.next, "");
  assert.deepEqual(p.asked, ["", "2"]);
});

test("an empty list", async () => {
  const got = await collectPages(pager(0, 2).get, 1);
  assert.deepEqual(got, { runs: [], next: "" });
});

test("a failed page fails the whole", async () => {
  await assert.rejects(collectPages(async () => {
    throw new Error("HTTP 500");
  }, 1), /HTTP 500/);
});

test("a row shows the start of the prompt, and all the run has of it in its title", async () => {
  const { promptPreview } = await import("../static/runs.js");
  const preview = "Create out.txt containing <b>hello</b> " + "x".repeat(150);
  const got = promptPreview({ prompt_preview: preview });
  assert.ok(got.text.startsWith("Create out.txt containing <b>hello</b> x"), got.text);
  assert.ok(got.text.length <= 60 && got.text.endsWith("…"), got.text);
  assert.equal(got.title, preview);
  assert.deepEqual(promptPreview({}), { text: "", title: "" });
});
