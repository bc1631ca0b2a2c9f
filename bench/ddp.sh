#!/usr/bin/env bash
# Data-parallel scaling on this machine: dew's Trainer in 1 process and in NPROC processes started by
# `dew launch` (c10d Gloo), against PyTorch eager in 1 process and in NPROC processes of
# DistributedDataParallel on gloo started by torchrun, and dew's sharded training (trainer.parallel = fsdp) in
# NPROC processes, with each process's weights + optimizer state beside DDP's. The same decoder, global batch and optimizer as
# bench/train_lm.sh (train_lm_bench and tools/bench/train_lm_peers.py torch, which become one rank each when
# WORLD_SIZE > 1: each rank trains on its batch / NPROC rows of the same global batch). All five
# configurations run in this one run, in rounds whose order rotates, each waiting for an idle machine first;
# the table gives the median over rounds of each run's median step (rank 0's: the ranks step in lockstep),
# the scaling NPROC-process / 1-process of each implementation, dew's ratios, and every process's peak RSS.
#
#   bash bench/ddp.sh [FLAGS...]     # FLAGS go to every run, e.g. --steps 6 --warmup 2 (a quick check)
#
# Environment:
#   BIN_DIR   where train_lm_bench and dew are (default build/bin; train_lm_bench is built when missing, as
#             bench/train_lm.sh does)
#   ROUNDS    rounds of the five configurations (default 3)
#   THREADS   intra-op threads of a 1-process run; an NPROC-process run gives each process THREADS / NPROC
#             (default 2: the 2 cores of the development VM)
#   NPROC     processes of a data-parallel run (default 2)
#   DEW_CACHE where the Python venv lives (default ~/.cache/dew; venv-bench with torch==2.11.0)
#
# Default size: the demo decoder of bench/train_lm.sh (vocab 4096, emb 256, 4 layers, 4 heads, swiglu 1024,
# seq 128, global batch 16, fp32), 3 warmup + 10 measured steps per run: about 3-4 minutes on 2 CPU cores
# with 3 rounds; `ROUNDS=1 bash bench/ddp.sh --steps 6 --warmup 2` takes about a minute.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN_DIR=${BIN_DIR:-build/bin}
ROUNDS=${ROUNDS:-3}
THREADS=${THREADS:-2}
NPROC=${NPROC:-2}
DEW_CACHE=${DEW_CACHE:-$HOME/.cache/dew}
VENV=$DEW_CACHE/venv-bench
source bench/lib.sh
BENCH=$(bench_binary "$BIN_DIR" train_lm_bench)
DEW=$BIN_DIR/dew
if ! "$DEW" launch --help >/dev/null 2>&1; then
  echo "ddp.sh: $DEW has no 'launch' command (build dew: bash scripts/build.sh, or set BIN_DIR)" >&2
  exit 1
fi
bench_venv "$VENV" torch==2.11.0 numpy
PER_PROC=$((THREADS / NPROC > 0 ? THREADS / NPROC : 1))

out=$(mktemp)
log=$(mktemp)
trap 'rm -f "$out" "$log"' EXIT
# setup: impl-1 or impl-n (NPROC processes); every run's JSON line (rank 0's) gets round, setup and busy_before.
run_one() {  # config round
  local config=$1 round=$2 line busy status=0
  busy=$(wait_quiet "${QUIET_WAIT:-120}")
  case $config in
    dew-1) line=$("$BENCH" --threads "$THREADS" "${EXTRA[@]}" 2>"$log") || status=$? ;;
    dew-n) line=$(OMP_NUM_THREADS=$PER_PROC "$DEW" launch --nproc "$NPROC" -- \
                    "$BENCH" --threads "$PER_PROC" "${EXTRA[@]}" 2>"$log" | sed 's/^\[rank [0-9]*\] //') || status=$? ;;
    dew-fsdp) line=$(OMP_NUM_THREADS=$PER_PROC "$DEW" launch --nproc "$NPROC" -- \
                    "$BENCH" --threads "$PER_PROC" --parallel fsdp "${EXTRA[@]}" 2>"$log" | sed 's/^\[rank [0-9]*\] //') || status=$? ;;
    pytorch-1) line=$("$VENV/bin/python" tools/bench/train_lm_peers.py torch --threads "$THREADS" "${EXTRA[@]}" 2>"$log") ||
                 status=$? ;;
    pytorch-n) line=$(OMP_NUM_THREADS=$PER_PROC "$VENV/bin/python" -m torch.distributed.run --standalone \
                        --nproc_per_node "$NPROC" tools/bench/train_lm_peers.py torch --threads "$PER_PROC" \
                        "${EXTRA[@]}" 2>"$log") || status=$? ;;
  esac
  line=$(grep '^{' <<<"$line" | tail -n1 || true)
  if [ "$status" -ne 0 ] || [ -z "$line" ]; then
    echo "$config (round $round): the run failed (exit $status); its last lines:"; tail -n 5 "$log"
    return 0
  fi
  echo "$line" | "$VENV/bin/python" -c 'import json,sys; r=json.loads(sys.stdin.read()); r["round"]=int(sys.argv[1]); r["setup"]=sys.argv[2]; r["busy_before"]=int(sys.argv[3]); print(json.dumps(r))' "$round" "$config" "$busy" | tee -a "$out"
}
EXTRA=("$@")
CONFIGS=(dew-1 dew-n pytorch-n pytorch-1 dew-fsdp)
for ((round = 0; round < ROUNDS; ++round)); do
  n=${#CONFIGS[@]}
  for ((i = 0; i < n; ++i)); do run_one "${CONFIGS[(i + round) % n]}" "$round"; done
done

"$VENV/bin/python" - "$out" "$THREADS" "$NPROC" "$PER_PROC" <<'PY'
import json, os, platform, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
threads, nproc, per_proc = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
if not rows:
    sys.exit("no run succeeded")
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.machine())
first = rows[0]
c = next((r["config"] for r in rows if "config" in r), {})
model = (f"vocab {c['vocab']}, emb {c['emb']}, {c['layers']} layers, {c['heads']} heads, mlp {c['mlp_features']}, "
         f"seq {c['seq']}, global batch {c['batch']}, " if c else "")
