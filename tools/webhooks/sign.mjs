#!/usr/bin/env node
// Signs one message with the official Standard Webhooks library, at the
// version package-lock.json pins, so that agentgate's own check of a
// trigger's delivery (internal/triggers) is tested against what real
// senders compute rather than against itself.
//
//   echo '{"secret":"whsec_…","id":"msg_1","timestamp":1700000000,"body":"{}"}' | node sign.mjs
//
// It prints the webhook-signature header value ("v1,<base64>") and exits 0,
// or says what is wrong with its input and exits 2.

import { readFileSync } from "node:fs";
// The package is CommonJS: its default export is module.exports.
import standardwebhooks from "standardwebhooks";

const { Webhook } = standardwebhooks;

function usage(msg) {
  process.stderr.write(`sign.mjs: ${msg}\n`);
  process.exit(2);
}

let input;
try {
  input = JSON.parse(readFileSync(0, "utf8"));
} catch (err) {
  usage(`stdin is not JSON: ${err.message}`);
}
const { secret, id, timestamp, body } = input ?? {};
if (typeof secret !== "string" || typeof id !== "string" || typeof body !== "string" || !Number.isInteger(timestamp)) {
  usage("want {secret: string, id: string, timestamp: integer Unix seconds, body: string}");
}

process.stdout.write(new Webhook(secret).sign(id, new Date(timestamp * 1000), body) + "\n");
