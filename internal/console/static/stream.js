// One run's event stream, kept open across drops. The browser's
// EventSource reconnects by itself with Last-Event-ID after a dropped
// connection; when it gives up instead (a 401 once a stream token has
// expired, or another status), a new stream opens with a fresh token and
// ?after= the last event seen, so that nothing is missed or repeated.

import { ApiError, runPath } from "./api.js";

/** EVENT_TYPES is every event type of the envelope, version 1. */
export const EVENT_TYPES = [
  "run.queued", "run.started", "session.started", "message.delta", "message.completed",
  "reasoning.delta", "reasoning.completed", "tool_call.started", "tool_call.output_delta",
  "tool_call.progress", "tool_call.completed", "file.changed", "plan.updated", "usage.updated", "rate_limit", "warning",
  "agent.unparsed", "run.completed", "approval.requested", "approval.resolved", "turn.started",
  "turn.completed", "message.queued", "run.resumed", "run.hibernated",
];

const MIN_BACKOFF = 250;
const MAX_BACKOFF = 10000;

/**
 * RunStream follows one run's events. onEvent gets each envelope once, in
 * seq order; onState gets the connection's state: "connecting", "live",
 * "reconnecting", "reconnected" (live again after a drop), "ended" (after
 * run.completed) or "error" (with a reason: the run is gone, or the key
 * is refused).
 */
export class RunStream {
  constructor(runId, { api, onEvent, onState }) {
    this.runId = runId;
    this.api = api;
    this.onEvent = onEvent;
    this.onState = onState;
    this.lastSeq = 0;
    this.reconnects = 0;
    this.state = "";
    this.es = null;
    this.timer = 0;
    this.backoff = MIN_BACKOFF;
    this.stopped = false;
  }

  start() {
    this.setState("connecting");
    this.open();
  }

  stop() {
    this.stopped = true;
    clearTimeout(this.timer);
    this.es?.close();
    this.es = null;
  }

  setState(state, detail = "") {
    this.state = state;
    this.onState(state, { reconnects: this.reconnects, detail });
  }

  async open() {
    if (this.stopped) return;
    let url;
    try {
      url = await this.streamURL();
    } catch (err) {
      this.failed(err);
      return;
    }
    if (this.stopped) return;
    const es = new EventSource(url);
    this.es = es;
    const receive = (e) => this.receive(es, e);
    for (const t of EVENT_TYPES) es.addEventListener(t, receive);
    es.onmessage = receive;
    es.onopen = () => {
      if (this.es !== es) return;
      this.backoff = MIN_BACKOFF;
      if (this.state === "reconnecting") {
        this.reconnects++;
        this.setState("reconnected");
      } else if (this.state === "connecting") {
        this.setState("live");
      }
    };
    es.onerror = () => {
      if (this.es !== es || this.stopped) return;
      if (es.readyState === EventSource.CONNECTING) {
        // Dropped: the browser is reconnecting with Last-Event-ID.
        this.setState("reconnecting");
        return;
      }
      // The browser gave up on this stream (an expired token's 401, a
      // 503 while a replica drains, …): open another.
      es.close();
      this.es = null;
      this.setState("reconnecting");
      this.retry();
    };
  }

  // streamURL is the events URL after the last event seen, with a fresh
  // stream token when the console has a key (a gateway without keys needs
  // none).
  async streamURL() {
    const q = new URLSearchParams();
    if (this.api.key) {
      const tok = await this.api.json("POST", runPath(this.runId, "stream-token"));
      q.set("token", tok.token);
    }
    if (this.lastSeq > 0) q.set("after", String(this.lastSeq));
    const qs = q.toString();
    return runPath(this.runId, "events") + (qs ? "?" + qs : "");
  }

  retry() {
    clearTimeout(this.timer);
    const wait = this.backoff;
    this.backoff = Math.min(this.backoff * 2, MAX_BACKOFF);
    this.timer = setTimeout(() => this.check(), wait);
  }

  // check asks for the run before opening a stream again: a run that is
  // gone, or a key that is refused, ends the retries instead of looping.
  async check() {
    if (this.stopped) return;
    try {
      await this.api.json("GET", runPath(this.runId));
    } catch (err) {
      this.failed(err);
      return;
    }
    this.open();
  }

  failed(err) {
    if (this.stopped) return;
    if (err instanceof ApiError && [401, 403, 404].includes(err.status)) {
      this.setState("error", err.message);
      return;
    }
    this.setState("reconnecting", err.message);
    this.retry();
  }

  receive(es, e) {
    if (this.es !== es) return;
    const seq = Number(e.lastEventId);
    // A repeat (an event already seen before a reconnect) is dropped.
    if (!Number.isSafeInteger(seq) || seq <= this.lastSeq) return;
    let env;
    try {
      env = JSON.parse(e.data);
    } catch {
      return;
    }
    this.lastSeq = seq;
    this.onEvent(env);
    if (env.type === "run.completed") {
      // The last event: stop here rather than reconnect to hear 204.
      this.stop();
      this.setState("ended");
    }
  }
}
