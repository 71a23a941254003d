#!/usr/bin/env bash
# Installs the official Agent Client Protocol SDK, at the version pinned in
# tools/acp-client/package-lock.json, into tools/acp-client/node_modules.
# The test of `agentgate acp` drives it as an editor would
# (tools/acp-client/editor.mjs), and fails without it.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root/tools/acp-client"

command -v npm >/dev/null || { echo "install-acp-client: npm is required (Node.js 20 or later)" >&2; exit 1; }

# Exactly the lockfile, from a clean node_modules; npm ci fails if it does
# not match package.json. No install scripts: this package needs none.
npm ci --no-audit --no-fund --ignore-scripts

printf 'installed: @agentclientprotocol/sdk %s\n' \
  "$(node -p 'JSON.parse(require("fs").readFileSync("node_modules/@agentclientprotocol/sdk/package.json", "utf8")).version')"
