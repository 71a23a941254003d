#!/usr/bin/env bash
# Installs what the web console's browser test (cmd/gateway,
# TestConsoleInBrowser) drives Chromium with: playwright-core, at the
# version pinned in tools/console-test/package-lock.json, into
# tools/console-test/node_modules. Only the library: the browser is
# Debian's /usr/bin/chromium (scripts/install-browser.sh), never one
# Playwright would download.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root/tools/console-test"

command -v npm >/dev/null || { echo "install-console-test: npm is required (Node.js 20 or later)" >&2; exit 1; }

# Exactly the lockfile, from a clean node_modules; no install scripts,
# which is also what keeps Playwright from fetching browsers of its own.
PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --ignore-scripts --no-audit --no-fund

version=$(node -p 'require("playwright-core/package.json").version')
echo "install-console-test: playwright-core $version"
