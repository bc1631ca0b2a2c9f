#!/usr/bin/env bash
# Post-training benchmark: dew train sft|dpo|grpo with LoRA against TRL on SmolLM2-135M-Instruct, CPU, fp32,
# the same weights (dew's fp32 HF export of the GGUF, which both load), data and settings on both sides
# (tools/bench/post_training_peers.py says which settings make the work equal). Each run is its own process
# (its peak RSS is its own), runs go in rounds whose order rotates, and each waits for an idle machine first.
#
#   bash bench/post_training.sh            # all three benches, then the table and dew/TRL ratios
#
# Environment:
#   BENCHES     which benches (default "sft dpo grpo")
#   ROUNDS      rounds of (dew, trl) per bench (default 2)
#   THREADS     intra-op threads for TRL (default: all cores); dew uses every available core (it has no flag)
#   SFT_STEPS, DPO_STEPS, GRPO_STEPS   "WARMUP MEASURED" steps per run (defaults "2 6", "3 8", "1 4")
#   PRECISION   fp32 (default) or bf16: bf16 compute with fp32 parameters on both sides (dew model.dtype=bfloat16,
#               TRL bf16=True, which on the CPU is torch.autocast("cpu", torch.bfloat16))
#   QUIET_WAIT  seconds to wait for the machine to be < 10% busy before each run (default 60)
#   DEW         the dew binary (default build/bin/dew; built with ninja when missing and build/ is a Ninja dir)
#   MODEL       the GGUF (default ~/.cache/dew/models/SmolLM2-135M-Instruct.Q4_1.gguf: scripts/fetch_models.sh)
#   DEW_CACHE   where venv-bench lives (default ~/.cache/dew; needs torch 2.11, transformers, trl, peft, datasets)
#
# Time: SFT_STEPS="1 3" DPO_STEPS="1 3" GRPO_STEPS="1 2" ROUNDS=1 took 34 minutes on the 2-core dev VM under
# load ~5 (docs/benchmarks.md); the defaults do about 2.5x the steps, so expect well over an hour there.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
BENCHES=${BENCHES:-sft dpo grpo}
ROUNDS=${ROUNDS:-2}
THREADS=${THREADS:-$(nproc)}
DEW=${DEW:-build/bin/dew}
MODEL=${MODEL:-$HOME/.cache/dew/models/SmolLM2-135M-Instruct.Q4_1.gguf}
DEW_CACHE=${DEW_CACHE:-$HOME/.cache/dew}
PY=$DEW_CACHE/venv-bench/bin/python
PEERS=tools/bench/post_training_peers.py
declare -A STEPS=([sft]="${SFT_STEPS:-2 6}" [dpo]="${DPO_STEPS:-3 8}" [grpo]="${GRPO_STEPS:-1 4}")

if [ ! -x "$DEW" ]; then
  if [ -f "$(dirname "$DEW")/../build.ninja" ]; then
    ninja -C "$(dirname "$DEW")/.." dew_cli >/dev/null
  else
    echo "dew: not found at $DEW (build it: bash scripts/build.sh, or set DEW)" >&2; exit 1
  fi
fi
if [ ! -f "$MODEL" ]; then
  echo "model: $MODEL is missing (bash scripts/fetch_models.sh fetches it)" >&2; exit 1
fi
if ! "$PY" -c 'import torch, transformers, trl, peft, datasets' 2>/dev/null; then
  echo "$PY lacks torch/transformers/trl/peft/datasets: $PY -m pip install -r tools/bench/requirements.txt" >&2
  exit 1
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$DEW" export "$MODEL" "$work/hf" --format hf >/dev/null  # fp32 HF directory with the chat template
"$PY" $PEERS data "$work/data"
PAIR_IDS=$("$PY" $PEERS pair-tokens "$work/hf" "$work/data")

out=$work/results.jsonl
run_one() {  # impl bench round
  local impl=$1 bench=$2 round=$3 busy line steps
  steps=(${STEPS[$bench]})
  busy=$(wait_quiet "${QUIET_WAIT:-60}")
  local load=$(cut -d' ' -f1 /proc/loadavg)
  if ! line=$("$PY" $PEERS "$impl" "$bench" --bin "$DEW" --model "$work/hf" --data "$work/data" \
              --warmup "${steps[0]}" --steps "${steps[1]}" --threads "$THREADS" --precision "${PRECISION:-fp32}" 2>"$work/$impl-$bench.log" | tail -n1); then
    echo "$impl $bench: the run failed; last lines of its log:"; tail -n 8 "$work/$impl-$bench.log"; return 0
  fi
  echo "$line" | "$PY" -c 'import json,sys; r=json.loads(sys.stdin.read()); r.update(round=int(sys.argv[1]), busy_before=int(sys.argv[2]), load_before=float(sys.argv[3])); r.pop("steps_s", None); r.pop("losses", None); print(json.dumps(r))' \
    "$round" "$busy" "$load" | tee -a "$out"
}
IMPLS=(dew trl)
for bench in $BENCHES; do
  for ((round = 0; round < ROUNDS; ++round)); do
    for ((i = 0; i < 2; ++i)); do run_one "${IMPLS[(i + round) % 2]}" "$bench" "$round"; done
  done
done

cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')
echo
echo "SmolLM2-135M-Instruct (fp32 HF export of $(basename "$MODEL")), ${PRECISION:-fp32} compute, LoRA r16 a32 on q,k,v,o,gate,up,down; CPU $cpu," \
     "$(nproc) cores, TRL threads $THREADS, dew threads = all; $(date -u +%F)"
"$PY" -c 'import torch, transformers, trl, peft; print(f"torch {torch.__version__}, transformers {transformers.__version__}, trl {trl.__version__}, peft {peft.__version__}")'
"$DEW" version | sed -n 1,3p
echo "steps (warmup measured): sft ${STEPS[sft]}, dpo ${STEPS[dpo]}, grpo ${STEPS[grpo]}; rounds $ROUNDS;" \
     "tokens per DPO pair (prompt+chosen + prompt+rejected) $PAIR_IDS"
"$PY" $PEERS report "$out" "$PAIR_IDS"
