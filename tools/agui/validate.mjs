#!/usr/bin/env node
// Checks agentgate's AG-UI event streams with AG-UI's own code, at the
// versions package-lock.json pins: every event against @ag-ui/core's zod
// schemas (EventSchemas), the input against RunAgentInputSchema, and the
// stream as a whole through @ag-ui/client, which verifies the order of the
// events and applies them (messages, state patches, interrupts) exactly as
// an AG-UI front end does.
//
//   node validate.mjs [--input input.json] < stream
//       stream: a server-sent event stream as the gateway sends it.
//   node validate.mjs --url URL --input input.json [--header "Name: value"]... [--approve]
//       posts the input to URL as an AG-UI HttpAgent does and checks what
//       comes back; with --approve, answers each interrupt a run ends with
//       ({"approved": true}) in a new run on the thread, until none is left.
//
// It prints a JSON summary (the events' types, the messages and state the
// client built, its pending interrupts) and exits 0, or names the first
// thing that is not valid and exits 1. Exit 2 is a usage error.

import { readFileSync } from "node:fs";
import { AbstractAgent, HttpAgent } from "@ag-ui/client";
import { EventSchemas, RunAgentInputSchema } from "@ag-ui/core/schemas";
import { Observable } from "rxjs";

function fail(msg) {
  process.stderr.write(`invalid: ${msg}\n`);
  process.exit(1);
}

function usage(msg) {
  process.stderr.write(`validate.mjs: ${msg}\n`);
  process.exit(2);
}

function args(argv) {
  const out = { headers: {}, approve: false };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const next = () => {
      if (i + 1 >= argv.length) usage(`${a} needs a value`);
      return argv[++i];
    };
    switch (a) {
      case "--input":
        out.input = next();
        break;
      case "--url":
        out.url = next();
        break;
      case "--header": {
        const h = next();
        const colon = h.indexOf(":");
        if (colon < 1) usage(`--header ${JSON.stringify(h)} is not "Name: value"`);
        out.headers[h.slice(0, colon).trim()] = h.slice(colon + 1).trim();
        break;
      }
      case "--approve":
        out.approve = true;
        break;
      default:
        usage(`unknown argument ${JSON.stringify(a)}`);
    }
  }
  if (out.url && !out.input) usage("--url needs --input");
  return out;
}

function issues(error) {
  return error.issues
    .map((i) => `${i.path.length ? i.path.join(".") : "(event)"}: ${i.message}`)
    .join("; ");
}

function readInput(path) {
  let input;
  try {
    input = JSON.parse(readFileSync(path, "utf8"));
  } catch (e) {
    usage(`--input ${path}: ${e.message}`);
  }
  const parsed = RunAgentInputSchema.safeParse(input);
  if (!parsed.success) fail(`the RunAgentInput in ${path}: ${issues(parsed.error)}`);
  return input;
}

// parseSSE splits a server-sent event stream into its events' data, as
// AG-UI's client does (data lines joined; comments, retry and event
// ignored), keeping each event's id for messages.
function parseSSE(text) {
  const events = [];
  for (const block of text.replace(/\r\n?/g, "\n").split("\n\n")) {
    let id = "";
    const data = [];
    for (const line of block.split("\n")) {
      if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
      else if (line.startsWith("id:")) id = line.slice(3).replace(/^ /, "");
    }
    if (data.length > 0) events.push({ id, data: data.join("\n") });
  }
  return events;
}

// check validates one event by AG-UI's schema; n numbers it from 1.
function check(raw, n, id) {
  let event;
  try {
    event = JSON.parse(raw);
  } catch (e) {
    fail(`event ${n} (id ${id}): data is not JSON: ${e.message}`);
  }
  const parsed = EventSchemas.safeParse(event);
  if (!parsed.success) fail(`event ${n} (${event?.type}, id ${id}): ${issues(parsed.error)}`);
  return event;
}

// Replay is an AG-UI agent whose run is a recorded stream: running it puts
// the events through the client's own verification and application.
class Replay extends AbstractAgent {
  constructor(events, config) {
    super(config);
    this.events = events;
  }
  run() {
    return new Observable((sub) => {
      for (const e of this.events) sub.next(e);
      sub.complete();
    });
  }
}

