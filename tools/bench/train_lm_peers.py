"""Peers for bench/train_lm.sh: the same decoder LM, batch and optimizer as bench/train_lm_bench.cpp.

    python train_lm_peers.py torch [flags]   # PyTorch eager, the architecture written out below
    python train_lm_peers.py dewml [flags]   # the JAX original, dewml, through its own Trainer
    python train_lm_peers.py probe-dewml     # prints whether dewml imports here, and why not

Each run prints one JSON line like train_lm_bench's: median tokens/s over the measured steps (after
--warmup steps), peak RSS of this process (run each peer in its own process), loss of the first and last
step. Flags match train_lm_bench: --vocab --emb --layers --heads --kv-heads --mlp-features --seq --batch
--max-seq-len --dtype --device --steps --warmup --threads --seed.

Data parallel, as train_lm_bench under `dew launch` (bench/ddp.sh): the torch peer started by torchrun,

    python -m torch.distributed.run --standalone --nproc_per_node N train_lm_peers.py torch --threads T [flags]

sees WORLD_SIZE > 1 and becomes one rank of torch.nn.parallel.DistributedDataParallel on the gloo backend:
each rank trains on its consecutive --batch / N rows of the same global batch one process draws, and rank 0
alone prints the JSON line, with "processes": N, global tokens/s (--batch x seq / rank 0's median step),
the loss averaged over the ranks, and "peak_rss_mib_ranks" (every rank's peak RSS).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time

from peer_support import current_rss_mib, limit_jax_threads, peak_rss_mib, probe_dewml, time_dewml_trainer


def parse(argv):
    p = argparse.ArgumentParser()
    p.add_argument("impl", choices=["torch", "dewml", "probe-dewml"])
    p.add_argument("--vocab", type=int, default=4096)
    p.add_argument("--emb", type=int, default=256)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--kv-heads", type=int, default=0)
    p.add_argument("--mlp-features", type=int, default=1024)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--max-seq-len", type=int, default=0)
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    p.add_argument("--device", default="cpu")
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--phases", action="store_true", help="torch only: median time of each phase of the step")
    p.add_argument("--profile", action="store_true", help="torch only: print the top ops of one more step")
    a = p.parse_args(argv)
    a.kv_heads = a.kv_heads or a.heads
    a.max_seq_len = a.max_seq_len or max(256, a.seq)
    return a


def cosine_lr(step: int, total: int, peak: float = 3e-4, final_fraction: float = 0.1) -> float:
    """dew's cosine schedule with no warmup: peak at step 0 down to final_fraction * peak at the end."""
    progress = min(step / max(total, 1), 1.0)
    return peak * (final_fraction + (1 - final_fraction) * 0.5 * (1 + math.cos(math.pi * progress)))


# ----------------------------------------------------------------------------------------------------
# PyTorch eager
# ----------------------------------------------------------------------------------------------------

