"""Reference numbers for dew's diffusion solvers and timestep spacings, from PyPI diffusers 0.36.

Writes tests/fixtures/diffusion_solvers/solvers.json:
  shape, x_T        the fixed start noise [2, 1, 4, 4] (seed 0), flat
  cases[]           one sampling loop per diffusers scheduler at N = 10 steps, on the fake models
                      vp:   eps_hat(x, timestep)  = 0.5 * x + 0.1 * timestep / 1000   (prediction "epsilon")
                      flow: u_hat(x, timestep)    = 0.5 * x + 0.1 * timestep / 1000   (flow velocity)
                    which tests/diffusion_solver_test.cpp computes the same way. Each case holds:
                      name, solver (dew's name), process (vp | flow), spacing, steps, eta (when set)
                      frame     "k" when the scheduler's sample is x / alpha (Euler family, LMS): the test
                                multiplies start by alpha(t_0) to get dew's x_t; "process" otherwise
                      start     the scheduler's initial sample, x_T * init_noise_sigma, flat
                      calls     the time (dew's process time: vp timestep, flow timestep / 1000) of every
                                model call, in order
                      grid      the distinct times of `calls`: what dew's spacing must produce
                      sigmas    the scheduler's sigmas, when it has them
                      noise     every standard-normal draw the scheduler made (randn_tensor), in order, flat
                      x0        the loop's final sample, flat
  spacings[]        timesteps of diffusers' vp spacings at N = 7 (which does not divide 1000): linspace
                    (EulerDiscrete), leading and trailing (DDIM), karras (EulerDiscrete use_karras_sigmas)

Scheduler settings beyond diffusers' defaults, chosen so that every schedule ends at the clean level
(alpha = 1, sigma = 0) as dew's do, on the betas dew's vp process uses (DDPM's 1e-4 .. 0.02; HeunDiscrete's defaults
are Stable Diffusion's 0.00085 .. 0.012, so it is given DDPM's): clip_sample=False (DDPM, DDIM), set_alpha_to_one=True (PNDM, DDIM's
default), skip_prk_steps=True (PNDM), timestep_spacing="trailing" (DPMSolverMultistep, UniPC; their
"linspace" is a different N+1-point rule) and the trailing timesteps passed to DPMSolverSinglestep.

    ~/.cache/dew/venv-bench/bin/pip install -r tools/reference/requirements.txt   # the pinned versions, once
    ~/.cache/dew/venv-bench/bin/python tools/reference/make_diffusion_solver_fixtures.py
(torch 2.11 CPU, diffusers 0.36 from PyPI; scipy's quad, which LMSDiscreteScheduler imports, is stood in for by an
exact Gauss-Legendre rule because venv-bench has no scipy). Deterministic: fixed seeds, float32.
"""
import inspect
import json
import pathlib
import sys
import types

import diffusers
import numpy as np
import torch


def _quad(f, a, b, epsrel=None):
    """scipy.integrate.quad for LMSDiscreteScheduler, which needs scipy (not in venv-bench): its integrands
    are polynomials of degree <= 3, which a 20-point Gauss-Legendre rule integrates exactly, as quad does."""
    nodes, weights = np.polynomial.legendre.leggauss(20)
    return (0.5 * (b - a) * sum(w * f(0.5 * (b - a) * x + 0.5 * (a + b)) for x, w in zip(nodes, weights)), 0.0)


sys.modules["scipy"] = types.ModuleType("scipy")
sys.modules["scipy"].__path__ = []
sys.modules["scipy.integrate"] = sys.modules["scipy"].integrate = types.SimpleNamespace(quad=_quad)
sys.modules["scipy.stats"] = sys.modules["scipy"].stats = types.SimpleNamespace()  # beta sigmas only: unused

from diffusers.schedulers.scheduling_lms_discrete import LMSDiscreteScheduler  # noqa: E402
from diffusers.schedulers import (scheduling_ddim  # noqa: E402
                                  , scheduling_ddpm, scheduling_euler_ancestral_discrete)

OUT = pathlib.Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "diffusion_solvers"
SHAPE = (2, 1, 4, 4)
STEPS = 10
TRAILING = [999 - 100 * i for i in range(STEPS)]

DRAWS = []


def recording_randn(shape, generator=None, device=None, dtype=None, layout=None):
    z = torch.randn(shape, generator=generator, dtype=dtype or torch.float32)
    DRAWS.append(z.flatten().tolist())
    return z


for module in (scheduling_ddim, scheduling_ddpm, scheduling_euler_ancestral_discrete):
    module.randn_tensor = recording_randn


def fake_model(x, timestep):
    return 0.5 * x + 0.1 * (torch.as_tensor(timestep, dtype=torch.float32) / 1000)


