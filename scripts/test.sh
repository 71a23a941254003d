#!/usr/bin/env bash
# Runs every test of agentgate on a fresh machine: installs the pinned agent
# CLIs (npm), headless Chromium, nginx, promtool and bubblewrap (apt, for
# the browser test, the deployment checks, the fault suite and the
# sandbox) and the Go modules,
# checks the deployment files, formatting and vet, then runs
# `go test -race ./...` inside a loopback-only network namespace, so no test
# can reach a real model API even on a machine that holds real credentials
# (and, before it, the few tests that count allocations, without -race).
#
# Extra arguments go to `go test` (e.g. scripts/test.sh -run TestRealCLI).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-agents.sh
scripts/install-browser.sh # headless Chromium, for the EventSource test
scripts/install-console-test.sh # playwright-core, for the web console's browser test
scripts/install-agui.sh # @ag-ui/core and @ag-ui/client, which check the AG-UI stream (tools/agui/validate.mjs)
scripts/install-openapi-client.sh # openapi-typescript, openapi-fetch and tsc, for the generated-client test
scripts/install-webhooks.sh # standardwebhooks, whose signatures inbound triggers must accept (tools/webhooks/sign.mjs)
scripts/install-acp-client.sh # @agentclientprotocol/sdk, the editor that drives agentgate acp (tools/acp-client/editor.mjs)
# bubblewrap, the gateway's sandbox: its tests and every conformance case
# run the agents under /usr/bin/bwrap, and fail without it.
scripts/install-sandbox.sh
scripts/install-git.sh # git and git-http-backend, for runs' repositories and the git server of the tests
go mod download
go build ./...
# promtool, nginx -t and nats-server -t on the deployment files; it
# installs Debian's nginx and prometheus, which ./deploy and the fault
# suite (internal/faults) need too. Their Go tests run below with the rest.
CHECK_DEPLOY_SKIP_GO_TESTS=1 scripts/check-deploy.sh

unformatted=$(gofmt -l cmd internal)
if [ -n "$unformatted" ]; then
  echo "gofmt would change:" $unformatted >&2
  exit 1
fi
go vet ./...

# The tests compile inside the loopback-only namespace below: go mod
# download has fetched every module they build with (it covers the
# packages' tests too), and go vet has type-checked them. Compiling them
# here first, as this script once did, linked every test binary twice,
# about 80 s of a run.

# Three packages at a time: most of the suite's time is real CLIs starting
# and answering, so a third package in flight shortens the run by a third
# on two cores; the tests hold under two whole suites at once, which loads
# the machine more than this does. The timeout only catches a hang: alone
# the slowest package (opencode's real CLI) took 8 to 16 minutes on the
# same 2-core machine on different days, and two suites at once about
# double that, which must not read as a hang: no package's budget is over
# half of it.
# The packages that run the real CLIs go first, slowest first: they are
# the long poles, and started last they would leave two CPUs waiting on one
# package at the end.
slow=(./internal/adapters/opencode ./internal/adapters/gemini ./internal/adapters/copilot
  ./cmd/gateway ./internal/supervisor ./internal/faults ./internal/adapters/claude ./internal/adapters/codex ./internal/store
  ./internal/adapters/qwen ./internal/adapters/cline)
rest=()
for p in $(go list ./...); do
  rel=./${p#github.com/agentgate/agentgate/}
  [ "$rel" = "./github.com/agentgate/agentgate" ] && rel=.
  case " ${slow[*]} " in *" $rel "*) ;; *) rest+=("$rel") ;; esac
done
# Each package has a budget (scripts/test-budgets.txt, at most half of
# this timeout); scripts/package-times.sh prints every package's time
# against it once the tests end.
tests=(go test -race -count=1 -p 3 -timeout 90m "$@" "${slow[@]}" "${rest[@]}")
# The race detector empties sync.Pools at random, so the tests that count
# what pooled paths allocate skip that count under -race; they run once
# without it first (scripts/alloc-tests.sh).
if [ "$(id -u)" != 0 ] && unshare -rn true 2>/dev/null; then
  netns=(unshare -rn)
elif unshare -n true 2>/dev/null; then
  netns=(unshare -n)
else
  netns=()
fi
if [ ${#netns[@]} -gt 0 ]; then
  if ! command -v ip >/dev/null; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
      apt-get update -qq && apt-get install -y -qq iproute2 >/dev/null
    fi
  fi
  echo "running tests in a loopback-only network namespace" >&2
  exec "${netns[@]}" -- bash -c 'set -o pipefail && ip link set lo up && scripts/alloc-tests.sh && "$@" 2>&1 | scripts/package-times.sh' bash "${tests[@]}"
fi
echo "warning: this machine cannot create a network namespace; running tests" \
  "in the host network (agent CLIs still get their no-phone-home settings" \
  "and point at the mock server on 127.0.0.1)" >&2
scripts/alloc-tests.sh
"${tests[@]}" 2>&1 | scripts/package-times.sh
