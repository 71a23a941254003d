// A client generated from agentgate's spec drives one run: it is what a
// TypeScript user of the gateway writes. The types come from openapi.yaml
// (openapi-typescript writes schema.d.ts beside this file), the calls go
// through openapi-fetch, and `tsc --strict` must accept the program before
// it runs, so a spec whose events or bodies were untyped would fail here.
//
//   node client.js BASE_URL PROMPT
//
// prints one JSON object: what the run did, as the client saw it.
import createClient from "openapi-fetch";
import type { components, paths } from "./schema.js";

type Event = components["schemas"]["Event"];
type RunCompleted = Extract<Event, { type: "run.completed" }>;

// Compile-time checks: an event's data is typed by its type, not unknown,
// and the run's status is a closed set of strings.
type IsUnknown<T> = unknown extends T ? true : false;
const dataIsTyped: IsUnknown<RunCompleted["data"]> = false;
const statusIsClosed: IsUnknown<RunCompleted["data"]["status"]> = false;
void dataIsTyped;
void statusIsClosed;

const baseUrl = process.argv[2] ?? "";
const prompt = process.argv[3] ?? "";
if (baseUrl === "" || prompt === "") {
  console.error("usage: node client.js BASE_URL PROMPT");
  process.exit(2);
}
const api = createClient<paths>({ baseUrl });

async function main() {
  const agents = await api.GET("/v1/agents");
  if (!agents.data) throw new Error(`GET /v1/agents: ${agents.response.status}`);
  const claude = agents.data.agents.find((a) => a.name === "claude");

  // A refused request: the error body is typed too.
  const bad = await api.POST("/v1/runs", { body: { agent: "no-such-agent", prompt } });
  const refused = bad.error ? { status: bad.response.status, code: bad.error.error.code } : null;

  const created = await api.POST("/v1/runs", {
    body: { agent: "claude", prompt, permission: "workspace_write", metadata: { client: "openapi-fetch" } },
  });
  if (!created.data) throw new Error(`POST /v1/runs: ${created.response.status} ${JSON.stringify(created.error)}`);
  const id = created.data.id;

  // The events as NDJSON, one typed Event a line; the stream ends after
  // run.completed.
  const stream = await api.GET("/v1/runs/{id}/events", {
    params: { path: { id } },
    headers: { Accept: "application/x-ndjson" },
    parseAs: "text",
  });
  if (stream.error !== undefined || typeof stream.data !== "string") {
    throw new Error(`GET events: ${stream.response.status}`);
  }
  const types: string[] = [];
  const seqs: number[] = [];
  const messages: string[] = [];
  const tools: string[] = [];
  let completed: RunCompleted["data"] | null = null;
  for (const line of stream.data.split("\n")) {
    if (line.trim() === "") continue;
    const ev = JSON.parse(line) as Event;
    types.push(ev.type);
    seqs.push(ev.seq);
    switch (ev.type) {
      case "message.completed":
        messages.push(ev.data.text);
        break;
      case "tool_call.started":
        tools.push(ev.data.name);
        break;
      case "run.completed":
        completed = ev.data;
        break;
    }
  }

  const run = await api.GET("/v1/runs/{id}", { params: { path: { id } } });
  if (!run.data) throw new Error(`GET /v1/runs/${id}: ${run.response.status}`);
  const missing = await api.GET("/v1/runs/{id}", { params: { path: { id: "00000000-0000-7000-8000-000000000000" } } });

  console.log(
    JSON.stringify({
      claude: claude ? { installed: claude.installed, compatibility: claude.compatibility } : null,
      refused,
      id,
      types,
      seqs,
      messages,
      tools,
      completed: completed && { status: completed.status, result: completed.result ?? "", output_tokens: completed.usage.output_tokens },
      run: { status: run.data.status, result: run.data.result ?? "", metadata: run.data.metadata ?? {} },
      missing: { status: missing.response.status, code: missing.error?.error.code ?? "" },
    }),
  );
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
