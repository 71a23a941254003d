#!/usr/bin/env bash
# Starts the gateway with a mock model for one agent, so that a person can
# try that agent without a key: builds the gateway and cmd/mockmodel,
# serves the mock on 127.0.0.1, points the agent's CLI at it and starts
# the gateway on 127.0.0.1:8080 (or $AGENTGATE_ADDR), its data in
# ./agentgate-try (or $AGENTGATE_DATA_DIR). Ctrl-C stops both.
#
#   scripts/try.sh AGENT [SCENARIO]   AGENT: claude, codex, copilot, gemini, opencode, qwen or cline;
#                                     SCENARIO: text (the default), tool, long-tool, error-429 …
#                                     (go run ./cmd/mockmodel -h lists them)
#   scripts/try.sh --check AGENT      make one run of the text scenario, print its events,
#                                     exit 0 if it succeeded
set -euo pipefail

usage() {
  sed -n '8,12s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"
}

die() {
  echo "try: $*" >&2
  exit 1
}

check=false
args=()
for arg in "$@"; do
  case $arg in
  --check) check=true ;;
  -h | --help) usage && exit 0 ;;
  -*) usage >&2 && exit 2 ;;
  *) args+=("$arg") ;;
  esac
done
if [ ${#args[@]} -lt 1 ] || [ ${#args[@]} -gt 2 ]; then
  usage >&2
  exit 2
fi
agent=${args[0]}
scenario=${args[1]:-text}
case $agent in
claude | codex | copilot | gemini | opencode | qwen | cline) ;;
*) die "unknown agent \"$agent\" (claude, codex, copilot, gemini, opencode, qwen, cline)" ;;
esac
if $check && [ "$scenario" != text ]; then
  die "--check runs the text scenario only"
fi

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
command -v go >/dev/null || die "go is required"
command -v curl >/dev/null || die "curl is required"

agents_bin="$root/tools/agents/node_modules/.bin"
if [ ! -d "$agents_bin" ]; then
  echo "try: the agent CLIs are not installed; running scripts/install-agents.sh" >&2
  "$root/scripts/install-agents.sh"
fi
[ -x "$agents_bin/$agent" ] || die "$agents_bin/$agent is missing: run scripts/install-agents.sh"

data=${AGENTGATE_DATA_DIR:-./agentgate-try}
mkdir -p "$data"
data=$(cd "$data" && pwd)
addr=${AGENTGATE_ADDR:-127.0.0.1:8080}
case $addr in
:*) base="http://127.0.0.1$addr" ;;
*) base="http://$addr" ;;
esac

tmp=$(mktemp -d "${TMPDIR:-/tmp}/agentgate-try.XXXXXX")
mock_pid=
gateway_pid=

# stop ends the child pid: SIGTERM, then SIGKILL if it is still there
# after the gateway's shutdown grace (30 s by default) and a margin; then
# reaps it.
stop() {
  local pid=$1 i
  if kill -TERM "$pid" 2>/dev/null; then
    for ((i = 0; i < 400; i++)); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  wait "$pid" 2>/dev/null || true
}

cleanup() {
  trap - EXIT INT TERM
  if [ -n "$gateway_pid" ]; then stop "$gateway_pid"; fi
  if [ -n "$mock_pid" ]; then stop "$mock_pid"; fi
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Built binaries, not `go run`: a signal to `go run` stops go and leaves
# the program it started running.
echo "try: building the gateway and the mock model" >&2
(cd "$root" && go build -o "$tmp/gateway" ./cmd/gateway && go build -o "$tmp/mockmodel" ./cmd/mockmodel)

mock_args=(-agent "$agent" -scenario "$scenario" -env-file "$tmp/mock.env")
if [ "$agent" = codex ]; then
  mock_args+=(-codex-home "${AGENTGATE_CODEX_HOME:-$data/agents/codex}")
fi
: >"$tmp/mock.url"
"$tmp/mockmodel" "${mock_args[@]}" >"$tmp/mock.url" 2>"$data/mockmodel.log" &
mock_pid=$!
# mockmodel prints its URL once it serves and has written the environment.
url=
for ((i = 0; i < 300; i++)); do
  if IFS= read -r url <"$tmp/mock.url"; then break; fi
  if ! kill -0 "$mock_pid" 2>/dev/null; then
    cat "$data/mockmodel.log" >&2
    die "the mock model did not start"
  fi
  sleep 0.1
done
[ -n "$url" ] || die "the mock model printed no URL within 30 s"
echo "try: the mock model serves $url (scenario $scenario)" >&2

# shellcheck source=/dev/null
. "$tmp/mock.env"
export PATH="$agents_bin:$PATH"
export AGENTGATE_AGENTS="$agent" AGENTGATE_DATA_DIR="$data" AGENTGATE_ADDR="$addr"
if [ -z "${AGENTGATE_SANDBOX:-}" ] && ! command -v bwrap >/dev/null; then
  echo "try: bubblewrap (bwrap) is not installed, so the gateway runs with AGENTGATE_SANDBOX=cli-only:" \
    "only each CLI's own flags enforce a run's permission (scripts/install-sandbox.sh installs it)" >&2
  export AGENTGATE_SANDBOX=cli-only
fi

"$tmp/gateway" >"$data/gateway.log" 2>&1 &
gateway_pid=$!
ready=false
for ((i = 0; i < 1200; i++)); do
  if curl -fs -o /dev/null --max-time 2 "$base/readyz"; then
    ready=true
    break
  fi
  if ! kill -0 "$gateway_pid" 2>/dev/null; then
    tail -n 20 "$data/gateway.log" >&2
    die "the gateway stopped (log: $data/gateway.log)"
  fi
  sleep 0.1
done
$ready || die "the gateway was not ready within 2 minutes (log: $data/gateway.log)"

if $check; then
  created=$(curl -sS --max-time 30 "$base/v1/runs" -H 'Content-Type: application/json' \
    -d "{\"agent\":\"$agent\",\"prompt\":\"say hi\"}")
  id=$(printf '%s' "$created" | sed -nE 's/^\{"id":"([^"]+)".*/\1/p')
  [ -n "$id" ] || die "the gateway did not create the run: $created"
  # The stream ends after run.completed; --max-time bounds a run that hangs.
  curl -sSN --max-time 180 "$base/v1/runs/$id/events" | tee "$tmp/events" || true
  if grep -q '^data: .*"type":"run.completed".*"data":{"status":"succeeded"' "$tmp/events"; then
    echo "try: $agent run $id succeeded" >&2
    exit 0
  fi
  echo "try: $agent run $id did not succeed (logs: $data/gateway.log, $data/mockmodel.log)" >&2
  exit 1
fi

prompt="say hi"
case $scenario in
*tool*) prompt="Write hello to out.txt" ;;
esac
cat <<EOF

agentgate is ready at $base with $agent and the mock model (scenario $scenario).
Create a run and stream its events, in another terminal:

  ID=\$(curl -s $base/v1/runs -H 'Content-Type: application/json' -d '{"agent":"$agent","prompt":"$prompt"}' | sed -E 's/.*"id":"([^"]+)".*/\1/'); curl -N $base/v1/runs/\$ID/events

Logs: $data/gateway.log and $data/mockmodel.log. Ctrl-C stops the gateway and the mock.
EOF
status=0
wait "$gateway_pid" || status=$?
gateway_pid=
die "the gateway stopped with status $status (log: $data/gateway.log)"
