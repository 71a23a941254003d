// An editor, as Zed is one, driving `agentgate acp` with the official ACP
// SDK's client: it initializes, opens a session, sends each prompt of the
// script in turn, allows every permission request (allow_once), and sends
// session/cancel in the turn named by cancel_turn once an allowed tool call
// runs. It prints the transcript, one JSON object, on stdout: the
// initialize answer, the session id, and per prompt the updates, the
// permission requests and the stop reason or error.
//
//   node editor.mjs '{"prompts":["…","…"],"cancel_turn":2}' agentgate --url URL acp --agent claude
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk";

const [script, command, ...args] = process.argv.slice(2);
const { prompts, cancel_turn: cancelTurn = -1 } = JSON.parse(script);

const child = spawn(command, args, { stdio: ["pipe", "pipe", "inherit"] });
const exited = new Promise((resolve) => child.on("exit", (code, signal) => resolve({ code, signal })));
const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));

const transcript = { turns: [] };
let turn = null;
let turnIndex = -1;
let sessionId = null;
let cancelSent = false;

await acp
  .client({ name: "agentgate-test-editor" })
  .onRequest(acp.methods.client.session.requestPermission, ({ params }) => {
    turn.permissions.push({
      toolCall: params.toolCall,
      options: params.options.map((o) => ({ optionId: o.optionId, kind: o.kind })),
    });
    const allow = params.options.find((o) => o.kind === "allow_once");
    if (!allow) return { outcome: { outcome: "cancelled" } };
    return { outcome: { outcome: "selected", optionId: allow.optionId } };
  })
  .onNotification(acp.methods.client.session.update, ({ params, agent }) => {
    turn.updates.push(params.update);
    const u = params.update;
    if (turnIndex === cancelTurn && !cancelSent && u.sessionUpdate === "tool_call_update" && u.status === "in_progress") {
      cancelSent = true;
      turn.cancel_sent = true;
      agent.notify(acp.methods.agent.session.cancel, { sessionId: params.sessionId });
    }
  })
  .connectWith(stream, async (ctx) => {
    transcript.initialize = await ctx.request(acp.methods.agent.initialize, {
      protocolVersion: acp.PROTOCOL_VERSION,
      clientCapabilities: {},
    });
    const session = await ctx.request(acp.methods.agent.session.new, { cwd: process.cwd(), mcpServers: [] });
    sessionId = transcript.session_id = session.sessionId;
    for (const [i, text] of prompts.entries()) {
      turnIndex = i;
      turn = { prompt: text, updates: [], permissions: [] };
      transcript.turns.push(turn);
      try {
        const res = await ctx.request(acp.methods.agent.session.prompt, {
          sessionId,
          prompt: [{ type: "text", text }],
        });
        turn.stop_reason = res.stopReason;
        turn.meta = res._meta ?? null;
      } catch (e) {
        turn.error = { code: e.code, message: e.message, data: e.data ?? null };
      }
    }
  });

child.stdin.end(); // as an editor closing: the bridge closes the run and exits
transcript.exit = await exited;
process.stdout.write(JSON.stringify(transcript) + "\n");
