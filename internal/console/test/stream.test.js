// Unit tests of the console's event stream, with a fake EventSource and
// a fake API, run by node --test: a dropped stream resumes, a stream the
// browser gave up on reopens with a fresh token after the last event, and
// nothing is delivered twice.

import { test } from "node:test";
import assert from "node:assert/strict";
import { RunStream } from "../static/stream.js";
import { ApiError } from "../static/api.js";

class FakeEventSource {
  static CONNECTING = 0;
  static OPEN = 1;
  static CLOSED = 2;
  static all = [];

  constructor(url) {
    this.url = url;
    this.readyState = FakeEventSource.CONNECTING;
    this.listeners = new Map();
    this.onopen = null;
    this.onerror = null;
    this.onmessage = null;
    FakeEventSource.all.push(this);
  }

  addEventListener(type, fn) {
    this.listeners.set(type, fn);
  }

  close() {
    this.readyState = FakeEventSource.CLOSED;
  }

  open() {
    this.readyState = FakeEventSource.OPEN;
    this.onopen?.();
  }

  send(seq, type) {
    const env = { v: 1, seq, type, run_id: "r1", data: {} };
    this.listeners.get(type)?.({ type, lastEventId: String(seq), data: JSON.stringify(env) });
  }

  drop() {
    this.readyState = FakeEventSource.CONNECTING;
    this.onerror?.();
  }

  fail() {
    this.readyState = FakeEventSource.CLOSED;
    this.onerror?.();
  }
}
globalThis.EventSource = FakeEventSource;

function fakeApi({ key = "", runStatus = 200 } = {}) {
  let n = 0;
  return {
    key,
    calls: [],
    async json(method, path) {
      this.calls.push(`${method} ${path}`);
      if (path.endsWith("/stream-token")) return { token: `tok${++n}` };
      if (runStatus !== 200) throw new ApiError(runStatus, "not_found", "no such run");
      return { id: "r1", status: "running" };
    },
  };
}

// until waits for cond, polling: the stream reopens after a timer.
async function until(cond, what) {
  const deadline = Date.now() + 5000;
  while (!cond()) {
    if (Date.now() > deadline) assert.fail("timed out waiting for " + what);
    await new Promise((r) => setTimeout(r, 10));
  }
}

function follow(api) {
  FakeEventSource.all = [];
  const got = [];
  const states = [];
  const s = new RunStream("r1", { api, onEvent: (e) => got.push(e.seq), onState: (st, info) => states.push([st, info.reconnects]) });
  s.start();
  return { s, got, states };
}

test("with a key: a token per stream, a reconnect, a reopen after the last event, no repeats", async () => {
  const api = fakeApi({ key: "k" });
  const { s, got, states } = follow(api);
  await until(() => FakeEventSource.all.length === 1, "the first stream");
  const first = FakeEventSource.all[0];
  assert.equal(first.url, "/v1/runs/r1/events?token=tok1");
  first.open();
  first.send(1, "run.queued");
  first.send(2, "run.started");
  // The browser's own reconnect (Last-Event-ID): the same EventSource.
  first.drop();
  assert.deepEqual(states.at(-1), ["reconnecting", 0]);
  first.open();
  assert.deepEqual(states.at(-1), ["reconnected", 1]);
  first.send(2, "run.started"); // a repeat is dropped
  first.send(3, "message.delta");
  // The browser gives up (an expired token's 401): a new stream, a new token, after the last event.
  first.fail();
  await until(() => FakeEventSource.all.length === 2, "the reopened stream");
  const second = FakeEventSource.all[1];
  assert.equal(second.url, "/v1/runs/r1/events?token=tok2&after=3");
  assert.equal(first.readyState, FakeEventSource.CLOSED);
  second.open();
  assert.deepEqual(states.at(-1), ["reconnected", 2]);
  second.send(4, "run.completed");
  assert.deepEqual(got, [1, 2, 3, 4]);
  assert.deepEqual(states.at(-1), ["ended", 2]);
  assert.equal(second.readyState, FakeEventSource.CLOSED);
  // The run is checked before the stream reopens.
  assert.deepEqual(api.calls, ["POST /v1/runs/r1/stream-token", "GET /v1/runs/r1", "POST /v1/runs/r1/stream-token"]);
  s.stop();
});

test("without a key: no token, and after= on a reopen", async () => {
  const api = fakeApi();
  const { s, got } = follow(api);
  await until(() => FakeEventSource.all.length === 1, "the first stream");
  const first = FakeEventSource.all[0];
  assert.equal(first.url, "/v1/runs/r1/events");
  first.open();
  first.send(1, "run.queued");
  first.fail();
  await until(() => FakeEventSource.all.length === 2, "the reopened stream");
  assert.equal(FakeEventSource.all[1].url, "/v1/runs/r1/events?after=1");
  assert.deepEqual(got, [1]);
  s.stop();
});

test("a run that is gone stops the retries", async () => {
  const api = fakeApi({ runStatus: 404 });
  const { s, states } = follow(api);
  await until(() => FakeEventSource.all.length === 1, "the first stream");
  FakeEventSource.all[0].fail();
  await until(() => states.at(-1)[0] === "error", "the error state");
  await new Promise((r) => setTimeout(r, 400));
  assert.equal(FakeEventSource.all.length, 1);
  s.stop();
});

test("stop ends everything", async () => {
  const api = fakeApi();
  const { s } = follow(api);
  await until(() => FakeEventSource.all.length === 1, "the first stream");
  s.stop();
  assert.equal(FakeEventSource.all[0].readyState, FakeEventSource.CLOSED);
  FakeEventSource.all[0].fail();
  await new Promise((r) => setTimeout(r, 400));
  assert.equal(FakeEventSource.all.length, 1);
});
