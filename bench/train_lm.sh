#!/usr/bin/env bash
# Training-throughput benchmark: dew's Trainer vs PyTorch eager vs the JAX original (dewml on CPU), the same
# decoder, batch and optimizer, all measured in this one run on this machine. Each implementation runs in
# its own process (so peak RSS is its own), in rounds whose order rotates (the machine may be shared and
# noisy); the table gives the median over rounds of each run's median step, and dew's ratios.
#
#   bash bench/train_lm.sh [FLAGS...]     # FLAGS go to every implementation, e.g. --steps 20 --seq 256
#
# Environment:
#   BIN_DIR   where train_lm_bench is (default build/bin); when missing there and BIN_DIR/.. is a Ninja
#             build directory, it is built first (ninja -C BIN_DIR/.. train_lm_bench)
#   ROUNDS    rounds of (dew, pytorch, dewml) (default 3)
#   THREADS   space-separated intra-op thread counts, one table each (default "2")
#   PEERS     which peers to run (default "pytorch dewml")
#   DEW_CACHE where the Python venv lives (default ~/.cache/dew; venv-bench, Python >= 3.12 when the
#             machine has one, since dewml needs it; torch==2.11.0, the LibTorch dew builds against)
#
# Default size: the demo decoder (vocab 4096, emb 256, 4 layers, 4 heads, swiglu 1024, seq 128, batch 16,
# fp32), 3 warmup + 10 measured steps per run: about 3-5 minutes on 2 CPU cores. A GPT-2-small-like run on
# a GPU: --vocab 50304 --emb 768 --layers 12 --heads 12 --mlp-features 3072 --seq 1024 --max-seq-len 1024
# --dtype bfloat16 --device cuda (needs a CUDA LibTorch for dew and CUDA builds of torch and jax).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN_DIR=${BIN_DIR:-build/bin}
ROUNDS=${ROUNDS:-3}
THREADS=${THREADS:-2}
PEERS=${PEERS:-pytorch dewml}
DEW_CACHE=${DEW_CACHE:-$HOME/.cache/dew}
VENV=$DEW_CACHE/venv-bench
source bench/lib.sh
BENCH=$(bench_binary "$BIN_DIR" train_lm_bench)
bench_venv "$VENV" torch==2.11.0 numpy
DEWML_REASON=""
if [[ " $PEERS " == *" dewml "* ]]; then
  DEWML_REASON=$(dewml_reason "$VENV" tools/bench/train_lm_peers.py)
  [ -n "$DEWML_REASON" ] && echo "dewml: not installable here ($DEWML_REASON)"
fi

out=$(mktemp)
trap 'rm -f "$out"' EXIT
run_one() {  # impl threads round
  local impl=$1 threads=$2 round=$3 line busy
  busy=$(wait_quiet "${QUIET_WAIT:-120}")
  case $impl in
    dew) line=$("$BENCH" --threads "$threads" "${EXTRA[@]}") ;;
    pytorch) line=$("$VENV/bin/python" tools/bench/train_lm_peers.py torch --threads "$threads" "${EXTRA[@]}") ;;
    dewml)
      [ -n "$DEWML_REASON" ] && return 0
      if ! line=$("$VENV/bin/python" tools/bench/train_lm_peers.py dewml --threads "$threads" "${EXTRA[@]}" \
                  2>"$DEW_CACHE/dewml-run.log" | tail -n1); then
        echo "dewml: the run failed (last lines of $DEW_CACHE/dewml-run.log below)"; tail -n 5 "$DEW_CACHE/dewml-run.log"
        return 0
      fi ;;
  esac
  echo "$line" | "$VENV/bin/python" -c 'import json,sys; r=json.loads(sys.stdin.read()); r["round"]=int(sys.argv[1]); r["want_threads"]=int(sys.argv[2]); r["busy_before"]=int(sys.argv[3]); print(json.dumps(r))' "$round" "$threads" "$busy" | tee -a "$out"
}
EXTRA=("$@")
IMPLS=(dew $PEERS)
for threads in $THREADS; do
  for ((round = 0; round < ROUNDS; ++round)); do
    n=${#IMPLS[@]}
    for ((i = 0; i < n; ++i)); do run_one "${IMPLS[(i + round) % n]}" "$threads" "$round"; done
  done
done

"$VENV/bin/python" - "$out" "$DEWML_REASON" <<'PY'
import json, os, platform, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
dewml_reason = sys.argv[2]
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.machine())
load = os.getloadavg()[0]
dew0 = next(r for r in rows if r["impl"] == "dew")
c = dew0["config"]
print(f"\ntraining a decoder (vocab {c['vocab']}, emb {c['emb']}, {c['layers']} layers, {c['heads']} heads, "
      f"mlp {c['mlp_features']}, seq {c['seq']}, batch {c['batch']}, {dew0['dtype']}, "
      f"{dew0['parameters'] / 1e6:.2f} M parameters) on {dew0['device']}, {os.cpu_count()} cores ({cpu}), load {load:.1f}")