// quietly runs fn with console.warn and console.error collected, not
// printed: the client reports what it could not apply (a state patch that
// does not apply, a field it strips) with a warning and goes on, and a
// warning is a failure here.
async function quietly(fn) {
  const said = [];
  const { warn, error } = console;
  console.warn = (...a) => said.push(a.map(String).join(" "));
  console.error = () => {};
  try {
    await fn();
  } finally {
    console.warn = warn;
    console.error = error;
  }
  return said;
}

function recorder() {
  const seen = [];
  return {
    seen,
    subscriber: {
      onEvent: ({ event }) => {
        seen.push(event.type);
      },
    },
  };
}

function summary(agent, runs) {
  return {
    runs,
    messages: agent.messages,
    state: agent.state,
    pendingInterrupts: agent.pendingInterrupts,
  };
}

function agentConfig(input) {
  return input
    ? { threadId: input.threadId, initialMessages: input.messages, initialState: input.state ?? {} }
    : {};
}

function runParams(input) {
  if (!input) return {};
  const p = { runId: input.runId, forwardedProps: input.forwardedProps ?? {} };
  if (input.resume) p.resume = input.resume;
  return p;
}

async function replay(opts) {
  const input = opts.input ? readInput(opts.input) : undefined;
  const chunks = [];
  for await (const c of process.stdin) chunks.push(c);
  const sse = parseSSE(Buffer.concat(chunks).toString("utf8"));
  if (sse.length === 0) fail("the stream has no events");
  const events = sse.map((e, i) => check(e.data, i + 1, e.id));
  const first = events.find((e) => e.type === "RUN_STARTED");
  const agent = new Replay(events, agentConfig(input) ?? {});
  if (!input && first) agent.threadId = first.threadId;
  const rec = recorder();
  let warned;
  try {
    warned = await quietly(() => agent.runAgent(runParams(input), rec.subscriber));
  } catch (e) {
    fail(`event ${rec.seen.length + 1} (${events[rec.seen.length]?.type}, id ${sse[rec.seen.length]?.id}): ${e.message}`);
  }
  if (warned.length > 0) fail(`the client warned: ${warned[0]}`);
  if (rec.seen.length !== events.length) {
    fail(`the client applied ${rec.seen.length} of ${events.length} events`);
  }
  return summary(agent, [{ events: events.length, types: events.map((e) => e.type) }]);
}

async function live(opts) {
  let input = readInput(opts.input);
  const agent = new HttpAgent({ url: opts.url, headers: opts.headers, ...agentConfig(input) });
  const runs = [];
  for (let n = 0; n < 10; n++) {
    const types = [];
    let bad;
    const sub = {
      onEvent: ({ event }) => {
        types.push(event.type);
        const parsed = EventSchemas.safeParse(event);
        if (!parsed.success && !bad) bad = `run ${n + 1}, event ${types.length} (${event.type}): ${issues(parsed.error)}`;
      },
    };
    let warned;
    try {
      warned = await quietly(() => agent.runAgent(runParams(input), sub));
    } catch (e) {
      fail(`run ${n + 1}, after event ${types.length} (${types.at(-1)}): ${e.message}`);
    }
    if (bad) fail(bad);
    if (warned.length > 0) fail(`run ${n + 1}: the client warned: ${warned[0]}`);
    runs.push({ events: types.length, types });
    if (!opts.approve || agent.pendingInterrupts.length === 0) break;
    input = {
      ...input,
      runId: `${input.runId}-${n + 1}`,
      resume: agent.pendingInterrupts.map((i) => ({
        interruptId: i.id,
        status: "resolved",
        payload: { approved: true },
      })),
    };
    const parsed = RunAgentInputSchema.safeParse({ ...input, messages: agent.messages, state: agent.state });
    if (!parsed.success) fail(`the resuming RunAgentInput: ${issues(parsed.error)}`);
  }
  return summary(agent, runs);
}

const opts = args(process.argv.slice(2));
const out = opts.url ? await live(opts) : await replay(opts);
process.stdout.write(JSON.stringify(out) + "\n");
