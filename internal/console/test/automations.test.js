// Unit tests of the schedules and triggers pages' pure part, run by node
// --test: how a schedule's "when" and an outcome read, and the rows built
// from the gateway's answers.

import { test } from "node:test";
import assert from "node:assert/strict";
import {
  automationPath,
  describeOutcome,
  outcomeSentence,
  scheduleRows,
  scheduleWhen,
  tidyDuration,
  triggerRows,
} from "../static/automations.js";

// time stands for the reader's local time, which depends on the machine.
const time = (iso) => "at " + iso;

test("a Go duration loses only the zero units it ends with", () => {
  for (const [given, want] of [
    ["1h0m0s", "1h"],
    ["24h0m0s", "24h"],
    ["1h30m0s", "1h30m"],
    ["10m0s", "10m"],
    ["1m30s", "1m30s"],
    ["10s", "10s"],
    ["100s", "100s"],
    ["1h0m5s", "1h0m5s"],
    ["0s", "0s"],
    ["1h", "1h"],
  ]) {
    assert.equal(tidyDuration(given), want, `tidyDuration(${given})`);
  }
});

test("a schedule's when is its cron in its time zone, or its interval", () => {
  assert.equal(scheduleWhen({ cron: "0 3 * * *", timezone: "Europe/Paris" }), "0 3 * * * (Europe/Paris)");
  assert.equal(scheduleWhen({ cron: "@daily" }), "@daily (UTC)");
  assert.equal(scheduleWhen({ every: "1h0m0s" }), "every 1h");
  assert.equal(scheduleWhen({ every: "10s", timezone: "UTC" }), "every 10s");
  assert.equal(scheduleWhen({}), "–");
  assert.equal(scheduleWhen(undefined), "–");
});

test("a started fire links its run", () => {
  const d = describeOutcome({ fire_time: "2026-12-06T10:00:10Z", outcome: "started", run_id: "0a1b2c3d-4e5f-6789-abcd-ef0123456789", manual: true });
  assert.equal(d.label, "started");
  assert.equal(d.tone, "ok");
  assert.equal(d.detail, "");
  assert.equal(d.manual, true);
  assert.deepEqual(d.links, [
    { runId: "0a1b2c3d-4e5f-6789-abcd-ef0123456789", text: "run 0a1b2c3d…", label: "Run 0a1b2c3d-4e5f-6789-abcd-ef0123456789" },
  ]);
  assert.equal(outcomeSentence({ outcome: "started", run_id: "0a1b2c3d-4e5f-6789-abcd-ef0123456789" }), "started run 0a1b2c3d…");
});

test("a refused or missed fire says why, with the gateway's message", () => {
  const refused = describeOutcome({ outcome: "refused", error: { code: "quota_exceeded", message: "the tenant's daily cost is spent" } });
  assert.equal(refused.label, "refused");
  assert.equal(refused.tone, "bad");
  assert.equal(refused.detail, "the tenant's daily cost is spent");
  assert.equal(refused.code, "quota_exceeded");
  assert.deepEqual(refused.links, []);
  assert.equal(outcomeSentence({ outcome: "refused", error: { message: "no" } }), "refused: no");

  const missed = describeOutcome({ outcome: "missed", error: { code: "no_replica", message: "no replica ran at 03:00" } });
  assert.equal(missed.tone, "warn");
  assert.equal(missed.detail, "no replica ran at 03:00");
});

test("a busy fire links the run that was still going", () => {
  const skipped = describeOutcome({ outcome: "skipped_busy", busy_run_id: "ffffeeee-1111" });
  assert.equal(skipped.label, "skipped: busy");
  assert.equal(skipped.detail, "a run of it was still going");
  assert.deepEqual(skipped.links, [{ runId: "ffffeeee-1111", text: "busy: run ffffeeee…", label: "Busy: run ffffeeee-1111" }]);

  const queued = describeOutcome({ outcome: "queued", busy_run_id: "b1" });
  assert.equal(queued.tone, "info");
  assert.equal(queued.detail, "waits for the run still going");
  assert.deepEqual(queued.links.map((l) => l.runId), ["b1"]);
});

test("an outcome the console does not know is shown as the gateway wrote it", () => {
  const d = describeOutcome({ outcome: "postponed" });
  assert.equal(d.label, "postponed");
  assert.equal(d.tone, "neutral");
  assert.equal(describeOutcome({}).label, "unknown");
  // A field of the wrong type is not a link.
  assert.deepEqual(describeOutcome({ outcome: "started", run_id: 42 }).links, []);
});