def run_torch(a) -> dict:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    if a.threads > 0:
        torch.set_num_threads(a.threads)
    base_rss = current_rss_mib()
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = 0
    if world > 1:
        import torch.distributed as dist
        dist.init_process_group("gloo")  # env:// (torchrun's MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE)
        rank = dist.get_rank()
        if a.batch % world:
            raise SystemExit(f"--batch {a.batch} is not a multiple of the {world} processes")
    device = torch.device(a.device)
    compute = torch.bfloat16 if a.dtype == "bfloat16" else torch.float32
    head_dim = a.emb // a.heads

    class RMSNorm(nn.Module):
        def __init__(self, features, eps=1e-6):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(features))
            self.eps = eps

        def forward(self, x):  # as transformers' LlamaRMSNorm: fp32 statistics
            dtype = x.dtype
            x = x.float()
            x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
            return self.weight * x.to(dtype)

    def rotate_half(x):
        half = x.shape[-1] // 2
        return torch.cat((-x[..., half:], x[..., :half]), dim=-1)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.input_layernorm = RMSNorm(a.emb)
            self.q_proj = nn.Linear(a.emb, a.heads * head_dim, bias=False)
            self.k_proj = nn.Linear(a.emb, a.kv_heads * head_dim, bias=False)
            self.v_proj = nn.Linear(a.emb, a.kv_heads * head_dim, bias=False)
            self.o_proj = nn.Linear(a.heads * head_dim, a.emb, bias=False)
            self.q_norm = RMSNorm(head_dim)
            self.k_norm = RMSNorm(head_dim)
            self.post_attention_layernorm = RMSNorm(a.emb)
            self.gate_proj = nn.Linear(a.emb, a.mlp_features, bias=False)
            self.up_proj = nn.Linear(a.emb, a.mlp_features, bias=False)
            self.down_proj = nn.Linear(a.mlp_features, a.emb, bias=False)

        def forward(self, x, cos, sin):
            B, S, _ = x.shape
            h = self.input_layernorm(x)
            q = self.q_norm(self.q_proj(h).view(B, S, a.heads, head_dim)).transpose(1, 2)
            k = self.k_norm(self.k_proj(h).view(B, S, a.kv_heads, head_dim)).transpose(1, 2)
            v = self.v_proj(h).view(B, S, a.kv_heads, head_dim).transpose(1, 2)
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=a.kv_heads != a.heads)
            x = x + self.o_proj(o.transpose(1, 2).reshape(B, S, a.heads * head_dim))
            h = self.post_attention_layernorm(x)
            return x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))

    class Decoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed_tokens = nn.Embedding(a.vocab, a.emb)
            self.layers = nn.ModuleList(Block() for _ in range(a.layers))
            self.norm = RMSNorm(a.emb)
            inv_freq = 1.0 / (10000.0 ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
            freqs = torch.outer(torch.arange(a.max_seq_len, dtype=torch.float32), inv_freq)
            emb = torch.cat((freqs, freqs), dim=-1)
            self.register_buffer("cos", emb.cos(), persistent=False)
            self.register_buffer("sin", emb.sin(), persistent=False)
            for name, p in self.named_parameters():
                if p.dim() >= 2:
                    std = 0.02 / math.sqrt(2 * a.layers) if name.endswith(("o_proj.weight", "down_proj.weight")) else 0.02
                    nn.init.normal_(p, std=std)

        def forward(self, ids, targets):
            S = ids.shape[1]
            cos, sin = self.cos[:S].to(compute), self.sin[:S].to(compute)
            x = self.embed_tokens(ids)
            for layer in self.layers:
                x = layer(x, cos, sin)
            x = self.norm(x)
            logits = F.linear(x, self.embed_tokens.weight).float()  # tied output projection
            return F.cross_entropy(logits.view(-1, a.vocab), targets.reshape(-1))

    torch.manual_seed(a.seed)
    model = Decoder().to(device)
    parameter_count = sum(p.numel() for p in model.parameters())
    if world > 1:
        # PyTorch's defaults (25 MiB buckets, gradients copied out of the buckets) except broadcast_buffers:
        # the only buffers are the constant RoPE tables, which dew does not send either.
        model = torch.nn.parallel.DistributedDataParallel(model, broadcast_buffers=False)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                                  lr=3e-4, betas=(0.9, 0.95), eps=1e-8)
    total = a.warmup + a.steps
    generator = torch.Generator().manual_seed(a.seed + 1)
    pool = [torch.randint(a.vocab, (a.batch, a.seq + 1), generator=generator).to(device) for _ in range(4)]
    mine = a.batch // world  # this rank's consecutive rows of each global batch
    pool = [rows[rank * mine:(rank + 1) * mine].contiguous() for rows in pool]

    phases = {}

    def step(i):
        t0 = time.perf_counter()
        rows = pool[i % len(pool)]
        for g in optimizer.param_groups:
            g["lr"] = cosine_lr(i, total)
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=compute, enabled=compute != torch.float32):
            loss = model(rows[:, :-1], rows[:, 1:])
        t1 = time.perf_counter()
        loss.backward()
        value = loss.item()  # synchronizes, as dew's step does
        t2 = time.perf_counter()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        t3 = time.perf_counter()
        optimizer.step()
        t4 = time.perf_counter()
        if a.phases and i >= a.warmup:
            for name, d in (("forward_loss_s", t1 - t0), ("backward_s", t2 - t1), ("scale_clip_s", t3 - t2),
                            ("optimizer_s", t4 - t3)):
                phases.setdefault(name, []).append(d)
        return value

    times, losses = [], []
    for i in range(total):
        t = time.perf_counter()
        losses.append(step(i))
        if device.type == "cuda":
            torch.cuda.synchronize()
        if i >= a.warmup:
            times.append(time.perf_counter() - t)

    if a.profile:
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            step(total)
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=30), file=sys.stderr)

    step_s = statistics.median(times)
    rss = peak_rss_mib()
    rss_ranks = [rss]
    if world > 1:  # after the timed steps: the global loss of every step and every rank's peak RSS, one sum each
        import torch.distributed as dist
        total = torch.tensor(losses, dtype=torch.float64)
        dist.all_reduce(total)
        losses = (total / world).tolist()
        ranks = torch.zeros(world, dtype=torch.float64)
        ranks[rank] = rss
        dist.all_reduce(ranks)
        rss_ranks = ranks.tolist()
        dist.destroy_process_group()
        if rank != 0:
            return None
    out = {"impl": "pytorch", "mode": "eager-ddp" if world > 1 else "eager", "processes": world,
           "threads": torch.get_num_threads(), "device": str(device), "dtype": a.dtype, "torch": torch.__version__,
           "parameters": parameter_count, "steps_measured": len(times),
           "step_s": step_s, "step_s_min": min(times), "tokens_per_s": a.batch * a.seq / step_s, "steps_s": times,
           "loss_first": losses[0], "loss_last": losses[-1], "peak_rss_mib": rss, "base_rss_mib": base_rss,
           "peak_rss_mib_ranks": rss_ranks}
    for name, values in phases.items():
        out[name] = statistics.median(values)
    if device.type == "cuda":
        out["peak_device_mib"] = torch.cuda.max_memory_allocated() / 2**20
    return out


