"""Reference masks for dew's I-JEPA multi-block mask sampler (src/dew/objectives/jepa/multiblock_mask.h).

The logic is I-JEPA's MaskCollator (facebookresearch/ijepa, src/masks/multiblock.py), rewritten here with one
change: every draw comes from the one seeded torch.Generator (the original draws block positions from torch's
global generator), so that dew, drawing the same numbers from LibTorch's CPU generator with the same seed,
must produce the same masks index for index. Kept from the original on purpose:
  - one block size per batch for the targets (scale and aspect ratio from one uniform draw) and one for the
    context (aspect 1), drawn first;
  - a block's top-left corner from randint(0, H - h), i.e. in [0, H - h - 1]: blocks never touch the last
    row or column;
  - the context block is restricted to the complement of every target block, and after 20 failed tries to
    keep more than min_keep patches it drops the last target's restriction, then the next, ...;
  - every mask of a batch is cut to the batch's smallest count of its kind (so they collate).

Writes tests/fixtures/jepa/masks.json: for each case its settings, the seed, and per sample the context
mask(s) and the target masks (flat patch indices in row-major order).

    ~/.cache/dew/venv-bench/bin/pip install -r tools/reference/requirements.txt   # the pinned versions, once
    ~/.cache/dew/venv-bench/bin/python tools/reference/make_jepa_mask_fixtures.py
"""
import json
import math
import pathlib

import torch

OUT = pathlib.Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "jepa" / "masks.json"


def sample_block_size(g, height, width, scale, aspect):
    r = torch.rand(1, generator=g).item()
    mask_scale = scale[0] + r * (scale[1] - scale[0])
    max_keep = int(height * width * mask_scale)
    aspect_ratio = aspect[0] + r * (aspect[1] - aspect[0])
    h = int(round(math.sqrt(max_keep * aspect_ratio)))
    w = int(round(math.sqrt(max_keep / aspect_ratio)))
    while h >= height:
        h -= 1
    while w >= width:
        w -= 1
    return h, w


def sample_block_mask(g, height, width, size, min_keep, acceptable=None):
    h, w = size
    tries, timeout = 0, 20
    while True:
        top = int(torch.randint(0, height - h, (1,), generator=g))
        left = int(torch.randint(0, width - w, (1,), generator=g))
        mask = torch.zeros((height, width), dtype=torch.int32)
        mask[top:top + h, left:left + w] = 1
        if acceptable is not None:
            for k in range(max(len(acceptable) - tries, 0)):
                mask *= acceptable[k]
        kept = torch.nonzero(mask.flatten()).flatten()
        if len(kept) > min_keep:
            break
        timeout -= 1
        if timeout == 0:
            tries += 1
            timeout = 20
    complement = torch.ones((height, width), dtype=torch.int32)
    complement[top:top + h, left:left + w] = 0
    return kept, complement


def collate(seed, batch, height, width, enc_scale, pred_scale, aspect, nenc, npred, min_keep, allow_overlap):
    g = torch.Generator().manual_seed(seed)
    p_size = sample_block_size(g, height, width, pred_scale, aspect)
    e_size = sample_block_size(g, height, width, enc_scale, (1.0, 1.0))
    preds, encs = [], []
    min_pred = min_enc = height * width
    for _ in range(batch):
        masks_p, masks_c = [], []
        for _ in range(npred):
            m, c = sample_block_mask(g, height, width, p_size, min_keep)
            masks_p.append(m)
            masks_c.append(c)
            min_pred = min(min_pred, len(m))
        preds.append(masks_p)
        acceptable = None if allow_overlap else masks_c
        masks_e = []
        for _ in range(nenc):
            m, _ = sample_block_mask(g, height, width, e_size, min_keep, acceptable)
            masks_e.append(m)
            min_enc = min(min_enc, len(m))
        encs.append(masks_e)
    return {
        "pred_size": list(p_size), "enc_size": list(e_size),
        "context": [[m[:min_enc].tolist() for m in ms] for ms in encs],
        "targets": [[m[:min_pred].tolist() for m in ms] for ms in preds],
    }


CASES = [
    # I-JEPA's ImageNet settings on a 7x7 grid (28x28 images, patch 4) and a 14x14 grid (patch 2)
    dict(height=7, width=7, enc_scale=[0.85, 1.0], pred_scale=[0.15, 0.2], aspect=[0.75, 1.5], nenc=1, npred=4,
         min_keep=4, allow_overlap=False, batch=6, seeds=[0, 1, 2, 7]),
    dict(height=14, width=14, enc_scale=[0.85, 1.0], pred_scale=[0.15, 0.2], aspect=[0.75, 1.5], nenc=1, npred=4,
         min_keep=10, allow_overlap=False, batch=4, seeds=[0, 3]),
    # overlap allowed, two context blocks, a non-square grid
    dict(height=6, width=9, enc_scale=[0.5, 0.7], pred_scale=[0.1, 0.3], aspect=[0.5, 2.0], nenc=2, npred=3,
         min_keep=2, allow_overlap=True, batch=3, seeds=[5]),
]


def main():
    out = []
    for case in CASES:
        settings = {k: v for k, v in case.items() if k != "seeds"}
        for seed in case["seeds"]:
            args = dict(settings)
            out.append({"settings": settings, "seed": seed,
                        **collate(seed, args.pop("batch"), args.pop("height"), args.pop("width"), **args)})
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {OUT} ({len(out)} cases)")


if __name__ == "__main__":
    main()
