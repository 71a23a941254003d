#!/usr/bin/env bash
# Runs, without the race detector, the tests that count what the pooled
# paths allocate: -race empties sync.Pools at random, so those tests skip
# their count under it, and scripts/test.sh runs everything else with it.
# Each test named here must run and pass: a renamed test would otherwise
# match nothing, and go test would pass without counting anything.
set -euo pipefail
cd "$(dirname "$0")/.."
names=(TestNoAllocWithoutMatch TestStreamWritesFromPooledBuffers TestPollGivesItsBatchBackToWait)
pattern="^($(IFS='|'; echo "${names[*]}"))\$"
out=$(go test -count=1 -v -run "$pattern" ./internal/redact ./internal/api/stream ./internal/fanout 2>&1) || {
  echo "$out" >&2
  exit 1
}
for n in "${names[@]}"; do
  if ! grep -q -- "^--- PASS: $n " <<<"$out"; then
    echo "$out" >&2
    echo "alloc-tests.sh: $n did not run" >&2
    exit 1
  fi
done
echo "allocation counts: ${#names[@]} tests passed without -race"