# ----------------------------------------------------------------------------------------------------
# dewml (JAX), through its own CausalTransformer, LMObjective and Trainer
# ----------------------------------------------------------------------------------------------------

def run_dewml(a) -> dict:
    limit_jax_threads(a.threads)
    base_rss = current_rss_mib()

    import jax
    import jax.numpy as jnp
    import numpy as np
    from dew.config import OptimConfig
    from dew.nn.backbones.causal_transformer import CausalTransformer
    from dew.objectives.lm import LMObjective
    from dew.training.optim import Cosine

    if a.device != "cpu":
        jax.config.update("jax_platforms", a.device)
    model = CausalTransformer(vocab_size=a.vocab, emb_features=a.emb, num_layers=a.layers, num_heads=a.heads,
                              num_kv_heads=a.kv_heads, mlp="swiglu", mlp_features=a.mlp_features,
                              max_seq_len=a.max_seq_len, rope_theta=10000.0, norm_eps=1e-6, qk_norm=True,
                              tie_embeddings=True, dtype=jnp.bfloat16 if a.dtype == "bfloat16" else jnp.float32)
    objective = LMObjective(model, seq_len=a.seq, token_accuracy=False)
    total = a.warmup + a.steps
    optim = OptimConfig(optimizer="adamw", learning_rate=3e-4,
                        schedule=Cosine(peak=3e-4, warmup_steps=0, init=3e-4, end=3e-5),
                        weight_decay=0.1, b1=0.9, b2=0.95, clip_grads=1.0)
    rng = np.random.default_rng(a.seed + 1)
    pool = [{"text": rng.integers(0, a.vocab, (a.batch, a.seq + 1), dtype=np.int32)} for _ in range(4)]
    t = time_dewml_trainer(objective, optim, pool, a.batch, a.steps, a.warmup, a.seed)
    return {"impl": "dewml", "mode": "jax-jit", "threads": a.threads or os.cpu_count(), "device": a.device,
            "dtype": a.dtype, **t, "tokens_per_s": a.batch * a.seq / t["step_s"],
            "peak_rss_mib": peak_rss_mib(), "base_rss_mib": base_rss}


def main(argv) -> int:
    a = parse(argv)
    if a.impl == "probe-dewml":
        reason = probe_dewml("dew.nn.backbones.causal_transformer")
        print(json.dumps({"impl": "dewml", "installable": reason is None, "reason": reason}))
        return 0
    out = run_torch(a) if a.impl == "torch" else run_dewml(a)
    if out is not None:  # None: a rank other than 0 of a data-parallel run
        print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