print(f"MFU = {dew0['flops_per_token'] / 1e6:.1f} MFLOP/token (dew's decoder_flops_per_token) x tokens/s / the best "
      f"matmul peak train_lm_bench measured at that thread count; 'best step' is each impl's fastest step of all rounds")
def med(impl, threads, key):
    v = [r[key] for r in rows if r["impl"] == impl and r["want_threads"] == threads and r.get(key) is not None]
    return statistics.median(v) if v else None
impls = [i for i in ("dew", "pytorch", "dewml") if any(r["impl"] == i for r in rows)]
def best(impl, threads):
    v = [r["step_s_min"] for r in rows if r["impl"] == impl and r["want_threads"] == threads]
    return min(v) if v else None
for threads in sorted({r["want_threads"] for r in rows}, reverse=True):
    peak = max(r["peak_flops"] for r in rows if r["impl"] == "dew" and r["want_threads"] == threads)
    mine = [r for r in rows if r["want_threads"] == threads]
    rounds = len([r for r in mine if r["impl"] == "dew"])
    busy = len([r for r in mine if r.get("busy_before", 0) >= 10])
    print(f"\n{threads} thread(s), {rounds} round(s), matmul peak {peak / 1e9:.1f} GFLOP/s (best of dew's runs); "
          f"{busy} of {len(mine)} runs started on a busy machine")
    print(f"{'impl':<10}{'tokens/s':>10}{'step ms':>10}{'best step':>11}{'peak RSS MiB':>14}{'MFU':>8}{'MFU best':>10}"
          f"{'loss 1st->last':>18}")
    tokens = dew0["config"]["batch"] * dew0["config"]["seq"]
    for impl in impls:
        tps = med(impl, threads, "tokens_per_s")
        if tps is None:
            continue
        first, last = med(impl, threads, "loss_first"), med(impl, threads, "loss_last")
        loss = f"{first:.3f}->{last:.3f}" if first is not None else "-"
        b = best(impl, threads)
        print(f"{impl:<10}{tps:>10.0f}{med(impl, threads, 'step_s') * 1e3:>10.1f}{b * 1e3:>11.1f}"
              f"{med(impl, threads, 'peak_rss_mib'):>14.0f}{dew0['flops_per_token'] * tps / peak * 100:>7.1f}%"
              f"{dew0['flops_per_token'] * tokens / b / peak * 100:>9.1f}%{loss:>18}")
    d_t, d_m, d_b = med("dew", threads, "tokens_per_s"), med("dew", threads, "peak_rss_mib"), best("dew", threads)
    for peer in impls[1:]:
        p_t, p_m, p_b = med(peer, threads, "tokens_per_s"), med(peer, threads, "peak_rss_mib"), best(peer, threads)
        if p_t:
            print(f"dew/{peer}: tokens/s {d_t / p_t:.2f}x (best step {p_b / d_b:.2f}x), peak RSS {d_m / p_m:.2f}x")
if dewml_reason:
    print(f"dewml: not installable here ({dewml_reason})")
PY
