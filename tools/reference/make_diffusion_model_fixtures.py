"""Reference numbers for dew's image diffusion networks (src/dew/nn/diffusion/): DiT and UNet.

DiT: the architecture of facebookresearch/DiT (models.py: PatchEmbed, TimestepEmbedder, LabelEmbedder with a
CFG row, adaLN-Zero DiTBlocks, FinalLayer, unpatchify, fixed 2-D sin-cos positions), written out below with
its parameter names. UNet: diffusers' own UNet2DModel (DownBlock2D/AttnDownBlock2D, UNetMidBlock2D,
AttnUpBlock2D/UpBlock2D, num_class_embeds), an implementation independent of dew's.

Tiny sizes on 1x8x8 images, 10 classes (+ the "no label" row): DiT dim 32, depth 2, heads 2, patch 2;
UNet base 8, channel_mult (1, 2), attention at 4x4 (and in the middle), 4 groups, 8 channels per head.
Weights are random and non-zero (DiT's zero inits are replaced; GroupNorm scales/shifts perturbed) so that
every parameter matters to the output. Writes under tests/fixtures/diffusion_models/:
  models.json                  per model: the dew ImageModelConfig, parameter count, forward FLOPs per image
                               (torch.utils.flop_counter), the input shapes and the parameters in grads
  {dit,unet}.safetensors       the weights, float32, under dew's (= the reference's) parameter names
  {dit,unet}_io.safetensors    x [3,1,8,8], time [3], labels [3] (one is the null class 10), w [3,1,8,8],
                               out = model(x, time, labels), grad.x = d sum(out * w) / dx, and grad.<name>
                               for a few parameters; dit_io also pos_table, DiT's 2-D sin-cos table [16, 32]
The reference runs in float64 on the float32 weights and inputs (the time features too: diffusers computes
them in float32), so the stored outputs are float64 truths rounded once to float32; the C++ test measures
dew's float32 arithmetic against them.

    ~/.cache/dew/venv-bench/bin/pip install -r tools/reference/requirements.txt   # the pinned versions, once
    ~/.cache/dew/venv-bench/bin/python tools/reference/make_diffusion_model_fixtures.py
(torch 2.11 and diffusers 0.36 from PyPI). Deterministic: fixed seeds, CPU.
"""
import json
import math
import pathlib

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from diffusers import UNet2DModel
from safetensors.torch import save_file
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

OUT = pathlib.Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "diffusion_models"
NUM_CLASSES, SIZE, CHANNELS, BATCH = 10, 8, 1, 3


def timestep_features(t, dim, max_period=10000):
    """[cos(t f), sin(t f)], f_i = max_period^(-i/half), in float64 (DiT's formula; diffusers' with flip and shift 0)."""
    half = dim // 2
    freqs = torch.exp(-math.log(max_period) * torch.arange(half, dtype=torch.float64) / half)
    args = t.to(torch.float64)[:, None] * freqs[None]
    emb = torch.cat([torch.cos(args), torch.sin(args)], dim=-1)
    if dim % 2:
        emb = torch.cat([emb, torch.zeros_like(emb[:, :1])], dim=-1)
    return emb


# ---- DiT, as facebookresearch/DiT models.py writes it (learn_sigma off, no dropout) ----
def modulate(x, shift, scale):
    return x * (1 + scale.unsqueeze(1)) + shift.unsqueeze(1)


