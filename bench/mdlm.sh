#!/usr/bin/env bash
# Masked-diffusion LM (MDLM) benchmark against the JAX original, dewml, in this one run on this machine:
#   training   `dew train mdlm` (configs/demo_lm.json's decoder made bidirectional, mask id after the data's
#              4096-token vocabulary) against dewml's MaskedDiffusionObjective(CausalTransformer(causal=False),
#              MDLM(mask_id)()) through its Trainer, on the same tokenized Austen corpus: median ms/step,
#              tokens/s, peak RSS, loss first -> last, dew's ratios;
#   sampling   the Unmask sampler's time per generated token against steps (48 new tokens after a 4-token
#              prompt; S model evaluations on both sides), dew's inference::masked_generate (mdlm_bench
#              sample) against dewml's DiscreteProcess.generate, random weights.
# Each run is its own process, waits for a quiet machine first, and the order alternates per round; the tables
# give medians over rounds of each run's median. tools/bench/mdlm_peers.py says what each side runs.
#
#   bash bench/mdlm.sh [FLAGS...]   # FLAGS go to every run, e.g. --emb 256 --batch 32 --steps 20
#
# Environment: ROUNDS (default 2), THREADS (default: all cores), PARTS (default "train sample"), SAMPLE_STEPS
# (default 16,32,64), DEW (default BIN_DIR/dew), BIN_DIR (default build/bin; mdlm_bench is built there when
# missing), DEW_CACHE (default ~/.cache/dew: the venv-bench Python with dewml, the corpus, and bench-mdlm/ where
# the tokens are made once), TOKENS (a token directory to use instead), QUIET_WAIT (default 120 s).
# dewml compiles its step and each step count's sampler on the first call (seconds to a minute on 2 cores).
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
ROUNDS=${ROUNDS:-2}
THREADS=${THREADS:-$(nproc)}
PARTS=${PARTS:-train sample}
SAMPLE_STEPS=${SAMPLE_STEPS:-16,32,64}
BIN_DIR=${BIN_DIR:-build/bin}
DEW=${DEW:-$BIN_DIR/dew}
DEW_CACHE=${DEW_CACHE:-$HOME/.cache/dew}
VENV=$DEW_CACHE/venv-bench
PEERS=tools/bench/mdlm_peers.py
[ -x "$DEW" ] || DEW=$(bench_binary "$(dirname "$DEW")" dew)
BENCH=$(bench_binary "$BIN_DIR" mdlm_bench)
bench_venv "$VENV" numpy
DEWML_REASON=$(dewml_reason "$VENV" "$PEERS")
[ -n "$DEWML_REASON" ] && echo "dewml: not installable here ($DEWML_REASON)"

# The demo's data (scripts/demo.sh): a 4096-token byte-level BPE learned on the corpus, the corpus tokenized.
TOKENS=${TOKENS:-$DEW_CACHE/bench-mdlm/tokens}
if [[ " $PARTS " == *" train "* ]] && [ ! -f "$TOKENS/meta.json" ]; then
  corpus=$DEW_CACHE/data/austen.txt
  [ -f "$corpus" ] || { echo "no corpus at $corpus (bash scripts/setup.sh fetches it), or set TOKENS"; exit 1; }
  echo "tokenizing $corpus into $TOKENS (once)"
  "$DEW" tokenizer train --input "$corpus" --out "$(dirname "$TOKENS")/bpe" --vocab-size 4096 >/dev/null
  "$DEW" tokenize --input "$corpus" --out "$TOKENS" --tokenizer "$(dirname "$TOKENS")/bpe" --val-fraction 0.02 >/dev/null
fi

