"""Reference tables for dew's noise processes (src/dew/processes/noise_process.h), from diffusers.

Writes tests/fixtures/diffusion_process/process.json holding:
  ddpm_linear       DDPMScheduler(beta_schedule="linear") alphas_cumprod, for the defaults (T=1000,
                    1e-4..0.02) and for T=100, 1e-3..0.05 (so the fields are seen to matter)
  ddpm_cosine       DDPMScheduler(beta_schedule="squaredcos_cap_v2") alphas_cumprod, T=1000 and T=50
  ddpm_add_noise    DDPMScheduler (linear, T=1000).add_noise on fixed x0, eps [3,1,2,2] at timesteps 0, 499, 999
  flow_shift        FlowMatchEulerDiscreteScheduler(shift=3).sigmas (T=1000) and its scale_noise on fixed
                    x0, eps at three of those sigmas
  euler_karras      EulerDiscreteScheduler (linear, T=1000, use_karras_sigmas=True).set_timesteps(10):
                    its sigmas (the last 0 dropped) and timesteps (k-diffusion's sigma_to_t on diffusers'
                    float32 log-sigma table), and the same sigma_to_t on a float64 table (dew's precision)
Every float is written with repr() (exact for doubles; the float32 tables are exact in float64).

    ~/.cache/dew/venv-bench/bin/pip install -r tools/reference/requirements.txt   # the pinned versions, once
    ~/.cache/dew/venv-bench/bin/python tools/reference/make_diffusion_process_fixtures.py
(diffusers 0.36, torch 2.11 on the CPU). Deterministic: fixed inputs, no randomness.
"""
import json
import pathlib

import numpy as np
import torch
from diffusers import DDPMScheduler, EulerDiscreteScheduler, FlowMatchEulerDiscreteScheduler

OUT = pathlib.Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "diffusion_process"


def floats(t):
    return [float(v) for v in torch.as_tensor(t).reshape(-1).tolist()]


def fixed(shape, offset):
    # Deterministic, varied values without a random generator: sin of a ramp.
    n = int(np.prod(shape))
    return torch.sin(torch.arange(n, dtype=torch.float32) * 1.7 + offset).reshape(shape)


def sigma_to_t(sigma, log_sigmas):
    # diffusers' EulerDiscreteScheduler._sigma_to_t (k-diffusion's DiscreteSchedule.sigma_to_t).
    log_sigma = np.log(np.maximum(sigma, 1e-10))
    dists = log_sigma - log_sigmas[:, np.newaxis]
    low_idx = np.cumsum((dists >= 0), axis=0).argmax(axis=0).clip(max=log_sigmas.shape[0] - 2)
    high_idx = low_idx + 1
    low, high = log_sigmas[low_idx], log_sigmas[high_idx]
    w = np.clip((low - log_sigma) / (low - high), 0, 1)
    return ((1 - w) * low_idx + w * high_idx).reshape(sigma.shape)


def main():
    out = {}
    out["ddpm_linear"] = []
    for T, b0, b1 in [(1000, 1e-4, 0.02), (100, 1e-3, 0.05)]:
        s = DDPMScheduler(num_train_timesteps=T, beta_start=b0, beta_end=b1, beta_schedule="linear")
        out["ddpm_linear"].append({"train_steps": T, "beta_start": b0, "beta_end": b1, "alphas_cumprod": floats(s.alphas_cumprod)})
    out["ddpm_cosine"] = []
    for T in [1000, 50]:
        s = DDPMScheduler(num_train_timesteps=T, beta_schedule="squaredcos_cap_v2")
        out["ddpm_cosine"].append({"train_steps": T, "alphas_cumprod": floats(s.alphas_cumprod)})

    s = DDPMScheduler(num_train_timesteps=1000, beta_schedule="linear")
    x0, eps = fixed([3, 1, 2, 2], 0.3), fixed([3, 1, 2, 2], 2.1)
    steps = torch.tensor([0, 499, 999])
    out["ddpm_add_noise"] = {"shape": [3, 1, 2, 2], "x0": floats(x0), "eps": floats(eps), "timesteps": [0, 499, 999],
                             "x_t": floats(s.add_noise(x0, eps, steps))}

    f = FlowMatchEulerDiscreteScheduler(num_train_timesteps=1000, shift=3.0)
    # The unshifted times behind f.sigmas: linspace(1, T, T)[::-1] / T, as float32.
    unshifted = torch.from_numpy(np.linspace(1, 1000, 1000, dtype=np.float32)[::-1].copy()) / 1000
    picks = [0, 500, 999]
    timesteps = f.timesteps[picks]
    out["flow_shift"] = {"shift": 3.0, "unshifted": floats(unshifted), "sigmas": floats(f.sigmas),
                         "shape": [3, 1, 2, 2], "x0": floats(x0), "eps": floats(eps), "picks": picks,
                         "x_t": floats(f.scale_noise(x0, timesteps, eps))}

    e = EulerDiscreteScheduler(num_train_timesteps=1000, beta_schedule="linear", use_karras_sigmas=True)
    e.set_timesteps(10)
    sig = e.sigmas[:-1].double().numpy()
    ac64 = e.alphas_cumprod.double().numpy()
    log_sigmas64 = np.log(((1 - ac64) / ac64) ** 0.5)
    out["euler_karras"] = {"steps": 10, "sigmas": floats(torch.from_numpy(sig)), "timesteps": floats(e.timesteps),
                           "timesteps_float64": [float(sigma_to_t(np.array([v]), log_sigmas64)[0]) for v in sig]}

    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "process.json").write_text(json.dumps(out) + "\n")
    print("wrote", OUT / "process.json")


if __name__ == "__main__":
    main()
