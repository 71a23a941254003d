#!/usr/bin/env bash
# Checks the deployment files: the Prometheus rules, config and rule tests
# with promtool, the nginx config with nginx -t (upstreams templated to
# loopback, as the fault rig does), the NATS configs with nats-server -t
# (built from the module go.mod pins), and then the Go tests that parse
# docker-compose.yml, deploy/kubernetes and the dashboard and hold them to
# the code (./deploy, and the Deploy tests of ./internal/metrics), inside a
# loopback-only network namespace when the machine allows one.
#
# The Kubernetes manifests are parsed and checked for what they promise,
# not validated against the API's schemas: kubeconform and kubectl's
# dry run need the schemas or a cluster, which a machine without network
# access does not have.
#
# nginx and promtool come from Debian's packages (nginx-light, prometheus):
# installed with apt-get when missing and this runs as root. Without them
# the check fails; it never skips.
set -euo pipefail
cd "$(dirname "$0")/.."

fail() { echo "check-deploy: $*" >&2; exit 1; }

need() { command -v "$1" >/dev/null || [ -x "/usr/sbin/$1" ] || [ -x "/usr/bin/$1" ]; }

install_debs() {
  [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null || return 1
  # A package's maintainer script must not start nginx or Prometheus as
  # services on a machine with an init system: deny it for this install.
  local policy=/usr/sbin/policy-rc.d made=""
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy" && made=1
  fi
  local rc=0
  apt-get update -qq || rc=$?
  if [ $rc = 0 ]; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null || rc=$?
  fi
  [ -n "$made" ] && rm -f "$policy"
  return $rc
}

if ! need nginx; then
  # Debian 13 has no nginx-light any more: then its nginx.
  install_debs nginx-light || install_debs nginx || true
fi
if ! need promtool; then
  install_debs prometheus || true
fi
need nginx || fail "nginx is missing and could not be installed (apt-get install nginx-light)"
need promtool || fail "promtool is missing and could not be installed (apt-get install prometheus)"
export PATH="$PATH:/usr/sbin"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "== promtool" >&2
promtool check rules deploy/prometheus/alerts.yml
promtool check config deploy/prometheus/prometheus.yml
promtool test rules deploy/prometheus/alerts_test.yml

echo "== nginx -t" >&2
# The shipped config with each upstream server line on a loopback port and
# the listen line on another, the way the fault rig templates it; nginx
# resolves upstream names at load, and gateway-N resolve only in compose.
mkdir -p "$tmp/nginx"
port=18080
sed -E \
  -e 's/^(\s*server\s+)gateway-([0-9]+):8080(\s)/\1127.0.0.1:1809\2\3/' \
  -e "s/^(\s*listen\s+)[^;]+;/\1127.0.0.1:$port;/" \
  deploy/nginx/agentgate.conf >"$tmp/nginx/agentgate.conf"
if grep -q 'gateway-' "$tmp/nginx/agentgate.conf"; then
  fail "deploy/nginx/agentgate.conf: an upstream line is not \`server gateway-N:8080 ...;\`"
fi
cat >"$tmp/nginx/nginx.conf" <<EOF
pid $tmp/nginx/nginx.pid;
error_log $tmp/nginx/error.log;
events {}
http {
    access_log off;
    client_body_temp_path $tmp/nginx/body;
    proxy_temp_path $tmp/nginx/proxy;
    fastcgi_temp_path $tmp/nginx/fastcgi;
    uwsgi_temp_path $tmp/nginx/uwsgi;
    scgi_temp_path $tmp/nginx/scgi;
    include $tmp/nginx/agentgate.conf;
}
EOF
nginx -t -q -p "$tmp/nginx" -c "$tmp/nginx/nginx.conf"

echo "== nats-server -t" >&2
go build -o "$tmp/nats-server" github.com/nats-io/nats-server/v2
"$tmp/nats-server" -t -c deploy/nats/cluster.conf --name nats-1 --server_name nats-1
# The Kubernetes ConfigMap's config is checked by TestDeployKubernetes,
# with the same validation (server.NewServer).

if [ -n "${CHECK_DEPLOY_SKIP_GO_TESTS:-}" ]; then
  # scripts/test.sh runs them with every other test.
  echo "check-deploy: ok (Go tests left to the caller)" >&2
  exit 0
fi
echo "== go tests of the deployment files" >&2
go test -race -count=1 -run '^$' ./deploy/ ./internal/metrics/ >/dev/null
tests=(bash -c 'go test -race -count=1 ./deploy/ && go test -race -count=1 -run Deploy ./internal/metrics/')
if [ "$(id -u)" != 0 ] && unshare -rn true 2>/dev/null; then
  netns=(unshare -rn)
elif unshare -n true 2>/dev/null; then
  netns=(unshare -n)
else
  netns=()
fi
if [ ${#netns[@]} -gt 0 ] && command -v ip >/dev/null; then
  "${netns[@]}" -- bash -c 'ip link set lo up && exec "$@"' bash "${tests[@]}"
else
  "${tests[@]}"
fi
echo "check-deploy: ok" >&2
