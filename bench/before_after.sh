#!/usr/bin/env bash
# Two builds of dew timed on the same benchmark in the same run, alternating, so a refactor can show it
# lost no speed (or a change what it gained) as a same-machine ratio of medians.
#
#   BEFORE=/path/to/old/build/bin bash bench/before_after.sh train_lm_bench --threads 2
#   BEFORE=... bash bench/before_after.sh diffusion_bench train --threads 2
#
#   BEFORE   bin directory of the build to compare against (required)
#   AFTER    bin directory of this build (default build/bin)
#   ROUNDS   pairs of runs (default 5); the order alternates each round, so neither build always runs second
#   KEY      the JSON field to compare (default step_s: seconds per step, lower is better)
# The benchmark binary prints one JSON line whose KEY is a median over its own measured steps.
set -euo pipefail
cd "$(dirname "$0")/.."
BENCH=${1:?usage: BEFORE=DIR bash bench/before_after.sh BENCH_BINARY [ARGS...]}
shift
BEFORE=${BEFORE:?set BEFORE to the bin directory of the build to compare against}
AFTER=${AFTER:-build/bin}
ROUNDS=${ROUNDS:-5}
KEY=${KEY:-step_s}
for dir in "$BEFORE" "$AFTER"; do
  [ -x "$dir/$BENCH" ] || { echo "no $BENCH in $dir" >&2; exit 1; }
done
out=$(mktemp)
trap 'rm -f "$out"' EXIT
run() {  # label dir args...
  local label=$1 dir=$2 value
  shift 2
  value=$("$dir/$BENCH" "$@" 2>/dev/null | tail -n1 | python3 -c "import json,sys; print(json.loads(sys.stdin.read())['$KEY'])") || {
    echo "$label: $BENCH failed" >&2; exit 1; }
  echo "$label $value" | tee -a "$out"
}
ARGS=("$@")
for ((round = 0; round < ROUNDS; ++round)); do
  if ((round % 2)); then run after "$AFTER" "${ARGS[@]}"; run before "$BEFORE" "${ARGS[@]}"
  else run before "$BEFORE" "${ARGS[@]}"; run after "$AFTER" "${ARGS[@]}"; fi
done
python3 - "$out" "$BENCH $*" "$KEY" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
med = {k: statistics.median(float(v) for label, v in rows if label == k) for k in ("before", "after")}
print(f"{sys.argv[2]}: {sys.argv[3]} median before {med['before']:.6g}, after {med['after']:.6g}; "
      f"before/after {med['before'] / med['after']:.3f} ({len(rows) // 2} rounds each)")
PY
