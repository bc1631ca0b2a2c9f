"""Peers for bench/diffusion.sh: the same class-conditional DiT as bench/diffusion_bench.cpp.

    python diffusion_peers.py torch [flags]      # PyTorch eager training: the DiT of
                                                 # tools/reference/make_diffusion_model_fixtures.py (the
                                                 # architecture dew's DiT is tested against), flow matching
    python diffusion_peers.py dewml [flags]      # the JAX original: its SimpleDiT, DiffusionObjective, Trainer
    python diffusion_peers.py diffusers [flags]  # sampling: diffusers' scheduler loop around the torch DiT
    python diffusion_peers.py probe-dewml        # prints whether dewml imports here, and why not

Each prints one JSON line like diffusion_bench's. Training: median seconds per step over the measured steps
(after --warmup), images/s, peak RSS (run each peer in its own process), first and last loss. Sampling: the
median over --repeats of a whole scheduler loop for --images images with classifier-free guidance (the
conditional and unconditional halves in one batch, as dew does), divided by images x steps.
Flags match diffusion_bench: --size --channels --classes --patch --dim --depth --heads --batch --process
--steps --warmup --ema --threads --seed; sampling: --solver --sample-steps --images --cfg --repeats.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import sys
import time

from peer_support import current_rss_mib, limit_jax_threads, peak_rss_mib, probe_dewml, time_dewml_trainer

HERE = pathlib.Path(__file__).resolve().parent


def parse(argv):
    p = argparse.ArgumentParser()
    p.add_argument("impl", choices=["torch", "dewml", "diffusers", "probe-dewml"])
    p.add_argument("--size", type=int, default=28)
    p.add_argument("--channels", type=int, default=1)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--patch", type=int, default=4)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--depth", type=int, default=6)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--process", default="")
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--ema", type=float, default=0.999)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cpu")
    p.add_argument("--solver", default="euler")
    p.add_argument("--sample-steps", type=int, default=20)
    p.add_argument("--images", type=int, default=16)
    p.add_argument("--cfg", type=float, default=2.0)
    p.add_argument("--repeats", type=int, default=3)
    a = p.parse_args(argv)
    a.process = a.process or ("vp" if a.impl == "diffusers" else "flow")
    return a


def common(a, impl: str) -> dict:
    return {"impl": impl, "device": a.device, "process": a.process,
            "config": {"size": a.size, "channels": a.channels, "classes": a.classes, "patch": a.patch, "dim": a.dim,
                       "depth": a.depth, "heads": a.heads, "batch": a.batch}}


def torch_dit(a):
    """The reference DiT (facebookresearch/DiT's architecture, fixed sin-cos positions) at the bench's sizes."""
    sys.path.insert(0, str(HERE.parent / "reference"))
    from make_diffusion_model_fixtures import DiT  # noqa: E402 - the module is found through the path above
    return DiT(a.size, a.channels, a.patch, a.dim, a.depth, a.heads, 4.0, a.classes, learned_positions=False)


# ----------------------------------------------------------------------------------------------------
# PyTorch eager training: rectified flow as dew's DiffusionObjective does it (logit-normal times, x_t =
# (1 - t) x0 + t eps, velocity target eps - x0, model time 1000 t, label dropout 0.1), AdamW, clip, EMA.
# ----------------------------------------------------------------------------------------------------

def run_torch(a) -> dict:
    import torch

    if a.threads > 0:
        torch.set_num_threads(a.threads)
    if a.process != "flow":
        raise SystemExit("torch peer: only --process flow is written out")
    base_rss = current_rss_mib()
    torch.manual_seed(a.seed)
    model = torch_dit(a)
    ema = [p.detach().clone() for p in model.parameters()]
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-4, betas=(0.9, 0.999), weight_decay=1e-4)
    generator = torch.Generator().manual_seed(a.seed + 1)
    pool = [(torch.rand(a.batch, a.channels, a.size, a.size, generator=generator) * 2 - 1,
             torch.randint(a.classes, (a.batch,), generator=generator)) for _ in range(4)]
    noise = torch.Generator().manual_seed(a.seed + 2)

    def step(i):
        x0, labels = pool[i % len(pool)]
        t = torch.sigmoid(torch.randn(a.batch, generator=noise))
        eps = torch.randn(x0.shape, generator=noise)
        drop = torch.rand(a.batch, generator=noise) < 0.1
        labels = torch.where(drop, torch.full_like(labels, a.classes), labels)
        tt = t.view(-1, 1, 1, 1)
        x_t = (1 - tt) * x0 + tt * eps
        optimizer.zero_grad(set_to_none=True)
        prediction = model(x_t, t * 1000, labels)
        loss = (prediction - (eps - x0)).pow(2).mean()
        loss.backward()
        value = loss.item()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        with torch.no_grad():
            torch._foreach_lerp_(ema, [p.detach() for p in model.parameters()], 1 - a.ema)
        return value

    times, losses = [], []
    for i in range(a.warmup + a.steps):
        start = time.perf_counter()
        losses.append(step(i))
        if i >= a.warmup:
            times.append(time.perf_counter() - start)
    step_s = statistics.median(times)
    return {**common(a, "pytorch"), "mode": "train", "threads": torch.get_num_threads(), "torch": torch.__version__,
            "parameters": sum(p.numel() for p in model.parameters()), "steps_measured": len(times),
            "step_s": step_s, "step_s_min": min(times), "steps_s": times, "images_per_s": a.batch / step_s,
            "loss_first": losses[0], "loss_last": losses[-1], "peak_rss_mib": peak_rss_mib(), "base_rss_mib": base_rss}


# ----------------------------------------------------------------------------------------------------
# diffusers: the scheduler loop (set_timesteps, scale_model_input, model, guidance, step) around the DiT.
# ----------------------------------------------------------------------------------------------------

SCHEDULERS = {  # dew solver name -> diffusers scheduler class and its options
    "ddpm": ("DDPMScheduler", {}),
    "ddim": ("DDIMScheduler", {}),
    "euler": ("EulerDiscreteScheduler", {}),
    "euler_ancestral": ("EulerAncestralDiscreteScheduler", {}),
    "heun": ("HeunDiscreteScheduler", {}),
    "dpmpp_2m": ("DPMSolverMultistepScheduler", {}),
    "dpmpp_2s": ("DPMSolverSinglestepScheduler", {}),
    "unipc": ("UniPCMultistepScheduler", {}),
    "lms": ("LMSDiscreteScheduler", {}),
    "pndm": ("PNDMScheduler", {"skip_prk_steps": True}),
}


def run_diffusers(a) -> dict:
    import diffusers
    import torch

    if a.threads > 0:
        torch.set_num_threads(a.threads)
    base_rss = current_rss_mib()
    torch.manual_seed(a.seed)
    model = torch_dit(a).eval()
    if a.process == "flow":
        if a.solver not in ("euler", "heun"):
            raise SystemExit(f"diffusers peer: flow has euler and heun, not {a.solver}")
        cls, options = ("FlowMatchEulerDiscreteScheduler" if a.solver == "euler" else "FlowMatchHeunDiscreteScheduler"), {}
    elif a.process == "vp":
        cls, options = SCHEDULERS[a.solver]
        options = {"num_train_timesteps": 1000, "beta_start": 1e-4, "beta_end": 0.02, "beta_schedule": "linear", **options}
    else:
        raise SystemExit("diffusers peer: --process vp or flow")
    scheduler = getattr(diffusers, cls)(**options)
    labels = torch.arange(a.images) % a.classes
    both = torch.cat([labels, torch.full_like(labels, a.classes)])

    @torch.inference_mode()
    def draw(seed):
        generator = torch.Generator().manual_seed(seed)
        scheduler.set_timesteps(a.sample_steps)
        x = torch.randn(a.images, a.channels, a.size, a.size, generator=generator) * scheduler.init_noise_sigma
        for t in scheduler.timesteps:
            x_in = scheduler.scale_model_input(torch.cat([x, x]), t)
            out = model(x_in, t.float().expand(2 * a.images), both)
            cond, uncond = out.chunk(2)
            x = scheduler.step(uncond + a.cfg * (cond - uncond), t, x, generator=generator).prev_sample \
                if "generator" in scheduler.step.__code__.co_varnames else \
                scheduler.step(uncond + a.cfg * (cond - uncond), t, x).prev_sample
        return x

    draw(a.seed)  # warm-up
    seconds = []
    for _ in range(a.repeats):
        start = time.perf_counter()
        draw(a.seed)
        seconds.append(time.perf_counter() - start)
    s = statistics.median(seconds)
    return {**common(a, "diffusers"), "mode": "sample", "threads": torch.get_num_threads(),
            "diffusers": diffusers.__version__, "scheduler": cls, "solver": a.solver, "sample_steps": a.sample_steps,
            "images": a.images, "cfg": a.cfg, "sample_s": s, "sample_s_all": seconds,
            "s_per_image_step": s / (a.images * a.sample_steps), "peak_rss_mib": peak_rss_mib(), "base_rss_mib": base_rss}


# ----------------------------------------------------------------------------------------------------
# dewml (JAX), through its own SimpleDiT, DiffusionObjective and Trainer
# ----------------------------------------------------------------------------------------------------

def run_dewml(a) -> dict:
    """dewml's SimpleDiT at the same sizes, trained by its DiffusionObjective (the Flow preset, EMA 0.999) and
    Trainer with optax.adamw(2e-4), as the spec's "Getting started" writes it. Two differences from the
    other two, both the original's own design: it conditions on no class (its DiffusionObjective conditions on
    text encoders, not labels; a label embedding is one row lookup per image, nothing beside the blocks), and
    its SimpleDiT uses rotary positions instead of a sin-cos table."""
    limit_jax_threads(a.threads)
    base_rss = current_rss_mib()

    import numpy as np
    import optax
    from dew import Field, InputSpec
    from dew.diffusion.presets import Flow
    from dew.nn.backbones import SimpleDiT
    from dew.objectives.diffusion import DiffusionObjective

    if a.process != "flow":
        raise SystemExit("dewml peer: only --process flow (the Flow preset) is wired")
    model = SimpleDiT(patch_size=a.patch, emb_features=a.dim, num_layers=a.depth, num_heads=a.heads,
                      output_channels=a.channels)
    objective = DiffusionObjective(model, Flow(), InputSpec(Field("image", (a.size, a.size, a.channels))),
                                   ema_decay=a.ema)
    rng = np.random.default_rng(a.seed + 1)
    pool = [{"image": rng.uniform(-1, 1, (a.batch, a.size, a.size, a.channels)).astype(np.float32)} for _ in range(4)]
    t = time_dewml_trainer(objective, optax.adamw(2e-4), pool, a.batch, a.steps, a.warmup, a.seed)
    return {**common(a, "dewml"), "mode": "train", "threads": a.threads or os.cpu_count(), **t,
            "images_per_s": a.batch / t["step_s"], "peak_rss_mib": peak_rss_mib(), "base_rss_mib": base_rss}


def main(argv) -> int:
    a = parse(argv)
    if a.impl == "probe-dewml":
        reason = probe_dewml("dew.nn.backbones", "dew.objectives.diffusion")
        print(json.dumps({"impl": "dewml", "installable": reason is None, "reason": reason}))
        return 0
    run = {"torch": run_torch, "dewml": run_dewml, "diffusers": run_diffusers}[a.impl]
    print(json.dumps(run(a)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