def flat(t):
    return [float(v) for v in t.flatten().tolist()]


def run(name, solver, process, spacing, scheduler, frame, x_T, set_kwargs=None, eta=None):
    DRAWS.clear()
    scheduler.set_timesteps(**(set_kwargs or {"num_inference_steps": STEPS}))
    generator = torch.Generator().manual_seed(1)
    x = x_T * getattr(scheduler, "init_noise_sigma", 1.0)
    start = x.clone()
    calls = []
    for t in scheduler.timesteps:
        model_input = scheduler.scale_model_input(x, t) if hasattr(scheduler, "scale_model_input") else x
        calls.append(float(t) / (1000.0 if process == "flow" else 1.0))
        out = fake_model(model_input, t)
        kwargs = {"generator": generator} if "generator" in inspect.signature(scheduler.step).parameters else {}
        if eta is not None:
            kwargs["eta"] = eta
        x = scheduler.step(out, t, x, **kwargs).prev_sample
    case = {"name": name, "solver": solver, "process": process, "spacing": spacing, "steps": STEPS, "frame": frame,
            "start": flat(start), "calls": calls, "grid": list(dict.fromkeys(calls)), "noise": list(DRAWS), "x0": flat(x)}
    if eta is not None:
        case["eta"] = eta
    if hasattr(scheduler, "sigmas") and scheduler.sigmas is not None:
        case["sigmas"] = flat(scheduler.sigmas)
    return case


def main():
    x_T = torch.randn(SHAPE, generator=torch.Generator().manual_seed(0))
    S = diffusers
    cases = [
        run("ddpm", "ddpm", "vp", "leading", S.DDPMScheduler(clip_sample=False), "process", x_T),
        run("ddim_eta0", "ddim", "vp", "leading", S.DDIMScheduler(clip_sample=False), "process", x_T, eta=0.0),
        run("ddim_eta1", "ddim", "vp", "leading", S.DDIMScheduler(clip_sample=False), "process", x_T, eta=1.0),
        run("euler", "euler", "vp", "linspace", S.EulerDiscreteScheduler(), "k", x_T),
        run("euler_karras", "euler", "vp", "karras", S.EulerDiscreteScheduler(use_karras_sigmas=True), "k", x_T),
        run("euler_ancestral", "euler_ancestral", "vp", "linspace", S.EulerAncestralDiscreteScheduler(), "k", x_T),
        run("heun", "heun", "vp", "linspace", S.HeunDiscreteScheduler(beta_start=1e-4, beta_end=0.02), "k", x_T),
        run("dpmpp_2m", "dpmpp_2m", "vp", "trailing",
            S.DPMSolverMultistepScheduler(algorithm_type="dpmsolver++", solver_order=2, timestep_spacing="trailing"),
            "process", x_T),
        run("dpmpp_2s", "dpmpp_2s", "vp", "trailing",
            S.DPMSolverSinglestepScheduler(algorithm_type="dpmsolver++", solver_order=2), "process", x_T,
            set_kwargs={"timesteps": TRAILING}),
        run("unipc", "unipc", "vp", "trailing",
            S.UniPCMultistepScheduler(solver_type="bh2", solver_order=2, timestep_spacing="trailing"), "process", x_T),
        run("lms", "lms", "vp", "linspace", LMSDiscreteScheduler(), "k", x_T),
        run("pndm", "pndm", "vp", "leading", S.PNDMScheduler(skip_prk_steps=True, set_alpha_to_one=True), "process", x_T),
        run("flow_euler", "euler", "flow", "linspace", S.FlowMatchEulerDiscreteScheduler(), "process", x_T),
        run("flow_heun", "heun", "flow", "linspace", S.FlowMatchHeunDiscreteScheduler(), "process", x_T),
    ]
    spacings = []
    for spacing, scheduler in [("linspace", S.EulerDiscreteScheduler()),
                               ("leading", S.DDIMScheduler()),
                               ("trailing", S.DDIMScheduler(timestep_spacing="trailing")),
                               ("karras", S.EulerDiscreteScheduler(use_karras_sigmas=True))]:
        scheduler.set_timesteps(7)
        spacings.append({"process": "vp", "spacing": spacing, "steps": 7, "t": flat(scheduler.timesteps.double())})
    OUT.mkdir(parents=True, exist_ok=True)
    doc = {"shape": list(SHAPE), "x_T": flat(x_T), "cases": cases, "spacings": spacings}
    (OUT / "solvers.json").write_text(json.dumps(doc, separators=(",", ":")) + "\n")
    print(f"wrote {OUT / 'solvers.json'}: {len(cases)} cases")


if __name__ == "__main__":
    main()
