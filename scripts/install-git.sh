#!/usr/bin/env bash
# Installs git with its smart-HTTP server (Debian's git, which ships
# /usr/lib/git-core/git-http-backend): the gateway clones and pushes runs'
# repositories with git, and its tests serve repositories with
# git-http-backend on 127.0.0.1 (internal/gittest).
set -euo pipefail

backend=/usr/lib/git-core/git-http-backend
command -v git >/dev/null && [ -x "$backend" ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "install-git: git or $backend is missing; running apt-get install git" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends git >/dev/null
fi
command -v git >/dev/null && [ -x "$backend" ] || {
  echo "install-git: git or $backend is missing and could not be installed: run 'apt-get install git' as root" >&2
  exit 1
}
