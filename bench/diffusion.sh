#!/usr/bin/env bash
# Image diffusion benchmark: training the class-conditional DiT of `dew train diffusion` (defaults: 28x28x1,
# patch 4, dim 128, depth 6, heads 4, batch 64, rectified flow, EMA 0.999) in dew vs PyTorch eager (the same
# architecture, tools/reference/make_diffusion_model_fixtures.py's DiT) vs the JAX original (dewml's SimpleDiT
# with its DiffusionObjective and Trainer), and sampling that DiT per image per solver step in dew vs
# diffusers' scheduler loop with the same PyTorch model, classifier-free guidance on (scale 2: the batch
# doubles). All measured in this one run on this machine, each run in its own process, in rounds whose order
# rotates; the tables give medians over rounds and dew's ratios.
#
#   bash bench/diffusion.sh [FLAGS...]   # FLAGS go to every training run, e.g. --batch 128 --dim 256
#
# Environment:
#   BIN_DIR   where diffusion_bench is (default build/bin; built first when missing in a Ninja build)
#   ROUNDS    rounds (default 3)
#   THREADS   intra-op threads of every run (default: all cores)
#   PEERS     training peers (default "pytorch dewml")
#   SOLVERS   solvers timed against diffusers (default "euler heun dpmpp_2m ddim unipc"; process vp)
#   SAMPLE    extra flags for the sampling runs (default "--images 16 --sample-steps 20")
#   DEW_CACHE where the Python venv lives (default ~/.cache/dew; venv-bench: torch==2.11.0, diffusers, dewml)
# About 12 minutes on 2 cores (most of it the peers' Python start-up and the waits for a quiet machine).
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
BIN_DIR=${BIN_DIR:-build/bin}
ROUNDS=${ROUNDS:-3}
THREADS=${THREADS:-$(nproc)}
PEERS=${PEERS:-pytorch dewml}
SOLVERS=${SOLVERS:-euler heun dpmpp_2m ddim unipc}
read -r -a SAMPLE <<< "${SAMPLE:---images 16 --sample-steps 20}"
DEW_CACHE=${DEW_CACHE:-$HOME/.cache/dew}
VENV=$DEW_CACHE/venv-bench
PEER_SCRIPT=tools/bench/diffusion_peers.py
BENCH=$(bench_binary "$BIN_DIR" diffusion_bench)
bench_venv "$VENV" torch==2.11.0 numpy "diffusers==0.36.*"
DEWML_REASON=""
if [[ " $PEERS " == *" dewml "* ]]; then
  DEWML_REASON=$(dewml_reason "$VENV" "$PEER_SCRIPT")
  [ -n "$DEWML_REASON" ] && echo "dewml: not installable here ($DEWML_REASON)"
fi

out=$(mktemp)
log=$(mktemp)
trap 'rm -f "$out" "$log"' EXIT
EXTRA=("$@")
# One line of progress per run: its median step (training) or time per image per step (sampling).
SHOW='import json, sys
r = json.loads(sys.stdin.read())
print(f"{r['"'"'step_s'"'"'] * 1e3:.0f} ms/step" if "step_s" in r else f"{r['"'"'s_per_image_step'"'"'] * 1e3:.2f} ms/image/step")'
run_one() {  # impl round [solver]
  local impl=$1 round=$2 solver=${3:-} line busy
  busy=$(wait_quiet "${QUIET_WAIT:-120}")
  case $impl in
    dew) line=$("$BENCH" train --threads "$THREADS" "${EXTRA[@]}") ;;
    dew-sample) line=$("$BENCH" sample --solver "$solver" --threads "$THREADS" "${SAMPLE[@]}") ;;
    diffusers) line=$("$VENV/bin/python" $PEER_SCRIPT diffusers --solver "$solver" --threads "$THREADS" "${SAMPLE[@]}" 2>"$log" | tail -n1) ;;
    pytorch) line=$("$VENV/bin/python" $PEER_SCRIPT torch --threads "$THREADS" "${EXTRA[@]}" 2>"$log" | tail -n1) ;;
    dewml)
      [ -n "$DEWML_REASON" ] && return 0
      if ! line=$("$VENV/bin/python" $PEER_SCRIPT dewml --threads "$THREADS" "${EXTRA[@]}" 2>"$log" | tail -n1); then
        echo "dewml: the run failed; its last lines:"; tail -n 5 "$log"; return 0
      fi ;;
  esac
  echo "$line" | "$VENV/bin/python" -c 'import json,sys; r=json.loads(sys.stdin.read()); r["round"]=int(sys.argv[1]); r["busy_before"]=int(sys.argv[2]); print(json.dumps(r))' "$round" "$busy" >>"$out"
  echo "  $impl ${solver:+$solver }round $round: $(tail -n1 "$out" | "$VENV/bin/python" -c "$SHOW")"
}

