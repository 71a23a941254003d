#!/usr/bin/env bash
# Installs Debian's headless-capable Chromium (/usr/bin/chromium), which the
# browser test of the event stream (cmd/gateway, TestBrowserEventSource)
# drives. It does nothing when Chromium is already installed, so it is
# cheap to call before every test run. Installing needs root and apt-get.
set -euo pipefail

bin=/usr/bin/chromium

installed() {
  [ -x "$bin" ] && [ "$(dpkg-query -W -f='${Status}' chromium 2>/dev/null)" = "install ok installed" ]
}

if installed; then
  echo "install-browser: chromium already installed: $("$bin" --version 2>/dev/null || echo "$bin")"
  exit 0
fi

if [ "$(id -u)" != 0 ]; then
  echo "install-browser: chromium is missing and installing it needs root: run" \
    "'apt-get update && apt-get install -y chromium' as root, or this script with sudo" >&2
  exit 1
fi
command -v apt-get >/dev/null || { echo "install-browser: chromium is missing and there is no apt-get to install it" >&2; exit 1; }

start=$(date +%s)
echo "install-browser: chromium is missing; running apt-get update and apt-get install chromium"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# Recommends (fonts, the setuid sandbox, desktop helpers) are not needed to
# run it headless with --no-sandbox, and leaving them out halves the
# download.
apt-get install -y -qq --no-install-recommends chromium >/dev/null
installed || { echo "install-browser: apt-get finished but $bin is not installed" >&2; exit 1; }
echo "install-browser: installed $("$bin" --version 2>/dev/null || echo "$bin") in $(( $(date +%s) - start ))s"
