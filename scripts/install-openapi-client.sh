#!/usr/bin/env bash
# Installs what the generated-client test (cmd/gateway,
# TestGeneratedClientDrivesARun) builds a TypeScript client of the API
# with: openapi-typescript, openapi-fetch and TypeScript, at the versions
# pinned in tools/openapi-client/package-lock.json, into
# tools/openapi-client/node_modules. The test fails without them.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root/tools/openapi-client"

command -v npm >/dev/null || { echo "install-openapi-client: npm is required (Node.js 20 or later)" >&2; exit 1; }

# Exactly the lockfile, from a clean node_modules; these packages need no
# install scripts.
npm ci --no-audit --no-fund --ignore-scripts

printf 'install-openapi-client: openapi-typescript %s, openapi-fetch %s, typescript %s\n' \
  "$(node -p 'require("openapi-typescript/package.json").version')" \
  "$(node -p 'require("openapi-fetch/package.json").version')" \
  "$(node -p 'require("typescript/package.json").version')"
