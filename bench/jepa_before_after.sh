#!/usr/bin/env bash
# `dew train jepa` from two builds, alternating, on Fashion-MNIST: the trainer's step_seconds over steps
# 41-60 of a 60-step run (after warm-up), median per build. The JEPA counterpart of bench/before_after.sh,
# whose benchmarks print JSON; this one reads the run's tracking/scalars.jsonl.
#
#   BEFORE=/path/to/old/build/bin bash bench/jepa_before_after.sh   # AFTER defaults to build/bin, ROUNDS to 5
set -euo pipefail
cd "$(dirname "$0")/.."
BEFORE=${BEFORE:?set BEFORE to the bin directory of the build to compare against}
AFTER=${AFTER:-build/bin}
ROUNDS=${ROUNDS:-5}
DATA=${DATA:-/usr/share/datasets/fashion-mnist}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
run() {  # label bin_dir
  local dir; dir=$(mktemp -d)
  DEW_THREADS=${THREADS:-2} "$2/dew" train jepa --data "$DATA" --out "$dir/run" --set trainer.steps=60 --set trainer.log_every=20 \
    --set trainer.eval_every=0 --set trainer.checkpoint_every=0 --set trainer.peak_flops=1e11 >/dev/null
  echo "$1 $(python3 -c "import json,sys; print(json.loads(open(sys.argv[1]).readlines()[-1])['scalars']['step_seconds'])" \
    "$dir/run/tracking/scalars.jsonl")" | tee -a "$out"
  rm -rf "$dir"
}
for ((round = 0; round < ROUNDS; ++round)); do
  if ((round % 2)); then run after "$AFTER"; run before "$BEFORE"; else run before "$BEFORE"; run after "$AFTER"; fi
done
python3 - "$out" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
med = {k: statistics.median(float(v) for label, v in rows if label == k) for k in ("before", "after")}
print(f"dew train jepa step_seconds median before {med['before']:.4f}, after {med['after']:.4f}; before/after {med['before'] / med['after']:.3f}")
PY
