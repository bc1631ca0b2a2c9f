#!/usr/bin/env bash
# Tokenization benchmark: dew vs tiktoken vs Hugging Face tokenizers, GPT-2 vocabulary, the default corpus,
# all measured in this one run on this machine. Prints each implementation's median MB/s and dew's ratio.
# Then SentencePiece: dew vs the `sentencepiece` package (and Hugging Face tokenizers when transformers'
# tokenizer.json conversion is in the cache) with Llama 2's vocabulary, llama.cpp's ggml-vocab-llama-spm.gguf
# (scripts/setup.sh unpacks it into ~/.cache/dew/llama-vocabs; the rows are skipped, saying so, without it).
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

CACHE=${DEW_CACHE:-$HOME/.cache/dew}
SPM_GGUF=$CACHE/llama-vocabs/ggml-vocab-llama-spm.gguf
SPM_JSON=$CACHE/llama-vocabs-hf/llama-spm/tokenizer.json  # tools/reference/convert_llama_vocabs.py
if [ ! -f "$SPM_GGUF" ]; then
  echo "SentencePiece rows skipped: $SPM_GGUF is absent (run scripts/setup.sh)"
  exit 0
fi
[ -f "$SPM_JSON" ] || SPM_JSON=""
"$VENV/bin/python" -m pip install -q -c tools/bench/requirements.txt sentencepiece protobuf gguf
spm_out=$(mktemp)
trap 'rm -f "$out" "$spm_out"' EXIT
"$BUILD_DIR/bin/tokenize_bench" "$FILE" "$SPM_GGUF" 3 | tee "$spm_out"
"$VENV/bin/python" tools/bench/tokenize_spm_peers.py "$FILE" "$SPM_GGUF" "$SPM_JSON" 3 | tee -a "$spm_out"
"$VENV/bin/python" - "$spm_out" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
by = {(r["impl"], r["mode"]): r for r in rows}
print("\nSentencePiece BPE, Llama 2's vocabulary (dew: one long text; sentencepiece: one text for '1 thread', "
      "paragraphs for 'all threads'; dew has no safe cut for SentencePiece, so its 'all threads' is one thread)")
print(f"{'mode':<36}{'dew MB/s':>10}{'sentencepiece':>15}{'tokenizers':>12}{'dew/sp':>9}{'dew/tokenizers':>16}")
for mode, peer_mode in (("1 thread (first pass)", "1 thread"), ("1 thread", "1 thread"),
                        ("1 thread", "1 thread (paragraphs)"), ("all threads", "all threads")):
    d = by[("dew", mode)]["mb_per_s"]
    s = by[("sentencepiece", peer_mode)]["mb_per_s"]
    h = by.get(("tokenizers", peer_mode), {}).get("mb_per_s")
    label = mode if peer_mode == mode else f"{mode} vs {peer_mode}"
    print(f"{label:<36}{d:>10.2f}{s:>15.2f}" + (f"{h:>12.2f}" if h else f"{'-':>12}") + f"{d/s:>9.2f}" +
          (f"{d/h:>16.2f}" if h else f"{'-':>16}"))
print("token counts (1 thread):", {i: by[(i, "1 thread")]["tokens"] for i in ("dew", "sentencepiece", "tokenizers")
                                    if (i, "1 thread") in by})
PY
