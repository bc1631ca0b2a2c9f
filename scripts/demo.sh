#!/usr/bin/env bash
# The main job: set up, build, and turn the default corpus (Jane Austen's six novels, from Debian's
# r-cran-janeaustenr) into GPT-2 token files that training reads. Outputs go to out/ (OUT to change).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
OUT=${OUT:-out}
CORPUS=${DEW_CACHE:-$HOME/.cache/dew}/data/austen.txt
DEW=${BUILD_DIR:-build}/bin/dew
mkdir -p "$OUT"
"$DEW" version
echo
echo "== tokenizing $CORPUS with GPT-2's vocabulary (1% held out for validation) =="
"$DEW" tokenize --input "$CORPUS" --out "$OUT/austen-gpt2" --tokenizer gpt2 --pack
cat "$OUT/austen-gpt2/meta.json"
echo
echo "== round trip of a sentence through the same tokenizer =="
"$DEW" tokenizer encode --tokenizer gpt2 --text "Once upon a time, Elizabeth Bennet walked to Meryton."
