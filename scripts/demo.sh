#!/usr/bin/env bash
# The main job: set up, build, then the spec's first training run on the default corpus (Jane Austen's six
# novels, from Debian's r-cran-janeaustenr): learn a 4096-token BPE vocabulary, tokenize, train a small
# decoder for a few minutes on the CPU (configs/demo_lm.json), evaluate it and continue "Once upon a time"
# greedily. Outputs go to out/ (OUT to change); the run directory is replaced on every demo run.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh dew_cli   # only `dew`: the tests and benchmarks are scripts/test.sh's
OUT=${OUT:-out}
CORPUS=${DEW_CACHE:-$HOME/.cache/dew}/data/austen.txt
DEW=${BUILD_DIR:-build}/bin/dew
mkdir -p "$OUT"
"$DEW" version
echo
echo "== learning a 4096-token byte-level BPE vocabulary from $CORPUS =="
"$DEW" tokenizer train --input "$CORPUS" --out "$OUT/austen-bpe" --vocab-size 4096
echo
echo "== tokenizing (2% held out for validation) =="
"$DEW" tokenize --input "$CORPUS" --out "$OUT/austen-tokens" --tokenizer "$OUT/austen-bpe" --val-fraction 0.02
echo
echo "== training a decoder (configs/demo_lm.json) =="
rm -rf "$OUT/austen-run"
"$DEW" train lm --data "$OUT/austen-tokens" --out "$OUT/austen-run" --config configs/demo_lm.json "$@"
echo
echo "== validation of the EMA weights =="
"$DEW" eval "$OUT/austen-run"
echo
echo "== greedy continuation =="
"$DEW" generate "$OUT/austen-run" --prompt "Once upon a time" --max-new-tokens 60
echo
echo "plots: $OUT/austen-run/tracking/loss.png $OUT/austen-run/tracking/val_perplexity.png"
