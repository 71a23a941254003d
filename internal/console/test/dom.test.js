// Unit tests of the console's formatting helpers, run by node --test.

import { test } from "node:test";
import assert from "node:assert/strict";
import { formatElapsed } from "../static/dom.js";

test("formatElapsed shows a running tool's time in seconds, minutes and hours", () => {
  assert.equal(formatElapsed(0), "0s");
  assert.equal(formatElapsed(30999), "30s");
  assert.equal(formatElapsed(90000), "1m 30s");
  assert.equal(formatElapsed(3599000), "59m 59s");
  assert.equal(formatElapsed(7500000), "2h 5m");
});

test("formatElapsed shows nothing for what is not a duration", () => {
  for (const v of [undefined, null, "30000", -1, NaN, Infinity, {}]) {
    assert.equal(formatElapsed(v), "", `formatElapsed(${String(v)})`);
  }
});
