#!/usr/bin/env bash
# JEPA training benchmark: `dew train jepa` (its defaults: ViT patch 4, 128 features, 4 layers, predictor
# 64 x 2, batch 64, Fashion-MNIST) against the JAX original (dewml's JepaEncoder, JepaPredictor and
# JepaObjective with its MultiBlockMask, through its Trainer) with the same sizes, in this one run on this
# machine, each in its own process, in rounds whose order alternates; medians and dew's ratio.
#
#   bash bench/jepa.sh [FLAGS...]   # FLAGS go to both, e.g. --batch 128 --dim 192
#
# Environment: ROUNDS (default 2), THREADS (default: all cores), DEW (default build/bin/dew), DEW_CACHE
# (default ~/.cache/dew; the venv-bench Python with dewml). dewml's first step compiles for minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
ROUNDS=${ROUNDS:-2}
THREADS=${THREADS:-$(nproc)}
DEW=${DEW:-build/bin/dew}
DEW_CACHE=${DEW_CACHE:-$HOME/.cache/dew}
VENV=$DEW_CACHE/venv-bench
PEERS=tools/bench/jepa_peers.py
[ -x "$DEW" ] || DEW=$(bench_binary "$(dirname "$DEW")" dew)
bench_venv "$VENV" numpy
DEWML_REASON=$(dewml_reason "$VENV" "$PEERS")
[ -n "$DEWML_REASON" ] && echo "dewml: not installable here ($DEWML_REASON)"

out=$(mktemp)
log=$(mktemp)
trap 'rm -f "$out" "$log"' EXIT
run_one() {  # impl round [flags...]
  local impl=$1 round=$2 busy line
  shift 2
  [ "$impl" = dewml ] && [ -n "$DEWML_REASON" ] && return 0
  busy=$(wait_quiet "${QUIET_WAIT:-120}")
  if ! line=$("$VENV/bin/python" $PEERS "$impl" --bin "$DEW" --threads "$THREADS" "$@" 2>"$log" | tail -n1); then
    echo "$impl: the run failed; its last lines:"; tail -n 5 "$log"; return 0
  fi
  echo "$line" | "$VENV/bin/python" -c 'import json,sys; r=json.loads(sys.stdin.read()); r["round"]=int(sys.argv[1]); r["busy_before"]=int(sys.argv[2]); print(json.dumps(r))' "$round" "$busy" >>"$out"
  echo "  $impl round $round: $(tail -n1 "$out" | "$VENV/bin/python" -c 'import json,sys; print("%.0f ms/step" % (json.loads(sys.stdin.read())["step_s"] * 1e3))')"
}
for ((round = 0; round < ROUNDS; ++round)); do
  if ((round % 2)); then run_one dewml "$round" "$@"; run_one dew "$round" "$@"
  else run_one dew "$round" "$@"; run_one dewml "$round" "$@"; fi
done

"$VENV/bin/python" - "$out" <<'PY'
import json, os, platform, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.machine())
c = rows[0]["config"]
busy = sum(1 for r in rows if r.get("busy_before", 0) >= 10)
print(f"\nJEPA: ViT patch {c['patch']}, dim {c['dim']}, depth {c['depth']}, heads {c['heads']}; predictor {c['pred_dim']} x "
      f"{c['pred_depth']}; batch {c['batch']}; fp32; {os.cpu_count()} cores ({cpu}); {busy} of {len(rows)} runs started busy")
print(f"{'impl':<8}{'ms/step':>9}{'best':>8}{'images/s':>10}{'peak RSS MiB':>14}{'loss 1st->last':>18}")
med = lambda impl, key: statistics.median(r[key] for r in rows if r["impl"] == impl)
impls = [i for i in ("dew", "dewml") if any(r["impl"] == i for r in rows)]
for impl in impls:
    best = min(r["step_s_min"] for r in rows if r["impl"] == impl)
    print(f"{impl:<8}{med(impl, 'step_s') * 1e3:>9.0f}{best * 1e3:>8.0f}{med(impl, 'images_per_s'):>10.1f}"
          f"{med(impl, 'peak_rss_mib'):>14.0f}{med(impl, 'loss_first'):>10.3f}->{med(impl, 'loss_last'):.3f}")
if len(impls) == 2:
    print(f"dew/dewml: training speed {med('dewml', 'step_s') / med('dew', 'step_s'):.2f}x, "
          f"peak RSS {med('dew', 'peak_rss_mib') / med('dewml', 'peak_rss_mib'):.2f}x")
PY