print(f"\ndata-parallel training of a decoder ({model}{first['dtype']}, {first['parameters'] / 1e6:.2f} M parameters) "
      f"on {first['device']}, {os.cpu_count()} cores ({cpu}), load {os.getloadavg()[0]:.1f}")
rounds = len({r["round"] for r in rows})
busy = len([r for r in rows if r.get("busy_before", 0) >= 10])
print(f"{rounds} round(s); {busy} of {len(rows)} runs started on a busy machine ('busy': runs of that row started so, "
      f"after waiting up to 2 min for an idle one); tokens/s = global batch x seq / "
      f"rank 0's median step, median over rounds; 'best step' is the fastest step of all rounds; peak RSS is each "
      f"process's ru_maxrss, median over rounds, rank 0 first (launcher processes not counted)")
names = {"dew-1": f"dew 1x{threads}", "dew-n": f"dew {nproc}x{per_proc}", "dew-fsdp": f"dew FSDP {nproc}x{per_proc}",
         "pytorch-1": f"PyTorch 1x{threads}", "pytorch-n": f"PyTorch DDP {nproc}x{per_proc}"}

def runs(config):
    return [r for r in rows if r["setup"] == config]

def med(config, key):
    v = [r[key] for r in runs(config) if r.get(key) is not None]
    return statistics.median(v) if v else None

def best(config):
    v = [r["step_s_min"] for r in runs(config)]
    return min(v) if v else None

def rss_ranks(config):
    per = [r.get("peak_rss_mib_ranks") or [r["peak_rss_mib"]] for r in runs(config)]
    return [statistics.median(p[i] for p in per) for i in range(min(len(p) for p in per))] if per else []

print(f"\n{'configuration':<22}{'procs x thr':>12}{'tokens/s':>10}{'step ms':>10}{'best step':>11}{'scaling':>9}"
      f"{'loss 1st->last':>18}{'busy':>6}{'state MiB':>11}  peak RSS MiB per process (sum)")
for config in ("dew-1", "dew-n", "dew-fsdp", "pytorch-1", "pytorch-n"):
    tps = med(config, "tokens_per_s")
    if tps is None:
        print(f"{names[config]:<22}  (no successful run)")
        continue
    r0 = runs(config)[0]
    base = med(config.split("-")[0] + "-1", "tokens_per_s")
    multi = not config.endswith("-1")
    scaling = f"{tps / base:.2f}x" if multi and base else "1.00x"
    state = med(config, "state_mib")
    state = f"{state:.1f}" if state is not None else "-"
    rss = rss_ranks(config)
    loss = f"{med(config, 'loss_first'):.3f}->{med(config, 'loss_last'):.3f}"
    busy = f"{len([r for r in runs(config) if r.get('busy_before', 0) >= 10])}/{len(runs(config))}"
    print(f"{names[config]:<22}{str(r0.get('processes', 1)) + ' x ' + str(r0['threads']):>12}{tps:>10.0f}"
          f"{med(config, 'step_s') * 1e3:>10.1f}{best(config) * 1e3:>11.1f}{scaling:>9}{loss:>18}{busy:>6}{state:>11}  "
          f"{' / '.join(f'{m:.0f}' for m in rss)} ({sum(rss):.0f})")

def ratio(a, b, what):
    ta, tb = med(a, "tokens_per_s"), med(b, "tokens_per_s")
    if not (ta and tb):
        return
    ra, rb = rss_ranks(a), rss_ranks(b)
    print(f"{names[a]} / {names[b]}: tokens/s {ta / tb:.2f}x{what} (best step {best(b) / best(a):.2f}x), "
          f"peak RSS per process {max(ra) / max(rb):.2f}x, all processes {sum(ra) / sum(rb):.2f}x")

print()
for impl, label in (("dew", "dew"), ("pytorch", "PyTorch")):
    t1, tn = med(f"{impl}-1", "tokens_per_s"), med(f"{impl}-n", "tokens_per_s")
    if t1 and tn:
        print(f"scaling {label}: {nproc} processes x {per_proc} thread(s) / 1 process x {threads} threads = {tn / t1:.2f}x")
ratio("dew-n", "pytorch-n", " (target >= 1.0)")
ratio("dew-1", "pytorch-1", "")
ratio("dew-fsdp", "dew-n", "")
sf, sd = med("dew-fsdp", "state_mib"), med("dew-n", "state_mib")
if sf and sd:
    print(f"weights + optimizer state per process, FSDP / DDP: {sf / sd:.3f} (1/{nproc} = {1 / nproc:.3f}; "
          f"target within 10%: {'met' if abs(sf / sd * nproc - 1) <= 0.1 else 'not met'})")
PY