out=$(mktemp)
log=$(mktemp)
trap 'rm -f "$out" "$log"' EXIT
run_one() {  # part impl round [flags...]
  local part=$1 impl=$2 round=$3 busy line what
  shift 3
  [[ $impl == dewml* ]] && [ -n "$DEWML_REASON" ] && return 0
  busy=$(wait_quiet "${QUIET_WAIT:-120}")
  if ! line=$("$VENV/bin/python" $PEERS "$impl" --bin "$DEW" --bench "$BENCH" --data "$TOKENS" --threads "$THREADS" \
              --sample-steps "$SAMPLE_STEPS" "$@" 2>"$log" | tail -n1); then
    echo "$impl: the run failed; its last lines:"; tail -n 5 "$log"; return 0
  fi
  echo "$line" | "$VENV/bin/python" -c 'import json,sys; r=json.loads(sys.stdin.read()); r["part"]=sys.argv[1]; r["round"]=int(sys.argv[2]); r["busy_before"]=int(sys.argv[3]); print(json.dumps(r))' "$part" "$round" "$busy" >>"$out"
  what=$(tail -n1 "$out" | "$VENV/bin/python" -c 'import json,sys; r=json.loads(sys.stdin.read())
print("%.0f ms/step" % (r["step_s"] * 1e3) if "step_s" in r else ", ".join("%d steps %.2f ms/token" % (x["steps"], x["ms_per_token"]) for x in r["results"]))')
  echo "  $part $impl round $round (started ${busy}% busy): $what"
}
for part in $PARTS; do
  case $part in train) impls=(dew dewml) ;; sample) impls=(dew-sample dewml-sample) ;; *) echo "unknown part '$part'"; exit 1 ;; esac
  for ((round = 0; round < ROUNDS; ++round)); do
    if ((round % 2)); then run_one "$part" "${impls[1]}" "$round" "$@"; run_one "$part" "${impls[0]}" "$round" "$@"
    else run_one "$part" "${impls[0]}" "$round" "$@"; run_one "$part" "${impls[1]}" "$round" "$@"; fi
  done
done

"$VENV/bin/python" - "$out" "$THREADS" <<'PY'
import json, os, platform, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
if not rows:
    sys.exit("no run succeeded")
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.machine())
busy = sum(1 for r in rows if r.get("busy_before", 0) >= 10)
print(f"\nMDLM, {sys.argv[2]} threads, {os.cpu_count()} cores ({cpu}); {busy} of {len(rows)} runs started busy")
train = [r for r in rows if r["part"] == "train"]
if train:
    c = train[0]["config"]
    med = lambda impl, key: statistics.median(r[key] for r in train if r["impl"] == impl)
    impls = [i for i in ("dew", "dewml") if any(r["impl"] == i for r in train)]
    print(f"\ntraining: emb {c['emb']}, {c['layers']} layers, {c['heads']} heads, mlp {c['mlp_features']}, vocab "
          f"{train[0]['vocab']} (mask last), seq {c['seq']}, batch {c['batch']}, fp32; "
          f"{len([r for r in train if r['impl'] == 'dew'])} round(s)")
    print(f"{'impl':<8}{'ms/step':>9}{'best':>8}{'tokens/s':>10}{'peak RSS MiB':>14}{'loss 1st->last':>18}")
    for impl in impls:
        best = min(r["step_s_min"] for r in train if r["impl"] == impl)
        print(f"{impl:<8}{med(impl, 'step_s') * 1e3:>9.0f}{best * 1e3:>8.0f}{med(impl, 'tokens_per_s'):>10.0f}"
              f"{med(impl, 'peak_rss_mib'):>14.0f}{med(impl, 'loss_first'):>10.3f}->{med(impl, 'loss_last'):.3f}")
    if len(impls) == 2:
        print(f"dew/dewml: training tokens/s {med('dew', 'tokens_per_s') / med('dewml', 'tokens_per_s'):.2f}x, "
              f"peak RSS {med('dew', 'peak_rss_mib') / med('dewml', 'peak_rss_mib'):.2f}x")
sample = [r for r in rows if r["part"] == "sample"]
if sample:
    s0 = sample[0]
    print(f"\nsampling (Unmask, random weights, temperature 1): {s0['rows']} row(s), {s0['prompt_tokens']}-token prompt, "
          f"{s0['new_tokens']} new tokens; steps = model evaluations on both sides")
    def per_steps(impl, key):
        out = {}
        for r in sample:
            if r["impl"] == impl:
                for x in r["results"]:
                    out.setdefault(x["steps"], []).append(x[key])
        return {k: statistics.median(v) for k, v in out.items()}
    d_tok, m_tok = per_steps("dew", "ms_per_token"), per_steps("dewml", "ms_per_token")
    d_ev, m_ev = per_steps("dew", "ms_per_evaluation"), per_steps("dewml", "ms_per_evaluation")
    print(f"{'steps':>6}{'dew ms/token':>14}{'dewml ms/token':>16}{'dew faster':>12}{'dew ms/eval':>13}{'dewml ms/eval':>15}")
    for steps in sorted(set(d_tok) | set(m_tok)):
        d, m = d_tok.get(steps), m_tok.get(steps)
        ratio = f"{m / d:.2f}x" if d and m else "-"
        f = lambda v: f"{v:.2f}" if v is not None else "-"
        print(f"{steps:>6}{f(d):>14}{f(m):>16}{ratio:>12}{f(d_ev.get(steps)):>13}{f(m_ev.get(steps)):>15}")
PY
