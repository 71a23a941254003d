#!/usr/bin/env bash
# Passes `go test` output through unchanged and, once it ends, prints each
# package's time against its budget (scripts/test-budgets.txt), slowest
# first, marking the packages over budget. It never changes the suite's
# result: a budget is what the package should take on a quiet machine,
# and a busy one may stretch it without any test being wrong.
set -euo pipefail
budgets="$(dirname "$0")/test-budgets.txt"
# tee passes each line on as it comes; awk reading the pipe itself would
# hold lines back (mawk fills its input buffer first), so that a slow
# package's result, or a hang's panic, showed up only at the end.
out=$(mktemp)
trap 'rm -f "$out"' EXIT
tee "$out"
awk -v budgets="$budgets" '
BEGIN {
  while ((getline line < budgets) > 0) {
    if (line ~ /^#/ || line == "") continue
    split(line, f, /[ \t]+/)
    budget[f[1]] = f[2]
  }
}
($1 == "ok" || $1 == "FAIL") && $3 ~ /^[0-9.]+s$/ {
  pkg = $2
  sub(/^github\.com\/agentgate\/agentgate/, ".", pkg)
  secs = $3; sub(/s$/, "", secs)
  b = (pkg in budget) ? budget[pkg] : budget["default"]
  mark = (secs + 0 > b + 0) ? "  OVER BUDGET" : ""
  summary[++n] = sprintf("%8.1fs of %4ds  %-4s %s%s", secs, b, $1, pkg, mark)
  total += secs
}
END {
  if (n == 0) exit
  print "\npackage times (budgets in scripts/test-budgets.txt), slowest first:"
  cmd = "sort -rn"
  for (i = 1; i <= n; i++) print summary[i] | cmd
  close(cmd)
  printf "%8.1fs summed over %d packages\n", total, n
}' "$out"
