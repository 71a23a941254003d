#!/usr/bin/env bash
# Runs every benchmark of agentgate with -benchmem, -count=N times each, and
# writes the raw `go test` output and a Markdown table of every metric
# (median, min and max over the N runs). docs/performance.md explains the
# benchmarks and how to read them.
#
#   scripts/bench.sh [-count N] [-out DIR]
#
# -count defaults to 5; -out to a new directory under $TMPDIR.
# BENCH_NATS=server or BENCH_NATS=cluster in the environment puts the
# cmd/gateway benchmarks' store on one nats-server or a 3-node cluster
# instead of the gateway's embedded server. The figures
# that matter are the ratios, each measured against its baseline in the same
# iterations: the machine's noise cancels out of them, not out of the
# absolute figures.
#
# Like scripts/test.sh, it runs the benchmarks in a loopback-only network
# namespace when the machine allows it: they only ever talk to 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."

count=5
out=""
while [ $# -gt 0 ]; do
  case "$1" in
    -count) count=$2; shift 2 ;;
    -out) out=$2; shift 2 ;;
    -h | --help) sed -n '2,18p' "$0"; exit 0 ;;
    *) echo "bench.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
case "$count" in '' | *[!0-9]* | 0) echo "bench.sh: -count must be a positive integer" >&2; exit 2 ;; esac
out=${out:-${TMPDIR:-/tmp}/agentgate-bench-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$out"
raw="$out/bench.txt"
table="$out/table.md"
: >"$raw"

# BenchmarkClaudeRun and BenchmarkCodexRun need the real CLIs.
if { [ -z "${AGENTGATE_CLAUDE_BIN:-}" ] && [ ! -x tools/agents/node_modules/.bin/claude ] && ! command -v claude >/dev/null; } ||
  { [ -z "${AGENTGATE_CODEX_BIN:-}" ] && [ ! -x tools/agents/node_modules/.bin/codex ] && ! command -v codex >/dev/null; }; then
  scripts/install-agents.sh
fi

# Fetch and compile everything while the network is there.
go mod download
go test -run '^$' -count=1 ./... >/dev/null

netns=()
if [ "$(id -u)" != 0 ] && unshare -rn true 2>/dev/null; then
  netns=(unshare -rn)
elif unshare -n true 2>/dev/null; then
  netns=(unshare -n)
fi
if [ ${#netns[@]} -gt 0 ] && ! command -v ip >/dev/null; then
  netns=()
fi
if [ ${#netns[@]} -eq 0 ]; then
  echo "bench.sh: no network namespace here; running on the host network (the benchmarks still only use 127.0.0.1)" >&2
fi

bench() { # -bench pattern, -benchtime, packages…
  local cmd=(go test -p 1 -run '^$' -bench "$1" -benchmem -count="$count" -benchtime="$2" -timeout 60m "${@:3}")
  echo "== ${cmd[*]}" >&2
  if [ ${#netns[@]} -gt 0 ]; then
    "${netns[@]}" -- bash -c 'ip link set lo up && exec "$@"' bash "${cmd[@]}" | tee -a "$raw"
  else
    "${cmd[@]}" | tee -a "$raw"
  fi
}

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$([ -z "$(git status --porcelain 2>/dev/null)" ] || echo " (with uncommitted changes)")"
  echo "go: $(go version)"
  echo "kernel: $(uname -sr)"
  echo "nproc: $(nproc)"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
  echo "claude: $( (${AGENTGATE_CLAUDE_BIN:-tools/agents/node_modules/.bin/claude} --version || claude --version) 2>/dev/null | head -1)"
  echo "codex: $( (${AGENTGATE_CODEX_BIN:-tools/agents/node_modules/.bin/codex} --version || codex --version) 2>/dev/null | head -1)"
  echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$out/machine.txt"

# One package at a time (-p 1): benchmarks running side by side would
# measure each other. Micro-benchmarks: -benchtime is time. Pipeline benchmarks: a fixed number
# of runs each, sized so that the whole script takes minutes.
# The next line runs internal/supervisor BenchmarkHibernation too: 1,000 runs put to sleep, once per count (about 90 s).
bench . 1s ./internal/adapters/claude ./internal/supervisor ./internal/store
bench '^BenchmarkGatewayThroughput$' 5x ./cmd/gateway
bench '^BenchmarkGatewayLatency$' 2x ./cmd/gateway
bench '^BenchmarkSupervisorStore$' 5x ./cmd/gateway
bench '^BenchmarkGatewayRunOverhead$' 1s ./cmd/gateway
bench '^BenchmarkClaudeRun$' 4x ./cmd/gateway
bench '^BenchmarkCodexRun$' 10x ./cmd/gateway
bench '^BenchmarkClaudeWake$' 1x ./cmd/gateway
# A run's start and model calls under network model against open.
bench '^BenchmarkNetworkPolicy$' 4x ./cmd/gateway
# At scale: many clients on one run, many runs at once, a burst, a late join.
bench '^BenchmarkFanout$' 2x ./cmd/gateway
bench '^BenchmarkConcurrentRuns$' 2x ./cmd/gateway
bench '^BenchmarkBurst$' 3x ./cmd/gateway
bench '^BenchmarkLateJoin$' 3x ./cmd/gateway
bench '^BenchmarkAppenderStore$' 3x ./internal/supervisor
# Any other package's benchmarks.
mapfile -t rest < <(go list ./... | grep -v -x -e '.*/cmd/gateway' -e '.*/internal/adapters/claude' -e '.*/internal/supervisor' -e '.*/internal/store')
if [ ${#rest[@]} -gt 0 ]; then
  bench . 1s "${rest[@]}"
fi

echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$out/machine.txt"

# The table: every metric of every benchmark, median, min and max over the
# runs. The GOMAXPROCS suffix is dropped from names.
awk '
function num(x) {
  if (x >= 1000 || x <= -1000) return sprintf("%.0f", x)
  if (x >= 10 || x <= -10) return sprintf("%.1f", x)
  if (x >= 1 || x <= -1) return sprintf("%.2f", x)
  return sprintf("%.3g", x)
}
/^pkg: / { pkg = $2; next }
/^Benchmark/ && NF >= 4 {
  name = $1
  sub(/-[0-9]+$/, "", name)
  if (!(name in seen)) { seen[name] = 1; names[++nn] = name; pkgof[name] = pkg }
  for (i = 3; i + 1 <= NF; i += 2) {
    key = name SUBSEP $(i + 1)
    if (!(key in cnt)) { cnt[key] = 0; units[name, ++nu[name]] = $(i + 1) }
    vals[key, ++cnt[key]] = $i + 0
  }
}
END {
  print "| package | benchmark | metric | median | min | max | runs |"
  print "| --- | --- | --- | ---: | ---: | ---: | ---: |"
  for (a = 1; a <= nn; a++) {
    name = names[a]
    p = pkgof[name]
    sub(/^.*agentgate\/agentgate\//, "", p)
    for (u = 1; u <= nu[name]; u++) {
      unit = units[name, u]
      key = name SUBSEP unit
      n = cnt[key]
      for (i = 1; i <= n; i++) s[i] = vals[key, i]
      for (i = 2; i <= n; i++) {
        x = s[i]
        for (j = i - 1; j >= 1 && s[j] > x; j--) s[j + 1] = s[j]
        s[j + 1] = x
      }
      med = (n % 2) ? s[(n + 1) / 2] : (s[n / 2] + s[n / 2 + 1]) / 2
      printf "| %s | %s | %s | %s | %s | %s | %d |\n", p, name, unit, num(med), num(s[1]), num(s[n]), n
    }
  }
}' "$raw" >"$table"

cat "$out/machine.txt"
echo
cat "$table"
echo
echo "raw output: $raw" >&2
echo "table: $table" >&2
