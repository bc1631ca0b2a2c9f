"""The MDLM benchmark (bench/mdlm.sh): dew train mdlm against dewml's MaskedDiffusionObjective, and the Unmask
sampler's time per token against steps, same sizes.

    python mdlm_peers.py dew --bin build/bin/dew --data TOKENS [flags]   # dew's CLI on a token directory;
                                                                         # step_seconds per step from the run's
                                                                         # tracking/scalars.jsonl
    python mdlm_peers.py dewml --data TOKENS [flags]     # dewml: CausalTransformer(causal=False) +
                                                         # MaskedDiffusionObjective(MDLM) through its Trainer, on
                                                         # windows of the same token ids
    python mdlm_peers.py dew-sample --bench build/bin/mdlm_bench [flags]   # dew: inference::masked_generate
                                                                           # (mdlm_bench sample), random weights
    python mdlm_peers.py dewml-sample [flags]            # dewml: DiscreteProcess.generate (Unmask), random weights
    python mdlm_peers.py probe-dewml

Sizes (flags, defaults = configs/demo_lm.json): --emb 192, --layers 4, --heads 4, --mlp-features 512 (swiglu,
qk-norm, tied embeddings, rotary, max_seq_len 256), --seq 128, --batch 16, fp32; the model's vocabulary is the
data's + 1, its last id the mask token. Optimizer on both: AdamW (0.9, 0.95), weight decay 0.1, clip 1, peak
2e-3 after 30 warmup steps, cosine to 2e-4 over 600 steps (the demo's schedule), EMA 0.95. Training prints one
JSON line: median step seconds over the measured steps (after --warmup), tokens/s (batch x seq / step), peak
RSS, first/last loss (the NELBO per token on both).

Sampling prints one JSON line with, per S of --sample-steps, the median seconds of a call over --repeats (after a
warm-up call), ms per generated token and ms per model evaluation; --rows copies of the prompt, temperature 1,
random remasking. dew-sample: mdlm_bench's timing of `inference::masked_generate` (what `dew generate RUN
--steps S` runs, without process start-up). dewml-sample: `process.generate(model, variables, [prompt] * rows,
--new-tokens, steps=S - 1)`, whose first call per S compiles. dewml's `steps` counts reveal steps and adds the
closing clean prediction, dew's `--steps` counts model evaluations with it, so S evaluations on both sides. The
prompt is the same fixed ids as mdlm_bench's (17 i + 5 mod vocab).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

from peer_support import current_rss_mib, limit_jax_threads, peak_rss_mib, probe_dewml, time_dewml_trainer

LEARNING_RATE, WARMUP_STEPS, DECAY_STEPS, FINAL_FRACTION, EMA = 2e-3, 30, 600, 0.1, 0.95


def parse(argv):
    p = argparse.ArgumentParser()
    p.add_argument("impl", choices=["dew", "dewml", "dew-sample", "dewml-sample", "probe-dewml"])
    p.add_argument("--bin", default="build/bin/dew")
    p.add_argument("--bench", default="build/bin/mdlm_bench")
    p.add_argument("--data", help="token directory written by `dew tokenize`")
    p.add_argument("--config", default="configs/demo_lm.json", help="dew: the run config the sizes override")
    p.add_argument("--vocab", type=int, default=4096, help="dewml-sample: the data's vocabulary (training reads meta.json)")
    p.add_argument("--emb", type=int, default=192)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--mlp-features", type=int, default=512)
    p.add_argument("--max-seq-len", type=int, default=256)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--prompt-tokens", type=int, default=4)
    p.add_argument("--new-tokens", type=int, default=48)
    p.add_argument("--sample-steps", default="16,32,64")
    p.add_argument("--rows", type=int, default=1)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def common(a, impl):
    return {"impl": impl, "config": {"emb": a.emb, "layers": a.layers, "heads": a.heads, "mlp_features": a.mlp_features,
                                     "seq": a.seq, "batch": a.batch}}


def token_meta(a) -> dict:
    if not a.data:
        sys.exit("--data TOKEN_DIR is required (a directory written by `dew tokenize`)")
    with open(os.path.join(a.data, "meta.json")) as f:
        return json.load(f)


def run_dew(a) -> dict:
    meta = token_meta(a)
    with tempfile.TemporaryDirectory() as tmp:
        run = os.path.join(tmp, "run")
        sets = {"model.emb_features": a.emb, "model.num_layers": a.layers, "model.num_heads": a.heads,
                "model.mlp_features": a.mlp_features, "model.max_seq_len": a.max_seq_len, "data.seq_len": a.seq,
                "optim.learning_rate": LEARNING_RATE, "optim.warmup_steps": WARMUP_STEPS,
                "optim.decay_steps": DECAY_STEPS, "optim.final_lr_fraction": FINAL_FRACTION,
                "trainer.batch_size": a.batch, "trainer.steps": a.warmup + a.steps, "trainer.log_every": 1,
                "trainer.eval_every": 0, "trainer.eval_batches": 1, "trainer.checkpoint_every": 0,
                "trainer.ema_decay": EMA, "trainer.seed": a.seed}
        cmd = [a.bin, "train", "mdlm", "--data", a.data, "--out", run, "--config", a.config]
        for k, v in sets.items():
            cmd += ["--set", f"{k}={v}"]
        env = dict(os.environ)
        if a.threads > 0:
            env["DEW_THREADS"] = str(a.threads)
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=env)
        rows = [json.loads(l) for l in open(os.path.join(run, "tracking", "scalars.jsonl")) if l.strip()]

    def scal(r):
        return r.get("scalars", r)
    train = [r for r in rows if "step_seconds" in scal(r)]
    measured = [scal(r)["step_seconds"] for r in train if r["step"] > a.warmup]
    step_s = statistics.median(measured)
    return {**common(a, "dew"), "vocab": meta["vocab_size"] + 1, "steps_measured": len(measured), "step_s": step_s,
            "step_s_min": min(measured), "steps_s": measured, "tokens_per_s": a.batch * a.seq / step_s,
            "masked_fraction": statistics.mean(scal(r)["masked_fraction"] for r in train),
            "loss_first": scal(train[0])["loss"], "loss_last": scal(train[-1])["loss"],
            "peak_rss_mib": peak_rss_mib(resource.RUSAGE_CHILDREN)}


def dewml_model(a, vocab: int):
    """dewml's CausalTransformer as dew's demo decoder, bidirectional, with the mask token last."""
    import jax.numpy as jnp
    from dew.nn.backbones.causal_transformer import CausalTransformer
    return CausalTransformer(vocab_size=vocab + 1, emb_features=a.emb, num_layers=a.layers, num_heads=a.heads,
                             num_kv_heads=a.heads, mlp="swiglu", mlp_features=a.mlp_features,
                             max_seq_len=a.max_seq_len, rope_theta=10000.0, norm_eps=1e-6, qk_norm=True,
                             tie_embeddings=True, causal=False, dtype=jnp.float32)


def run_dewml(a) -> dict:
    meta = token_meta(a)
    limit_jax_threads(a.threads)
    base_rss = current_rss_mib()

    import numpy as np
    from dew.config import OptimConfig
    from dew.diffusion.discrete import MDLM
    from dew.objectives.diffusion import MaskedDiffusionObjective
    from dew.training.optim import Cosine

    vocab = int(meta["vocab_size"])
    model = dewml_model(a, vocab)
    objective = MaskedDiffusionObjective(model, MDLM(mask_id=vocab)(), seq_len=a.seq, ema_decay=EMA)
    total = a.warmup + a.steps
    optim = OptimConfig(optimizer="adamw", learning_rate=LEARNING_RATE,
                        schedule=Cosine(peak=LEARNING_RATE, warmup_steps=WARMUP_STEPS, init=0.0,
                                        end=LEARNING_RATE * FINAL_FRACTION, decay_steps=DECAY_STEPS),
                        weight_decay=0.1, b1=0.9, b2=0.95, clip_grads=1.0)
    # Windows of seq ids from dew's train.bin at seeded random starts: the ids dew's loader reads, a fresh batch
    # every step (as dew's loader gives), so neither side sees a batch twice.
    ids = np.fromfile(os.path.join(a.data, "train.bin"), dtype=np.dtype(meta.get("dtype", "uint16")))
    rng = np.random.default_rng(a.seed + 1)
    pool = []
    for _ in range(total):
        starts = rng.integers(0, ids.size - a.seq, a.batch)
        pool.append({"text": np.stack([ids[s:s + a.seq] for s in starts]).astype(np.int32)})
    t = time_dewml_trainer(objective, optim, pool, a.batch, a.steps, a.warmup, a.seed)
    return {**common(a, "dewml"), "vocab": vocab + 1, **t, "tokens_per_s": a.batch * a.seq / t["step_s"],
            "peak_rss_mib": peak_rss_mib(), "base_rss_mib": base_rss}


def run_dew_sample(a) -> dict:
    cmd = [a.bench, "sample", "--vocab", a.vocab, "--emb", a.emb, "--layers", a.layers, "--heads", a.heads,
           "--mlp-features", a.mlp_features, "--max-seq-len", a.max_seq_len, "--prompt-tokens", a.prompt_tokens,
           "--new-tokens", a.new_tokens, "--steps", a.sample_steps, "--rows", a.rows, "--repeats", a.repeats,
           "--threads", a.threads, "--seed", a.seed]
    out = subprocess.run([str(c) for c in cmd], check=True, stdout=subprocess.PIPE, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def run_dewml_sample(a) -> dict:
    limit_jax_threads(a.threads)
    base_rss = current_rss_mib()
    import jax
    import jax.numpy as jnp
    from dew.diffusion.discrete import MDLM

    model = dewml_model(a, a.vocab)
    process = MDLM(mask_id=a.vocab)()
    variables = model.init(jax.random.key(a.seed), jnp.zeros((1, a.seq), jnp.int32))
    prompt = [(17 * i + 5) % a.vocab for i in range(a.prompt_tokens)]
    prompts = [prompt] * a.rows

    def run(steps: int, key: int) -> float:
        start = time.perf_counter()
        drawn = process.generate(model, variables, prompts, a.new_tokens, steps=steps - 1, key=jax.random.key(key))
        jax.block_until_ready(drawn)
        return time.perf_counter() - start

    results = []
    for steps in (int(s) for s in a.sample_steps.split(",") if s):
        compile_s = run(steps, a.seed)  # traces and compiles for this step count (a static argument)
        seconds = [run(steps, a.seed + 1 + r) for r in range(a.repeats)]
        s = statistics.median(seconds)
        results.append({"steps": steps, "evaluations": steps, "s": s, "s_min": min(seconds), "compile_s": compile_s,
                        "ms_per_token": 1e3 * s / (a.rows * a.new_tokens), "ms_per_evaluation": 1e3 * s / steps})
    return {"impl": "dewml", "mode": "sample", "jax": jax.__version__,
            "config": {"vocab": a.vocab, "emb": a.emb, "layers": a.layers, "heads": a.heads,
                       "mlp_features": a.mlp_features, "max_seq_len": a.max_seq_len},
            "remasking": "random", "prompt_tokens": a.prompt_tokens, "new_tokens": a.new_tokens, "rows": a.rows,
            "results": results, "peak_rss_mib": peak_rss_mib(), "base_rss_mib": base_rss}


def main(argv) -> int:
    a = parse(argv)
    if a.impl == "probe-dewml":
        reason = probe_dewml("dew.objectives.diffusion", "dew.diffusion.discrete", "dew.nn.backbones.causal_transformer")
        print(json.dumps({"impl": "dewml", "installable": reason is None, "reason": reason}))
        return 0
    run = {"dew": run_dew, "dewml": run_dewml, "dew-sample": run_dew_sample, "dewml-sample": run_dewml_sample}[a.impl]
    print(json.dumps(run(a)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