test("a delivery's outcome: ignored, duplicate", () => {
  const d = describeOutcome({ outcome: "ignored", duplicate: true, event: "ping" });
  assert.equal(d.label, "ignored");
  assert.equal(d.tone, "muted");
  assert.equal(d.duplicate, true);
  assert.equal(d.manual, false);
});

test("schedule rows from GET /v1/schedules", () => {
  const answer = {
    schedules: [
      {
        id: "s2",
        name: "nightly deps",
        cron: "0 3 * * *",
        timezone: "Europe/Paris",
        run: { agent: "claude", prompt: "Update" },
        paused: false,
        next_fire_at: "2026-12-07T02:00:00Z",
        last_run_id: "r1",
        last_fires: [
          { fire_time: "2026-12-06T10:00:10Z", outcome: "started", run_id: "r1", manual: true },
          { fire_time: "2026-12-06T02:00:00Z", outcome: "refused", error: { code: "quota_exceeded", message: "quota" } },
        ],
      },
      { id: "s1", name: "<b>hourly</b>", every: "1h0m0s", paused: true, last_fires: [] },
      { name: "no id: not a row" },
    ],
  };
  const rows = scheduleRows(answer, { time });
  assert.deepEqual(
    rows.map((r) => [r.id, r.name, r.when, r.paused, r.next]),
    [
      // Sorted by name: "<" comes before "n". The name stays text.
      ["s1", "<b>hourly</b>", "every 1h", true, null],
      ["s2", "nightly deps", "0 3 * * * (Europe/Paris)", false, { iso: "2026-12-07T02:00:00Z", text: "at 2026-12-07T02:00:00Z" }],
    ],
  );
  assert.deepEqual(rows[0].fires, []);
  const fires = rows[1].fires;
  assert.equal(fires.length, 2);
  assert.deepEqual(fires[0].at, { iso: "2026-12-06T10:00:10Z", text: "at 2026-12-06T10:00:10Z" });
  assert.deepEqual([fires[0].outcome, fires[0].manual, fires[0].links.map((l) => l.runId)], ["started", true, ["r1"]]);
  assert.deepEqual([fires[1].outcome, fires[1].detail, fires[1].links], ["refused", "quota", []]);
});

test("a paused schedule shows no next fire, even if the answer has one", () => {
  const rows = scheduleRows({ schedules: [{ id: "s", name: "x", every: "10s", paused: true, next_fire_at: "2026-12-07T02:00:00Z" }] }, { time });
  assert.equal(rows[0].next, null);
});

test("an empty or odd answer makes no rows", () => {
  assert.deepEqual(scheduleRows({ schedules: [] }), []);
  assert.deepEqual(scheduleRows(null), []);
  assert.deepEqual(triggerRows({}), []);
});

test("trigger rows from GET /v1/triggers", () => {
  const answer = {
    triggers: [
      {
        id: "t1",
        name: "issues to triage",
        verify: "github",
        url: "http://127.0.0.1:8080/v1/triggers/t1/deliveries",
        paused: false,
        previous_secret_expires_at: "2026-12-07T10:00:00Z",
        last_deliveries: [
          { id: "d2", delivery_id: "gh-2", event: "issues", received_at: "2026-12-06T10:00:11Z", outcome: "started", run_id: "r9" },
          { id: "d1", event: "ping", received_at: "2026-12-06T10:00:00Z", outcome: "ignored" },
        ],
      },
      { id: "t0", name: "deploys", verify: "standard_webhooks", url: "http://h/x", paused: true },
      { id: "t3", name: "zz", verify: "carrier-pigeon", url: "u" },
    ],
  };
  const rows = triggerRows(answer, { time });
  assert.deepEqual(
    rows.map((r) => [r.id, r.verify, r.paused, r.previousSecretUntil?.iso ?? null]),
    [
      ["t0", "Standard Webhooks signature", true, null],
      ["t1", "GitHub signature", false, "2026-12-07T10:00:00Z"],
      ["t3", "carrier-pigeon", false, null],
    ],
  );
  assert.equal(rows[1].url, "http://127.0.0.1:8080/v1/triggers/t1/deliveries");
  assert.deepEqual(
    rows[1].deliveries.map((d) => [d.event, d.outcome, d.at.text, d.links.map((l) => l.runId)]),
    [
      ["issues", "started", "at 2026-12-06T10:00:11Z", ["r9"]],
      ["ping", "ignored", "at 2026-12-06T10:00:00Z", []],
    ],
  );
  assert.deepEqual(rows[0].deliveries, []);
});

test("the paths of a schedule's and a trigger's resources escape the id", () => {
  assert.equal(automationPath("schedules", "a/b?c", "run"), "/v1/schedules/a%2Fb%3Fc/run");
  assert.equal(automationPath("triggers", "t1"), "/v1/triggers/t1");
});
