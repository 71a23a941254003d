#!/usr/bin/env bash
# Installs the agent CLIs agentgate is verified against, at the versions
# pinned in tools/agents/package-lock.json, into tools/agents/node_modules.
# The real-CLI tests find them there (or via $AGENTGATE_CLAUDE_BIN).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root/tools/agents"

command -v npm >/dev/null || { echo "install-agents: npm is required (Node.js 20 or later)" >&2; exit 1; }

# npm ci installs exactly the lockfile. The CLI packages need their install
# scripts: @anthropic-ai/claude-code links its native binary in postinstall.
npm ci --no-audit --no-fund

echo "installed:"
printf '  claude %s\n' "$(./node_modules/.bin/claude --version)"
printf '  codex  %s\n' "$(./node_modules/.bin/codex --version)"
