#!/usr/bin/env bash
# Installs AG-UI's own schemas and reference client, at the versions pinned
# in tools/agui/package-lock.json, into tools/agui/node_modules. The tests
# of the AG-UI event stream check what the gateway sends with them
# (tools/agui/validate.mjs), and fail without them.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root/tools/agui"

command -v npm >/dev/null || { echo "install-agui: npm is required (Node.js 20 or later)" >&2; exit 1; }

# Exactly the lockfile, from a clean node_modules; npm ci fails if it does
# not match package.json. No install scripts: these packages need none.
npm ci --no-audit --no-fund --ignore-scripts

printf 'installed: @ag-ui/core %s, @ag-ui/client %s\n' \
  "$(node -p 'require("@ag-ui/core/package.json").version')" \
  "$(node -p 'require("@ag-ui/client/package.json").version')"
