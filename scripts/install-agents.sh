#!/usr/bin/env bash
# Installs the agent CLIs agentgate is verified against, at the versions
# pinned in tools/agents/package-lock.json, into tools/agents/node_modules.
# The real-CLI tests find them there (or via $AGENTGATE_<AGENT>_BIN).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root/tools/agents"

command -v npm >/dev/null || { echo "install-agents: npm is required (Node.js 20 or later)" >&2; exit 1; }

# Install exactly the lockfile, from a clean node_modules. Not `npm ci`:
# it insists that the lockfile list every platform package of opencode-ai,
# and registries that serve only this platform's cannot resolve the others.
# `npm install` installs the locked versions; if it had to change the
# lockfile, the lockfile was stale, and that fails the install. The CLI
# packages need their install scripts: @anthropic-ai/claude-code links its
# native binary in postinstall.
rm -rf node_modules
before=$(sha256sum package-lock.json)
npm install --no-audit --no-fund
if [ "$(sha256sum package-lock.json)" != "$before" ]; then
  echo "install-agents: tools/agents/package-lock.json does not match package.json; run npm install there and commit it" >&2
  exit 1
fi

# Qwen Code's package ships its ripgrep without the execute bit (npm keeps
# the tarball's modes); without it every run warns and falls back to a
# slower built-in grep.
chmod +x node_modules/@qwen-code/qwen-code/vendor/ripgrep/*/rg 2>/dev/null || true

echo "installed:"
printf '  claude %s\n' "$(./node_modules/.bin/claude --version)"
printf '  codex  %s\n' "$(./node_modules/.bin/codex --version)"
printf '  copilot %s\n' "$(./node_modules/.bin/copilot --version | head -1)"
printf '  gemini %s\n' "$(./node_modules/.bin/gemini --version)"
printf '  opencode %s\n' "$(./node_modules/.bin/opencode --version)"
printf '  qwen %s\n' "$(./node_modules/.bin/qwen --version)"
printf '  cline %s\n' "$(./node_modules/.bin/cline --version)"

# The gateway confines every agent with bubblewrap, and will not start
# without it unless told to (AGENTGATE_SANDBOX=cli-only).
"$root/scripts/install-sandbox.sh"