def sincos_2d(dim, grid):
    grid_h = np.arange(grid, dtype=np.float32)
    grid_w = np.arange(grid, dtype=np.float32)
    g = np.stack(np.meshgrid(grid_w, grid_h), axis=0).reshape(2, 1, grid, grid)

    def one_d(d, pos):
        omega = np.arange(d // 2, dtype=np.float64) / (d / 2.0)
        omega = 1.0 / 10000**omega
        out = np.einsum("m,d->md", pos.reshape(-1), omega)
        return np.concatenate([np.sin(out), np.cos(out)], axis=1)

    return np.concatenate([one_d(dim // 2, g[0]), one_d(dim // 2, g[1])], axis=1)


class PatchEmbed(nn.Module):
    def __init__(self, channels, dim, patch):
        super().__init__()
        self.proj = nn.Conv2d(channels, dim, patch, stride=patch)

    def forward(self, x):
        return self.proj(x).flatten(2).transpose(1, 2)


class TimestepEmbedder(nn.Module):
    def __init__(self, dim, freq=256):
        super().__init__()
        self.freq = freq
        self.mlp = nn.Sequential(nn.Linear(freq, dim), nn.SiLU(), nn.Linear(dim, dim))

    def forward(self, t):
        return self.mlp(timestep_features(t, self.freq).to(self.mlp[0].weight.dtype))


class LabelEmbedder(nn.Module):
    def __init__(self, num_classes, dim):
        super().__init__()
        self.embedding_table = nn.Embedding(num_classes + 1, dim)  # the last row: no label (CFG)

    def forward(self, labels):
        return self.embedding_table(labels)


class Attention(nn.Module):  # timm's Attention with qkv_bias=True
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.heads, C // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        x = F.scaled_dot_product_attention(q, k, v)
        return self.proj(x.transpose(1, 2).reshape(B, N, C))


class Mlp(nn.Module):  # timm's Mlp with GELU(tanh)
    def __init__(self, dim, hidden):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x), approximate="tanh"))


class DiTBlock(nn.Module):
    def __init__(self, dim, heads, mlp_ratio):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.attn = Attention(dim, heads)
        self.norm2 = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.mlp = Mlp(dim, int(dim * mlp_ratio))
        self.adaLN_modulation = nn.Sequential(nn.SiLU(), nn.Linear(dim, 6 * dim))

    def forward(self, x, c):
        shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp = self.adaLN_modulation(c).chunk(6, dim=1)
        x = x + gate_msa.unsqueeze(1) * self.attn(modulate(self.norm1(x), shift_msa, scale_msa))
        return x + gate_mlp.unsqueeze(1) * self.mlp(modulate(self.norm2(x), shift_mlp, scale_mlp))


class FinalLayer(nn.Module):
    def __init__(self, dim, patch, channels):
        super().__init__()
        self.norm_final = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.linear = nn.Linear(dim, patch * patch * channels)
        self.adaLN_modulation = nn.Sequential(nn.SiLU(), nn.Linear(dim, 2 * dim))

    def forward(self, x, c):
        shift, scale = self.adaLN_modulation(c).chunk(2, dim=1)
        return self.linear(modulate(self.norm_final(x), shift, scale))


class DiT(nn.Module):
    def __init__(self, size, channels, patch, dim, depth, heads, mlp_ratio, num_classes, learned_positions):
        super().__init__()
        self.channels, self.patch = channels, patch
        self.x_embedder = PatchEmbed(channels, dim, patch)
        self.t_embedder = TimestepEmbedder(dim)
        self.y_embedder = LabelEmbedder(num_classes, dim)
        table = torch.from_numpy(sincos_2d(dim, size // patch)).float().unsqueeze(0)
        if learned_positions:
            self.pos_embed = nn.Parameter(table)
        else:
            self.register_buffer("pos_embed", table)
        self.blocks = nn.ModuleList([DiTBlock(dim, heads, mlp_ratio) for _ in range(depth)])
        self.final_layer = FinalLayer(dim, patch, channels)

    def unpatchify(self, x):
        c, p = self.channels, self.patch
        h = w = int(x.shape[1] ** 0.5)
        x = x.reshape(x.shape[0], h, w, p, p, c)
        x = torch.einsum("nhwpqc->nchpwq", x)
        return x.reshape(x.shape[0], c, h * p, h * p)

    def forward(self, x, t, y):
        x = self.x_embedder(x) + self.pos_embed
        c = self.t_embedder(t) + self.y_embedder(y)
        for block in self.blocks:
            x = block(x, c)
        return self.unpatchify(self.final_layer(x, c))


DIT = dict(kind="dit", image_size=SIZE, channels=CHANNELS, num_classes=NUM_CLASSES, dtype="float32", patch_size=2,
           dim=32, depth=2, heads=2, mlp_ratio=4.0, positions="learned")
UNET = dict(kind="unet", image_size=SIZE, channels=CHANNELS, num_classes=NUM_CLASSES, dtype="float32",
            base_channels=8, channel_mult=[1, 2], res_blocks=2, attention_resolutions=[4], head_channels=8, groups=4,
            dropout=0.0)


def build_dit():
    torch.manual_seed(10)
    model = DiT(SIZE, CHANNELS, DIT["patch_size"], DIT["dim"], DIT["depth"], DIT["heads"], DIT["mlp_ratio"],
                NUM_CLASSES, learned_positions=True)
    with torch.no_grad():  # DiT zeroes the adaLN and output layers; random values make them count
        for name, p in model.named_parameters():
            if "adaLN_modulation" in name or name.startswith("final_layer.linear"):
                p.copy_(0.2 * torch.randn_like(p))
            if name == "pos_embed":
                p.add_(0.1 * torch.randn_like(p))
            if name.endswith(".bias"):
                p.copy_(0.1 * torch.randn_like(p))
    return model


def build_unet():
    torch.manual_seed(20)
    model = UNet2DModel(sample_size=SIZE, in_channels=CHANNELS, out_channels=CHANNELS, block_out_channels=(8, 16),
                        down_block_types=("DownBlock2D", "AttnDownBlock2D"),
                        up_block_types=("AttnUpBlock2D", "UpBlock2D"), layers_per_block=UNET["res_blocks"],
                        norm_num_groups=UNET["groups"], norm_eps=1e-5, attention_head_dim=UNET["head_channels"],
                        num_class_embeds=NUM_CLASSES + 1, add_attention=True, dropout=0.0,
                        time_embedding_type="positional", flip_sin_to_cos=True, freq_shift=0)
    with torch.no_grad():  # GroupNorm starts at the identity: perturb it so a misplaced norm shows
        for name, p in model.named_parameters():
            if "norm" in name:
                p.add_(0.1 * torch.randn_like(p))
            if name.endswith(".bias"):
                p.copy_(0.1 * torch.randn_like(p))
    # diffusers computes the time features in float32 whatever the model's dtype; use the float64 ones.
    model.time_proj.forward = lambda t: timestep_features(t, UNET["base_channels"])
    return model


def run_unet(model, x, t, y):
    return model(x, t, class_labels=y).sample


def write(name, model, run, config, grad_names, time):
    torch.manual_seed(30)
    weights = {k: v.detach().clone().float().contiguous() for k, v in model.named_parameters()}
    x = torch.randn(BATCH, CHANNELS, SIZE, SIZE)
    labels = torch.tensor([3, NUM_CLASSES, 0])
    w = torch.randn(BATCH, CHANNELS, SIZE, SIZE)

    # The math backend spells attention as matmuls, which the counter sees (it has no rule for the CPU kernel).
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        run(model, x[:1], time[:1], labels[:1])
    flops = counter.get_total_flops()

    model = model.double()
    x64 = x.double().requires_grad_(True)
    out = run(model, x64, time.double(), labels)
    (out * w.double()).sum().backward()
    params = dict(model.named_parameters())
    io = {"x": x, "time": time, "labels": labels, "w": w, "out": out.detach().float(), "grad.x": x64.grad.float()}
    if name == "dit":
        io["pos_table"] = torch.from_numpy(sincos_2d(DIT["dim"], SIZE // DIT["patch_size"])).float()
    for g in grad_names:
        io["grad." + g] = params[g].grad.float().contiguous()
    save_file(weights, str(OUT / f"{name}.safetensors"))
    save_file(io, str(OUT / f"{name}_io.safetensors"))
    return {"config": config, "parameter_count": sum(v.numel() for v in weights.values()), "forward_flops": flops,
            "parameters": sorted(weights), "grads": grad_names}


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    summary = {
        "dit": write("dit", build_dit(), lambda m, x, t, y: m(x, t, y), DIT,
                     ["x_embedder.proj.weight", "pos_embed", "t_embedder.mlp.0.weight", "y_embedder.embedding_table.weight",
                      "blocks.0.attn.qkv.weight", "blocks.1.mlp.fc1.bias", "blocks.0.adaLN_modulation.1.weight",
                      "final_layer.linear.weight", "final_layer.adaLN_modulation.1.bias"],
                     torch.tensor([-1.2, 250.5, 999.0])),
        "unet": write("unet", build_unet(), run_unet, UNET,
                      ["conv_in.weight", "time_embedding.linear_1.weight", "class_embedding.weight",
                       "down_blocks.0.resnets.0.conv1.weight", "down_blocks.1.attentions.1.to_q.weight",
                       "down_blocks.0.downsamplers.0.conv.weight", "mid_block.attentions.0.group_norm.weight",
                       "up_blocks.0.resnets.2.conv_shortcut.weight", "up_blocks.0.upsamplers.0.conv.bias",
                       "up_blocks.1.resnets.0.norm1.bias", "conv_out.weight"],
                      torch.tensor([-1.2, 250.5, 999.0])),
    }
    (OUT / "models.json").write_text(json.dumps(summary, indent=1) + "\n")
    for name, s in summary.items():
        print(name, s["parameter_count"], "parameters,", s["forward_flops"], "forward FLOPs per image")


if __name__ == "__main__":
    main()
