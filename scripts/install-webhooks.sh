#!/usr/bin/env bash
# Installs the official Standard Webhooks library, at the version pinned in
# tools/webhooks/package-lock.json, into tools/webhooks/node_modules. The
# tests of inbound triggers check that a delivery it signs
# (tools/webhooks/sign.mjs) is accepted, and fail without it.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root/tools/webhooks"

command -v npm >/dev/null || { echo "install-webhooks: npm is required (Node.js 20 or later)" >&2; exit 1; }

# Exactly the lockfile, from a clean node_modules; npm ci fails if it does
# not match package.json. No install scripts: this package needs none.
npm ci --no-audit --no-fund --ignore-scripts

printf 'installed: standardwebhooks %s\n' \
  "$(node -p 'require("standardwebhooks/package.json").version')"
