#!/usr/bin/env bash
# Installs bubblewrap (Debian's bubblewrap, /usr/bin/bwrap), the sandbox the
# gateway puts around every agent. Without it the gateway refuses to start
# (unless AGENTGATE_SANDBOX=cli-only), and its tests fail.
set -euo pipefail

command -v bwrap >/dev/null && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "install-sandbox: bwrap is missing; running apt-get install bubblewrap" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends bubblewrap >/dev/null
fi
command -v bwrap >/dev/null || {
  echo "install-sandbox: bwrap is missing and could not be installed: run 'apt-get install bubblewrap' as root" >&2
  echo "  (or start the gateway with AGENTGATE_SANDBOX=cli-only to let only the agents' CLIs enforce permission)" >&2
  exit 1
}
