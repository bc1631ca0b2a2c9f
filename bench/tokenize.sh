#!/usr/bin/env bash
# Tokenization benchmark: dew vs tiktoken vs Hugging Face tokenizers, GPT-2 vocabulary, the default corpus,
# all measured in this one run on this machine. Prints each implementation's median MB/s and dew's ratio.
#   bash bench/tokenize.sh [FILE] [REPEATS]
set -euo pipefail
cd "$(dirname "$0")/.."
FILE=${1:-${DEW_CACHE:-$HOME/.cache/dew}/data/austen.txt}
REPEATS=${2:-5}
BUILD_DIR=${BUILD_DIR:-build}
ninja -C "$BUILD_DIR" tokenize_bench >/dev/null
VENV=${DEW_CACHE:-$HOME/.cache/dew}/venv-bench
if [ ! -x "$VENV/bin/python" ]; then python3 -m venv "$VENV"; fi
"$VENV/bin/python" -m pip install -q -c tools/bench/requirements.txt tiktoken tokenizers
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$BUILD_DIR/bin/tokenize_bench" "$FILE" gpt2 "$REPEATS" | tee "$out"
"$VENV/bin/python" tools/bench/tokenize_peers.py "$FILE" assets/tokenizers/gpt2/tokenizer.json "$REPEATS" | tee -a "$out"
"$VENV/bin/python" - "$out" "$FILE" <<'PY'
import json, sys, platform, os
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
by = {(r["impl"], r["mode"]): r for r in rows}
print(f"\ntokenizing {sys.argv[2]} with GPT-2's vocabulary on {os.cpu_count()} cores ({platform.processor() or platform.machine()})")
print(f"{'mode':<14}{'dew MB/s':>10}{'tiktoken':>10}{'tokenizers':>12}{'dew/tiktoken':>14}{'dew/tokenizers':>16}")
for mode in ("1 thread", "all threads"):
    d, t, h = (by[(i, mode)]["mb_per_s"] for i in ("dew", "tiktoken", "tokenizers"))
    print(f"{mode:<14}{d:>10.2f}{t:>10.2f}{h:>12.2f}{d/t:>14.2f}{d/h:>16.2f}")
counts = {r["impl"]: r["tokens"] for r in rows if r["mode"] == "1 thread"}
print("token counts agree:" if len(set(counts.values())) == 1 else "TOKEN COUNTS DIFFER:", counts)
PY