IMPLS=(dew $PEERS)
for ((round = 0; round < ROUNDS; ++round)); do
  n=${#IMPLS[@]}
  for ((i = 0; i < n; ++i)); do run_one "${IMPLS[(i + round) % n]}" "$round"; done
  for solver in $SOLVERS; do
    if ((round % 2)); then run_one diffusers "$round" "$solver"; run_one dew-sample "$round" "$solver"
    else run_one dew-sample "$round" "$solver"; run_one diffusers "$round" "$solver"; fi
  done
done

"$VENV/bin/python" - "$out" "$DEWML_REASON" <<'PY'
import json, os, platform, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.machine())
def med(impl, key, **match):
    v = [r[key] for r in rows if r["impl"] == impl and all(r.get(k) == x for k, x in match.items()) and r.get(key) is not None]
    return statistics.median(v) if v else None
train = [r for r in rows if r.get("mode") == "train"]
dew = next(r for r in train if r["impl"] == "dew")
c = dew["config"]
busy = sum(1 for r in rows if r.get("busy_before", 0) >= 10)
print(f"\nDiT {c['size']}x{c['size']}x{c['channels']}, patch {c['patch']}, dim {c['dim']}, depth {c['depth']}, heads {c['heads']}, "
      f"{dew['parameters'] / 1e6:.2f} M parameters, batch {c['batch']}, {dew['process']}, float32, {dew['threads']} threads, "
      f"{os.cpu_count()} cores ({cpu}); {busy} of {len(rows)} runs started on a busy machine")
print(f"MFU = 3 x {dew['flops_per_image'] / 3e6:.1f} MFLOP/image forward x images/s / dew's measured matmul peak "
      f"({dew['peak_flops'] / 1e9:.1f} GFLOP/s)")
print(f"\ntraining{'':<4}{'ms/step':>9}{'best':>8}{'images/s':>10}{'peak RSS MiB':>14}{'MFU':>7}{'loss 1st->last':>17}")
impls = [i for i in ("dew", "pytorch", "dewml") if any(r["impl"] == i for r in train)]
for impl in impls:
    s = med(impl, "step_s", mode="train")
    best = min(r["step_s_min"] for r in train if r["impl"] == impl)
    first, last = med(impl, "loss_first", mode="train"), med(impl, "loss_last", mode="train")
    print(f"{impl:<12}{s * 1e3:>9.0f}{best * 1e3:>8.0f}{c['batch'] / s:>10.1f}{med(impl, 'peak_rss_mib', mode='train'):>14.0f}"
          f"{dew['flops_per_image'] * c['batch'] / s / dew['peak_flops'] * 100:>6.1f}%{first:>8.3f}->{last:.3f}")
for peer in impls[1:]:
    print(f"dew/{peer}: training speed {med(peer, 'step_s', mode='train') / med('dew', 'step_s', mode='train'):.2f}x, "
          f"peak RSS {med('dew', 'peak_rss_mib', mode='train') / med(peer, 'peak_rss_mib', mode='train'):.2f}x")
samples = [r for r in rows if r.get("mode") == "sample"]
if samples:
    s0 = samples[0]
    print(f"\nsampling {s0['images']} images, {s0['sample_steps']} steps, guidance {s0['cfg']} (2 x {s0['images']} rows per model call), "
          f"{s0['process']}: ms per image per solver step (median of rounds)")
    print(f"{'solver':<12}{'dew':>8}{'diffusers':>11}{'dew speed':>11}")
    for solver in dict.fromkeys(r["solver"] for r in samples):
        d = med("dew", "s_per_image_step", mode="sample", solver=solver)
        p = med("diffusers", "s_per_image_step", mode="sample", solver=solver)
        print(f"{solver:<12}{d * 1e3:>8.2f}{p * 1e3 if p else float('nan'):>11.2f}{(p / d) if p else float('nan'):>10.2f}x")
if sys.argv[2]:
    print(f"dewml: not installable here ({sys.argv[2]})")
PY
