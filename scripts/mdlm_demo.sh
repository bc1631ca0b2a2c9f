#!/usr/bin/env bash
# A masked-diffusion language model (MDLM) on the default corpus, beside the autoregressive demo: the same
# Austen tokens and the same 2.6M-parameter decoder shape (configs/demo_mdlm.json: 4 layers x 192 features,
# rows of 128 tokens, batch 16), made bidirectional with a mask token after the 4096-token vocabulary and
# trained on MDLM's negative ELBO for 1,000 steps; then its validation ELBO (exp of it bounds the
# perplexity) and "Once upon a time" continued by 48 tokens with the Unmask sampler in 64 steps.
# Reuses out/austen-tokens when scripts/demo.sh made it; outputs go to out/ (OUT to change); the run
# directory is replaced on every run. Arguments go to `dew train mdlm` (e.g. --set trainer.steps=2000).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh dew_cli   # only `dew`: the tests and benchmarks are scripts/test.sh's
OUT=${OUT:-out}
CORPUS=${DEW_CACHE:-$HOME/.cache/dew}/data/austen.txt
DEW=${BUILD_DIR:-build}/bin/dew
mkdir -p "$OUT"
if [ ! -f "$OUT/austen-tokens/meta.json" ]; then
  echo "== learning a 4096-token byte-level BPE vocabulary and tokenizing $CORPUS (as scripts/demo.sh) =="
  "$DEW" tokenizer train --input "$CORPUS" --out "$OUT/austen-bpe" --vocab-size 4096
  "$DEW" tokenize --input "$CORPUS" --out "$OUT/austen-tokens" --tokenizer "$OUT/austen-bpe" --val-fraction 0.02
fi
echo "== training a masked-diffusion decoder (configs/demo_mdlm.json) =="
rm -rf "$OUT/austen-mdlm"
start=$(date +%s)
"$DEW" train mdlm --data "$OUT/austen-tokens" --out "$OUT/austen-mdlm" --config configs/demo_mdlm.json "$@"
echo "trained in $(( $(date +%s) - start )) s"
echo
echo "== validation of the EMA weights (nelbo per token; perplexity_bound = exp(nelbo), an upper bound) =="
"$DEW" eval "$OUT/austen-mdlm"
if [ -f "$OUT/austen-run/run.json" ]; then
  echo
  echo "== the autoregressive demo on the same data (scripts/demo.sh), for comparison: its perplexity is exact =="
  "$DEW" eval "$OUT/austen-run"
fi
echo
echo "== Unmask sampler: 48 new tokens, 64 steps, temperature 1 =="
"$DEW" generate "$OUT/austen-mdlm" --prompt "Once upon a time" --max-new-tokens 48 --steps 64 --temperature 1 --seed 5
echo
echo "== the same with LLaDA's low-confidence remasking, greedy draws =="
"$DEW" generate "$OUT/austen-mdlm" --prompt "Once upon a time" --max-new-tokens 48 --steps 64 --remasking confidence
echo
echo "plots: $OUT/austen-mdlm/tracking/loss.png $OUT/austen-mdlm/tracking/val_perplexity_bound.png"
