"""The JEPA training benchmark (bench/jepa.sh): dew train jepa against dewml's JepaObjective, same sizes.

    python jepa_peers.py dew --bin build/bin/dew [flags]   # dew's CLI on Fashion-MNIST; step_seconds per step
                                                           # from the run's tracking/scalars.jsonl
    python jepa_peers.py dewml [flags]                     # dewml: JepaEncoder + JepaPredictor + JepaObjective
                                                           # with MultiBlockMask, through its Trainer
    python jepa_peers.py probe-dewml

Sizes (flags, defaults = dew train jepa's): 28x28x1 images, --patch 4 (a 7x7 grid), --dim 128, --depth 4,
--heads 4, --pred-dim 64, --pred-depth 2, --batch 64, 4 target blocks of 15-20% of the grid; AdamW 1e-3
(dew: its default warmup and cosine; dewml: optax.adamw(1e-3)), fp32, --threads. Each prints one JSON line:
median step seconds over the measured steps (after --warmup), images/s, peak RSS, first/last loss.
The masks differ by design: dew draws I-JEPA's sampler (a context block minus the targets, ~8 patches here),
dewml its fixed-shape variant (the complement of the targets, 13 patches here); targets are 3x3 on both.
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

from peer_support import current_rss_mib, limit_jax_threads, peak_rss_mib, probe_dewml, time_dewml_trainer


def parse(argv):
    p = argparse.ArgumentParser()
    p.add_argument("impl", choices=["dew", "dewml", "probe-dewml"])
    p.add_argument("--bin", default="build/bin/dew")
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--patch", type=int, default=4)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--depth", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--pred-dim", type=int, default=64)
    p.add_argument("--pred-depth", type=int, default=2)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def common(a, impl):
    return {"impl": impl, "config": {"patch": a.patch, "dim": a.dim, "depth": a.depth, "heads": a.heads,
                                     "pred_dim": a.pred_dim, "pred_depth": a.pred_depth, "batch": a.batch}}


def run_dew(a) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        run = os.path.join(tmp, "run")
        sets = {"model.patch_size": a.patch, "model.dim": a.dim, "model.depth": a.depth, "model.heads": a.heads,
                "model.predictor_dim": a.pred_dim, "model.predictor_depth": a.pred_depth,
                "trainer.batch_size": a.batch, "trainer.steps": a.warmup + a.steps, "trainer.log_every": 1,
                "trainer.eval_every": 0, "trainer.checkpoint_every": 0, "trainer.seed": a.seed, "data.val": "none",
                "jepa.probe_every": 0}
        cmd = [a.bin, "train", "jepa", "--data", a.data, "--out", run]
        for k, v in sets.items():
            cmd += ["--set", f"{k}={v}"]
        env = dict(os.environ)
        if a.threads > 0:
            env["DEW_THREADS"] = str(a.threads)
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=env)
        rows = [json.loads(l) for l in open(os.path.join(run, "tracking", "scalars.jsonl")) if l.strip()]
    train = [r for r in rows if "step_seconds" in r.get("scalars", r)]
    def scal(r):
        return r.get("scalars", r)
    measured = [scal(r)["step_seconds"] for r in train if r["step"] > a.warmup]
    step_s = statistics.median(measured)
    return {**common(a, "dew"), "steps_measured": len(measured), "step_s": step_s, "step_s_min": min(measured),
            "images_per_s": a.batch / step_s, "loss_first": scal(train[0])["loss"], "loss_last": scal(train[-1])["loss"],
            "peak_rss_mib": peak_rss_mib(resource.RUSAGE_CHILDREN)}


def run_dewml(a) -> dict:
    limit_jax_threads(a.threads)
    base_rss = current_rss_mib()

    import numpy as np
    import optax
    from dew.inputs import Field
    from dew.nn.backbones.jepa import JepaEncoder, JepaPredictor
    from dew.objectives.jepa.masking import MultiBlockMask
    from dew.objectives.jepa.objective import JepaObjective

    grid = 28 // a.patch
    encoder = JepaEncoder(patch_size=a.patch, emb_features=a.dim, num_layers=a.depth, num_heads=a.heads)
    predictor = JepaPredictor(grid=(grid, grid), emb_features=a.dim, predictor_features=a.pred_dim,
                              num_layers=a.pred_depth, num_heads=a.heads)
    mask = MultiBlockMask.for_grid((grid, grid), num_targets=4, scale=(0.15, 0.2), aspect=(0.75, 1.5))
    objective = JepaObjective(encoder, predictor, mask, Field("image", (28, 28, 1)), momentum=(0.996, 1.0),
                              momentum_steps=a.warmup + a.steps)
    rng = np.random.default_rng(a.seed + 1)
    pool = [{"image": rng.uniform(-1, 1, (a.batch, 28, 28, 1)).astype(np.float32),
             "label": rng.integers(0, 10, (a.batch,), dtype=np.int32)} for _ in range(4)]
    t = time_dewml_trainer(objective, optax.adamw(1e-3), pool, a.batch, a.steps, a.warmup, a.seed)
    return {**common(a, "dewml"), "context_tokens": mask.num_context, **t, "images_per_s": a.batch / t["step_s"],
            "peak_rss_mib": peak_rss_mib(), "base_rss_mib": base_rss}


def main(argv) -> int:
    a = parse(argv)
    if a.impl == "probe-dewml":
        reason = probe_dewml("dew.objectives.jepa.objective", "dew.nn.backbones.jepa")
        print(json.dumps({"impl": "dewml", "installable": reason is None, "reason": reason}))
        return 0
    print(json.dumps(run_dew(a) if a.impl == "dew" else run_dewml(a)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
